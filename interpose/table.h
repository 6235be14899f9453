/* gpuguard: the live allocation table (table.c) and its records. */
#ifndef GG_TABLE_H
#define GG_TABLE_H

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
	uint32_t tid;   /* kernel thread id: 24 bits kept (Linux's PID_MAX_LIMIT is 2^22) */
	uint64_t t_ms;  /* ms since library start (40 bits kept) */
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

#endif
