/* gpuguard: per-device books and the ceiling. A reservation is one
 * compare-and-swap on the device's `used` word that refuses to pass the
 * limit, so two threads racing for the last bytes can never both get them
 * (DESIGN.md §3); every subtraction saturates at zero. */
#include "internal.h"

struct gg_device gg_devices[GG_MAX_DEVICES];

void gg_ceiling_configure(void)
{
	for (int d = 0; d < GG_MAX_DEVICES; d++) {
		const struct gg_limit_spec *s = &gg_opt.limits.dev[d];
		uint64_t lim = GG_UNLIMITED;
		if (gg_opt.limit_bad)
			lim = 0;
		else if (s->kind == GG_LIMIT_BYTES)
			lim = s->value;
		else if (s->kind == GG_LIMIT_PERCENT)
			lim = GG_LIMIT_UNRESOLVED;
		/* relaxed: configure runs during initialisation, before any hook
		 * reads the limit (gg_init_once publishes it with release). */
		atomic_store_explicit(&gg_devices[d].limit, lim, memory_order_relaxed);
	}
}

int gg_ceiling_unresolved(int dev)
{
	return atomic_load_explicit(&gg_devices[dev].limit, memory_order_relaxed) == GG_LIMIT_UNRESOLVED;
}

void gg_ceiling_resolve(int dev, uint64_t physical_total)
{
	const struct gg_limit_spec *s = &gg_opt.limits.dev[dev];
	if (s->kind != GG_LIMIT_PERCENT)
		return;
	unsigned __int128 v = (unsigned __int128)physical_total * s->value / 10000;
	uint64_t expect = GG_LIMIT_UNRESOLVED;
	/* Every thread computes the same value, so whichever CAS wins is right;
	 * relaxed because the limit is a plain number read with relaxed loads. */
	atomic_compare_exchange_strong_explicit(&gg_devices[dev].limit, &expect, (uint64_t)v, memory_order_relaxed,
	                                        memory_order_relaxed);
}

void gg_ceiling_count_refusal(int dev, enum gpuguard_refusal why)
{
	atomic_fetch_add_explicit(&gg_devices[dev].refused[why], 1, memory_order_relaxed);
}

static struct gg_stripe *my_stripe(int dev)
{
	return &gg_devices[dev].stripe[gg_gettid() % GG_STRIPES];
}

/* relaxed throughout: statistics, summed by readers that want a snapshot,
 * never used to decide anything. */
void gg_ceiling_count_alloc(int dev, uint64_t size)
{
	struct gg_stripe *s = my_stripe(dev);
	atomic_fetch_add_explicit(&s->allocs, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->live_bytes, (int64_t)size, memory_order_relaxed);
}

void gg_ceiling_count_free(int dev, uint64_t size)
{
	struct gg_stripe *s = my_stripe(dev);
	atomic_fetch_add_explicit(&s->frees, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&s->live_bytes, (int64_t)size, memory_order_relaxed);
}

void gg_ceiling_read(int dev, struct gpuguard_device_stats *out)
{
	struct gg_device *g = &gg_devices[dev];
	uint64_t lim = atomic_load_explicit(&g->limit, memory_order_relaxed);
	out->limit = lim == GG_LIMIT_UNRESOLVED ? GG_UNLIMITED : lim;
	out->used = atomic_load_explicit(&g->used, memory_order_relaxed);
	out->peak = atomic_load_explicit(&g->peak, memory_order_relaxed);
	out->pool_reserved = atomic_load_explicit(&g->pool_reserved, memory_order_relaxed);
	out->untracked_frees = atomic_load_explicit(&g->untracked_frees, memory_order_relaxed);
	for (int r = 0; r < GPUGUARD_REFUSED_COUNT; r++)
		out->refused[r] = atomic_load_explicit(&g->refused[r], memory_order_relaxed);
	out->pool_overshoot = atomic_load_explicit(&g->pool_overshoot, memory_order_relaxed);
	int64_t allocs = 0, frees = 0, live = 0;
	for (int i = 0; i < GG_STRIPES; i++) {
		allocs += atomic_load_explicit(&g->stripe[i].allocs, memory_order_relaxed);
		frees += atomic_load_explicit(&g->stripe[i].frees, memory_order_relaxed);
		live += atomic_load_explicit(&g->stripe[i].live_bytes, memory_order_relaxed);
	}
	out->allocs = (uint64_t)allocs;
	out->frees = (uint64_t)frees;
	/* a snapshot taken while other threads count can be off by their
	 * in-flight pairs; never report that as negative */
	out->live_bytes = live > 0 ? (uint64_t)live : 0;
}

static void raise_peak(struct gg_device *g, uint64_t now)
{
	uint64_t p = atomic_load_explicit(&g->peak, memory_order_relaxed);
	/* relaxed: peak is a monotone statistic; it orders nothing else. */
	while (now > p &&
	       !atomic_compare_exchange_weak_explicit(&g->peak, &p, now, memory_order_relaxed, memory_order_relaxed))
		;
}

int gg_ceiling_try_reserve(int dev, uint64_t bytes)
{
	struct gg_device *g = &gg_devices[dev];
	uint64_t lim = atomic_load_explicit(&g->limit, memory_order_relaxed);
	if (GG_UNLIKELY(gg_opt.limit_bad))
		return -1;
	uint64_t cur = atomic_load_explicit(&g->used, memory_order_relaxed);
	uint64_t next;
	do {
		if (__builtin_add_overflow(cur, bytes, &next) || next > lim)
			return -1;
		/* relaxed: the CAS itself is the whole decision (check and take in
		 * one step); no other memory is published through `used`. */
	} while (
	    !atomic_compare_exchange_weak_explicit(&g->used, &cur, next, memory_order_relaxed, memory_order_relaxed));
	raise_peak(g, next);
	return 0;
}

int gg_ceiling_reserve(int dev, uint64_t bytes)
{
	if (gg_ceiling_try_reserve(dev, bytes) == 0)
		return 0;
	gg_ceiling_count_refusal(dev, gg_opt.limit_bad ? GPUGUARD_REFUSED_CONFIG : GPUGUARD_REFUSED_CEILING);
	return -1;
}

void gg_ceiling_release(int dev, uint64_t bytes)
{
	struct gg_device *g = &gg_devices[dev];
	uint64_t cur = atomic_load_explicit(&g->used, memory_order_relaxed);
	uint64_t next;
	do {
		/* Saturate: a counter that wrapped below zero would read as ~16 EiB
		 * used and refuse everything (HAMi#1181). */
		next = cur > bytes ? cur - bytes : 0;
	} while (
	    !atomic_compare_exchange_weak_explicit(&g->used, &cur, next, memory_order_relaxed, memory_order_relaxed));
}

void gg_ceiling_force(int dev, uint64_t bytes)
{
	struct gg_device *g = &gg_devices[dev];
	uint64_t now = atomic_fetch_add_explicit(&g->used, bytes, memory_order_relaxed) + bytes;
	raise_peak(g, now);
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
	/* Saturate: near 2^64, v + to - 1 would wrap to a tiny charge that any
	 * ceiling lets through; UINT64_MAX is refused like the request. */
	if (v > UINT64_MAX - (to - 1))
		return UINT64_MAX;
	return (v + to - 1) / to * to;
}

uint64_t gg_ceiling_charge_size(enum gpuguard_api api, uint64_t size)
{
	/* What the card really gives up (DESIGN.md §5): requests over 1 MiB take
	 * whole 2 MiB pages; small ones are packed, at 512-byte alignment. VMM
	 * sizes are already granularity multiples. */
	if (api == GPUGUARD_API_CU_MEM_CREATE || api == GPUGUARD_API_HIP_MEM_CREATE)
		return size;
	if (size > GG_MIB)
		return round_up(size, GG_PAGE);
	return round_up(size, 512);
}

void gg_ceiling_meminfo(int dev, uint64_t real_free, uint64_t real_total, uint64_t *free_out, uint64_t *total_out)
{
	/* total = min(ceiling, physical); free = min(physical free, ceiling - used),
	 * never below zero, also when usage is over the ceiling (DESIGN.md §2). */
	struct gg_device *g = &gg_devices[dev];
	uint64_t lim = atomic_load_explicit(&g->limit, memory_order_relaxed);
	uint64_t used = atomic_load_explicit(&g->used, memory_order_relaxed);
	if (lim == GG_LIMIT_UNRESOLVED)
		lim = GG_UNLIMITED;
	uint64_t total = real_total < lim ? real_total : lim;
	uint64_t room = lim > used ? lim - used : 0;
	*total_out = total;
	*free_out = real_free < room ? real_free : room;
}

void gg_ceiling_reset(void)
{
	for (int d = 0; d < GG_MAX_DEVICES; d++) {
		struct gg_device *g = &gg_devices[d];
		atomic_store_explicit(&g->used, 0, memory_order_relaxed);
		atomic_store_explicit(&g->peak, 0, memory_order_relaxed);
		atomic_store_explicit(&g->pool_reserved, 0, memory_order_relaxed);
		atomic_store_explicit(&g->untracked_frees, 0, memory_order_relaxed);
		for (int i = 0; i < GG_STRIPES; i++) {
			atomic_store_explicit(&g->stripe[i].allocs, 0, memory_order_relaxed);
			atomic_store_explicit(&g->stripe[i].frees, 0, memory_order_relaxed);
			atomic_store_explicit(&g->stripe[i].live_bytes, 0, memory_order_relaxed);
		}
		for (int r = 0; r < GPUGUARD_REFUSED_COUNT; r++)
			atomic_store_explicit(&g->refused[r], 0, memory_order_relaxed);
		atomic_store_explicit(&g->pool_overshoot, 0, memory_order_relaxed);
	}
}
