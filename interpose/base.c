/* gpuguard: the leaf layer (base.h). Clocks, the thread id, the futex and
 * the words that say where a thread and the process stand. Nothing here
 * calls another file of ours, so every other file may call it. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base.h"

struct gg_table *gg_table;
uint64_t gg_start_ms;
_Atomic int gg_init_state;
GG_TLS struct gg_self gg_self = {.footprint_countdown = GG_FOOTPRINT_FIRST};
_Atomic int gg_inert;
/* relaxed: a flag read once, by the exit destructor (dump.c); it orders
 * nothing. A governed call racing with exit in another thread may be
 * missed, which costs one exit dump at most. */
_Atomic int gg_gpu_touched;
_Atomic int gg_exiting;

static void note_exiting(void)
{
	atomic_store_explicit(&gg_exiting, 1, memory_order_relaxed);
}

void gg_watch_exit(void)
{
	static _Atomic int once;
	/* relaxed: a once-only flag guarding the registration */
	if (!atomic_exchange_explicit(&once, 1, memory_order_relaxed))
		atexit(note_exiting);
}

static uint64_t ms_of(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t gg_mono_ms(void)
{
	return ms_of(CLOCK_MONOTONIC);
}

uint64_t gg_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t gg_realtime_ms(void)
{
	return ms_of(CLOCK_REALTIME);
}

uint32_t gg_gettid_slow(void)
{
	gg_tid_cache = (uint32_t)syscall(SYS_gettid);
	gg_self.stripe_off = (uint16_t)((gg_tid_cache % GG_STRIPES) << GG_STRIPE_SHIFT);
	return gg_tid_cache;
}

void gg_base_after_fork_child(void)
{
	gg_tid_cache = 0;
}

void gg_futex_wait(_Atomic uint32_t *w, uint32_t val, const struct timespec *ts, int private_)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT | (private_ ? FUTEX_PRIVATE_FLAG : 0), val, ts, NULL, 0);
}

void gg_futex_wake(_Atomic uint32_t *w, int n, int private_)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE | (private_ ? FUTEX_PRIVATE_FLAG : 0), n, NULL, NULL, 0);
}
