/* gpuguard on a real GPU: stream-ordered allocation on the device's default
 * pool, set up as PyTorch's cudaMallocAsync backend sets it (release
 * threshold UINT64_MAX, so the pool keeps everything it ever held). Under
 * GPUGUARD_LIMIT=4Gi: the pool grows to the ceiling and no further
 * (cudaErrorMemoryAllocation); after cudaFreeAsync + sync the pool keeps its
 * reserve and stays charged, yet a new request served from that warm reserve
 * succeeds although the ceiling is "full" (DESIGN.md §2); cudaMemPoolTrimTo
 * (pool, 0) gives the memory back and the books drop. */
#include <cuda_runtime.h>

#include "gg_gpu.h"

static cudaMemPool_t pool;

static uint64_t pool_attr(cudaMemPoolAttr a)
{
	uint64_t v = 0;
	RT_OK(cudaMemPoolGetAttribute(pool, a, &v));
	return v;
}

static void show(const char *when)
{
	struct gpuguard_device_stats s = gg_stats(0);
	size_t f = 0, t = 0;
	cudaMemGetInfo(&f, &t);
	gg_info("%s: pool reserved=%llu used=%llu; gpuguard used=%llu pool_reserved=%llu peak=%llu "
		"overshoot=%llu; free=%zu total=%zu",
		when, (unsigned long long)pool_attr(cudaMemPoolAttrReservedMemCurrent),
		(unsigned long long)pool_attr(cudaMemPoolAttrUsedMemCurrent), (unsigned long long)s.used,
		(unsigned long long)s.pool_reserved, (unsigned long long)s.peak,
		(unsigned long long)s.pool_overshoot, f, t);
}

int main(void)
{
	gg_begin("async_pool");
	int dev, rc = gg_runtime_start(&dev);
	if (rc >= 0)
		return rc;
	cudaError_t e;
	if (dev != 0) {
		printf("GGFAIL %s: runtime start-up: device %d, not 0\n", gg_v.program, dev);
		gg_v.failures++;
		return gg_finish();
	}
	int supported = 0;
	cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, dev);
	if (!supported)
		return gg_skip("memory-pools-not-supported");
	if (gg_require_guard(dev) != 0)
		return gg_finish();

	RT_OK(cudaDeviceGetDefaultMemPool(&pool, dev));
	uint64_t keep_all = UINT64_MAX;
	RT_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
	cudaStream_t st;
	RT_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

	struct gpuguard_device_stats s0 = gg_stats(dev);
	uint64_t used0 = s0.used;
	size_t f0 = 0, t0 = 0, f = 0, t = 0;
	RT_OK(cudaMemGetInfo(&f0, &t0));
	CHECK_COL(meminfo, t0 == GG_CEILING && f0 == GG_CEILING - used0);
	show("start");

	/* Grow the pool to the ceiling. */
	enum { MAXN = 64 };
	void *p[MAXN];
	int n = 0;
	e = cudaSuccess;
	while (n < MAXN) {
		e = cudaMallocAsync(&p[n], GG_CHUNK, st);
		if (e != cudaSuccess)
			break;
		n++;
	}
	cudaGetLastError();
	int expect = (int)((GG_CEILING - used0) / GG_CHUNK);
	gg_info("grew %d x 256 MiB (expected %d); refusal %s", n, expect, cudaGetErrorName(e));
	gg_set_refusal(cudaGetErrorName(e));
	show("full");
	/* The pool may round its growth; one step of slack, never past the ceiling. */
	CHECK_COL(ceiling, n >= expect - 1 && n <= expect);
	CHECK_COL(ceiling, e == cudaErrorMemoryAllocation);
	struct gpuguard_device_stats s = gg_stats(dev);
	uint64_t reserved = pool_attr(cudaMemPoolAttrReservedMemCurrent);
	CHECK_COL(ceiling, s.used <= s.limit && s.peak <= s.limit && reserved <= s.limit);
	CHECK_COL(ceiling, s.pool_overshoot == 0);
	if (cudaMemGetInfo(&f, &t) == cudaSuccess)
		CHECK_COL(meminfo, t == GG_CEILING && f == s.limit - s.used && f < GG_CHUNK);

	/* The memory works. */
	for (int i = 0; i < n; i++)
		fill<<<256, 256, 0, st>>>((unsigned *)p[i], GG_CHUNK / 4, (unsigned)i);
	CHECK_COL(working, cudaGetLastError() == cudaSuccess);
	CHECK_COL(working, cudaStreamSynchronize(st) == cudaSuccess);

	/* Free everything back to the pool: it keeps the reserve (threshold
	 * UINT64_MAX), and the reserve stays charged. */
	for (int i = 0; i < n; i++)
		RT_OK(cudaFreeAsync(p[i], st));
	RT_OK(cudaStreamSynchronize(st));
	show("freed, synced");
	uint64_t kept = pool_attr(cudaMemPoolAttrReservedMemCurrent);
	s = gg_stats(dev);
	CHECK(kept == reserved);
	CHECK_COL(ceiling, s.used >= used0 + kept && s.pool_reserved == kept);

	/* A request the warm reserve can serve succeeds although the ceiling
	 * is full; so does every other one it can serve. */
	int refill = 0;
	e = cudaSuccess;
	for (; refill < n; refill++) {
		e = cudaMallocAsync(&p[refill], GG_CHUNK, st);
		if (e != cudaSuccess)
			break;
	}
	cudaGetLastError();
	gg_info("served from the warm reserve: %d of %d (%s)", refill, n, cudaGetErrorName(e));
	CHECK_COL(working, n > 0 && refill >= 1);
	if (refill < n)
		gg_info("WARNING: only %d of %d same-size requests were served from the reserve", refill, n);
	CHECK_COL(ceiling, pool_attr(cudaMemPoolAttrReservedMemCurrent) == kept);
	/* ...while growth past it is still refused. */
	if (refill == n) {
		void *more = NULL;
		e = cudaMallocAsync(&more, GG_CHUNK, st);
		CHECK_COL(ceiling, e == cudaErrorMemoryAllocation);
		if (e == cudaSuccess)
			cudaFreeAsync(more, st);
		cudaGetLastError();
	}
	s = gg_stats(dev);
	CHECK_COL(ceiling, s.used <= s.limit && s.peak <= s.limit && s.pool_overshoot == 0);
	for (int i = 0; i < refill; i++)
		fill<<<256, 256, 0, st>>>((unsigned *)p[i], GG_CHUNK / 4, 1u);
	for (int i = 0; i < refill; i++)
		RT_OK(cudaFreeAsync(p[i], st));
	CHECK_COL(working, cudaStreamSynchronize(st) == cudaSuccess);

	/* Trimming gives it back (what torch.cuda.empty_cache() does here). */
	RT_OK(cudaMemPoolTrimTo(pool, 0));
	show("trimmed");
	s = gg_stats(dev);
	uint64_t after = pool_attr(cudaMemPoolAttrReservedMemCurrent);
	CHECK(after == 0);
	CHECK_COL(ceiling, s.used == used0 + after && s.pool_reserved == after);
	if (cudaMemGetInfo(&f, &t) == cudaSuccess)
		CHECK_COL(meminfo, t == GG_CEILING && f == f0);

	/* And the room is usable again: one 3 GiB block, a kernel, freed. */
	void *big = NULL;
	e = cudaMallocAsync(&big, 3 * GG_GIB, st);
	CHECK_COL(working, e == cudaSuccess);
	if (e == cudaSuccess) {
		fill<<<1024, 256, 0, st>>>((unsigned *)big, 3 * GG_GIB / 4, 3u);
		RT_OK(cudaFreeAsync(big, st));
		CHECK_COL(working, cudaStreamSynchronize(st) == cudaSuccess);
	}
	RT_OK(cudaMemPoolTrimTo(pool, 0));
	s = gg_stats(dev);
	CHECK_COL(ceiling, s.used == used0 && s.peak <= s.limit);
	show("end");
	cudaStreamDestroy(st);
	return gg_finish();
}
