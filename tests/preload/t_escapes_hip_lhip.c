/* gpuguard: issue 25, item 2 for HIP: device 1's default or current pool,
 * asked for by ordinal, used from a stream of device 0, is charged to
 * device 1 (pool_cases.h, shared with t_escapes_lcuda). Two 16 GiB
 * simulated cards, GPUGUARD_LIMIT='0=8Gi,1=1Gi'. */
#include "common.h"
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
#include "pool_cases.h"

TEST(hip_another_devices_default_pool_is_charged_to_that_device)
{
	other_devices_pool(0);
}

TEST(hip_another_devices_current_pool_is_charged_to_that_device)
{
	other_devices_pool(1);
}

int main(void)
{
	RUN(hip_another_devices_default_pool_is_charged_to_that_device);
	RUN(hip_another_devices_current_pool_is_charged_to_that_device);
	return harness_done();
}
