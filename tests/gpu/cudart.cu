/* gpuguard on a real GPU: the CUDA runtime, built twice by run.sh, with
 * -cudart shared and -cudart static (nvcc's default). Either way cudart
 * reaches the driver only through cuGetProcAddress (DESIGN.md §1), so this
 * proves the dlsym/cuGetProcAddress path. Under GPUGUARD_LIMIT=4Gi: cudaMalloc
 * fills the ceiling and no further, the refusal is cudaErrorMemoryAllocation
 * (and cudaGetLastError clears it), cudaMemGetInfo reports the ceiling, and a
 * kernel still runs on the memory after the refusal. */
#include <cuda_runtime.h>

#include "gg_gpu.h"

/* -DGG_CUDART=shared or static, as run.sh builds it */
#ifndef GG_CUDART
#define GG_CUDART unknown
#endif
#define GG_STR2(x) #x
#define GG_STR(x) GG_STR2(x)

/* Runs fill over `bytes` at p and reads both ends back. 1 = it worked. */
static int touch(void *p, size_t bytes, unsigned v)
{
	size_t n = bytes / 4;
	fill<<<1024, 256>>>((unsigned *)p, n, v);
	cudaError_t l = cudaGetLastError();
	cudaError_t s = cudaDeviceSynchronize();
	unsigned h[2] = {0, 0};
	cudaError_t c1 = cudaMemcpy(&h[0], p, 4, cudaMemcpyDeviceToHost);
	cudaError_t c2 = cudaMemcpy(&h[1], (unsigned *)p + n - 1, 4, cudaMemcpyDeviceToHost);
	if (l != cudaSuccess || s != cudaSuccess || c1 != cudaSuccess || c2 != cudaSuccess) {
		gg_info("kernel/copy after refusal: launch=%s sync=%s copy=%s,%s", cudaGetErrorName(l),
			cudaGetErrorName(s), cudaGetErrorName(c1), cudaGetErrorName(c2));
		return 0;
	}
	return h[0] == v && h[1] == (v ^ (unsigned)(n - 1));
}

int main(void)
{
	gg_begin("cudart_" GG_STR(GG_CUDART));
	int dev, rc = gg_runtime_start(&dev);
	if (rc >= 0)
		return rc;
	cudaError_t e;
	int rtv = 0, drv = 0;
	cudaRuntimeGetVersion(&rtv);
	cudaDriverGetVersion(&drv);
	gg_info("cudart %s, runtime %d, driver %d", GG_STR(GG_CUDART), rtv, drv);
	if (gg_require_guard(dev) != 0)
		return gg_finish();

	struct gpuguard_device_stats s0 = gg_stats(dev);
	uint64_t used0 = s0.used;
	size_t f0 = 0, t0 = 0;
	RT_OK(cudaMemGetInfo(&f0, &t0));
	gg_info("cudaMemGetInfo at start: free=%zu total=%zu used=%llu", f0, t0, (unsigned long long)used0);
	CHECK_COL(meminfo, t0 == GG_CEILING);
	CHECK_COL(meminfo, f0 == GG_CEILING - used0);
	cudaDeviceProp prop;
	if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
		gg_info("%s, totalGlobalMem=%zu", prop.name, prop.totalGlobalMem);
		CHECK_COL(meminfo, prop.totalGlobalMem == GG_CEILING);
	}

	enum { MAXN = 64 };
	void *p[MAXN];
	int n = 0, free_moves = 1;
	size_t fprev = f0, f = 0, t = 0;
	e = cudaSuccess;
	while (n < MAXN) {
		e = cudaMalloc(&p[n], GG_CHUNK);
		if (e != cudaSuccess)
			break;
		n++;
		if (cudaMemGetInfo(&f, &t) != cudaSuccess || fprev - f != GG_CHUNK || t != GG_CEILING)
			free_moves = 0;
		fprev = f;
	}
	int expect = (int)((GG_CEILING - used0) / GG_CHUNK);
	gg_info("filled %d x 256 MiB (expected %d); refusal %s", n, expect, cudaGetErrorName(e));
	gg_set_refusal(cudaGetErrorName(e));
	CHECK_COL(ceiling, n == expect);
	CHECK_COL(ceiling, e == cudaErrorMemoryAllocation);
	CHECK_COL(meminfo, free_moves);
	/* Not sticky: reported once by cudaGetLastError, then cleared. */
	cudaError_t le = cudaGetLastError();
	CHECK(le == cudaErrorMemoryAllocation);
	CHECK_COL(working, cudaGetLastError() == cudaSuccess);

	/* A second, smaller request is refused too, and the books hold. */
	void *extra = NULL;
	e = cudaMalloc(&extra, 64 * GG_MIB);
	CHECK_COL(ceiling, e == cudaErrorMemoryAllocation);
	if (e == cudaSuccess)
		cudaFree(extra);
	cudaGetLastError();
	struct gpuguard_device_stats s = gg_stats(dev);
	CHECK_COL(ceiling, s.used == used0 + (uint64_t)n * GG_CHUNK);
	CHECK_COL(ceiling, s.used <= s.limit && s.peak <= s.limit);
	CHECK(s.refused[GPUGUARD_REFUSED_CEILING] >= s0.refused[GPUGUARD_REFUSED_CEILING] + 2);
	if (cudaMemGetInfo(&f, &t) == cudaSuccess) {
		gg_info("at the ceiling: free=%zu total=%zu used=%llu", f, t, (unsigned long long)s.used);
		CHECK_COL(meminfo, t == GG_CEILING && f == s.limit - s.used);
	}

	/* The process keeps working: a kernel writes the memory, sync succeeds. */
	if (n > 0) {
		CHECK_COL(working, touch(p[0], GG_CHUNK, 0x5eed0001u));
		CHECK_COL(working, touch(p[n - 1], GG_CHUNK, 0x5eed0002u));
	} else {
		CHECK_COL(working, n > 0);
	}

	/* Free one: the room is back at once and the same request succeeds. */
	if (n > 0) {
		RT_OK(cudaFree(p[n - 1]));
		size_t fb = 0;
		RT_OK(cudaMemGetInfo(&fb, &t));
		CHECK_COL(meminfo, fb - f == GG_CHUNK);
		e = cudaMalloc(&p[n - 1], GG_CHUNK);
		CHECK_COL(working, e == cudaSuccess);
		if (e != cudaSuccess)
			p[n - 1] = NULL;
	}
	for (int i = 0; i < n; i++)
		if (p[i])
			RT_OK(cudaFree(p[i]));
	s = gg_stats(dev);
	CHECK_COL(ceiling, s.used == used0);
	RT_OK(cudaMemGetInfo(&f, &t));
	CHECK_COL(meminfo, f == f0 && t == GG_CEILING);

	/* And a large allocation works again, kernel included. */
	void *big = NULL;
	e = cudaMalloc(&big, 2 * GG_GIB);
	CHECK_COL(working, e == cudaSuccess);
	if (e == cudaSuccess) {
		CHECK_COL(working, touch(big, 2 * GG_GIB, 0x5eed0003u));
		RT_OK(cudaFree(big));
	}
	gg_info("stats: allocs=%llu frees=%llu refused_ceiling=%llu peak=%llu untracked_frees=%llu",
		(unsigned long long)s.allocs, (unsigned long long)s.frees,
		(unsigned long long)s.refused[GPUGUARD_REFUSED_CEILING], (unsigned long long)s.peak,
		(unsigned long long)s.untracked_frees);
	return gg_finish();
}
