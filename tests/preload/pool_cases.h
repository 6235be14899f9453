/* gpuguard: stream-ordered pool cases written once for the CUDA driver and
 * HIP, each a static inline function a program calls from its TESTs:
 *  - other_devices_pool (issue 25, item 2; t_escapes_lcuda,
 *    t_escapes_hip_lhip): device 1's pool, asked for by ordinal (default or
 *    current), used from a stream of device 0, is charged to device 1. The
 *    old code took a pool it did not see created to be the stream's
 *    device's: 3 x 900 MiB granted on device 1's 1 GiB ceiling, all charged
 *    to device 0;
 *  - async_on_other_devices_stream (issue 10, finding 8; t_pools_lcuda,
 *    t_hip_pools_lhip): an async allocation on a stream of device 1, device
 *    0 current, draws from device 1's pool and is charged there (4 GiB
 *    ceilings).
 * The including file defines, for its API:
 *   API_STREAM, API_POOL, API_PTR    the types;
 *   API_OK, API_OOM                  success and out-of-memory;
 *   API_ON_DEVICE(dev)               makes dev (0 or 1) current;
 *   API_STREAM_CREATE(s)             a stream at *s;
 *   API_DEVICE_POOL(current, p, dev) dev's current (or default) pool at *p;
 *   API_ALLOC(a, size, pool, s)      from pool; API_ALLOC_ASYNC(a, size, s)
 *                                    from the stream's device's;
 *   API_FREE(a, s), API_SYNC(s), API_TRIM(pool)
 *   API_STREAM_DONE(s)               what ends the stream (may check);
 *   API_SIM                          "cuda" or "hip" (sim_held_by). */
#ifndef GPUGUARD_TEST_PRELOAD_POOL_CASES_H
#define GPUGUARD_TEST_PRELOAD_POOL_CASES_H

#include "common.h"

static inline void other_devices_pool(int current)
{
	API_STREAM s0 = NULL;
	API_POOL p1 = NULL;
	CHECK_EQ_INT(API_ON_DEVICE(0), API_OK);
	CHECK_EQ_INT(API_STREAM_CREATE(&s0), API_OK);
	CHECK_EQ_INT(API_DEVICE_POOL(current, &p1, 1), API_OK);
	API_PTR a[3] = {0};
	int granted = 0, refused = 0;
	for (int i = 0; i < 3; i++) {
		int rc = (int)API_ALLOC(&a[granted], 900 * MIB, p1, s0);
		if (rc == API_OK)
			granted++;
		else if (rc == API_OOM)
			refused++;
	}
	CHECK_EQ_INT(granted, 1);
	CHECK_EQ_INT(refused, 2);
	CHECK(sim_held_by(API_SIM, 1) <= 1 * GIB);
	CHECK_EQ_U64(gg_stats(1).used, 900 * MIB);
	CHECK_EQ_U64(gg_stats(0).used, 0);
	for (int i = 0; i < granted; i++)
		CHECK_EQ_INT(API_FREE(a[i], s0), API_OK);
	CHECK_EQ_INT(API_SYNC(s0), API_OK);
	CHECK_EQ_INT(API_TRIM(p1), API_OK);
	CHECK_EQ_U64(sim_held_by(API_SIM, 1), 0);
	CHECK_EQ_U64(gg_stats(1).used, 0);
	API_STREAM_DONE(s0);
}

/* Device 0's books are to stay as they were: at 0, or (since_now) at what
 * they hold when the case begins. */
static inline void async_on_other_devices_stream(int since_now)
{
	API_STREAM s1 = NULL;
	CHECK_EQ_INT(API_ON_DEVICE(1), API_OK);
	CHECK_EQ_INT(API_STREAM_CREATE(&s1), API_OK);
	CHECK_EQ_INT(API_ON_DEVICE(0), API_OK);
	uint64_t used0 = since_now ? gg_stats(0).used : 0;
	API_PTR a[8] = {0};
	int granted = 0, refused = 0;
	for (int i = 0; i < 8; i++) {
		int rc = (int)API_ALLOC_ASYNC(&a[granted], 1 * GIB, s1);
		if (rc == API_OK)
			granted++;
		else if (rc == API_OOM)
			refused++;
	}
	CHECK_EQ_INT(granted, 4);
	CHECK_EQ_INT(refused, 4);
	CHECK(sim_held_by(API_SIM, 1) <= 4 * GIB);
	CHECK_EQ_U64(gg_stats(1).used, 4 * GIB);
	CHECK_EQ_U64(gg_stats(0).used, used0);
	for (int i = 0; i < granted; i++)
		CHECK_EQ_INT(API_FREE(a[i], s1), API_OK);
	CHECK_EQ_INT(API_SYNC(s1), API_OK);
	CHECK_EQ_U64(sim_held_by(API_SIM, 1), 0);
	CHECK_EQ_U64(gg_stats(1).used, 0);
}

#endif
