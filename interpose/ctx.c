/* gpuguard: which context each allocation was made in, so that the books
 * follow cuDevicePrimaryCtxReset (cudaDeviceReset), cuCtxDestroy and
 * hipDeviceReset, which free everything of that context (REAL-CUDA.md §5).
 * Contexts get small ids (16 bits, kept in each table record). */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "ctx.h"
#include "account.h"
#include "base.h"
#include "handles.h"
#include "table.h"

#define K_EMPTY 0u
#define K_TOMB 1u /* a destroyed context: skipped by lookups, reused by inserts */

struct centry {
	_Atomic uintptr_t key; /* the CUcontext, or a HIP device's key */
	_Atomic int dev;       /* written before the key is published (relaxed: the key's release orders it) */
	_Atomic int primary;   /* dev's primary context (or HIP's device-wide one); may be set later */
};

/* Slot i is id i; slot 0 is never used, so id 0 means "none". */
static struct centry reg[GG_CTX_MAX];
/* Serialises registrations and removals; lookups are lock-free. Never held
 * across a call out of the library. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
_Atomic uint32_t gg_ctx_epoch;

static uint32_t home(uintptr_t k)
{
	uint64_t h = (uint64_t)k * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(h >> 52) % (GG_CTX_MAX - 1) + 1;
}

static uint32_t next(uint32_t i)
{
	return i + 1 < GG_CTX_MAX ? i + 1 : 1;
}

uint16_t gg_ctx_find(const void *ctx, int *dev)
{
	uintptr_t k = (uintptr_t)ctx;
	if (k <= K_TOMB)
		return 0;
	uint32_t i = home(k);
	for (uint32_t n = 1; n < GG_CTX_MAX; n++, i = next(i)) {
		/* acquire: pairs with the release store in gg_ctx_id, so dev and
		 * primary are those written for this key. */
		uintptr_t seen = atomic_load_explicit(&reg[i].key, memory_order_acquire);
		if (seen == k) {
			*dev = atomic_load_explicit(&reg[i].dev, memory_order_relaxed);
			return (uint16_t)i;
		}
		if (seen == K_EMPTY)
			break;
	}
	return 0;
}

static uint16_t insert_locked(uintptr_t k, int dev, int primary)
{
	uint32_t i = home(k), tomb = 0;
	for (uint32_t n = 1; n < GG_CTX_MAX; n++, i = next(i)) {
		uintptr_t seen = atomic_load_explicit(&reg[i].key, memory_order_relaxed);
		if (seen == k) {
			/* relaxed: a flag read by resets, which ask nothing else of it */
			if (primary)
				atomic_store_explicit(&reg[i].primary, 1, memory_order_relaxed);
			return (uint16_t)i;
		}
		if (seen == K_TOMB && !tomb)
			tomb = i;
		if (seen == K_EMPTY) {
			if (!tomb)
				tomb = i;
			break;
		}
	}
	if (!tomb)
		return 0; /* full: records get id 0 and no reset will find them */
	atomic_store_explicit(&reg[tomb].dev, dev, memory_order_relaxed);
	atomic_store_explicit(&reg[tomb].primary, primary, memory_order_relaxed);
	/* release: publishes dev and primary to gg_ctx_find. */
	atomic_store_explicit(&reg[tomb].key, k, memory_order_release);
	return (uint16_t)tomb;
}

static void after_fork_child(void)
{
	gg_ctx_reset();
}

uint16_t gg_ctx_id(const void *ctx, int dev, int primary)
{
	int d;
	uint16_t id = gg_ctx_find(ctx, &d);
	if (GG_LIKELY(id != 0) && (!primary || atomic_load_explicit(&reg[id].primary, memory_order_relaxed)))
		return id;
	if ((uintptr_t)ctx <= K_TOMB || dev < 0 || dev >= GG_MAX_DEVICES)
		return 0;
	pthread_mutex_lock(&reg_lock);
	/* Registered with the first context, so the core's unit tests (which
	 * do not link this file) keep their own fork handler list. */
	static int atfork_done;
	if (!atfork_done && pthread_atfork(NULL, NULL, after_fork_child) == 0)
		atfork_done = 1;
	id = insert_locked((uintptr_t)ctx, dev, primary);
	pthread_mutex_unlock(&reg_lock);
	return id;
}

void gg_ctx_forget(const void *ctx)
{
	int dev;
	pthread_mutex_lock(&reg_lock);
	uint16_t id = gg_ctx_find(ctx, &dev);
	if (id) {
		atomic_store_explicit(&reg[id].primary, 0, memory_order_relaxed);
		/* release: the entry's fields are done with before a reuse. */
		atomic_store_explicit(&reg[id].key, K_TOMB, memory_order_release);
	}
	pthread_mutex_unlock(&reg_lock);
	/* release: a hook whose per-thread cache still names this context sees
	 * the new epoch and looks it up again (the driver may hand the same
	 * pointer to a new context). */
	atomic_fetch_add_explicit(&gg_ctx_epoch, 1, memory_order_release);
}

/* ---- dropping a context's records --------------------------------------- */

struct select {
	uint64_t ids[GG_CTX_MAX / 64];
	struct gg_ctx_drop *d;
};

static int push(struct gg_ctx_drop *d, const struct gg_record *r)
{
	return gg_records_push(&d->recs, &d->n, &d->cap, 1024, r); /* resets are rare */
}

static void take(const struct gg_record *r, void *arg)
{
	struct select *s = arg;
	/* Pinned host memory outlives the context in the driver we follow
	 * (the simulator's, tests/sim): it stays until cuMemFreeHost. */
	if (r->ctx == 0 || (r->flags & GG_REC_HOST) || !(s->ids[r->ctx / 64] & (1ull << (r->ctx % 64))))
		return;
	struct gg_record out;
	if (!gg_table_remove(gg_table, r->key, &out))
		return; /* freed meanwhile by its owner */
	if (push(s->d, &out) != 0)
		gg_table_insert(gg_table, &out); /* no room to hold it: leave it charged */
}

void gg_ctx_drop_begin(struct gg_ctx_drop *d, int dev, const void *ctx)
{
	memset(d, 0, sizeof(*d));
	struct select s = {.d = d};
	int any = 0;
	if (ctx) {
		int cd;
		uint16_t id = gg_ctx_find(ctx, &cd);
		if (id) {
			s.ids[id / 64] |= 1ull << (id % 64);
			any = 1;
		}
	} else {
		/* dev's primary context(s): the pointer may have changed over resets */
		for (uint32_t i = 1; i < GG_CTX_MAX; i++)
			if (atomic_load_explicit(&reg[i].key, memory_order_acquire) > K_TOMB &&
			    atomic_load_explicit(&reg[i].primary, memory_order_relaxed) &&
			    atomic_load_explicit(&reg[i].dev, memory_order_relaxed) == dev) {
				s.ids[i / 64] |= 1ull << (i % 64);
				any = 1;
			}
	}
	/* Out of the table before the driver frees: it may hand the same
	 * addresses to another thread at once (DESIGN.md §3). */
	if (any && gg_table)
		gg_table_foreach(gg_table, take, &s);
}

void gg_ctx_drop_end(struct gg_ctx_drop *d, int ok, int (*survived)(const struct gg_record *))
{
	for (size_t i = 0; i < d->n; i++) {
		struct gg_record *r = &d->recs[i];
		/* Kept by the driver: back into the table as it was (a failed
		 * free's path), its address not yet reusable by anyone. */
		int kept = !ok || (survived && survived(r));
		if (!kept && (r->key >> 62) == GG_NS_VMM)
			gg_handle_forget(r->key ^ ((uint64_t)GG_NS_VMM << 62));
		gg_account_freed(r, !kept);
	}
	if (d->recs)
		munmap(d->recs, d->cap * sizeof(*d->recs));
	d->recs = NULL;
	d->n = d->cap = 0;
}

void gg_ctx_reset(void)
{
	/* Fork child: contexts do not survive fork. */
	for (uint32_t i = 0; i < GG_CTX_MAX; i++) {
		atomic_store_explicit(&reg[i].key, K_EMPTY, memory_order_relaxed);
		atomic_store_explicit(&reg[i].primary, 0, memory_order_relaxed);
	}
	pthread_mutex_init(&reg_lock, NULL);
	atomic_fetch_add_explicit(&gg_ctx_epoch, 1, memory_order_relaxed);
}
