/* gpuguard: the live-allocation table. Open addressing keyed by device address
 * (or handle), lock-free for any number of threads: inserts and removes never
 * wait for each other and never call malloc.
 *
 * The table grows. It is a chain of generations, each an mmap'd open-addressing
 * array twice the size of the one before (the first has GPUGUARD_TABLE_SLOTS
 * slots). Inserts go to the newest generation; when an insert finds its probe
 * run long and a sample of that generation is at least half full, it maps the
 * next generation and publishes it. Records are never moved: a record stays
 * in the generation it was inserted into until it is removed, so removes and
 * foreach probe every generation, newest first (new records die young).
 *
 * Why this stays lock-free for readers: a generation, once published, is
 * never unmapped, resized or moved while the table lives, and the chain only
 * grows at its end. A reader that loaded an older `top` simply misses
 * generations published after it started, and those hold no record it can be
 * looking for: an address is inserted before the driver's allocation returns,
 * so its free (the only remove of it) happens after the insert, whose load of
 * `top` the free's load then cannot precede (read-read coherence).
 * An insert that raced with growth and landed in the generation just
 * superseded is fine too, since every generation is probed. Growth itself is
 * one mmap and two CASes; a thread that loses the race unmaps its copy.
 *
 * The probe length stays bounded: inserts place a key within GG_TABLE_MAX_PROBE slots
 * of its home, so a remove reads at most GG_TABLE_MAX_PROBE slots per generation, and
 * there are at most GG_TABLE_MAX_GENS generations (a new one only when the newest is
 * half full of live records, so their number grows with the log of the peak
 * live count: 64Ki doubling to 2Mi holds 1M at under half full). Tombstones
 * are reused by inserts and do not trigger growth.
 *
 * When a probe run is full and growing fails (mapping refused, or the cap
 * reached), records spill into an overflow area of mmap'd blocks, scanned
 * linearly.
 *
 * A walk (foreach: dumps, pool destroys, context resets) skips the chunks
 * of CHUNK_SLOTS slots that hold nothing, by one flag per chunk: an insert
 * sets its chunk's flag when it finds it clear (one load, on a line that is
 * read-mostly), a walk clears it and sets it back where it found a record.
 * So a dumped refusal's wait follows what is live, not the table's size
 * (issue 24: 442 ms with 28 records in 4Mi slots). Removes do not touch
 * the flags: a chunk emptied since the last walk is scanned once more. */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "table.h"
#include "base.h"

#define FILL_SAMPLE 512 /* slots sampled to tell a full generation from a long run */
#define MAX_GEN_SLOTS (1ull << 40)
#define SPILL_BLOCK_SLOTS 4096
struct gg_spill_block {
	struct gg_spill_block *next; /* immutable once the block is published */
	struct gg_slot slots[SPILL_BLOCK_SLOTS];
};

static struct gg_gen *gen_map(uint64_t n)
{
	size_t head = 4096; /* keep the slot array page-aligned */
	size_t flags = (n + (1u << GG_TABLE_CHUNK_SHIFT) - 1) >> GG_TABLE_CHUNK_SHIFT;
	size_t bytes = head + n * sizeof(struct gg_slot) + flags;
	/* MAP_NORESERVE: pages cost nothing until a slot on them is first used. */
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	struct gg_gen *g = m;
	g->mask = n - 1;
	g->map_bytes = bytes;
	g->slots = (struct gg_slot *)((char *)m + head);
	g->occ = (_Atomic uint8_t *)((char *)m + head + n * sizeof(struct gg_slot));
	return g;
}

struct gg_table *gg_table_create_capped(uint64_t slots, uint64_t max_slots)
{
	uint64_t n = 64;
	while (n < slots && n < MAX_GEN_SLOTS)
		n <<= 1;
	unsigned gens = 1;
	for (uint64_t c = n; gens < GG_TABLE_MAX_GENS && c <= max_slots / 2; c <<= 1)
		gens++;
	struct gg_table *t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		return NULL;
	struct gg_gen *g = gen_map(n);
	if (!g) {
		munmap(t, sizeof(*t));
		return NULL;
	}
	/* Fresh anonymous memory is zero: every other gens[] entry is NULL. */
	atomic_init(&t->gens[0], g);
	atomic_init(&t->top, 0);
	t->max_gens = gens;
	atomic_init(&t->spilled, 0);
	atomic_init(&t->spill, NULL);
	pthread_mutex_init(&t->walk, NULL);
	return t;
}

struct gg_table *gg_table_create(uint64_t slots)
{
	return gg_table_create_capped(slots, UINT64_MAX);
}

static void free_spill(struct gg_spill_block *b)
{
	while (b) {
		struct gg_spill_block *next = b->next;
		munmap(b, sizeof(*b));
		b = next;
	}
}

void gg_table_destroy(struct gg_table *t)
{
	if (!t)
		return;
	/* acquire: see the blocks' contents as published (destroy runs alone). */
	free_spill(atomic_load_explicit(&t->spill, memory_order_acquire));
	unsigned top = gg_table_top(t);
	for (unsigned i = 0; i <= top; i++)
		munmap(gg_table_gen(t, i), gg_table_gen(t, i)->map_bytes);
	munmap(t, sizeof(*t));
}

static int spill_insert(struct gg_table *t, const struct gg_slot_words *w)
{
	/* Count first: a remover that misses the main table scans the overflow
	 * area only when this is non-zero, and it can only look for our key after
	 * our insert returned (the driver had not handed the address out before). */
	atomic_fetch_add_explicit(&t->spilled, 1, memory_order_relaxed);
	for (;;) {
		struct gg_spill_block *head = atomic_load_explicit(&t->spill, memory_order_acquire);
		for (struct gg_spill_block *b = head; b; b = b->next)
			for (int i = 0; i < SPILL_BLOCK_SLOTS; i++) {
				struct gg_slot *s = &b->slots[i];
				uint64_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
				if ((k == GG_TABLE_EMPTY || k == GG_TABLE_TOMB) && gg_table_try_fill(s, k, w))
					return 1;
			}
		struct gg_spill_block *nb =
		    mmap(NULL, sizeof(*nb), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (nb == MAP_FAILED) {
			atomic_fetch_sub_explicit(&t->spilled, 1, memory_order_relaxed);
			return -1;
		}
		/* The block is private until published, so plain writes suffice. */
		gg_table_write_payload(&nb->slots[0], w);
		atomic_init(&nb->slots[0].key, w->key);
		nb->next = head;
		/* release: the block's contents (our record, next) are visible to any
		 * thread that loads the new head with acquire. */
		if (atomic_compare_exchange_strong_explicit(&t->spill, &head, nb, memory_order_release,
		                                            memory_order_relaxed))
			return 1;
		munmap(nb, sizeof(*nb)); /* lost the race: rescan, the winner may have room */
	}
}

/* Whether generation g is at least half full of live (or claimed) slots,
 * judged from FILL_SAMPLE slots spread over it: a long probe run alone may
 * be one unlucky cluster in a roomy generation. */
static int half_full(const struct gg_gen *g, uint64_t h)
{
	uint64_t n = g->mask + 1 < FILL_SAMPLE ? g->mask + 1 : FILL_SAMPLE;
	uint64_t step = (g->mask + 1) / n, used = 0;
	for (uint64_t i = 0; i < n; i++) {
		/* relaxed: an estimate; no payload is read. */
		uint64_t k = atomic_load_explicit(&g->slots[(h + i * step) & g->mask].key, memory_order_relaxed);
		used += k != GG_TABLE_EMPTY && k != GG_TABLE_TOMB;
	}
	return used * 2 >= n;
}

/* Publishes generation top + 1 (twice gens[top]'s size) unless another
 * thread did, and moves top to it. 0 when a newer generation exists. */
static int grow(struct gg_table *t, unsigned top)
{
	if (top + 1 >= t->max_gens || gg_table_gen(t, top)->mask + 1 >= MAX_GEN_SLOTS)
		return -1;
	struct gg_gen *expect = NULL;
	/* acquire, here and in the CAS's failure order: when another thread
	 * published gens[top + 1], its mapping and header happen before our
	 * release of top below, so that a reader who acquires top from us (not
	 * from that thread) sees them too. Relaxed, the chain broke: TSan saw a
	 * reader's probe race the other thread's mmap. */
	if (!atomic_load_explicit(&t->gens[top + 1], memory_order_acquire)) {
		struct gg_gen *g = gen_map((gg_table_gen(t, top)->mask + 1) * 2);
		if (!g)
			return -1;
		/* release: the header written in gen_map is visible to whoever
		 * reads this entry after an acquire of top. */
		if (!atomic_compare_exchange_strong_explicit(&t->gens[top + 1], &expect, g, memory_order_release,
		                                             memory_order_acquire))
			munmap(g, g->map_bytes); /* another thread grew first: use its generation */
	}
	unsigned seen = top;
	/* release: gens[top + 1] (stored above, or by the thread whose store we
	 * saw) happens before any acquire load that reads the new top. A failed
	 * CAS means top already moved on. */
	atomic_compare_exchange_strong_explicit(&t->top, &seen, top + 1, memory_order_release, memory_order_relaxed);
	return 0;
}

/* The rest of an insert whose probe into generation top of t ran long
 * (d > GG_TABLE_GROW_PROBE: the record is in, growth may be due) or found no room
 * (d < 0). Apart from the fast path, so that a short probe calls nothing
 * and needs no stack frame (issue 24). */
int gg_table_insert_slow(struct gg_table *t, const struct gg_slot_words *w, uint64_t h, unsigned top, int d)
{
	for (;;) {
		struct gg_gen *g = gg_table_gen(t, top);
		if (d >= 0) {
			/* Grow now, for the inserts after this one, when the run was
			 * long because the generation is filling up. */
			if (d > GG_TABLE_GROW_PROBE && top + 1 < t->max_gens && half_full(g, h))
				grow(t, top);
			return 0;
		}
		if (grow(t, top) != 0)
			return spill_insert(t, w);
		top = gg_table_top(t);
		d = gg_table_gen_insert(gg_table_gen(t, top), h, w);
	}
}

int gg_table_insert(struct gg_table *t, const struct gg_record *rec)
{
	struct gg_slot_words w = gg_table_words(rec);
	return gg_table_insert_words(t, &w);
}

/* The rest of a remove that did not find key in the newest generation:
 * the older generations, newest first, then the overflow area. Apart from
 * the fast path, as gg_table_insert_slow. */
int gg_table_remove_slow(struct gg_table *t, uint64_t key, uint64_t h, unsigned top, struct gg_record *out)
{
	for (unsigned i = top; i-- > 0;) {
		int rc = gg_table_gen_remove(gg_table_gen(t, i), h, key, out);
		if (rc != 0)
			return rc > 0;
	}
	if (atomic_load_explicit(&t->spilled, memory_order_relaxed) == 0)
		return 0;
	/* acquire: pairs with the release CAS that published each block. */
	for (struct gg_spill_block *b = atomic_load_explicit(&t->spill, memory_order_acquire); b; b = b->next)
		for (int i = 0; i < SPILL_BLOCK_SLOTS; i++) {
			struct gg_slot *s = &b->slots[i];
			if (atomic_load_explicit(&s->key, memory_order_relaxed) == key) {
				if (!gg_table_take(s, key, out))
					return 0;
				atomic_fetch_sub_explicit(&t->spilled, 1, memory_order_relaxed);
				return 1;
			}
		}
	return 0;
}

int gg_table_remove(struct gg_table *t, uint64_t key, struct gg_record *out)
{
	return gg_table_remove_inline(t, key, out);
}

/* Calls fn for the record in s, if any; 1 when s holds or is claimed for
 * one (its chunk is not empty). */
static int visit(struct gg_slot *s, void (*fn)(const struct gg_record *, void *), void *arg)
{
	/* acquire: pairs with the inserter's release, so the payload is at least
	 * as new as this key. seq_cst: the walk's side of gg_table_mark_chunk's Dekker
	 * pair (the same load on x86-64 and aarch64). */
	uint64_t k = atomic_load_explicit(&s->key, memory_order_seq_cst);
	if (k <= GG_TABLE_BUSY)
		return k == GG_TABLE_BUSY;
	struct gg_record r;
	gg_table_read_payload(s, k, &r);
	/* acquire fence, then re-check: if a payload word came from a later owner,
	 * that owner's release fence makes its BUSY visible here and we skip. The
	 * one blind spot is the key coming back to this slot within these few
	 * loads (k freed, the slot reused, k allocated again into it): the copy
	 * may then mix fields of those records. Only a dump reads this way, and
	 * it can live with that; removes never do. */
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&s->key, memory_order_relaxed) == k)
		fn(&r, arg);
	return 1;
}

/* Every record of g, chunk by chunk, skipping chunks whose flag is clear.
 * A flagged chunk is cleared before it is scanned and flagged again if the
 * scan found anything: an insert that the scan missed (it claimed its slot
 * after the scan passed) then finds the flag clear and sets it (gg_table_mark_chunk;
 * seq_cst on both sides). Under t->walk, so no other walk reads a flag this
 * one cleared for a moment. */
static void walk_gen(struct gg_gen *g, void (*fn)(const struct gg_record *, void *), void *arg)
{
	uint64_t chunk = 1ull << GG_TABLE_CHUNK_SHIFT;
	for (uint64_t c = 0; c <= g->mask >> GG_TABLE_CHUNK_SHIFT; c++) {
		/* relaxed: a clear flag read early only means an insert not yet
		 * marked, which this walk could not have counted on seeing. */
		if (!atomic_load_explicit(&g->occ[c], memory_order_relaxed))
			continue;
		/* seq_cst: the walk's clear of the Dekker pair (see gg_table_try_fill). */
		atomic_store_explicit(&g->occ[c], 0, memory_order_seq_cst);
		uint64_t end = (c + 1) * chunk <= g->mask + 1 ? (c + 1) * chunk : g->mask + 1;
		int found = 0;
		for (uint64_t i = c * chunk; i < end; i++)
			found |= visit(&g->slots[i], fn, arg);
		if (found)
			atomic_store_explicit(&g->occ[c], 1,
			                      memory_order_relaxed); /* relaxed: as in gg_table_mark_chunk */
	}
}

void gg_table_foreach(struct gg_table *t, void (*fn)(const struct gg_record *, void *), void *arg)
{
	pthread_mutex_lock(&t->walk);
	unsigned top = gg_table_top(t);
	for (unsigned g = 0; g <= top; g++)
		walk_gen(gg_table_gen(t, g), fn, arg);
	/* acquire: pairs with the release CAS that published each block. */
	for (struct gg_spill_block *b = atomic_load_explicit(&t->spill, memory_order_acquire); b; b = b->next)
		for (int i = 0; i < SPILL_BLOCK_SLOTS; i++)
			visit(&b->slots[i], fn, arg);
	pthread_mutex_unlock(&t->walk);
}

static void count_one(const struct gg_record *r, void *arg)
{
	(void)r;
	(*(uint64_t *)arg)++;
}

uint64_t gg_table_live(struct gg_table *t)
{
	uint64_t n = 0;
	gg_table_foreach(t, count_one, &n);
	return n;
}

uint64_t gg_table_spilled(struct gg_table *t)
{
	return atomic_load_explicit(&t->spilled, memory_order_relaxed);
}

uint64_t gg_table_capacity(struct gg_table *t)
{
	uint64_t n = 0;
	unsigned top = gg_table_top(t);
	for (unsigned i = 0; i <= top; i++)
		n += gg_table_gen(t, i)->mask + 1;
	return n;
}

unsigned gg_table_generations(struct gg_table *t)
{
	return gg_table_top(t) + 1;
}

uint64_t gg_table_max_probe(struct gg_table *t)
{
	uint64_t worst = 0;
	unsigned top = gg_table_top(t);
	for (unsigned g = 0; g <= top; g++) {
		struct gg_gen *gen = gg_table_gen(t, g);
		for (uint64_t i = 0; i <= gen->mask; i++) {
			/* relaxed: a statistic of a quiescent table (tests). */
			uint64_t k = atomic_load_explicit(&gen->slots[i].key, memory_order_relaxed);
			uint64_t d = (i - gg_table_hash(k)) & gen->mask;
			if (k > GG_TABLE_BUSY && d > worst)
				worst = d;
		}
	}
	return worst;
}

void gg_table_clear_unlocked(struct gg_table *t)
{
	/* Fork child, alone: the generations past the first go, and since the
	 * mapping is private and anonymous, MADV_DONTNEED hands back zero pages,
	 * i.e. every slot EMPTY, without touching them. Relaxed throughout:
	 * no other thread exists to order against. */
	unsigned top = atomic_load_explicit(&t->top, memory_order_relaxed);
	for (unsigned i = top; i > 0; i--) {
		struct gg_gen *g = atomic_load_explicit(&t->gens[i], memory_order_relaxed);
		atomic_store_explicit(&t->gens[i], NULL, memory_order_relaxed);
		munmap(g, g->map_bytes);
	}
	atomic_store_explicit(&t->top, 0, memory_order_relaxed);
	struct gg_gen *g = atomic_load_explicit(&t->gens[0], memory_order_relaxed);
	size_t bytes = (g->mask + 1) * sizeof(struct gg_slot);
	if (madvise(g->slots, bytes, MADV_DONTNEED) != 0)
		memset(g->slots, 0, bytes);
	size_t flags = (g->mask + 1 + (1u << GG_TABLE_CHUNK_SHIFT) - 1) >> GG_TABLE_CHUNK_SHIFT;
	memset((void *)g->occ, 0, flags);
	free_spill(atomic_load_explicit(&t->spill, memory_order_relaxed));
	atomic_store_explicit(&t->spill, NULL, memory_order_relaxed);
	atomic_store_explicit(&t->spilled, 0, memory_order_relaxed);
	pthread_mutex_init(&t->walk, NULL); /* the forking thread held it, or nobody did */
}

int gg_records_push(struct gg_record **recs, size_t *n, size_t *cap, size_t first, const struct gg_record *r)
{
	if (*n == *cap) {
		/* Grown with mmap, never libc malloc: callers may run in a hook. */
		size_t nc = *cap ? *cap * 2 : first, bytes = nc * sizeof(*r);
		struct gg_record *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return -1;
		if (*recs) {
			memcpy(m, *recs, *n * sizeof(*r));
			munmap(*recs, *cap * sizeof(*r));
		}
		*recs = m;
		*cap = nc;
	}
	(*recs)[(*n)++] = *r;
	return 0;
}
