/* gpuguard test server, JAX-like: at start XLA's BFC allocator takes
 * XLA_PYTHON_CLIENT_MEM_FRACTION (default 0.75) of the total cuMemGetInfo
 * reports in one allocation and carves every array from it. What the
 * libraries beside it allocate for themselves (cuBLAS/cuDNN workspaces,
 * autotuning scratch) comes from what is left; when that does not fit the
 * step fails with RESOURCE_EXHAUSTED. */
#include "srv.h"

#define STEPS 120

/* Not static: -rdynamic names them in the dump's stacks. */
gg_CUdeviceptr xla_bfc_preallocate(uint64_t bytes);
int cudnn_workspace_step(uint64_t *rng);

__attribute__((noinline)) gg_CUdeviceptr xla_bfc_preallocate(uint64_t bytes)
{
	gg_CUdeviceptr p = 0;
	return cuMemAlloc_v2(&p, bytes) == GG_CUDA_SUCCESS ? p : 0;
}

/* A convolution's workspace, sized by the algorithm autotuning picks. */
__attribute__((noinline)) int cudnn_workspace_step(uint64_t *rng)
{
	uint64_t ws = (64 + srv_rand(rng) % 1024) * MIB;
	gg_CUdeviceptr p = 0;
	if (cuMemAlloc_v2(&p, ws) != GG_CUDA_SUCCESS)
		return 0;
	cuMemFree_v2(p);
	return 1;
}

int main(void)
{
	srv_init("jax_like");
	double frac = srv_fraction("XLA_PYTHON_CLIENT_MEM_FRACTION", 0.75);
	size_t free0, total;
	cuMemGetInfo_v2(&free0, &total);
	uint64_t arena = srv_round((uint64_t)(frac * (double)total), 2 * MIB);
	gg_CUdeviceptr a = xla_bfc_preallocate(arena);
	if (!a) {
		fprintf(stderr, "jax_like: preallocation of %.2f GiB failed\n", (double)arena / GIB);
		return 3;
	}
	gg_CUdeviceptr handles = 0; /* cuBLAS handle and its default workspace */
	cuMemAlloc_v2(&handles, 32 * MIB);
	printf("jax_like: total %.2f GiB, preallocated %.2f (%.2f)\n", (double)total / GIB, (double)arena / GIB, frac);
	uint64_t rng = 7;
	int failed = 0;
	for (int s = 0; s < STEPS; s++)
		failed += !cudnn_workspace_step(&rng);
	printf("summary: %d requests: %d served, %d rejected\n", STEPS, STEPS - failed, failed);
	return 0;
}
