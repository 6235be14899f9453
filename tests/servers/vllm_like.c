/* gpuguard test server, vLLM-like: loads its weights, profiles one forward
 * pass, asks cuMemGetInfo, then gives its KV cache
 * gpu_memory_utilization x total - weights - the profiled peak, as one
 * tensor per layer. Serving needs scratch the profile did not see (the
 * sampler's logits, bigger batches), so near the ceiling some steps are
 * refused; vLLM then preempts the batch: the request is rejected.
 * --gpu-memory-utilization F (as vLLM's own flag) or GPU_MEMORY_UTILIZATION
 * sets the fraction (default 0.9). */
#include <string.h>

#include "srv.h"

#define LAYERS 16
#define STEPS 200

/* Not static: -rdynamic names them in the dump's stacks. */
void load_weights(gg_CUdeviceptr *w, int n);
uint64_t profile_run(void);
int allocate_kv_cache(gg_CUdeviceptr *kv, uint64_t bytes);
int execute_model(uint64_t *rng, int step);
gg_CUdeviceptr alloc_or_0(size_t n);

gg_CUdeviceptr alloc_or_0(size_t n)
{
	gg_CUdeviceptr p = 0;
	return cuMemAlloc_v2(&p, n) == GG_CUDA_SUCCESS ? p : 0;
}

__attribute__((noinline)) void load_weights(gg_CUdeviceptr *w, int n)
{
	for (int i = 0; i < n; i++)
		if (!(w[i] = alloc_or_0(256 * MIB))) {
			fprintf(stderr, "vllm_like: the weights do not fit\n");
			exit(3);
		}
}

__attribute__((noinline)) uint64_t profile_run(void)
{
	gg_CUdeviceptr act = alloc_or_0(256 * MIB);
	if (act)
		cuMemFree_v2(act);
	return 256 * MIB;
}

__attribute__((noinline)) int allocate_kv_cache(gg_CUdeviceptr *kv, uint64_t bytes)
{
	uint64_t per = srv_round(bytes / LAYERS, 2 * MIB);
	for (int i = 0; i < LAYERS; i++)
		if (!(kv[i] = alloc_or_0(per)))
			return -1;
	return 0;
}

/* One decode step: activations (as profiled) plus the sampler's logits,
 * which grow with the batch, and now and then a long prompt's prefill. */
__attribute__((noinline)) int execute_model(uint64_t *rng, int step)
{
	uint64_t batch = 1 + srv_rand(rng) % 64;
	uint64_t need[3] = {192 * MIB, batch * 4 * MIB, step % 10 == 7 ? 320 * MIB : 0};
	gg_CUdeviceptr p[3] = {0, 0, 0};
	int ok = 1;
	for (int i = 0; i < 3 && ok; i++)
		if (need[i] && !(p[i] = alloc_or_0(need[i])))
			ok = 0;
	for (int i = 0; i < 3; i++)
		if (p[i])
			cuMemFree_v2(p[i]);
	return ok;
}

int main(int argc, char **argv)
{
	srv_init("vllm_like");
	double util = srv_fraction("GPU_MEMORY_UTILIZATION", 0.9);
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--gpu-memory-utilization"))
			util = strtod(argv[i + 1], NULL);
	size_t free0, total;
	cuMemGetInfo_v2(&free0, &total);
	gg_CUdeviceptr w[4], kv[LAYERS];
	load_weights(w, 4);
	uint64_t act = profile_run();
	size_t free1;
	cuMemGetInfo_v2(&free1, &total);
	uint64_t used = total - free1;
	double budget = util * (double)total - (double)used - (double)act;
	if (budget <= 0 || allocate_kv_cache(kv, (uint64_t)budget)) {
		fprintf(stderr, "vllm_like: no memory for the KV cache (gpu_memory_utilization %.2f)\n", util);
		return 3;
	}
	printf("vllm_like: total %.2f GiB, gpu_memory_utilization %.2f, KV cache %.2f GiB\n", (double)total / GIB, util,
	       budget / GIB);
	uint64_t rng = 42;
	int rejected = 0;
	for (int s = 0; s < STEPS; s++)
		rejected += !execute_model(&rng, s);
	printf("summary: %d requests: %d served, %d rejected\n", STEPS, STEPS - rejected, rejected);
	return 0;
}
