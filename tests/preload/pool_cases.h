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
 * The including file defines POOL_CASES_CUDA (with ctx0 and ctx1, the two
 * devices' primary contexts, declared) or POOL_CASES_HIP first; the API_
 * macros below are that API's. */
#ifndef GPUGUARD_TEST_PRELOAD_POOL_CASES_H
#define GPUGUARD_TEST_PRELOAD_POOL_CASES_H

#include "common.h"

#if defined(POOL_CASES_CUDA)
#include "gpuguard/cuda_abi.h"
#define API_STREAM gg_CUstream
#define API_POOL gg_CUmemoryPool
#define API_PTR gg_CUdeviceptr
#define API_OK GG_CUDA_SUCCESS
#define API_OOM GG_CUDA_ERROR_OUT_OF_MEMORY
#define API_ON_DEVICE(dev) cuCtxSetCurrent((dev) ? ctx1 : ctx0)
#define API_STREAM_CREATE(s) cuStreamCreate(s, 0)
#define API_DEVICE_POOL(current, p, dev) ((current) ? cuDeviceGetMemPool(p, dev) : cuDeviceGetDefaultMemPool(p, dev))
#define API_ALLOC(a, size, pool, s) cuMemAllocFromPoolAsync(a, size, pool, s)
#define API_ALLOC_ASYNC(a, size, s) cuMemAllocAsync(a, size, s)
#define API_FREE(a, s) cuMemFreeAsync(a, s)
#define API_SYNC(s) cuStreamSynchronize(s)
#define API_TRIM(pool) cuMemPoolTrimTo(pool, 0)
#define API_STREAM_DONE(s) CHECK_EQ_INT(cuStreamDestroy(s), GG_CUDA_SUCCESS)
#define API_SIM "cuda"
#elif defined(POOL_CASES_HIP)
#include "gpuguard/hip_abi.h"
#define API_STREAM gg_hipStream_t
#define API_POOL gg_hipMemPool_t
#define API_PTR void *
#define API_OK GG_hipSuccess
#define API_OOM GG_hipErrorOutOfMemory
#define API_ON_DEVICE(dev) hipSetDevice(dev)
#define API_STREAM_CREATE(s) hipStreamCreate(s)
#define API_DEVICE_POOL(current, p, dev) ((current) ? hipDeviceGetMemPool(p, dev) : hipDeviceGetDefaultMemPool(p, dev))
#define API_ALLOC(a, size, pool, s) hipMallocFromPoolAsync(a, size, pool, s)
#define API_ALLOC_ASYNC(a, size, s) hipMallocAsync(a, size, s)
#define API_FREE(a, s) hipFreeAsync(a, s)
#define API_SYNC(s) hipStreamSynchronize(s)
#define API_TRIM(pool) hipMemPoolTrimTo(pool, 0)
/* hip_abi.h declares no hipStreamDestroy: the stream stays to the end */
#define API_STREAM_DONE(s) ((void)(s))
#define API_SIM "hip"
#else
#error "define POOL_CASES_CUDA or POOL_CASES_HIP before including pool_cases.h"
#endif

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
