/* gpuguard: pod scope's obituaries (shared_obit.c). */
#ifndef GG_SHARED_OBIT_H
#define GG_SHARED_OBIT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "shared_file.h"
#include "shared_guard.h"

/* Host memory as the dump's host record and the obituary show it: taken by
 * dump_host.c (gg_dump_host_sample), which sits above this file. */
struct gg_host_sample {
	uint64_t rss;
	int version; /* 2, 1, 0 = no cgroup found */
	int have_lim, have_use, have_oom, have_inactive;
	uint64_t lim, use, oom, inactive_file;
};
/* How the obituary samples host memory: dump.c's gg_dump_host_sample_armed,
 * which sits above this file; set by init.c (none: no host figures). */
typedef int (*gg_host_sample_fn)(struct gg_host_sample *h);
void gg_shared_set_host_sample(gg_host_sample_fn fn);
/* A refusal of ours, counted in our slot for our obituary (which it
 * refreshes, rate-limited). */
void gg_shared_note_refusal(void);
/* The pod's recent deaths (region.h's ring), oldest first; at most max. */
struct gpuguard_region_death;
size_t gg_shared_deaths(struct gpuguard_region_death *out, size_t max);

/* When our obituary was last sampled (gg_now_ms), for the rate limit. */
extern _Atomic uint64_t gg_shared_obit_last_ms;
/* Samples our obituary, if the CAS from last to now wins (the slow path of
 * gg_shared_obit_refresh). */
void gg_shared_obit_sample(uint64_t now, uint64_t last);
/* Writes slot s's obituary to the deaths ring through fd (the slot's owner
 * is dead and its lock is ours); now: the wall clock, ms. */
void gg_shared_obit_write(int fd, unsigned s, uint64_t now);

/* Our obituary, refreshed at most every GPUGUARD_OBIT_MS: on every charge
 * change (gg_shared_pod_changed), so inline, with no stack frame until the
 * rate limit lets it through (issue 12, step 7). */
static inline __attribute__((always_inline)) void gg_shared_obit_refresh(void)
{
	/* relaxed: me is ours, published to this thread by gg_shared_attached()'s
	 * acquire (every caller got here through a bound budget); detached is
	 * a flag read for a best-effort skip at exit. A region lost under us
	 * may have given our slot to someone else: not a word into it. */
	if (!gg_shared_me || atomic_load_explicit(&gg_shared_detached, memory_order_relaxed) || gg_shared_region_lost())
		return;
	/* the coarse monotonic clock for the rate limit (a few ns on every
	 * charge change); the wall clock only for the record itself */
	uint64_t now = gg_now_ms(), last = atomic_load_explicit(&gg_shared_obit_last_ms, memory_order_relaxed);
	/* relaxed: a rate limit; the CAS in obit_sample picks one sampler. */
	if (last && now >= last && now - last < GPUGUARD_OBIT_MS)
		return;
	gg_shared_obit_sample(now, last);
}

#endif
