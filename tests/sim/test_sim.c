/* Self-test of the simulated GPU (no gpuguard involved): links -lcuda
 * -lamdhip64 -lnvidia-ml against build/sim and checks the page model, the
 * driver's error codes, cuGetProcAddress rules, pools, VMM, several devices
 * and threads, and NVML's view of the same devices. */
#define _GNU_SOURCE
#include "gpuguard/cuda_abi.h"
#include "gpuguard/hip_abi.h"
#include "gpuguard/nvml_abi.h"
#include "../harness.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

int simgpu_cuda_debug_used(int dev, unsigned long long *pages_bytes, unsigned long long *peak_pages_bytes,
                           unsigned long long *live_allocs);
void simgpu_cuda_debug_reset_peak(void);
int simgpu_hip_debug_used(int dev, unsigned long long *pages_bytes, unsigned long long *peak_pages_bytes,
                          unsigned long long *live_allocs);

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define DEVMEM GiB /* SIMGPU_MEMORY set by main */

static gg_CUcontext g_ctx0, g_ctx1;

static size_t cu_free(void)
{
	size_t f = 0, t = 0;
	cuMemGetInfo_v2(&f, &t);
	return f;
}

static size_t hip_free(void)
{
	size_t f = 0, t = 0;
	hipMemGetInfo(&f, &t);
	return f;
}

static unsigned long long cu_used(int dev)
{
	unsigned long long u = 0;
	simgpu_cuda_debug_used(dev, &u, NULL, NULL);
	return u;
}

TEST(before_init)
{
	gg_CUdeviceptr p;
	int n;
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 4096), GG_CUDA_ERROR_NOT_INITIALIZED);
	CHECK_EQ_INT(cuDeviceGetCount(&n), GG_CUDA_ERROR_NOT_INITIALIZED);
	gg_CUuuid u;
	CHECK_EQ_INT(cuDeviceGetUuid_v2(&u, 0), GG_CUDA_ERROR_NOT_INITIALIZED);
	void *fn = NULL;
	CHECK_EQ_INT(cuGetProcAddress_v2("cuInit", &fn, 2000, 0, NULL), GG_CUDA_SUCCESS); /* no init needed */
	CHECK_EQ_INT(cuInit(1), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuInit(0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 4096), GG_CUDA_ERROR_INVALID_CONTEXT);
	gg_CUcontext c = (gg_CUcontext)1;
	CHECK_EQ_INT(cuCtxGetCurrent(&c), GG_CUDA_SUCCESS);
	CHECK(c == NULL);
	CHECK_EQ_INT(cuDevicePrimaryCtxRetain(&g_ctx0, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuDevicePrimaryCtxRetain(&g_ctx1, 1), GG_CUDA_SUCCESS);
	CHECK(g_ctx0 && g_ctx1 && g_ctx0 != g_ctx1);
	CHECK_EQ_INT(cuCtxSetCurrent(g_ctx0), GG_CUDA_SUCCESS);
}

TEST(error_codes)
{
	gg_CUdeviceptr p = 0, q = 0;
	gg_CUdevice d;
	size_t f, t;
	int n;
	char name[64];
	const char *s;
	CHECK_EQ_INT(cuDeviceGetCount(&n), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(n, 2);
	CHECK_EQ_INT(cuDeviceGet(&d, 2), GG_CUDA_ERROR_INVALID_DEVICE);
	CHECK_EQ_INT(cuDeviceGet(&d, -1), GG_CUDA_ERROR_INVALID_DEVICE);
	CHECK_EQ_INT(cuDeviceTotalMem_v2(&t, 5), GG_CUDA_ERROR_INVALID_DEVICE);
	CHECK_EQ_INT(cuDeviceTotalMem_v2(&t, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(t, DEVMEM);
	CHECK_EQ_INT(cuDeviceGetName(name, sizeof(name), 0), GG_CUDA_SUCCESS);
	CHECK(!strcmp(name, "gpuguard simulated GPU"));
	CHECK_EQ_INT(cuDriverGetVersion(&n), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(n, 13000);
	CHECK_EQ_INT(cuMemAlloc_v2(NULL, 4096), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 0), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 2 * DEVMEM), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(cuMemAlloc_v2(&p, DEVMEM + 1), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(cuMemFree_v2(0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(0x1234), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 4096), GG_CUDA_SUCCESS);
	CHECK(p != 0 && p % 512 == 0);
	CHECK_EQ_INT(cuMemFree_v2(p + 512), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemFree_v2(p), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(p), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemGetInfo_v2(NULL, &t), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemGetInfo_v2(&f, NULL), GG_CUDA_ERROR_INVALID_VALUE);
	/* the whole card fits exactly once */
	CHECK_EQ_INT(cuMemAlloc_v2(&q, DEVMEM), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), 0);
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 1), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(cuMemFree_v2(q), GG_CUDA_SUCCESS);
	/* legacy 32-bit ABIs */
	gg_CUdeviceptr_v1 p32;
	unsigned int f32, t32;
	CHECK_EQ_INT(cuMemAlloc(&p32, 4096), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(cuMemFree(0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree(0x1000), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemGetInfo(&f32, &t32), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(t32, DEVMEM); /* 1 GiB fits in 32 bits */
	CHECK_EQ_INT(cuDeviceTotalMem(&t32, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(t32, DEVMEM);
	CHECK_EQ_INT(cuGetErrorString(GG_CUDA_ERROR_OUT_OF_MEMORY, &s), GG_CUDA_SUCCESS);
	CHECK(!strcmp(s, "out of memory"));
	CHECK_EQ_INT(cuGetErrorName(GG_CUDA_ERROR_OUT_OF_MEMORY, &s), GG_CUDA_SUCCESS);
	CHECK(!strcmp(s, "CUDA_ERROR_OUT_OF_MEMORY"));
	CHECK_EQ_INT(cuGetErrorName(12345, &s), GG_CUDA_ERROR_INVALID_VALUE);
	/* context stack */
	gg_CUcontext c;
	CHECK_EQ_INT(cuCtxPushCurrent_v2(g_ctx1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxGetDevice(&d), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(d, 1);
	CHECK_EQ_INT(cuCtxPopCurrent_v2(&c), GG_CUDA_SUCCESS);
	CHECK(c == g_ctx1);
	CHECK_EQ_INT(cuCtxGetDevice(&d), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(d, 0);
	CHECK_EQ_INT(cuCtxSetCurrent((gg_CUcontext)&n), GG_CUDA_ERROR_INVALID_CONTEXT);
}

TEST(page_rounding_and_packing)
{
	size_t f0 = cu_free();
	gg_CUdeviceptr a, b[100], c, base;
	size_t sz;
	CHECK_EQ_U64(f0, DEVMEM);
	CHECK_EQ_INT(cuMemAlloc_v2(&a, 4096), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 2 * MiB);
	for (int i = 0; i < 100; i++)
		CHECK_EQ_INT(cuMemAlloc_v2(&b[i], 4096), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 2 * MiB); /* 101 x 4 KiB share one page */
	CHECK_EQ_INT(cuMemAlloc_v2(&c, 3 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 6 * MiB);
	CHECK_EQ_U64(c % (2 * MiB), 0);
	/* address ranges: interior pointers, small and large */
	CHECK_EQ_INT(cuMemGetAddressRange_v2(&base, &sz, b[7] + 100), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(base, b[7]);
	CHECK_EQ_U64(sz, 4096);
	CHECK_EQ_INT(cuMemGetAddressRange_v2(&base, &sz, c + 3 * MiB - 1), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(base, c);
	CHECK_EQ_U64(sz, 3 * MiB);
	CHECK_EQ_INT(cuMemGetAddressRange_v2(&base, &sz, c + 3 * MiB), GG_CUDA_ERROR_NOT_FOUND);
	CHECK_EQ_INT(cuMemGetAddressRange_v2(&base, &sz, 0x1000), GG_CUDA_ERROR_NOT_FOUND);
	unsigned long long live = 0;
	simgpu_cuda_debug_used(0, NULL, NULL, &live);
	CHECK_EQ_U64(live, 102);
	CHECK_EQ_INT(cuMemFree_v2(a), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 6 * MiB); /* page still holds b[] */
	for (int i = 0; i < 100; i++)
		CHECK_EQ_INT(cuMemFree_v2(b[i]), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 4 * MiB);
	CHECK_EQ_INT(cuMemFree_v2(c), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0);
	/* 4096 x 512 B fill exactly one page; the next one opens a second */
	static gg_CUdeviceptr s[4097];
	for (int i = 0; i < 4097; i++)
		CHECK_EQ_INT(cuMemAlloc_v2(&s[i], i % 2 ? 512 : 1), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 4 * MiB);
	CHECK_EQ_INT(cuMemFree_v2(s[4096]), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 2 * MiB);
	for (int i = 0; i < 4096; i++)
		CHECK_EQ_INT(cuMemFree_v2(s[i]), GG_CUDA_SUCCESS);
	/* exactly 1 MiB is still small: two share a page */
	CHECK_EQ_INT(cuMemAlloc_v2(&a, MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAlloc_v2(&c, MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 2 * MiB);
	CHECK_EQ_INT(cuMemFree_v2(a), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(c), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAlloc_v2(&a, MiB + 1), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 2 * MiB);
	CHECK_EQ_INT(cuMemFree_v2(a), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0);
	simgpu_cuda_debug_used(0, NULL, NULL, &live);
	CHECK_EQ_U64(live, 0);
}

TEST(fragmentation)
{
	size_t f0 = cu_free();
	size_t n = f0 / (2 * MiB);
	gg_CUdeviceptr *p = calloc(n, sizeof(*p)), x;
	for (size_t i = 0; i < n; i++)
		CHECK_EQ_INT(cuMemAlloc_v2(&p[i], 2 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), 0);
	CHECK_EQ_INT(cuMemAlloc_v2(&x, 1), GG_CUDA_ERROR_OUT_OF_MEMORY);
	for (size_t i = 0; i < n; i += 2)
		CHECK_EQ_INT(cuMemFree_v2(p[i]), GG_CUDA_SUCCESS);
	CHECK(cu_free() >= 4 * MiB);
	CHECK_EQ_INT(cuMemAlloc_v2(&x, 4 * MiB), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(cuMemAlloc_v2(&x, 2 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(x), GG_CUDA_SUCCESS);
	for (size_t i = 1; i < n; i += 2)
		CHECK_EQ_INT(cuMemFree_v2(p[i]), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0);
	CHECK_EQ_INT(cuMemAlloc_v2(&x, 4 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(x), GG_CUDA_SUCCESS);
	free(p);
}

TEST(pitch_managed_host_arrays)
{
	size_t f0 = cu_free(), pitch;
	gg_CUdeviceptr p;
	CHECK_EQ_INT(cuMemAllocPitch_v2(&p, &pitch, 1000, 3000, 3), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemAllocPitch_v2(&p, &pitch, 1000, 3000, 4), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(pitch, 1024);
	CHECK_EQ_U64(cu_free(), f0 - 4 * MiB); /* 1024 x 3000 = 2.93 MiB */
	CHECK_EQ_INT(cuMemFree_v2(p), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAllocManaged(&p, 4096, 0), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemAllocManaged(&p, 4096, GG_CU_MEM_ATTACH_SINGLE), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemAllocManaged(&p, 4096, GG_CU_MEM_ATTACH_GLOBAL), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 2 * MiB);
	CHECK_EQ_INT(cuMemFree_v2(p), GG_CUDA_SUCCESS);
	void *h;
	CHECK_EQ_INT(cuMemAllocHost_v2(&h, 1 << 20), GG_CUDA_SUCCESS);
	memset(h, 0xab, 1 << 20); /* real memory */
	CHECK_EQ_U64(cu_free(), f0);
	CHECK_EQ_INT(cuMemFreeHost(h), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemHostAlloc(&h, 4096, 0x100), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemHostAlloc(&h, 4096, GG_CU_MEMHOSTALLOC_PORTABLE), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFreeHost(h), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFreeHost(&pitch), GG_CUDA_ERROR_INVALID_VALUE);
	/* arrays: 1000 x 1000 x float4 = 16 MB -> 8 pages */
	gg_CUarray a;
	gg_CUDA_ARRAY_DESCRIPTOR ad = {1000, 1000, GG_CU_AD_FORMAT_FLOAT, 4};
	CHECK_EQ_INT(cuArrayCreate_v2(&a, &ad), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 16 * MiB);
	CHECK_EQ_INT(cuMemFree_v2((gg_CUdeviceptr)(uintptr_t)a), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuArrayDestroy(a), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuArrayDestroy(a), GG_CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ_INT(cuArrayDestroy((gg_CUarray)&ad), GG_CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ_U64(cu_free(), f0);
	ad.NumChannels = 3;
	CHECK_EQ_INT(cuArrayCreate_v2(&a, &ad), GG_CUDA_ERROR_INVALID_VALUE);
	gg_CUDA_ARRAY3D_DESCRIPTOR d3 = {64, 64, 64, GG_CU_AD_FORMAT_UNSIGNED_INT8, 1, 0}; /* 256 KiB */
	CHECK_EQ_INT(cuArray3DCreate_v2(&a, &d3), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 2 * MiB); /* arrays take whole pages */
	CHECK_EQ_INT(cuArrayDestroy(a), GG_CUDA_SUCCESS);
	gg_CUmipmappedArray m;
	gg_CUDA_ARRAY3D_DESCRIPTOR md = {2048, 1024, 0, GG_CU_AD_FORMAT_FLOAT, 1, 0}; /* 8 MiB + 2 + 0.5 + ... */
	CHECK_EQ_INT(cuMipmappedArrayCreate(&m, &md, 0), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMipmappedArrayCreate(&m, &md, 4), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 12 * MiB); /* 8 + 2 + 0.5 + 0.125 MiB */
	CHECK_EQ_INT(cuArrayDestroy((gg_CUarray)m), GG_CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ_INT(cuMipmappedArrayDestroy(m), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0);
}

TEST(get_proc_address)
{
	void *fn = (void *)1;
	gg_CUdriverProcAddressQueryResult st = -1;
	CHECK_EQ_INT(cuGetProcAddress_v2("", &fn, 0, 0, &st), GG_CUDA_ERROR_NOT_FOUND);
	CHECK_EQ_INT(st, GG_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	CHECK(fn == NULL);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuNoSuchThing", &fn, 13000, 0, &st), GG_CUDA_ERROR_NOT_FOUND);
	CHECK_EQ_INT(st, GG_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, 0, &st), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(st, GG_CU_GET_PROC_ADDRESS_SUCCESS);
	CHECK(fn == (void *)cuMemAlloc_v2);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAlloc", &fn, 12080, 0, &st), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuMemAlloc_v2);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAlloc", &fn, 2000, 0, &st), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuMemAlloc);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAlloc", &fn, 1000, 0, &st), GG_CUDA_ERROR_NOT_FOUND);
	CHECK_EQ_INT(st, GG_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemGetInfo", &fn, 3020, 0, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuMemGetInfo_v2);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemGetInfo", &fn, 3010, 0, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuMemGetInfo);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemCreate", &fn, 10010, 0, &st), GG_CUDA_ERROR_NOT_FOUND);
	CHECK_EQ_INT(st, GG_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemCreate", &fn, 10020, 0, &st), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuMemCreate);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11020, 2, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuMemAllocAsync_ptsz);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11020, 0, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuMemAllocAsync);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11020, 1, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuMemAllocAsync);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemFreeAsync", &fn, 11020, 2, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuMemFreeAsync_ptsz);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAllocFromPoolAsync", &fn, 11020, 2, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuMemAllocFromPoolAsync_ptsz);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuStreamSynchronize", &fn, 2000, 2, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuStreamSynchronize_ptsz);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, 2, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuMemAlloc_v2); /* no _ptsz variant: flag ignored */
	CHECK_EQ_INT(cuGetProcAddress_v2("cuGetProcAddress", &fn, 11030, 0, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuGetProcAddress);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuGetProcAddress", &fn, 12000, 0, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuGetProcAddress_v2);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuDevicePrimaryCtxRelease", &fn, 11000, 0, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuDevicePrimaryCtxRelease_v2);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, 4, NULL), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuGetProcAddress_v2(NULL, &fn, 3020, 0, NULL), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemAlloc", NULL, 3020, 0, NULL), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuGetProcAddress("cuMemAlloc", &fn, 3020, 0), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuMemAlloc_v2);
	/* a pointer from the table works */
	gg_CUdeviceptr p;
	CHECK_EQ_INT(((gg_pfn_cuMemAlloc_v2)fn)(&p, 100), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(p), GG_CUDA_SUCCESS);
}

static uint64_t pool_attr(gg_CUmemoryPool pool, int attr)
{
	gg_cuuint64_t v = 0;
	if (cuMemPoolGetAttribute(pool, attr, &v))
		return UINT64_MAX - 1;
	return v;
}

TEST(pools)
{
	size_t f0 = cu_free();
	gg_CUmemoryPool def, cur, mine;
	gg_CUdeviceptr p, q;
	CHECK_EQ_INT(cuDeviceGetDefaultMemPool(&def, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuDeviceGetMemPool(&cur, 0), GG_CUDA_SUCCESS);
	CHECK(def == cur && def != NULL);
	CHECK_EQ_INT(cuDeviceGetDefaultMemPool(&cur, 7), GG_CUDA_ERROR_INVALID_DEVICE);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0);
	/* a free keeps the reserve; synchronisation releases it (threshold 0) */
	CHECK_EQ_INT(cuMemAllocAsync(&p, 10 * MiB, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 10 * MiB);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 10 * MiB);
	CHECK_EQ_U64(cu_free(), f0 - 10 * MiB);
	CHECK_EQ_INT(cuMemFreeAsync(p, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 10 * MiB);
	CHECK_EQ_U64(cu_free(), f0 - 10 * MiB);
	CHECK_EQ_INT(cuStreamSynchronize(NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	CHECK_EQ_U64(cu_free(), f0);
	/* threshold 4 MiB: sync keeps 4 MiB, a warm pool serves from it */
	gg_cuuint64_t thr = 4 * MiB;
	CHECK_EQ_INT(cuMemPoolSetAttribute(def, GG_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAllocAsync(&p, 10 * MiB, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFreeAsync(p, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxSynchronize(), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
	CHECK_EQ_U64(cu_free(), f0 - 4 * MiB);
	CHECK_EQ_INT(cuMemAllocAsync_ptsz(&p, 3 * MiB, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAllocAsync(&q, 1 * MiB, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 4 * MiB); /* no new pages */
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 4 * MiB);
	gg_CUdeviceptr base;
	size_t sz;
	CHECK_EQ_INT(cuMemGetAddressRange_v2(&base, &sz, q + 1000), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(base, q);
	CHECK_EQ_U64(sz, MiB);
	CHECK_EQ_INT(cuMemFreeAsync_ptsz(p, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(q), GG_CUDA_SUCCESS); /* a plain free of a pool block works */
	CHECK_EQ_INT(cuMemFreeAsync(q, NULL), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemPoolTrimTo(def, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	CHECK_EQ_U64(cu_free(), f0);
	/* threshold UINT64_MAX keeps all; TrimTo keeps at least what was asked */
	thr = UINT64_MAX;
	CHECK_EQ_INT(cuMemPoolSetAttribute(def, GG_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAllocAsync(&p, 10 * MiB, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFreeAsync(p, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamSynchronize_ptsz(NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 10 * MiB);
	CHECK_EQ_INT(cuMemPoolTrimTo(def, 3 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 10 * MiB);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_USED_MEM_HIGH), 10 * MiB);
	gg_cuuint64_t zero = 0, one = 1;
	CHECK_EQ_INT(cuMemPoolSetAttribute(def, GG_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &one),
	             GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemPoolSetAttribute(def, GG_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemPoolSetAttribute(def, GG_CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 4 * MiB);
	CHECK_EQ_U64(pool_attr(def, GG_CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
	CHECK_EQ_INT(cuMemPoolTrimTo(def, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemPoolSetAttribute(def, GG_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero), GG_CUDA_SUCCESS);
	int reuse = -1;
	CHECK_EQ_INT(cuMemPoolGetAttribute(def, GG_CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(reuse, 1);
	CHECK_EQ_INT(cuMemAllocAsync(&p, 2 * DEVMEM, NULL), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(cuMemAllocAsync(&p, 0, NULL), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemPoolDestroy(def), GG_CUDA_ERROR_INVALID_VALUE);
	/* explicit pools, streams, set as current, destroy with a live block */
	gg_CUmemPoolProps pp;
	memset(&pp, 0, sizeof(pp));
	pp.allocType = GG_CU_MEM_ALLOCATION_TYPE_PINNED;
	pp.location.type = GG_CU_MEM_LOCATION_TYPE_DEVICE;
	pp.location.id = 9;
	CHECK_EQ_INT(cuMemPoolCreate(&mine, &pp), GG_CUDA_ERROR_INVALID_DEVICE);
	pp.location.id = 0;
	pp.allocType = 0;
	CHECK_EQ_INT(cuMemPoolCreate(&mine, &pp), GG_CUDA_ERROR_INVALID_VALUE);
	pp.allocType = GG_CU_MEM_ALLOCATION_TYPE_PINNED;
	CHECK_EQ_INT(cuMemPoolCreate(&mine, &pp), GG_CUDA_SUCCESS);
	gg_CUstream s;
	CHECK_EQ_INT(cuStreamCreate(&s, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAllocFromPoolAsync(&p, 5 * MiB, mine, s), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(pool_attr(mine, GG_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 6 * MiB);
	CHECK_EQ_INT(cuMemAllocFromPoolAsync_ptsz(&q, 5 * MiB, (gg_CUmemoryPool)&pp, s), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuDeviceSetMemPool(0, mine), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuDeviceSetMemPool(1, mine), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemAllocAsync(&q, 1 * MiB, s), GG_CUDA_SUCCESS); /* from mine's reserve */
	CHECK_EQ_U64(pool_attr(mine, GG_CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 6 * MiB);
	CHECK_EQ_INT(cuMemFreeAsync(q, s), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemPoolDestroy(mine), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemPoolDestroy(mine), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuDeviceGetMemPool(&cur, 0), GG_CUDA_SUCCESS);
	CHECK(cur == def);
	CHECK_EQ_U64(cu_free(), f0 - 6 * MiB); /* held until the live block goes */
	CHECK_EQ_INT(cuMemFreeAsync(p, s), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0);
	CHECK_EQ_INT(cuStreamSynchronize(s), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamDestroy_v2(s), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamDestroy_v2(s), GG_CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ_INT(cuStreamSynchronize(s), GG_CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ_INT(cuMemAllocAsync(&p, 100, s), GG_CUDA_ERROR_INVALID_HANDLE);
}

static gg_CUmemAllocationProp vmm_prop(int dev)
{
	gg_CUmemAllocationProp p;
	memset(&p, 0, sizeof(p));
	p.type = GG_CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = GG_CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	return p;
}

TEST(vmm)
{
	size_t f0 = cu_free(), g = 0;
	gg_CUmemAllocationProp prop = vmm_prop(0), bad = prop;
	CHECK_EQ_INT(cuMemGetAllocationGranularity(&g, &prop, GG_CU_MEM_ALLOC_GRANULARITY_MINIMUM), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(g, 2 * MiB);
	CHECK_EQ_INT(cuMemGetAllocationGranularity(&g, &prop, GG_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
	             GG_CUDA_SUCCESS);
	CHECK_EQ_U64(g, 2 * MiB);
	bad.type = 0;
	CHECK_EQ_INT(cuMemGetAllocationGranularity(&g, &bad, 0), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemGetAllocationGranularity(&g, NULL, 0), GG_CUDA_ERROR_INVALID_VALUE);
	bad = prop;
	bad.location.type = GG_CU_MEM_LOCATION_TYPE_HOST;
	CHECK_EQ_INT(cuMemGetAllocationGranularity(&g, &bad, 0), GG_CUDA_ERROR_INVALID_VALUE);
	bad = prop;
	bad.location.id = 5;
	gg_CUmemGenericAllocationHandle h, h2;
	CHECK_EQ_INT(cuMemCreate(&h, 2 * MiB, &bad, 0), GG_CUDA_ERROR_INVALID_DEVICE);
	CHECK_EQ_INT(cuMemCreate(&h, 3 * MiB, &prop, 0), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemCreate(&h, 2 * MiB, &prop, 1), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemCreate(&h, 2 * DEVMEM, &prop, 0), GG_CUDA_ERROR_OUT_OF_MEMORY);
	/* reserving address space costs nothing, even more than the card */
	gg_CUdeviceptr va, va2;
	CHECK_EQ_INT(cuMemAddressReserve(&va, 3 * MiB, 0, 0, 0), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemAddressReserve(&va, 8 * MiB, 3 * MiB, 0, 0), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemAddressReserve(&va, 9 * DEVMEM / 8 * 8, 0, 0, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAddressReserve(&va2, 64 * MiB, 64 * MiB, 0, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(va2 % (64 * MiB), 0);
	CHECK(va2 >= va + 9 * DEVMEM || va2 + 64 * MiB <= va);
	CHECK_EQ_U64(cu_free(), f0);
	CHECK_EQ_INT(cuMemCreate(&h, 4 * MiB, &prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 4 * MiB);
	gg_CUmemAllocationProp got;
	memset(&got, 0xff, sizeof(got));
	CHECK_EQ_INT(cuMemGetAllocationPropertiesFromHandle(&got, h), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(got.location.id, 0);
	CHECK_EQ_INT(got.type, GG_CU_MEM_ALLOCATION_TYPE_PINNED);
	/* map, access, release while mapped defers the free until unmap */
	CHECK_EQ_INT(cuMemMap(va + 2 * MiB, 4 * MiB, 0, h, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemMap(va + 4 * MiB, 2 * MiB, 0, h, 0), GG_CUDA_ERROR_INVALID_VALUE);  /* overlap */
	CHECK_EQ_INT(cuMemMap(va + 10 * MiB, 6 * MiB, 0, h, 0), GG_CUDA_ERROR_INVALID_VALUE); /* past handle */
	CHECK_EQ_INT(cuMemMap(0x1000000, 2 * MiB, 0, h, 0), GG_CUDA_ERROR_INVALID_VALUE);     /* no reservation */
	gg_CUmemAccessDesc ad = {{GG_CU_MEM_LOCATION_TYPE_DEVICE, 0}, GG_CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CHECK_EQ_INT(cuMemSetAccess(va + 2 * MiB, 4 * MiB, &ad, 1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemSetAccess(va, 4 * MiB, &ad, 1), GG_CUDA_ERROR_INVALID_VALUE); /* not mapped */
	CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_U64(cu_free(), f0 - 4 * MiB);
	CHECK_EQ_INT(cuMemUnmap(va + 2 * MiB, 2 * MiB), GG_CUDA_ERROR_INVALID_VALUE); /* splits a mapping */
	CHECK_EQ_INT(cuMemUnmap(va + 2 * MiB, 4 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0);
	/* create + release without a map */
	CHECK_EQ_INT(cuMemCreate(&h2, 20 * MiB, &prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - 20 * MiB);
	CHECK_EQ_INT(cuMemRelease(h2), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0);
	CHECK_EQ_INT(cuMemAddressFree(va, 8 * MiB), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemAddressFree(va, 9 * DEVMEM / 8 * 8), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAddressFree(va2, 64 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAddressFree(va2, 64 * MiB), GG_CUDA_ERROR_INVALID_VALUE);
	/* VMM needs no contiguous pages: a fragmented card still serves it */
	gg_CUdeviceptr p[8];
	for (int i = 0; i < 8; i++)
		CHECK_EQ_INT(cuMemAlloc_v2(&p[i], 2 * MiB), GG_CUDA_SUCCESS);
	for (int i = 0; i < 8; i += 2)
		CHECK_EQ_INT(cuMemFree_v2(p[i]), GG_CUDA_SUCCESS);
	unsigned long long live0, live1;
	simgpu_cuda_debug_used(0, NULL, NULL, &live0);
	CHECK_EQ_INT(cuMemCreate(&h, 2 * MiB, &prop, 0), GG_CUDA_SUCCESS);
	simgpu_cuda_debug_used(0, NULL, NULL, &live1);
	CHECK_EQ_U64(live1, live0 + 1);
	CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_SUCCESS);
	for (int i = 1; i < 8; i += 2)
		CHECK_EQ_INT(cuMemFree_v2(p[i]), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0);
}

TEST(multi_device)
{
	size_t f, t;
	gg_CUdeviceptr p;
	unsigned long long u0 = cu_used(0);
	CHECK_EQ_INT(cuCtxPushCurrent_v2(g_ctx1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 4096), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(1), 2 * MiB);
	CHECK_EQ_U64(cu_used(0), u0);
	CHECK_EQ_INT(cuMemGetInfo_v2(&f, &t), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(f, DEVMEM - 2 * MiB);
	gg_CUmemoryPool p0, p1;
	CHECK_EQ_INT(cuDeviceGetDefaultMemPool(&p0, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuDeviceGetDefaultMemPool(&p1, 1), GG_CUDA_SUCCESS);
	CHECK(p0 != p1);
	gg_CUmemAllocationProp prop = vmm_prop(1);
	gg_CUmemGenericAllocationHandle h;
	CHECK_EQ_INT(cuMemCreate(&h, 4 * MiB, &prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(1), 6 * MiB);
	CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxPopCurrent_v2(NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemGetInfo_v2(&f, &t), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(f, DEVMEM - u0);
	CHECK_EQ_INT(cuMemFree_v2(p), GG_CUDA_SUCCESS); /* freed from device 0's context */
	CHECK_EQ_U64(cu_used(1), 0);
	unsigned long long peak;
	simgpu_cuda_debug_used(1, NULL, &peak, NULL);
	CHECK_EQ_U64(peak, 6 * MiB);
	simgpu_cuda_debug_reset_peak();
	simgpu_cuda_debug_used(1, NULL, &peak, NULL);
	CHECK_EQ_U64(peak, 0);
}

/* threads: each binds a context, mixes sizes, frees everything */
#define NTHREADS 8
#define ITERS 20000

static void *stress_thread(void *arg)
{
	int id = (int)(intptr_t)arg, bad = 0;
	gg_CUdeviceptr keep[16] = {0};
	if (cuCtxSetCurrent(id % 2 ? g_ctx1 : g_ctx0))
		bad++;
	for (int i = 0; i < ITERS; i++) {
		size_t sz = (i % 7 == 0) ? 3 * MiB : (size_t)(512 * (1 + (i * 7919 + id) % 64));
		gg_CUdeviceptr p;
		if (cuMemAlloc_v2(&p, sz)) {
			bad++;
			continue;
		}
		int k = i % 16;
		if (keep[k] && cuMemFree_v2(keep[k]))
			bad++;
		keep[k] = p;
		if (i % 101 == 0) {
			gg_CUdeviceptr q;
			if (cuMemAllocAsync(&q, sz, NULL) || cuMemFreeAsync(q, NULL) || cuStreamSynchronize(NULL))
				bad++;
		}
	}
	for (int k = 0; k < 16; k++)
		if (keep[k] && cuMemFree_v2(keep[k]))
			bad++;
	return (void *)(intptr_t)bad;
}

TEST(threads)
{
	pthread_t th[NTHREADS];
	unsigned long long u0 = cu_used(0), u1 = cu_used(1), live;
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, stress_thread, (void *)(intptr_t)i);
	for (int i = 0; i < NTHREADS; i++) {
		void *r;
		pthread_join(th[i], &r);
		CHECK_EQ_INT((intptr_t)r, 0);
	}
	CHECK_EQ_U64(cu_used(0), u0);
	CHECK_EQ_U64(cu_used(1), u1);
	simgpu_cuda_debug_used(0, NULL, NULL, &live);
	CHECK_EQ_U64(live, 0);
}

TEST(many_live_small)
{
	enum { N = 204800 }; /* 100 pages of 1 KiB blocks */
	gg_CUdeviceptr *p = malloc(N * sizeof(*p));
	size_t f0 = cu_free();
	for (int i = 0; i < N; i++)
		CHECK_EQ_INT(cuMemAlloc_v2(&p[i], 1024), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - (uint64_t)N * 1024); /* exactly whole pages */
	for (int i = 0; i < N; i += 2)
		CHECK_EQ_INT(cuMemFree_v2(p[i]), GG_CUDA_SUCCESS);
	for (int i = 0; i < N; i += 2) /* refill the holes, no new pages */
		CHECK_EQ_INT(cuMemAlloc_v2(&p[i], 1024), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0 - (uint64_t)N * 1024);
	for (int i = 0; i < N; i++)
		CHECK_EQ_INT(cuMemFree_v2(p[i]), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_free(), f0);
	free(p);
}

/* ------------------------------------------------------------------ HIP */

TEST(hip_basics)
{
	void *p = (void *)1, *q;
	size_t f, t, pitch;
	int v, n;
	CHECK_EQ_INT(hipInit(0), GG_hipSuccess);
	CHECK_EQ_INT(hipGetDeviceCount(&n), GG_hipSuccess);
	CHECK_EQ_INT(n, 2);
	CHECK_EQ_INT(hipRuntimeGetVersion(&v), GG_hipSuccess);
	CHECK_EQ_INT(v, 60200000);
	CHECK_EQ_INT(hipGetDevice(&v), GG_hipSuccess);
	CHECK_EQ_INT(v, 0);
	size_t f0 = hip_free();
	CHECK_EQ_U64(f0, DEVMEM);
	CHECK_EQ_INT(hipMalloc(&p, 0), GG_hipSuccess);
	CHECK(p == NULL);
	CHECK_EQ_INT(hipFree(NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipMalloc(NULL, 10), GG_hipErrorInvalidValue);
	CHECK_EQ_INT(hipMalloc(&p, 4096), GG_hipSuccess);
	CHECK_EQ_U64(hip_free(), f0 - 2 * MiB);
	CHECK_EQ_INT(hipMalloc(&q, 2 * DEVMEM), GG_hipErrorOutOfMemory);
	CHECK_EQ_INT(hipFree((char *)p + 512), GG_hipErrorInvalidValue);
	void *base;
	size_t sz;
	CHECK_EQ_INT(hipMemGetAddressRange(&base, &sz, (char *)p + 10), GG_hipSuccess);
	CHECK(base == p && sz == 4096);
	CHECK_EQ_INT(hipFree(p), GG_hipSuccess);
	CHECK_EQ_INT(hipFree(p), GG_hipErrorInvalidValue);
	CHECK_EQ_INT(hipMallocPitch(&p, &pitch, 1000, 3000), GG_hipSuccess);
	CHECK_EQ_U64(pitch, 1024);
	CHECK_EQ_U64(hip_free(), f0 - 4 * MiB);
	CHECK_EQ_INT(hipFree(p), GG_hipSuccess);
	CHECK_EQ_INT(hipMallocManaged(&p, 4096, 0), GG_hipErrorInvalidValue);
	CHECK_EQ_INT(hipMallocManaged(&p, 4096, GG_hipMemAttachGlobal), GG_hipSuccess);
	CHECK_EQ_INT(hipExtMallocWithFlags(&q, 3 * MiB, GG_hipDeviceMallocFinegrained), GG_hipSuccess);
	CHECK_EQ_U64(hip_free(), f0 - 6 * MiB);
	CHECK_EQ_INT(hipFree(p), GG_hipSuccess);
	CHECK_EQ_INT(hipFree(q), GG_hipSuccess);
	CHECK_EQ_INT(hipHostMalloc(&p, 4096, 0), GG_hipSuccess);
	memset(p, 1, 4096);
	CHECK_EQ_U64(hip_free(), f0);
	CHECK_EQ_INT(hipHostFree(p), GG_hipSuccess);
	CHECK_EQ_INT(hipMemGetInfo(NULL, &t), GG_hipErrorInvalidValue);
	CHECK_EQ_INT(hipDeviceTotalMem(&t, 1), GG_hipSuccess);
	CHECK_EQ_U64(t, DEVMEM);
	CHECK_EQ_INT(hipDeviceTotalMem(&t, 2), GG_hipErrorInvalidDevice);
	CHECK_EQ_INT(hipSetDevice(2), GG_hipErrorInvalidDevice);
	CHECK(!strcmp(hipGetErrorString(GG_hipErrorOutOfMemory), "out of memory"));
	(void)f;
	/* the CUDA and HIP libraries are separate instances */
	CHECK_EQ_U64(cu_free(), DEVMEM);
}

static void *hip_thread(void *arg)
{
	void **p = arg;
	if (hipSetDevice(1) || hipMalloc(p, 3 * MiB))
		*p = NULL;
	return NULL;
}

TEST(hip_multi_device)
{
	void *p = NULL;
	pthread_t th;
	pthread_create(&th, NULL, hip_thread, &p);
	pthread_join(th, NULL);
	CHECK(p != NULL);
	unsigned long long u0 = 1, u1 = 0;
	simgpu_hip_debug_used(0, &u0, NULL, NULL);
	simgpu_hip_debug_used(1, &u1, NULL, NULL);
	CHECK_EQ_U64(u0, 0);
	CHECK_EQ_U64(u1, 4 * MiB);
	int d = -1;
	CHECK_EQ_INT(hipGetDevice(&d), GG_hipSuccess);
	CHECK_EQ_INT(d, 0); /* the current device is per thread */
	CHECK_EQ_INT(hipFree(p), GG_hipSuccess);
	simgpu_hip_debug_used(1, &u1, NULL, NULL);
	CHECK_EQ_U64(u1, 0);
}

TEST(hip_pools_and_vmm)
{
	size_t f0 = hip_free();
	gg_hipMemPool_t def, mine;
	void *p;
	uint64_t v;
	CHECK_EQ_INT(hipDeviceGetDefaultMemPool(&def, 0), GG_hipSuccess);
	CHECK_EQ_INT(hipMallocAsync(&p, 5 * MiB, NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipFreeAsync(p, NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipMemPoolGetAttribute(def, GG_hipMemPoolAttrReservedMemCurrent, &v), GG_hipSuccess);
	CHECK_EQ_U64(v, 6 * MiB);
	CHECK_EQ_U64(hip_free(), f0 - 6 * MiB);
	CHECK_EQ_INT(hipMallocAsync(&p, 6 * MiB, NULL), GG_hipSuccess); /* warm */
	CHECK_EQ_U64(hip_free(), f0 - 6 * MiB);
	CHECK_EQ_INT(hipFreeAsync(p, NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipStreamSynchronize(NULL), GG_hipSuccess);
	CHECK_EQ_U64(hip_free(), f0);
	v = UINT64_MAX;
	CHECK_EQ_INT(hipMemPoolSetAttribute(def, GG_hipMemPoolAttrReleaseThreshold, &v), GG_hipSuccess);
	CHECK_EQ_INT(hipMallocAsync(&p, 5 * MiB, NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipFreeAsync(p, NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipDeviceSynchronize(), GG_hipSuccess);
	CHECK_EQ_U64(hip_free(), f0 - 6 * MiB);
	CHECK_EQ_INT(hipMemPoolTrimTo(def, 0), GG_hipSuccess);
	CHECK_EQ_U64(hip_free(), f0);
	v = 0;
	CHECK_EQ_INT(hipMemPoolSetAttribute(def, GG_hipMemPoolAttrReleaseThreshold, &v), GG_hipSuccess);
	CHECK_EQ_INT(hipMallocAsync(&p, 2 * DEVMEM, NULL), GG_hipErrorOutOfMemory);
	gg_hipMemPoolProps pp;
	memset(&pp, 0, sizeof(pp));
	pp.allocType = GG_hipMemAllocationTypePinned;
	pp.location.type = GG_hipMemLocationTypeDevice;
	pp.location.id = 1;
	CHECK_EQ_INT(hipMemPoolCreate(&mine, &pp), GG_hipSuccess);
	gg_hipStream_t s;
	CHECK_EQ_INT(hipStreamCreate(&s), GG_hipSuccess);
	CHECK_EQ_INT(hipMallocFromPoolAsync(&p, 100, mine, s), GG_hipSuccess);
	unsigned long long u1;
	simgpu_hip_debug_used(1, &u1, NULL, NULL);
	CHECK_EQ_U64(u1, 2 * MiB);
	CHECK_EQ_INT(hipFreeAsync(p, s), GG_hipSuccess);
	CHECK_EQ_INT(hipMemPoolDestroy(mine), GG_hipSuccess);
	simgpu_hip_debug_used(1, &u1, NULL, NULL);
	CHECK_EQ_U64(u1, 0);
	CHECK_EQ_INT(hipStreamDestroy(s), GG_hipSuccess);
	/* VMM */
	/* libamdhip64.so.6 takes the ROCm 6 layout of hipMemAllocationProp */
	gg_hipMemAllocationProp_v6 prop6;
	memset(&prop6, 0, sizeof(prop6));
	prop6.type = GG_hipMemAllocationTypePinned;
	prop6.location.type = GG_hipMemLocationTypeDevice;
	prop6.location.id = 0;
#define prop (*(gg_hipMemAllocationProp *)(void *)&prop6)
	size_t g;
	CHECK_EQ_INT(hipMemGetAllocationGranularity(&g, &prop, 0), GG_hipSuccess);
	CHECK_EQ_U64(g, 2 * MiB);
	gg_hipMemGenericAllocationHandle_t h;
	CHECK_EQ_INT(hipMemCreate(&h, 3 * MiB, &prop, 0), GG_hipErrorInvalidValue);
	CHECK_EQ_INT(hipMemCreate(&h, 2 * DEVMEM, &prop, 0), GG_hipErrorOutOfMemory);
	void *va;
	CHECK_EQ_INT(hipMemAddressReserve(&va, 4 * DEVMEM, 0, NULL, 0), GG_hipSuccess);
	CHECK_EQ_U64(hip_free(), f0);
	CHECK_EQ_INT(hipMemCreate(&h, 8 * MiB, &prop, 0), GG_hipSuccess);
	CHECK_EQ_U64(hip_free(), f0 - 8 * MiB);
	CHECK_EQ_INT(hipMemMap(va, 8 * MiB, 0, h, 0), GG_hipSuccess);
	CHECK_EQ_INT(hipMemRelease(h), GG_hipSuccess);
	CHECK_EQ_U64(hip_free(), f0 - 8 * MiB);
	CHECK_EQ_INT(hipMemUnmap(va, 8 * MiB), GG_hipSuccess);
	CHECK_EQ_U64(hip_free(), f0);
	CHECK_EQ_INT(hipMemAddressFree(va, 4 * DEVMEM), GG_hipSuccess);
#undef prop
}

/* ------------------------------------------------------------------- NVML */

#define NVML_RESERVED (64 * MiB) /* SIMGPU_NVML_RESERVED set by main */

static gg_nvmlDevice_t nvml_dev(unsigned i)
{
	gg_nvmlDevice_t h = NULL;
	nvmlDeviceGetHandleByIndex_v2(i, &h);
	return h;
}

/* "GPU-" and the 8-4-4-4-12 lower-case form of 16 bytes */
static void uuid_format(const char b[16], char out[41])
{
	const uint8_t *u = (const uint8_t *)b;
	snprintf(out, 41, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
	         u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* A version-4 UUID as NVML prints it. */
static int uuid_well_formed(const char *s)
{
	if (strlen(s) != 40 || strncmp(s, "GPU-", 4))
		return 0;
	for (int i = 4; i < 40; i++) {
		int dash = i == 12 || i == 17 || i == 22 || i == 27;
		if (dash != (s[i] == '-') || (!dash && !strchr("0123456789abcdef", s[i])))
			return 0;
	}
	return s[18] == '4' && strchr("89ab", s[23]);
}

TEST(nvml_init_refcount)
{
	unsigned n;
	gg_nvmlDevice_t h;
	char buf[96];
	CHECK_EQ_INT(nvmlDeviceGetCount_v2(&n), GG_NVML_ERROR_UNINITIALIZED);
	CHECK_EQ_INT(nvmlDeviceGetHandleByIndex_v2(0, &h), GG_NVML_ERROR_UNINITIALIZED);
	CHECK_EQ_INT(nvmlSystemGetDriverVersion(buf, sizeof(buf)), GG_NVML_ERROR_UNINITIALIZED);
	CHECK_EQ_INT(nvmlShutdown(), GG_NVML_ERROR_UNINITIALIZED);
	CHECK(!strcmp(nvmlErrorString(GG_NVML_ERROR_UNINITIALIZED), "Uninitialized")); /* no init needed */
	CHECK(!strcmp(nvmlErrorString(12345), "Unknown Error"));
	CHECK_EQ_INT(nvmlInit_v2(), GG_NVML_SUCCESS);
	CHECK_EQ_INT(nvmlInitWithFlags(GG_NVML_INIT_FLAG_NO_GPUS), GG_NVML_SUCCESS);
	CHECK_EQ_INT(nvmlShutdown(), GG_NVML_SUCCESS);
	CHECK_EQ_INT(nvmlDeviceGetCount_v2(&n), GG_NVML_SUCCESS); /* one init still open */
	CHECK_EQ_INT(nvmlShutdown(), GG_NVML_SUCCESS);
	CHECK_EQ_INT(nvmlDeviceGetCount_v2(&n), GG_NVML_ERROR_UNINITIALIZED);
	CHECK_EQ_INT(nvmlShutdown(), GG_NVML_ERROR_UNINITIALIZED);
	CHECK_EQ_INT(nvmlInit(), GG_NVML_SUCCESS); /* stays open for the tests below */
	CHECK_EQ_INT(nvmlSystemGetDriverVersion(buf, sizeof(buf)), GG_NVML_SUCCESS);
	CHECK(!strcmp(buf, "580.65.06"));
	CHECK_EQ_INT(nvmlSystemGetDriverVersion(buf, 9), GG_NVML_ERROR_INSUFFICIENT_SIZE);
	CHECK_EQ_INT(nvmlSystemGetNVMLVersion(buf, sizeof(buf)), GG_NVML_SUCCESS);
	CHECK(!strncmp(buf, "13.", 3));
}

TEST(nvml_devices)
{
	unsigned n = 0, idx = 9;
	gg_nvmlDevice_t h0, h1, h;
	char name[GG_NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	CHECK_EQ_INT(nvmlDeviceGetCount_v2(&n), GG_NVML_SUCCESS);
	CHECK_EQ_INT(n, 2);
	CHECK_EQ_INT(nvmlDeviceGetCount(&n), GG_NVML_SUCCESS);
	CHECK_EQ_INT(n, 2);
	CHECK_EQ_INT(nvmlDeviceGetCount_v2(NULL), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK_EQ_INT(nvmlDeviceGetHandleByIndex_v2(0, &h0), GG_NVML_SUCCESS);
	CHECK_EQ_INT(nvmlDeviceGetHandleByIndex_v2(1, &h1), GG_NVML_SUCCESS);
	CHECK(h0 && h1 && h0 != h1);
	CHECK_EQ_INT(nvmlDeviceGetHandleByIndex(1, &h), GG_NVML_SUCCESS);
	CHECK(h == h1);
	CHECK_EQ_INT(nvmlDeviceGetHandleByIndex_v2(2, &h), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK_EQ_INT(nvmlDeviceGetHandleByIndex_v2(0, NULL), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK_EQ_INT(nvmlDeviceGetIndex(h1, &idx), GG_NVML_SUCCESS);
	CHECK_EQ_INT(idx, 1);
	CHECK_EQ_INT(nvmlDeviceGetIndex((gg_nvmlDevice_t)&n, &idx), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK_EQ_INT(nvmlDeviceGetIndex(NULL, &idx), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK_EQ_INT(nvmlDeviceGetIndex(h0, NULL), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK_EQ_INT(nvmlDeviceGetName(h0, name, sizeof(name)), GG_NVML_SUCCESS);
	CHECK(!strcmp(name, "gpuguard simulated GPU"));
	CHECK_EQ_INT(nvmlDeviceGetName(h0, name, 5), GG_NVML_ERROR_INSUFFICIENT_SIZE);
}

TEST(nvml_uuid_matches_cuda)
{
	char s[GG_NVML_DEVICE_UUID_V2_BUFFER_SIZE], c[41], other[41];
	gg_CUuuid u, legacy;
	gg_hipUUID hu;
	gg_nvmlDevice_t h;
	for (int d = 0; d < 2; d++) {
		CHECK_EQ_INT(nvmlDeviceGetUUID(nvml_dev(d), s, sizeof(s)), GG_NVML_SUCCESS);
		CHECK(uuid_well_formed(s));
		CHECK_EQ_INT(cuDeviceGetUuid_v2(&u, d), GG_CUDA_SUCCESS);
		uuid_format(u.bytes, c);
		CHECK(!strcmp(s, c));
		CHECK_EQ_INT(cuDeviceGetUuid(&legacy, d), GG_CUDA_SUCCESS);
		CHECK(!memcmp(u.bytes, legacy.bytes, 16));
		CHECK_EQ_INT(hipDeviceGetUuid(&hu, d), GG_hipSuccess);
		uuid_format(hu.bytes, other);
		CHECK(uuid_well_formed(other) && strcmp(other, c)); /* another driver, another GPU */
		CHECK_EQ_INT(nvmlDeviceGetHandleByUUID(s, &h), GG_NVML_SUCCESS);
		CHECK(h == nvml_dev(d));
	}
	CHECK_EQ_INT(nvmlDeviceGetUUID(nvml_dev(1), other, sizeof(other)), GG_NVML_SUCCESS);
	CHECK(strcmp(other, s) == 0 && strcmp(c, s) == 0);
	CHECK_EQ_INT(nvmlDeviceGetUUID(nvml_dev(0), other, sizeof(other)), GG_NVML_SUCCESS);
	CHECK(strcmp(other, s) != 0); /* devices differ */
	CHECK_EQ_INT(nvmlDeviceGetUUID(nvml_dev(0), s, 40), GG_NVML_ERROR_INSUFFICIENT_SIZE);
	CHECK_EQ_INT(nvmlDeviceGetUUID(nvml_dev(0), NULL, 96), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK_EQ_INT(nvmlDeviceGetHandleByUUID("GPU-00000000-0000-4000-8000-000000000000", &h),
	             GG_NVML_ERROR_NOT_FOUND);
	CHECK_EQ_INT(nvmlDeviceGetHandleByUUID(NULL, &h), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK_EQ_INT(cuDeviceGetUuid_v2(NULL, 0), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuDeviceGetUuid_v2(&u, 2), GG_CUDA_ERROR_INVALID_DEVICE);
	CHECK_EQ_INT(hipDeviceGetUuid(NULL, 0), GG_hipErrorInvalidValue);
	CHECK_EQ_INT(hipDeviceGetUuid(&hu, 2), GG_hipErrorInvalidDevice);
	void *fn = NULL;
	CHECK_EQ_INT(cuGetProcAddress_v2("cuDeviceGetUuid", &fn, 11040, 0, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuDeviceGetUuid_v2);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuDeviceGetUuid", &fn, 11030, 0, NULL), GG_CUDA_SUCCESS);
	CHECK(fn == (void *)cuDeviceGetUuid);
}

/* NVML's v1 and v2 figures for device d, checked against each other. */
static unsigned long long nvml_used(int d)
{
	gg_nvmlMemory_t m1;
	gg_nvmlMemory_v2_t m2 = {.version = GG_nvmlMemory_v2};
	if (nvmlDeviceGetMemoryInfo(nvml_dev(d), &m1) || nvmlDeviceGetMemoryInfo_v2(nvml_dev(d), &m2))
		return ~0ull;
	CHECK_EQ_U64(m1.total, DEVMEM);
	CHECK_EQ_U64(m2.total, DEVMEM);
	CHECK_EQ_U64(m2.reserved, NVML_RESERVED);
	CHECK_EQ_U64(m1.free, m2.free);
	CHECK_EQ_U64(m1.used, NVML_RESERVED + m2.used); /* v1 counts the reserve as used */
	CHECK_EQ_U64(m2.reserved + m2.free + m2.used, DEVMEM);
	return m2.used;
}

TEST(nvml_memory_follows_cuda)
{
	CHECK_EQ_U64(nvml_used(0), cu_used(0));
	CHECK_EQ_U64(nvml_used(1), 0);
	gg_CUdeviceptr p;
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 10 * MiB), GG_CUDA_SUCCESS);
	CHECK(cu_used(0) >= 10 * MiB);
	CHECK_EQ_U64(nvml_used(0), cu_used(0));
	CHECK_EQ_U64(nvml_used(1), 0);
	CHECK_EQ_INT(cuMemFree_v2(p), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(nvml_used(0), cu_used(0));
}

TEST(nvml_memory_errors)
{
	gg_nvmlMemory_t m1;
	gg_nvmlMemory_v2_t m2, before;
	memset(&m2, 0xab, sizeof(m2));
	m2.version = (unsigned)(sizeof(gg_nvmlMemory_t) | (2u << 24));
	before = m2;
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo_v2(nvml_dev(0), &m2), GG_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	CHECK(!memcmp(&m2, &before, sizeof(m2))); /* untouched */
	m2.version = 0;
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo_v2(nvml_dev(0), &m2), GG_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	CHECK_EQ_INT(GG_nvmlMemory_v2, 0x02000028);
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo_v2(nvml_dev(0), NULL), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo(nvml_dev(0), NULL), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo((gg_nvmlDevice_t)&m1, &m1), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK_EQ_INT(nvmlDeviceGetMemoryInfo(NULL, &m1), GG_NVML_ERROR_INVALID_ARGUMENT);
}

TEST(nvml_processes)
{
	gg_CUdeviceptr p;
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 4 * MiB), GG_CUDA_SUCCESS);
	unsigned n = 0;
	gg_nvmlProcessInfo_t info[3];
	CHECK_EQ_INT(nvmlDeviceGetComputeRunningProcesses_v3(nvml_dev(0), &n, NULL), GG_NVML_ERROR_INSUFFICIENT_SIZE);
	CHECK_EQ_INT(n, 1);
	n = 3;
	CHECK_EQ_INT(nvmlDeviceGetComputeRunningProcesses_v3(nvml_dev(0), &n, info), GG_NVML_SUCCESS);
	CHECK_EQ_INT(n, 1);
	CHECK_EQ_INT(info[0].pid, getpid());
	CHECK_EQ_U64(info[0].usedGpuMemory, cu_used(0));
	CHECK_EQ_INT(info[0].gpuInstanceId, 0xFFFFFFFFu);
	n = 3;
	CHECK_EQ_INT(nvmlDeviceGetComputeRunningProcesses_v2(nvml_dev(0), &n, info), GG_NVML_SUCCESS);
	CHECK_EQ_INT(n, 1);
	gg_nvmlProcessInfo_v1_t v1[2];
	memset(v1, 0xab, sizeof(v1));
	n = 2;
	CHECK_EQ_INT(nvmlDeviceGetComputeRunningProcesses(nvml_dev(0), &n, v1), GG_NVML_SUCCESS);
	CHECK_EQ_INT(n, 1);
	CHECK_EQ_INT(v1[0].pid, getpid());
	CHECK_EQ_U64(v1[0].usedGpuMemory, cu_used(0));
	CHECK_EQ_INT(v1[1].pid, 0xabababab); /* the v1 stride: the next entry untouched */
	n = 0;
	CHECK_EQ_INT(nvmlDeviceGetComputeRunningProcesses_v3(nvml_dev(1), &n, NULL), GG_NVML_SUCCESS);
	CHECK_EQ_INT(n, 0); /* nothing held on device 1 */
	CHECK_EQ_INT(nvmlDeviceGetComputeRunningProcesses_v3(nvml_dev(0), NULL, info), GG_NVML_ERROR_INVALID_ARGUMENT);
	CHECK_EQ_INT(cuMemFree_v2(p), GG_CUDA_SUCCESS);
}

/* Runs this program again as `sim_test mode`, each env name set to its value
 * (unset where NULL); its output into buf. 0 or -1. */
struct env_set {
	const char *name, *value;
};
static int probe(const char *mode, const struct env_set *env, int nenv, char *buf, size_t n)
{
	int fd[2];
	if (pipe(fd))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		for (int i = 0; i < nenv; i++) {
			if (env[i].value)
				setenv(env[i].name, env[i].value, 1);
			else
				unsetenv(env[i].name);
		}
		execl("/proc/self/exe", "sim_test", mode, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	ssize_t k = read(fd[0], buf, n - 1);
	close(fd[0]);
	int status;
	waitpid(pid, &status, 0);
	buf[k > 0 ? k : 0] = 0;
	return k > 0 ? 0 : -1;
}

/* SIMGPU_MEMORY quantities, read by a fresh child process */
static long long probe_total(const char *mem, const char *devs, int *ndev)
{
	const struct env_set env[] = {{"SIMGPU_MEMORY", mem}, {"SIMGPU_DEVICES", devs}};
	char buf[128];
	long long t = -1;
	if (probe("--probe", env, 2, buf, sizeof(buf)) || sscanf(buf, "%d %lld", ndev, &t) != 2)
		return -1;
	return t;
}

static int probe_main(void)
{
	int n = 0;
	size_t t = 0;
	if (cuInit(0) == GG_CUDA_ERROR_NO_DEVICE) {
		printf("0 0\n");
		return 0;
	}
	cuDeviceGetCount(&n);
	cuDeviceTotalMem_v2(&t, 0);
	printf("%d %zu\n", n, t);
	return 0;
}

/* NVML's and CUDA's UUID of device 0, in a fresh process. */
static int probe_uuid_main(void)
{
	char s[GG_NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "", c[41] = "";
	gg_nvmlDevice_t h;
	gg_CUuuid u;
	if (nvmlInit_v2() || nvmlDeviceGetHandleByIndex_v2(0, &h) || nvmlDeviceGetUUID(h, s, sizeof(s)) || cuInit(0) ||
	    cuDeviceGetUuid_v2(&u, 0))
		return 1;
	uuid_format(u.bytes, c);
	printf("%s %s\n", s, c);
	return 0;
}

/* SIMGPU_UUID_SEED moves every UUID, the same way in both libraries. */
TEST(nvml_uuid_seed)
{
	char mine[GG_NVML_DEVICE_UUID_V2_BUFFER_SIZE], a[128], b[128], base[128];
	CHECK_EQ_INT(nvmlDeviceGetUUID(nvml_dev(0), mine, sizeof(mine)), GG_NVML_SUCCESS);
	const struct env_set seeded[] = {{"SIMGPU_UUID_SEED", "node-7"}}, plain[] = {{"SIMGPU_UUID_SEED", NULL}};
	CHECK_EQ_INT(probe("--probe-uuid", seeded, 1, a, sizeof(a)), 0);
	CHECK_EQ_INT(probe("--probe-uuid", seeded, 1, b, sizeof(b)), 0);
	CHECK_EQ_INT(probe("--probe-uuid", plain, 1, base, sizeof(base)), 0);
	CHECK(!strcmp(a, b)); /* deterministic */
	CHECK(strncmp(a, base, 40) != 0);
	CHECK(!strncmp(base, mine, 40)); /* unseeded: the same in every process */
	CHECK(strlen(a) == 82 && !strncmp(a, a + 41, 40) && uuid_well_formed(strtok(a, " ")));
}

TEST(env_quantities)
{
	int n = -1;
	CHECK_EQ_INT(probe_total(NULL, NULL, &n), 80 * GiB);
	CHECK_EQ_INT(n, 1);
	CHECK_EQ_INT(probe_total("16Gi", "3", &n), 16 * GiB);
	CHECK_EQ_INT(n, 3);
	CHECK_EQ_INT(probe_total("40G", "99", &n), 40000000000ll / (2 * MiB) * (2 * MiB));
	CHECK_EQ_INT(n, 16);
	CHECK_EQ_INT(probe_total("1073741824", NULL, &n), GiB);
	CHECK_EQ_INT(probe_total("512Mi", NULL, &n), 512 * MiB);
	CHECK_EQ_INT(probe_total("1.5Gi", NULL, &n), 1536 * MiB);
	CHECK_EQ_INT(probe_total("2Ti", NULL, &n), 1024 * GiB); /* clamped to the address stride */
	CHECK_EQ_INT(probe_total("bogus", NULL, &n), 80 * GiB);
	CHECK_EQ_INT(probe_total(NULL, "0", &n), 0);
	CHECK_EQ_INT(n, 0);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--probe"))
		return probe_main();
	if (argc > 1 && !strcmp(argv[1], "--probe-uuid"))
		return probe_uuid_main();
	setenv("SIMGPU_DEVICES", "2", 1);
	setenv("SIMGPU_MEMORY", "1Gi", 1);
	setenv("SIMGPU_NVML_RESERVED", "64Mi", 1);
	RUN(before_init);
	RUN(error_codes);
	RUN(page_rounding_and_packing);
	RUN(fragmentation);
	RUN(pitch_managed_host_arrays);
	RUN(get_proc_address);
	RUN(pools);
	RUN(vmm);
	RUN(multi_device);
	RUN(threads);
	RUN(many_live_small);
	RUN(hip_basics);
	RUN(hip_multi_device);
	RUN(hip_pools_and_vmm);
	RUN(nvml_init_refcount);
	RUN(nvml_devices);
	RUN(nvml_uuid_matches_cuda);
	RUN(nvml_memory_follows_cuda);
	RUN(nvml_memory_errors);
	RUN(nvml_processes);
	RUN(nvml_uuid_seed);
	RUN(env_quantities);
	return harness_done();
}
