/* gpuguard on a real GPU: the driver API, linked with -lcuda (symbol
 * interposition). Under GPUGUARD_LIMIT=4Gi: cuMemAlloc_v2 fills the ceiling
 * in 256 MiB steps and no further, the refusal is CUDA_ERROR_OUT_OF_MEMORY,
 * cuMemGetInfo reports total = 4 GiB and a free figure that moves with every
 * allocation and free, gpuguard_device_stats agrees, and the context keeps
 * working (memset + copy) after refusals. */
#include <cuda.h>

#include "gg_gpu.h"

static const char *errname(CUresult rc)
{
	const char *s = NULL;
	if (cuGetErrorName(rc, &s) != CUDA_SUCCESS || !s)
		return "CUDA_ERROR_?";
	return s;
}

#define DRV_OK(call)                                                                               \
	do {                                                                                       \
		CUresult rc_ = (call);                                                             \
		if (rc_ != CUDA_SUCCESS) {                                                         \
			printf("GGFAIL %s: %s:%d: %s = %s\n", gg_v.program, __FILE__, __LINE__, #call, \
			       errname(rc_));                                                      \
			gg_v.failures++;                                                           \
		}                                                                                  \
	} while (0)

static int meminfo(size_t *f, size_t *t)
{
	*f = *t = 0;
	CUresult rc = cuMemGetInfo(f, t);
	if (rc != CUDA_SUCCESS) {
		printf("GGFAIL %s: cuMemGetInfo = %s\n", gg_v.program, errname(rc));
		gg_v.failures++;
		return -1;
	}
	return 0;
}

int main(void)
{
	gg_begin("driver_api");
	CUdevice dev;
	CUcontext ctx = NULL;
	CUresult irc = cuInit(0);
	if (irc == CUDA_ERROR_NO_DEVICE)
		return gg_skip(errname(irc));
	if (irc != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
	    cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
		CHECK(!"driver start-up (cuInit, primary context)");
		return gg_finish();
	}
	if (gg_require_guard((int)dev) != 0)
		return gg_finish();
	CHECK(gg_is_ours(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2")));

	struct gpuguard_device_stats s0 = gg_stats((int)dev);
	uint64_t used0 = s0.used;
	size_t f0, t0;
	if (meminfo(&f0, &t0) == 0) {
		gg_info("cuMemGetInfo at start: free=%zu total=%zu", f0, t0);
		CHECK_COL(meminfo, t0 == GG_CEILING);
		CHECK_COL(meminfo, f0 == GG_CEILING - used0);
	}
	size_t devtotal = 0;
	DRV_OK(cuDeviceTotalMem(&devtotal, dev));
	CHECK_COL(meminfo, devtotal == GG_CEILING);

	/* One request bigger than the whole ceiling: refused, nothing charged. */
	CUdeviceptr big = 0;
	CUresult rc = cuMemAlloc(&big, 5 * GG_GIB);
	CHECK_COL(ceiling, rc == CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_COL(ceiling, gg_stats((int)dev).used == used0);

	/* Fill in 256 MiB steps: exactly (ceiling - used0) / step succeed. */
	enum { MAXN = 64 };
	CUdeviceptr p[MAXN + 8];
	int n = 0, free_moves = 1;
	size_t fprev = f0, f, t;
	CUresult last = CUDA_SUCCESS;
	while (n < MAXN) {
		last = cuMemAlloc(&p[n], GG_CHUNK);
		if (last != CUDA_SUCCESS)
			break;
		n++;
		if (meminfo(&f, &t) == 0) {
			if (fprev - f != GG_CHUNK || t != GG_CEILING)
				free_moves = 0;
			fprev = f;
		}
	}
	int expect = (int)((GG_CEILING - used0) / GG_CHUNK);
	gg_info("filled %d x 256 MiB (expected %d); refusal %s", n, expect, errname(last));
	gg_set_refusal(errname(last));
	CHECK_COL(ceiling, n == expect);
	CHECK_COL(ceiling, last == CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_COL(meminfo, free_moves);

	/* Fill what is left, in whole 2 MiB pages, then even 2 MiB is refused. */
	struct gpuguard_device_stats s = gg_stats((int)dev);
	CHECK_COL(ceiling, s.used == used0 + (uint64_t)n * GG_CHUNK);
	CHECK(s.refused[GPUGUARD_REFUSED_CEILING] >= s0.refused[GPUGUARD_REFUSED_CEILING] + 2);
	uint64_t rest = s.limit > s.used ? (s.limit - s.used) / (2 * GG_MIB) * (2 * GG_MIB) : 0;
	CUdeviceptr tail = 0;
	if (rest) {
		rc = cuMemAlloc(&tail, rest);
		CHECK_COL(ceiling, rc == CUDA_SUCCESS);
		if (rc != CUDA_SUCCESS)
			tail = 0;
	}
	CUdeviceptr extra = 0;
	rc = cuMemAlloc(&extra, 2 * GG_MIB);
	CHECK_COL(ceiling, rc == CUDA_ERROR_OUT_OF_MEMORY);
	if (rc == CUDA_SUCCESS)
		cuMemFree(extra);
	s = gg_stats((int)dev);
	CHECK_COL(ceiling, s.used <= s.limit && s.peak <= s.limit);
	if (meminfo(&f, &t) == 0) {
		gg_info("at the ceiling: free=%zu total=%zu used=%llu peak=%llu", f, t, (unsigned long long)s.used,
			(unsigned long long)s.peak);
		CHECK_COL(meminfo, t == GG_CEILING && f < 2 * GG_MIB);
		CHECK_COL(meminfo, f == s.limit - s.used);
	}

	/* The context still works after the refusals. */
	if (n > 0) {
		unsigned host[4] = {0, 0, 0, 0};
		CUresult a = cuMemsetD32(p[0], 0xC0FFEEu, GG_CHUNK / 4);
		CUresult b = cuMemsetD32(p[n - 1], 0xBEEFu, GG_CHUNK / 4);
		CUresult c = cuMemcpyDtoH(&host[0], p[0] + GG_CHUNK - 8, 8);
		CUresult d = cuMemcpyDtoH(&host[2], p[n - 1], 8);
		CUresult e = cuCtxSynchronize();
		CHECK_COL(working, a == CUDA_SUCCESS && b == CUDA_SUCCESS && c == CUDA_SUCCESS &&
					   d == CUDA_SUCCESS && e == CUDA_SUCCESS);
		CHECK_COL(working, host[0] == 0xC0FFEEu && host[1] == 0xC0FFEEu && host[2] == 0xBEEFu &&
					   host[3] == 0xBEEFu);
	}

	/* A free gives the room back at once; the same request then succeeds. */
	if (tail)
		DRV_OK(cuMemFree(tail));
	if (n > 0) {
		size_t fa = 0, fb = 0;
		meminfo(&fa, &t);
		uint64_t ua = gg_stats((int)dev).used;
		DRV_OK(cuMemFree(p[n - 1]));
		meminfo(&fb, &t);
		uint64_t ub = gg_stats((int)dev).used;
		CHECK_COL(meminfo, fb - fa == GG_CHUNK);
		CHECK_COL(ceiling, ua - ub == GG_CHUNK);
		rc = cuMemAlloc(&p[n - 1], GG_CHUNK);
		CHECK_COL(working, rc == CUDA_SUCCESS);
		if (rc != CUDA_SUCCESS)
			p[n - 1] = 0;
	}
	for (int i = 0; i < n; i++)
		if (p[i])
			DRV_OK(cuMemFree(p[i]));

	/* Everything back: the books and the free figure return to the start. */
	s = gg_stats((int)dev);
	CHECK_COL(ceiling, s.used == used0);
	CHECK(s.untracked_frees == s0.untracked_frees);
	if (meminfo(&f, &t) == 0)
		CHECK_COL(meminfo, f == f0 && t == GG_CEILING);
	CUdeviceptr again = 0;
	rc = cuMemAlloc(&again, GG_GIB);
	CHECK_COL(working, rc == CUDA_SUCCESS);
	if (rc == CUDA_SUCCESS)
		DRV_OK(cuMemFree(again));
	gg_info("stats: allocs=%llu frees=%llu refused_ceiling=%llu peak=%llu", (unsigned long long)s.allocs,
		(unsigned long long)s.frees, (unsigned long long)s.refused[GPUGUARD_REFUSED_CEILING],
		(unsigned long long)s.peak);
	/* The last release of the primary context resets it on the card (the
	 * driver API's reference): a block left live is refunded with it. */
	CUdeviceptr left = 0;
	DRV_OK(cuMemAlloc(&left, GG_CHUNK));
	uint64_t before = gg_stats((int)dev).live_bytes;
	DRV_OK(cuDevicePrimaryCtxRelease(dev));
	unsigned int flags = 0;
	int active = 1;
	DRV_OK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	CHECK(active == 0);
	CHECK_COL(ceiling, gg_stats((int)dev).live_bytes + GG_CHUNK <= before);
	return gg_finish();
}
