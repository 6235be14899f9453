/* gpuguard: the leaf layer (base.c). The clock, the thread id, the futex
 * and the per-thread hook state, with the process-wide words every layer
 * reads: everything else calls down into these, and they call nothing of
 * ours. Every other header of interpose/ includes it. */
#ifndef GPUGUARD_BASE_H
#define GPUGUARD_BASE_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "gpuguard.h"

#define GG_EXPORT __attribute__((visibility("default")))
#define GG_MAX_DEVICES GPUGUARD_MAX_DEVICES
#define GG_UNLIMITED UINT64_MAX

#define GG_MIB (1024ull * 1024ull)
#define GG_PAGE (2 * GG_MIB) /* GPU page since Pascal (DESIGN.md §5) */

#define GG_LIKELY(x) __builtin_expect(!!(x), 1)
#define GG_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define GG_TLS __thread __attribute__((tls_model("initial-exec")))

/* The live allocation table (table.c), mapped by initialisation; NULL
 * when that failed. Declared hidden, as it is defined: every allocation
 * and free loads it straight from memory, not through its address first
 * (issue 24). */
extern struct gg_table *gg_table __attribute__((visibility("hidden")));
/* CLOCK_MONOTONIC_COARSE at initialisation, in ms: gg_now_ms's zero.
 * Declared hidden, as it is defined: an inline subtracts it straight from
 * memory, not through its address first (issue 24). */
extern uint64_t gg_start_ms __attribute__((visibility("hidden")));
/* Initialisation's progress (init.c writes it): 0 = not started,
 * 1 = running, 2 = done. */
extern _Atomic int gg_init_state;

/* CLOCK_MONOTONIC_COARSE in ms: a few ns from the vDSO instead of ~20, for
 * ages and rate limits that only need milliseconds (it ticks every 1-4 ms).
 * Inline, as gg_now_ms: the hot path reads it several times per pair. */
static inline uint64_t gg_coarse_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	/* tv_nsec < 10^9 fits 32 bits, whose division by a constant is one
	 * multiply and a shift, not the 64-bit one's four instructions */
	return (uint64_t)ts.tv_sec * 1000 + (uint32_t)ts.tv_nsec / 1000000u;
}
/* Milliseconds since initialisation (the coarse clock). */
static inline uint64_t gg_now_ms(void)
{
	return gg_coarse_ms() - gg_start_ms;
}
/* CLOCK_MONOTONIC in ms and ns, for deadlines. */
uint64_t gg_mono_ms(void);
uint64_t gg_mono_ns(void);
/* CLOCK_REALTIME in ms (epoch), for what other processes read. */
uint64_t gg_realtime_ms(void);

/* The per-thread words every hook moves, in one thread-local block
 * (issue 24): in a shared library each initial-exec thread-local variable
 * costs its own load of its offset (from the GOT) in every function that
 * uses it; one block costs one, which the hooks keep in a register. The
 * old names are macros for the fields, so that their users read as they
 * did. Only this thread reads or writes its block, and a signal handler
 * on it, which the users order with signal fences where it matters
 * (signal.c, account.c's gg_hook_sleep). */
struct gg_pool;
/* A hook file's cache of a device's current pool's registry entry, for a
 * thread (pool.h's gg_pool_home_hit and gg_pool_home_fill say when it
 * holds). Filled only with an entry of dev. */
struct gg_pool_home {
	struct gg_pool *p;
	uint32_t gen; /* gg_pool_current_gen when it was filled */
	int32_t left; /* hits until the runtime is asked again; 0 or below: ask */
	int16_t dev;
};
struct gg_self {
	/* ready, then hook_active: a hook's entry tests both with one 16-bit
	 * compare (shape.h, gg_enter_gate). hook_active, then runtime:
	 * GG_ENTER's two stores of constants merge into one. */
	uint8_t ready;       /* this thread saw gg_hooks_ready (shape.h) */
	uint8_t hook_active; /* gg_hook_active, below */
	uint8_t runtime;     /* gg_cur_runtime, below */
	uint8_t sig_nested;  /* gg_sig_nested (signal.h) */
	uint16_t ctx;        /* gg_cur_ctx (account.h) */
	uint32_t tid;        /* gg_gettid's cache: 0 = not asked yet */
	/* The thread's statistics stripe (ceiling.h), the tid's low bits, as
	 * its byte offset into a device's stripes: the count's address is then
	 * one add, not four instructions (issue 24). 0 until the tid is asked. */
	uint16_t stripe_off;
	/* The request the hook is about to charge (dump.h's note). */
	enum gpuguard_api noted_api;
	uint64_t noted_size;
	uint8_t thread_counted;  /* gg_thread_counted (ceiling.h) */
	uint8_t ceiling_near;    /* gg_ceiling_near (ceiling.h) */
	uint8_t footprint_probe; /* gg_footprint_probe (footprint.h) */
	uint8_t dump_armed;      /* this thread saw dumps armed (dump.h) */
	/* hook_cuda.c's cache of the current context (current_device). */
	void *cu_ctx;
	uint32_t cu_epoch;
	uint16_t cu_id;
	int16_t cu_dev;
	uint16_t cu_left; /* allocations until the driver is asked again; 0: ask */
	uint8_t cu_moved; /* a context hook ran on this thread since the last ask */
	/* hook_cuda.c's cache of a device's current pool's registry entry
	 * (pool.h's gg_pool_home_*), in the block, where a cache of the pool's
	 * handle and pool.h's gg_pool_last were two thread-locals of their own
	 * (issue 24). */
	struct gg_pool_home cu_pool;
	/* gg_footprint_countdown (footprint.h), from GG_FOOTPRINT_FIRST: in the
	 * block, not a thread-local of its own, so that an allocation's tick
	 * needs no load of its own variable's offset (issue 24). */
	int64_t footprint_countdown;
	/* hook_hip.c's, as cu_pool above. */
	struct gg_pool_home hip_pool;
	/* hook_hip.c's cache of the thread's current HIP device
	 * (current_device), as the CUDA side's cu_* above. */
	int16_t hip_dev;
	uint16_t hip_left; /* allocations until the runtime is asked again; 0: ask */
	uint8_t hip_moved; /* a device-changing hook ran on this thread since the last ask */
	uint8_t hip_known; /* hip_dev holds an answer of the runtime's */
};
/* The footprint's countdown at a thread's start (footprint.h says why):
 * here, as the block's initialiser needs it (base.c). */
#define GG_FOOTPRINT_FIRST (INT64_MIN / 4)
extern GG_TLS struct gg_self gg_self;

/* The statistics stripes (ceiling.h): how many a device has, and the log2
 * of each one's size (a cache line), which gg_gettid_slow turns a tid into
 * gg_self.stripe_off with. */
#define GG_STRIPES 16
#define GG_STRIPE_SHIFT 6

/* The kernel thread id, cached per thread (0 = not asked yet; the slow
 * path asks the kernel). Inline: the hot path wants it several times per
 * pair. */
#define gg_tid_cache (gg_self.tid)
uint32_t gg_gettid_slow(void);
static inline uint32_t gg_gettid(void)
{
	uint32_t t = gg_tid_cache;
	return GG_LIKELY(t != 0) ? t : gg_gettid_slow();
}
/* Fork child: the thread id cached on this thread is the parent's. */
void gg_base_after_fork_child(void);

/* The futex calls the library makes: wait while *w == val (at most ts, NULL
 * = no limit) and wake up to n. private_: the word is not shared with
 * other processes. Their results are not needed: every caller re-reads its
 * word after waking. */
void gg_futex_wait(_Atomic uint32_t *w, uint32_t val, const struct timespec *ts, int private_);
void gg_futex_wake(_Atomic uint32_t *w, int n, int private_);

/* Re-entry guard: a call made while our hook runs on this thread passes
 * through; so does every call into a copy of the library that found another
 * copy governing the process (gg_inert: set once, at initialisation). */
#define gg_hook_active (gg_self.hook_active)
extern _Atomic int gg_inert;
/* The runtime whose hook runs on this thread (GG_RT_*, set by GG_ENTER):
 * a device bound for the pod is named by that runtime's UUID, since CUDA
 * device 0 and HIP device 0 can be different cards (issue 9, finding 6). */
#define GG_RT_CUDA 0
#define GG_RT_HIP 1
#define gg_cur_runtime (gg_self.runtime)
/* Set at the first real pointer resolved or offered for a governed name
 * (resolve.c): the process has reached a GPU runtime. Exit dumps come only
 * from such processes (issue 10, finding 12). */
extern _Atomic int gg_gpu_touched;
/* 1 once exit() has begun: an atexit handler of ours, registered at the
 * process's first call through a hook (gg_watch_exit, from resolve.c). An
 * exit handler registered in main's lifetime runs before every library's
 * destructors (_dl_fini, registered when main was entered); one registered
 * from our constructor would run after them. relaxed: a flag, ordering
 * nothing else; a hook racing exit() on another thread sees it late. */
extern _Atomic int gg_exiting;
void gg_watch_exit(void);

#endif
