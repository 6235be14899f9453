/* gpuguard: stream-ordered pools (pool.c), charged by what they reserve. */
#ifndef GG_POOL_H
#define GG_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "ceiling.h"
#include "table.h"

/* Stream-ordered pools are charged by what they reserve (DESIGN.md §2). */
/* Reads a pool's reserve and, when used is not NULL, what is in use. 0 or -1. */
typedef int (*gg_pool_reserved_fn)(void *pool, uint64_t *reserved, uint64_t *used);
struct gg_pool;
#define GG_POOL_REFUSED UINT64_MAX
/* Finds or registers pool handle on dev. NULL when the registry is full
 * (65536 pools) or out of memory. */
struct gg_pool *gg_pool_get(void *handle, int dev, gg_pool_reserved_fn query);
/* Call before asking the pool for `size` bytes. Returns GG_POOL_REFUSED past
 * the ceiling (counted and dumped); otherwise the bytes it reserved, with the pool's lock held
 * until gg_pool_end. 0 means the request goes to the pool's warm reserve,
 * unreserved: end it with gg_pool_end_warm (or, when the runtime's call
 * failed, gg_pool_end with 0). */
uint64_t gg_pool_begin(struct gg_pool *p, uint64_t size, uint64_t *reserve_before);
/* How gg_pool_begin admits a request past the ceiling: gg_account_begin,
 * which sits above this file; set by init.c. 0 = reserved. */
typedef int (*gg_pool_admit_fn)(int dev, uint64_t charge);
void gg_pool_set_admit(gg_pool_admit_fn fn);
int gg_pool_grew(struct gg_pool *p, uint64_t reserve_before);
/* By how much the pool's reserve grew past reserve_before (0: not, or the
 * driver cannot tell). */
uint64_t gg_pool_growth(struct gg_pool *p, uint64_t reserve_before);
/* After the driver call: re-reads the pool's reserve, charges the change, and
 * gives back the `reserved` bytes begin() took. Drops the lock. */
void gg_pool_end(struct gg_pool *p, uint64_t reserved);
/* After a warm request (begin returned 0) the runtime served: re-reads the
 * reserve once; a growth against reserve_before is charged if it fits.
 * GG_VERDICT_GRANTED: settled, lock dropped. Else the reservation's
 * refusal: the growth (*grown) does not fit; the lock is still held, and the
 * caller undoes the growth, refuses under the verdict's reason, then calls
 * gg_pool_end. */
enum gg_verdict gg_pool_end_warm(struct gg_pool *p, uint64_t reserve_before, uint64_t *grown);
/* At a synchronisation point (cuStreamSynchronize, cuCtxSynchronize,
 * cuEventSynchronize, HIP's): pools give back reserve above their release
 * threshold there, so every pool holding a charge is re-read and the memory
 * credited at once, for every process of the pod (issue 9, finding 3). A
 * load and a return when no pool was ever seen. */
void gg_pool_sync_point(void);
/* Re-reads every pool of dev (before a refusal, and for memory info). */
void gg_pool_reconcile_device(int dev);
void gg_pool_reconcile(struct gg_pool *p);
/* After a reset or destroy on dev: pools that are gone are forgotten, the
 * others (a default pool, emptied) settle to what they reserve now. */
void gg_pool_after_reset(int dev);
/* The pool was destroyed: give back all it held. */
void gg_pool_forget(void *handle);
/* 1 when device pointer ptr was allocated from pool, 0 when not, -1 when
 * the driver cannot say. */
typedef int (*gg_pool_owner_fn)(uint64_t ptr, void *pool);
/* Trims pool to nothing (what destroying it releases); 0 or -1. */
typedef int (*gg_pool_trim_fn)(void *pool);
/* Around the driver's destroy of a pool: begin trims a pool with live
 * blocks and lists them (owner says which records are its own); end, when
 * the driver destroyed it (ok), keeps what the pool still holds charged
 * until the last listed block is freed, and refunds the rest. Without
 * owner, or out of memory for the list, what it holds stays charged. */
struct gg_pool_doom {
	struct gg_record *recs;
	size_t n, cap;
	uint64_t hold; /* what the pool holds with its blocks live */
	int live;      /* the pool had blocks live at begin */
	int lost;      /* some block could not be listed */
};
void gg_pool_destroy_begin(void *handle, gg_pool_owner_fn owner, gg_pool_trim_fn trim, struct gg_pool_doom *d);
void gg_pool_destroy_end(void *handle, struct gg_pool_doom *d, int ok);
/* A destroyed pool's blocks are flagged by taking each record out of the
 * table and putting it back (gg_pool_destroy_end, under its lock); this
 * count is odd meanwhile. A free that finds no record while it moved
 * waits for the flagging (gg_pool_flagging_wait) and looks again, so it is
 * not taken for an untracked free that leaves the pool charged. */
extern _Atomic uint64_t gg_pool_flag_gen __attribute__((visibility("hidden"))); /* as defined: read in place */
void gg_pool_flagging_wait(void);
/* A record with GG_REC_POOL_GONE was freed (account.c). */
void gg_pool_gone_block_freed(uint64_t key);
int gg_pool_device(void *handle);
void gg_pool_reset(void);
/* A device's current pool (what cuMemAllocAsync draws from) is cached per
 * thread by the hooks (hook_cuda.c's device_pool), valid while this count
 * has not moved. It moves after everything we see that can change a
 * current pool: cuDeviceSetMemPool, cuMemSetMemPool, a pool's destroy
 * (its device's default pool becomes current again), a context's reset or
 * destroy, and fork. gg_pool_current_changed moves it. */
extern _Atomic uint32_t gg_pool_current_gen;
void gg_pool_current_changed(void);

/* One thread's cached current pool of one device (the hooks' device_pool,
 * in hook_cuda.c and hook_hip.c, each with its own thread-local cache):
 * trusted while the count above has not moved, and asked for again every
 * GG_POOL_RECHECK requests, for a path no hook sees. */
#define GG_POOL_RECHECK 256
struct gg_pool_cache {
	void *pool; /* NULL: nothing cached */
	uint32_t gen;
	int16_t dev;
	uint16_t left; /* requests until the driver is asked again */
};
/* The cached pool of dev, or NULL: then ask the driver, and put its
 * answer with *gen, the count loaded before the question. */
static inline void *gg_pool_cache_get(struct gg_pool_cache *c, int dev, uint32_t *gen)
{
	/* acquire: pairs with the release in gg_pool_current_changed, and keeps
	 * the caller's question to the driver after this load. */
	*gen = atomic_load_explicit(&gg_pool_current_gen, memory_order_acquire);
	if (GG_LIKELY(c->pool && c->dev == dev && c->gen == *gen && c->left != 0)) {
		c->left--;
		return c->pool;
	}
	return NULL;
}
/* gen was loaded before the question: a change that lands after it moves
 * the count, so this answer is not trusted past it. */
static inline void gg_pool_cache_put(struct gg_pool_cache *c, void *pool, int dev, uint32_t gen)
{
	*c = (struct gg_pool_cache){pool, gen, (int16_t)dev, GG_POOL_RECHECK};
}

#endif
