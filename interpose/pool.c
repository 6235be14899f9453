/* gpuguard: stream-ordered pools. A pool keeps memory after a free, so its
 * charge is what it reserves (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), not what
 * is live in it. A request its warm reserve can serve is never refused; one
 * that makes the pool grow reserves the growth against the ceiling first.
 * A pool's allocations are serialised by its lock, so each change in its
 * reserve is charged exactly once; nobody else ever waits on that lock. */
#include <pthread.h>
#include <string.h>

#include "internal.h"

#define MAX_POOLS 256
#define DEAD_POOL ((void *)1)

struct gg_pool {
	void *_Atomic handle; /* NULL = free entry, DEAD_POOL = destroyed */
	int dev;
	gg_pool_reserved_fn query;
	pthread_mutex_t lock; /* held across one allocation's driver call */
	uint64_t charged;     /* reserve we charged; written under lock only */
};

static struct gg_pool pools[MAX_POOLS];
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int npools; /* entries ever used; lookups scan this many */

static struct gg_pool *find(void *handle)
{
	/* acquire: pairs with the release store that published the entry, so
	 * dev and query are initialised when the handle matches. */
	int n = atomic_load_explicit(&npools, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (atomic_load_explicit(&pools[i].handle, memory_order_acquire) == handle)
			return &pools[i];
	return NULL;
}

struct gg_pool *gg_pool_get(void *handle, int dev, gg_pool_reserved_fn query)
{
	if (!handle || handle == DEAD_POOL)
		return NULL;
	struct gg_pool *p = find(handle);
	if (GG_LIKELY(p != NULL))
		return p;
	/* First sight of this pool. Registration is rare, so a mutex keeps two
	 * threads from registering the same pool twice (which would charge its
	 * reserve twice). It is never held across a call out of the library. */
	pthread_mutex_lock(&reg_lock);
	p = find(handle);
	if (!p) {
		int n = atomic_load_explicit(&npools, memory_order_relaxed);
		for (int i = 0; i < n && !p; i++)
			if (atomic_load_explicit(&pools[i].handle, memory_order_relaxed) == DEAD_POOL)
				p = &pools[i];
		if (!p && n < MAX_POOLS)
			p = &pools[n];
		if (p) {
			p->dev = dev;
			p->query = query;
			p->charged = 0;
			pthread_mutex_init(&p->lock, NULL);
			/* release: publishes dev, query and the lock to find(). */
			atomic_store_explicit(&p->handle, handle, memory_order_release);
			if (p == &pools[n])
				atomic_store_explicit(&npools, n + 1, memory_order_release);
		}
	}
	pthread_mutex_unlock(&reg_lock);
	return p;
}

int gg_pool_device(void *handle)
{
	struct gg_pool *p = find(handle);
	return p ? p->dev : -1;
}

/* Brings p->charged to the pool's reserve now; `credit` bytes that the caller
 * reserved for this growth are folded in. Caller holds p->lock. */
static void settle_locked(struct gg_pool *p, uint64_t credit)
{
	uint64_t reserved;
	uint64_t target = p->charged + credit; /* if the driver cannot tell us, keep what we hold */
	if (p->query(atomic_load_explicit(&p->handle, memory_order_relaxed), &reserved, NULL) == 0)
		target = reserved;
	struct gg_device *g = &gg_devices[p->dev];
	uint64_t held = p->charged + credit; /* what `used` holds for this pool now */
	if (target > held) {
		/* Growth nobody reserved: a warm but fragmented reserve at the
		 * ceiling. The memory is taken; count how far past we went. */
		uint64_t lim = atomic_load_explicit(&g->limit, memory_order_relaxed);
		uint64_t now = atomic_load_explicit(&g->used, memory_order_relaxed) + (target - held);
		if (now > lim && lim != GG_LIMIT_UNRESOLVED)
			atomic_fetch_add_explicit(&g->pool_overshoot, now - lim, memory_order_relaxed);
		gg_ceiling_force(p->dev, target - held);
		atomic_fetch_add_explicit(&g->pool_reserved, target - p->charged, memory_order_relaxed);
	} else {
		gg_ceiling_release(p->dev, held - target);
		if (target >= p->charged)
			atomic_fetch_add_explicit(&g->pool_reserved, target - p->charged, memory_order_relaxed);
		else
			atomic_fetch_sub_explicit(&g->pool_reserved, p->charged - target, memory_order_relaxed);
	}
	p->charged = target;
}

void gg_pool_reconcile(struct gg_pool *p)
{
	/* trylock: an allocation holds the lock across its driver call and
	 * settles the pool itself when done; nobody ever waits here. */
	if (pthread_mutex_trylock(&p->lock) != 0)
		return;
	settle_locked(p, 0);
	pthread_mutex_unlock(&p->lock);
}

void gg_pool_reconcile_device(int dev)
{
	/* acquire: pair with the release stores in gg_pool_get, as in find(). */
	int n = atomic_load_explicit(&npools, memory_order_acquire);
	for (int i = 0; i < n; i++) {
		void *h = atomic_load_explicit(&pools[i].handle, memory_order_acquire);
		if (h && h != DEAD_POOL && pools[i].dev == dev)
			gg_pool_reconcile(&pools[i]);
	}
}

void gg_pool_sync_point(void)
{
	/* The common case first: no pool charge anywhere, nothing to read.
	 * acquire: as in find(). */
	int n = atomic_load_explicit(&npools, memory_order_acquire);
	if (GG_LIKELY(n == 0))
		return;
	for (int i = 0; i < n; i++) {
		void *h = atomic_load_explicit(&pools[i].handle, memory_order_acquire);
		if (!h || h == DEAD_POOL)
			continue;
		/* relaxed: a hint only; a pool charged a moment ago by another
		 * thread is settled by that thread's own allocation path. */
		if (atomic_load_explicit(&gg_devices[pools[i].dev].pool_reserved, memory_order_relaxed) == 0)
			continue;
		gg_pool_reconcile(&pools[i]);
	}
}

uint64_t gg_pool_begin(struct gg_pool *p, uint64_t size, uint64_t *reserve_before)
{
	uint64_t need = (size + GG_PAGE - 1) / GG_PAGE * GG_PAGE; /* what growth would take */
	uint64_t fit = (size + 511) / 512 * 512;                  /* what a block in the reserve takes */
	uint64_t reserved, used;
	void *h = atomic_load_explicit(&p->handle, memory_order_relaxed);
	/* Held until gg_pool_end, across the driver call: two requests that each
	 * fit the warm reserve alone must not both be let through unreserved,
	 * or the second grows the pool past the ceiling. The driver serialises
	 * a pool's allocations internally anyway. */
	pthread_mutex_lock(&p->lock);
	int known = p->query(h, &reserved, &used) == 0;
	*reserve_before = known ? reserved : p->charged;
	if (known && reserved >= used && reserved - used >= fit) {
		/* The free reserve adds up to the request. Reserve the growth if
		 * there is room (a fragmented reserve can make the pool grow
		 * anyway); if there is none, let the driver try its reserve: a
		 * request it serves from there is never refused (DESIGN.md §2),
		 * and gg_pool_grew tells the caller when it did not. */
		return gg_ceiling_try_reserve(p->dev, need) == 0 ? need : 0;
	}
	if (gg_ceiling_try_reserve(p->dev, need) != 0) {
		/* Before refusing, let every pool on the device give back what it
		 * released at synchronisation points we did not see: this one
		 * here (reconcile_device cannot take the lock we hold), the
		 * others there. */
		settle_locked(p, 0);
		gg_pool_reconcile_device(p->dev);
		gg_shared_reclaim();
		if (gg_ceiling_try_reserve(p->dev, need) != 0) {
			/* ON_LIMIT=wait: wait without the pool's lock (a free into
			 * this pool must not queue behind us), holding the
			 * reservation once we have it. */
			pthread_mutex_unlock(&p->lock);
			if (gg_account_wait_reserve(p->dev, need) != 0) {
				gg_ceiling_count_refusal(p->dev, gg_opt.limit_bad ? GPUGUARD_REFUSED_CONFIG
				                                                  : GPUGUARD_REFUSED_CEILING);
				return GG_POOL_REFUSED;
			}
			pthread_mutex_lock(&p->lock);
		}
	}
	return need;
}

int gg_pool_grew(struct gg_pool *p, uint64_t reserve_before)
{
	uint64_t reserved;
	return p->query(atomic_load_explicit(&p->handle, memory_order_relaxed), &reserved, NULL) == 0 &&
	       reserved > reserve_before;
}

void gg_pool_end(struct gg_pool *p, uint64_t reserved)
{
	settle_locked(p, reserved);
	pthread_mutex_unlock(&p->lock);
}

void gg_pool_after_reset(int dev)
{
	/* acquire: as in find(). */
	int n = atomic_load_explicit(&npools, memory_order_acquire);
	for (int i = 0; i < n; i++) {
		void *h = atomic_load_explicit(&pools[i].handle, memory_order_acquire);
		uint64_t reserved;
		if (!h || h == DEAD_POOL || pools[i].dev != dev)
			continue;
		if (pools[i].query(h, &reserved, NULL) != 0)
			gg_pool_forget(h); /* the pool went with its context */
		else
			gg_pool_reconcile(&pools[i]);
	}
}

void gg_pool_forget(void *handle)
{
	struct gg_pool *p = find(handle);
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	gg_ceiling_release(p->dev, p->charged);
	atomic_fetch_sub_explicit(&gg_devices[p->dev].pool_reserved, p->charged, memory_order_relaxed);
	p->charged = 0;
	/* release: orders the books above before the entry can be reused. */
	atomic_store_explicit(&p->handle, DEAD_POOL, memory_order_release);
	pthread_mutex_unlock(&p->lock);
}

void gg_pool_reset(void)
{
	/* Fork child: one thread, and the parent's pools are not the child's. */
	memset(pools, 0, sizeof(pools));
	atomic_store_explicit(&npools, 0, memory_order_relaxed);
	pthread_mutex_init(&reg_lock, NULL);
}
