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
#define GG_POOL_REFUSED UINT64_MAX
#define GG_POOL_DEAD ((void *)1) /* a destroyed pool's entry */

/* A pool's entry in the registry (pool.c). Here, not in pool.c, so that a
 * warm request's begin and end run inline in the hook (issue 24: two
 * calls, their frames and saved registers less on every stream-ordered
 * request); only pool.c and these inlines touch its fields. */
struct gg_pool {
	/* Held across one allocation's driver call: 0 free, 1 held, 2 held
	 * with a waiter (a futex, not a pthread mutex: the pair takes it once,
	 * and glibc's lock and unlock were ~40 instructions of it, issue 24).
	 * All zero is free, so a fresh or reset entry needs no init. First:
	 * its address is the entry's, one register across the driver call,
	 * not two (issue 24). */
	_Atomic uint32_t lock;
	int dev;
	void *_Atomic handle; /* NULL = free entry, GG_POOL_DEAD = destroyed */
	gg_pool_reserved_fn query;
	/* Reads of the reserve skipped after warm requests (under lock only,
	 * see gg_pool_may_skip_read): how many since the last read, and (in
	 * room_want, below) the growth they could have caused. */
	uint32_t unread;
	uint64_t charged; /* reserve we charged; written under lock only */
	/* What the pool's blocks take, at most (under lock only): the driver's
	 * USED_MEM_CURRENT when last read, plus every request since (a block
	 * in the reserve: the request rounded to 512 B, counted as its size +
	 * 511 B, which is never less: an add, not a rounding, issue 24). Frees go to the
	 * driver without our lock and only lower the true figure, so this
	 * stays an upper bound, and charged (the reserve at its last read)
	 * is at least the true reserve, which only a request of ours raises.
	 * So charged - used_est is at most the true free reserve: a request
	 * that fits it is warm without asking the driver (issue 24). Until
	 * the first read it is UINT64_MAX (gg_pool_get), which no request
	 * fits: one compare, not a flag and two. */
	uint64_t used_est;
	/* The room the ceiling must have for the next warm request to skip
	 * its read (under lock only): GG_CEILING_NEAR plus the growth the
	 * skipped requests since the last read could have caused. NEAR is in
	 * it from the read (pool.c's read_done), not added at each request:
	 * one add less (issue 24). */
	uint64_t room_want;
};

/* The pool lock (the entry's lock word). acquire on taking it, release on
 * giving it back: the pool's charged, used_est, unread and unseen, written
 * under it, are ordered between one holder and the next. Private futex:
 * the registry is this process's own memory. */
void gg_pool_lock_slow(struct gg_pool *p, uint32_t c);
void gg_pool_unlock_wake(struct gg_pool *p);
static inline void gg_pool_lock(struct gg_pool *p)
{
	uint32_t c = 0;
	if (GG_UNLIKELY(
	        !atomic_compare_exchange_strong_explicit(&p->lock, &c, 1, memory_order_acquire, memory_order_relaxed)))
		gg_pool_lock_slow(p, c);
}
static inline void gg_pool_unlock(struct gg_pool *p)
{
	/* not 1: someone sleeps (or is about to) on the word; the slow path
	 * hands it back and wakes one. */
	if (GG_UNLIKELY(atomic_fetch_sub_explicit(&p->lock, 1, memory_order_release) != 1))
		gg_pool_unlock_wake(p);
}

/* The pool this thread used last: a hit costs a load and a compare
 * instead of the registry's scan. Valid while its handle is still the one
 * asked for: an entry is never unmapped, and one that died or was reused
 * holds another handle (GG_POOL_DEAD, or the new pool's). */
extern GG_TLS struct gg_pool *gg_pool_last;
struct gg_pool *gg_pool_get_slow(void *handle, int dev, gg_pool_reserved_fn query);
/* Finds or registers pool handle on dev. NULL when the registry is full
 * (65536 pools) or out of memory. */
static inline struct gg_pool *gg_pool_get(void *handle, int dev, gg_pool_reserved_fn query)
{
	struct gg_pool *p = gg_pool_last;
	/* acquire: as pool.c's find(), pairs with the release store that
	 * published the entry's dev and query with its handle. */
	if (GG_LIKELY(p != NULL && (uintptr_t)handle > (uintptr_t)GG_POOL_DEAD &&
	              atomic_load_explicit(&p->handle, memory_order_acquire) == handle))
		return p;
	return gg_pool_get_slow(handle, dev, query);
}

/* A warm request's read of the reserve after the driver call (~200
 * instructions of the stream-ordered pair in the simulator, most of it the
 * driver's cuMemPoolGetAttribute; issue 24) only catches a growth of a
 * fragmented reserve. It is skipped for up to GG_POOL_READ_EVERY - 1 warm
 * requests in a row, while the ceiling has room for everything they could
 * have grown the pool by (each request's size plus 2 MiB less a byte, at
 * least its size rounded up to 2 MiB) plus
 * GG_CEILING_NEAR for a driver that grows by bigger chunks. A growth it
 * misses is charged at the pool's next read: at most GG_POOL_READ_EVERY - 1
 * warm requests later, or sooner at a request that asks the driver, a
 * synchronisation point, a memory query or a refusal's reconcile. It then
 * fits, unless others took that room meanwhile; if they did, it is charged
 * all the same and counted in pool_overshoot, never lost. Near the ceiling
 * and under a bad limit (its ceiling is 0, gg_ceiling_limit_for, so it
 * never has the room) every request reads, so a growth that does not fit
 * is undone and refused as before. Caller holds p->lock. */
#define GG_POOL_READ_EVERY 16
/* The ceiling as gg_pool_may_skip_read takes it: an unresolved one (a
 * percentage of a card whose size could not be read) as 0, which never has
 * the room, so that the check itself spends no compare on it (issue 24).
 * The callers' lookups have just compared lim with GG_LIMIT_UNRESOLVED, so
 * the compiler folds this into that branch. */
static inline uint64_t gg_pool_skip_limit(uint64_t lim)
{
	return GG_UNLIKELY(lim == GG_LIMIT_UNRESOLVED) ? 0 : lim;
}
/* lim: from gg_pool_skip_limit. want: p->room_want with this request's
 * growth added (gg_pool_begin_on). */
static inline int gg_pool_may_skip_read(const struct gg_pool *p, const struct gg_budget *b, uint64_t lim, uint64_t want)
{
	if (p->unread >= GG_POOL_READ_EVERY - 1)
		return 0;
	/* relaxed: a hint; a room taken by another thread right after is the
	 * overshoot case above, counted where the growth is charged. In pod
	 * scope `used` is the entry's snapshot of the pod's use (each slow
	 * grant and the sweep publish it): a hint of the same kind. */
	uint64_t used = atomic_load_explicit(b->used, memory_order_relaxed);
	return used <= lim && lim - used >= want;
}

/* begin past the warm-by-estimate case (pool.c): asks the driver, then
 * reserves the growth or goes the admission path. Caller holds p->lock. */
uint64_t gg_pool_begin_asking(struct gg_pool *p, uint64_t size, uint64_t *reserve_before);
/* What gg_pool_begin sets *reserve_before to for a warm request whose read
 * of the reserve is skipped (gg_pool_may_skip_read), counted already: its
 * end (gg_pool_end_warm) only gives the lock back. No reserve is that big. */
#define GG_POOL_UNREAD UINT64_MAX
/* Call before asking the pool for `size` bytes. Returns GG_POOL_REFUSED past
 * the ceiling (counted and dumped); otherwise the bytes it reserved, with the
 * pool's lock held until gg_pool_end. 0 means the request goes to the pool's
 * warm reserve, unreserved: end it with gg_pool_end_warm (or, when the
 * runtime's call failed, gg_pool_end with 0). Inline: the warm request's
 * whole begin (issue 24). _on: with b, p->dev's budget, and lim, its
 * ceiling, as the hook looked them up already (gg_bind_budget), so that a
 * warm request looks neither up again, through gg_pool_skip_limit. The
 * caller notes the thread (gg_ceiling_note_thread: a thread that allocates
 * may free), as gg_pool_begin does; hook_cuda.c's cache of the pool's entry
 * does it where it is filled, which every thread passes before its first
 * hit (issue 24). */
static inline __attribute__((always_inline)) uint64_t
gg_pool_begin_on(struct gg_pool *p, const struct gg_budget *b, uint64_t lim, uint64_t size, uint64_t *reserve_before)
{
	/* What a block in the reserve takes (the size rounded to 512 B), at
	 * most: an upper bound is all used_est needs, and it costs an add,
	 * not a rounding (issue 24). begin_asking, which compares with what
	 * the driver says, rounds. Past 2^64 - 512 B it wraps, as the rounded
	 * size did: the driver refuses that request, and its end reads. */
	uint64_t fit = size + 511;
	/* Held until gg_pool_end, across the driver call: two requests that each
	 * fit the warm reserve alone must not both be let through unreserved,
	 * or the second grows the pool past the ceiling. The driver serialises
	 * a pool's allocations internally anyway. */
	gg_pool_lock(p);
	/* used_est + fit <= charged, exactly: a sum past 2^64 never fits
	 * (used_est is UINT64_MAX until the first read). One add, its carry
	 * and one compare, where two compares and a subtraction were, and the
	 * sum is the new estimate (issue 24). */
	uint64_t est;
	if (GG_LIKELY(!__builtin_add_overflow(p->used_est, fit, &est) && est <= p->charged)) {
		/* Warm by what we know (used_est above): no question to the
		 * driver. The reserve's read after the call (gg_pool_end_warm)
		 * catches a growth all the same, or a later one does
		 * (gg_pool_may_skip_read). */
		p->used_est = est;
		/* What this request could grow the pool by, at most: its size
		 * plus a page less a byte, not rounded to the page (GG_PAGE):
		 * a bound up to 2 MiB above the rounded one, which only makes
		 * the skip check's room larger, for an add in place of a
		 * rounding (issue 24). It wraps only where fit does (above),
		 * as the rounded bound did. */
		uint64_t want = p->room_want + size + (GG_PAGE - 1);
		if (!gg_pool_may_skip_read(p, b, lim, want)) {
			*reserve_before = p->charged;
			return 0;
		}
		/* Counted now, not at its end: a request the runtime then
		 * fails goes to gg_pool_end, whose read settles these anyway. */
		p->unread++;
		p->room_want = want;
		*reserve_before = GG_POOL_UNREAD;
		return 0;
	}
	return gg_pool_begin_asking(p, size, reserve_before);
}
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
static inline uint64_t gg_pool_begin(struct gg_pool *p, uint64_t size, uint64_t *reserve_before)
{
	struct gg_budget *b = gg_ceiling_budget(p->dev);
	gg_ceiling_note_thread(); /* a thread that allocates may free (ceiling.c) */
	return gg_pool_begin_on(p, b, gg_pool_skip_limit(gg_ceiling_budget_limit(b)), size, reserve_before);
}

/* After a warm request (begin returned 0) the runtime served: re-reads the
 * reserve once, unless begin skipped that (reserve_before GG_POOL_UNREAD);
 * a growth against reserve_before is charged if it fits.
 * GG_VERDICT_GRANTED: settled, lock dropped. Else the reservation's
 * refusal: the growth (*grown) does not fit; the lock is still held, and the
 * caller undoes the growth, refuses under the verdict's reason, then calls
 * gg_pool_end. */
enum gg_verdict gg_pool_end_warm_reading(struct gg_pool *p, uint64_t reserve_before, uint64_t *grown);
static inline enum gg_verdict gg_pool_end_warm(struct gg_pool *p, uint64_t reserve_before, uint64_t *grown)
{
	*grown = 0;
	if (GG_LIKELY(reserve_before == GG_POOL_UNREAD)) {
		/* Read later (gg_pool_may_skip_read): a growth of this request
		 * is charged at the pool's next read. */
		gg_pool_unlock(p);
		return GG_VERDICT_GRANTED;
	}
	return gg_pool_end_warm_reading(p, reserve_before, grown);
}
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
 * thread by the hooks (gg_pool_home_hit, below), valid while this count
 * has not moved. It moves after everything we see that can change a
 * current pool: cuDeviceSetMemPool, cuMemSetMemPool, a pool's destroy
 * (its device's default pool becomes current again), a context's reset or
 * destroy, and fork. gg_pool_current_changed moves it. */
extern _Atomic uint32_t gg_pool_current_gen __attribute__((visibility("hidden"))); /* as defined: read in place */
void gg_pool_current_changed(void);

/* The hooks' caches of a device's current pool's registry entry (struct
 * gg_pool_home, base.h: gg_self.cu_pool, gg_self.hip_pool), in the
 * thread's block: one cache for the pool and its entry (issue 24:
 * cuDeviceGetMemPool was ~145 instructions of the stream-ordered pair in
 * the simulator, and a registry lookup more). A cache is valid while
 * gg_pool_current_gen has not moved: a device's current pool changes only
 * by the calls the hooks see (cuDeviceSetMemPool, cuMemSetMemPool,
 * hipDeviceSetMemPool), by a destroy of the current pool (the default one
 * is current again), or with its context (reset, destroy), and each moves
 * the count (gg_pool_current_changed, gg_pool_destroy_end,
 * gg_pool_after_reset; fork's gg_pool_reset too). Its entry stays the
 * pool's as long: an entry dies (GG_POOL_DEAD) and is reused only after a
 * destroy or a reset. A path no hook sees (a private table, ROCm 7's
 * hipMemSetMemPool) is bounded all the same: the runtime is asked again
 * every GG_POOL_RECHECK requests of a thread, so a stale pool serves at
 * most that many. */
#define GG_POOL_RECHECK 256
/* A miss of h: handle, dev's current pool as its runtime named it just now
 * (NULL: none), with gen, the count loaded before the question
 * (gg_pool_home_hit). Returns its entry (registered on first sight) and
 * fills h with it when it is one of dev; else NULL, and h stays a miss: the
 * hook goes the whole way (a pool first registered on another device,
 * every time). Notes the thread (gg_ceiling_note_thread), so that a hit
 * need not: every thread fills its cache before its first hit, and the
 * note is for good. */
struct gg_pool *gg_pool_home_fill(struct gg_pool_home *h, void *handle, int dev, uint32_t gen,
                                  gg_pool_reserved_fn query);
/* The countdown's step: 1 while h->left was above 0, which it decrements
 * either way. On x86-64 one decrement of the word in place and its flags
 * (the new value >= 0, without overflow, is the old one > 0), where gcc
 * loads, decrements, stores and tests (issue 24: 3 instructions a
 * stream-ordered request). Thread-local, so no atomic. */
static inline __attribute__((always_inline)) int gg_pool_home_take(struct gg_pool_home *h)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	/* decl works on 32 bits, and ge reads its sign: a wider or unsigned
	 * word would count in its low half, or never below 0. */
	_Static_assert(sizeof(h->left) == 4 && (__typeof__(h->left))-1 < 0,
	               "left is the signed 32-bit word decl takes");
	int more;
	__asm__("decl %0" : "+m"(h->left), "=@ccge"(more));
	return more;
#else
	return h->left-- > 0;
#endif
}
/* 1 when h holds dev's current pool's entry (h->p), registered on dev;
 * else 0: then the hook asks its runtime and calls gg_pool_home_fill with
 * *gen. A fresh thread's block (all zero) misses, as does one past
 * GG_POOL_RECHECK hits. */
static inline __attribute__((always_inline)) int gg_pool_home_hit(struct gg_pool_home *h, int dev, uint32_t *gen)
{
	/* acquire: pairs with the release in gg_pool_current_changed, and
	 * keeps the hook's question to its runtime after this load. */
	*gen = atomic_load_explicit(&gg_pool_current_gen, memory_order_acquire);
	return GG_LIKELY(h->gen == *gen && h->dev == dev && gg_pool_home_take(h));
}

#endif
