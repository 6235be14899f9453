/* gpuguard: issue 25, item 2 for HIP: device 1's default or current pool,
 * asked for by ordinal, used from a stream of device 0, is charged to
 * device 1 (escapes_pool.h, shared with t_escapes_lcuda). Two 16 GiB
 * simulated cards, GPUGUARD_LIMIT='0=8Gi,1=1Gi'. */
#include "common.h"
#include "gpuguard/hip_abi.h"

#define ESC_STREAM gg_hipStream_t
#define ESC_POOL gg_hipMemPool_t
#define ESC_PTR void *
#define ESC_OK GG_hipSuccess
#define ESC_OOM GG_hipErrorOutOfMemory
#define ESC_ON_DEVICE0() hipSetDevice(0)
#define ESC_STREAM_CREATE(s) hipStreamCreate(s)
#define ESC_DEVICE_POOL(current, p, dev) ((current) ? hipDeviceGetMemPool(p, dev) : hipDeviceGetDefaultMemPool(p, dev))
#define ESC_ALLOC(a, size, pool, s) hipMallocFromPoolAsync(a, size, pool, s)
#define ESC_FREE(a, s) hipFreeAsync(a, s)
#define ESC_SYNC(s) hipStreamSynchronize(s)
#define ESC_TRIM(pool) hipMemPoolTrimTo(pool, 0)
/* hip_abi.h declares no hipStreamDestroy: the stream stays to the end */
#define ESC_STREAM_DONE(s) ((void)(s))
#define ESC_SIM_API "hip"
#include "escapes_pool.h"

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
