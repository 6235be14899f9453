/* gpuguard: HIP runtime hooks. HIP programs bind libamdhip64 symbols
 * directly, so plain interposition catches them (DESIGN.md §1); a refusal is
 * hipErrorOutOfMemory. The bodies are shape.c's, shared with the CUDA hooks. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "gpuguard/hip_abi.h"
#include "hooks.h"
#define GG_HOOK_RUNTIME GG_RT_HIP /* GG_ENTER: devices bound here are HIP's */
#include "internal.h"

#define LIBHIP "libamdhip64.so.6"

/* ROCm's, not in hip_abi.h: the device a stream belongs to. */
typedef gg_hipError_t (*gg_pfn_hipStreamGetDevice)(gg_hipStream_t stream, int *device);

#define HIP_HELPERS(X)                \
	X(hipGetDevice)               \
	X(hipGetDeviceCount)          \
	X(hipStreamGetDevice)         \
	X(hipDeviceGetMemPool)        \
	X(hipDeviceGetDefaultMemPool) \
	X(hipMemPoolGetAttribute)     \
	X(hipRuntimeGetVersion)       \
	X(hipDeviceGetUuid)

/* The functions we wrap (GG_HIP_HOOKS' rows, hooks.h) and those we only
 * call: one real pointer each. */
#define DECLARE_REAL(name) static _Atomic(gg_pfn_##name) real_##name;
#define DECLARE_HOOK(name, ...) DECLARE_REAL(name)
GG_HIP_HOOKS(DECLARE_HOOK)
HIP_HELPERS(DECLARE_REAL)

#define REAL(name) ((gg_pfn_##name)gg_real_load((void *_Atomic *)&real_##name, #name, (void *)name, LIBHIP))
#define HELPER(name) ((gg_pfn_##name)gg_real_load((void *_Atomic *)&real_##name, #name, NULL, LIBHIP))
#define SLOT(n) ((void *_Atomic *)&real_##n)

static int current_device(void)
{
	gg_pfn_hipGetDevice f = HELPER(hipGetDevice);
	int d = -1;
	if (!f || f(&d) != GG_hipSuccess || d < 0 || d >= GG_MAX_DEVICES)
		return -1;
	return d;
}

/* Whether the runtime accepts ordinal dev (0 <= dev < GG_MAX_DEVICES), for
 * the calls that name a device themselves; as in hook_cuda.c, a device the
 * runtime refuses is passed through uncharged and never bound in the pod
 * region (issue 9, finding 6). */
static _Atomic uint64_t accepted; /* bit d: d < hipGetDeviceCount() */
_Static_assert(GG_MAX_DEVICES <= 64, "one bit per ordinal");

static int device_accepted(int dev)
{
	/* relaxed: the bits publish nothing but themselves (the runtime's
	 * count never changes in a process); a missing bit costs one question. */
	if (GG_LIKELY(atomic_load_explicit(&accepted, memory_order_relaxed) & (1ull << dev)))
		return 1;
	gg_pfn_hipGetDeviceCount f = HELPER(hipGetDeviceCount);
	int n = 0;
	if (!f)
		return 1; /* cannot ask: governed as before */
	if (f(&n) != GG_hipSuccess || n <= 0)
		return 0;
	uint64_t all = n >= 64 ? ~0ull : (1ull << n) - 1;
	/* relaxed: as above; the RMW keeps what other threads set. */
	atomic_fetch_or_explicit(&accepted, all, memory_order_relaxed);
	return dev < n;
}

static int device_total(int dev, uint64_t *bytes)
{
	gg_pfn_hipDeviceTotalMem f = REAL(hipDeviceTotalMem);
	size_t total;
	if (!f || f(&total, dev) != GG_hipSuccess)
		return -1;
	*bytes = total;
	return 0;
}

static int pool_query(void *pool, uint64_t *reserved, uint64_t *used)
{
	gg_pfn_hipMemPoolGetAttribute f = HELPER(hipMemPoolGetAttribute);
	uint64_t r = 0, u = 0;
	if (!f || f((gg_hipMemPool_t)pool, GG_hipMemPoolAttrReservedMemCurrent, &r) != GG_hipSuccess ||
	    (used && f((gg_hipMemPool_t)pool, GG_hipMemPoolAttrUsedMemCurrent, &u) != GG_hipSuccess))
		return -1;
	*reserved = r;
	if (used)
		*used = u;
	return 0;
}

/* HIP has no contexts to show: hipDeviceReset frees a whole device's
 * memory, so each device is one "context" of the books (ctx.c). */
static uint16_t hip_ctx(int dev)
{
	static _Atomic uint16_t ids[GG_MAX_DEVICES];
	/* relaxed: every thread computes the same id (gg_ctx_id is idempotent). */
	uint16_t id = atomic_load_explicit(&ids[dev], memory_order_relaxed);
	if (GG_UNLIKELY(id == 0)) {
		id = gg_ctx_id(GG_CTX_HIP_KEY(dev), dev, 1);
		atomic_store_explicit(&ids[dev], id, memory_order_relaxed);
		gg_shared_check_card(dev, GG_RT_HIP); /* CUDA's dev on another card? */
	}
	return id;
}

/* Before a destroy: a pool that is not its device's default one (whose
 * destroy the runtime refuses) is trimmed, as the destroy would. */
static int pool_trim(void *pool)
{
	gg_pfn_hipMemPoolTrimTo trim = REAL(hipMemPoolTrimTo);
	gg_pfn_hipDeviceGetDefaultMemPool gd = HELPER(hipDeviceGetDefaultMemPool);
	gg_hipMemPool_t def = NULL;
	int dev = gg_pool_device(pool);
	if (!trim || !gd || dev < 0 || gd(&def, dev) != GG_hipSuccess || def == (gg_hipMemPool_t)pool)
		return -1;
	return trim((gg_hipMemPool_t)pool, 0) == GG_hipSuccess ? 0 : -1;
}

/* Undoing a pool's growth (shape.c). */
static int pool_free_async(uint64_t ptr, void *stream)
{
	gg_pfn_hipFreeAsync f = REAL(hipFreeAsync);
	return f && f((void *)(uintptr_t)ptr, stream) == GG_hipSuccess ? 0 : -1;
}

static int pool_sync(void)
{
	gg_pfn_hipDeviceSynchronize f = REAL(hipDeviceSynchronize);
	return f && f() == GG_hipSuccess ? 0 : -1;
}

static int pool_trim_to(void *pool, uint64_t keep)
{
	gg_pfn_hipMemPoolTrimTo f = REAL(hipMemPoolTrimTo);
	return f && f(pool, keep) == GG_hipSuccess ? 0 : -1;
}

/* What the shapes (shape.c) need of the runtime. A refusal is
 * hipErrorOutOfMemory; each device is one context of the books, and pinned
 * memory belongs to none. ROCm cannot say which pool a pointer came from. */
static const struct gg_runtime hip = {
    .runtime = GG_RT_HIP,
    .ok = GG_hipSuccess,
    .oom = GG_hipErrorOutOfMemory,
    .device = current_device,
    .dev_ctx = hip_ctx,
    .total = device_total,
    .pool_query = pool_query,
    .pool_trim = pool_trim,
    .free_async = pool_free_async,
    .sync = pool_sync,
    .trim = pool_trim_to,
};

GG_EXPORT gg_hipError_t hipMalloc(void **ptr, size_t size)
{
	gg_pfn_hipMalloc real = REAL(hipMalloc);
	if (!real)
		return GG_hipErrorNotInitialized;
	GG_SIG_REFUSE(GG_hipErrorOutOfMemory);
	if (gg_in_hook || !ptr || size == 0)
		return real(ptr, size); /* hipMalloc(&p, 0) succeeds with NULL: the runtime's answer */
	GG_ENTER();
	struct gg_alloc a = {.dev = current_device(),
	                     .api = GPUGUARD_API_HIP_MALLOC,
	                     .ns = GG_NS_PTR,
	                     .charged = 1,
	                     .size = size,
	                     .out = ptr};
	gg_hipError_t rc = GG_ALLOC(&hip, &a, real(ptr, size));
	GG_LEAVE();
	return rc;
}

GG_EXPORT gg_hipError_t hipExtMallocWithFlags(void **ptr, size_t size, unsigned int flags)
{
	gg_pfn_hipExtMallocWithFlags real = REAL(hipExtMallocWithFlags);
	if (!real)
		return GG_hipErrorNotInitialized;
	GG_SIG_REFUSE(GG_hipErrorOutOfMemory);
	if (gg_in_hook || !ptr || size == 0)
		return real(ptr, size, flags);
	GG_ENTER();
	struct gg_alloc a = {.dev = current_device(),
	                     .api = GPUGUARD_API_HIP_EXT_MALLOC,
	                     .ns = GG_NS_PTR,
	                     .charged = 1,
	                     .size = size,
	                     .out = ptr};
	gg_hipError_t rc = GG_ALLOC(&hip, &a, real(ptr, size, flags));
	GG_LEAVE();
	return rc;
}

GG_EXPORT gg_hipError_t hipMallocManaged(void **ptr, size_t size, unsigned int flags)
{
	gg_pfn_hipMallocManaged real = REAL(hipMallocManaged);
	if (!real)
		return GG_hipErrorNotInitialized;
	GG_SIG_REFUSE(GG_hipErrorOutOfMemory);
	if (gg_in_hook || !ptr || size == 0)
		return real(ptr, size, flags);
	GG_ENTER();
	struct gg_alloc a = {.dev = current_device(),
	                     .api = GPUGUARD_API_HIP_MALLOC_MANAGED,
	                     .ns = GG_NS_PTR,
	                     .charged = gg_opt.charge_managed,
	                     .size = size,
	                     .out = ptr};
	gg_hipError_t rc = GG_ALLOC(&hip, &a, real(ptr, size, flags));
	GG_LEAVE();
	return rc;
}

GG_EXPORT gg_hipError_t hipMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height)
{
	gg_pfn_hipMallocPitch real = REAL(hipMallocPitch);
	if (!real)
		return GG_hipErrorNotInitialized;
	GG_SIG_REFUSE(GG_hipErrorOutOfMemory);
	if (gg_in_hook || !ptr || !pitch || width == 0 || height == 0 || width > SIZE_MAX / 2 / height)
		return real(ptr, pitch, width, height);
	GG_ENTER();
	/* reserved for a 512-byte-aligned pitch, settled to the runtime's */
	struct gg_alloc a = {.dev = current_device(),
	                     .api = GPUGUARD_API_HIP_MALLOC_PITCH,
	                     .ns = GG_NS_PTR,
	                     .charged = 1,
	                     .size = (width + 511) / 512 * 512 * height,
	                     .out = ptr,
	                     .pitch = pitch,
	                     .rows = height};
	gg_hipError_t rc = GG_ALLOC(&hip, &a, real(ptr, pitch, width, height));
	GG_LEAVE();
	return rc;
}

GG_EXPORT gg_hipError_t hipFree(void *ptr)
{
	gg_pfn_hipFree real = REAL(hipFree);
	if (!real)
		return GG_hipErrorNotInitialized;
	if (gg_in_hook || !ptr)
		return real(ptr);
	GG_ENTER();
	struct gg_free f;
	gg_free_begin(&f, GG_NS_PTR, (uint64_t)(uintptr_t)ptr);
	gg_hipError_t rc = gg_free_end(&hip, &f, real(ptr));
	GG_LEAVE();
	return rc;
}

/* For a dump on a failure: the runtime's free/total on the failing thread. */
static int runtime_meminfo(uint64_t *free_bytes, uint64_t *total_bytes)
{
	gg_pfn_hipMemGetInfo f = REAL(hipMemGetInfo);
	size_t fr, to;
	if (!f || f(&fr, &to) != GG_hipSuccess)
		return -1;
	*free_bytes = fr;
	*total_bytes = to;
	return 0;
}

/* Who device dev is, for the pod region: its UUID and physical total. */
static int runtime_identity(int dev, uint8_t uuid[16], uint64_t *physical)
{
	gg_pfn_hipDeviceGetUuid f = HELPER(hipDeviceGetUuid);
	gg_hipUUID u;
	if (!f)
		return 1; /* no HIP runtime here: not this process's HIP card */
	if (f(&u, dev) != GG_hipSuccess)
		return -1;
	memcpy(uuid, u.bytes, 16);
	gg_pfn_hipDeviceTotalMem t = REAL(hipDeviceTotalMem);
	size_t total;
	if (t && t(&total, dev) == GG_hipSuccess)
		*physical = total;
	return 0;
}

/* Only stores pointers: no HIP call from a constructor. */
__attribute__((constructor)) static void register_meminfo(void)
{
	gg_dump_set_meminfo(1, runtime_meminfo);
	gg_shared_set_identity(1, runtime_identity);
}

/* ---- pinned host memory: tracked for dumps, never charged ------------- */

GG_EXPORT gg_hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags)
{
	gg_pfn_hipHostMalloc real = REAL(hipHostMalloc);
	if (!real)
		return GG_hipErrorNotInitialized;
	if (gg_in_hook || !ptr || size == 0)
		return real(ptr, size, flags);
	GG_ENTER();
	gg_host_alloc_begin(&hip);
	gg_hipError_t rc = gg_host_alloc_end(&hip, real(ptr, size, flags), ptr, size);
	GG_LEAVE();
	return rc;
}

GG_EXPORT gg_hipError_t hipHostFree(void *ptr)
{
	gg_pfn_hipHostFree real = REAL(hipHostFree);
	if (!real)
		return GG_hipErrorNotInitialized;
	if (gg_in_hook || !ptr)
		return real(ptr);
	GG_ENTER();
	struct gg_free f;
	gg_host_free_begin(&f, (uint64_t)(uintptr_t)ptr);
	gg_hipError_t rc = gg_host_free_end(&hip, &f, real(ptr));
	GG_LEAVE();
	return rc;
}

/* ---- stream-ordered ---------------------------------------------------- */

/* The device a stream-ordered call on s is charged to: the stream's own (a
 * stream of another device draws from that device's pool), the current one
 * for the null and per-thread streams or when the runtime cannot tell. */
static int stream_device(gg_hipStream_t s)
{
	int dev = current_device();
	if ((uintptr_t)s <= 2)
		return dev;
	gg_pfn_hipStreamGetDevice f = HELPER(hipStreamGetDevice);
	int d = -1;
	if (!f || f(s, &d) != GG_hipSuccess || d < 0 || d >= GG_MAX_DEVICES)
		return dev;
	return d;
}

GG_EXPORT gg_hipError_t hipMallocAsync(void **ptr, size_t size, gg_hipStream_t stream)
{
	gg_pfn_hipMallocAsync real = REAL(hipMallocAsync);
	if (!real)
		return GG_hipErrorNotInitialized;
	GG_SIG_REFUSE(GG_hipErrorOutOfMemory);
	if (gg_in_hook || !ptr || size == 0)
		return real(ptr, size, stream);
	GG_ENTER();
	int dev = stream_device(stream); /* its pool is that device's current one */
	gg_hipMemPool_t pool = NULL;
	gg_pfn_hipDeviceGetMemPool gp = HELPER(hipDeviceGetMemPool);
	if (dev >= 0 && (!gp || gp(&pool, dev) != GG_hipSuccess))
		pool = NULL;
	struct gg_pool_alloc pa = {.a = {.dev = dev,
	                                 .api = GPUGUARD_API_HIP_MALLOC_ASYNC,
	                                 .ns = GG_NS_PTR,
	                                 .charged = 1,
	                                 .size = size,
	                                 .out = ptr},
	                           .pool = pool,
	                           .stream = stream};
	gg_hipError_t rc = GG_POOL_ALLOC(&hip, &pa, real(ptr, size, stream));
	GG_LEAVE();
	return rc;
}

GG_EXPORT gg_hipError_t hipMallocFromPoolAsync(void **ptr, size_t size, gg_hipMemPool_t pool, gg_hipStream_t stream)
{
	gg_pfn_hipMallocFromPoolAsync real = REAL(hipMallocFromPoolAsync);
	if (!real)
		return GG_hipErrorNotInitialized;
	GG_SIG_REFUSE(GG_hipErrorOutOfMemory);
	if (gg_in_hook || !ptr || size == 0 || !pool)
		return real(ptr, size, pool, stream);
	GG_ENTER();
	int dev = gg_pool_device(pool);
	if (dev < 0)
		dev = stream_device(stream); /* a pool we did not see created */
	struct gg_pool_alloc pa = {.a = {.dev = dev,
	                                 .api = GPUGUARD_API_HIP_MALLOC_FROM_POOL,
	                                 .ns = GG_NS_PTR,
	                                 .charged = 1,
	                                 .size = size,
	                                 .out = ptr},
	                           .pool = pool,
	                           .stream = stream};
	gg_hipError_t rc = GG_POOL_ALLOC(&hip, &pa, real(ptr, size, pool, stream));
	GG_LEAVE();
	return rc;
}

GG_EXPORT gg_hipError_t hipFreeAsync(void *ptr, gg_hipStream_t stream)
{
	gg_pfn_hipFreeAsync real = REAL(hipFreeAsync);
	if (!real)
		return GG_hipErrorNotInitialized;
	if (gg_in_hook || !ptr)
		return real(ptr, stream);
	GG_ENTER();
	struct gg_free f;
	gg_free_begin(&f, GG_NS_PTR, (uint64_t)(uintptr_t)ptr);
	gg_hipError_t rc = gg_free_end(&hip, &f, real(ptr, stream));
	GG_LEAVE();
	return rc;
}

GG_EXPORT gg_hipError_t hipMemPoolCreate(gg_hipMemPool_t *pool, const gg_hipMemPoolProps *props)
{
	gg_pfn_hipMemPoolCreate real = REAL(hipMemPoolCreate);
	if (!real)
		return GG_hipErrorNotInitialized;
	int dev = props && props->location.type == GG_hipMemLocationTypeDevice ? props->location.id : -1;
	return gg_pool_created(&hip, real(pool, props), pool, dev);
}

GG_EXPORT gg_hipError_t hipMemPoolDestroy(gg_hipMemPool_t pool)
{
	gg_pfn_hipMemPoolDestroy real = REAL(hipMemPoolDestroy);
	if (!real)
		return GG_hipErrorNotInitialized;
	if (gg_in_hook)
		return real(pool);
	GG_ENTER();
	struct gg_pool_doom d;
	gg_pool_destroy_enter(&hip, pool, &d);
	gg_hipError_t rc = gg_pool_destroy_leave(&hip, pool, &d, real(pool));
	GG_LEAVE();
	return rc;
}

GG_EXPORT gg_hipError_t hipMemPoolTrimTo(gg_hipMemPool_t pool, size_t keep)
{
	gg_pfn_hipMemPoolTrimTo real = REAL(hipMemPoolTrimTo);
	if (!real)
		return GG_hipErrorNotInitialized;
	if (gg_in_hook)
		return real(pool, keep);
	GG_ENTER();
	gg_hipError_t rc = gg_pool_trimmed(&hip, real(pool, keep), pool);
	GG_LEAVE();
	return rc;
}

/* ---- reset --------------------------------------------------------------- */

/* hipDeviceReset frees every allocation of the current device (ROCm: "destroy
 * all resources ... on the current device"): the books follow. */
GG_EXPORT gg_hipError_t hipDeviceReset(void)
{
	gg_pfn_hipDeviceReset real = REAL(hipDeviceReset);
	if (!real)
		return GG_hipErrorNotInitialized;
	if (gg_in_hook)
		return real();
	GG_ENTER();
	int dev = current_device();
	struct gg_ctx_drop d = {0};
	if (dev >= 0)
		gg_ctx_drop_begin(&d, dev, GG_CTX_HIP_KEY(dev));
	gg_hipError_t rc = real();
	gg_ctx_drop_end(&d, rc == GG_hipSuccess);
	if (rc == GG_hipSuccess && dev >= 0)
		gg_pool_after_reset(dev);
	GG_LEAVE();
	return rc;
}

/* ---- virtual memory management ---------------------------------------- */

/* The device of a hipMemCreate request, or -1 if it is not device memory.
 * ROCm 6 moved `location` (see hip_abi.h), so read it by runtime version. */
static int vmm_device(const gg_hipMemAllocationProp *prop)
{
	static _Atomic int layout; /* 0 unknown, 5 or 6 */
	/* relaxed: every thread computes the same answer from the runtime. */
	int l = atomic_load_explicit(&layout, memory_order_relaxed);
	if (!l) {
		int v = 0;
		gg_pfn_hipRuntimeGetVersion f = HELPER(hipRuntimeGetVersion);
		l = f && f(&v) == GG_hipSuccess && v < 60000000 ? 5 : 6;
		atomic_store_explicit(&layout, l, memory_order_relaxed);
	}
	const gg_hipMemLocation *loc = l == 5 ? &prop->location : &((const gg_hipMemAllocationProp_v6 *)prop)->location;
	if (loc->type != GG_hipMemLocationTypeDevice || loc->id < 0 || loc->id >= GG_MAX_DEVICES ||
	    !device_accepted(loc->id))
		return -1; /* uncharged: the runtime answers for itself */
	return loc->id;
}

GG_EXPORT gg_hipError_t hipMemCreate(gg_hipMemGenericAllocationHandle_t *handle, size_t size,
                                     const gg_hipMemAllocationProp *prop, unsigned long long flags)
{
	gg_pfn_hipMemCreate real = REAL(hipMemCreate);
	if (!real)
		return GG_hipErrorNotInitialized;
	GG_SIG_REFUSE(GG_hipErrorOutOfMemory);
	if (gg_in_hook || !handle || !prop || size == 0)
		return real(handle, size, prop, flags);
	GG_ENTER();
	int dev = vmm_device(prop);
	struct gg_alloc a = {
	    .dev = dev, .api = GPUGUARD_API_HIP_MEM_CREATE, .ns = GG_NS_VMM, .charged = 1, .size = size, .out = handle};
	gg_hipError_t rc = GG_ALLOC(&hip, &a, real(handle, size, prop, flags));
	GG_LEAVE();
	return rc;
}

GG_EXPORT gg_hipError_t hipMemRelease(gg_hipMemGenericAllocationHandle_t handle)
{
	gg_pfn_hipMemRelease real = REAL(hipMemRelease);
	if (!real)
		return GG_hipErrorNotInitialized;
	if (gg_in_hook || !handle)
		return real(handle);
	GG_ENTER();
	struct gg_release r; /* only the last reference or mapping refunds */
	gg_release_begin(&r, (uint64_t)(uintptr_t)handle);
	gg_hipError_t rc = gg_release_end(&hip, &r, real(handle));
	GG_LEAVE();
	return rc;
}

GG_EXPORT gg_hipError_t hipMemRetainAllocationHandle(gg_hipMemGenericAllocationHandle_t *handle, void *addr)
{
	gg_pfn_hipMemRetainAllocationHandle real = REAL(hipMemRetainAllocationHandle);
	if (!real)
		return GG_hipErrorNotInitialized;
	return gg_note_retained(&hip, real(handle, addr), handle);
}

/* Imported memory is its exporter's charge (see hook_cuda.c). */
GG_EXPORT gg_hipError_t hipMemImportFromShareableHandle(gg_hipMemGenericAllocationHandle_t *handle, void *osHandle,
                                                        gg_hipMemAllocationHandleType shHandleType)
{
	gg_pfn_hipMemImportFromShareableHandle real = REAL(hipMemImportFromShareableHandle);
	if (!real)
		return GG_hipErrorNotInitialized;
	return gg_note_imported(&hip, real(handle, osHandle, shHandleType), handle);
}

/* Reservations and mappings, for dumps (see hook_cuda.c, vmm.c). */
GG_EXPORT gg_hipError_t hipMemAddressReserve(void **ptr, size_t size, size_t alignment, void *addr,
                                             unsigned long long flags)
{
	gg_pfn_hipMemAddressReserve real = REAL(hipMemAddressReserve);
	if (!real)
		return GG_hipErrorNotInitialized;
	return gg_note_reserved(&hip, real(ptr, size, alignment, addr, flags), ptr, size);
}

GG_EXPORT gg_hipError_t hipMemAddressFree(void *ptr, size_t size)
{
	gg_pfn_hipMemAddressFree real = REAL(hipMemAddressFree);
	if (!real)
		return GG_hipErrorNotInitialized;
	if (gg_in_hook)
		return real(ptr, size);
	GG_ENTER();
	struct gg_vmm_op op;
	gg_unmap_begin(&op, (uint64_t)(uintptr_t)ptr, size);
	gg_hipError_t rc = gg_unmap_end(&hip, &op, real(ptr, size), (uint64_t)(uintptr_t)ptr, size, 1);
	GG_LEAVE();
	return rc;
}

GG_EXPORT gg_hipError_t hipMemMap(void *ptr, size_t size, size_t offset, gg_hipMemGenericAllocationHandle_t handle,
                                  unsigned long long flags)
{
	gg_pfn_hipMemMap real = REAL(hipMemMap);
	if (!real)
		return GG_hipErrorNotInitialized;
	gg_hipError_t rc = real(ptr, size, offset, handle, flags);
	return gg_note_mapped(&hip, rc, (uint64_t)(uintptr_t)ptr, size, (uint64_t)(uintptr_t)handle);
}

GG_EXPORT gg_hipError_t hipMemUnmap(void *ptr, size_t size)
{
	gg_pfn_hipMemUnmap real = REAL(hipMemUnmap);
	if (!real)
		return GG_hipErrorNotInitialized;
	if (gg_in_hook)
		return real(ptr, size);
	GG_ENTER();
	struct gg_vmm_op op;
	gg_unmap_begin(&op, (uint64_t)(uintptr_t)ptr, size);
	gg_hipError_t rc = gg_unmap_end(&hip, &op, real(ptr, size), (uint64_t)(uintptr_t)ptr, size, 0);
	GG_LEAVE();
	return rc;
}

/* ---- memory info ------------------------------------------------------- */

GG_EXPORT gg_hipError_t hipMemGetInfo(size_t *free, size_t *total)
{
	gg_pfn_hipMemGetInfo real = REAL(hipMemGetInfo);
	if (!real)
		return GG_hipErrorNotInitialized;
	if (gg_in_hook)
		return real(free, total);
	GG_ENTER();
	size_t f = 0, t = 0;
	gg_hipError_t rc = real(&f, &t);
	rc = gg_meminfo_end(&hip, rc, f, t, free, total);
	GG_LEAVE();
	return rc;
}

GG_EXPORT gg_hipError_t hipDeviceTotalMem(size_t *bytes, gg_hipDevice_t dev)
{
	gg_pfn_hipDeviceTotalMem real = REAL(hipDeviceTotalMem);
	if (!real)
		return GG_hipErrorNotInitialized;
	if (gg_in_hook || !bytes || dev < 0 || dev >= GG_MAX_DEVICES)
		return real(bytes, dev);
	GG_ENTER();
	gg_hipError_t rc = gg_total_end(&hip, real(bytes, dev), bytes, dev);
	GG_LEAVE();
	return rc;
}

/* ---- synchronisation points ------------------------------------------- */

/* As in hook_cuda.c: pools give reserve back at a synchronisation; credit it
 * there (issue 9, finding 3). The runtime's result is returned untouched. */
GG_EXPORT gg_hipError_t hipStreamSynchronize(gg_hipStream_t stream)
{
	gg_pfn_hipStreamSynchronize real = REAL(hipStreamSynchronize);
	if (!real)
		return GG_hipErrorNotInitialized;
	return gg_note_synced(&hip, real(stream));
}

GG_EXPORT gg_hipError_t hipDeviceSynchronize(void)
{
	gg_pfn_hipDeviceSynchronize real = REAL(hipDeviceSynchronize);
	if (!real)
		return GG_hipErrorNotInitialized;
	return gg_note_synced(&hip, real());
}

/* ---- for the dlsym override -------------------------------------------- */

#define SYM_ROW(n, ...) {#n, (void *)n, SLOT(n)},
static const struct gg_sym sym_table[] = {GG_HIP_HOOKS(SYM_ROW)};
#define NSYMS (sizeof(sym_table) / sizeof(sym_table[0]))

int gg_hip_is_ours(void *fn)
{
	return gg_sym_is_ours(sym_table, NSYMS, fn);
}

void *gg_hip_wrap_symbol(const char *name, void *real)
{
	return gg_sym_wrap(sym_table, NSYMS, name, real);
}
