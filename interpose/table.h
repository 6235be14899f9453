/* gpuguard: the live allocation table (table.c) and its records. */
#ifndef GG_TABLE_H
#define GG_TABLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* Key namespaces: device pointers, VMM handles and array handles could share
 * numeric values, so the top two bits of a key say which one it is. */
enum gg_key_ns { GG_NS_PTR = 0, GG_NS_VMM = 1, GG_NS_ARRAY = 2, GG_NS_MIPMAP = 3 };
static inline uint64_t gg_key(enum gg_key_ns ns, uint64_t raw)
{
	return raw ^ ((uint64_t)ns << 62);
}

#define GG_REC_CHARGED 0x1   /* the record's charge was added to its device's `used` */
#define GG_REC_HOST 0x2      /* pinned host memory: never charged, not a device allocation */
#define GG_REC_POOL_GONE 0x4 /* a block of a destroyed pool, which holds its memory till the last such free */
#define GG_REC_FREE_SAID \
	0x8 /* on a record taken out for a free: its history event is claimed (account.c); never in the table */
/* On a free's record (struct gg_free, shape.h): no record was found; never
 * in the table. */
#define GG_REC_NONE 0x20
/* With GG_REC_CHARGED: the charge is the requested size (a power-of-two
 * small block, a 2 MiB multiple, a VMM handle), so a free refunds `size`
 * without working the charge rule out again (account.h, issue 24). */
#define GG_REC_CHARGE_IS_SIZE 0x10
/* Pinned host pointers share the table under GG_NS_PTR with this bit set:
 * user-space addresses stay below 2^47, so it cannot meet a device pointer. */
#define GG_HOST_KEY_BIT (1ull << 61)

/* One live allocation, as handed to and from the table. Bytes 16..23 are
 * the slot's meta word as they stand (table.c), so a record goes in and
 * comes out of its slot by whole-word copies where the byte order is
 * little-endian (issue 24: the insert repacked 9 fields and the remove
 * unpacked them, about 30 instructions a pair). */
struct gg_record {
	uint64_t key;
	uint64_t size; /* requested bytes */
	uint16_t ctx;  /* context id (ctx.c), 0 = none known */
	uint8_t dev;
	uint8_t api;    /* enum gpuguard_api */
	uint8_t flags;  /* GG_REC_* */
	uint8_t spare;  /* kept by the table, read by nobody */
	uint16_t stack; /* stack id, 0 = none (stack.c hands out fewer than 2^15) */
	/* The slot's ids word as it stands (gg_table_ids): the kernel thread
	 * id's low 24 bits (Linux's PID_MAX_LIMIT is 2^22) under the ms since
	 * library start (40 bits), read with gg_record_tid and gg_record_t_ms.
	 * Packed, so that a free's copy of its record does not split a word
	 * only a dump or a refused free's put-back reads (issue 24: 4
	 * instructions a pair). */
	uint64_t ids;
};

struct gg_table;
/* Maps a table whose first generation has `slots` slots (rounded up to a
 * power of two); it grows by doubling generations as it fills (table.c).
 * NULL if mmap fails. Lock-free for any number of threads. */
struct gg_table *gg_table_create(uint64_t slots);
/* The same, growing to at most max_slots in its newest generation: past
 * that, records spill to the overflow area (tests). */
struct gg_table *gg_table_create_capped(uint64_t slots, uint64_t max_slots);
void gg_table_destroy(struct gg_table *t);
/* 0 = inserted in the main table, 1 = spilled to the overflow area,
 * -1 = not recorded (no memory for the overflow area). */
int gg_table_insert(struct gg_table *t, const struct gg_record *rec);
/* Removes key; copies the record to *out. 1 if found, 0 if not. */
int gg_table_remove(struct gg_table *t, uint64_t key, struct gg_record *out);
/* Calls fn on a consistent copy of each live record (weakly consistent
 * snapshot: records inserted or removed meanwhile may or may not be seen). */
void gg_table_foreach(struct gg_table *t, void (*fn)(const struct gg_record *, void *), void *arg);
uint64_t gg_table_live(struct gg_table *t);
uint64_t gg_table_spilled(struct gg_table *t);
uint64_t gg_table_capacity(struct gg_table *t); /* slots in all generations */
unsigned gg_table_generations(struct gg_table *t);
/* The farthest any live record sits from its home slot (tests). */
uint64_t gg_table_max_probe(struct gg_table *t);
/* Empties the table in a fork child, where no other thread exists. */
void gg_table_clear_unlocked(struct gg_table *t);
/* Appends r to an array grown with mmap (first entries, then doubling), for
 * lists a hook builds (pool destroy, context reset). 0, or -1 when full. */
int gg_records_push(struct gg_record **recs, size_t *n, size_t *cap, size_t first, const struct gg_record *r);

/* ---- The insert's fast path, inline in the commit (issue 24: the
 * commit built a record in memory and called the insert, which read it
 * back; inline, the record's words go from registers into the slot).
 * What follows (and the remove's fast path after it) is table.c's: nothing
 * else reads these structures. ---- */

/* Key states. Real keys are device addresses or handles, never 0..2. */
#define GG_TABLE_EMPTY 0ull /* never used: ends every probe run */
#define GG_TABLE_TOMB 1ull  /* removed: reusable by inserts, skipped by lookups */
#define GG_TABLE_BUSY 2ull  /* claimed by one thread while it writes or reads the payload */

#define GG_TABLE_MAX_PROBE 128 /* inserts place a key within this many slots of home */
#define GG_TABLE_GROW_PROBE 24 /* a probe run this long makes an insert check the fill */
#define GG_TABLE_MAX_GENS 32   /* generations, never more than 2^40 slots each (table.c) */
#define GG_TABLE_CHUNK_SHIFT                                                     \
	7 /* 128 slots, one 4 KiB page, per occupancy flag: a walk never touches \
	   * a page no insert touched (a first touch costs more than the scan) */

/* 32 bytes, two to a cache line. Payload words are atomics only so that the
 * racy-but-validated reads in foreach are defined behaviour; the slot's owner
 * (whoever holds it BUSY) is the only writer. */
struct gg_slot {
	_Atomic uint64_t key;
	_Atomic uint64_t size;
	_Atomic uint64_t meta; /* stack:16 | spare:8 | flags:8 | api:8 | dev:8 | ctx:16 (see gg_table_write_payload) */
	_Atomic uint64_t ids;  /* t_ms:40 | tid:24 */
};

/* One generation: a page of header, then the page-aligned slot array. The
 * header is written before the generation is published and never after. */
struct gg_gen {
	uint64_t mask;
	size_t map_bytes;
	struct gg_slot *slots;
	_Atomic uint8_t *occ; /* one flag per chunk, after the slots: 1 = may hold a record */
};

struct gg_spill_block;
struct gg_table {
	/* First: gens[top]'s address is then the table's plus top * 8, one
	 * load with no add before it (issue 24: one instruction each in the
	 * insert and the remove). */
	struct gg_gen *_Atomic gens[GG_TABLE_MAX_GENS]; /* [0..top] published, never unpublished */
	_Atomic unsigned top;                           /* index of the newest generation */
	unsigned max_gens;                              /* growth stops here (gg_table_create_capped) */
	_Atomic uint64_t spilled;                       /* live records in the overflow area */
	struct gg_spill_block *_Atomic spill;           /* head of the overflow blocks */
	/* One walk at a time: a walk clears chunk flags while it scans, which
	 * another walk must not take for empty chunks. Walks are rare. */
	pthread_mutex_t walk;
};

static inline uint64_t gg_table_hash(uint64_t k)
{
	/* wyhash's mix: the 128-bit product of the key xored with two odd
	 * constants, its halves folded. 7 instructions on x86-64 where
	 * splitmix64's finaliser took 14, twice per pair (issue 24). Device
	 * addresses are 512 B..2 MiB aligned: the high half of the product
	 * carries every bit of the key into the low bits the slot index is
	 * taken from, and the product of two key-dependent factors scatters a
	 * run of aligned addresses as a random function would. A product with
	 * one constant did not: a run's slots came out evenly spaced, so
	 * probes stayed short until a generation was three quarters full,
	 * growth came late, and the growth test's bounds failed (its slower
	 * size: 65 472 slots for 50 000 keys; probe runs of 54 to 62 where
	 * splitmix64 and this have 35 to 42). */
	unsigned __int128 p = (unsigned __int128)(k ^ 0xa0761d6478bd642full) * (k ^ 0xe7037ed1a0b428dbull);
	return (uint64_t)p ^ (uint64_t)(p >> 64);
}

/* The generations [0..top], for a reader. */
static inline unsigned gg_table_top(struct gg_table *t)
{
	/* acquire: pairs with the release CAS in grow, so gens[0..top] and each
	 * generation's header are visible. */
	return atomic_load_explicit(&t->top, memory_order_acquire);
}

static inline struct gg_gen *gg_table_gen(struct gg_table *t, unsigned i)
{
	/* relaxed: gens[i] for i <= top was stored before top's release and read
	 * after top's acquire (gg_table_top), and never changes afterwards. */
	return atomic_load_explicit(&t->gens[i], memory_order_relaxed);
}

/* A record's meta word (bytes 16..23: ctx | dev << 16 | api << 24 |
 * flags << 32 | spare << 40 | stack << 48) is the slot's as it stands where
 * the byte order is little-endian (x86-64, aarch64): one load and one store
 * each way. Elsewhere it is packed field by field (tested by forcing that
 * form). The ids word is tid's low 24 bits under t_ms's 40: t_ms in one
 * piece, so neither side splits it (issue 24). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && !defined(GG_TABLE_FIELDWISE)
_Static_assert(offsetof(struct gg_record, ctx) == 16 && offsetof(struct gg_record, dev) == 18 &&
                   offsetof(struct gg_record, api) == 19 && offsetof(struct gg_record, flags) == 20 &&
                   offsetof(struct gg_record, spare) == 21 && offsetof(struct gg_record, stack) == 22,
               "gg_table_words reads struct gg_record's bytes 16..23 as the slot's meta word");
#define GG_TABLE_REC_WORDS 1
#else
#define GG_TABLE_REC_WORDS 0
#endif
#define GG_TABLE_TID_MASK 0xffffffull
#define GG_TABLE_TID_BITS 24

/* A record as its slot's four words: what an insert stores (issue 24:
 * commit builds these in registers, so that its record never goes
 * through memory on the way into the slot). */
struct gg_slot_words {
	uint64_t key, size, meta, ids;
};
/* The meta word of the fields as a record holds them. */
static inline uint64_t gg_table_meta(uint16_t ctx, uint8_t dev, uint8_t api, uint8_t flags, uint8_t spare,
                                     uint16_t stack)
{
	return (uint64_t)stack << 48 | (uint64_t)spare << 40 | (uint64_t)flags << 32 | (uint64_t)api << 24 |
	       (uint64_t)dev << 16 | ctx;
}
/* The ids word of a thread id and a time. */
static inline uint64_t gg_table_ids(uint32_t tid, uint64_t t_ms)
{
	return (tid & GG_TABLE_TID_MASK) | t_ms << GG_TABLE_TID_BITS;
}
/* A record's thread id and time, from its ids word. */
static inline uint32_t gg_record_tid(const struct gg_record *r)
{
	return (uint32_t)(r->ids & GG_TABLE_TID_MASK);
}
static inline uint64_t gg_record_t_ms(const struct gg_record *r)
{
	return r->ids >> GG_TABLE_TID_BITS;
}
static inline __attribute__((always_inline)) struct gg_slot_words gg_table_words(const struct gg_record *r)
{
	struct gg_slot_words w;
	w.key = r->key;
	w.size = r->size;
#if GG_TABLE_REC_WORDS
	__builtin_memcpy(&w.meta, (const char *)r + offsetof(struct gg_record, ctx), 8);
#else
	w.meta = gg_table_meta(r->ctx, r->dev, r->api, r->flags, r->spare, r->stack);
#endif
	w.ids = r->ids;
	return w;
}

static inline __attribute__((always_inline)) void gg_table_write_payload(struct gg_slot *s,
                                                                         const struct gg_slot_words *w)
{
	atomic_store_explicit(&s->size, w->size, memory_order_relaxed);
	atomic_store_explicit(&s->meta, w->meta, memory_order_relaxed);
	atomic_store_explicit(&s->ids, w->ids, memory_order_relaxed);
}

/* Claims slot s (EMPTY or TOMB) and publishes w in it. 1 on success.
 * Always inline (a call less per insert, issue 24), except under
 * ThreadSanitizer: gcc refuses the release fence below there once it is
 * inlined anywhere (-Wtsan: "atomic_thread_fence is not supported"), and
 * with one caller in a file (account.c's commit) it would be. */
#ifdef __SANITIZE_THREAD__
#define GG_TABLE_TRY_FILL_INLINE static __attribute__((noinline, unused))
#else
#define GG_TABLE_TRY_FILL_INLINE static inline __attribute__((always_inline))
#endif
GG_TABLE_TRY_FILL_INLINE int gg_table_try_fill(struct gg_slot *s, uint64_t seen, const struct gg_slot_words *w)
{
	/* acquire: if the slot was a tombstone, its remover's payload reads are
	 * ordered before our payload writes (the remover's release store of TOMB).
	 * seq_cst: the claim and the chunk flag's load after it (gg_table_mark_chunk)
	 * are one side of a Dekker pair with a walk's clear of the flag and its
	 * loads of the keys: either the walk sees our claim or we see its clear.
	 * On x86-64 the same instruction as acquire. */
	if (!atomic_compare_exchange_strong_explicit(&s->key, &seen, GG_TABLE_BUSY, memory_order_seq_cst,
	                                             memory_order_relaxed))
		return 0;
	/* release fence: a foreach reader that sees one of our payload words must
	 * also see BUSY (not the old key) when it re-checks the key. */
	atomic_thread_fence(memory_order_release);
	gg_table_write_payload(s, w);
	/* release: publishes the payload to whoever loads this key with acquire. */
	atomic_store_explicit(&s->key, w->key, memory_order_release);
	return 1;
}

/* Slot i of g holds a record now: its chunk's flag is set, unless it is
 * already (the common case: one load of a read-mostly line). */
static inline __attribute__((always_inline)) void gg_table_mark_chunk(struct gg_gen *g, uint64_t i)
{
	_Atomic uint8_t *f = &g->occ[i >> GG_TABLE_CHUNK_SHIFT];
	/* seq_cst: after gg_table_try_fill's seq_cst claim (the Dekker pair there). */
	if (GG_UNLIKELY(!atomic_load_explicit(f, memory_order_seq_cst)))
		atomic_store_explicit(f, 1, memory_order_relaxed); /* relaxed: only ever 0 or 1, see walk_gen */
}

/* Probes g for a free slot from h and fills it with w: the probe distance,
 * or -1 when no slot within GG_TABLE_MAX_PROBE is free. */
static inline __attribute__((always_inline)) int gg_table_gen_insert(struct gg_gen *g, uint64_t h,
                                                                     const struct gg_slot_words *w)
{
	for (int i = 0; i < GG_TABLE_MAX_PROBE; i++) {
		uint64_t at = (h + (uint64_t)i) & g->mask;
		struct gg_slot *s = &g->slots[at];
		uint64_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
		if (k == GG_TABLE_EMPTY || k == GG_TABLE_TOMB) {
			if (gg_table_try_fill(s, k, w)) {
				gg_table_mark_chunk(g, at);
				return i;
			}
			i--; /* lost the slot to another insert: look at it again */
		}
	}
	return -1;
}

/* The rest of an insert whose probe into generation top ran long (d >
 * GG_TABLE_GROW_PROBE: the record is in, growth may be due) or found no
 * room (d < 0): growth, the overflow area (table.c). */
int gg_table_insert_slow(struct gg_table *t, const struct gg_slot_words *w, uint64_t h, unsigned top, int d);
/* The insert of a record given as its slot's words (gg_table_insert's
 * answers). w's own address never leaves the caller: the slow path gets a
 * copy, so that a caller's words can stay in registers. */
static inline __attribute__((always_inline)) int gg_table_insert_words(struct gg_table *t,
                                                                       const struct gg_slot_words *w)
{
	if (GG_UNLIKELY(w->key <= GG_TABLE_BUSY))
		return -1;
	uint64_t h = gg_table_hash(w->key);
	unsigned top = gg_table_top(t);
	int d = gg_table_gen_insert(gg_table_gen(t, top), h, w);
	if (GG_LIKELY((unsigned)d <= GG_TABLE_GROW_PROBE)) /* d >= 0 and short: no growth to weigh */
		return 0;
	struct gg_slot_words slow = *w;
	return gg_table_insert_slow(t, &slow, h, top, d);
}

/* ---- The remove's fast path, inline in the free hooks (issue 24: a call,
 * its frame and its arguments on every free). ---- */

static inline __attribute__((always_inline)) void gg_table_read_payload(struct gg_slot *s, uint64_t key,
                                                                        struct gg_record *r)
{
	uint64_t meta = atomic_load_explicit(&s->meta, memory_order_relaxed);
	uint64_t ids = atomic_load_explicit(&s->ids, memory_order_relaxed);
	r->key = key;
	r->size = atomic_load_explicit(&s->size, memory_order_relaxed);
#if GG_TABLE_REC_WORDS
	__builtin_memcpy((char *)r + offsetof(struct gg_record, ctx), &meta, 8);
#else
	r->ctx = (uint16_t)meta;
	r->dev = (uint8_t)(meta >> 16);
	r->api = (uint8_t)(meta >> 24);
	r->flags = (uint8_t)(meta >> 32);
	r->spare = (uint8_t)(meta >> 40);
	r->stack = (uint16_t)(meta >> 48);
#endif
	r->ids = ids;
}

/* Takes key out of slot s if s holds it. 1 = removed (payload in *out). */
static inline __attribute__((always_inline)) int gg_table_take(struct gg_slot *s, uint64_t key, struct gg_record *out)
{
	uint64_t k = key;
	/* acquire: pairs with the inserter's release store of the key, so the
	 * payload we read below is the one written for this key. Going through
	 * BUSY means a racing double free cannot take the record twice, and no
	 * insert can reuse the slot before we have read it. */
	if (!atomic_compare_exchange_strong_explicit(&s->key, &k, GG_TABLE_BUSY, memory_order_acquire,
	                                             memory_order_relaxed))
		return 0;
	gg_table_read_payload(s, key, out);
	/* release: our payload reads happen before the next owner's writes. */
	atomic_store_explicit(&s->key, GG_TABLE_TOMB, memory_order_release);
	return 1;
}

/* Removes key from generation g. 1 = removed, 0 = not there, -1 = found
 * but taken by someone else first (a racing double free). */
static inline __attribute__((always_inline)) int gg_table_gen_remove(struct gg_gen *g, uint64_t h, uint64_t key,
                                                                     struct gg_record *out)
{
	for (int i = 0; i < GG_TABLE_MAX_PROBE; i++) {
		struct gg_slot *s = &g->slots[(h + (uint64_t)i) & g->mask];
		/* relaxed: gg_table_take's acquire CAS is what orders the payload. */
		uint64_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
		if (k == GG_TABLE_EMPTY)
			return 0; /* EMPTY never comes back, so the key is not further on */
		if (k == key)
			return gg_table_take(s, key, out) ? 1 : -1;
	}
	return 0;
}

/* The rest of a remove that did not find key in generation top (h: its
 * hash): the older generations, newest first, then the overflow area
 * (table.c). Apart, so that the inline part calls nothing else. */
int gg_table_remove_slow(struct gg_table *t, uint64_t key, uint64_t h, unsigned top, struct gg_record *out);
/* The remove's fast part alone: 1 = removed; 0 = not in the newest
 * generation, *top, where gg_table_remove_slow goes on with *h; -1 = no
 * record to remove (found but taken by another remove first, or a key
 * that is a slot state). Its caller then makes one call for all that is
 * left of a miss, so that nothing it holds lives across two calls. */
static inline __attribute__((always_inline)) int gg_table_remove_fast(struct gg_table *t, uint64_t key,
                                                                      struct gg_record *out, uint64_t *h, unsigned *top)
{
	if (GG_UNLIKELY(key <= GG_TABLE_BUSY))
		return -1;
	*h = gg_table_hash(key);
	/* Newest generation first: most frees are of recent allocations,
	 * and a table that never grew has only this one. */
	*top = gg_table_top(t);
	return gg_table_gen_remove(gg_table_gen(t, *top), *h, key, out);
}
static inline __attribute__((always_inline)) int gg_table_remove_inline(struct gg_table *t, uint64_t key,
                                                                        struct gg_record *out)
{
	uint64_t h;
	unsigned top;
	int rc = gg_table_remove_fast(t, key, out, &h, &top);
	if (GG_LIKELY(rc != 0))
		return rc > 0;
	return gg_table_remove_slow(t, key, h, top, out);
}

#endif
