/* gpuguard: the footprint the card shows (footprint.c, issue 22): the
 * "runtime" category. */
#ifndef GG_FOOTPRINT_H
#define GG_FOOTPRINT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* The "runtime" category: what the driver holds for this process beyond
 * its allocation calls (NVML's per-process used memory less the books),
 * charged to the same budget, so the ceiling holds books + runtime. */
typedef int (*gg_footprint_uuid_fn)(int dev, uint8_t uuid[16]);
/* Who device dev is (hook_cuda.c's driver UUID), for NVML. */
void gg_footprint_set_uuid(gg_footprint_uuid_fn fn);
/* Around this process's first context on dev: the card's PIDs before, so
 * the one that appears after is ours (NVML's PIDs are the host's). */
void gg_footprint_ctx_before(int dev);
/* Reads the driver's figure for us on dev and sets the runtime charge to
 * it less the books (plus headroom and what cuCtxSetLimit foresaw).
 * how: GG_FP_AFTER_CTX, a context was just made (the PID diff may run);
 * GG_FP_MAY_LOWER, the charge may go down (a refusal: this thread's request
 * is not in the books). Otherwise it only goes up: the books hold grants
 * whose driver call has not yet returned (this thread's tick, and other
 * threads' in flight), which the driver's figure does not show yet, so
 * the difference reads low. Another thread reconciling dev does this one's
 * work after (footprint.c). Slow: NVML calls. */
enum { GG_FP_AFTER_CTX = 1, GG_FP_MAY_LOWER = 2 };
void gg_footprint_reconcile(int dev, int how);
/* A module or library loaded since the device's last reconcile (bit d):
 * under CUDA_MODULE_LOADING=LAZY its code goes to the card at the first
 * use of a function, so the first lookup after a load reconciles (hooks
 * read the word first: one load when nothing is pending). */
extern _Atomic uint64_t gg_footprint_pending;
void gg_footprint_first_use(int dev);
/* The hot path's only cost: a per-thread countdown of bytes allocated;
 * below zero, the slow path reconciles (rate-limited per device). It
 * starts at GG_FOOTPRINT_FIRST, far below zero, so that a thread's first
 * grant takes the slow path, which also counts the thread among those that
 * could free (gg_ceiling_note_thread: issue 24, one per-thread check on
 * the allocation path, not two) and then goes on as from GG_FOOTPRINT_STEP. */
#define GG_FOOTPRINT_STEP ((int64_t)(64 * GG_MIB))
/* GG_FOOTPRINT_FIRST: base.h, with the countdown's place in gg_self */
#define GG_FOOTPRINT_MIN_MS 100
#define gg_footprint_countdown (gg_self.footprint_countdown) /* base.h */
void gg_footprint_tick_slow(int dev, uint64_t charge);
/* Set on a thread whose tick read the card's processes before this
 * allocation's driver call, to tell our PID from others' (footprint.c);
 * probe_end reads them again after it: made = the bytes the call took, or
 * 0 when it failed. */
#define gg_footprint_probe (gg_self.footprint_probe) /* base.h */
void gg_footprint_probe_end(int dev, uint64_t made);
static inline void gg_footprint_after(int dev, uint64_t made)
{
	if (GG_UNLIKELY(gg_footprint_probe))
		gg_footprint_probe_end(dev, made);
}
/* A grant that left less than GG_CEILING_NEAR of room: the runtime charge
 * is read fresh (at most every GG_FOOTPRINT_NEAR_MS) before it stands, so
 * growth the ticks missed (a library's lazy load) is charged before the
 * last bytes under the ceiling are given out. 0: the grant stands; -1: it
 * was given back and no longer fits (the caller's refusal path follows). */
#define GG_FOOTPRINT_NEAR_MS 1
int gg_footprint_near_slow(int dev, uint64_t charge);
static inline void gg_footprint_tick(int dev, uint64_t charge)
{
	/* in unsigned arithmetic: a charge past 2^62 (an unlimited ceiling)
	 * must not overflow a signed word */
	gg_footprint_countdown = (int64_t)((uint64_t)gg_footprint_countdown - charge);
	if (GG_UNLIKELY(gg_footprint_countdown < 0))
		gg_footprint_tick_slow(dev, charge);
}
/* The target runtime charge, from the driver's figure, the books, the
 * foreseen heap/FIFO and the headroom (pure: unit-tested). */
uint64_t gg_footprint_target(uint64_t driver, uint64_t books, uint64_t foreseen, uint64_t headroom);
/* Local memory for a per-thread stack (pure): stack rounded up to
 * GG_FOOTPRINT_STACK_ALIGN × resident threads per SM × SMs. */
#define GG_FOOTPRINT_STACK_ALIGN 16u
uint64_t gg_footprint_local_bytes(uint64_t stack, uint64_t threads_per_sm, uint64_t sms);
/* cuCtxSetLimit's pre-charge: begin says how much the call will grow what
 * the driver holds (0: nothing, nothing held); when not 0, the device's
 * reconcile lock is held until end, and the caller admits `grow` with
 * gg_account_begin (refusing the call on failure: end(l, 0, 0)). end: ok
 * = the driver took the limit; charged = the growth was admitted. */
enum gg_fp_limit { GG_FP_STACK, GG_FP_FIFO, GG_FP_HEAP }; /* what a limit sizes (CUDA's CUlimit order) */
struct gg_footprint_limit {
	int dev, limit;
	uint64_t grow, local;
};
uint64_t gg_footprint_limit_begin(int dev, int limit, uint64_t value, uint64_t current, uint64_t threads_per_sm,
                                  uint64_t sms, struct gg_footprint_limit *out);
void gg_footprint_limit_end(struct gg_footprint_limit *l, int ok, int charged);
struct gg_footprint_stats {
	uint64_t charged;  /* the runtime charge now */
	uint64_t measured; /* the driver's figure less the books, last read */
	uint64_t driver;   /* the driver's per-process figure, last read; 0 = never */
	uint64_t foreseen; /* pre-charged heap/FIFO the driver does not show yet */
	uint64_t reconciles;
	uint64_t over; /* runtime the ceiling had no room for (the footprint passed it) */
};
void gg_footprint_read(int dev, struct gg_footprint_stats *out);
/* Whether a refusal of request bytes on dev is the runtime's doing: the
 * books alone would have fit under the ceiling. */
int gg_footprint_refusal_is_runtime(int dev, uint64_t request);
/* The driver's own limit on dev (MPS v3 memory partitioning: the hard
 * limit of this process's cgroup or one above it, nvmlDeviceGetMemoryLimits_v1),
 * at the last reconcile: 1 and *out where one was found, else 0. */
struct gg_footprint_dmem {
	uint64_t hard, soft; /* the binding cgroup's limits */
	uint64_t used;       /* what that cgroup used then (everyone in it) */
	uint64_t own;        /* gpuguard's own ceiling (GG_UNLIMITED: none) */
	uint64_t ceiling;    /* the ceiling kept: min(own, hard - what others in the cgroup use) */
	int binds;           /* the driver's limit set the ceiling (ceiling < own) */
};
int gg_footprint_driver_limit(int dev, struct gg_footprint_dmem *out);
/* Fork child: figures and PID forgotten. */
void gg_footprint_reset(void);

#endif
