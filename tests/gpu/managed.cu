/* gpuguard on a real GPU: managed (unified) memory is charged to the ceiling
 * (GPUGUARD_CHARGE_MANAGED defaults to 1). Under GPUGUARD_LIMIT=4Gi:
 * cudaMallocManaged fills the ceiling and no further
 * (cudaErrorMemoryAllocation), it shares the ceiling with cudaMalloc, a
 * kernel and the host both use the memory after the refusal, and a free
 * gives the room back. */
#include <cuda_runtime.h>

#include "gg_gpu.h"

int main(void)
{
	gg_begin("managed");
	int dev, rc = gg_runtime_start(&dev);
	if (rc >= 0)
		return rc;
	cudaError_t e;
	int managed = 0;
	cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, dev);
	if (!managed)
		return gg_skip("managed-memory-not-supported");
	if (gg_require_guard(dev) != 0)
		return gg_finish();

	struct gpuguard_device_stats s0 = gg_stats(dev);
	uint64_t used0 = s0.used;
	size_t f0 = 0, t0 = 0, f = 0, t = 0;
	RT_OK(cudaMemGetInfo(&f0, &t0));
	CHECK_COL(meminfo, t0 == GG_CEILING && f0 == GG_CEILING - used0);

	enum { MAXN = 64 };
	void *p[MAXN];
	int n = 0, free_moves = 1;
	size_t fprev = f0;
	e = cudaSuccess;
	while (n < MAXN) {
		e = cudaMallocManaged(&p[n], GG_CHUNK, cudaMemAttachGlobal);
		if (e != cudaSuccess)
			break;
		n++;
		if (cudaMemGetInfo(&f, &t) != cudaSuccess || fprev - f != GG_CHUNK || t != GG_CEILING)
			free_moves = 0;
		fprev = f;
	}
	cudaError_t le = cudaGetLastError();
	int expect = (int)((GG_CEILING - used0) / GG_CHUNK);
	gg_info("managed %d x 256 MiB (expected %d); refusal %s", n, expect, cudaGetErrorName(e));
	gg_set_refusal(cudaGetErrorName(e));
	CHECK_COL(ceiling, n == expect);
	CHECK_COL(ceiling, e == cudaErrorMemoryAllocation);
	CHECK(le == cudaErrorMemoryAllocation);
	CHECK_COL(meminfo, free_moves);
	struct gpuguard_device_stats s = gg_stats(dev);
	CHECK_COL(ceiling, s.used == used0 + (uint64_t)n * GG_CHUNK);
	CHECK_COL(ceiling, s.used <= s.limit && s.peak <= s.limit);
	if (cudaMemGetInfo(&f, &t) == cudaSuccess)
		CHECK_COL(meminfo, t == GG_CEILING && f == s.limit - s.used);

	/* One ceiling for both: device memory is refused now too. */
	void *dm = NULL;
	e = cudaMalloc(&dm, 64 * GG_MIB);
	CHECK_COL(ceiling, e == cudaErrorMemoryAllocation);
	if (e == cudaSuccess)
		cudaFree(dm);
	cudaGetLastError();

	/* The memory works from the device and from the host. */
	if (n > 0) {
		unsigned *q = (unsigned *)p[n - 1];
		size_t words = GG_CHUNK / 4;
		fill<<<512, 256>>>(q, words, 0x3a3au);
		cudaError_t l = cudaGetLastError();
		cudaError_t sy = cudaDeviceSynchronize();
		CHECK_COL(working, l == cudaSuccess && sy == cudaSuccess);
		if (sy == cudaSuccess)
			CHECK_COL(working, q[0] == 0x3a3au && q[words - 1] == (0x3a3au ^ (unsigned)(words - 1)));
		((unsigned *)p[0])[0] = 42u; /* a host write */
		CHECK_COL(working, ((volatile unsigned *)p[0])[0] == 42u);
	} else {
		CHECK_COL(working, n > 0);
	}

	/* A free gives the room back; the same request then succeeds. */
	if (n > 0) {
		RT_OK(cudaFree(p[n - 1]));
		size_t fb = 0;
		RT_OK(cudaMemGetInfo(&fb, &t));
		CHECK_COL(meminfo, fb - f == GG_CHUNK);
		e = cudaMallocManaged(&p[n - 1], GG_CHUNK, cudaMemAttachGlobal);
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
	gg_info("stats: allocs=%llu frees=%llu refused_ceiling=%llu peak=%llu", (unsigned long long)s.allocs,
		(unsigned long long)s.frees, (unsigned long long)s.refused[GPUGUARD_REFUSED_CEILING],
		(unsigned long long)s.peak);
	return gg_finish();
}
