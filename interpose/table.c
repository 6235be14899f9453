/* gpuguard: the live-allocation table. Open addressing keyed by device address
 * (or handle), mapped once, lock-free for any number of threads: inserts and
 * removes never wait for each other and never call malloc. When a probe run is
 * full, records spill into an overflow area of mmap'd blocks, scanned linearly. */
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

/* Key states. Real keys are device addresses or handles, never 0..2. */
#define K_EMPTY 0ull /* never used: ends every probe run */
#define K_TOMB 1ull  /* removed: reusable by inserts, skipped by lookups */
#define K_BUSY 2ull  /* claimed by one thread while it writes or reads the payload */

#define MAX_PROBE 128 /* inserts place a key within this many slots of home */
#define SPILL_BLOCK_SLOTS 4096

/* 32 bytes, two to a cache line. Payload words are atomics only so that the
 * racy-but-validated reads in foreach are defined behaviour; the slot's owner
 * (whoever holds it BUSY) is the only writer. */
struct slot {
	_Atomic uint64_t key;
	_Atomic uint64_t size;
	_Atomic uint64_t meta; /* t_ms:40 | dev:8 | api:8 | flags:8 */
	_Atomic uint64_t ids;  /* tid:32 | ctx:16 | stack:16 (stack ids stay below 2^16, stack.c) */
};

struct spill_block {
	struct spill_block *next; /* immutable once the block is published */
	struct slot slots[SPILL_BLOCK_SLOTS];
};

struct gg_table {
	uint64_t mask;
	size_t map_bytes;
	_Atomic uint64_t spilled;          /* live records in the overflow area */
	struct spill_block *_Atomic spill; /* head of the overflow blocks */
	struct slot *slots;
};

static uint64_t hash_key(uint64_t k)
{
	/* splitmix64 finaliser: device addresses are 512 B..2 MiB aligned, so the
	 * low bits carry nothing until they are mixed. */
	k ^= k >> 30;
	k *= 0xbf58476d1ce4e5b9ull;
	k ^= k >> 27;
	k *= 0x94d049bb133111ebull;
	k ^= k >> 31;
	return k;
}

struct gg_table *gg_table_create(uint64_t slots)
{
	uint64_t n = 64;
	while (n < slots && n < (1ull << 40))
		n <<= 1;
	size_t head = 4096; /* keep the slot array page-aligned */
	size_t bytes = head + n * sizeof(struct slot);
	/* MAP_NORESERVE: pages cost nothing until a slot on them is first used. */
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	struct gg_table *t = m;
	t->mask = n - 1;
	t->map_bytes = bytes;
	t->slots = (struct slot *)((char *)m + head);
	atomic_init(&t->spilled, 0);
	atomic_init(&t->spill, NULL);
	return t;
}

static void free_spill(struct spill_block *b)
{
	while (b) {
		struct spill_block *next = b->next;
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
	munmap(t, t->map_bytes);
}

static void write_payload(struct slot *s, const struct gg_record *r)
{
	uint64_t meta = (r->t_ms & 0xffffffffffull) << 24 | (uint64_t)r->dev << 16 | (uint64_t)r->api << 8 | r->flags;
	atomic_store_explicit(&s->size, r->size, memory_order_relaxed);
	atomic_store_explicit(&s->meta, meta, memory_order_relaxed);
	uint64_t stack = r->stack <= 0xffff ? r->stack : 0;
	atomic_store_explicit(&s->ids, (uint64_t)r->tid << 32 | (uint64_t)r->ctx << 16 | stack, memory_order_relaxed);
}

static void read_payload(struct slot *s, uint64_t key, struct gg_record *r)
{
	uint64_t meta = atomic_load_explicit(&s->meta, memory_order_relaxed);
	uint64_t ids = atomic_load_explicit(&s->ids, memory_order_relaxed);
	r->key = key;
	r->size = atomic_load_explicit(&s->size, memory_order_relaxed);
	r->t_ms = meta >> 24;
	r->dev = (uint8_t)(meta >> 16);
	r->api = (uint8_t)(meta >> 8);
	r->flags = (uint8_t)meta;
	r->tid = (uint32_t)(ids >> 32);
	r->ctx = (uint16_t)(ids >> 16);
	r->stack = (uint32_t)(ids & 0xffff);
}

/* Claims slot s (EMPTY or TOMB) and publishes rec in it. 1 on success. */
static int try_fill(struct slot *s, uint64_t seen, const struct gg_record *rec)
{
	/* acquire: if the slot was a tombstone, its remover's payload reads are
	 * ordered before our payload writes (the remover's release store of TOMB). */
	if (!atomic_compare_exchange_strong_explicit(&s->key, &seen, K_BUSY, memory_order_acquire,
	                                             memory_order_relaxed))
		return 0;
	/* release fence: a foreach reader that sees one of our payload words must
	 * also see BUSY (not the old key) when it re-checks the key. */
	atomic_thread_fence(memory_order_release);
	write_payload(s, rec);
	/* release: publishes the payload to whoever loads this key with acquire. */
	atomic_store_explicit(&s->key, rec->key, memory_order_release);
	return 1;
}

static int spill_insert(struct gg_table *t, const struct gg_record *rec)
{
	/* Count first: a remover that misses the main table scans the overflow
	 * area only when this is non-zero, and it can only look for our key after
	 * our insert returned (the driver had not handed the address out before). */
	atomic_fetch_add_explicit(&t->spilled, 1, memory_order_relaxed);
	for (;;) {
		struct spill_block *head = atomic_load_explicit(&t->spill, memory_order_acquire);
		for (struct spill_block *b = head; b; b = b->next)
			for (int i = 0; i < SPILL_BLOCK_SLOTS; i++) {
				struct slot *s = &b->slots[i];
				uint64_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
				if ((k == K_EMPTY || k == K_TOMB) && try_fill(s, k, rec))
					return 1;
			}
		struct spill_block *nb =
		    mmap(NULL, sizeof(*nb), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (nb == MAP_FAILED) {
			atomic_fetch_sub_explicit(&t->spilled, 1, memory_order_relaxed);
			return -1;
		}
		/* The block is private until published, so plain writes suffice. */
		write_payload(&nb->slots[0], rec);
		atomic_init(&nb->slots[0].key, rec->key);
		nb->next = head;
		/* release: the block's contents (our record, next) are visible to any
		 * thread that loads the new head with acquire. */
		if (atomic_compare_exchange_strong_explicit(&t->spill, &head, nb, memory_order_release,
		                                            memory_order_relaxed))
			return 1;
		munmap(nb, sizeof(*nb)); /* lost the race: rescan, the winner may have room */
	}
}

int gg_table_insert(struct gg_table *t, const struct gg_record *rec)
{
	if (rec->key <= K_BUSY)
		return -1;
	uint64_t h = hash_key(rec->key);
	for (uint64_t i = 0; i < MAX_PROBE; i++) {
		struct slot *s = &t->slots[(h + i) & t->mask];
		uint64_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
		if (k == K_EMPTY || k == K_TOMB) {
			if (try_fill(s, k, rec))
				return 0;
			i--; /* lost the slot to another insert: look at it again */
		}
	}
	return spill_insert(t, rec);
}

/* Takes key out of slot s if s holds it. 1 = removed (payload in *out). */
static int try_take(struct slot *s, uint64_t key, struct gg_record *out)
{
	uint64_t k = key;
	/* acquire: pairs with the inserter's release store of the key, so the
	 * payload we read below is the one written for this key. Going through
	 * BUSY means a racing double free cannot take the record twice, and no
	 * insert can reuse the slot before we have read it. */
	if (!atomic_compare_exchange_strong_explicit(&s->key, &k, K_BUSY, memory_order_acquire, memory_order_relaxed))
		return 0;
	read_payload(s, key, out);
	/* release: our payload reads happen before the next owner's writes. */
	atomic_store_explicit(&s->key, K_TOMB, memory_order_release);
	return 1;
}

int gg_table_remove(struct gg_table *t, uint64_t key, struct gg_record *out)
{
	if (key <= K_BUSY)
		return 0;
	uint64_t h = hash_key(key);
	for (uint64_t i = 0; i < MAX_PROBE; i++) {
		struct slot *s = &t->slots[(h + i) & t->mask];
		uint64_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
		if (k == K_EMPTY)
			break; /* EMPTY never comes back, so the key is not further on */
		if (k == key)
			return try_take(s, key, out);
	}
	if (atomic_load_explicit(&t->spilled, memory_order_relaxed) == 0)
		return 0;
	/* acquire: pairs with the release CAS that published each block. */
	for (struct spill_block *b = atomic_load_explicit(&t->spill, memory_order_acquire); b; b = b->next)
		for (int i = 0; i < SPILL_BLOCK_SLOTS; i++) {
			struct slot *s = &b->slots[i];
			if (atomic_load_explicit(&s->key, memory_order_relaxed) == key) {
				if (!try_take(s, key, out))
					return 0;
				atomic_fetch_sub_explicit(&t->spilled, 1, memory_order_relaxed);
				return 1;
			}
		}
	return 0;
}

static void visit(struct slot *s, void (*fn)(const struct gg_record *, void *), void *arg)
{
	/* acquire: pairs with the inserter's release, so the payload is at least
	 * as new as this key. */
	uint64_t k = atomic_load_explicit(&s->key, memory_order_acquire);
	if (k <= K_BUSY)
		return;
	struct gg_record r;
	read_payload(s, k, &r);
	/* acquire fence, then re-check: if a payload word came from a later owner,
	 * that owner's release fence makes its BUSY visible here and we skip. The
	 * one blind spot is the key coming back to this slot within these few
	 * loads (k freed, the slot reused, k allocated again into it): the copy
	 * may then mix fields of those records. Only a dump reads this way, and
	 * it can live with that; removes never do. */
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&s->key, memory_order_relaxed) == k)
		fn(&r, arg);
}

void gg_table_foreach(struct gg_table *t, void (*fn)(const struct gg_record *, void *), void *arg)
{
	for (uint64_t i = 0; i <= t->mask; i++)
		visit(&t->slots[i], fn, arg);
	/* acquire: pairs with the release CAS that published each block. */
	for (struct spill_block *b = atomic_load_explicit(&t->spill, memory_order_acquire); b; b = b->next)
		for (int i = 0; i < SPILL_BLOCK_SLOTS; i++)
			visit(&b->slots[i], fn, arg);
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
	return t->mask + 1;
}

void gg_table_clear_unlocked(struct gg_table *t)
{
	/* Fork child: the mapping is private and anonymous, so MADV_DONTNEED
	 * hands back zero pages, i.e. every slot EMPTY, without touching them. */
	size_t bytes = (t->mask + 1) * sizeof(struct slot);
	if (madvise(t->slots, bytes, MADV_DONTNEED) != 0)
		memset(t->slots, 0, bytes);
	free_spill(atomic_load_explicit(&t->spill, memory_order_relaxed));
	atomic_store_explicit(&t->spill, NULL, memory_order_relaxed);
	atomic_store_explicit(&t->spilled, 0, memory_order_relaxed);
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
