/* gpuguard: ceiling escapes at the edges of the hook tables (issue 25,
 * items 2, 3 and 5): another device's default or current pool used from
 * this device's stream, a graph instantiated through the CUDA 11 names, and
 * a pool's reserve overshooting the ceiling under churn. Two 16 GiB
 * simulated cards, GPUGUARD_LIMIT='0=8Gi,1=1Gi' (see .env). */
#include "common.h"

#include <pthread.h>

#include "gpuguard/cuda_abi.h"

static gg_CUcontext ctx0, ctx1;

static void setup(void)
{
	gg_CUdevice d;
	if (cuInit(0) != 0 || cuDeviceGet(&d, 0) != 0 || cuDevicePrimaryCtxRetain(&ctx0, d) != 0 ||
	    cuDeviceGet(&d, 1) != 0 || cuDevicePrimaryCtxRetain(&ctx1, d) != 0 || cuCtxSetCurrent(ctx0) != 0) {
		fprintf(stderr, "simulated driver did not start with two devices\n");
		exit(2);
	}
}

/* What the simulated card holds in pages on dev. */
static unsigned long long sim_held(int dev)
{
	int (*f)(int, unsigned long long *, unsigned long long *, unsigned long long *) =
	    (int (*)(int, unsigned long long *, unsigned long long *, unsigned long long *))dlsym(
	        RTLD_DEFAULT, "simgpu_cuda_debug_used");
	unsigned long long pages = UINT64_MAX;
	if (!f || f(dev, &pages, NULL, NULL) != 0)
		return UINT64_MAX;
	return pages;
}

/* Item 2: device 1's pool, asked for by ordinal (default or current), used
 * from a stream of device 0. The old code took a pool it did not see
 * created to be the stream's device's: 3 x 900 MiB granted on device 1's
 * 1 GiB ceiling, all charged to device 0. */
static void other_devices_pool(int current)
{
	gg_CUstream s0 = NULL;
	gg_CUmemoryPool p1 = NULL;
	CHECK_EQ_INT(cuCtxSetCurrent(ctx0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamCreate(&s0, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(current ? cuDeviceGetMemPool(&p1, 1) : cuDeviceGetDefaultMemPool(&p1, 1), GG_CUDA_SUCCESS);
	gg_CUdeviceptr a[3] = {0};
	int granted = 0, refused = 0;
	for (int i = 0; i < 3; i++) {
		gg_CUresult rc = cuMemAllocFromPoolAsync(&a[granted], 900 * MIB, p1, s0);
		if (rc == GG_CUDA_SUCCESS)
			granted++;
		else if (rc == GG_CUDA_ERROR_OUT_OF_MEMORY)
			refused++;
	}
	CHECK_EQ_INT(granted, 1);
	CHECK_EQ_INT(refused, 2);
	CHECK(sim_held(1) <= 1 * GIB);
	CHECK_EQ_U64(gg_stats(1).used, 900 * MIB);
	CHECK_EQ_U64(gg_stats(0).used, 0);
	for (int i = 0; i < granted; i++)
		CHECK_EQ_INT(cuMemFreeAsync(a[i], s0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamSynchronize(s0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemPoolTrimTo(p1, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(sim_held(1), 0);
	CHECK_EQ_U64(gg_stats(1).used, 0);
	CHECK_EQ_INT(cuStreamDestroy(s0), GG_CUDA_SUCCESS);
}

TEST(another_devices_default_pool_is_charged_to_that_device)
{
	other_devices_pool(0);
}

TEST(another_devices_current_pool_is_charged_to_that_device)
{
	other_devices_pool(1);
}

/* `t_escapes_lcuda NAME` runs that test alone (each must fail on its own
 * without its fix, not only after another's leftovers). */
#define RUN_ONE(name)                                        \
	do {                                                 \
		if (argc < 2 || strcmp(argv[1], #name) == 0) \
			RUN(name);                           \
	} while (0)

int main(int argc, char **argv)
{
	setup();
	RUN_ONE(another_devices_default_pool_is_charged_to_that_device);
	RUN_ONE(another_devices_current_pool_is_charged_to_that_device);
	return harness_done();
}
