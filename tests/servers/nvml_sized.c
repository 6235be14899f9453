/* gpuguard test server, sized from NVML: asks nvmlDeviceGetMemoryInfo
 * (as schedulers and some servers do, instead of cuMemGetInfo) and takes
 * NVML_FRACTION (default 0.8) of the total it reports as its cache, in 8
 * blocks. Its per-request buffers come from what is left. */
#include "gpuguard/nvml_abi.h"
#include "srv.h"

#define STEPS 100

gg_CUdeviceptr cache_block(size_t n);
int handle_request(uint64_t *rng);

__attribute__((noinline)) gg_CUdeviceptr cache_block(size_t n)
{
	gg_CUdeviceptr p = 0;
	return cuMemAlloc_v2(&p, n) == GG_CUDA_SUCCESS ? p : 0;
}

__attribute__((noinline)) int handle_request(uint64_t *rng)
{
	gg_CUdeviceptr p = 0;
	if (cuMemAlloc_v2(&p, (256 + srv_rand(rng) % 768) * MIB) != GG_CUDA_SUCCESS)
		return 0;
	cuMemFree_v2(p);
	return 1;
}

int main(void)
{
	srv_init("nvml_sized");
	double frac = srv_fraction("NVML_FRACTION", 0.8);
	gg_nvmlDevice_t h;
	gg_nvmlMemory_t m;
	if (nvmlInit_v2() || nvmlDeviceGetHandleByIndex_v2(0, &h) || nvmlDeviceGetMemoryInfo(h, &m)) {
		fprintf(stderr, "nvml_sized: NVML did not answer\n");
		return 2;
	}
	uint64_t per = srv_round((uint64_t)(frac * (double)m.total) / 8, 2 * MIB);
	for (int i = 0; i < 8; i++)
		if (!cache_block(per)) {
			fprintf(stderr, "nvml_sized: the cache does not fit\n");
			return 3;
		}
	printf("nvml_sized: NVML total %.2f GiB, cache %.2f GiB (%.2f)\n", (double)m.total / GIB,
	       (double)(per * 8) / GIB, frac);
	uint64_t rng = 13;
	int failed = 0;
	for (int s = 0; s < STEPS; s++)
		failed += !handle_request(&rng);
	printf("summary: %d requests: %d served, %d rejected\n", STEPS, STEPS - failed, failed);
	return 0;
}
