/* gpuguard on a real GPU: virtual memory management, reached as PyTorch's
 * expandable segments, vLLM and NCCL reach it: driver entry points from
 * cudaGetDriverEntryPoint[ByVersion] (the driver's cuGetProcAddress_v2), not
 * from linking -lcuda. Under GPUGUARD_LIMIT=4Gi: an 8 GiB cuMemAddressReserve
 * succeeds and is not charged, cuMemCreate fills the ceiling and no further
 * (CUDA_ERROR_OUT_OF_MEMORY), the chunks map, take access and a kernel
 * writes all of them, and releasing them gives the room back. */
#include <cuda.h>
#include <cuda_runtime.h>

#include "gg_gpu.h"

typedef CUresult (*pfn_GetErrorName)(CUresult, const char **);
typedef CUresult (*pfn_MemGetInfo)(size_t *, size_t *);
typedef CUresult (*pfn_MemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *,
						     CUmemAllocationGranularity_flags);
typedef CUresult (*pfn_MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*pfn_MemAddressFree)(CUdeviceptr, size_t);
typedef CUresult (*pfn_MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
				  unsigned long long);
typedef CUresult (*pfn_MemRelease)(CUmemGenericAllocationHandle);
typedef CUresult (*pfn_MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*pfn_MemUnmap)(CUdeviceptr, size_t);
typedef CUresult (*pfn_MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);

static pfn_GetErrorName pGetErrorName;
static pfn_MemGetInfo pMemGetInfo;
static pfn_MemGetAllocationGranularity pGranularity;
static pfn_MemAddressReserve pAddressReserve;
static pfn_MemAddressFree pAddressFree;
static pfn_MemCreate pCreate;
static pfn_MemRelease pRelease;
static pfn_MemMap pMap;
static pfn_MemUnmap pUnmap;
static pfn_MemSetAccess pSetAccess;

/* As PyTorch's c10/cuda/driver_api.cpp does: ByVersion at 12000 where the
 * runtime has it (12.5+), the older call otherwise. */
static void *entry(const char *name, int *ours)
{
	void *fn = NULL;
	cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
	cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &st);
#else
	cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &st);
#endif
	if (e != cudaSuccess || st != cudaDriverEntryPointSuccess || !fn) {
		printf("GGFAIL %s: driver entry point %s: %s, status %d\n", gg_v.program, name,
		       cudaGetErrorName(e), (int)st);
		gg_v.failures++;
		return NULL;
	}
	if (ours)
		*ours = gg_is_ours(fn);
	return fn;
}

static const char *errname(CUresult rc)
{
	const char *s = NULL;
	if (!pGetErrorName || pGetErrorName(rc, &s) != CUDA_SUCCESS || !s)
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

/* Counts words of p[0..n) that are not what fill() wrote. */
__global__ void verify(const unsigned *p, size_t n, unsigned v, unsigned long long *bad)
{
	unsigned long long mine = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		mine += p[i] != (v ^ (unsigned)i);
	if (mine)
		atomicAdd(bad, mine);
}

int main(void)
{
	gg_begin("vmm");
	int dev, started = gg_runtime_start(&dev);
	if (started >= 0)
		return started;
	if (gg_require_guard(dev) != 0)
		return gg_finish();

	int create_ours = 0, release_ours = 0, info_ours = 0;
	pGetErrorName = (pfn_GetErrorName)entry("cuGetErrorName", NULL);
	pMemGetInfo = (pfn_MemGetInfo)entry("cuMemGetInfo", &info_ours);
	pGranularity = (pfn_MemGetAllocationGranularity)entry("cuMemGetAllocationGranularity", NULL);
	pAddressReserve = (pfn_MemAddressReserve)entry("cuMemAddressReserve", NULL);
	pAddressFree = (pfn_MemAddressFree)entry("cuMemAddressFree", NULL);
	pCreate = (pfn_MemCreate)entry("cuMemCreate", &create_ours);
	pRelease = (pfn_MemRelease)entry("cuMemRelease", &release_ours);
	pMap = (pfn_MemMap)entry("cuMemMap", NULL);
	pUnmap = (pfn_MemUnmap)entry("cuMemUnmap", NULL);
	pSetAccess = (pfn_MemSetAccess)entry("cuMemSetAccess", NULL);
	gg_info("entry points from libgpuguard: cuMemCreate=%d cuMemRelease=%d cuMemGetInfo=%d", create_ours,
		release_ours, info_ours);
	CHECK(create_ours && release_ours && info_ours);
	if (!pMemGetInfo || !pGranularity || !pAddressReserve || !pAddressFree || !pCreate || !pRelease || !pMap ||
	    !pUnmap || !pSetAccess)
		return gg_finish();

	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	size_t gran = 0;
	DRV_OK(pGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	if (!CHECK(gran > 0 && gran <= GG_CHUNK))
		return gg_finish();
	size_t chunk = (GG_CHUNK + gran - 1) / gran * gran;
	gg_info("granularity %zu, chunk %zu", gran, chunk);

	struct gpuguard_device_stats s0 = gg_stats(dev);
	uint64_t used0 = s0.used;
	size_t f0 = 0, t0 = 0, f = 0, t = 0;
	DRV_OK(pMemGetInfo(&f0, &t0));
	gg_info("cuMemGetInfo at start: free=%zu total=%zu", f0, t0);
	CHECK_COL(meminfo, t0 == GG_CEILING && f0 == GG_CEILING - used0);

	/* Address space is not memory: 8 GiB of it, twice the ceiling, is free. */
	const size_t va_size = 8 * GG_GIB;
	CUdeviceptr base = 0;
	CUresult rc = pAddressReserve(&base, va_size, 0, 0, 0);
	CHECK_COL(ceiling, rc == CUDA_SUCCESS);
	CHECK_COL(ceiling, gg_stats(dev).used == used0);
	if (rc != CUDA_SUCCESS)
		return gg_finish();

	enum { MAXN = 32 }; /* 32 x 256 MiB = the whole reservation */
	CUmemGenericAllocationHandle h[MAXN];
	CUmemAccessDesc access;
	memset(&access, 0, sizeof(access));
	access.location = prop.location;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	int n = 0, mapped = 1, free_moves = 1;
	size_t fprev = f0;
	CUresult last = CUDA_SUCCESS;
	while (n < MAXN && (size_t)(n + 1) * chunk <= va_size) {
		last = pCreate(&h[n], chunk, &prop, 0);
		if (last != CUDA_SUCCESS)
			break;
		CUdeviceptr at = base + (CUdeviceptr)n * chunk;
		n++;
		if (pMap(at, chunk, 0, h[n - 1], 0) != CUDA_SUCCESS || pSetAccess(at, chunk, &access, 1) != CUDA_SUCCESS)
			mapped = 0;
		if (pMemGetInfo(&f, &t) != CUDA_SUCCESS || fprev - f != chunk || t != GG_CEILING)
			free_moves = 0;
		fprev = f;
	}
	int expect = (int)((GG_CEILING - used0) / chunk);
	gg_info("created %d x %zu (expected %d); refusal %s", n, chunk, expect, errname(last));
	gg_set_refusal(errname(last));
	CHECK_COL(ceiling, n == expect);
	CHECK_COL(ceiling, last == CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_COL(meminfo, free_moves);
	CHECK_COL(working, mapped);
	struct gpuguard_device_stats s = gg_stats(dev);
	CHECK_COL(ceiling, s.used == used0 + (uint64_t)n * chunk);
	CHECK_COL(ceiling, s.used <= s.limit && s.peak <= s.limit);
	if (pMemGetInfo(&f, &t) == CUDA_SUCCESS) {
		gg_info("at the ceiling: free=%zu total=%zu used=%llu", f, t, (unsigned long long)s.used);
		CHECK_COL(meminfo, t == GG_CEILING && f == s.limit - s.used);
	}
	/* The smallest possible request is refused too. */
	CUmemGenericAllocationHandle small;
	rc = pCreate(&small, gran, &prop, 0);
	CHECK_COL(ceiling, rc == CUDA_ERROR_OUT_OF_MEMORY);
	if (rc == CUDA_SUCCESS)
		pRelease(small);

	/* A kernel writes every mapped byte, another checks them. */
	if (n > 0 && mapped) {
		size_t words = (size_t)n * chunk / 4;
		unsigned long long *bad = NULL, hbad = ~0ull;
		/* The counter is host memory, mapped: the ceiling is full. */
		cudaError_t a = cudaHostAlloc((void **)&bad, sizeof(*bad), cudaHostAllocMapped);
		if (a == cudaSuccess) {
			*bad = 0;
			unsigned long long *dbad = NULL;
			cudaHostGetDevicePointer((void **)&dbad, bad, 0);
			fill<<<2048, 256>>>((unsigned *)base, words, 0xa11ceu);
			verify<<<2048, 256>>>((const unsigned *)base, words, 0xa11ceu, dbad);
			cudaError_t l = cudaGetLastError();
			cudaError_t sy = cudaDeviceSynchronize();
			hbad = *bad;
			gg_info("kernels over %zu mapped bytes: launch=%s sync=%s bad=%llu", words * 4,
				cudaGetErrorName(l), cudaGetErrorName(sy), hbad);
			CHECK_COL(working, l == cudaSuccess && sy == cudaSuccess && hbad == 0);
			cudaFreeHost(bad);
		} else {
			CHECK_COL(working, a == cudaSuccess);
		}
	}

	/* Release one: its room is back and a new chunk can be made and mapped. */
	if (n > 0) {
		CUdeviceptr at = base + (CUdeviceptr)(n - 1) * chunk;
		size_t fa = 0, fb = 0;
		pMemGetInfo(&fa, &t);
		DRV_OK(pUnmap(at, chunk));
		DRV_OK(pRelease(h[n - 1]));
		pMemGetInfo(&fb, &t);
		CHECK_COL(meminfo, fb - fa == chunk);
		rc = pCreate(&h[n - 1], chunk, &prop, 0);
		CHECK_COL(working, rc == CUDA_SUCCESS);
		if (rc == CUDA_SUCCESS) {
			CHECK_COL(working, pMap(at, chunk, 0, h[n - 1], 0) == CUDA_SUCCESS &&
						   pSetAccess(at, chunk, &access, 1) == CUDA_SUCCESS);
			fill<<<256, 256>>>((unsigned *)at, chunk / 4, 7u);
			CHECK_COL(working, cudaDeviceSynchronize() == cudaSuccess);
		} else {
			h[n - 1] = 0;
		}
	}
	for (int i = 0; i < n; i++) {
		if (!h[i])
			continue;
		DRV_OK(pUnmap(base + (CUdeviceptr)i * chunk, chunk));
		DRV_OK(pRelease(h[i]));
	}
	DRV_OK(pAddressFree(base, va_size));
	s = gg_stats(dev);
	CHECK_COL(ceiling, s.used == used0);
	DRV_OK(pMemGetInfo(&f, &t));
	CHECK_COL(meminfo, f == f0 && t == GG_CEILING);
	gg_info("stats: allocs=%llu frees=%llu refused_ceiling=%llu peak=%llu", (unsigned long long)s.allocs,
		(unsigned long long)s.frees, (unsigned long long)s.refused[GPUGUARD_REFUSED_CEILING],
		(unsigned long long)s.peak);
	return gg_finish();
}
