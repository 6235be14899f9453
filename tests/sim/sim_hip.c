/* gpuguard simulated GPU: a fake libamdhip64.so.6 over simcore. HIP needs no
 * explicit init; each thread has a current device (0 by default). Sizes of 0
 * succeed with a NULL pointer, as in ROCm. Streams are synchronous. */
#define _GNU_SOURCE
#include "gpuguard/hip_abi.h"
#include "simcore.h"

/* HIP knows no MIG (simcore.h) */
const int sim_lib_shows_mig = 0;

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define SIM_EXPORT __attribute__((visibility("default")))

/* hidden local_<name> aliases for internal calls (see sim_cuda.c) */
#define GGT(t) gg_##t
#define GG_HIP_FN(name, params) extern __typeof(name) local_##name __attribute__((visibility("hidden")));
#include "gpuguard/hip_abi_funcs.h"
#undef GG_HIP_FN

static __thread int tls_dev;

static gg_hipError_t to_hip(int rc)
{
	switch (rc) {
	case SIM_OK:
		return GG_hipSuccess;
	case SIM_ENOMEM:
		return GG_hipErrorOutOfMemory;
	case SIM_EDEVICE:
		return GG_hipErrorInvalidDevice;
	case SIM_EHANDLE:
		return GG_hipErrorInvalidHandle;
	case SIM_ENOTFOUND:
		return GG_hipErrorNotFound;
	case SIM_ENODEV:
		return GG_hipErrorNoDevice;
	default:
		return GG_hipErrorInvalidValue;
	}
}

/* implicit initialisation; the current device of this thread */
#define REQUIRE_DEV(devvar)                         \
	int devvar;                                 \
	do {                                        \
		if (sim_device_count() == 0)        \
			return GG_hipErrorNoDevice; \
		devvar = tls_dev;                   \
	} while (0)

#define REQUIRE_DEVICES()                           \
	do {                                        \
		if (sim_device_count() == 0)        \
			return GG_hipErrorNoDevice; \
	} while (0)

/* An output pointer and a device ordinal, checked in HIP's order. */
#define REQUIRE_OUT_AND_DEVICE(out, dev)                 \
	do {                                             \
		REQUIRE_DEVICES();                       \
		if (!(out))                              \
			return GG_hipErrorInvalidValue;  \
		if (!sim_device_valid(dev))              \
			return GG_hipErrorInvalidDevice; \
	} while (0)

gg_hipError_t hipInit(unsigned int flags)
{
	if (flags)
		return GG_hipErrorInvalidValue;
	REQUIRE_DEVICES();
	return GG_hipSuccess;
}

gg_hipError_t hipDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return GG_hipErrorInvalidValue;
	*driverVersion = 60200000;
	return GG_hipSuccess;
}

gg_hipError_t hipRuntimeGetVersion(int *runtimeVersion)
{
	if (!runtimeVersion)
		return GG_hipErrorInvalidValue;
	*runtimeVersion = 60200000;
	return GG_hipSuccess;
}

gg_hipError_t hipGetDeviceCount(int *count)
{
	if (!count)
		return GG_hipErrorInvalidValue;
	*count = sim_device_count();
	return *count ? GG_hipSuccess : GG_hipErrorNoDevice;
}

gg_hipError_t hipSetDevice(int deviceId)
{
	REQUIRE_DEVICES();
	if (!sim_device_valid(deviceId))
		return GG_hipErrorInvalidDevice;
	tls_dev = deviceId;
	return GG_hipSuccess;
}

gg_hipError_t hipGetDevice(int *deviceId)
{
	REQUIRE_DEV(dev);
	if (!deviceId)
		return GG_hipErrorInvalidValue;
	*deviceId = dev;
	return GG_hipSuccess;
}

gg_hipError_t hipDeviceGetName(char *name, int len, gg_hipDevice_t device)
{
	static const char n[] = "gpuguard simulated GPU";
	REQUIRE_DEVICES();
	if (!name || len <= 0)
		return GG_hipErrorInvalidValue;
	if (!sim_device_valid(device))
		return GG_hipErrorInvalidDevice;
	size_t k = (size_t)len - 1 < sizeof(n) - 1 ? (size_t)len - 1 : sizeof(n) - 1;
	memcpy(name, n, k);
	name[k] = 0;
	return GG_hipSuccess;
}

gg_hipError_t hipDeviceTotalMem(size_t *bytes, gg_hipDevice_t device)
{
	REQUIRE_OUT_AND_DEVICE(bytes, device);
	*bytes = sim_device_total(device);
	return GG_hipSuccess;
}

gg_hipError_t hipDeviceGetUuid(gg_hipUUID *uuid, gg_hipDevice_t device)
{
	REQUIRE_OUT_AND_DEVICE(uuid, device);
	sim_device_uuid(device, (uint8_t *)uuid->bytes);
	return GG_hipSuccess;
}

gg_hipError_t hipDeviceSynchronize(void)
{
	REQUIRE_DEV(dev);
	sim_device_sync(dev);
	return GG_hipSuccess;
}

/* ------------------------------------------------------------------ streams */

static gg_hipError_t stream_device(gg_hipStream_t s, int *dev)
{
	if (!s) {
		*dev = tls_dev;
		return GG_hipSuccess;
	}
	*dev = sim_handle_device((uint64_t)(uintptr_t)s);
	return *dev < 0 ? GG_hipErrorInvalidHandle : GG_hipSuccess;
}

gg_hipError_t hipStreamCreate(gg_hipStream_t *stream)
{
	REQUIRE_DEV(dev);
	if (!stream)
		return GG_hipErrorInvalidValue;
	uint64_t h = sim_handle_new(dev);
	if (!h)
		return GG_hipErrorOutOfMemory;
	*stream = (gg_hipStream_t)(uintptr_t)h;
	return GG_hipSuccess;
}

/* ROCm's: the device of a stream; the null stream's is the current one */
SIM_EXPORT gg_hipError_t hipStreamGetDevice(gg_hipStream_t stream, int *device);
gg_hipError_t hipStreamGetDevice(gg_hipStream_t stream, int *device)
{
	REQUIRE_DEVICES();
	if (!device)
		return GG_hipErrorInvalidValue;
	int dev;
	gg_hipError_t r = stream_device(stream, &dev);
	if (!r)
		*device = dev;
	return r;
}

gg_hipError_t hipStreamDestroy(gg_hipStream_t stream)
{
	REQUIRE_DEVICES();
	return sim_handle_delete((uint64_t)(uintptr_t)stream) ? GG_hipErrorInvalidHandle : GG_hipSuccess;
}

gg_hipError_t hipStreamSynchronize(gg_hipStream_t stream)
{
	REQUIRE_DEVICES();
	int dev;
	gg_hipError_t r = stream_device(stream, &dev);
	if (r)
		return r;
	sim_device_sync(dev);
	return GG_hipSuccess;
}

/* ------------------------------------------------------------ device memory */

static gg_hipError_t hip_alloc(void **ptr, size_t size, int kind)
{
	REQUIRE_DEV(dev);
	if (!ptr)
		return GG_hipErrorInvalidValue;
	if (!size) {
		*ptr = NULL;
		return GG_hipSuccess;
	}
	uint64_t a;
	int rc = sim_alloc(dev, size, kind, 0, &a);
	if (rc == SIM_OK)
		*ptr = (void *)(uintptr_t)a;
	return to_hip(rc);
}

gg_hipError_t hipMalloc(void **ptr, size_t size)
{
	return hip_alloc(ptr, size, SIM_KIND_LINEAR);
}

/* hipDeviceMallocDefault 0, Finegrained 1, SignalMemory 2, Uncached 3, Contiguous 4 */
gg_hipError_t hipExtMallocWithFlags(void **ptr, size_t sizeBytes, unsigned int flags)
{
	if (flags > 4)
		return GG_hipErrorInvalidValue;
	return hip_alloc(ptr, sizeBytes, SIM_KIND_LINEAR);
}

/* simplified: managed memory is charged as device memory on the current device */
gg_hipError_t hipMallocManaged(void **dev_ptr, size_t size, unsigned int flags)
{
	if (flags != GG_hipMemAttachGlobal && flags != GG_hipMemAttachHost)
		return GG_hipErrorInvalidValue;
	return hip_alloc(dev_ptr, size, SIM_KIND_MANAGED);
}

gg_hipError_t hipMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height)
{
	if (!ptr || !pitch)
		return GG_hipErrorInvalidValue;
	size_t p = (width + 511) & ~(size_t)511, bytes;
	if (p < width || __builtin_mul_overflow(p, height, &bytes))
		return GG_hipErrorOutOfMemory;
	gg_hipError_t r = hip_alloc(ptr, bytes, SIM_KIND_LINEAR);
	if (!r)
		*pitch = p;
	return r;
}

gg_hipError_t hipFree(void *ptr)
{
	REQUIRE_DEVICES();
	if (!ptr)
		return GG_hipSuccess;
	return sim_free((uint64_t)(uintptr_t)ptr, SIM_KMASK_FREEABLE) ? GG_hipErrorInvalidValue : GG_hipSuccess;
}

gg_hipError_t hipMemGetInfo(size_t *free, size_t *total)
{
	REQUIRE_DEV(dev);
	if (!free || !total)
		return GG_hipErrorInvalidValue;
	*free = sim_device_free(dev);
	*total = sim_device_total(dev);
	return GG_hipSuccess;
}

gg_hipError_t hipMemGetAddressRange(gg_hipDeviceptr_t *pbase, size_t *psize, gg_hipDeviceptr_t dptr)
{
	REQUIRE_DEVICES();
	uint64_t b, s;
	if (sim_addr_range((uint64_t)(uintptr_t)dptr, &b, &s))
		return GG_hipErrorNotFound;
	if (pbase)
		*pbase = (void *)(uintptr_t)b;
	if (psize)
		*psize = s;
	return GG_hipSuccess;
}

gg_hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags)
{
	(void)flags;
	REQUIRE_DEVICES();
	if (!ptr)
		return GG_hipErrorInvalidValue;
	if (!size) {
		*ptr = NULL;
		return GG_hipSuccess;
	}
	void *p = sim_host_alloc(size);
	if (!p)
		return GG_hipErrorOutOfMemory;
	*ptr = p;
	return GG_hipSuccess;
}

gg_hipError_t hipHostFree(void *ptr)
{
	REQUIRE_DEVICES();
	if (!ptr)
		return GG_hipSuccess;
	return sim_host_free(ptr) ? GG_hipErrorInvalidValue : GG_hipSuccess;
}

/* ------------------------------------------------ stream-ordered allocation */

static uint64_t pool_h(gg_hipMemPool_t p)
{
	return (uint64_t)(uintptr_t)p;
}

static gg_hipMemPool_t pool_ptr(uint64_t h)
{
	return (gg_hipMemPool_t)(uintptr_t)h;
}

gg_hipError_t hipMallocFromPoolAsync(void **dev_ptr, size_t size, gg_hipMemPool_t mem_pool, gg_hipStream_t stream)
{
	REQUIRE_DEVICES();
	int dev;
	if (!dev_ptr)
		return GG_hipErrorInvalidValue;
	gg_hipError_t r = stream_device(stream, &dev);
	if (r)
		return r;
	if (!size) {
		*dev_ptr = NULL;
		return GG_hipSuccess;
	}
	uint64_t a;
	int rc = sim_pool_alloc(pool_h(mem_pool), size, &a);
	if (rc == SIM_EHANDLE)
		return GG_hipErrorInvalidValue;
	if (rc == SIM_OK)
		*dev_ptr = (void *)(uintptr_t)a;
	return to_hip(rc);
}

gg_hipError_t hipMallocAsync(void **dev_ptr, size_t size, gg_hipStream_t stream)
{
	REQUIRE_DEVICES();
	int dev;
	gg_hipError_t r = stream_device(stream, &dev);
	if (r)
		return r;
	return local_hipMallocFromPoolAsync(dev_ptr, size, pool_ptr(sim_pool_current(dev)), stream);
}

gg_hipError_t hipFreeAsync(void *dev_ptr, gg_hipStream_t stream)
{
	REQUIRE_DEVICES();
	int dev;
	gg_hipError_t r = stream_device(stream, &dev);
	if (r)
		return r;
	if (!dev_ptr)
		return GG_hipSuccess;
	return sim_free((uint64_t)(uintptr_t)dev_ptr, SIM_KMASK_FREEABLE) ? GG_hipErrorInvalidValue : GG_hipSuccess;
}

gg_hipError_t hipDeviceGetDefaultMemPool(gg_hipMemPool_t *mem_pool, int device)
{
	REQUIRE_OUT_AND_DEVICE(mem_pool, device);
	*mem_pool = pool_ptr(sim_pool_default(device));
	return GG_hipSuccess;
}

gg_hipError_t hipDeviceGetMemPool(gg_hipMemPool_t *mem_pool, int device)
{
	REQUIRE_OUT_AND_DEVICE(mem_pool, device);
	*mem_pool = pool_ptr(sim_pool_current(device));
	return GG_hipSuccess;
}

gg_hipError_t hipDeviceSetMemPool(int device, gg_hipMemPool_t mem_pool)
{
	REQUIRE_DEVICES();
	return to_hip(sim_pool_set_current(device, pool_h(mem_pool)));
}

static gg_hipError_t check_location(const gg_hipMemLocation *loc, int *dev)
{
	if (loc->type != GG_hipMemLocationTypeDevice)
		return GG_hipErrorInvalidValue;
	if (!sim_device_valid(loc->id))
		return GG_hipErrorInvalidDevice;
	*dev = loc->id;
	return GG_hipSuccess;
}

gg_hipError_t hipMemPoolCreate(gg_hipMemPool_t *mem_pool, const gg_hipMemPoolProps *pool_props)
{
	REQUIRE_DEVICES();
	int dev;
	if (!mem_pool || !pool_props || pool_props->allocType != GG_hipMemAllocationTypePinned)
		return GG_hipErrorInvalidValue;
	gg_hipError_t r = check_location(&pool_props->location, &dev);
	if (r)
		return r;
	uint64_t h;
	int rc = sim_pool_create(dev, &h);
	if (rc == SIM_OK)
		*mem_pool = pool_ptr(h);
	return to_hip(rc);
}

gg_hipError_t hipMemPoolDestroy(gg_hipMemPool_t mem_pool)
{
	REQUIRE_DEVICES();
	return sim_pool_destroy(pool_h(mem_pool)) ? GG_hipErrorInvalidValue : GG_hipSuccess;
}

gg_hipError_t hipMemPoolTrimTo(gg_hipMemPool_t mem_pool, size_t min_bytes_to_hold)
{
	REQUIRE_DEVICES();
	return sim_pool_trim(pool_h(mem_pool), min_bytes_to_hold) ? GG_hipErrorInvalidValue : GG_hipSuccess;
}

/* attributes 1..3 are int, 4..8 uint64_t */
gg_hipError_t hipMemPoolSetAttribute(gg_hipMemPool_t mem_pool, gg_hipMemPoolAttr attr, void *value)
{
	REQUIRE_DEVICES();
	if (!value || attr < 1 || attr > GG_hipMemPoolAttrUsedMemHigh || attr == GG_hipMemPoolAttrReservedMemCurrent ||
	    attr == GG_hipMemPoolAttrUsedMemCurrent)
		return GG_hipErrorInvalidValue;
	uint64_t v = attr <= 3 ? (uint64_t) * (int *)value : *(uint64_t *)value;
	return sim_pool_set_attr(pool_h(mem_pool), attr, v) ? GG_hipErrorInvalidValue : GG_hipSuccess;
}

gg_hipError_t hipMemPoolGetAttribute(gg_hipMemPool_t mem_pool, gg_hipMemPoolAttr attr, void *value)
{
	REQUIRE_DEVICES();
	if (!value || attr < 1 || attr > GG_hipMemPoolAttrUsedMemHigh)
		return GG_hipErrorInvalidValue;
	uint64_t v;
	if (sim_pool_get_attr(pool_h(mem_pool), attr, &v))
		return GG_hipErrorInvalidValue;
	if (attr <= 3)
		*(int *)value = (int)v;
	else
		*(uint64_t *)value = v;
	return GG_hipSuccess;
}

/* ---------------------------------------------------- virtual memory (VMM) */

/* This is libamdhip64.so.6: hipMemAllocationProp has the ROCm 6 layout
 * (gg_hipMemAllocationProp_v6), whatever the ROCm 5 prototype says. */
static gg_hipError_t check_prop(const gg_hipMemAllocationProp *prop5, int *dev)
{
	const gg_hipMemAllocationProp_v6 *prop = (const gg_hipMemAllocationProp_v6 *)(const void *)prop5;
	if (!prop || prop->type != GG_hipMemAllocationTypePinned)
		return GG_hipErrorInvalidValue;
	return check_location(&prop->location, dev);
}

gg_hipError_t hipMemGetAllocationGranularity(size_t *granularity, const gg_hipMemAllocationProp *prop,
                                             gg_hipMemAllocationGranularity_flags option)
{
	REQUIRE_DEVICES();
	int dev;
	if (!granularity || (option != 0 && option != 1))
		return GG_hipErrorInvalidValue;
	gg_hipError_t r = check_prop(prop, &dev);
	if (r)
		return r;
	*granularity = SIM_PAGE;
	return GG_hipSuccess;
}

gg_hipError_t hipMemCreate(gg_hipMemGenericAllocationHandle_t *handle, size_t size, const gg_hipMemAllocationProp *prop,
                           unsigned long long flags)
{
	REQUIRE_DEVICES();
	int dev;
	if (!handle || flags)
		return GG_hipErrorInvalidValue;
	gg_hipError_t r = check_prop(prop, &dev);
	if (r)
		return r;
	if (!size || size % SIM_PAGE)
		return GG_hipErrorInvalidValue;
	uint64_t h;
	int rc = sim_vmm_create(dev, size, prop, sizeof(gg_hipMemAllocationProp_v6), &h);
	if (rc == SIM_OK)
		*handle = (gg_hipMemGenericAllocationHandle_t)(uintptr_t)h;
	return to_hip(rc);
}

gg_hipError_t hipMemRelease(gg_hipMemGenericAllocationHandle_t handle)
{
	REQUIRE_DEVICES();
	return sim_vmm_release((uint64_t)(uintptr_t)handle) ? GG_hipErrorInvalidValue : GG_hipSuccess;
}

/* simplified: the fixed-address hint `addr` is ignored */
gg_hipError_t hipMemAddressReserve(void **ptr, size_t size, size_t alignment, void *addr, unsigned long long flags)
{
	REQUIRE_DEVICES();
	(void)addr;
	if (!ptr || flags)
		return GG_hipErrorInvalidValue;
	uint64_t a;
	int rc = sim_va_reserve(size, alignment, &a);
	if (rc == SIM_OK)
		*ptr = (void *)(uintptr_t)a;
	return to_hip(rc);
}

gg_hipError_t hipMemAddressFree(void *devPtr, size_t size)
{
	REQUIRE_DEVICES();
	return sim_va_free((uint64_t)(uintptr_t)devPtr, size) ? GG_hipErrorInvalidValue : GG_hipSuccess;
}

gg_hipError_t hipMemMap(void *ptr, size_t size, size_t offset, gg_hipMemGenericAllocationHandle_t handle,
                        unsigned long long flags)
{
	REQUIRE_DEVICES();
	if (flags)
		return GG_hipErrorInvalidValue;
	int rc = sim_va_map((uint64_t)(uintptr_t)ptr, size, offset, (uint64_t)(uintptr_t)handle);
	return rc == SIM_ENOMEM ? GG_hipErrorOutOfMemory : rc ? GG_hipErrorInvalidValue : GG_hipSuccess;
}

gg_hipError_t hipMemUnmap(void *ptr, size_t size)
{
	REQUIRE_DEVICES();
	return sim_va_unmap((uint64_t)(uintptr_t)ptr, size) ? GG_hipErrorInvalidValue : GG_hipSuccess;
}

/* ----------------------------------------------------- reset and lifetime */

/* ROCm: "destroy all resources and reset all state on the current device in
 * the current process": every allocation, pool block and VMM handle of the
 * device goes (HIP's memory is all in simcore's primary context). */
gg_hipError_t hipDeviceReset(void)
{
	REQUIRE_DEV(dev);
	return to_hip(sim_free_context(dev, SIM_CTX_PRIMARY, 0));
}

/* The handle of the VMM allocation mapped at addr, with one more reference
 * (released with hipMemRelease), as cuMemRetainAllocationHandle. */
gg_hipError_t hipMemRetainAllocationHandle(gg_hipMemGenericAllocationHandle_t *handle, void *addr)
{
	REQUIRE_DEVICES();
	if (!handle)
		return GG_hipErrorInvalidValue;
	uint64_t h;
	if (sim_vmm_retain((uint64_t)(uintptr_t)addr, &h) != SIM_OK)
		return GG_hipErrorInvalidValue;
	*handle = (gg_hipMemGenericAllocationHandle_t)(uintptr_t)h;
	return GG_hipSuccess;
}

/* Sharing crosses processes; one simulated process has no one to share
 * with, so these fail as a driver without the handle type would. */
gg_hipError_t hipMemExportToShareableHandle(void *shareableHandle, gg_hipMemGenericAllocationHandle_t handle,
                                            gg_hipMemAllocationHandleType handleType, unsigned long long flags)
{
	REQUIRE_DEVICES();
	(void)shareableHandle, (void)handle, (void)handleType, (void)flags;
	return GG_hipErrorNotSupported;
}

gg_hipError_t hipMemImportFromShareableHandle(gg_hipMemGenericAllocationHandle_t *handle, void *osHandle,
                                              gg_hipMemAllocationHandleType shHandleType)
{
	REQUIRE_DEVICES();
	(void)handle, (void)osHandle, (void)shHandleType;
	return GG_hipErrorNotSupported;
}

gg_hipError_t hipIpcGetMemHandle(gg_hipIpcMemHandle_t *handle, void *devPtr)
{
	REQUIRE_DEVICES();
	(void)handle, (void)devPtr;
	return GG_hipErrorNotSupported;
}

gg_hipError_t hipIpcOpenMemHandle(void **devPtr, gg_hipIpcMemHandle_t handle, unsigned int flags)
{
	REQUIRE_DEVICES();
	(void)devPtr, (void)handle, (void)flags;
	return GG_hipErrorNotSupported;
}

gg_hipError_t hipIpcCloseMemHandle(void *devPtr)
{
	REQUIRE_DEVICES();
	(void)devPtr;
	return GG_hipErrorNotSupported;
}

/* ------------------------------------------------------------------- errors */

const char *hipGetErrorString(gg_hipError_t err)
{
	switch (err) {
	case GG_hipSuccess:
		return "no error";
	case GG_hipErrorInvalidValue:
		return "invalid argument";
	case GG_hipErrorOutOfMemory:
		return "out of memory";
	case GG_hipErrorNotInitialized:
		return "initialization error";
	case GG_hipErrorInvalidDevicePointer:
		return "invalid device pointer";
	case GG_hipErrorNoDevice:
		return "no ROCm-capable device is detected";
	case GG_hipErrorInvalidDevice:
		return "invalid device ordinal";
	case GG_hipErrorInvalidContext:
		return "invalid device context";
	case GG_hipErrorInvalidHandle:
		return "invalid resource handle";
	case GG_hipErrorNotFound:
		return "named symbol not found";
	case GG_hipErrorNotSupported:
		return "operation not supported";
	default:
		return "unknown error";
	}
}

/* ---------------------------------------------------------------- contexts */

/* ROCm's contexts are its devices (clr: a hipCtx_t is the device's object),
 * and each thread keeps a stack of them. ROCm deprecated the calls; they are
 * still exported, and each may change the thread's current device, as clr
 * does: hipCtxCreate retains the device and pushes it; hipCtxSetCurrent
 * makes ctx's device current in place of the stack's top (NULL pops);
 * hipCtxPushCurrent makes it current and pushes it; hipCtxPopCurrent pops,
 * and the new top's device becomes current; hipCtxDestroy pops it when it
 * is the top. A device's context is the same handle every time. */
static char g_ctx_obj[SIM_MAX_DEVICES];
#define SIM_CTX_STACK 16
static __thread gg_hipCtx_t tls_ctx_stack[SIM_CTX_STACK];
static __thread int tls_ctx_depth;

/* ctx's device, or -1 for a handle that is no device's context. */
static int ctx_device(gg_hipCtx_t ctx)
{
	const char *c = (const char *)ctx;
	if (c < g_ctx_obj || c >= g_ctx_obj + SIM_MAX_DEVICES || !sim_device_valid((int)(c - g_ctx_obj)))
		return -1;
	return (int)(c - g_ctx_obj);
}

static gg_hipError_t ctx_push(gg_hipCtx_t ctx)
{
	if (tls_ctx_depth == SIM_CTX_STACK)
		return GG_hipErrorOutOfMemory;
	tls_ctx_stack[tls_ctx_depth++] = ctx;
	return GG_hipSuccess;
}

gg_hipError_t hipCtxCreate(gg_hipCtx_t *ctx, unsigned int flags, gg_hipDevice_t device)
{
	(void)flags;
	REQUIRE_DEVICES();
	if (!ctx || !sim_device_valid(device))
		return GG_hipErrorInvalidValue;
	*ctx = (gg_hipCtx_t)(void *)&g_ctx_obj[device];
	return ctx_push(*ctx);
}

gg_hipError_t hipCtxDestroy(gg_hipCtx_t ctx)
{
	REQUIRE_DEVICES();
	if (ctx_device(ctx) < 0)
		return GG_hipErrorInvalidContext;
	if (tls_ctx_depth && tls_ctx_stack[tls_ctx_depth - 1] == ctx)
		tls_ctx_depth--;
	return GG_hipSuccess;
}

gg_hipError_t hipCtxSetCurrent(gg_hipCtx_t ctx)
{
	REQUIRE_DEVICES();
	if (!ctx) {
		if (tls_ctx_depth)
			tls_ctx_depth--;
		return GG_hipSuccess;
	}
	int dev = ctx_device(ctx);
	if (dev < 0)
		return GG_hipErrorInvalidContext;
	tls_dev = dev;
	if (tls_ctx_depth)
		tls_ctx_depth--;
	return ctx_push(ctx);
}

gg_hipError_t hipCtxGetCurrent(gg_hipCtx_t *ctx)
{
	REQUIRE_DEVICES();
	if (!ctx)
		return GG_hipErrorInvalidValue;
	*ctx = tls_ctx_depth ? tls_ctx_stack[tls_ctx_depth - 1] : (gg_hipCtx_t)(void *)&g_ctx_obj[tls_dev];
	return GG_hipSuccess;
}

gg_hipError_t hipCtxPushCurrent(gg_hipCtx_t ctx)
{
	REQUIRE_DEVICES();
	int dev = ctx_device(ctx);
	if (dev < 0)
		return GG_hipErrorInvalidContext;
	tls_dev = dev;
	return ctx_push(ctx);
}

gg_hipError_t hipCtxPopCurrent(gg_hipCtx_t *ctx)
{
	REQUIRE_DEVICES();
	if (!tls_ctx_depth)
		return GG_hipErrorInvalidContext;
	gg_hipCtx_t top = tls_ctx_stack[--tls_ctx_depth];
	if (ctx)
		*ctx = top;
	if (tls_ctx_depth)
		tls_dev = ctx_device(tls_ctx_stack[tls_ctx_depth - 1]);
	return GG_hipSuccess;
}

/* ------------------------------------------------------------ entry points */

/* hipGetProcAddress (ROCm 6.1 and later, not in every HIP header, so not in
 * hip_abi_funcs.h): as ROCm's clr answers it, by dlsym on the runtime's own
 * handle (PlatformState's dynamic library handle), the name with "_spt"
 * first for HIP_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (and the name
 * alone where there is none). So under an interposer that overrides dlsym
 * the lookup goes through it, as it does on a real card. ROCm's renames
 * for hipVersion 600 and later (hipGetDevicePropertiesR0600, ...) name
 * functions the simulator does not have, and are left out. */
/* flags: 0 default, 1 legacy stream, 2 per-thread default stream */
#define SIM_HIP_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2
#define SIM_HIP_GET_PROC_ADDRESS_SUCCESS 0
#define SIM_HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND 1

SIM_EXPORT gg_hipError_t hipGetProcAddress(const char *symbol, void **pfn, int hipVersion, uint64_t flags,
                                           int *symbolStatus);

/* This library's own handle, as dlopen gives it to a caller that names it. */
static void *own_handle(void)
{
	Dl_info info;
	if (!dladdr((void *)&local_hipInit, &info) || !info.dli_fname)
		return NULL;
	return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
}

gg_hipError_t hipGetProcAddress(const char *symbol, void **pfn, int hipVersion, uint64_t flags, int *symbolStatus)
{
	(void)hipVersion;
	if (!symbol || !*symbol || !pfn || flags > SIM_HIP_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
		return GG_hipErrorInvalidValue;
	void *h = own_handle();
	if (!h)
		return GG_hipErrorInvalidValue;
	*pfn = NULL;
	if (flags == SIM_HIP_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
		char spt[256];
		if ((size_t)snprintf(spt, sizeof spt, "%s_spt", symbol) < sizeof spt)
			*pfn = dlsym(h, spt);
	}
	if (!*pfn)
		*pfn = dlsym(h, symbol);
	dlclose(h); /* the NOLOAD reference only */
	if (!*pfn) {
		if (symbolStatus)
			*symbolStatus = SIM_HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return GG_hipErrorInvalidValue;
	}
	if (symbolStatus)
		*symbolStatus = SIM_HIP_GET_PROC_ADDRESS_SUCCESS;
	return GG_hipSuccess;
}

/* ------------------------------------------------------- test introspection */

SIM_EXPORT int simgpu_hip_debug_used(int dev, unsigned long long *pages_bytes, unsigned long long *peak_pages_bytes,
                                     unsigned long long *live_allocs);
SIM_EXPORT void simgpu_hip_debug_reset_peak(void);

int simgpu_hip_debug_used(int dev, unsigned long long *pages_bytes, unsigned long long *peak_pages_bytes,
                          unsigned long long *live_allocs)
{
	return sim_debug_used(dev, pages_bytes, peak_pages_bytes, live_allocs);
}

void simgpu_hip_debug_reset_peak(void)
{
	sim_debug_reset_peak();
}

/* A change of the calling thread's current device that no exported entry
 * point makes, so that no hook of an interposer sees it: what a private
 * table's entry could do. As hipSetDevice. */
SIM_EXPORT gg_hipError_t simgpu_hip_debug_set_device(int dev);

gg_hipError_t simgpu_hip_debug_set_device(int dev)
{
	return local_hipSetDevice(dev);
}

/* A change of a device's current pool that no exported entry point of this
 * runtime makes (ROCm 7's hipMemSetMemPool, which 6.2 lacks), so that no
 * hook sees it. As hipDeviceSetMemPool. */
SIM_EXPORT gg_hipError_t simgpu_hip_debug_set_mem_pool(int dev, gg_hipMemPool_t pool);

gg_hipError_t simgpu_hip_debug_set_mem_pool(int dev, gg_hipMemPool_t pool)
{
	return local_hipDeviceSetMemPool(dev, pool);
}

#define GG_HIP_FN(name, params) extern __typeof(name) local_##name __attribute__((alias(#name)));
#include "gpuguard/hip_abi_funcs.h"
#undef GG_HIP_FN
#undef GGT
