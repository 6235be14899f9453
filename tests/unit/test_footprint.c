/* gpuguard: unit tests for footprint.c, the runtime category (issue 22):
 * the reconcile's target, the local-memory formula and cuCtxSetLimit's
 * pre-charge (admitted, refused past the ceiling, undone when the driver
 * refuses), and which refusals are the runtime's doing. No NVML here: the
 * reconcile finds none and leaves the charge as the pre-charge set it. */
#define GG_OPTIONS_WRITER /* these tests set options (options.h) */
#include <stdatomic.h>

#include "../harness.h"
#include "account.h"
#include "base.h"
#include "ceiling.h"
#include "footprint.h"
#include "options.h"

#define KI 1024ull
#define MI (1024ull * KI)
#define GI (1024ull * MI)

static uint64_t used(int dev)
{
	return atomic_load(&gg_devices[dev].used);
}

static void setup(int dev, uint64_t limit)
{
	memset(&gg_opt.limits, 0, sizeof(gg_opt.limits));
	gg_opt.limit_bad = 0;
	gg_opt.limit_set = limit != GG_UNLIMITED;
	gg_opt.scope_process = 1;
	gg_opt.runtime = 1;
	gg_opt.runtime_headroom = 32 * MI;
	gg_opt.dump_max = 0; /* the refusals here write no dump */
	gg_ceiling_configure();
	gg_ceiling_reset();
	gg_footprint_reset();
	atomic_store(&gg_devices[dev].limit, limit);
}

static uint64_t charged(int dev)
{
	struct gg_footprint_stats s;
	gg_footprint_read(dev, &s);
	return s.charged;
}

TEST(target_is_driver_less_books_plus_headroom)
{
	/* nothing beyond the books: no runtime, and no headroom held */
	CHECK_EQ_U64(gg_footprint_target(100 * MI, 100 * MI, 0, 32 * MI), 0);
	/* books above the driver (in flight, managed memory): never negative */
	CHECK_EQ_U64(gg_footprint_target(100 * MI, 300 * MI, 0, 32 * MI), 0);
	/* a context of 526 MiB beside 1 GiB of allocations */
	CHECK_EQ_U64(gg_footprint_target(GI + 526 * MI, GI, 0, 32 * MI), 558 * MI);
	CHECK_EQ_U64(gg_footprint_target(GI + 526 * MI, GI, 0, 0), 526 * MI);
	/* a heap set by cuCtxSetLimit and not taken yet is held */
	CHECK_EQ_U64(gg_footprint_target(GI + 10 * MI, GI, 64 * MI, 0), 64 * MI);
	CHECK_EQ_U64(gg_footprint_target(GI, GI, 64 * MI, 32 * MI), 64 * MI);
}

TEST(local_memory_formula)
{
	/* REAL-CUDA.md §7: 1 KiB x 2048 x 132 SMs = 264 MiB */
	CHECK_EQ_U64(gg_footprint_local_bytes(1024, 2048, 132), 264 * MI);
	CHECK_EQ_U64(gg_footprint_local_bytes(4096, 2048, 132), 1056 * MI);
	/* the stack is rounded up to the driver's granularity */
	CHECK_EQ_U64(gg_footprint_local_bytes(1000, 1, 1), 1008);
	CHECK_EQ_U64(gg_footprint_local_bytes(0, 2048, 132), 0);
	/* a silly stack saturates (and is refused), never wraps */
	CHECK_EQ_U64(gg_footprint_local_bytes(UINT64_MAX - 100, 2048, 132), UINT64_MAX);
}

TEST(stack_limit_precharged_and_refused_past_the_ceiling)
{
	setup(0, 1536 * MI);
	struct gg_footprint_limit l;
	/* 1 KiB -> 4 KiB on an H200-like card: 792 MiB more local memory */
	uint64_t grow = gg_footprint_limit_begin(0, GG_FP_STACK, 4096, 1024, 2048, 132, &l);
	CHECK_EQ_U64(grow, 792 * MI);
	CHECK_EQ_INT(gg_account_begin(0, grow), 0);
	gg_footprint_limit_end(&l, 1, 1);
	CHECK_EQ_U64(used(0), 792 * MI);
	CHECK_EQ_U64(charged(0), 792 * MI);
	/* local memory never shrinks: a smaller stack grows nothing */
	CHECK_EQ_U64(gg_footprint_limit_begin(0, GG_FP_STACK, 2048, 4096, 2048, 132, &l), 0);
	/* nor does one the driver reports lower than what we saw grow */
	CHECK_EQ_U64(gg_footprint_limit_begin(0, GG_FP_STACK, 4096, 1024, 2048, 132, &l), 0);
	/* 4 KiB -> 8 KiB: 1056 MiB more, past the 1.5 GiB ceiling: refused,
	 * counted, and nothing stays charged */
	grow = gg_footprint_limit_begin(0, GG_FP_STACK, 8192, 4096, 2048, 132, &l);
	CHECK_EQ_U64(grow, 1056 * MI);
	CHECK_EQ_INT(gg_account_begin(0, grow), -1);
	gg_footprint_limit_end(&l, 0, 0);
	CHECK_EQ_U64(used(0), 792 * MI);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].refused[GPUGUARD_REFUSED_CEILING]), 1);
	/* the refusal of a 1 GiB allocation now is the runtime's doing (the
	 * books alone hold nothing), one of 3 GiB is not */
	CHECK_EQ_INT(gg_footprint_refusal_is_runtime(0, GI), 1);
	CHECK_EQ_INT(gg_footprint_refusal_is_runtime(0, 3 * GI), 0);
	setup(0, GG_UNLIMITED);
}

TEST(driver_refuses_the_limit)
{
	setup(0, 2 * GI);
	struct gg_footprint_limit l;
	uint64_t grow = gg_footprint_limit_begin(0, GG_FP_HEAP, 64 * MI, 8 * MI, 0, 0, &l);
	CHECK_EQ_U64(grow, 56 * MI);
	CHECK_EQ_INT(gg_account_begin(0, grow), 0);
	CHECK_EQ_U64(used(0), 56 * MI);
	gg_footprint_limit_end(&l, 0, 1); /* the driver said no: the charge goes back */
	CHECK_EQ_U64(used(0), 0);
	CHECK_EQ_U64(charged(0), 0);
	/* accepted: held as foreseen until the driver shows it */
	grow = gg_footprint_limit_begin(0, GG_FP_FIFO, 16 * MI, MI, 0, 0, &l);
	CHECK_EQ_INT(gg_account_begin(0, grow), 0);
	gg_footprint_limit_end(&l, 1, 1);
	struct gg_footprint_stats s;
	gg_footprint_read(0, &s);
	CHECK_EQ_U64(s.charged, 15 * MI);
	CHECK_EQ_U64(s.foreseen, 15 * MI);
	/* other limits grow nothing we know of */
	CHECK_EQ_U64(gg_footprint_limit_begin(0, 4, 1 << 20, 0, 0, 0, &l), 0);
	/* off: nothing is foreseen */
	gg_opt.runtime = 0;
	CHECK_EQ_U64(gg_footprint_limit_begin(0, GG_FP_HEAP, GI, 0, 0, 0, &l), 0);
	setup(0, GG_UNLIMITED);
}

int main(void)
{
	RUN(target_is_driver_less_books_plus_headroom);
	RUN(local_memory_formula);
	RUN(stack_limit_precharged_and_refused_past_the_ceiling);
	RUN(driver_refuses_the_limit);
	return harness_done();
}
