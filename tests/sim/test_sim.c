/* Self-test of the simulated GPU (no gpuguard involved): links -lcuda
 * -lamdhip64 -lnvidia-ml against build/sim and checks the page model, the
 * driver's error codes, cuGetProcAddress rules, pools, VMM, several devices
 * and threads, and NVML's view of the same devices. */
#define _GNU_SOURCE
#include "gpuguard/cuda_abi.h"
#include "gpuguard/hip_abi.h"
#include "gpuguard/nvml_abi.h"
#include "../harness.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <errno.h>
#include <sys/syscall.h>

int simgpu_cuda_debug_used(int dev, unsigned long long *pages_bytes, unsigned long long *peak_pages_bytes,
                           unsigned long long *live_allocs);
void simgpu_cuda_debug_reset_peak(void);
int simgpu_hip_debug_used(int dev, unsigned long long *pages_bytes, unsigned long long *peak_pages_bytes,
                          unsigned long long *live_allocs);

/* the driver's, not in cuda_abi.h; ROCm's hipStreamGetDevice likewise */
gg_CUresult cuPointerGetAttribute(void *data, gg_CUpointer_attribute attribute, gg_CUdeviceptr ptr);
gg_hipError_t hipStreamGetDevice(gg_hipStream_t stream, int *device);
#define PA_MEMPOOL_HANDLE 17 /* CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE */

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
	/* the pool a block came from; NULL for memory of no pool */
	gg_CUmemoryPool owner = NULL;
	CHECK_EQ_INT(cuPointerGetAttribute(&owner, PA_MEMPOOL_HANDLE, p + 100), GG_CUDA_SUCCESS);
	CHECK(owner == mine);
	gg_CUdeviceptr plain;
	CHECK_EQ_INT(cuMemAlloc_v2(&plain, MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuPointerGetAttribute(&owner, PA_MEMPOOL_HANDLE, plain), GG_CUDA_SUCCESS);
	CHECK(owner == NULL);
	CHECK_EQ_INT(cuMemFree_v2(plain), GG_CUDA_SUCCESS);
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
	CHECK_EQ_INT(cuPointerGetAttribute(&owner, PA_MEMPOOL_HANDLE, p), GG_CUDA_SUCCESS);
	CHECK(owner == mine); /* the destroyed pool's handle, while its block lives */
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
	/* a stream's device, whichever is current; the null stream's is */
	gg_hipStream_t s1 = NULL;
	CHECK_EQ_INT(hipSetDevice(1), GG_hipSuccess);
	CHECK_EQ_INT(hipStreamCreate(&s1), GG_hipSuccess);
	CHECK_EQ_INT(hipSetDevice(0), GG_hipSuccess);
	CHECK_EQ_INT(hipStreamGetDevice(s1, &d), GG_hipSuccess);
	CHECK_EQ_INT(d, 1);
	CHECK_EQ_INT(hipStreamGetDevice(NULL, &d), GG_hipSuccess);
	CHECK_EQ_INT(d, 0);
	CHECK_EQ_INT(hipStreamGetDevice(s1, NULL), GG_hipErrorInvalidValue);
	CHECK_EQ_INT(hipStreamDestroy(s1), GG_hipSuccess);
	CHECK_EQ_INT(hipStreamGetDevice(s1, &d), GG_hipErrorInvalidHandle);
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

/* ------------------------------------------- hosting the real CUDA runtime */

/* sim-only entry points and test introspection (tests/sim/README.md) */
gg_CUresult cuDeviceGetAttribute(int *pi, gg_CUdevice_attribute attrib, gg_CUdevice dev);
gg_CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, gg_CUdevice dev);
gg_CUresult cuDeviceGetByPCIBusId(gg_CUdevice *dev, const char *pciBusId);
gg_CUresult cuStreamCreateWithPriority(gg_CUstream *phStream, unsigned int flags, int priority);
gg_CUresult cuStreamGetPriority(gg_CUstream hStream, int *priority);
gg_CUresult cuLaunchHostFunc(gg_CUstream hStream, gg_CUhostFn fn, void *userData);
gg_nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, gg_nvmlDevice_t *device);
void simgpu_md2(const void *data, size_t n, unsigned char out[16]);
void simgpu_hmac_md2(const unsigned char *key, size_t keylen, const void *data, size_t n, unsigned char out[16]);
int simgpu_cuda_pci(int dev, int *domain, int *bus, int *device);
int simgpu_cuda_vmm_refs(unsigned long long handle, unsigned long long *refs, unsigned long long *maps);

static const gg_CUuuid ET_CUDART = {{0x6b, (char)0xd5, (char)0xfb, 0x6c, 0x5b, (char)0xf4, (char)0xe7, 0x4a, (char)0x89,
                                     (char)0x87, (char)0xd9, 0x39, 0x12, (char)0xfd, (char)0x9d, (char)0xf9}};
static const gg_CUuuid ET_TOOLS = {{(char)0xa0, (char)0x94, 0x79, (char)0x8c, 0x2e, 0x74, 0x2e, 0x74, (char)0x93,
                                    (char)0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66}};
static const gg_CUuuid ET_TOOLS_TLS = {{0x42, (char)0xd8, 0x5a, (char)0x81, 0x23, (char)0xf6, (char)0xcb, 0x47,
                                        (char)0x82, (char)0x98, (char)0xf6, (char)0xe7, (char)0x8a, 0x3a, (char)0xec,
                                        (char)0xdc}};
static const gg_CUuuid ET_CLS = {{(char)0xc6, (char)0x93, 0x33, 0x6e, 0x11, 0x21, (char)0xdf, 0x11, (char)0xa8,
                                  (char)0xc3, 0x68, (char)0xf3, 0x55, (char)0xd8, (char)0x95, (char)0x93}};
static const gg_CUuuid ET_CTXCHECK = {{0x26, 0x3e, (char)0x88, 0x60, 0x7c, (char)0xd2, 0x61, 0x43, (char)0x92,
                                       (char)0xf6, (char)0xbb, (char)0xd5, 0x00, 0x6d, (char)0xfa, 0x7e}};
static const gg_CUuuid ET_INTEGRITY = {{(char)0xd4, 0x08, 0x20, 0x55, (char)0xbd, (char)0xe6, 0x70, 0x4b, (char)0x8d,
                                        0x34, (char)0xba, 0x12, 0x3c, 0x66, (char)0xe1, (char)0xf2}};
static const gg_CUuuid ET_REQUIREMENTS = {{(char)0xf8, (char)0xcf, (char)0xf9, 0x51, 0x21, 0x46, (char)0x8b, 0x4e,
                                           (char)0xb9, (char)0xe2, (char)0xfb, 0x46, (char)0x9e, 0x7c, 0x0d,
                                           (char)0xd9}};

typedef void (*cls_dtor_fn)(gg_CUcontext, void *, void *);
typedef gg_CUresult (*cls_put_fn)(gg_CUcontext, void *, void *, cls_dtor_fn);
typedef gg_CUresult (*cls_get_fn)(void **, gg_CUcontext, void *);
typedef gg_CUresult (*integrity_fn)(uint32_t, uint64_t, uint64_t *);

static void *const *export_table(const gg_CUuuid *id)
{
	const void *t = NULL;
	if (cuGetExportTable(&t, id) != GG_CUDA_SUCCESS)
		return NULL;
	return (void *const *)t;
}

static int g_dtor_calls;
static gg_CUcontext g_dtor_ctx;
static void *g_dtor_key, *g_dtor_value;
static void cls_dtor(gg_CUcontext c, void *k, void *v)
{
	g_dtor_calls++;
	g_dtor_ctx = c;
	g_dtor_key = k;
	g_dtor_value = v;
}

static cls_put_fn cls_put(void)
{
	void *const *t = export_table(&ET_CLS);
	return t ? (cls_put_fn)t[0] : NULL;
}

static cls_get_fn cls_get(void)
{
	void *const *t = export_table(&ET_CLS);
	return t ? (cls_get_fn)t[2] : NULL;
}

TEST(md2_vectors)
{
	/* RFC 1319 A.5 */
	static const struct {
		const char *in, *hex;
	} v[] = {
	    {"", "8350e5a3e24c153df2275c9f80692773"},
	    {"a", "32ec01ec4a6dac72c0ab96fb34c0b5d1"},
	    {"abc", "da853b0d3f88d99b30283a69e6ded6bb"},
	    {"message digest", "ab4f496bfb2a530b219ff33031fe06b0"},
	    {"abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b"},
	    {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
	     "d5976f79d83d3a0dc9806c3c66f3efd8"},
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		unsigned char out[16];
		char hex[33];
		simgpu_md2(v[i].in, strlen(v[i].in), out);
		for (int k = 0; k < 16; k++)
			snprintf(hex + 2 * k, 3, "%02x", out[k]);
		CHECK(!strcmp(hex, v[i].hex));
	}
	/* HMAC with a 16-byte key is MD2(K^opad || MD2(K^ipad || m)) */
	unsigned char key[16], ipad[16 + 3], opad[16 + 16], inner[16], want[16], got[16];
	for (int i = 0; i < 16; i++)
		key[i] = (unsigned char)(i * 7 + 1);
	for (int i = 0; i < 16; i++) {
		ipad[i] = key[i] ^ 0x36;
		opad[i] = key[i] ^ 0x5c;
	}
	memcpy(ipad + 16, "abc", 3);
	simgpu_md2(ipad, sizeof(ipad), inner);
	memcpy(opad + 16, inner, 16);
	simgpu_md2(opad, sizeof(opad), want);
	simgpu_hmac_md2(key, 16, "abc", 3, got);
	CHECK(!memcmp(want, got, 16));
}

TEST(export_tables)
{
	const void *t = (const void *)1;
	gg_CUuuid unknown = ET_CUDART;
	unknown.bytes[15] ^= 1;
	CHECK_EQ_INT(cuGetExportTable(&t, &unknown), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK(t == NULL);
	CHECK_EQ_INT(cuGetExportTable(&t, &ET_REQUIREMENTS), GG_CUDA_ERROR_NOT_FOUND);
	CHECK_EQ_INT(cuGetExportTable(NULL, &ET_CUDART), GG_CUDA_ERROR_INVALID_VALUE);
	void *const *rt = export_table(&ET_CUDART), *const *tools = export_table(&ET_TOOLS);
	void *const *tls = export_table(&ET_TOOLS_TLS), *const *chk = export_table(&ET_CTXCHECK);
	CHECK(rt && tools && tls && chk && export_table(&ET_CLS) && export_table(&ET_INTEGRITY));
	if (!rt || !tools || !chk)
		return;
	CHECK_EQ_U64((uintptr_t)rt[0], 13 * sizeof(void *));
	CHECK((uintptr_t)tools[0] >= 56);
	/* tools callback arrays: CUPTI's 523 runtime ids and 14 more */
	void *buf = NULL;
	size_t n = 0;
	((void (*)(void **, size_t *))tools[2])(&buf, &n);
	CHECK(buf && n >= 523);
	((void (*)(void **, size_t *))tools[6])(&buf, &n);
	CHECK(buf && n >= 14);
	/* context check: bit 0 of r1 clear */
	uint32_t r1 = ~0u;
	void *r2 = (void *)1;
	CHECK_EQ_INT(((gg_CUresult(*)(gg_CUcontext, uint32_t *, void **))chk[2])(g_ctx0, &r1, &r2), 0);
	CHECK_EQ_U64(r1, 0);
	/* cudart slot 2 retains the primary context */
	unsigned flags;
	int a0, a1;
	CHECK_EQ_INT(cuDevicePrimaryCtxGetState(0, &flags, &a0), GG_CUDA_SUCCESS);
	gg_CUcontext c = NULL;
	CHECK_EQ_INT(((gg_CUresult(*)(gg_CUcontext *, gg_CUdevice))rt[2])(&c, 0), GG_CUDA_SUCCESS);
	CHECK(c == g_ctx0);
	CHECK_EQ_INT(cuDevicePrimaryCtxGetState(0, &flags, &a1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(a1, 1);
	CHECK_EQ_INT(cuDevicePrimaryCtxRelease_v2(0), GG_CUDA_SUCCESS);
}

/* the integrity message of REAL-CUDA.md 3, built here independently */
struct imsg {
	uint32_t driver, version, pid, thread;
	const void *rt, *it, *slot;
	uint64_t secs;
	struct {
		unsigned char uuid[16];
		int32_t dom, bus, dev;
	} d[2];
};

TEST(integrity_check)
{
	void *const *it = export_table(&ET_INTEGRITY), *const *rt = export_table(&ET_CUDART);
	CHECK(it && rt);
	if (!it || !rt)
		return;
	integrity_fn f = (integrity_fn)it[1];
	uint64_t out[2];
	CHECK_EQ_INT(f(13000, 1700000000, out), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(out[0], 0x3341181c03cb675cull);
	CHECK_EQ_U64(out[1], 0x8ed383aa1f4cd1e8ull);
	CHECK_EQ_INT(f(13010, 5, out), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(out[0], 0x3341181c03cb675cull);
	CHECK_EQ_INT(f(13001, 1700000000, out), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(out[0], 0x1841181c03cb675cull);
	CHECK_EQ_U64(out[1], 0x8ed383aa1f4cd1e8ull);
	static const unsigned char key[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
	                                      0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};
	struct imsg m;
	memset(&m, 0, sizeof(m));
	int drv = 0;
	cuDriverGetVersion(&drv);
	m.driver = (uint32_t)drv;
	m.version = 13002;
	m.pid = (uint32_t)getpid();
	m.thread = (uint32_t)(uintptr_t)pthread_self();
	m.rt = rt;
	m.it = it;
	m.slot = it[1];
	m.secs = 1700000123;
	for (int d = 0; d < 2; d++) {
		cuDeviceGetUuid_v2((gg_CUuuid *)m.d[d].uuid, d);
		int dom, bus, dv;
		simgpu_cuda_pci(d, &dom, &bus, &dv);
		m.d[d].dom = dom;
		m.d[d].bus = bus;
		m.d[d].dev = dv;
	}
	CHECK_EQ_U64(sizeof(m), 48 + 2 * 28);
	uint64_t want[2];
	simgpu_hmac_md2(key, 16, &m, sizeof(m), (unsigned char *)want);
	CHECK_EQ_INT(f(13002, 1700000123, out), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(out[0], want[0]);
	CHECK_EQ_U64(out[1], want[1]);
	/* the time is part of the message */
	CHECK_EQ_INT(f(13002, 1700000124, out), GG_CUDA_SUCCESS);
	CHECK(out[0] != want[0] || out[1] != want[1]);
}

TEST(attributes)
{
	int v, bad = 0;
	for (int a = 1; a <= 147; a++)
		if (cuDeviceGetAttribute(&v, a, 0) != GG_CUDA_SUCCESS)
			bad++;
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(cuDeviceGetAttribute(&v, 0, 0), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuDeviceGetAttribute(&v, 148, 0), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuDeviceGetAttribute(&v, 16, 9), GG_CUDA_ERROR_INVALID_DEVICE);
	CHECK_EQ_INT(cuDeviceGetAttribute(NULL, 16, 0), GG_CUDA_ERROR_INVALID_VALUE);
	cuDeviceGetAttribute(&v, 75, 0);
	CHECK_EQ_INT(v, 9);
	cuDeviceGetAttribute(&v, 76, 0);
	CHECK_EQ_INT(v, 0);
	cuDeviceGetAttribute(&v, 16, 0);
	CHECK_EQ_INT(v, 132);
	/* PCI location: the attributes, the bus id string and NVML agree */
	for (int d = 0; d < 2; d++) {
		int dom, bus, dv, a50, a33, a34;
		simgpu_cuda_pci(d, &dom, &bus, &dv);
		cuDeviceGetAttribute(&a50, 50, d);
		cuDeviceGetAttribute(&a33, 33, d);
		cuDeviceGetAttribute(&a34, 34, d);
		CHECK_EQ_INT(a50, dom);
		CHECK_EQ_INT(a33, bus);
		CHECK_EQ_INT(a34, dv);
		char id[32];
		CHECK_EQ_INT(cuDeviceGetPCIBusId(id, sizeof(id), d), GG_CUDA_SUCCESS);
		gg_CUdevice back = -1;
		CHECK_EQ_INT(cuDeviceGetByPCIBusId(&back, id), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(back, d);
		CHECK_EQ_INT(nvmlInit_v2(), GG_NVML_SUCCESS);
		gg_nvmlDevice_t nd, nd2;
		unsigned idx = 99;
		CHECK_EQ_INT(nvmlDeviceGetHandleByPciBusId_v2(id, &nd), GG_NVML_SUCCESS);
		CHECK_EQ_INT(nvmlDeviceGetHandleByIndex_v2((unsigned)d, &nd2), GG_NVML_SUCCESS);
		CHECK_EQ_INT(nvmlDeviceGetIndex(nd, &idx), GG_NVML_SUCCESS);
		CHECK_EQ_INT(idx, d);
		CHECK(nd == nd2);
		nvmlShutdown();
	}
	/* the 13000 cuCtxGetDevice names a context */
	gg_pfn_cuCtxGetDevice_v2 gd = NULL;
	CHECK_EQ_INT(cuGetProcAddress_v2("cuCtxGetDevice", (void **)&gd, 13000, 0, NULL), GG_CUDA_SUCCESS);
	gg_CUdevice dev = -1;
	CHECK(gd && gd(&dev, g_ctx1) == GG_CUDA_SUCCESS && dev == 1);
	CHECK(gd && gd(&dev, NULL) == GG_CUDA_SUCCESS && dev == 0);
}

/* cuDevicePrimaryCtxReset frees every allocation of the context (linear,
 * pools and their blocks, VMM handles and their mappings) and runs its CLS
 * destructors once; the handle stays usable. */
TEST(primary_reset)
{
	CHECK_EQ_INT(cuCtxSetCurrent(g_ctx1), GG_CUDA_SUCCESS);
	unsigned long long u0 = cu_used(1);
	gg_CUdeviceptr p, b;
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 4 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAllocAsync(&b, 3 * MiB, NULL), GG_CUDA_SUCCESS);
	gg_CUmemoryPool pool;
	gg_CUmemPoolProps pp;
	memset(&pp, 0, sizeof(pp));
	pp.allocType = GG_CU_MEM_ALLOCATION_TYPE_PINNED;
	pp.location.type = GG_CU_MEM_LOCATION_TYPE_DEVICE;
	pp.location.id = 1;
	CHECK_EQ_INT(cuMemPoolCreate(&pool, &pp), GG_CUDA_SUCCESS);
	gg_CUdeviceptr pb;
	CHECK_EQ_INT(cuMemAllocFromPoolAsync(&pb, 2 * MiB, pool, NULL), GG_CUDA_SUCCESS);
	gg_CUmemAllocationProp prop = vmm_prop(1);
	gg_CUmemGenericAllocationHandle h;
	gg_CUdeviceptr va;
	CHECK_EQ_INT(cuMemCreate(&h, 2 * MiB, &prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAddressReserve(&va, 2 * MiB, 0, 0, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemMap(va, 2 * MiB, 0, h, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(1), u0 + 12 * MiB);
	cls_put_fn put = cls_put();
	cls_get_fn get = cls_get();
	CHECK(put && get);
	int key, val;
	g_dtor_calls = 0;
	CHECK_EQ_INT(put(NULL, &key, &val, cls_dtor), GG_CUDA_SUCCESS); /* NULL: the current context */
	void *got = NULL;
	CHECK_EQ_INT(get(&got, g_ctx1, &key), GG_CUDA_SUCCESS);
	CHECK(got == &val);
	CHECK_EQ_INT(cuDevicePrimaryCtxReset_v2(1), GG_CUDA_SUCCESS);
	/* all but the pools' blocks (the default pool's 4 MiB chunk, the
	 * created pool's 2 MiB), which outlive the reset as on a real card */
	CHECK_EQ_U64(cu_used(1), 6 * MiB);
	CHECK_EQ_INT(g_dtor_calls, 1);
	CHECK(g_dtor_ctx == g_ctx1 && g_dtor_key == &key && g_dtor_value == &val);
	CHECK(get(&got, g_ctx1, &key) != GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(p), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemUnmap(va, 2 * MiB), GG_CUDA_ERROR_INVALID_VALUE); /* the mapping went too */
	CHECK_EQ_INT(cuMemAddressFree(va, 2 * MiB), GG_CUDA_SUCCESS);       /* reservations stay */
	unsigned flags;
	int active = 1;
	CHECK_EQ_INT(cuDevicePrimaryCtxGetState(1, &flags, &active), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(active, 0);
	/* the same handle works again; a second reset runs no destructor */
	gg_CUcontext c;
	CHECK_EQ_INT(cuDevicePrimaryCtxRetain(&c, 1), GG_CUDA_SUCCESS);
	CHECK(c == g_ctx1);
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 2 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(p), GG_CUDA_SUCCESS);
	/* the surviving block frees as any other, and the pool lets go of it */
	CHECK_EQ_INT(cuCtxSetCurrent(g_ctx1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFreeAsync(b, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFreeAsync(pb, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxSynchronize(), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemPoolDestroy(pool), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(1), 0);
	CHECK_EQ_INT(cuDevicePrimaryCtxReset(1), GG_CUDA_SUCCESS); /* the legacy ABI too */
	CHECK_EQ_INT(g_dtor_calls, 1);
	CHECK_EQ_INT(cuDevicePrimaryCtxRetain(&c, 1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxSetCurrent(g_ctx0), GG_CUDA_SUCCESS);
}

/* The last release of the primary context resets it, as the driver does;
 * a release that is not the last frees nothing. */
TEST(last_primary_release_resets)
{
	gg_CUcontext c;
	CHECK_EQ_INT(cuDevicePrimaryCtxRetain(&c, 1), GG_CUDA_SUCCESS); /* the test's own retain, and this */
	CHECK_EQ_INT(cuCtxSetCurrent(g_ctx1), GG_CUDA_SUCCESS);
	unsigned long long u0 = cu_used(1);
	gg_CUdeviceptr p;
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 4 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuDevicePrimaryCtxRelease_v2(1), GG_CUDA_SUCCESS);
	unsigned flags;
	int active = 0;
	CHECK_EQ_INT(cuDevicePrimaryCtxGetState(1, &flags, &active), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(active, 1);
	CHECK_EQ_U64(cu_used(1), u0 + 4 * MiB);
	CHECK_EQ_INT(cuDevicePrimaryCtxRelease_v2(1), GG_CUDA_SUCCESS); /* the last */
	CHECK_EQ_INT(cuDevicePrimaryCtxGetState(1, &flags, &active), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(active, 0);
	CHECK_EQ_U64(cu_used(1), 0);
	CHECK_EQ_INT(cuMemFree_v2(p), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuDevicePrimaryCtxRelease_v2(1), GG_CUDA_ERROR_INVALID_CONTEXT);
	CHECK_EQ_INT(cuDevicePrimaryCtxRetain(&c, 1), GG_CUDA_SUCCESS); /* as the other tests found it */
	CHECK(c == g_ctx1);
	CHECK_EQ_INT(cuCtxSetCurrent(g_ctx0), GG_CUDA_SUCCESS);
}

TEST(created_context)
{
	unsigned long long u0 = cu_used(0);
	gg_CUcontext c = NULL, cur = NULL;
	CHECK_EQ_INT(cuCtxCreate_v4(&c, NULL, 0, 0), GG_CUDA_SUCCESS);
	CHECK(c && c != g_ctx0);
	CHECK_EQ_INT(cuCtxGetCurrent(&cur), GG_CUDA_SUCCESS);
	CHECK(cur == c);
	gg_CUdeviceptr p, q;
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 4 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxPushCurrent_v2(g_ctx0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAlloc_v2(&q, 2 * MiB), GG_CUDA_SUCCESS); /* the primary context's */
	CHECK_EQ_INT(cuCtxPopCurrent_v2(&cur), GG_CUDA_SUCCESS);
	int key;
	g_dtor_calls = 0;
	CHECK_EQ_INT(cls_put()(c, &key, NULL, cls_dtor), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0 + 6 * MiB);
	CHECK_EQ_INT(cuCtxDestroy_v2(g_ctx0), GG_CUDA_ERROR_INVALID_CONTEXT); /* not the primary */
	CHECK_EQ_INT(cuCtxDestroy_v2(c), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0 + 2 * MiB); /* only its own memory went */
	CHECK_EQ_INT(g_dtor_calls, 1);
	CHECK(g_dtor_ctx == c);
	CHECK_EQ_INT(cuCtxGetCurrent(&cur), GG_CUDA_SUCCESS);
	CHECK(cur == g_ctx0); /* popped */
	CHECK_EQ_INT(cuCtxDestroy_v2(c), GG_CUDA_ERROR_INVALID_CONTEXT);
	CHECK_EQ_INT(cuCtxPushCurrent_v2(c), GG_CUDA_ERROR_INVALID_CONTEXT);
	CHECK_EQ_INT(cuMemFree_v2(q), GG_CUDA_SUCCESS);
	gg_CUexecAffinityParam ap = {0};
	CHECK_EQ_INT(cuCtxCreate_v3(&c, &ap, 1, 0, 0), GG_CUDA_ERROR_NOT_SUPPORTED);
	CHECK_EQ_INT(cuCtxCreate_v2(&c, 3, 0), GG_CUDA_ERROR_INVALID_VALUE); /* no scheduling mode 3 */
}

static uint64_t vmm_refs(gg_CUmemGenericAllocationHandle h)
{
	unsigned long long r = ~0ull;
	if (simgpu_cuda_vmm_refs(h, &r, NULL))
		return ~0ull;
	return r;
}

TEST(vmm_refcounts)
{
	gg_CUmemAllocationProp prop = vmm_prop(0);
	gg_CUmemGenericAllocationHandle h, h2;
	gg_CUdeviceptr va;
	unsigned long long u0 = cu_used(0);
	CHECK_EQ_INT(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0), GG_CUDA_SUCCESS);
	/* map, release at once (the VMM samples' idiom), unmap: freed at the unmap */
	CHECK_EQ_INT(cuMemCreate(&h, 2 * MiB, &prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(vmm_refs(h), 1);
	CHECK_EQ_INT(cuMemMap(va, 2 * MiB, 0, h, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0 + 2 * MiB);
	CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_ERROR_INVALID_VALUE); /* no reference left */
	CHECK_EQ_INT(cuMemUnmap(va, 2 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0);
	/* retain + release keeps it; the last release frees it */
	CHECK_EQ_INT(cuMemCreate(&h, 4 * MiB, &prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemMap(va, 4 * MiB, 0, h, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(va + 3 * MiB)), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(h2, h);
	CHECK_EQ_U64(vmm_refs(h), 2);
	CHECK_EQ_INT(cuMemRelease(h2), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(vmm_refs(h), 1);
	CHECK_EQ_INT(cuMemUnmap(va, 4 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0 + 4 * MiB); /* one reference holds it */
	CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0);
	/* NCCL's free path: retain, release, unmap, release; pages go at the last */
	CHECK_EQ_INT(cuMemCreate(&h, 2 * MiB, &prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemMap(va + 2 * MiB, 2 * MiB, 0, h, 0), GG_CUDA_SUCCESS);
	gg_CUdeviceptr base = 0;
	size_t size = 0;
	CHECK_EQ_INT(cuMemGetAddressRange_v2(&base, &size, va + 2 * MiB + 100), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(base, va + 2 * MiB);
	CHECK_EQ_U64(size, 2 * MiB);
	CHECK_EQ_INT(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)base), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemRelease(h2), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemUnmap(base, size), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0 + 2 * MiB);
	CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0);
	/* a released handle still mapped can be retained back */
	CHECK_EQ_INT(cuMemCreate(&h, 2 * MiB, &prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemMap(va, 2 * MiB, 0, h, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)va), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemUnmap(va, 2 * MiB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0 + 2 * MiB);
	CHECK_EQ_INT(cuMemRelease(h2), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0);
	CHECK_EQ_INT(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)va), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemGetAddressRange_v2(&base, &size, va), GG_CUDA_ERROR_NOT_FOUND);
	CHECK_EQ_INT(cuMemAddressFree(va, 8 * MiB), GG_CUDA_SUCCESS);
}

static gg_cuuint64_t graph_attr(int attr)
{
	gg_cuuint64_t v = ~0ull;
	if (cuDeviceGetGraphMemAttribute(0, attr, &v))
		return ~0ull;
	return v;
}

static int g_host_calls;
static void host_fn(void *p)
{
	g_host_calls += p == &g_host_calls;
}

/* capture allocates nothing physical; launch reserves from the graph pool,
 * which keeps it until a trim; OUT_OF_MEMORY at launch if pages are short */
TEST(graph_memory)
{
	gg_CUstream s;
	CHECK_EQ_INT(cuStreamCreateWithPriority(&s, 1, -9), GG_CUDA_SUCCESS);
	int prio = 1;
	CHECK_EQ_INT(cuStreamGetPriority(s, &prio), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(prio, -5); /* clamped to the greatest */
	unsigned long long u0 = cu_used(0);
	gg_CUdeviceptr a = 0;
	gg_CUstreamCaptureStatus st = -1;
	CHECK_EQ_INT(cuStreamBeginCapture_v2(NULL, 0), GG_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK_EQ_INT(cuStreamBeginCapture_v2(s, GG_CU_STREAM_CAPTURE_MODE_GLOBAL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamIsCapturing(s, &st), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(st, GG_CU_STREAM_CAPTURE_STATUS_ACTIVE);
	CHECK_EQ_INT(cuMemAllocAsync(&a, 8 * MiB, s), GG_CUDA_SUCCESS);
	CHECK(a != 0);
	g_host_calls = 0;
	CHECK_EQ_INT(cuLaunchHostFunc(s, host_fn, &g_host_calls), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(g_host_calls, 0); /* captured, not run */
	CHECK_EQ_U64(cu_used(0), u0);
	gg_CUgraph g = NULL;
	CHECK_EQ_INT(cuStreamEndCapture(s, &g), GG_CUDA_SUCCESS);
	CHECK(g != NULL);
	CHECK_EQ_INT(cuLaunchHostFunc(s, host_fn, &g_host_calls), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(g_host_calls, 1); /* outside capture: at once */
	gg_CUgraphExec e;
	CHECK_EQ_INT(cuGraphInstantiateWithFlags(&e, g, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0);
	CHECK_EQ_INT(cuGraphLaunch(e, s), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0 + 8 * MiB);
	CHECK_EQ_U64(graph_attr(GG_CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 8 * MiB);
	CHECK_EQ_U64(graph_attr(GG_CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 8 * MiB);
	CHECK_EQ_INT(cuGraphLaunch(e, s), GG_CUDA_ERROR_INVALID_VALUE); /* its allocation is still live */
	gg_CUdeviceptr base;
	size_t size;
	CHECK_EQ_INT(cuMemGetAddressRange_v2(&base, &size, a + 5), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(base, a);
	CHECK_EQ_INT(cuMemFreeAsync(a, s), GG_CUDA_SUCCESS); /* outside the graph */
	CHECK_EQ_U64(graph_attr(GG_CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
	CHECK_EQ_U64(graph_attr(GG_CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 8 * MiB);
	CHECK_EQ_U64(cu_used(0), u0 + 8 * MiB); /* kept reserved */
	CHECK_EQ_INT(cuDeviceGraphMemTrim(0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0);
	CHECK_EQ_U64(graph_attr(GG_CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0);
	CHECK_EQ_INT(cuGraphUpload(e, s), GG_CUDA_SUCCESS); /* upload reserves too */
	CHECK_EQ_U64(cu_used(0), u0 + 8 * MiB);
	CHECK_EQ_INT(cuGraphLaunch(e, s), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuDeviceGraphMemTrim(0), GG_CUDA_SUCCESS); /* live: nothing to give back */
	CHECK_EQ_U64(cu_used(0), u0 + 8 * MiB);
	CHECK_EQ_INT(cuGraphExecDestroy(e), GG_CUDA_SUCCESS); /* the allocation outlives it */
	CHECK_EQ_INT(cuMemFree_v2(a), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuDeviceGraphMemTrim(0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(cu_used(0), u0);
	gg_cuuint64_t zero = 0;
	CHECK_EQ_INT(cuDeviceSetGraphMemAttribute(0, GG_CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(graph_attr(GG_CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 0);
	CHECK_EQ_INT(cuDeviceSetGraphMemAttribute(0, GG_CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &zero),
	             GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuGraphDestroy(g), GG_CUDA_SUCCESS);
	/* an explicit alloc node larger than the card: instantiates, cannot launch */
	CHECK_EQ_INT(cuGraphCreate(&g, 0), GG_CUDA_SUCCESS);
	gg_CUDA_MEM_ALLOC_NODE_PARAMS np;
	memset(&np, 0, sizeof(np));
	np.poolProps.allocType = GG_CU_MEM_ALLOCATION_TYPE_PINNED;
	np.poolProps.location.type = GG_CU_MEM_LOCATION_TYPE_DEVICE;
	np.poolProps.location.id = 0;
	np.bytesize = 2 * DEVMEM;
	gg_CUgraphNode n, fn;
	CHECK_EQ_INT(cuGraphAddMemAllocNode(&n, g, NULL, 0, &np), GG_CUDA_SUCCESS);
	CHECK(np.dptr != 0);
	CHECK_EQ_INT(cuGraphAddMemFreeNode(&fn, g, &n, 1, np.dptr), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphAddMemFreeNode(&fn, g, &n, 1, np.dptr + 512), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuGraphInstantiateWithFlags(&e, g, 0), GG_CUDA_SUCCESS);
	gg_CUgraphExec e2;
	CHECK_EQ_INT(cuGraphInstantiateWithFlags(&e2, g, 0), GG_CUDA_ERROR_NOT_SUPPORTED); /* one at a time */
	CHECK_EQ_INT(cuGraphLaunch(e, s), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_U64(cu_used(0), u0);
	CHECK_EQ_INT(cuGraphExecDestroy(e), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphDestroy(g), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamDestroy_v2(s), GG_CUDA_SUCCESS);
}

gg_CUresult cuMemcpyHtoD_v2(gg_CUdeviceptr dst, const void *src, size_t ByteCount);
gg_CUresult cuMemsetD8Async(gg_CUdeviceptr dstDevice, unsigned char uc, size_t N, gg_CUstream hStream);
gg_CUresult cuMemcpy2DUnaligned_v2(const void *pCopy);

/* copies move nothing but check their ranges as the driver does */
TEST(copies_validate)
{
	gg_CUdeviceptr d;
	char host[8192];
	CHECK_EQ_INT(cuMemAlloc_v2(&d, 4096), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemcpyHtoD_v2(d, host, 4096), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemcpyHtoD_v2(d + 100, host, 4096), GG_CUDA_ERROR_INVALID_VALUE); /* past the end */
	CHECK_EQ_INT(cuMemcpyHtoD_v2(d, NULL, 16), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemsetD8Async(d + 4000, 0, 96, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemsetD8Async(d + 4000, 0, 97, NULL), GG_CUDA_ERROR_INVALID_VALUE);
	/* CUDA_MEMCPY2D: host 1 -> device 2, 4 rows of 64 bytes, pitch 1024 */
	size_t c[16];
	memset(c, 0, sizeof(c));
	c[2] = 1;                       /* srcMemoryType (an int, padded) */
	c[3] = (size_t)(uintptr_t)host; /* srcHost */
	c[6] = 64;                      /* srcPitch */
	c[9] = 2;                       /* dstMemoryType */
	c[11] = d;                      /* dstDevice */
	c[13] = 1024;                   /* dstPitch */
	c[14] = 64;                     /* WidthInBytes */
	c[15] = 4;                      /* Height */
	CHECK_EQ_INT(cuMemcpy2DUnaligned_v2(c), GG_CUDA_SUCCESS);
	c[15] = 5; /* row 4 starts at 4096: outside */
	CHECK_EQ_INT(cuMemcpy2DUnaligned_v2(c), GG_CUDA_ERROR_INVALID_VALUE);
	c[15] = 4;
	c[9] = 3; /* to an array: not simulated */
	CHECK_EQ_INT(cuMemcpy2DUnaligned_v2(c), GG_CUDA_ERROR_NOT_SUPPORTED);
	CHECK_EQ_INT(cuMemFree_v2(d), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemcpyHtoD_v2(d, host, 16), GG_CUDA_ERROR_INVALID_VALUE); /* freed */
}

gg_CUresult cuLibraryLoadData(gg_CUlibrary *library, const void *code, gg_CUjit_option *jitOptions,
                              void **jitOptionsValues, unsigned int numJitOptions, gg_CUlibraryOption *libraryOptions,
                              void **libraryOptionValues, unsigned int numLibraryOptions);
gg_CUresult cuLibraryGetGlobal(gg_CUdeviceptr *dptr, size_t *bytes, gg_CUlibrary library, const char *name);
gg_CUresult cuLibraryUnload(gg_CUlibrary library);

/* a library's globals die with its context's reset; unloading it later must
 * not free whoever got their address since */
TEST(library_after_reset)
{
	CHECK_EQ_INT(cuCtxSetCurrent(g_ctx1), GG_CUDA_SUCCESS);
	gg_CUlibrary lib;
	static const char image[16] = "not a fatbin";
	CHECK_EQ_INT(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0), GG_CUDA_SUCCESS);
	gg_CUdeviceptr g = 0, g2 = 0, x = 0;
	size_t bytes = 0;
	CHECK_EQ_INT(cuLibraryGetGlobal(&g, &bytes, lib, "sym"), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuLibraryGetGlobal(&g2, NULL, lib, "sym"), GG_CUDA_SUCCESS);
	CHECK(g && g == g2 && bytes == 512);
	CHECK_EQ_INT(cuDevicePrimaryCtxReset_v2(1), GG_CUDA_SUCCESS);
	gg_CUcontext c;
	CHECK_EQ_INT(cuDevicePrimaryCtxRetain(&c, 1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAlloc_v2(&x, 512), GG_CUDA_SUCCESS);
	unsigned long long live0 = 0, live1 = 0;
	simgpu_cuda_debug_used(1, NULL, NULL, &live0);
	CHECK_EQ_INT(cuLibraryGetGlobal(&g2, NULL, lib, "sym"), GG_CUDA_ERROR_CONTEXT_IS_DESTROYED);
	CHECK_EQ_INT(cuLibraryUnload(lib), GG_CUDA_SUCCESS);
	simgpu_cuda_debug_used(1, NULL, NULL, &live1);
	CHECK_EQ_U64(live1, live0);                     /* the unload freed nothing */
	CHECK_EQ_INT(cuMemFree_v2(x), GG_CUDA_SUCCESS); /* still ours */
	CHECK_EQ_INT(cuCtxSetCurrent(g_ctx0), GG_CUDA_SUCCESS);
}

/* a graph instantiated again while the old exec's allocation is live: the
 * address is taken, so the new exec cannot launch until it is freed */
TEST(graph_reinstantiate)
{
	gg_CUstream s;
	CHECK_EQ_INT(cuStreamCreate(&s, 0), GG_CUDA_SUCCESS);
	gg_CUgraph g;
	CHECK_EQ_INT(cuGraphCreate(&g, 0), GG_CUDA_SUCCESS);
	gg_CUDA_MEM_ALLOC_NODE_PARAMS np;
	memset(&np, 0, sizeof(np));
	np.poolProps.allocType = GG_CU_MEM_ALLOCATION_TYPE_PINNED;
	np.poolProps.location.type = GG_CU_MEM_LOCATION_TYPE_DEVICE;
	np.bytesize = 4 * MiB;
	gg_CUgraphNode n;
	CHECK_EQ_INT(cuGraphAddMemAllocNode(&n, g, NULL, 0, &np), GG_CUDA_SUCCESS);
	gg_CUgraphExec e1, e2;
	CHECK_EQ_INT(cuGraphInstantiateWithFlags(&e1, g, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphLaunch(e1, s), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphExecDestroy(e1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphInstantiateWithFlags(&e2, g, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphLaunch(e2, s), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_U64(graph_attr(GG_CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 4 * MiB);
	CHECK_EQ_INT(cuMemFreeAsync(np.dptr, s), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(graph_attr(GG_CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
	CHECK_EQ_INT(cuGraphLaunch(e2, s), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(graph_attr(GG_CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 4 * MiB);
	CHECK_EQ_INT(cuMemFree_v2(np.dptr), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(np.dptr), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuGraphExecDestroy(e2), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphDestroy(g), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuDeviceGraphMemTrim(0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(graph_attr(GG_CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0);
	CHECK_EQ_INT(cuStreamDestroy_v2(s), GG_CUDA_SUCCESS);
}

/* entry points cuBLASLt dlsyms from libcuda.so.1 at cublasLtCtxInit and
 * requires, beyond the ones cudart finds through cuGetProcAddress; one
 * missing is its "Driver API initialization failed", status 14 */
gg_CUresult cuCtxEnablePeerAccess(gg_CUcontext peerContext, unsigned int Flags);
gg_CUresult cuCtxDisablePeerAccess(gg_CUcontext peerContext);
gg_CUresult cuStreamWaitValue32(gg_CUstream stream, gg_CUdeviceptr addr, uint32_t value, unsigned int flags);
gg_CUresult cuStreamBatchMemOp(gg_CUstream stream, unsigned int count, void *paramArray, unsigned int flags);
gg_CUresult cuMemPrefetchAsync(gg_CUdeviceptr devPtr, size_t count, gg_CUdevice dstDevice, gg_CUstream hStream);
gg_CUresult cuMemPrefetchAsync_v2(gg_CUdeviceptr devPtr, size_t count, gg_CUmemLocation location, unsigned int flags,
                                  gg_CUstream hStream);
gg_CUresult cuMemcpyHtoDAsync_v2(gg_CUdeviceptr dst, const void *src, size_t ByteCount, gg_CUstream hStream);
gg_CUresult cuGraphGetNodes(gg_CUgraph hGraph, gg_CUgraphNode *nodes, size_t *numNodes);
gg_CUresult cuGraphNodeGetType(gg_CUgraphNode hNode, int *type);
gg_CUresult cuGraphKernelNodeGetParams(gg_CUgraphNode hNode, void *nodeParams);
gg_CUresult cuGraphExecKernelNodeSetParams(gg_CUgraphExec hGraphExec, gg_CUgraphNode hNode, const void *nodeParams);

TEST(cublaslt_driver_names)
{
	static const struct {
		const char *name;
		int version; /* what cudart 13 asks (data/cudart13-lookups.txt) */
	} names[] = {
	    {"cuStreamWaitValue32", 8000},
	    {"cuStreamBatchMemOp", 8000},
	    {"cuGraphKernelNodeGetParams", 12000},
	    {"cuGraphExecKernelNodeSetParams", 12000},
	    {"cuGraphGetNodes", 10000},
	    {"cuGraphNodeGetType", 10000},
	    {"cuMemPrefetchAsync", 8000},
	    {"cuMemPrefetchAsync", 12020},
	    {"cuCtxDisablePeerAccess", 4000},
	    {"cuCtxEnablePeerAccess", 4000},
	};
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	CHECK(lib != NULL);
	for (size_t i = 0; lib && i < sizeof(names) / sizeof(names[0]); i++) {
		void *fn = NULL;
		if (!dlsym(lib, names[i].name))
			fprintf(stderr, "  not exported: %s\n", names[i].name);
		CHECK(dlsym(lib, names[i].name) != NULL);
		CHECK_EQ_INT(cuGetProcAddress_v2(names[i].name, &fn, names[i].version, 0, NULL), GG_CUDA_SUCCESS);
		CHECK(fn != NULL);
	}
	/* the 12020 prefetch is the location ABI, not the legacy one */
	void *v1 = NULL, *v2 = NULL;
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemPrefetchAsync", &v1, 12010, 0, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGetProcAddress_v2("cuMemPrefetchAsync", &v2, 13000, 0, NULL), GG_CUDA_SUCCESS);
	CHECK(v1 && v2 && v1 != v2);
	if (lib)
		dlclose(lib);
}

TEST(peer_access)
{
	CHECK_EQ_INT(cuCtxSetCurrent(g_ctx0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxEnablePeerAccess(NULL, 0), GG_CUDA_ERROR_INVALID_CONTEXT);
	CHECK_EQ_INT(cuCtxEnablePeerAccess(g_ctx1, 1), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuCtxEnablePeerAccess(g_ctx0, 0), GG_CUDA_ERROR_INVALID_DEVICE); /* its own device */
	CHECK_EQ_INT(cuCtxDisablePeerAccess(g_ctx1), 705);                            /* PEER_ACCESS_NOT_ENABLED */
	CHECK_EQ_INT(cuCtxEnablePeerAccess(g_ctx1, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxEnablePeerAccess(g_ctx1, 0), 704); /* PEER_ACCESS_ALREADY_ENABLED */
	const char *name = NULL;
	CHECK_EQ_INT(cuGetErrorName(704, &name), GG_CUDA_SUCCESS);
	CHECK(name && strcmp(name, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED") == 0);
	CHECK_EQ_INT(cuCtxDisablePeerAccess(g_ctx1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxDisablePeerAccess(g_ctx1), 705);
	/* one direction is one context's list: device 1 has enabled nothing */
	CHECK_EQ_INT(cuCtxEnablePeerAccess(g_ctx1, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxSetCurrent(g_ctx1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxDisablePeerAccess(g_ctx0), 705);
	CHECK_EQ_INT(cuCtxSetCurrent(g_ctx0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxDisablePeerAccess(g_ctx1), GG_CUDA_SUCCESS);
}

/* CUstreamBatchMemOpParams, as a caller lays it out */
struct test_memop {
	uint32_t operation, pad0;
	uint64_t address, value;
	uint32_t flags, pad1;
	uint64_t alias, pad2;
};

TEST(stream_memops_and_prefetch)
{
	CHECK_EQ_INT(cuCtxSetCurrent(g_ctx0), GG_CUDA_SUCCESS);
	gg_CUdeviceptr d = 0, m = 0;
	CHECK_EQ_INT(cuMemAlloc_v2(&d, 4096), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAllocManaged(&m, 8192, 1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamWaitValue32(NULL, d + 4092, 1, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamWaitValue32(NULL, d + 2, 1, 0), GG_CUDA_ERROR_INVALID_VALUE);  /* unaligned */
	CHECK_EQ_INT(cuStreamWaitValue32(NULL, 0x1000, 1, 0), GG_CUDA_ERROR_INVALID_VALUE); /* nobody's memory */
	CHECK_EQ_INT(cuStreamWaitValue32(NULL, d, 1, 4), GG_CUDA_ERROR_INVALID_VALUE);      /* no such condition */
	CHECK_EQ_INT(cuStreamWaitValue32(NULL, d, 1, 3u | (1u << 30)), GG_CUDA_SUCCESS);    /* NOR, flush */
	CHECK_EQ_INT(cuStreamWaitValue32((gg_CUstream)(uintptr_t)0xdead00, d, 1, 0), GG_CUDA_ERROR_INVALID_HANDLE);
	struct test_memop ops[3];
	memset(ops, 0, sizeof(ops));
	ops[0] = (struct test_memop){.operation = 2, .address = d, .value = 7};     /* write 32 */
	ops[1] = (struct test_memop){.operation = 4, .address = d + 8, .value = 7}; /* wait 64 */
	ops[2] = (struct test_memop){.operation = 6};                               /* barrier */
	CHECK_EQ_INT(cuStreamBatchMemOp(NULL, 3, ops, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamBatchMemOp(NULL, 0, ops, 0), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuStreamBatchMemOp(NULL, 3, ops, 1), GG_CUDA_ERROR_INVALID_VALUE);
	ops[1].address = d + 4; /* 64-bit word not 8-aligned */
	CHECK_EQ_INT(cuStreamBatchMemOp(NULL, 3, ops, 0), GG_CUDA_ERROR_INVALID_VALUE);
	ops[1].address = d + 8;
	ops[2].operation = 99;
	CHECK_EQ_INT(cuStreamBatchMemOp(NULL, 3, ops, 0), GG_CUDA_ERROR_INVALID_VALUE);
	/* prefetch: managed memory only, to a device or the host */
	CHECK_EQ_INT(cuMemPrefetchAsync(m, 8192, 0, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemPrefetchAsync(m + 4096, 4096, -1, NULL), GG_CUDA_SUCCESS); /* CU_DEVICE_CPU */
	CHECK_EQ_INT(cuMemPrefetchAsync(m, 8193, 0, NULL), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemPrefetchAsync(d, 4096, 0, NULL), GG_CUDA_ERROR_INVALID_VALUE); /* not managed */
	CHECK_EQ_INT(cuMemPrefetchAsync(m, 8192, 99, NULL), GG_CUDA_ERROR_INVALID_DEVICE);
	gg_CUmemLocation dev1 = {GG_CU_MEM_LOCATION_TYPE_DEVICE, 1}, bad = {GG_CU_MEM_LOCATION_TYPE_DEVICE, 99};
	CHECK_EQ_INT(cuMemPrefetchAsync_v2(m, 8192, dev1, 0, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemPrefetchAsync_v2(m, 8192, dev1, 1, NULL), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemPrefetchAsync_v2(m, 8192, bad, 0, NULL), GG_CUDA_ERROR_INVALID_DEVICE);
	CHECK_EQ_INT(cuMemFree_v2(m), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemPrefetchAsync(m, 8192, 0, NULL), GG_CUDA_ERROR_INVALID_VALUE); /* freed */
	CHECK_EQ_INT(cuMemFree_v2(d), GG_CUDA_SUCCESS);
}

/* captured operations keep their node types, in order */
TEST(graph_nodes)
{
	CHECK_EQ_INT(cuCtxSetCurrent(g_ctx0), GG_CUDA_SUCCESS);
	gg_CUstream s;
	gg_CUdeviceptr d = 0;
	char host[64];
	CHECK_EQ_INT(cuStreamCreate(&s, 1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAlloc_v2(&d, 4096), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamBeginCapture_v2(s, GG_CU_STREAM_CAPTURE_MODE_GLOBAL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemsetD8Async(d, 0, 64, s), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemcpyHtoDAsync_v2(d, host, 64, s), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuLaunchHostFunc(s, host_fn, &g_host_calls), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamWaitValue32(s, d, 0, 0), GG_CUDA_SUCCESS);
	gg_CUdeviceptr a = 0;
	CHECK_EQ_INT(cuMemAllocAsync(&a, 2 * MiB, s), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFreeAsync(a, s), GG_CUDA_SUCCESS);
	gg_CUgraph g = NULL;
	CHECK_EQ_INT(cuStreamEndCapture(s, &g), GG_CUDA_SUCCESS);
	size_t n = 0;
	CHECK_EQ_INT(cuGraphGetNodes(g, NULL, &n), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(n, 6);
	gg_CUgraphNode nodes[8];
	memset(nodes, 0xab, sizeof(nodes));
	n = 8;
	CHECK_EQ_INT(cuGraphGetNodes(g, nodes, &n), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(n, 6);
	CHECK(nodes[6] == NULL && nodes[7] == NULL);
	/* memset, memcpy, host, batch mem op, mem alloc, mem free */
	static const int want[6] = {2, 1, 3, 12, 10, 11};
	for (int i = 0; i < 6; i++) {
		int t = -1;
		CHECK_EQ_INT(cuGraphNodeGetType(nodes[i], &t), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(t, want[i]);
	}
	n = 2; /* fewer than there are: the first two */
	gg_CUgraphNode two[2] = {NULL, NULL};
	CHECK_EQ_INT(cuGraphGetNodes(g, two, &n), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(n, 2);
	CHECK(two[0] == nodes[0] && two[1] == nodes[1]);
	CHECK_EQ_INT(cuGraphGetNodes(g, nodes, NULL), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuGraphGetNodes(NULL, nodes, &n), GG_CUDA_ERROR_INVALID_VALUE);
	int t = -1;
	CHECK_EQ_INT(cuGraphNodeGetType(NULL, &t), GG_CUDA_ERROR_INVALID_VALUE);
	/* no kernel nodes here: the wrong node type for kernel parameters */
	unsigned char params[64];
	CHECK_EQ_INT(cuGraphKernelNodeGetParams(nodes[0], params), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuGraphExecKernelNodeSetParams(NULL, nodes[0], params), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuGraphDestroy(g), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphNodeGetType(nodes[0], &t), GG_CUDA_ERROR_INVALID_VALUE); /* gone with its graph */
	CHECK_EQ_INT(cuStreamDestroy_v2(s), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(d), GG_CUDA_SUCCESS);
}

/* ------------------------------------------------------ the shared card */

/* Processes on one card (SIMGPU_SHARED): each an "agent", this program run
 * again with --agent, driven one command a line on its stdin and answering
 * one line ("ok ..." or "err <code>") on its stdout. An agent dies of
 * SIGALRM if a command takes 30 s, so a wedged card fails a test instead of
 * hanging it. */
gg_CUresult cuCtxSetLimit(gg_CUlimit limit, size_t value);
gg_CUresult cuCtxGetLimit(size_t *pvalue, gg_CUlimit limit);
gg_CUresult cuModuleLoadData(gg_CUmodule *module, const void *image);
gg_CUresult cuModuleUnload(gg_CUmodule hmod);
gg_CUresult cuModuleGetFunction(gg_CUfunction *hfunc, gg_CUmodule hmod, const char *name);
gg_CUresult cuModuleGetLoadingMode(gg_CUmoduleLoadingMode *mode);
gg_CUresult cuFuncGetAttribute(int *pi, gg_CUfunction_attribute attrib, gg_CUfunction hfunc);
gg_CUresult cuLaunchKernel(gg_CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                           unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                           unsigned int sharedMemBytes, gg_CUstream hStream, void **kernelParams, void **extra);
gg_CUresult cuLaunchKernelEx(const void *config, gg_CUfunction f, void **kernelParams, void **extra);
gg_CUresult simgpu_cuda_func_set_footprint(gg_CUfunction f, size_t local_bytes, unsigned int flags);
int simgpu_cuda_debug_footprint(int dev, unsigned long long *out, int n);
void simgpu_cuda_debug_card_hold(void);

#define FP_N 6                         /* allocations, context, modules, local, heap, FIFO */
#define LOCAL_PER_BYTE (2048ull * 132) /* threads per SM x SMs */

/* stress: threads allocating, freeing and asking for the card's free memory
 * at once, in one process of a shared card; 0 if every call answered right */
struct stress_arg {
	gg_CUcontext ctx;
	int pairs, bad;
};

static void *card_stress_thread(void *p)
{
	struct stress_arg *a = p;
	cuCtxSetCurrent(a->ctx);
	for (int i = 0; i < a->pairs; i++) {
		gg_CUdeviceptr d[3];
		size_t f, t;
		int rc = cuMemAlloc_v2(&d[0], 4 << 20) | cuMemAlloc_v2(&d[1], 1000) | cuMemAlloc_v2(&d[2], 6 << 20);
		rc |= cuMemGetInfo_v2(&f, &t);
		rc |= cuMemFree_v2(d[0]) | cuMemFree_v2(d[1]) | cuMemFree_v2(d[2]);
		a->bad += rc != 0;
	}
	return NULL;
}

/* The agent's answer to a command: "ok", or "err RC" (the driver's). */
static void agent_say(int rc)
{
	printf(rc ? "err %d\n" : "ok\n", rc);
}

/* ... to a memory-info command: "ok FREE TOTAL", or "err RC". */
static void agent_say_info(int rc, size_t f, size_t t)
{
	if (rc)
		printf("err %d\n", rc);
	else
		printf("ok %zu %zu\n", f, t);
}

static int agent_main(void)
{
	char line[256];
	gg_CUdeviceptr ptrs[256];
	int nptr = 0, nvml_up = 0;
	gg_CUcontext made[16];
	int nmade = 0;
	gg_CUmodule mod = NULL;
	gg_CUfunction fn = NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(30);
	while (fgets(line, sizeof(line), stdin)) {
		char cmd[32] = "";
		unsigned long long a = 0, b = 0;
		int rc = 0;
		sscanf(line, "%31s %llu %llu", cmd, &a, &b);
		alarm(30);
		if (!strcmp(cmd, "init")) { /* init [dev]: retain its primary context, make it current */
			gg_CUcontext c;
			if (!(rc = cuInit(0)) && !(rc = cuDevicePrimaryCtxRetain(&c, (int)a)))
				rc = cuCtxSetCurrent(c);
			agent_say(rc);
		} else if (!strcmp(cmd, "etretain")) { /* as cudart: the export table's retain */
			void *const *rt = NULL;
			gg_CUcontext c;
			if (!(rc = cuInit(0)) && !(rc = cuGetExportTable((const void **)&rt, &ET_CUDART)) &&
			    !(rc = ((gg_CUresult(*)(gg_CUcontext *, int))rt[2])(&c, (int)a)))
				rc = cuCtxSetCurrent(c);
			agent_say(rc);
		} else if (!strcmp(cmd, "alloc")) {
			rc = nptr < 256 ? cuMemAlloc_v2(&ptrs[nptr], a) : 1;
			nptr += !rc;
			agent_say(rc);
		} else if (!strcmp(cmd, "hipalloc")) { /* HIP's card: another one, shared the same way */
			void *hp = NULL;
			rc = hipMalloc(&hp, a);
			agent_say(rc);
		} else if (!strcmp(cmd, "hipinfo")) {
			size_t f = 0, t = 0;
			rc = hipMemGetInfo(&f, &t);
			agent_say_info(rc, f, t);
		} else if (!strcmp(cmd, "stress")) { /* stress <pairs>: four threads */
			pthread_t th[4];
			struct stress_arg sa[4];
			gg_CUcontext c = NULL;
			cuCtxGetCurrent(&c);
			for (int i = 0; i < 4; i++) {
				sa[i] = (struct stress_arg){c, (int)a, 0};
				pthread_create(&th[i], NULL, card_stress_thread, &sa[i]);
			}
			int bad = 0;
			for (int i = 0; i < 4; i++) {
				pthread_join(th[i], NULL);
				bad += sa[i].bad;
			}
			printf(bad ? "err %d\n" : "ok\n", bad);
		} else if (!strcmp(cmd, "freeall")) {
			while (nptr)
				cuMemFree_v2(ptrs[--nptr]);
			printf("ok\n");
		} else if (!strcmp(cmd, "info")) {
			size_t f = 0, t = 0;
			rc = cuMemGetInfo_v2(&f, &t);
			agent_say_info(rc, f, t);
		} else if (!strcmp(cmd, "fp")) { /* fp [dev] */
			unsigned long long v[FP_N];
			simgpu_cuda_debug_footprint((int)a, v, FP_N);
			printf("ok %llu %llu %llu %llu %llu %llu\n", v[0], v[1], v[2], v[3], v[4], v[5]);
		} else if (!strcmp(cmd, "pid")) {
			char st[4096] = "";
			FILE *f = fopen("/proc/self/status", "r");
			long ns = 0, host = 0;
			while (f && fgets(st, sizeof(st), f))
				if (!strncmp(st, "NSpid:", 6))
					sscanf(st + 6, "%ld", &host);
			if (f)
				fclose(f);
			ns = (long)getpid();
			printf("ok %ld %ld\n", ns, host);
		} else if (!strcmp(cmd, "uuid")) {
			gg_CUuuid u;
			char c[41] = "";
			if (!(rc = cuDeviceGetUuid_v2(&u, (int)a)))
				uuid_format(u.bytes, c);
			if (rc)
				printf("err %d\n", rc);
			else
				printf("ok %s\n", c);
		} else if (!strcmp(cmd, "nvml")) { /* every process on device 0: ok n pid used ... */
			unsigned n = 0;
			gg_nvmlProcessInfo_t info[16];
			gg_nvmlDevice_t h;
			if (!nvml_up && !(rc = nvmlInit_v2()))
				nvml_up = 1;
			if (!rc && !(rc = nvmlDeviceGetHandleByIndex_v2(0, &h))) {
				rc = nvmlDeviceGetComputeRunningProcesses_v3(h, &n, NULL); /* count 0 sizes it */
				if (rc == (n ? GG_NVML_ERROR_INSUFFICIENT_SIZE : GG_NVML_SUCCESS)) {
					unsigned want = n;
					n = 16;
					rc = n >= want ? nvmlDeviceGetComputeRunningProcesses_v3(h, &n, info) : 99;
				} else {
					rc = 98;
				}
			}
			if (rc) {
				printf("err %d\n", rc);
			} else {
				printf("ok %u", n);
				for (unsigned i = 0; i < n; i++)
					printf(" %u %llu", info[i].pid, info[i].usedGpuMemory);
				printf("\n");
			}
		} else if (!strcmp(cmd, "nvml1")) { /* the v1 layout: ok n pid used ... */
			unsigned n = 16;
			gg_nvmlProcessInfo_v1_t info[16];
			gg_nvmlDevice_t h;
			if (!nvml_up && !(rc = nvmlInit_v2()))
				nvml_up = 1;
			if (!rc && !(rc = nvmlDeviceGetHandleByIndex_v2(0, &h)))
				rc = nvmlDeviceGetComputeRunningProcesses(h, &n, info);
			if (rc) {
				printf("err %d\n", rc);
			} else {
				printf("ok %u", n);
				for (unsigned i = 0; i < n; i++)
					printf(" %u %llu", info[i].pid, info[i].usedGpuMemory);
				printf("\n");
			}
		} else if (!strcmp(cmd, "nvmem")) { /* ok total reserved free used v1-used v1-free */
			gg_nvmlDevice_t h;
			gg_nvmlMemory_t m1;
			gg_nvmlMemory_v2_t m2 = {.version = GG_nvmlMemory_v2};
			if (!nvml_up && !(rc = nvmlInit_v2()))
				nvml_up = 1;
			if (!rc && !(rc = nvmlDeviceGetHandleByIndex_v2(0, &h)) &&
			    !(rc = nvmlDeviceGetMemoryInfo_v2(h, &m2)))
				rc = nvmlDeviceGetMemoryInfo(h, &m1);
			if (rc)
				printf("err %d\n", rc);
			else
				printf("ok %llu %llu %llu %llu %llu %llu\n", m2.total, m2.reserved, m2.free, m2.used,
				       m1.used, m1.free);
		} else if (!strcmp(cmd, "count")) {
			int n = 0;
			if (!(rc = cuInit(0)))
				rc = cuDeviceGetCount(&n);
			printf(rc ? "err %d\n" : "ok %d\n", rc ? rc : n);
		} else if (!strcmp(cmd, "total")) {
			size_t t = 0;
			rc = cuDeviceTotalMem_v2(&t, (int)a);
			agent_say_info(rc, t, t);
		} else if (!strcmp(cmd, "uuid1")) { /* the legacy query */
			gg_CUuuid u;
			char c[41] = "";
			if (!(rc = cuDeviceGetUuid(&u, (int)a)))
				uuid_format(u.bytes, c);
			if (rc)
				printf("err %d\n", rc);
			else
				printf("ok %s\n", c);
		} else if (!strcmp(cmd, "migdev")) { /* migdev k: GPU 0's instance k, as NVML shows it */
			gg_nvmlDevice_t h0, m = NULL, by = NULL, up = NULL;
			unsigned cur = 9, pend = 9, most = 0, is0 = 9, is = 9, n = 16, gi = 0, idx = 0;
			char u[GG_NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
			gg_nvmlMemory_v2_t m2 = {.version = GG_nvmlMemory_v2};
			gg_nvmlProcessInfo_t info[16];
			if (!nvml_up && !(rc = nvmlInit_v2()))
				nvml_up = 1;
			if (!rc && !(rc = nvmlDeviceGetHandleByIndex_v2(0, &h0)) &&
			    !(rc = nvmlDeviceGetMigMode(h0, &cur, &pend)) &&
			    !(rc = nvmlDeviceGetMaxMigDeviceCount(h0, &most)) &&
			    !(rc = nvmlDeviceIsMigDeviceHandle(h0, &is0)) &&
			    !(rc = nvmlDeviceGetMigDeviceHandleByIndex(h0, (unsigned)a, &m)) &&
			    !(rc = nvmlDeviceIsMigDeviceHandle(m, &is)) &&
			    !(rc = nvmlDeviceGetDeviceHandleFromMigDeviceHandle(m, &up)) &&
			    !(rc = nvmlDeviceGetUUID(m, u, sizeof u)) && !(rc = nvmlDeviceGetHandleByUUID(u, &by)) &&
			    !(rc = nvmlDeviceGetMemoryInfo_v2(m, &m2)) && !(rc = nvmlDeviceGetGpuInstanceId(m, &gi)))
				rc = nvmlDeviceGetComputeRunningProcesses_v3(m, &n, info);
			if (rc)
				printf("err %d\n", rc);
			else /* mode max uuid total used free nprocs used0 gi: sane handles, index refused */
				printf("ok %u %u %s %llu %llu %llu %u %llu %u %d\n", cur, most, u, m2.total, m2.used,
				       m2.free, n, n ? info[0].usedGpuMemory : 0, gi,
				       cur == pend && !is0 && is == 1 && up == h0 && by == m &&
				           (!n || info[0].gpuInstanceId == gi) &&
				           nvmlDeviceGetIndex(m, &idx) == GG_NVML_ERROR_NOT_SUPPORTED);
		} else if (!strcmp(cmd, "dmem")) { /* dmem <path>: ok soft hard used (the cgroup's, device 0) */
			char path[200] = "";
			gg_nvmlDevice_t h;
			gg_nvmlGetMemoryLimits_v1_t l = {.nameSpace = path};
			sscanf(line, "%*s %199s", path);
			if (!nvml_up && !(rc = nvmlInit_v2()))
				nvml_up = 1;
			if (!rc && !(rc = nvmlDeviceGetHandleByIndex_v2(0, &h)))
				rc = nvmlDeviceGetMemoryLimits_v1(h, &l);
			if (rc)
				printf("err %d\n", rc);
			else
				printf("ok %llu %llu %llu\n", l.softLimit, l.hardLimit, l.currentUsed);
		} else if (!strcmp(cmd, "hold")) {
			simgpu_cuda_debug_card_hold();
			printf("ok\n");
		} else if (!strcmp(cmd, "ctxcreate")) {
			rc = nmade < 16 ? cuCtxCreate_v2(&made[nmade], 0, (int)a) : 1;
			nmade += !rc;
			agent_say(rc);
		} else if (!strcmp(cmd, "ctxdestroy")) {
			rc = nmade ? cuCtxDestroy_v2(made[--nmade]) : 1;
			agent_say(rc);
		} else if (!strcmp(cmd, "reset")) {
			rc = cuDevicePrimaryCtxReset_v2((int)a);
			agent_say(rc);
		} else if (!strcmp(cmd, "modload")) { /* a fatbin header saying a bytes in all */
			unsigned char img[16] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0};
			uint64_t fat = a - 16;
			memcpy(img + 8, &fat, 8);
			rc = cuModuleLoadData(&mod, img);
			agent_say(rc);
		} else if (!strcmp(cmd, "libload")) { /* the same, as a library, current context or not */
			unsigned char img[16] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0};
			uint64_t fat = a - 16;
			memcpy(img + 8, &fat, 8);
			gg_CUlibrary lib;
			if (!(rc = cuInit(0)) && !(rc = cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0)))
				mod = (gg_CUmodule)(void *)lib;
			agent_say(rc);
		} else if (!strcmp(cmd, "unload")) {
			rc = cuModuleUnload(mod);
			agent_say(rc);
		} else if (!strcmp(cmd, "getfn")) {
			rc = cuModuleGetFunction(&fn, mod, "kernel");
			agent_say(rc);
		} else if (!strcmp(cmd, "setfp")) { /* setfp local flags */
			int got = -1;
			if (!(rc = simgpu_cuda_func_set_footprint(fn, a, (unsigned)b)))
				rc = cuFuncGetAttribute(&got, 3, fn);
			printf(rc ? "err %d\n" : "ok %d\n", rc ? rc : got);
		} else if (!strcmp(cmd, "launch")) {
			rc = cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, NULL, NULL, NULL);
			agent_say(rc);
		} else if (!strcmp(cmd, "launchex")) { /* CUlaunchConfig: dims, shared bytes, stream, attrs */
			struct {
				unsigned dims[7];
				gg_CUstream stream;
				void *attrs;
				unsigned nattrs;
			} cfg = {{1, 1, 1, 128, 1, 1, 0}, NULL, NULL, 0};
			rc = cuLaunchKernelEx(&cfg, fn, NULL, NULL);
			agent_say(rc);
		} else if (!strcmp(cmd, "setlimit")) {
			rc = cuCtxSetLimit((gg_CUlimit)a, b);
			agent_say(rc);
		} else if (!strcmp(cmd, "mode")) {
			gg_CUmoduleLoadingMode m = 0;
			rc = cuModuleGetLoadingMode(&m);
			printf(rc ? "err %d\n" : "ok %d\n", rc ? rc : (int)m);
		} else if (!strcmp(cmd, "exit")) {
			printf("ok\n");
			return 0;
		} else {
			printf("err unknown\n");
		}
	}
	return 0;
}

struct agent {
	pid_t pid;
	FILE *to, *from;
};

static char g_exe[4096];

/* Starts an agent with env applied (unset where NULL); prefix, if any, is a
 * command line the agent runs under (unshare). 0 or -1. */
static int agent_start_under(struct agent *a, const char *const *prefix, const struct env_set *env, int nenv)
{
	int in[2], out[2];
	if (!g_exe[0] && readlink("/proc/self/exe", g_exe, sizeof(g_exe) - 1) < 0)
		return -1;
	signal(SIGPIPE, SIG_IGN); /* an agent that died fails its test, not this program */
	if (pipe(in) || pipe(out))
		return -1;
	a->pid = fork();
	if (a->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		for (int i = 0; i < nenv; i++) {
			if (env[i].value)
				setenv(env[i].name, env[i].value, 1);
			else
				unsetenv(env[i].name);
		}
		const char *argv[16];
		int k = 0;
		for (; prefix && prefix[k]; k++)
			argv[k] = prefix[k];
		argv[k++] = g_exe;
		argv[k++] = "--agent";
		argv[k] = NULL;
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	a->to = fdopen(in[1], "w");
	a->from = fdopen(out[0], "r");
	setvbuf(a->to, NULL, _IOLBF, 0);
	return a->pid > 0 && a->to && a->from ? 0 : -1;
}

static int agent_start(struct agent *a, const struct env_set *env, int nenv)
{
	return agent_start_under(a, NULL, env, nenv);
}

/* Sends one command; its answer into reply (without "ok "). 0 on "ok". */
static int agent_ask(struct agent *a, char *reply, size_t n, const char *cmd)
{
	char buf[512];
	fprintf(a->to, "%s\n", cmd);
	fflush(a->to);
	if (!fgets(buf, sizeof(buf), a->from)) {
		fprintf(stderr, "agent %d: no answer to %s\n", (int)a->pid, cmd);
		return -1;
	}
	buf[strcspn(buf, "\n")] = 0;
	if (reply)
		snprintf(reply, n, "%s", strncmp(buf, "ok", 2) ? buf : buf + (buf[2] ? 3 : 2));
	return strncmp(buf, "ok", 2) ? -1 : 0;
}

/* the first number of an "ok" answer, or -1 */
static long long agent_num(struct agent *a, const char *cmd)
{
	char r[512];
	long long v = -1;
	if (agent_ask(a, r, sizeof(r), cmd) || sscanf(r, "%lld", &v) != 1)
		return -1;
	return v;
}

/* footprint number i (0 allocations .. 5 FIFO) on device dev */
static long long agent_fp(struct agent *a, int dev, int i)
{
	char r[512], cmd[16];
	unsigned long long v[FP_N];
	snprintf(cmd, sizeof(cmd), "fp %d", dev);
	if (agent_ask(a, r, sizeof(r), cmd) ||
	    sscanf(r, "%llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != FP_N)
		return -1;
	return (long long)v[i];
}

static void agent_stop(struct agent *a)
{
	int st;
	agent_ask(a, NULL, 0, "exit");
	fclose(a->to);
	fclose(a->from);
	waitpid(a->pid, &st, 0);
}

/* kill -9, and wait until it is dead but not reaped (WNOWAIT): the caller
 * reaps, so a zombie's memory must already be free */
static void agent_kill(struct agent *a)
{
	siginfo_t si;
	kill(a->pid, SIGKILL);
	waitid(P_PID, (id_t)a->pid, &si, WEXITED | WNOWAIT);
	fclose(a->to);
	fclose(a->from);
}

static char g_card_name[64];

/* POSIX shared memory works here (a container may lack /dev/shm) */
static int shm_usable(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/simgpu-probe-%d", (int)getpid());
	int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return 0;
	close(fd);
	shm_unlink(path);
	return 1;
}

#define REQUIRE_SHM()                                                   \
	do {                                                            \
		if (!shm_usable())                                      \
			SKIP("no POSIX shared memory (/dev/shm) here"); \
	} while (0)

/* a fresh card name for a test, and its object gone afterwards */
static const char *card_new(void)
{
	static int n;
	snprintf(g_card_name, sizeof(g_card_name), "simtest-%d-%d", (int)getpid(), ++n);
	return g_card_name;
}

static void card_gone(void)
{
	char path[128];
	snprintf(path, sizeof(path), "/simgpu-cuda-%s", g_card_name);
	shm_unlink(path);
	snprintf(path, sizeof(path), "/simgpu-hip-%s", g_card_name);
	shm_unlink(path);
}

#define CARD_ENV(name, ctx)                                                                                  \
	{"SIMGPU_SHARED", name}, {"SIMGPU_MEMORY", "8Gi"}, {"SIMGPU_DEVICES", "1"}, {"SIMGPU_CONTEXT", ctx}, \
	    {"SIMGPU_NVML_RESERVED", NULL}, {"SIMGPU_NVML_PID_OFFSET", NULL}, {"CUDA_MODULE_LOADING", NULL}, \
	{                                                                                                    \
		"SIMGPU_FOOTPRINT", NULL                                                                     \
	}
#define CARD_NENV 8

/* Two processes see one card: the same UUID, the same total (the maker's,
 * whatever the joiner's SIMGPU_MEMORY says), each other's allocations and
 * contexts in cuMemGetInfo, and the card runs out for both. A process
 * without SIMGPU_SHARED still has a card of its own. */
TEST(shared_card_two_processes)
{
	REQUIRE_SHM();
	const char *name = card_new();
	struct env_set ea[] = {CARD_ENV(name, "64Mi")}, eb[] = {CARD_ENV(name, "64Mi")},
	               ec[] = {CARD_ENV(NULL, "64Mi")};
	eb[1].value = "1Gi";                         /* the joiner's own idea of the size does not matter */
	eb[CARD_NENV - 1].name = "SIMGPU_UUID_SEED"; /* nor its seed */
	eb[CARD_NENV - 1].value = "elsewhere";
	struct agent a, b, c;
	char ua[64] = "", ub[64] = "", uc[64] = "";
	CHECK_EQ_INT(agent_start(&a, ea, CARD_NENV), 0);
	CHECK_EQ_INT(agent_start(&b, eb, CARD_NENV), 0);
	CHECK_EQ_INT(agent_start(&c, ec, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&c, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&a, ua, sizeof(ua), "uuid 0"), 0);
	CHECK_EQ_INT(agent_ask(&b, ub, sizeof(ub), "uuid 0"), 0);
	CHECK_EQ_INT(agent_ask(&c, uc, sizeof(uc), "uuid 0"), 0);
	CHECK(ua[0] && !strcmp(ua, ub) && !strcmp(ua, uc));
	char r[128];
	unsigned long long f = 0, t = 0;
	CHECK_EQ_INT(agent_ask(&b, r, sizeof(r), "info"), 0);
	CHECK_EQ_INT(sscanf(r, "%llu %llu", &f, &t), 2);
	CHECK_EQ_U64(t, 8 * GiB);
	CHECK_EQ_U64(f, 8 * GiB - 2 * 64 * MiB);                     /* two contexts */
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "alloc 3221225472"), 0); /* 3 GiB */
	CHECK_EQ_U64(agent_num(&b, "info"), 5 * GiB - 128 * MiB);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "alloc 3221225472"), 0);
	CHECK_EQ_U64(agent_num(&a, "info"), 2 * GiB - 128 * MiB);
	/* 2 GiB does not fit any more, in either process */
	CHECK_EQ_INT(agent_ask(&b, r, sizeof(r), "alloc 2147483648"), -1);
	CHECK(!strcmp(r, "err 2"));
	CHECK_EQ_INT(agent_ask(&a, r, sizeof(r), "alloc 2147483648"), -1);
	CHECK(!strcmp(r, "err 2"));
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "alloc 1073741824"), 0);
	/* its own card: only its context */
	CHECK_EQ_U64(agent_num(&c, "info"), 8 * GiB - 64 * MiB);
	/* HIP's card is shared too, and apart from CUDA's */
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "hipalloc 1073741824"), 0);
	CHECK_EQ_U64(agent_num(&b, "hipinfo"), 7 * GiB);
	CHECK_EQ_U64(agent_num(&c, "hipinfo"), 8 * GiB);
	CHECK_EQ_U64(agent_num(&b, "info"), 1 * GiB - 128 * MiB);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "freeall"), 0);
	CHECK_EQ_U64(agent_num(&b, "info"), 5 * GiB - 128 * MiB);
	agent_stop(&a);
	agent_stop(&b);
	agent_stop(&c);
	card_gone();
}

/* kill -9 gives a process's memory back: the next process to look sees the
 * card free, while the dead one is still an unreaped zombie; a process that
 * exits normally likewise. */
TEST(shared_card_kill9_gives_memory_back)
{
	REQUIRE_SHM();
	const char *name = card_new();
	struct env_set e[] = {CARD_ENV(name, "64Mi")};
	struct agent a, b, w;
	CHECK_EQ_INT(agent_start(&a, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_start(&b, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "alloc 6442450944"), 0); /* 6 GiB */
	CHECK_EQ_U64(agent_num(&b, "info"), 2 * GiB - 128 * MiB);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "alloc 4294967296"), -1);
	agent_kill(&a);
	CHECK_EQ_U64(agent_num(&b, "info"), 8 * GiB - 64 * MiB); /* a is a zombie still */
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "alloc 4294967296"), 0);
	int st;
	waitpid(a.pid, &st, 0);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	/* a normal exit, seen through NVML by a process that never made a context */
	CHECK_EQ_INT(agent_start(&w, e, CARD_NENV), 0);
	CHECK_EQ_U64(agent_num(&w, "nvml"), 1);
	agent_stop(&b);
	CHECK_EQ_U64(agent_num(&w, "nvml"), 0);
	agent_stop(&w);
	card_gone();
}

/* A holder of the card's lock killed inside it does not wedge the card: the
 * robust mutex hands the next taker EOWNERDEAD and the card is repaired (an
 * agent that hung would die of its alarm and answer nothing). */
TEST(shared_card_lock_holder_killed)
{
	REQUIRE_SHM();
	/* A robust mutex is released at a holder's death through the thread's
	 * robust futex list, which qemu-user does not keep (set_robust_list is
	 * ENOSYS there): under it the next taker would wait for ever. */
	void *rl_head;
	size_t rl_len;
	if (syscall(SYS_get_robust_list, 0, &rl_head, &rl_len) != 0 && errno == ENOSYS)
		SKIP("no robust futex list here (qemu-user)");
	const char *name = card_new();
	struct env_set e[] = {CARD_ENV(name, "64Mi")};
	struct agent a, b;
	CHECK_EQ_INT(agent_start(&a, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "alloc 1073741824"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "hold"), 0);
	agent_kill(&a);
	int st;
	waitpid(a.pid, &st, 0);
	CHECK_EQ_INT(agent_start(&b, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "init"), 0);
	CHECK_EQ_U64(agent_num(&b, "info"), 8 * GiB - 64 * MiB);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "alloc 7516192768"), 0); /* 7 GiB */
	agent_stop(&b);
	card_gone();
}

/* A context costs SIMGPU_CONTEXT (526 MiB by default on a shared card) per
 * process per device: at the primary context's first retain, at each
 * cuCtxCreate; given back by cuCtxDestroy and by the primary's reset, and
 * taken again at the retain after a reset. */
TEST(shared_card_context_cost)
{
	REQUIRE_SHM();
	const char *name = card_new();
	struct env_set e[] = {CARD_ENV(name, NULL)};
	e[2].value = "2";
	struct agent a, b;
	CHECK_EQ_INT(agent_start(&a, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_start(&b, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	CHECK_EQ_U64(agent_fp(&a, 0, 1), 526 * MiB);
	CHECK_EQ_U64(agent_fp(&a, 1, 1), 0);
	CHECK_EQ_U64(agent_num(&a, "info"), 8 * GiB - 526 * MiB);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "init"), 0);
	CHECK_EQ_U64(agent_num(&a, "info"), 8 * GiB - 2 * 526 * MiB);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "ctxcreate 1"), 0);
	CHECK_EQ_U64(agent_fp(&a, 1, 1), 526 * MiB);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "ctxcreate 0"), 0);
	CHECK_EQ_U64(agent_fp(&a, 0, 1), 2 * 526 * MiB);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "ctxdestroy"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "ctxdestroy"), 0);
	CHECK_EQ_U64(agent_fp(&a, 0, 1), 526 * MiB);
	CHECK_EQ_U64(agent_fp(&a, 1, 1), 0);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "reset 0"), 0);
	CHECK_EQ_U64(agent_fp(&b, 0, 1), 0);
	CHECK_EQ_U64(agent_num(&a, "info"), 8 * GiB - 526 * MiB);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "init"), 0);
	CHECK_EQ_U64(agent_fp(&b, 0, 1), 526 * MiB);
	/* cudart retains through its export table: the same cost, once */
	struct agent c;
	CHECK_EQ_INT(agent_start(&c, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&c, NULL, 0, "etretain 1"), 0);
	CHECK_EQ_INT(agent_ask(&c, NULL, 0, "etretain 1"), 0);
	CHECK_EQ_U64(agent_fp(&c, 1, 1), 526 * MiB);
	CHECK_EQ_U64(agent_fp(&c, 0, 1), 0);
	agent_stop(&c);
	agent_stop(&a);
	agent_stop(&b);
	card_gone();
}

/* A module image takes its size (factor 1) at load under EAGER, at the
 * first use of a function under LAZY (the default); unload gives it back. */
TEST(shared_card_module_loading)
{
	REQUIRE_SHM();
	const char *name = card_new();
	struct env_set lazy[] = {CARD_ENV(name, "64Mi")}, eager[] = {CARD_ENV(name, "64Mi")};
	eager[6].value = "EAGER";
	struct agent a, b;
	CHECK_EQ_INT(agent_start(&a, lazy, CARD_NENV), 0);
	CHECK_EQ_INT(agent_start(&b, eager, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "init"), 0);
	CHECK_EQ_U64(agent_num(&a, "mode"), 2);
	CHECK_EQ_U64(agent_num(&b, "mode"), 1);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "modload 12582912"), 0); /* 12 MiB */
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "modload 12582912"), 0);
	CHECK_EQ_U64(agent_fp(&a, 0, 2), 0);
	CHECK_EQ_U64(agent_fp(&b, 0, 2), 12 * MiB);
	CHECK_EQ_U64(agent_num(&a, "info"), 8 * GiB - 128 * MiB - 12 * MiB);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "getfn"), 0);
	CHECK_EQ_U64(agent_fp(&a, 0, 2), 12 * MiB);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "getfn"), 0); /* once */
	CHECK_EQ_U64(agent_fp(&a, 0, 2), 12 * MiB);
	CHECK_EQ_U64(agent_num(&b, "info"), 8 * GiB - 128 * MiB - 24 * MiB);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "unload"), 0);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "unload"), 0);
	CHECK_EQ_U64(agent_fp(&a, 0, 2), 0);
	CHECK_EQ_U64(agent_fp(&b, 0, 2), 0);
	CHECK_EQ_U64(agent_num(&b, "info"), 8 * GiB - 128 * MiB);
	/* an image larger than the card is refused */
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "modload 17179869184"), -1);
	agent_stop(&a);
	agent_stop(&b);
	/* a library loaded before any context (cudart does so under EAGER)
	 * is charged in the context current at its first use */
	struct agent c;
	CHECK_EQ_INT(agent_start(&c, eager, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&c, NULL, 0, "libload 4194304"), 0);
	CHECK_EQ_U64(agent_fp(&c, 0, 2), 0);
	CHECK_EQ_INT(agent_ask(&c, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&c, NULL, 0, "getfn"), 0);
	CHECK_EQ_U64(agent_fp(&c, 0, 2), 4 * MiB);
	CHECK_EQ_INT(agent_ask(&c, NULL, 0, "unload"), 0);
	CHECK_EQ_U64(agent_fp(&c, 0, 2), 0);
	agent_stop(&c);
	card_gone();
}

/* Local memory: stack per thread x 2048 threads x 132 SMs, the default 1 KiB
 * inside the context's cost; grown by cuCtxSetLimit(STACK_SIZE) and by a
 * launch whose kernel needs more, never shrunk; past the card:
 * OUT_OF_MEMORY and nothing taken. The heap and the FIFO at the first launch
 * of a kernel that uses them, at their limits' sizes; their limits are
 * fixed from then on. */
TEST(shared_card_local_memory_heap_fifo)
{
	REQUIRE_SHM();
	const char *name = card_new();
	struct env_set e[] = {CARD_ENV(name, "64Mi")};
	e[1].value = "16Gi";
	struct agent a;
	char r[64];
	int sms = 0, threads = 0; /* the formula is the card's own attributes' */
	CHECK_EQ_INT(cuDeviceGetAttribute(&sms, 16, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuDeviceGetAttribute(&threads, 39, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64((unsigned long long)sms * (unsigned)threads, LOCAL_PER_BYTE);
	CHECK_EQ_INT(agent_start(&a, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "modload 4096"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "getfn"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "launch"), 0);
	CHECK_EQ_U64(agent_fp(&a, 0, 3), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "setlimit 0 4096"), 0);
	CHECK_EQ_U64(agent_fp(&a, 0, 3), (4096 - 1024) * LOCAL_PER_BYTE); /* 792 MiB */
	CHECK_EQ_INT(agent_ask(&a, r, sizeof(r), "setfp 16384 0"), 0);
	CHECK(!strcmp(r, "16384")); /* cuFuncGetAttribute(LOCAL_SIZE_BYTES) */
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "launch"), 0);
	CHECK_EQ_U64(agent_fp(&a, 0, 3), (16384 - 1024) * LOCAL_PER_BYTE);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "setlimit 0 1024"), 0);
	CHECK_EQ_U64(agent_fp(&a, 0, 3), (16384 - 1024) * LOCAL_PER_BYTE);  /* never shrinks */
	CHECK_EQ_INT(agent_ask(&a, r, sizeof(r), "setlimit 0 131072"), -1); /* 33 GiB */
	CHECK(!strcmp(r, "err 2"));
	CHECK_EQ_U64(agent_fp(&a, 0, 3), (16384 - 1024) * LOCAL_PER_BYTE);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "setfp 20480 0"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "launchex"), 0); /* cuLaunchKernelEx grows it too */
	CHECK_EQ_U64(agent_fp(&a, 0, 3), (20480 - 1024) * LOCAL_PER_BYTE);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "setfp 131072 0"), 0);
	CHECK_EQ_INT(agent_ask(&a, r, sizeof(r), "launch"), -1); /* 33 GiB: the card's own refusal */
	CHECK(!strcmp(r, "err 2"));
	CHECK_EQ_U64(agent_fp(&a, 0, 3), (20480 - 1024) * LOCAL_PER_BYTE);
	CHECK_EQ_U64(agent_fp(&a, 0, 4), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "setlimit 1 4194304"), 0); /* a 4 MiB FIFO */
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "setfp 0 1"), 0);          /* uses malloc */
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "launch"), 0);
	CHECK_EQ_U64(agent_fp(&a, 0, 4), 8388608);
	CHECK_EQ_U64(agent_fp(&a, 0, 5), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "launch"), 0);
	CHECK_EQ_U64(agent_fp(&a, 0, 4), 8388608); /* once */
	CHECK_EQ_INT(agent_ask(&a, r, sizeof(r), "setlimit 2 1048576"), -1);
	CHECK(!strcmp(r, "err 1"));
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "setfp 0 2"), 0); /* uses printf */
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "launch"), 0);
	CHECK_EQ_U64(agent_fp(&a, 0, 5), 4 * MiB);
	CHECK_EQ_INT(agent_ask(&a, r, sizeof(r), "setlimit 1 1048576"), -1);
	unsigned long long want = 16 * GiB - 64 * MiB - 4096 - (20480 - 1024) * LOCAL_PER_BYTE - 8388608 - 4 * MiB;
	CHECK_EQ_U64(agent_num(&a, "info"), want);
	/* the reset gives it all back */
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "reset 0"), 0);
	CHECK_EQ_U64(agent_num(&a, "info"), 16 * GiB);
	agent_stop(&a);
	card_gone();
}

/* NVML lists every process on the card with all it holds (allocations,
 * context, modules), under the PID the host sees (here moved by
 * SIMGPU_NVML_PID_OFFSET, as a container's would be); count 0 sizes the
 * array; memory info is the whole card's, the reserve taken once. */
/* ------------------------------------------------------------------- MIG */

#define MIG_ENV(card, mig, vis)                                                                          \
	{"SIMGPU_SHARED", card}, {"SIMGPU_MEMORY", "8Gi"}, {"SIMGPU_DEVICES", "2"}, {"SIMGPU_MIG", mig}, \
	    {"CUDA_VISIBLE_DEVICES", vis}, {"SIMGPU_CONTEXT", "64Mi"}, {"SIMGPU_NVML_RESERVED", "64Mi"}, \
	{                                                                                                \
		"SIMGPU_MIG_NO_PROC_MEM", NULL                                                           \
	}
#define MIG_NENV 8

/* "migdev k"'s answer */
struct migdev {
	unsigned mode, most, n, gi;
	char uuid[64];
	unsigned long long total, used, free_, used0;
	int sane;
};

static int migdev(struct agent *a, int k, struct migdev *m)
{
	char r[512], cmd[32];
	snprintf(cmd, sizeof cmd, "migdev %d", k);
	memset(m, 0, sizeof *m);
	if (agent_ask(a, r, sizeof r, cmd))
		return -1;
	return sscanf(r, "%u %u %63s %llu %llu %llu %u %llu %u %d", &m->mode, &m->most, m->uuid, &m->total, &m->used,
	              &m->free_, &m->n, &m->used0, &m->gi, &m->sane) == 10
	           ? 0
	           : -1;
}

/* SIMGPU_MIG splits GPU 0 into instances, each a card of its own: a
 * "MIG-…" in CUDA_VISIBLE_DEVICES makes it CUDA device 0 with its own size
 * and UUID (the legacy query names the GPU); NVML's MIG handles answer for
 * the instance, the GPU's for all of them; index and GPU-… forms still name
 * GPUs (GPU 0 standing for its first instance); a bad SIMGPU_MIG leaves MIG
 * off. One process, no shared card. */
TEST(mig_instances)
{
	struct env_set e0[] = {MIG_ENV(NULL, "6Gi,2Gi", NULL)};
	struct agent a, b, c;
	struct migdev m0, m1;
	char r[128], gpu0[64] = "", inst0[64] = "";
	CHECK_EQ_INT(agent_start(&a, e0, MIG_NENV), 0);
	CHECK_EQ_U64(agent_num(&a, "count"), 2); /* instance 0, then GPU 1 */
	CHECK_EQ_U64(agent_num(&a, "total 0"), 6 * GiB);
	CHECK_EQ_U64(agent_num(&a, "total 1"), 8 * GiB);
	CHECK_EQ_INT(agent_ask(&a, inst0, sizeof inst0, "uuid 0"), 0);
	CHECK_EQ_INT(agent_ask(&a, gpu0, sizeof gpu0, "uuid1 0"), 0);
	CHECK_EQ_INT(migdev(&a, 0, &m0), 0);
	CHECK_EQ_INT(migdev(&a, 1, &m1), 0);
	CHECK_EQ_INT(agent_ask(&a, r, sizeof r, "migdev 2"), -1);
	CHECK(!strcmp(r, "err 6")); /* NOT_FOUND: room for 7, two made */
	CHECK(m0.mode == 1 && m0.most == 7 && m0.sane && m1.sane && m1.gi == 1);
	CHECK(!strncmp(m0.uuid, "MIG-", 4) && !strcmp(m0.uuid + 4, inst0 + 4)); /* cuDeviceGetUuid_v2's bytes */
	CHECK(strcmp(m0.uuid, m1.uuid) && strcmp(inst0, gpu0));
	CHECK(m0.total == 6 * GiB && m1.total == 2 * GiB);
	agent_stop(&a);

	/* instance 1 alone: 2 GiB, its own UUID; it runs out at its size */
	struct env_set e1[] = {MIG_ENV(NULL, "6Gi,2Gi", m1.uuid)};
	CHECK_EQ_INT(agent_start(&b, e1, MIG_NENV), 0);
	CHECK_EQ_U64(agent_num(&b, "count"), 1);
	CHECK_EQ_INT(agent_ask(&b, r, sizeof r, "uuid 0"), 0);
	CHECK(!strcmp(r + 4, m1.uuid + 4));
	CHECK_EQ_INT(agent_ask(&b, r, sizeof r, "uuid1 0"), 0);
	CHECK(!strcmp(r, gpu0));
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&b, r, sizeof r, "alloc 2147483648"), -1);
	CHECK(!strcmp(r, "err 2"));
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "alloc 1073741824"), 0);
	CHECK_EQ_U64(agent_num(&b, "info"), 1 * GiB - 64 * MiB); /* less its context */
	CHECK_EQ_INT(migdev(&b, 1, &m1), 0);
	CHECK(m1.used == 1 * GiB + 64 * MiB && m1.free_ == 1 * GiB - 64 * MiB && m1.n == 1 &&
	      m1.used0 == 1 * GiB + 64 * MiB);
	CHECK_EQ_INT(migdev(&b, 0, &m0), 0);
	CHECK(m0.used == 0 && m0.n == 0 && m0.free_ == 6 * GiB);
	unsigned long long t, res, fr, us, us1, fr1;
	CHECK_EQ_INT(agent_ask(&b, r, sizeof r, "nvmem"), 0); /* the GPU: all of it, its reserve */
	CHECK_EQ_INT(sscanf(r, "%llu %llu %llu %llu %llu %llu", &t, &res, &fr, &us, &us1, &fr1), 6);
	CHECK(t == 8 * GiB && res == 64 * MiB && us == 1 * GiB + 64 * MiB && fr == t - res - us);
	CHECK_EQ_INT(agent_ask(&b, r, sizeof r, "nvml"), 0); /* the GPU lists the instances' processes */
	CHECK(!strncmp(r, "1 ", 2));
	agent_stop(&b);

	/* "1" is GPU 1; "0" and GPU 0's own UUID stand for its first instance */
	struct env_set e2[] = {MIG_ENV(NULL, "6Gi,2Gi", "1,0")};
	CHECK_EQ_INT(agent_start(&c, e2, MIG_NENV), 0);
	CHECK_EQ_U64(agent_num(&c, "count"), 2);
	CHECK_EQ_U64(agent_num(&c, "total 0"), 8 * GiB);
	CHECK_EQ_U64(agent_num(&c, "total 1"), 6 * GiB);
	agent_stop(&c);
	struct env_set e3[] = {MIG_ENV(NULL, "6Gi,2Gi", gpu0)};
	CHECK_EQ_INT(agent_start(&c, e3, MIG_NENV), 0);
	CHECK_EQ_U64(agent_num(&c, "count"), 1);
	CHECK_EQ_U64(agent_num(&c, "total 0"), 6 * GiB);
	agent_stop(&c);
	/* two equal instances by count; a list past the GPU leaves MIG off */
	struct env_set e4[] = {MIG_ENV(NULL, "2", NULL)};
	CHECK_EQ_INT(agent_start(&c, e4, MIG_NENV), 0);
	CHECK_EQ_U64(agent_num(&c, "count"), 2);
	CHECK_EQ_U64(agent_num(&c, "total 0"), 4 * GiB);
	agent_stop(&c);
	struct env_set e5[] = {MIG_ENV(NULL, "6Gi,4Gi", NULL)};
	CHECK_EQ_INT(agent_start(&c, e5, MIG_NENV), 0); /* says so on stderr */
	CHECK_EQ_U64(agent_num(&c, "count"), 2);
	CHECK_EQ_U64(agent_num(&c, "total 0"), 8 * GiB);
	CHECK_EQ_INT(agent_ask(&c, r, sizeof r, "migdev 0"), -1);
	CHECK(!strcmp(r, "err 2")); /* no MIG: INVALID_ARGUMENT */
	agent_stop(&c);
}

/* On a shared card each instance is a pool of its own: processes on one
 * instance share it and run it out, one on the other instance is not
 * touched; NVML lists each instance's processes on its handle and all of
 * them on the GPU's; a joiner takes the maker's instances; with
 * SIMGPU_MIG_NO_PROC_MEM=1 an instance's per-process figures are
 * NVML_VALUE_NOT_AVAILABLE. */
TEST(mig_shared_card)
{
	REQUIRE_SHM();
	const char *name = card_new();
	struct env_set e0[] = {MIG_ENV(name, "2", NULL)};
	struct agent a, b, c, w;
	struct migdev m0, m1;
	CHECK_EQ_INT(agent_start(&w, e0, MIG_NENV), 0);
	CHECK_EQ_INT(migdev(&w, 1, &m1), 0);
	struct env_set e1[] = {MIG_ENV(name, "7Gi", m1.uuid)}; /* a joiner's own SIMGPU_MIG does not matter */
	CHECK_EQ_INT(agent_start(&a, e0, MIG_NENV), 0);
	CHECK_EQ_INT(agent_start(&b, e1, MIG_NENV), 0);
	CHECK_EQ_INT(agent_start(&c, e0, MIG_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&c, NULL, 0, "init"), 0);
	CHECK_EQ_U64(agent_num(&b, "total 0"), 4 * GiB);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "alloc 3221225472"), 0); /* 3 GiB on instance 0 */
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "alloc 3221225472"), 0); /* and on instance 1 */
	char r[128];
	CHECK_EQ_INT(agent_ask(&c, r, sizeof r, "alloc 1073741824"), -1); /* instance 0 is full */
	CHECK(!strcmp(r, "err 2"));
	CHECK_EQ_U64(agent_num(&c, "info"), 1 * GiB - 128 * MiB);
	CHECK_EQ_U64(agent_num(&b, "info"), 1 * GiB - 64 * MiB);
	CHECK_EQ_INT(migdev(&w, 0, &m0), 0);
	CHECK_EQ_INT(migdev(&w, 1, &m1), 0);
	CHECK(m0.n == 2 && m0.used == 3 * GiB + 128 * MiB && m0.free_ == 1 * GiB - 128 * MiB);
	CHECK(m1.n == 1 && m1.used0 == 3 * GiB + 64 * MiB);
	unsigned long long t, res, fr, us, us1, fr1;
	CHECK_EQ_INT(agent_ask(&w, r, sizeof r, "nvmem"), 0);
	CHECK_EQ_INT(sscanf(r, "%llu %llu %llu %llu %llu %llu", &t, &res, &fr, &us, &us1, &fr1), 6);
	CHECK(t == 8 * GiB && us == 6 * GiB + 192 * MiB);
	CHECK_EQ_INT(agent_ask(&w, r, sizeof r, "nvml"), 0);
	CHECK(!strncmp(r, "3 ", 2));
	struct env_set e2[] = {MIG_ENV(name, "2", NULL)};
	e2[MIG_NENV - 1].value = "1";
	struct agent v;
	CHECK_EQ_INT(agent_start(&v, e2, MIG_NENV), 0);
	CHECK_EQ_INT(migdev(&v, 1, &m1), 0);
	CHECK(m1.n == 1 && m1.used0 == ~0ull && m1.used == 3 * GiB + 64 * MiB);
	agent_stop(&v);
	agent_kill(&a); /* its instance's memory comes back */
	waitpid(a.pid, NULL, 0);
	CHECK_EQ_INT(agent_ask(&c, NULL, 0, "alloc 1073741824"), 0);
	agent_stop(&b);
	agent_stop(&c);
	agent_stop(&w);
	card_gone();
}

TEST(shared_card_nvml_whole_card)
{
	REQUIRE_SHM();
	const char *name = card_new();
	struct env_set ea[] = {CARD_ENV(name, "64Mi")}, eb[] = {CARD_ENV(name, "64Mi")}, ew[] = {CARD_ENV(name, "1Mi")};
	ea[4].value = "512Mi"; /* the maker's reserve is the card's */
	eb[5].value = "100000";
	eb[6].value = "EAGER";
	struct agent a, b, w;
	CHECK_EQ_INT(agent_start(&a, ea, CARD_NENV), 0);
	CHECK_EQ_INT(agent_start(&b, eb, CARD_NENV), 0);
	CHECK_EQ_INT(agent_start(&w, ew, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "alloc 1073741824"), 0);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "alloc 2147483648"), 0);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "modload 8388608"), 0);
	long long pa = agent_num(&a, "pid"), pb = agent_num(&b, "pid");
	char r[256];
	unsigned n = 0, p[2] = {0, 0};
	unsigned long long u[2] = {0, 0};
	CHECK_EQ_INT(agent_ask(&w, r, sizeof(r), "nvml"), 0);
	CHECK_EQ_INT(sscanf(r, "%u %u %llu %u %llu", &n, &p[0], &u[0], &p[1], &u[1]), 5);
	CHECK_EQ_INT(n, 2);
	int ia = p[0] == (unsigned)pa ? 0 : 1;
	CHECK_EQ_U64(p[ia], pa);
	CHECK_EQ_U64(p[!ia], pb + 100000);
	CHECK_EQ_U64(u[ia], 1 * GiB + 64 * MiB);
	CHECK_EQ_U64(u[!ia], 2 * GiB + 64 * MiB + 8 * MiB);
	unsigned n1 = 0, q[2] = {0, 0};
	unsigned long long v[2] = {0, 0};
	CHECK_EQ_INT(agent_ask(&w, r, sizeof(r), "nvml1"), 0); /* the v1 layout says the same */
	CHECK_EQ_INT(sscanf(r, "%u %u %llu %u %llu", &n1, &q[0], &v[0], &q[1], &v[1]), 5);
	CHECK(n1 == 2 && q[0] == p[0] && v[0] == u[0] && q[1] == p[1] && v[1] == u[1]);
	unsigned long long t, res, fr, us, us1, fr1;
	CHECK_EQ_INT(agent_ask(&w, r, sizeof(r), "nvmem"), 0);
	CHECK_EQ_INT(sscanf(r, "%llu %llu %llu %llu %llu %llu", &t, &res, &fr, &us, &us1, &fr1), 6);
	CHECK_EQ_U64(t, 8 * GiB);
	CHECK_EQ_U64(res, 512 * MiB);
	CHECK_EQ_U64(us, u[0] + u[1]);
	CHECK_EQ_U64(fr, t - res - us);
	CHECK_EQ_U64(us1, res + us); /* v1 counts the reserve as used */
	CHECK_EQ_U64(fr1, fr);
	CHECK_EQ_U64(agent_num(&a, "info"), fr); /* CUDA's free is NVML's */
	agent_stop(&a);
	agent_stop(&b);
	agent_stop(&w);
	card_gone();
}

/* A real PID namespace (unshare -p, where this user may): the process sees
 * itself as 1, NVML lists it under the host's PID. */
TEST(shared_card_pid_namespace)
{
	REQUIRE_SHM();
	if (access("/usr/bin/unshare", X_OK) || system("unshare -p -f --kill-child true >/dev/null 2>&1") != 0) {
		SKIP("unshare -p is not allowed here");
	}
	const char *name = card_new();
	struct env_set e[] = {CARD_ENV(name, "64Mi")};
	static const char *const pre[] = {"unshare", "-p", "-f", "--kill-child", NULL};
	struct agent a, w;
	char r[128];
	long ns = 0, host = 0;
	CHECK_EQ_INT(agent_start_under(&a, pre, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_start(&w, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&a, r, sizeof(r), "pid"), 0);
	CHECK_EQ_INT(sscanf(r, "%ld %ld", &ns, &host), 2);
	CHECK_EQ_INT(ns, 1);
	CHECK(host > 1);
	unsigned n = 0, p = 0;
	CHECK_EQ_INT(agent_ask(&w, r, sizeof(r), "nvml"), 0);
	CHECK_EQ_INT(sscanf(r, "%u %u", &n, &p), 2);
	CHECK_EQ_INT(n, 1);
	CHECK_EQ_U64(p, host);
	/* and so it is listed for the process itself, which says 1 */
	n = p = 0;
	CHECK_EQ_INT(agent_ask(&a, r, sizeof(r), "nvml"), 0);
	CHECK_EQ_INT(sscanf(r, "%u %u", &n, &p), 2);
	CHECK(n == 1 && p == host);
	agent_stop(&a);
	agent_stop(&w);
	card_gone();
}

/* Without SIMGPU_SHARED nothing of the footprint is charged unless asked
 * for (SIMGPU_CONTEXT, SIMGPU_FOOTPRINT=1), and a launch succeeds (it runs
 * nothing). */
TEST(footprint_off_by_default)
{
	struct env_set e[] = {CARD_ENV(NULL, NULL)};
	struct agent a;
	CHECK_EQ_INT(agent_start(&a, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "modload 8388608"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "getfn"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "setfp 65536 3"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "launch"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "setlimit 0 8192"), 0);
	for (int i = 1; i < FP_N; i++)
		CHECK_EQ_U64(agent_fp(&a, 0, i), 0);
	CHECK_EQ_U64(agent_num(&a, "info"), 8 * GiB);
	agent_stop(&a);
	/* asked for on a card of one process: NVML shows it as this process's */
	e[3].value = "100Mi";
	e[7].value = "1";
	char r[128];
	unsigned n = 0, pid = 0;
	unsigned long long used = 0;
	CHECK_EQ_INT(agent_start(&a, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "modload 8388608"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "getfn"), 0);
	CHECK_EQ_U64(agent_num(&a, "info"), 8 * GiB - 108 * MiB);
	CHECK_EQ_INT(agent_ask(&a, r, sizeof(r), "nvml"), 0);
	CHECK_EQ_INT(sscanf(r, "%u %u %llu", &n, &pid, &used), 3);
	CHECK(n == 1 && (long long)pid == agent_num(&a, "pid") && used == 108 * MiB);
	agent_stop(&a);
}

/* nvml_watch, a process without a context, sees each process's footprint
 * as it changes and keeps its largest: a 2 GiB peak that was freed again
 * is in its summary, written at SIGTERM. */
TEST(nvml_watch_records_peaks)
{
	REQUIRE_SHM();
	const char *name = card_new();
	struct env_set e[] = {CARD_ENV(name, "64Mi")};
	char watch[4200], outf[256], line[256];
	snprintf(watch, sizeof(watch), "%s", g_exe);
	char *slash = strrchr(watch, '/');
	if (!slash)
		return;
	snprintf(slash, sizeof(watch) - (size_t)(slash - watch), "/../sim/nvml_watch");
	snprintf(outf, sizeof(outf), "/tmp/nvml_watch.%d.out", (int)getpid());
	struct agent a;
	CHECK_EQ_INT(agent_start(&a, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	long long pa = agent_num(&a, "pid");
	int fd[2];
	if (pipe(fd))
		return;
	pid_t w = fork();
	if (w == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		for (int i = 0; i < CARD_NENV; i++)
			if (e[i].value)
				setenv(e[i].name, e[i].value, 1);
			else
				unsetenv(e[i].name);
		execl(watch, "nvml_watch", "-v", "-i", "2", "-t", "60", "-o", outf, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	FILE *from = fdopen(fd[0], "r");
	int ready = 0, seen = 0;
	while (!ready && fgets(line, sizeof(line), from))
		ready = !strcmp(line, "ready\n");
	CHECK(ready);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "alloc 2147483648"), 0);
	unsigned long long want = 2 * GiB + 64 * MiB;
	while (!seen && fgets(line, sizeof(line), from)) {
		long long ms;
		unsigned dev, pid;
		unsigned long long used;
		seen = sscanf(line, "proc %lld %u %u %llu", &ms, &dev, &pid, &used) == 4 && pid == (unsigned)pa &&
		       used == want;
	}
	CHECK(seen);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "freeall"), 0);
	kill(w, SIGTERM);
	char max[64];
	snprintf(max, sizeof(max), "max 0 %lld %llu\n", pa, want);
	int got_max = 0, got_end = 0, st;
	while (fgets(line, sizeof(line), from)) {
		got_max |= !strcmp(line, max);
		got_end |= !strcmp(line, "end signal\n");
	}
	fclose(from);
	waitpid(w, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(got_max && got_end);
	FILE *f = fopen(outf, "r");
	got_max = 0;
	while (f && fgets(line, sizeof(line), f))
		got_max |= !strcmp(line, max);
	CHECK(f && got_max);
	if (f)
		fclose(f);
	unlink(outf);
	agent_stop(&a);
	card_gone();
}

/* Eight processes start on a new card at once: one makes it, the others
 * wait for it to be ready, and all share it (a second card would show in
 * the free memory). A card file that never got ready (its maker died) is
 * waited for boundedly, then the process runs on a card of its own. */
TEST(shared_card_made_once_under_a_race)
{
	REQUIRE_SHM();
	const char *name = card_new();
	struct env_set e[] = {CARD_ENV(name, "64Mi")};
	struct agent a[8];
	for (int i = 0; i < 8; i++)
		CHECK_EQ_INT(agent_start(&a[i], e, CARD_NENV), 0);
	for (int i = 0; i < 8; i++) /* all asked before any answer is read */
		fprintf(a[i].to, "init\nalloc 536870912\n");
	char r[64];
	for (int i = 0; i < 8; i++) {
		CHECK(fgets(r, sizeof(r), a[i].from) && !strcmp(r, "ok\n"));
		CHECK(fgets(r, sizeof(r), a[i].from) && !strcmp(r, "ok\n"));
	}
	for (int i = 0; i < 8; i++)
		CHECK_EQ_U64(agent_num(&a[i], "info"), 8 * GiB - 8 * (64 + 512) * MiB);
	for (int i = 0; i < 8; i++)
		agent_stop(&a[i]);
	card_gone();

	name = card_new();
	char path[128];
	snprintf(path, sizeof(path), "/simgpu-cuda-%s", name);
	int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600); /* a maker that died at once */
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	struct env_set e2[] = {CARD_ENV(name, "64Mi")};
	struct agent b;
	CHECK_EQ_INT(agent_start(&b, e2, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "init"), 0);
	CHECK_EQ_U64(agent_num(&b, "info"), 8 * GiB - 64 * MiB);
	agent_stop(&b);
	card_gone();
}

/* MPS v3 memory partitioning: a cgroup's hard limit (SIMGPU_DMEM_MAX) is
 * the driver's own, over all the device memory of the processes in the
 * cgroup and below it (contexts and modules included); NVML's
 * nvmlDeviceGetMemoryLimits_v1 answers its limits and use by sysfs path. */
#define DMEM_ENV(name, cg, max, min)                                                                               \
	{                                                                                                          \
		CARD_ENV(name, "64Mi"), {"SIMGPU_CGROUP", cg}, {"SIMGPU_DMEM_MAX", max}, {"SIMGPU_DMEM_MIN", min}, \
		{                                                                                                  \
			"SIMGPU_NVML_NO_MEMORY_LIMITS", NULL                                                       \
		}                                                                                                  \
	}
#define DMEM_NENV (CARD_NENV + 4)
TEST(shared_card_dmem_limit)
{
	REQUIRE_SHM();
	const char *name = card_new();
	struct env_set ea[] = DMEM_ENV(name, "/pods/a", "1Gi", "512Mi"), eb[] = DMEM_ENV(name, "/pods/a/", NULL, NULL),
	               ec[] = DMEM_ENV(name, "/pods/c", NULL, NULL), ed[] = DMEM_ENV(name, "/pods/a/x", NULL, NULL),
	               eo[] = DMEM_ENV(NULL, "/pods/a", "1Gi", NULL);
	struct agent a, b, c, d, o;
	char r[128];
	eb[6].value = "EAGER"; /* CUDA_MODULE_LOADING: a module takes its memory at load */
	unsigned long long soft = 1, hard = 0, used = 0;
	CHECK_EQ_INT(agent_start(&a, ea, DMEM_NENV), 0);
	CHECK_EQ_INT(agent_start(&b, eb, DMEM_NENV), 0);
	CHECK_EQ_INT(agent_start(&c, ec, DMEM_NENV), 0);
	CHECK_EQ_INT(agent_start(&d, ed, DMEM_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "alloc 536870912"), 0); /* 512 Mi + 64 Mi context */
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "init"), 0);            /* the same cgroup: 640 Mi */
	CHECK_EQ_INT(agent_ask(&b, r, sizeof(r), "alloc 536870912"), -1);
	CHECK(!strcmp(r, "err 2"));
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "alloc 268435456"), 0);         /* 896 Mi */
	CHECK_EQ_INT(agent_ask(&b, r, sizeof(r), "modload 268435456"), -1); /* modules count too */
	CHECK(!strcmp(r, "err 2"));
	CHECK_EQ_U64(agent_fp(&b, 0, 2), 0);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "modload 67108864"), 0);
	CHECK_EQ_U64(agent_fp(&b, 0, 2), 64 * MiB);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "unload"), 0);
	/* another cgroup is not limited; the card has room */
	CHECK_EQ_INT(agent_ask(&c, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&c, NULL, 0, "alloc 2147483648"), 0);
	/* a cgroup below /pods/a is held to its limit too */
	CHECK_EQ_INT(agent_ask(&d, NULL, 0, "init"), 0); /* 960 Mi */
	CHECK_EQ_INT(agent_ask(&d, r, sizeof(r), "alloc 134217728"), -1);
	CHECK(!strcmp(r, "err 2"));
	CHECK_EQ_INT(agent_ask(&c, r, sizeof(r), "dmem /sys/fs/cgroup/pods/a"), 0);
	CHECK_EQ_INT(sscanf(r, "%llu %llu %llu", &soft, &hard, &used), 3);
	CHECK_EQ_U64(soft, 512 * MiB);
	CHECK_EQ_U64(hard, 1 * GiB);
	CHECK_EQ_U64(used, 960 * MiB);
	/* no limit of its own: soft 0, hard the maximum; its use is its own */
	CHECK_EQ_INT(agent_ask(&a, r, sizeof(r), "dmem /sys/fs/cgroup/pods/c"), 0);
	CHECK_EQ_INT(sscanf(r, "%llu %llu %llu", &soft, &hard, &used), 3);
	CHECK_EQ_U64(soft, 0);
	CHECK_EQ_U64(hard, ~0ull);
	CHECK_EQ_U64(used, 2 * GiB + 64 * MiB);
	/* a parent counts those below it */
	CHECK_EQ_INT(agent_ask(&a, r, sizeof(r), "dmem /sys/fs/cgroup/pods"), 0);
	CHECK_EQ_INT(sscanf(r, "%llu %llu %llu", &soft, &hard, &used), 3);
	CHECK_EQ_U64(used, 3 * GiB);
	CHECK_EQ_INT(agent_ask(&a, r, sizeof(r), "dmem /sys/fs/cgroup/pods/none"), -1);
	CHECK(!strcmp(r, "err 6"));
	/* memory given back is room again */
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "freeall"), 0);
	CHECK_EQ_INT(agent_ask(&d, NULL, 0, "alloc 134217728"), 0);
	agent_kill(&b); /* a death gives the cgroup its memory back */
	waitpid(b.pid, NULL, 0);
	CHECK_EQ_INT(agent_ask(&a, r, sizeof(r), "dmem /sys/fs/cgroup/pods/a"), 0);
	CHECK_EQ_INT(sscanf(r, "%llu %llu %llu", &soft, &hard, &used), 3);
	CHECK_EQ_U64(used, 64 * MiB + 64 * MiB + 128 * MiB);
	/* an old NVML's stub; a card of its own has no partitioning */
	eo[CARD_NENV + 3].value = "1";
	CHECK_EQ_INT(agent_start(&o, eo, DMEM_NENV), 0);
	CHECK_EQ_INT(agent_ask(&o, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&o, r, sizeof(r), "dmem /sys/fs/cgroup/pods/a"), -1);
	CHECK(!strcmp(r, "err 13"));
	agent_stop(&o);
	eo[CARD_NENV + 3].value = NULL;
	CHECK_EQ_INT(agent_start(&o, eo, DMEM_NENV), 0);
	CHECK_EQ_INT(agent_ask(&o, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&o, NULL, 0, "alloc 2147483648"), 0); /* its own card: no cgroup limit */
	CHECK_EQ_INT(agent_ask(&o, r, sizeof(r), "dmem /sys/fs/cgroup/pods/a"), -1);
	CHECK(!strcmp(r, "err 3"));
	agent_stop(&o);
	agent_stop(&a);
	agent_stop(&c);
	agent_stop(&d);
	card_gone();
}

/* Threads of two processes allocate and free on one card at once: every
 * call succeeds, and the card is back to the two contexts afterwards. */
TEST(shared_card_concurrent)
{
	REQUIRE_SHM();
	const char *name = card_new();
	struct env_set e[] = {CARD_ENV(name, "64Mi")};
	struct agent a, b;
	char r[64];
	CHECK_EQ_INT(agent_start(&a, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_start(&b, e, CARD_NENV), 0);
	CHECK_EQ_INT(agent_ask(&a, NULL, 0, "init"), 0);
	CHECK_EQ_INT(agent_ask(&b, NULL, 0, "init"), 0);
	fprintf(a.to, "stress 300\n");
	fprintf(b.to, "stress 300\n");
	CHECK(fgets(r, sizeof(r), a.from) && !strcmp(r, "ok\n"));
	CHECK(fgets(r, sizeof(r), b.from) && !strcmp(r, "ok\n"));
	CHECK_EQ_U64(agent_num(&a, "info"), 8 * GiB - 128 * MiB);
	CHECK_EQ_U64(agent_fp(&a, 0, 0), 0);
	agent_stop(&a);
	agent_stop(&b);
	card_gone();
}

/* nvml_watch's exit status for argv and env; its stderr to /dev/null */
static int watch_status(const char *devices, const char *a1, const char *a2)
{
	char watch[4200];
	snprintf(watch, sizeof(watch), "%s", g_exe);
	char *slash = strrchr(watch, '/');
	if (!slash)
		return -1;
	snprintf(slash, sizeof(watch) - (size_t)(slash - watch), "/../sim/nvml_watch");
	pid_t w = fork();
	if (w == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("SIMGPU_DEVICES", devices, 1);
		unsetenv("SIMGPU_SHARED");
		execl(watch, "nvml_watch", a1, a2, (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(w, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Bad options: exit 2 (each named on stderr); NVML that will not start:
 * exit 1; a bounded run: 0. */
TEST(nvml_watch_bad_input)
{
	if (!g_exe[0] && readlink("/proc/self/exe", g_exe, sizeof(g_exe) - 1) < 0)
		return;
	CHECK_EQ_INT(watch_status("1", "-i", "0"), 2);
	CHECK_EQ_INT(watch_status("1", "-t", "soon"), 2);
	CHECK_EQ_INT(watch_status("1", "-n", "-3"), 2);
	CHECK_EQ_INT(watch_status("1", "-d", "5"), 2);
	CHECK_EQ_INT(watch_status("1", "-q", NULL), 2);
	CHECK_EQ_INT(watch_status("1", "stray", NULL), 2);
	CHECK_EQ_INT(watch_status("0", "-n", "1"), 1);
	CHECK_EQ_INT(watch_status("1", "-n", "2"), 0);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--probe"))
		return probe_main();
	if (argc > 1 && !strcmp(argv[1], "--probe-uuid"))
		return probe_uuid_main();
	if (argc > 1 && !strcmp(argv[1], "--agent"))
		return agent_main();
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
	RUN(md2_vectors);
	RUN(export_tables);
	RUN(integrity_check);
	RUN(attributes);
	RUN(primary_reset);
	RUN(last_primary_release_resets);
	RUN(created_context);
	RUN(vmm_refcounts);
	RUN(graph_memory);
	RUN(copies_validate);
	RUN(library_after_reset);
	RUN(graph_reinstantiate);
	RUN(cublaslt_driver_names);
	RUN(peer_access);
	RUN(stream_memops_and_prefetch);
	RUN(graph_nodes);
	RUN(shared_card_two_processes);
	RUN(shared_card_kill9_gives_memory_back);
	RUN(shared_card_lock_holder_killed);
	RUN(shared_card_made_once_under_a_race);
	RUN(shared_card_concurrent);
	RUN(shared_card_context_cost);
	RUN(shared_card_module_loading);
	RUN(shared_card_local_memory_heap_fifo);
	RUN(shared_card_nvml_whole_card);
	RUN(shared_card_pid_namespace);
	RUN(mig_instances);
	RUN(mig_shared_card);
	RUN(shared_card_dmem_limit);
	RUN(footprint_off_by_default);
	RUN(nvml_watch_records_peaks);
	RUN(nvml_watch_bad_input);
	return harness_done();
}
