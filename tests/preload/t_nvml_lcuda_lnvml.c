/* gpuguard: a program linked with -lcuda -lnvidia-ml asks NVML for memory info
 * under the preload, GPUGUARD_LIMIT=1Gi on two 8 GiB simulated cards whose
 * driver reserves 64 MiB each (see .env). NVML must report the same ceiling
 * and free figure as cuMemGetInfo_v2, and its failures must stay its own. */
#include "common.h"
#include "gpuguard/cuda_abi.h"
#include "gpuguard/nvml_abi.h"

#define RESERVED (64 * MIB) /* SIMGPU_NVML_RESERVED */

static gg_nvmlDevice_t h0, h1;

static void setup(void)
{
	gg_CUcontext ctx;
	if (cuInit(0) != 0 || cuDevicePrimaryCtxRetain(&ctx, 0) != 0 || cuCtxSetCurrent(ctx) != 0 ||
	    nvmlInit_v2() != 0 || nvmlDeviceGetHandleByIndex_v2(0, &h0) != 0 ||
	    nvmlDeviceGetHandleByIndex_v2(1, &h1) != 0) {
		fprintf(stderr, "simulated driver or NVML did not start\n");
		exit(2);
	}
}

static gg_nvmlMemory_t v1(gg_nvmlDevice_t h)
{
	gg_nvmlMemory_t m;
	memset(&m, 0xff, sizeof(m));
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo(h, &m), GG_NVML_SUCCESS);
	return m;
}

static gg_nvmlMemory_v2_t v2(gg_nvmlDevice_t h)
{
	gg_nvmlMemory_v2_t m;
	memset(&m, 0xff, sizeof(m));
	m.version = GG_nvmlMemory_v2;
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo_v2(h, &m), GG_NVML_SUCCESS);
	return m;
}

/* NVML v1, v2 and cuMemGetInfo_v2 agree on device 0's total and free. */
static void check_agrees(uint64_t want_free)
{
	size_t f = 0, t = 0;
	CHECK_EQ_INT(cuMemGetInfo_v2(&f, &t), GG_CUDA_SUCCESS);
	gg_nvmlMemory_t a = v1(h0);
	gg_nvmlMemory_v2_t b = v2(h0);
	CHECK_EQ_U64(t, GIB);
	CHECK_EQ_U64(f, want_free);
	CHECK_EQ_U64(a.total, t);
	CHECK_EQ_U64(a.free, f);
	CHECK_EQ_U64(a.used, t - f);
	CHECK_EQ_U64(b.version, GG_nvmlMemory_v2);
	CHECK_EQ_U64(b.total, t);
	CHECK_EQ_U64(b.free, f);
	CHECK_EQ_U64(b.reserved + b.free + b.used, b.total);
}

TEST(nvml_reports_the_ceiling)
{
	check_agrees(GIB);
	/* Nothing allocated: the 64 MiB reserve cannot sit beside 1 GiB free. */
	gg_nvmlMemory_v2_t b = v2(h0);
	CHECK_EQ_U64(b.reserved, 0);
	CHECK_EQ_U64(b.used, 0);
	gg_nvmlMemory_t other = v1(h1);
	CHECK_EQ_U64(other.total, GIB);
	CHECK_EQ_U64(other.free, GIB);
}

TEST(free_moves_with_cuMemAlloc)
{
	gg_CUdeviceptr a = 0, b = 0;
	CHECK_EQ_INT(cuMemAlloc_v2(&a, 256 * MIB), GG_CUDA_SUCCESS);
	check_agrees(768 * MIB);
	gg_nvmlMemory_v2_t m = v2(h0);
	CHECK_EQ_U64(m.reserved, RESERVED); /* the driver's figure, now that it fits */
	CHECK_EQ_U64(m.used, 256 * MIB - RESERVED);
	CHECK_EQ_U64(v1(h0).used, 256 * MIB);
	CHECK_EQ_U64(gg_stats(0).used, 256 * MIB);
	/* to the ceiling and past it: free reaches 0 and stays there */
	CHECK_EQ_INT(cuMemAlloc_v2(&b, 768 * MIB), GG_CUDA_SUCCESS);
	check_agrees(0);
	gg_CUdeviceptr c = 0;
	CHECK_EQ_INT(cuMemAlloc_v2(&c, 2 * MIB), GG_CUDA_ERROR_OUT_OF_MEMORY);
	check_agrees(0);
	CHECK_EQ_INT(cuMemFree_v2(b), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(a), GG_CUDA_SUCCESS);
	check_agrees(GIB);
	CHECK_EQ_U64(v1(h1).free, GIB); /* device 1 untouched throughout */
}

TEST(failures_are_the_drivers_own)
{
	int junk;
	gg_nvmlMemory_t m, m0;
	gg_nvmlMemory_v2_t n, n0;
	memset(&m, 0xab, sizeof(m));
	m0 = m;
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo((gg_nvmlDevice_t)&junk, &m), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK(!memcmp(&m, &m0, sizeof(m)));
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo(h0, NULL), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo_v2(h0, NULL), GG_NVML_ERROR_INVALID_ARGUMENT);
	memset(&n, 0xab, sizeof(n));
	n.version = (unsigned)(sizeof(gg_nvmlMemory_t) | (2u << 24)); /* a v1-sized struct */
	n0 = n;
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo_v2(h0, &n), GG_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	CHECK(!memcmp(&n, &n0, sizeof(n)));
	n.version = GG_nvmlMemory_v2;
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo_v2((gg_nvmlDevice_t)&junk, &n), GG_NVML_ERROR_INVALID_ARGUMENT);
	/* after the last shutdown: UNINITIALIZED, output untouched */
	CHECK_EQ_INT(nvmlShutdown(), GG_NVML_SUCCESS);
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo(h0, &m), GG_NVML_ERROR_UNINITIALIZED);
	CHECK(!memcmp(&m, &m0, sizeof(m)));
	CHECK_EQ_INT(nvmlInit_v2(), GG_NVML_SUCCESS);
	check_agrees(GIB);
}

TEST(linked_names_are_our_wrappers)
{
	CHECK(strcmp(object_of((void *)nvmlDeviceGetMemoryInfo), "libgpuguard.so") == 0);
	CHECK(strcmp(object_of((void *)nvmlDeviceGetMemoryInfo_v2), "libgpuguard.so") == 0);
	CHECK(strcmp(object_of((void *)nvmlDeviceGetUUID), "libnvidia-ml.so.1") == 0);
}

int main(void)
{
	gg_nvmlMemory_t m;
	memset(&m, 0xab, sizeof(m));
	/* before nvmlInit: the driver's answer, passed through */
	if (nvmlDeviceGetMemoryInfo(NULL, &m) != GG_NVML_ERROR_UNINITIALIZED || m.total != 0xababababababababull) {
		fprintf(stderr, "nvmlDeviceGetMemoryInfo before nvmlInit was not passed through\n");
		return 1;
	}
	setup();
	RUN(nvml_reports_the_ceiling);
	RUN(free_moves_with_cuMemAlloc);
	RUN(failures_are_the_drivers_own);
	RUN(linked_names_are_our_wrappers);
	return harness_done();
}
