/* gpuguard simulated GPU: a fake libcuda.so.1 over simcore. It exports the
 * real entry point names (with the _v2 / _ptsz / legacy split), answers
 * cuGetProcAddress by the driver's per-function version rules and returns the
 * driver's error codes. Nothing here runs a kernel; streams are synchronous. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include "gpuguard/cuda_abi.h"
#include "simcore.h"

#include <limits.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define SIM_EXPORT __attribute__((visibility("default")))

/* Every entry point has a hidden local_<name> alias (glibc's hidden_def
 * trick). Internal calls and the cuGetProcAddress table use it, so an
 * LD_PRELOAD interposer never sees the driver calling itself and gets the
 * driver's own pointers back from cuGetProcAddress, as with the real driver. */
#define GGT(t) gg_##t
#define GG_CU_FN(name, params) extern __typeof(name) local_##name __attribute__((visibility("hidden")));
#define GG_CU_FN_PTSZ(name, params) GG_CU_FN(name, params)
#define GG_CU_FN_LEGACY(name, params) GG_CU_FN(name, params)
#include "gpuguard/cuda_abi_funcs.h"
#undef GG_CU_FN

struct CUctx_st {
	int dev;
};

static struct CUctx_st g_ctx[SIM_MAX_DEVICES];
static atomic_int g_ctx_ref[SIM_MAX_DEVICES];
static atomic_int g_inited;
static pthread_once_t g_ctx_once = PTHREAD_ONCE_INIT;

/* per-thread context stack; cuCtxSetCurrent replaces its top */
#define CTX_STACK 64
static __thread gg_CUcontext tls_ctx[CTX_STACK];
static __thread int tls_depth;

static gg_CUresult to_cu(int rc)
{
	switch (rc) {
	case SIM_OK:
		return GG_CUDA_SUCCESS;
	case SIM_ENOMEM:
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	case SIM_EDEVICE:
		return GG_CUDA_ERROR_INVALID_DEVICE;
	case SIM_EHANDLE:
		return GG_CUDA_ERROR_INVALID_HANDLE;
	case SIM_ENOTFOUND:
		return GG_CUDA_ERROR_NOT_FOUND;
	case SIM_ENODEV:
		return GG_CUDA_ERROR_NO_DEVICE;
	default:
		return GG_CUDA_ERROR_INVALID_VALUE;
	}
}

#define REQUIRE_INIT()                                        \
	do {                                                  \
		if (!atomic_load(&g_inited))                  \
			return GG_CUDA_ERROR_NOT_INITIALIZED; \
	} while (0)

/* An output pointer and a device ordinal, checked in the driver's order. */
#define REQUIRE_OUT_AND_DEVICE(out, dev)                     \
	do {                                                 \
		REQUIRE_INIT();                              \
		if (!(out))                                  \
			return GG_CUDA_ERROR_INVALID_VALUE;  \
		if (!sim_device_valid(dev))                  \
			return GG_CUDA_ERROR_INVALID_DEVICE; \
	} while (0)

/* init check, then the current context's device */
#define REQUIRE_CTX(devvar)                                   \
	int devvar;                                           \
	do {                                                  \
		REQUIRE_INIT();                               \
		if (!tls_depth || !tls_ctx[tls_depth - 1])    \
			return GG_CUDA_ERROR_INVALID_CONTEXT; \
		devvar = tls_ctx[tls_depth - 1]->dev;         \
	} while (0)

static int ctx_valid(gg_CUcontext c)
{
	uintptr_t p = (uintptr_t)c, lo = (uintptr_t)&g_ctx[0];
	if (p < lo || (p - lo) % sizeof(g_ctx[0]))
		return 0;
	return (p - lo) / sizeof(g_ctx[0]) < (uintptr_t)sim_device_count();
}

static void ctx_init(void)
{
	for (int i = 0; i < SIM_MAX_DEVICES; i++)
		g_ctx[i].dev = i;
}

/* -------------------------------------------------- init, devices, contexts */

gg_CUresult cuInit(unsigned int Flags)
{
	if (Flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	pthread_once(&g_ctx_once, ctx_init);
	if (sim_device_count() == 0)
		return GG_CUDA_ERROR_NO_DEVICE;
	atomic_store(&g_inited, 1);
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*driverVersion = 13000;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceGet(gg_CUdevice *device, int ordinal)
{
	REQUIRE_OUT_AND_DEVICE(device, ordinal);
	*device = ordinal;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceGetCount(int *count)
{
	REQUIRE_INIT();
	if (!count)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*count = sim_device_count();
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceGetName(char *name, int len, gg_CUdevice dev)
{
	static const char n[] = "gpuguard simulated GPU";
	REQUIRE_INIT();
	if (!name || len <= 0)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	size_t k = (size_t)len - 1 < sizeof(n) - 1 ? (size_t)len - 1 : sizeof(n) - 1;
	memcpy(name, n, k);
	name[k] = 0;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceTotalMem_v2(size_t *bytes, gg_CUdevice dev)
{
	REQUIRE_OUT_AND_DEVICE(bytes, dev);
	*bytes = sim_device_total(dev);
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceGetUuid_v2(gg_CUuuid *uuid, gg_CUdevice dev)
{
	REQUIRE_OUT_AND_DEVICE(uuid, dev);
	sim_device_uuid(dev, (uint8_t *)uuid->bytes);
	return GG_CUDA_SUCCESS;
}

/* No MIG here, so the legacy query answers the same as _v2. */
gg_CUresult cuDeviceGetUuid(gg_CUuuid *uuid, gg_CUdevice dev)
{
	return local_cuDeviceGetUuid_v2(uuid, dev);
}

gg_CUresult cuDevicePrimaryCtxRetain(gg_CUcontext *pctx, gg_CUdevice dev)
{
	REQUIRE_OUT_AND_DEVICE(pctx, dev);
	atomic_fetch_add(&g_ctx_ref[dev], 1);
	*pctx = &g_ctx[dev];
	return GG_CUDA_SUCCESS;
}

/* simplified: the primary context (and its memory) survives its last release */
gg_CUresult cuDevicePrimaryCtxRelease_v2(gg_CUdevice dev)
{
	REQUIRE_INIT();
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	int r = atomic_load(&g_ctx_ref[dev]);
	do {
		if (r <= 0)
			return GG_CUDA_ERROR_INVALID_CONTEXT;
	} while (!atomic_compare_exchange_weak(&g_ctx_ref[dev], &r, r - 1));
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxSetCurrent(gg_CUcontext ctx)
{
	REQUIRE_INIT();
	if (ctx && !ctx_valid(ctx))
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	if (tls_depth)
		tls_ctx[tls_depth - 1] = ctx;
	else if (ctx)
		tls_ctx[tls_depth++] = ctx;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxGetCurrent(gg_CUcontext *pctx)
{
	REQUIRE_INIT();
	if (!pctx)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*pctx = tls_depth ? tls_ctx[tls_depth - 1] : NULL;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxGetDevice(gg_CUdevice *device)
{
	REQUIRE_INIT();
	if (!device)
		return GG_CUDA_ERROR_INVALID_VALUE;
	REQUIRE_CTX(dev);
	*device = dev;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxPushCurrent_v2(gg_CUcontext ctx)
{
	REQUIRE_INIT();
	if (!ctx || !ctx_valid(ctx))
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	if (tls_depth == CTX_STACK)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	tls_ctx[tls_depth++] = ctx;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxPopCurrent_v2(gg_CUcontext *pctx)
{
	REQUIRE_INIT();
	if (!tls_depth)
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	gg_CUcontext c = tls_ctx[--tls_depth];
	if (pctx)
		*pctx = c;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxSynchronize(void)
{
	REQUIRE_CTX(dev);
	sim_device_sync(dev);
	return GG_CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ streams */

#define STREAM_LEGACY ((gg_CUstream)0x1)
#define STREAM_PER_THREAD ((gg_CUstream)0x2)

/* the device a stream belongs to; NULL / legacy / per-thread: the context's */
static gg_CUresult stream_device(gg_CUstream s, int ctxdev, int *dev)
{
	if (!s || s == STREAM_LEGACY || s == STREAM_PER_THREAD) {
		*dev = ctxdev;
		return GG_CUDA_SUCCESS;
	}
	*dev = sim_handle_device((uint64_t)(uintptr_t)s);
	return *dev < 0 ? GG_CUDA_ERROR_INVALID_HANDLE : GG_CUDA_SUCCESS;
}

gg_CUresult cuStreamCreate(gg_CUstream *phStream, unsigned int Flags)
{
	REQUIRE_CTX(dev);
	if (!phStream || Flags > 1) /* CU_STREAM_DEFAULT, CU_STREAM_NON_BLOCKING */
		return GG_CUDA_ERROR_INVALID_VALUE;
	uint64_t h = sim_handle_new(dev);
	if (!h)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	*phStream = (gg_CUstream)(uintptr_t)h;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuStreamDestroy_v2(gg_CUstream hStream)
{
	REQUIRE_CTX(dev);
	(void)dev;
	return sim_handle_delete((uint64_t)(uintptr_t)hStream) ? GG_CUDA_ERROR_INVALID_HANDLE : GG_CUDA_SUCCESS;
}

/* synchronisation is where a pool gives back reserve above its threshold */
gg_CUresult cuStreamSynchronize(gg_CUstream hStream)
{
	REQUIRE_CTX(ctxdev);
	int dev;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (r)
		return r;
	sim_device_sync(dev);
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuStreamSynchronize_ptsz(gg_CUstream hStream)
{
	return local_cuStreamSynchronize(hStream);
}

/* ------------------------------------------------------------------- errors */

static const struct {
	int code;
	const char *name, *str;
} g_errs[] = {
    {GG_CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {GG_CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {GG_CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {GG_CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {GG_CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {GG_CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {GG_CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {GG_CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {GG_CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {GG_CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {GG_CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

static gg_CUresult err_lookup(gg_CUresult error, const char **pStr, int name)
{
	if (!pStr)
		return GG_CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(g_errs) / sizeof(g_errs[0]); i++)
		if (g_errs[i].code == error) {
			*pStr = name ? g_errs[i].name : g_errs[i].str;
			return GG_CUDA_SUCCESS;
		}
	*pStr = NULL;
	return GG_CUDA_ERROR_INVALID_VALUE;
}

gg_CUresult cuGetErrorString(gg_CUresult error, const char **pStr)
{
	return err_lookup(error, pStr, 0);
}

gg_CUresult cuGetErrorName(gg_CUresult error, const char **pStr)
{
	return err_lookup(error, pStr, 1);
}

/* ------------------------------------------------------------ device memory */

gg_CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
	REQUIRE_CTX(dev);
	if (!free || !total)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*free = sim_device_free(dev);
	*total = sim_device_total(dev);
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuMemAlloc_v2(gg_CUdeviceptr *dptr, size_t bytesize)
{
	REQUIRE_CTX(dev);
	if (!dptr || !bytesize)
		return GG_CUDA_ERROR_INVALID_VALUE;
	uint64_t a;
	int rc = sim_alloc(dev, bytesize, SIM_KIND_LINEAR, 0, &a);
	if (rc == SIM_OK)
		*dptr = a;
	return to_cu(rc);
}

gg_CUresult cuMemAllocPitch_v2(gg_CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                               unsigned int ElementSizeBytes)
{
	REQUIRE_CTX(dev);
	if (!dptr || !pPitch || !WidthInBytes || !Height ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return GG_CUDA_ERROR_INVALID_VALUE;
	size_t pitch = (WidthInBytes + 511) & ~(size_t)511, bytes;
	if (pitch < WidthInBytes || __builtin_mul_overflow(pitch, Height, &bytes))
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t a;
	int rc = sim_alloc(dev, bytes, SIM_KIND_LINEAR, 0, &a);
	if (rc == SIM_OK) {
		*dptr = a;
		*pPitch = pitch;
	}
	return to_cu(rc);
}

gg_CUresult cuMemFree_v2(gg_CUdeviceptr dptr)
{
	REQUIRE_INIT();
	if (!dptr)
		return GG_CUDA_SUCCESS;
	REQUIRE_CTX(dev);
	(void)dev;
	return sim_free(dptr, SIM_KMASK_FREEABLE) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemGetAddressRange_v2(gg_CUdeviceptr *pbase, size_t *psize, gg_CUdeviceptr dptr)
{
	REQUIRE_CTX(dev);
	(void)dev;
	uint64_t b, s;
	int rc = sim_addr_range(dptr, &b, &s);
	if (rc)
		return GG_CUDA_ERROR_NOT_FOUND;
	if (pbase)
		*pbase = b;
	if (psize)
		*psize = s;
	return GG_CUDA_SUCCESS;
}

/* simplified: managed memory is charged as device memory on the current device */
gg_CUresult cuMemAllocManaged(gg_CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	REQUIRE_CTX(dev);
	if (!dptr || !bytesize || (flags != GG_CU_MEM_ATTACH_GLOBAL && flags != GG_CU_MEM_ATTACH_HOST))
		return GG_CUDA_ERROR_INVALID_VALUE;
	/* SIMGPU_REENTER=1: build managed memory on the public cuMemAlloc_v2,
	 * looked up by name, the way some runtimes call their own entry points.
	 * Under gpuguard that inner call lands in its hook while the outer hook
	 * runs, which is what tests/preload/t_lifecycle_lcuda.c checks. */
	const char *re = getenv("SIMGPU_REENTER");
	if (re && re[0] == '1') {
		gg_pfn_cuMemAlloc_v2 pub = (gg_pfn_cuMemAlloc_v2)dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
		return pub ? pub(dptr, bytesize) : GG_CUDA_ERROR_NOT_INITIALIZED;
	}
	uint64_t a;
	int rc = sim_alloc(dev, bytesize, SIM_KIND_MANAGED, 0, &a);
	if (rc == SIM_OK)
		*dptr = a;
	return to_cu(rc);
}

/* --------------------------------------------------------- pinned host memory */

gg_CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!pp || !bytesize)
		return GG_CUDA_ERROR_INVALID_VALUE;
	void *p = sim_host_alloc(bytesize);
	if (!p)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	*pp = p;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	if (Flags & ~(unsigned)(GG_CU_MEMHOSTALLOC_PORTABLE | GG_CU_MEMHOSTALLOC_DEVICEMAP |
	                        GG_CU_MEMHOSTALLOC_WRITECOMBINED)) {
		REQUIRE_INIT();
		return GG_CUDA_ERROR_INVALID_VALUE;
	}
	return local_cuMemAllocHost_v2(pp, bytesize);
}

gg_CUresult cuMemFreeHost(void *p)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!p)
		return GG_CUDA_SUCCESS;
	return sim_host_free(p) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

/* ------------------------------------------------------------------- arrays */

static size_t fmt_bytes(gg_CUarray_format f)
{
	switch (f) {
	case GG_CU_AD_FORMAT_UNSIGNED_INT8:
	case GG_CU_AD_FORMAT_SIGNED_INT8:
		return 1;
	case GG_CU_AD_FORMAT_UNSIGNED_INT16:
	case GG_CU_AD_FORMAT_SIGNED_INT16:
	case GG_CU_AD_FORMAT_HALF:
		return 2;
	case GG_CU_AD_FORMAT_UNSIGNED_INT32:
	case GG_CU_AD_FORMAT_SIGNED_INT32:
	case GG_CU_AD_FORMAT_FLOAT:
		return 4;
	default:
		return 0;
	}
}

/* bytes of one level; height/depth 0 mean a 1D/2D array. 0 on bad input */
static uint64_t array_bytes(size_t w, size_t h, size_t d, gg_CUarray_format f, unsigned ch)
{
	uint64_t e = fmt_bytes(f), r;
	if (!w || !e || (ch != 1 && ch != 2 && ch != 4))
		return 0;
	if (__builtin_mul_overflow((uint64_t)w, h ? h : 1, &r) || __builtin_mul_overflow(r, d ? d : 1, &r) ||
	    __builtin_mul_overflow(r, e * ch, &r))
		return UINT64_MAX;
	return r;
}

static gg_CUresult array_alloc(uint64_t bytes, int kind, uint64_t *h)
{
	REQUIRE_CTX(dev);
	if (!bytes)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (bytes == UINT64_MAX)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	/* the handle is the array's fake device address: opaque, and checkable */
	return to_cu(sim_alloc(dev, bytes, kind, 1, h));
}

gg_CUresult cuArrayCreate_v2(gg_CUarray *pHandle, const gg_CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
	REQUIRE_INIT();
	if (!pHandle || !pAllocateArray)
		return GG_CUDA_ERROR_INVALID_VALUE;
	const gg_CUDA_ARRAY_DESCRIPTOR *a = pAllocateArray;
	uint64_t h;
	gg_CUresult r = array_alloc(array_bytes(a->Width, a->Height, 0, a->Format, a->NumChannels), SIM_KIND_ARRAY, &h);
	if (!r)
		*pHandle = (gg_CUarray)(uintptr_t)h;
	return r;
}

gg_CUresult cuArray3DCreate_v2(gg_CUarray *pHandle, const gg_CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
	REQUIRE_INIT();
	if (!pHandle || !pAllocateArray)
		return GG_CUDA_ERROR_INVALID_VALUE;
	const gg_CUDA_ARRAY3D_DESCRIPTOR *a = pAllocateArray;
	uint64_t h;
	gg_CUresult r =
	    array_alloc(array_bytes(a->Width, a->Height, a->Depth, a->Format, a->NumChannels), SIM_KIND_ARRAY, &h);
	if (!r)
		*pHandle = (gg_CUarray)(uintptr_t)h;
	return r;
}

gg_CUresult cuArrayDestroy(gg_CUarray hArray)
{
	REQUIRE_INIT();
	return sim_free((uint64_t)(uintptr_t)hArray, SIM_KMASK(SIM_KIND_ARRAY)) ? GG_CUDA_ERROR_INVALID_HANDLE
	                                                                        : GG_CUDA_SUCCESS;
}

static size_t level_dim(size_t x, unsigned l)
{
	if (!x)
		return 0;
	x = l >= sizeof(size_t) * 8 ? 0 : x >> l;
	return x ? x : 1;
}

gg_CUresult cuMipmappedArrayCreate(gg_CUmipmappedArray *pHandle, const gg_CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                   unsigned int numMipmapLevels)
{
	REQUIRE_INIT();
	if (!pHandle || !pMipmappedArrayDesc || !numMipmapLevels)
		return GG_CUDA_ERROR_INVALID_VALUE;
	const gg_CUDA_ARRAY3D_DESCRIPTOR *a = pMipmappedArrayDesc;
	uint64_t total = 0;
	for (unsigned l = 0; l < numMipmapLevels; l++) {
		uint64_t b = array_bytes(level_dim(a->Width, l), level_dim(a->Height, l), level_dim(a->Depth, l),
		                         a->Format, a->NumChannels);
		if (!b)
			return GG_CUDA_ERROR_INVALID_VALUE;
		total = (b == UINT64_MAX || total + b < total) ? UINT64_MAX : total + b;
	}
	uint64_t h;
	gg_CUresult r = array_alloc(total, SIM_KIND_MIPMAP, &h);
	if (!r)
		*pHandle = (gg_CUmipmappedArray)(uintptr_t)h;
	return r;
}

gg_CUresult cuMipmappedArrayDestroy(gg_CUmipmappedArray hMipmappedArray)
{
	REQUIRE_INIT();
	return sim_free((uint64_t)(uintptr_t)hMipmappedArray, SIM_KMASK(SIM_KIND_MIPMAP)) ? GG_CUDA_ERROR_INVALID_HANDLE
	                                                                                  : GG_CUDA_SUCCESS;
}

/* ---------------------------------------------------- virtual memory (VMM) */

static gg_CUresult check_location(const gg_CUmemLocation *loc, int *dev)
{
	if (loc->type != GG_CU_MEM_LOCATION_TYPE_DEVICE)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!sim_device_valid(loc->id))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	*dev = loc->id;
	return GG_CUDA_SUCCESS;
}

static gg_CUresult check_prop(const gg_CUmemAllocationProp *prop, int *dev)
{
	if (!prop || prop->type != GG_CU_MEM_ALLOCATION_TYPE_PINNED)
		return GG_CUDA_ERROR_INVALID_VALUE;
	return check_location(&prop->location, dev);
}

gg_CUresult cuMemGetAllocationGranularity(size_t *granularity, const gg_CUmemAllocationProp *prop,
                                          gg_CUmemAllocationGranularity_flags option)
{
	REQUIRE_INIT();
	int dev;
	if (!granularity ||
	    (option != GG_CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != GG_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = check_prop(prop, &dev);
	if (r)
		return r;
	*granularity = SIM_PAGE;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuMemCreate(gg_CUmemGenericAllocationHandle *handle, size_t size, const gg_CUmemAllocationProp *prop,
                        unsigned long long flags)
{
	REQUIRE_INIT();
	int dev;
	if (!handle || flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = check_prop(prop, &dev);
	if (r)
		return r;
	if (!size || size % SIM_PAGE)
		return GG_CUDA_ERROR_INVALID_VALUE;
	uint64_t h;
	int rc = sim_vmm_create(dev, size, prop, sizeof(*prop), &h);
	if (rc == SIM_OK)
		*handle = h;
	return to_cu(rc);
}

/* unknown VMM handles are CUDA_ERROR_INVALID_VALUE, as the driver documents */
gg_CUresult cuMemRelease(gg_CUmemGenericAllocationHandle handle)
{
	REQUIRE_INIT();
	return sim_vmm_release(handle) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemGetAllocationPropertiesFromHandle(gg_CUmemAllocationProp *prop, gg_CUmemGenericAllocationHandle handle)
{
	REQUIRE_INIT();
	if (!prop)
		return GG_CUDA_ERROR_INVALID_VALUE;
	return sim_vmm_prop(handle, prop, sizeof(*prop)) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

/* simplified: the fixed-address hint `addr` is ignored */
gg_CUresult cuMemAddressReserve(gg_CUdeviceptr *ptr, size_t size, size_t alignment, gg_CUdeviceptr addr,
                                unsigned long long flags)
{
	REQUIRE_INIT();
	(void)addr;
	if (!ptr || flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	uint64_t a;
	int rc = sim_va_reserve(size, alignment, &a);
	if (rc == SIM_OK)
		*ptr = a;
	return to_cu(rc);
}

gg_CUresult cuMemAddressFree(gg_CUdeviceptr ptr, size_t size)
{
	REQUIRE_INIT();
	return sim_va_free(ptr, size) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemMap(gg_CUdeviceptr ptr, size_t size, size_t offset, gg_CUmemGenericAllocationHandle handle,
                     unsigned long long flags)
{
	REQUIRE_INIT();
	if (flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	int rc = sim_va_map(ptr, size, offset, handle);
	return rc == SIM_ENOMEM ? GG_CUDA_ERROR_OUT_OF_MEMORY : rc ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemUnmap(gg_CUdeviceptr ptr, size_t size)
{
	REQUIRE_INIT();
	return sim_va_unmap(ptr, size) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemSetAccess(gg_CUdeviceptr ptr, size_t size, const gg_CUmemAccessDesc *desc, size_t count)
{
	REQUIRE_INIT();
	if (!desc || !count)
		return GG_CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		int dev;
		gg_CUresult r = check_location(&desc[i].location, &dev);
		if (r)
			return r;
		if (desc[i].flags != GG_CU_MEM_ACCESS_FLAGS_PROT_NONE &&
		    desc[i].flags != GG_CU_MEM_ACCESS_FLAGS_PROT_READ &&
		    desc[i].flags != GG_CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			return GG_CUDA_ERROR_INVALID_VALUE;
	}
	return sim_va_mapped(ptr, size) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

/* ------------------------------------------------ stream-ordered allocation */

static gg_CUmemoryPool pool_ptr(uint64_t h)
{
	return (gg_CUmemoryPool)(uintptr_t)h;
}

static uint64_t pool_h(gg_CUmemoryPool p)
{
	return (uint64_t)(uintptr_t)p;
}

gg_CUresult cuMemAllocFromPoolAsync(gg_CUdeviceptr *dptr, size_t bytesize, gg_CUmemoryPool pool, gg_CUstream hStream)
{
	REQUIRE_CTX(ctxdev);
	int sdev;
	if (!dptr || !bytesize)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = stream_device(hStream, ctxdev, &sdev);
	if (r)
		return r;
	uint64_t a;
	int rc = sim_pool_alloc(pool_h(pool), bytesize, &a);
	if (rc == SIM_EHANDLE)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (rc == SIM_OK)
		*dptr = a;
	return to_cu(rc);
}

gg_CUresult cuMemAllocAsync(gg_CUdeviceptr *dptr, size_t bytesize, gg_CUstream hStream)
{
	REQUIRE_CTX(ctxdev);
	int dev;
	if (!dptr || !bytesize)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (r)
		return r;
	return local_cuMemAllocFromPoolAsync(dptr, bytesize, pool_ptr(sim_pool_current(dev)), hStream);
}

gg_CUresult cuMemFreeAsync(gg_CUdeviceptr dptr, gg_CUstream hStream)
{
	REQUIRE_CTX(ctxdev);
	int dev;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (r)
		return r;
	if (!dptr)
		return GG_CUDA_SUCCESS;
	return sim_free(dptr, SIM_KMASK_FREEABLE) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemAllocAsync_ptsz(gg_CUdeviceptr *dptr, size_t bytesize, gg_CUstream hStream)
{
	return local_cuMemAllocAsync(dptr, bytesize, hStream);
}

gg_CUresult cuMemAllocFromPoolAsync_ptsz(gg_CUdeviceptr *dptr, size_t bytesize, gg_CUmemoryPool pool,
                                         gg_CUstream hStream)
{
	return local_cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
}

gg_CUresult cuMemFreeAsync_ptsz(gg_CUdeviceptr dptr, gg_CUstream hStream)
{
	return local_cuMemFreeAsync(dptr, hStream);
}

gg_CUresult cuDeviceGetDefaultMemPool(gg_CUmemoryPool *pool_out, gg_CUdevice dev)
{
	REQUIRE_OUT_AND_DEVICE(pool_out, dev);
	*pool_out = pool_ptr(sim_pool_default(dev));
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceGetMemPool(gg_CUmemoryPool *pool, gg_CUdevice dev)
{
	REQUIRE_OUT_AND_DEVICE(pool, dev);
	*pool = pool_ptr(sim_pool_current(dev));
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceSetMemPool(gg_CUdevice dev, gg_CUmemoryPool pool)
{
	REQUIRE_INIT();
	return to_cu(sim_pool_set_current(dev, pool_h(pool)));
}

gg_CUresult cuMemPoolCreate(gg_CUmemoryPool *pool, const gg_CUmemPoolProps *poolProps)
{
	REQUIRE_INIT();
	int dev;
	if (!pool || !poolProps || poolProps->allocType != GG_CU_MEM_ALLOCATION_TYPE_PINNED)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = check_location(&poolProps->location, &dev);
	if (r)
		return r;
	uint64_t h;
	int rc = sim_pool_create(dev, &h);
	if (rc == SIM_OK)
		*pool = pool_ptr(h);
	return to_cu(rc);
}

gg_CUresult cuMemPoolDestroy(gg_CUmemoryPool pool)
{
	REQUIRE_INIT();
	return sim_pool_destroy(pool_h(pool)) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemPoolTrimTo(gg_CUmemoryPool pool, size_t minBytesToKeep)
{
	REQUIRE_INIT();
	return sim_pool_trim(pool_h(pool), minBytesToKeep) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

/* attributes 1..3 are int, 4..8 cuuint64_t */
gg_CUresult cuMemPoolSetAttribute(gg_CUmemoryPool pool, gg_CUmemPool_attribute attr, void *value)
{
	REQUIRE_INIT();
	if (!value || attr < 1 || attr > GG_CU_MEMPOOL_ATTR_USED_MEM_HIGH ||
	    attr == GG_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT || attr == GG_CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
		return GG_CUDA_ERROR_INVALID_VALUE;
	uint64_t v = attr <= 3 ? (uint64_t) * (int *)value : *(gg_cuuint64_t *)value;
	return sim_pool_set_attr(pool_h(pool), attr, v) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemPoolGetAttribute(gg_CUmemoryPool pool, gg_CUmemPool_attribute attr, void *value)
{
	REQUIRE_INIT();
	if (!value || attr < 1 || attr > GG_CU_MEMPOOL_ATTR_USED_MEM_HIGH)
		return GG_CUDA_ERROR_INVALID_VALUE;
	uint64_t v;
	if (sim_pool_get_attr(pool_h(pool), attr, &v))
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (attr <= 3)
		*(int *)value = (int)v;
	else
		*(gg_cuuint64_t *)value = v;
	return GG_CUDA_SUCCESS;
}

/* -------------------------------------------------------------- legacy ABIs */

/* 32-bit CUdeviceptr: no simulated address fits, so allocation always fails */
gg_CUresult cuMemAlloc(gg_CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!dptr || !bytesize)
		return GG_CUDA_ERROR_INVALID_VALUE;
	return GG_CUDA_ERROR_OUT_OF_MEMORY;
}

gg_CUresult cuMemFree(gg_CUdeviceptr_v1 dptr)
{
	REQUIRE_INIT();
	if (!dptr)
		return GG_CUDA_SUCCESS;
	REQUIRE_CTX(dev);
	(void)dev;
	return GG_CUDA_ERROR_INVALID_VALUE;
}

static unsigned int clamp_u32(uint64_t v)
{
	return v > UINT_MAX ? UINT_MAX : (unsigned int)v;
}

gg_CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
	REQUIRE_CTX(dev);
	if (!free || !total)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*free = clamp_u32(sim_device_free(dev));
	*total = clamp_u32(sim_device_total(dev));
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceTotalMem(unsigned int *bytes, gg_CUdevice dev)
{
	REQUIRE_OUT_AND_DEVICE(bytes, dev);
	*bytes = clamp_u32(sim_device_total(dev));
	return GG_CUDA_SUCCESS;
}

/* ---------------------------------------------------------- cuGetProcAddress */

/* {base name, per-function ABI version, function, _ptsz variant}. Legacy
 * cuCtxPushCurrent/PopCurrent, cuStreamDestroy and cuDevicePrimaryCtxRelease
 * share their successor's ABI, so the successor also answers those versions. */
struct proc {
	const char *name;
	int version;
	void *fn, *ptsz;
};
#define P(n, v, f)                              \
	{                                       \
		n, v, (void *)(local_##f), NULL \
	}
#define PZ(n, v, f)                                                   \
	{                                                             \
		n, v, (void *)(local_##f), (void *)(local_##f##_ptsz) \
	}
static const struct proc g_procs[] = {
    P("cuInit", 2000, cuInit),
    P("cuDriverGetVersion", 2020, cuDriverGetVersion),
    P("cuDeviceGet", 2000, cuDeviceGet),
    P("cuDeviceGetCount", 2000, cuDeviceGetCount),
    P("cuDeviceGetName", 2000, cuDeviceGetName),
    P("cuDeviceTotalMem", 2000, cuDeviceTotalMem),
    P("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    P("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
    P("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease_v2),
    P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    P("cuCtxGetDevice", 2000, cuCtxGetDevice),
    P("cuCtxPushCurrent", 2000, cuCtxPushCurrent_v2),
    P("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
    P("cuCtxPopCurrent", 2000, cuCtxPopCurrent_v2),
    P("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    P("cuCtxSynchronize", 2000, cuCtxSynchronize),
    P("cuStreamCreate", 2000, cuStreamCreate),
    P("cuStreamDestroy", 2000, cuStreamDestroy_v2),
    P("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    PZ("cuStreamSynchronize", 2000, cuStreamSynchronize),
    P("cuGetErrorString", 6000, cuGetErrorString),
    P("cuGetErrorName", 6000, cuGetErrorName),
    P("cuMemGetInfo", 2000, cuMemGetInfo),
    P("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    P("cuMemAlloc", 2000, cuMemAlloc),
    P("cuMemAlloc", 3020, cuMemAlloc_v2),
    P("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    P("cuMemFree", 2000, cuMemFree),
    P("cuMemFree", 3020, cuMemFree_v2),
    P("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    P("cuMemAllocManaged", 6000, cuMemAllocManaged),
    P("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    P("cuMemHostAlloc", 2020, cuMemHostAlloc),
    P("cuMemFreeHost", 2000, cuMemFreeHost),
    P("cuArrayCreate", 3020, cuArrayCreate_v2),
    P("cuArray3DCreate", 3020, cuArray3DCreate_v2),
    P("cuArrayDestroy", 2000, cuArrayDestroy),
    P("cuMipmappedArrayCreate", 5000, cuMipmappedArrayCreate),
    P("cuMipmappedArrayDestroy", 5000, cuMipmappedArrayDestroy),
    P("cuMemAddressReserve", 10020, cuMemAddressReserve),
    P("cuMemAddressFree", 10020, cuMemAddressFree),
    P("cuMemCreate", 10020, cuMemCreate),
    P("cuMemRelease", 10020, cuMemRelease),
    P("cuMemMap", 10020, cuMemMap),
    P("cuMemUnmap", 10020, cuMemUnmap),
    P("cuMemSetAccess", 10020, cuMemSetAccess),
    P("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    P("cuMemGetAllocationPropertiesFromHandle", 10020, cuMemGetAllocationPropertiesFromHandle),
    PZ("cuMemAllocAsync", 11020, cuMemAllocAsync),
    PZ("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    PZ("cuMemFreeAsync", 11020, cuMemFreeAsync),
    P("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    P("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),
    P("cuDeviceSetMemPool", 11020, cuDeviceSetMemPool),
    P("cuMemPoolCreate", 11020, cuMemPoolCreate),
    P("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    P("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
    P("cuMemPoolSetAttribute", 11020, cuMemPoolSetAttribute),
    P("cuMemPoolGetAttribute", 11020, cuMemPoolGetAttribute),
    P("cuGetProcAddress", 11030, cuGetProcAddress),
    P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
};

gg_CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, gg_cuuint64_t flags,
                                gg_CUdriverProcAddressQueryResult *symbolStatus)
{
	if (!symbol || !pfn || (flags & ~(gg_cuuint64_t)3))
		return GG_CUDA_ERROR_INVALID_VALUE;
	const struct proc *best = NULL;
	int known = 0;
	for (size_t i = 0; i < sizeof(g_procs) / sizeof(g_procs[0]); i++) {
		if (strcmp(g_procs[i].name, symbol))
			continue;
		known = 1;
		if (g_procs[i].version <= cudaVersion && (!best || g_procs[i].version > best->version))
			best = &g_procs[i];
	}
	*pfn = NULL;
	if (!best) {
		if (symbolStatus)
			*symbolStatus = known ? GG_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
			                      : GG_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return GG_CUDA_ERROR_NOT_FOUND;
	}
	*pfn = (flags & GG_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->ptsz ? best->ptsz : best->fn;
	if (symbolStatus)
		*symbolStatus = GG_CU_GET_PROC_ADDRESS_SUCCESS;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, gg_cuuint64_t flags)
{
	return local_cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* ------------------------------------------------------- test introspection */

SIM_EXPORT int simgpu_cuda_debug_used(int dev, unsigned long long *pages_bytes, unsigned long long *peak_pages_bytes,
                                      unsigned long long *live_allocs);
SIM_EXPORT void simgpu_cuda_debug_reset_peak(void);

int simgpu_cuda_debug_used(int dev, unsigned long long *pages_bytes, unsigned long long *peak_pages_bytes,
                           unsigned long long *live_allocs)
{
	return sim_debug_used(dev, pages_bytes, peak_pages_bytes, live_allocs);
}

void simgpu_cuda_debug_reset_peak(void)
{
	sim_debug_reset_peak();
}

#define GG_CU_FN(name, params) extern __typeof(name) local_##name __attribute__((alias(#name)));
#include "gpuguard/cuda_abi_funcs.h"
#undef GG_CU_FN
#undef GG_CU_FN_PTSZ
#undef GG_CU_FN_LEGACY
#undef GGT
