/* gpuguard: stream-ordered pools. A pool keeps memory after a free, so its
 * charge is what it reserves (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), not what
 * is live in it. A request its warm reserve can serve is never refused; one
 * that makes the pool grow reserves the growth against the ceiling first.
 * A pool's allocations are serialised by its lock, so each change in its
 * reserve is charged exactly once; nobody else ever waits on that lock.
 *
 * The registry grows in blocks of BLOCK_POOLS entries, mapped once and never
 * unmapped, so lookups take no lock however many pools a process makes. */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "pool.h"
#include "base.h"
#include "ceiling.h"
#include "log.h"
#include "options.h"
#include "table.h"

#define BLOCK_POOLS 64
#define MAX_BLOCKS 1024 /* 65536 pools; past that see gg_pool_alloc_begin's fallback (shape.c) */
#define DEAD_POOL GG_POOL_DEAD

/* The pool lock's slow paths (pool.h): acquire on taking it, release on
 * giving it back, as its fast paths. */
void __attribute__((noinline)) gg_pool_lock_slow(struct gg_pool *p, uint32_t c)
{
	if (c != 2)
		c = atomic_exchange_explicit(&p->lock, 2, memory_order_acquire);
	while (c != 0) {
		gg_futex_wait(&p->lock, 2, NULL, 1);
		c = atomic_exchange_explicit(&p->lock, 2, memory_order_acquire);
	}
}

void gg_pool_unlock_wake(struct gg_pool *p)
{
	/* release: as gg_pool_unlock's, for the holder after a sleeper. */
	atomic_store_explicit(&p->lock, 0, memory_order_release);
	gg_futex_wake(&p->lock, 1, 1);
}

/* 0 when taken. acquire: as gg_pool_lock's. */
static inline int pool_trylock(struct gg_pool *p)
{
	uint32_t c = 0;
	return atomic_compare_exchange_strong_explicit(&p->lock, &c, 1, memory_order_acquire, memory_order_relaxed)
	           ? 0
	           : -1;
}

static struct gg_pool *_Atomic blocks[MAX_BLOCKS];
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int npools; /* entries ever used; lookups scan this many */

/* Entry i, for i below a value of npools read with acquire. relaxed: the
 * block pointer was stored before the release store of npools that made i
 * visible (gg_pool_get), and it never changes after. */
static struct gg_pool *entry(int i)
{
	return &atomic_load_explicit(&blocks[i / BLOCK_POOLS], memory_order_relaxed)[i % BLOCK_POOLS];
}

static struct gg_pool *find(void *handle)
{
	/* acquire: pairs with the release store of npools, so every block up
	 * to n is mapped; and per entry with the release store that published
	 * it, so dev and query are initialised when the handle matches. */
	int n = atomic_load_explicit(&npools, memory_order_acquire);
	for (int i = 0; i < n; i++) {
		struct gg_pool *p = entry(i);
		if (atomic_load_explicit(&p->handle, memory_order_acquire) == handle)
			return p;
	}
	return NULL;
}

GG_TLS struct gg_pool *gg_pool_last; /* pool.h */

struct gg_pool *__attribute__((noinline)) gg_pool_get_slow(void *handle, int dev, gg_pool_reserved_fn query)
{
	if (!handle || handle == DEAD_POOL)
		return NULL;
	struct gg_pool *p = find(handle);
	if (GG_LIKELY(p != NULL)) {
		gg_pool_last = p;
		return p;
	}
	/* First sight of this pool. Registration is rare, so a mutex keeps two
	 * threads from registering the same pool twice (which would charge its
	 * reserve twice). It is never held across a call out of the library. */
	pthread_mutex_lock(&reg_lock);
	p = find(handle);
	if (!p) {
		int n = atomic_load_explicit(&npools, memory_order_relaxed);
		int fresh = 0;
		for (int i = 0; i < n && !p; i++)
			if (atomic_load_explicit(&entry(i)->handle, memory_order_relaxed) == DEAD_POOL)
				p = entry(i);
		if (!p && n < MAX_BLOCKS * BLOCK_POOLS) {
			/* relaxed: only writers, all under reg_lock, touch a
			 * block pointer that no published npools covers yet. */
			struct gg_pool *b = atomic_load_explicit(&blocks[n / BLOCK_POOLS], memory_order_relaxed);
			if (!b) {
				/* mmap, never libc malloc (DESIGN.md §1); zeroed. */
				void *m = mmap(NULL, BLOCK_POOLS * sizeof(*b), PROT_READ | PROT_WRITE,
				               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
				if (m != MAP_FAILED) {
					b = m;
					atomic_store_explicit(&blocks[n / BLOCK_POOLS], b, memory_order_relaxed);
				}
			}
			if (b) {
				p = &b[n % BLOCK_POOLS];
				fresh = 1;
			}
		}
		if (p) {
			p->dev = dev;
			p->query = query;
			p->charged = 0;
			p->used_est = UINT64_MAX; /* unknown until the first read */
			p->unread = 0;
			p->room_want = GG_CEILING_NEAR; /* as read_done */
			/* p->lock: 0 in a fresh entry (mmap) and in a dead one
			 * (given back by forget_keeping); a thread that found the
			 * entry before it died may still hold it, so it is left
			 * as it is. */
			/* release: publishes dev, query and the lock to find(). */
			atomic_store_explicit(&p->handle, handle, memory_order_release);
			/* release: publishes the block pointer (and the entry)
			 * to every reader that loads npools with acquire. */
			if (fresh)
				atomic_store_explicit(&npools, n + 1, memory_order_release);
		}
	}
	pthread_mutex_unlock(&reg_lock);
	if (p)
		gg_pool_last = p;
	return p;
}

_Atomic uint32_t gg_pool_current_gen; /* hidden: pool.h */

void gg_pool_current_changed(void)
{
	/* release: the driver's change of the current pool (the call that
	 * returned before this) is ordered before the new count, so a reader
	 * that loads the new count with acquire and then asks the driver sees
	 * the new pool (pool.h's gg_pool_home_hit, then the hook's question). */
	atomic_fetch_add_explicit(&gg_pool_current_gen, 1, memory_order_release);
}

struct gg_pool *gg_pool_home_fill(struct gg_pool_home *h, void *handle, int dev, uint32_t gen,
                                  gg_pool_reserved_fn query)
{
	/* Asked until filled: the countdown is at 0 or below (a miss), and
	 * stays where a decrement takes it below 0. */
	h->left = 0;
	struct gg_pool *p = handle ? gg_pool_get(handle, dev, query) : NULL;
	/* Only an entry of dev: a hit then skips the registry and the entry's
	 * device (shape.h's gg_pool_alloc_begin_at). */
	if (!p || p->dev != dev)
		return NULL;
	gg_ceiling_note_thread(); /* a thread that allocates may free (ceiling.c) */
	h->p = p;
	h->gen = gen;
	h->dev = (int16_t)dev;
	h->left = GG_POOL_RECHECK;
	return p;
}

int gg_pool_device(void *handle)
{
	struct gg_pool *p = find(handle);
	return p ? p->dev : -1;
}

/* Brings p->charged to the pool's reserve now; `credit` bytes that the caller
 * reserved for this growth are folded in. Caller holds p->lock. */
/* Settles the pool's charge to target, the reserve as just read, with
 * credit bytes reserved for this request on top of what it holds. */
static void settle_to(struct gg_pool *p, uint64_t credit, uint64_t target)
{
	struct gg_device *g = &gg_devices[p->dev];
	uint64_t held = p->charged + credit; /* what `used` holds for this pool now */
	if (target > held) {
		/* Growth nobody reserved: a warm but fragmented reserve at the
		 * ceiling. The memory is taken; count how far past we went. */
		gg_ceiling_force_over(p->dev, target - held);
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

/* The reserve was just read and settled: no growth is unseen, and the
 * next skip needs GG_CEILING_NEAR of room (pool.h's room_want). */
static inline void read_done(struct gg_pool *p)
{
	p->unread = 0;
	p->room_want = GG_CEILING_NEAR;
}

static void settle_locked(struct gg_pool *p, uint64_t credit)
{
	uint64_t reserved;
	uint64_t target = p->charged + credit; /* if the driver cannot tell us, keep what we hold */
	if (p->query(atomic_load_explicit(&p->handle, memory_order_relaxed), &reserved, NULL) == 0) {
		target = reserved;
		read_done(p);
	}
	settle_to(p, credit, target);
}

void gg_pool_reconcile(struct gg_pool *p)
{
	/* trylock: an allocation holds the lock across its driver call and
	 * settles the pool itself when done; nobody ever waits here. */
	if (pool_trylock(p) != 0)
		return;
	settle_locked(p, 0);
	gg_pool_unlock(p);
}

void gg_pool_reconcile_device(int dev)
{
	/* acquire: pair with the release stores in gg_pool_get, as in find(). */
	int n = atomic_load_explicit(&npools, memory_order_acquire);
	for (int i = 0; i < n; i++) {
		struct gg_pool *p = entry(i);
		void *h = atomic_load_explicit(&p->handle, memory_order_acquire);
		if (h && h != DEAD_POOL && p->dev == dev)
			gg_pool_reconcile(p);
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
		struct gg_pool *p = entry(i);
		void *h = atomic_load_explicit(&p->handle, memory_order_acquire);
		if (!h || h == DEAD_POOL)
			continue;
		/* relaxed: a hint only; a pool charged a moment ago by another
		 * thread is settled by that thread's own allocation path. */
		if (atomic_load_explicit(&gg_devices[p->dev].pool_reserved, memory_order_relaxed) == 0)
			continue;
		gg_pool_reconcile(p);
	}
}

/* The admission path past the ceiling (account.c's gg_account_begin:
 * reconcile, reclaim, wait, refuse with its count and dump), handed down by
 * initialisation: it reconciles the pools, so this file cannot call it by
 * name. relaxed: a code pointer set once, before initialisation publishes
 * itself; it points to code, not data. */
static _Atomic gg_pool_admit_fn admit_fn;

void gg_pool_set_admit(gg_pool_admit_fn fn)
{
	atomic_store_explicit(&admit_fn, fn, memory_order_relaxed);
}

/* begin past the warm-by-estimate case (pool.h's gg_pool_begin, inline in
 * the hook): ask the driver, then reserve the growth or go the admission
 * path. Out of line, so that the hook saves no registers for it (issue
 * 24). Caller holds p->lock. */
uint64_t __attribute__((noinline)) gg_pool_begin_asking(struct gg_pool *p, uint64_t size, uint64_t *reserve_before)
{
	uint64_t fit = (size + 511) / 512 * 512;                  /* what a block in the reserve takes */
	uint64_t need = (size + GG_PAGE - 1) / GG_PAGE * GG_PAGE; /* what growth would take */
	uint64_t reserved, used;
	int known = p->query(atomic_load_explicit(&p->handle, memory_order_relaxed), &reserved, &used) == 0;
	*reserve_before = known ? reserved : p->charged;
	/* A sum past 2^64 (a request no pool can serve) is "not known", as
	 * before the first read: wrapped, it said the blocks took less than
	 * they do, and later requests looked warm that were not. */
	if (known && __builtin_add_overflow(used, fit, &p->used_est))
		p->used_est = UINT64_MAX;
	if (known && reserved >= used && reserved - used >= fit) {
		/* The free reserve adds up to the request: the driver serves it
		 * from there, and a request it serves from there is never refused
		 * (DESIGN.md §2). Nothing is reserved up front (a reservation and
		 * its release on every warm request were most of the
		 * stream-ordered pair's cost, issue 24): a fragmented reserve that
		 * makes the pool grow all the same is charged afterwards, or
		 * undone and refused where that growth does not fit
		 * (gg_pool_end_warm), as a request at the ceiling always was. */
		return 0;
	}
	enum gg_verdict v = gg_ceiling_try_reserve(p->dev, need);
	if (v == GG_VERDICT_GRANTED)
		return need;
	/* Past the ceiling: the one admission path (account.c's
	 * gg_account_begin, handed down as `admit`) decides, after this pool
	 * gave back what it released at synchronisation points we did not see
	 * (the device's reconcile there cannot take the lock we hold). It runs
	 * without the lock, so that a free into this pool never queues behind
	 * a wait (ON_LIMIT=wait); the reservation is held once we have it. A
	 * refusal there is counted and dumped; with no admission path (unit
	 * tests without initialisation) it is refused at once, and counted. */
	settle_locked(p, 0);
	gg_pool_unlock(p);
	gg_pool_admit_fn admit = atomic_load_explicit(&admit_fn, memory_order_relaxed);
	if (!admit) {
		gg_ceiling_count_refusal(p->dev, gg_verdict_reason(v));
		return GG_POOL_REFUSED;
	}
	if (admit(p->dev, need) != 0)
		return GG_POOL_REFUSED;
	gg_pool_lock(p);
	return need;
}

uint64_t gg_pool_growth(struct gg_pool *p, uint64_t reserve_before)
{
	uint64_t reserved;
	if (p->query(atomic_load_explicit(&p->handle, memory_order_relaxed), &reserved, NULL) != 0 ||
	    reserved <= reserve_before)
		return 0;
	return reserved - reserve_before;
}

int gg_pool_grew(struct gg_pool *p, uint64_t reserve_before)
{
	return gg_pool_growth(p, reserve_before) != 0;
}

void gg_pool_end(struct gg_pool *p, uint64_t reserved)
{
	settle_locked(p, reserved);
	gg_pool_unlock(p);
}

/* end_warm's read of the reserve (pool.h), out of line as begin_asking is. */
enum gg_verdict __attribute__((noinline))
gg_pool_end_warm_reading(struct gg_pool *p, uint64_t reserve_before, uint64_t *grown_out)
{
	uint64_t reserved;
	if (p->query(atomic_load_explicit(&p->handle, memory_order_relaxed), &reserved, NULL) != 0) {
		gg_pool_end(p, 0); /* the driver cannot tell: keep what we hold */
		return GG_VERDICT_GRANTED;
	}
	if (reserved > reserve_before) {
		/* Grown despite the free reserve (fragmented): charged now if
		 * it fits, else the caller undoes it (lock still held). */
		uint64_t grown = reserved - reserve_before;
		enum gg_verdict v = gg_ceiling_try_reserve(p->dev, grown);
		if (v != GG_VERDICT_GRANTED) {
			*grown_out = grown;
			return v;
		}
		settle_to(p, grown, reserved);
	} else if (reserved != p->charged) {
		settle_to(p, 0, reserved); /* released at a sync we did not see */
	}
	read_done(p);
	gg_pool_unlock(p);
	return GG_VERDICT_GRANTED;
}

void gg_pool_after_reset(int dev)
{
	/* The context went with its current pool: the default is current
	 * again (or a fresh one after the reset). */
	gg_pool_current_changed();
	/* acquire: as in find(). */
	int n = atomic_load_explicit(&npools, memory_order_acquire);
	for (int i = 0; i < n; i++) {
		struct gg_pool *p = entry(i);
		void *h = atomic_load_explicit(&p->handle, memory_order_acquire);
		uint64_t reserved;
		if (!h || h == DEAD_POOL || p->dev != dev)
			continue;
		if (p->query(h, &reserved, NULL) != 0)
			gg_pool_forget(h); /* the pool went with its context */
		else
			gg_pool_reconcile(p);
	}
}

/* The pool is gone from the registry; `keep` bytes of its charge stay on
 * the books (what the driver still holds for a destroyed pool's blocks). */
static void forget_keeping(void *handle, uint64_t keep)
{
	struct gg_pool *p = find(handle);
	if (!p)
		return;
	gg_pool_lock(p);
	if (keep <= p->charged)
		gg_ceiling_release(p->dev, p->charged - keep);
	else
		gg_ceiling_force(p->dev, keep - p->charged); /* the records refund keep in full */
	atomic_fetch_sub_explicit(&gg_devices[p->dev].pool_reserved, p->charged, memory_order_relaxed);
	p->charged = 0;
	/* release: orders the books above before the entry can be reused. */
	atomic_store_explicit(&p->handle, DEAD_POOL, memory_order_release);
	gg_pool_unlock(p);
}

void gg_pool_forget(void *handle)
{
	forget_keeping(handle, 0);
}

/* ---- destroying a pool with live blocks --------------------------------- */

/* cuMemPoolDestroy returns at once when blocks are still live, and the
 * driver releases the pool's memory only once no allocation from it is left
 * (CUDA's cuMemPoolDestroy; the simulator keeps every chunk of the pool
 * until its last block's free). So the destroyed pool lives on here as a
 * zombie: it holds what the pool holds after the destroy (learnt by
 * trimming the pool to nothing first, which is what the destroy releases),
 * charged until the last of its listed blocks is freed. Those blocks'
 * records carry GG_REC_POOL_GONE, so only their frees look at the zombies. */

struct zombie {
	struct zombie *next;
	size_t map_bytes;
	int dev;
	uint64_t charge;
	size_t n, live;
	uint64_t *keys; /* the blocks' table keys */
	uint8_t *gone;  /* 1 once that block was freed (or never flagged) */
};
static struct zombie *zombies;                                  /* under zombie_lock */
static pthread_mutex_t zombie_lock = PTHREAD_MUTEX_INITIALIZER; /* never held across a driver call */

static int pool_api(uint8_t api)
{
	return gpuguard_api_kind(api) == GPUGUARD_KIND_POOL;
}

static int doom_push(struct gg_pool_doom *d, const struct gg_record *r)
{
	return gg_records_push(&d->recs, &d->n, &d->cap, 256, r); /* destroys are rare */
}

struct doom_select {
	struct gg_pool_doom *d;
	void *handle;
	int dev;
	gg_pool_owner_fn owner;
};

static void doom_take(const struct gg_record *r, void *arg)
{
	struct doom_select *s = arg;
	if ((r->key >> 62) != GG_NS_PTR || (r->flags & (GG_REC_CHARGED | GG_REC_HOST | GG_REC_POOL_GONE)) ||
	    r->dev != s->dev || !pool_api(r->api))
		return;
	int own = s->owner(r->key ^ ((uint64_t)GG_NS_PTR << 62), s->handle);
	if (own < 0 || (own == 1 && doom_push(s->d, r) != 0))
		s->d->lost = 1; /* the driver cannot say, or no room to list it */
}

void gg_pool_destroy_begin(void *handle, gg_pool_owner_fn owner, gg_pool_trim_fn trim, struct gg_pool_doom *d)
{
	memset(d, 0, sizeof(*d));
	struct gg_pool *p = find(handle);
	uint64_t reserved, used;
	if (!p)
		return;
	/* The common case, an empty pool, asks nothing more: the destroy
	 * gives everything back. */
	if (p->query(handle, &reserved, &used) == 0 && used == 0)
		return;
	d->live = 1;
	/* What stays after the destroy: the pool trimmed to nothing. If it
	 * cannot be trimmed or read, all it reserved (on the safe side). */
	gg_pool_lock(p);
	d->hold = p->charged;
	gg_pool_unlock(p);
	if (trim && trim(handle) == 0 && p->query(handle, &reserved, NULL) == 0)
		d->hold = reserved;
	if (!owner || !gg_table) {
		d->lost = 1; /* no way to tell its blocks */
		return;
	}
	struct doom_select s = {.d = d, .handle = handle, .dev = p->dev, .owner = owner};
	gg_table_foreach(gg_table, doom_take, &s);
}

/* A zombie whose last block went: its memory is back. Caller holds
 * zombie_lock and has unlinked it. */
static void zombie_release(struct zombie *z)
{
	gg_ceiling_release(z->dev, z->charge);
	atomic_fetch_sub_explicit(&gg_devices[z->dev].pool_reserved, z->charge, memory_order_relaxed);
	munmap(z, z->map_bytes);
}

void gg_pool_destroy_end(void *handle, struct gg_pool_doom *d, int ok)
{
	/* Destroying a device's current pool makes its default pool current
	 * (cuda.h, cuMemPoolDestroy). Moved whether or not this one was. */
	if (ok)
		gg_pool_current_changed();
	struct gg_pool *p = ok ? find(handle) : NULL;
	if (!p)
		goto out;
	int dev = p->dev;
	/* Listed, and none of its blocks has a record (all freed, some maybe
	 * still in stream order, which the driver completes on its own): as
	 * for an empty pool, nothing is held for it. */
	if (!d->lost && d->n == 0)
		d->live = 0;
	/* The pool's charge becomes what the driver still holds for it. */
	forget_keeping(handle, d->live ? d->hold : 0);
	if (!d->live || d->hold == 0)
		goto out;
	struct zombie *z = NULL;
	if (!d->lost && d->n) {
		size_t bytes = sizeof(*z) + d->n * (sizeof(uint64_t) + 1);
		void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m != MAP_FAILED) {
			z = m;
			z->map_bytes = bytes;
			z->keys = (uint64_t *)(z + 1);
			z->gone = (uint8_t *)(z->keys + d->n);
		}
	}
	/* relaxed: a statistic; the zombie's charge is pool memory still. */
	atomic_fetch_add_explicit(&gg_devices[dev].pool_reserved, d->hold, memory_order_relaxed);
	if (!z) {
		/* We could not list its blocks (HIP cannot say which pool a
		 * pointer came from) or had no memory to: what it holds stays
		 * charged until exit rather than be refunded while the driver
		 * still holds it. Said once; relaxed: a once-only flag. */
		static _Atomic int warned;
		if (!atomic_exchange_explicit(&warned, 1, memory_order_relaxed))
			gg_log(GG_LOG_WARN, "a memory pool was destroyed with live blocks we cannot list; "
			                    "what they hold stays charged until exit");
		goto out;
	}
	z->dev = dev;
	z->charge = d->hold;
	z->n = d->n;
	/* Under the lock from before the first record is flagged: a free of
	 * a flagged block waits in gg_pool_gone_block_freed until the zombie
	 * is whole. */
	pthread_mutex_lock(&zombie_lock);
	z->next = zombies;
	zombies = z;
	/* seq_cst: odd while records are out of the table below, against
	 * gg_account_forget's reads around its remove (gg_pool_flagging) */
	atomic_fetch_add_explicit(&gg_pool_flag_gen, 1, memory_order_seq_cst);
	for (size_t i = 0; i < d->n; i++) {
		struct gg_record r;
		z->keys[i] = d->recs[i].key;
		z->gone[i] = 1;
		/* Freed meanwhile (a free racing the destroy): not counted. */
		if (!gg_table_remove(gg_table, d->recs[i].key, &r))
			continue;
		r.flags |= GG_REC_POOL_GONE;
		/* If not even the overflow area takes it back, its free is
		 * never seen and the zombie stays charged: the safe side. */
		gg_table_insert(gg_table, &r);
		z->gone[i] = 0;
		z->live++;
	}
	atomic_fetch_add_explicit(&gg_pool_flag_gen, 1, memory_order_seq_cst); /* even: all back */
	if (z->live == 0) {
		zombies = z->next;
		zombie_release(z); /* every block went before we flagged it */
	}
	pthread_mutex_unlock(&zombie_lock);
out:
	if (d->recs)
		munmap(d->recs, d->cap * sizeof(*d->recs));
	memset(d, 0, sizeof(*d));
}

_Atomic uint64_t gg_pool_flag_gen;

void gg_pool_flagging_wait(void)
{
	/* The flagging runs under zombie_lock: once we hold it, every record
	 * it took out is back in the table. */
	pthread_mutex_lock(&zombie_lock);
	pthread_mutex_unlock(&zombie_lock);
}

void gg_pool_gone_block_freed(uint64_t key)
{
	pthread_mutex_lock(&zombie_lock);
	for (struct zombie **zp = &zombies; *zp; zp = &(*zp)->next) {
		struct zombie *z = *zp;
		for (size_t i = 0; i < z->n; i++) {
			if (z->gone[i] || z->keys[i] != key)
				continue;
			z->gone[i] = 1;
			if (--z->live == 0) {
				*zp = z->next;
				zombie_release(z);
			}
			pthread_mutex_unlock(&zombie_lock);
			return;
		}
	}
	pthread_mutex_unlock(&zombie_lock);
}

void gg_pool_reset(void)
{
	/* Fork child: one thread, and the parent's pools are not the child's.
	 * The blocks stay mapped for the child's own pools. relaxed: as above. */
	for (int i = 0; i < MAX_BLOCKS; i++) {
		struct gg_pool *b = atomic_load_explicit(&blocks[i], memory_order_relaxed);
		if (b)
			memset(b, 0, BLOCK_POOLS * sizeof(*b));
	}
	atomic_store_explicit(&npools, 0, memory_order_relaxed);
	pthread_mutex_init(&reg_lock, NULL);
	zombies = NULL; /* the parent's; their mappings are left as they are */
	pthread_mutex_init(&zombie_lock, NULL);
	gg_pool_current_changed(); /* the forking thread's cached pool is the parent's */
}
