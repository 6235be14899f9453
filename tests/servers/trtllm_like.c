/* gpuguard test server, TensorRT-LLM-like: builds its engine (weights),
 * asks cuMemGetInfo, and gives the KV cache kv_cache_free_gpu_mem_fraction
 * (default 0.9) of the free memory it was told, in one pool. The runtime's
 * activation buffers for each batch come from what is left. Fraction from
 * KV_CACHE_FREE_GPU_MEM_FRACTION. */
#include "srv.h"

#define STEPS 150

/* Not static: -rdynamic names them in the dump's stacks. */
gg_CUdeviceptr alloc_or_0(size_t n);
int runtime_step(uint64_t *rng);

__attribute__((noinline)) gg_CUdeviceptr alloc_or_0(size_t n)
{
	gg_CUdeviceptr p = 0;
	return cuMemAlloc_v2(&p, n) == GG_CUDA_SUCCESS ? p : 0;
}

__attribute__((noinline)) int runtime_step(uint64_t *rng)
{
	uint64_t b = (96 + srv_rand(rng) % 320) * MIB;
	gg_CUdeviceptr p = alloc_or_0(b);
	if (!p)
		return 0;
	cuMemFree_v2(p);
	return 1;
}

int main(void)
{
	srv_init("trtllm_like");
	double frac = srv_fraction("KV_CACHE_FREE_GPU_MEM_FRACTION", 0.9);
	gg_CUdeviceptr engine[3];
	for (int i = 0; i < 3; i++)
		if (!(engine[i] = alloc_or_0(512 * MIB))) {
			fprintf(stderr, "trtllm_like: the engine does not fit\n");
			return 3;
		}
	size_t free1, total;
	cuMemGetInfo_v2(&free1, &total);
	uint64_t kv = srv_round((uint64_t)(frac * (double)free1), 2 * MIB);
	gg_CUdeviceptr pool = alloc_or_0(kv);
	if (!pool) {
		fprintf(stderr, "trtllm_like: the KV cache pool does not fit\n");
		return 3;
	}
	printf("trtllm_like: free %.2f GiB of %.2f, KV cache %.2f GiB (%.2f of free)\n", (double)free1 / GIB,
	       (double)total / GIB, (double)kv / GIB, frac);
	uint64_t rng = 11;
	int failed = 0;
	for (int s = 0; s < STEPS; s++)
		failed += !runtime_step(&rng);
	printf("summary: %d requests: %d served, %d rejected\n", STEPS, STEPS - failed, failed);
	return 0;
}
