/* gpuguard: issue 25, item 2 for HIP: device 1's default or current pool,
 * asked for by ordinal, used from a stream of device 0, is charged to
 * device 1. Two 16 GiB simulated cards, GPUGUARD_LIMIT='0=8Gi,1=1Gi'. */
#include "common.h"
#include "gpuguard/hip_abi.h"

static unsigned long long sim_held(int dev)
{
	int (*f)(int, unsigned long long *, unsigned long long *, unsigned long long *) =
	    (int (*)(int, unsigned long long *, unsigned long long *, unsigned long long *))dlsym(
	        RTLD_DEFAULT, "simgpu_hip_debug_used");
	unsigned long long pages = UINT64_MAX;
	if (!f || f(dev, &pages, NULL, NULL) != 0)
		return UINT64_MAX;
	return pages;
}

/* The old code took a pool it did not see created to be the stream's
 * device's: 3 x 900 MiB granted under device 1's 1 GiB, charged to 0. */
static void other_devices_pool(int current)
{
	gg_hipStream_t s0 = NULL;
	gg_hipMemPool_t p1 = NULL;
	CHECK_EQ_INT(hipSetDevice(0), GG_hipSuccess);
	CHECK_EQ_INT(hipStreamCreate(&s0), GG_hipSuccess);
	CHECK_EQ_INT(current ? hipDeviceGetMemPool(&p1, 1) : hipDeviceGetDefaultMemPool(&p1, 1), GG_hipSuccess);
	void *a[3] = {0};
	int granted = 0, refused = 0;
	for (int i = 0; i < 3; i++) {
		gg_hipError_t rc = hipMallocFromPoolAsync(&a[granted], 900 * MIB, p1, s0);
		if (rc == GG_hipSuccess)
			granted++;
		else if (rc == GG_hipErrorOutOfMemory)
			refused++;
	}
	CHECK_EQ_INT(granted, 1);
	CHECK_EQ_INT(refused, 2);
	CHECK(sim_held(1) <= 1 * GIB);
	CHECK_EQ_U64(gg_stats(1).used, 900 * MIB);
	CHECK_EQ_U64(gg_stats(0).used, 0);
	for (int i = 0; i < granted; i++)
		CHECK_EQ_INT(hipFreeAsync(a[i], s0), GG_hipSuccess);
	CHECK_EQ_INT(hipStreamSynchronize(s0), GG_hipSuccess);
	CHECK_EQ_INT(hipMemPoolTrimTo(p1, 0), GG_hipSuccess);
	CHECK_EQ_U64(sim_held(1), 0);
	CHECK_EQ_U64(gg_stats(1).used, 0);
}

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
