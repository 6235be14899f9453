/* gpuguard: issue 25, item 2, written once for the CUDA driver
 * (t_escapes_lcuda) and HIP (t_escapes_hip_lhip): device 1's pool, asked for
 * by ordinal (default or current), used from a stream of device 0, is
 * charged to device 1. The old code took a pool it did not see created to
 * be the stream's device's: 3 x 900 MiB granted on device 1's 1 GiB
 * ceiling, all charged to device 0. The including file defines, for its API:
 *   ESC_STREAM, ESC_POOL, ESC_PTR    the types;
 *   ESC_OK, ESC_OOM                  success and out-of-memory;
 *   ESC_ON_DEVICE0()                 makes device 0 current;
 *   ESC_STREAM_CREATE(s)             a stream at *s;
 *   ESC_DEVICE_POOL(current, p, dev) dev's current (or default) pool at *p;
 *   ESC_ALLOC(a, size, pool, s), ESC_FREE(a, s), ESC_SYNC(s), ESC_TRIM(pool)
 *   ESC_STREAM_DONE(s)               what ends the stream (may check);
 *   ESC_SIM_API                      "cuda" or "hip" (sim_held_by).
 * Two 16 GiB simulated cards, GPUGUARD_LIMIT='0=8Gi,1=1Gi' (see .env). */
#ifndef GPUGUARD_TEST_PRELOAD_ESCAPES_POOL_H
#define GPUGUARD_TEST_PRELOAD_ESCAPES_POOL_H

#include "common.h"

static void other_devices_pool(int current)
{
	ESC_STREAM s0 = NULL;
	ESC_POOL p1 = NULL;
	CHECK_EQ_INT(ESC_ON_DEVICE0(), ESC_OK);
	CHECK_EQ_INT(ESC_STREAM_CREATE(&s0), ESC_OK);
	CHECK_EQ_INT(ESC_DEVICE_POOL(current, &p1, 1), ESC_OK);
	ESC_PTR a[3] = {0};
	int granted = 0, refused = 0;
	for (int i = 0; i < 3; i++) {
		int rc = (int)ESC_ALLOC(&a[granted], 900 * MIB, p1, s0);
		if (rc == ESC_OK)
			granted++;
		else if (rc == ESC_OOM)
			refused++;
	}
	CHECK_EQ_INT(granted, 1);
	CHECK_EQ_INT(refused, 2);
	CHECK(sim_held_by(ESC_SIM_API, 1) <= 1 * GIB);
	CHECK_EQ_U64(gg_stats(1).used, 900 * MIB);
	CHECK_EQ_U64(gg_stats(0).used, 0);
	for (int i = 0; i < granted; i++)
		CHECK_EQ_INT(ESC_FREE(a[i], s0), ESC_OK);
	CHECK_EQ_INT(ESC_SYNC(s0), ESC_OK);
	CHECK_EQ_INT(ESC_TRIM(p1), ESC_OK);
	CHECK_EQ_U64(sim_held_by(ESC_SIM_API, 1), 0);
	CHECK_EQ_U64(gg_stats(1).used, 0);
	ESC_STREAM_DONE(s0);
}

#endif
