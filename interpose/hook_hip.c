/* gpuguard: HIP runtime hooks. HIP programs bind libamdhip64 symbols
 * directly, so plain interposition catches them (DESIGN.md §1); a refusal is
 * hipErrorOutOfMemory. The bodies are shape.c's, shared with the CUDA hooks. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "hook_hip.h"
#include "base.h"
#include "ctx.h"
#include "dump.h"
#include "gpuguard/hip_abi.h"
#include "hooks.h"
#include "init.h"
#include "options.h"
#include "pool.h"
#include "resolve.h"
#include "shape.h"
#include "shared.h"
#include "signal.h"
#include "table.h"
#include "veneer.h"

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
GG_HIP_HOOKS(DECLARE_HOOK)
HIP_HELPERS(DECLARE_REAL)

#define GG_VENEER_LIB LIBHIP
#define GG_VENEER_RUNTIME GG_RT_HIP /* GG_ENTER: devices bound here are HIP's */
#define GG_VENEER_RESULT gg_hipError_t
#define GG_VENEER_RT hip
#define GG_VENEER_OK GG_hipSuccess
#define GG_VENEER_OOM GG_hipErrorOutOfMemory
#define GG_VENEER_MISSING GG_hipErrorNotInitialized

/* The calling thread's current device, as our hooks last knew it (the
 * CUDA side's cache of the current context, hook_cuda.c, carried over:
 * hipGetDevice was 57 instructions of every allocation on the simulator,
 * and ROCm's entry (HIP_INIT_API) is no cheaper). HIP keeps the current
 * device per thread, and it changes only on the thread itself: by
 * hipSetDevice, or by the context calls ROCm deprecated (hipCtxCreate,
 * hipCtxDestroy, hipCtxSetCurrent, hipCtxPushCurrent, hipCtxPopCurrent),
 * each of which we wrap (below; a program binds them, looks them up with
 * dlsym, or asks hipGetProcAddress, which ROCm answers with dlsym: each
 * hands out our hook). So the cache is trusted for DEV_RECHECK allocations
 * of the thread; then the runtime is asked again, against a path we do not
 * see (a private table's entry). An answer that differs from a cache no
 * hook cleared is such a path: then the process asks the runtime on every
 * allocation from then on (dev_cache_off), and says so once. A thread's
 * first allocation asks (its block starts at 0: hip_left 0, hip_known 0). */
#define DEV_RECHECK 256
/* Set for good once an answer showed a change no hook saw. relaxed: a
 * thread that reads 0 a little late keeps its cache for at most
 * DEV_RECHECK more allocations, and finds the same change itself. */
static _Atomic int dev_cache_off;

/* A call that may change the current device ran on this thread: its next
 * allocation asks. Before and after the runtime's call, so that a signal
 * handler that allocates in between asks too, and whatever it cached is
 * cleared again. Thread-local stores only. */
static inline void dev_moved(void)
{
	gg_self.hip_left = 0;
	gg_self.hip_moved = 1;
}
static inline gg_hipError_t dev_moved_after(gg_hipError_t rc)
{
	dev_moved();
	return rc;
}

/* current_device past its cache: ask the runtime. */
static int __attribute__((noinline)) current_device_ask(void)
{
	gg_pfn_hipGetDevice f = HELPER(hipGetDevice);
	int d = -1;
	int moved = gg_self.hip_moved;
	gg_self.hip_moved = 0;
	if (!f || f(&d) != GG_hipSuccess || d < 0 || d >= GG_MAX_DEVICES) {
		gg_self.hip_known = 0; /* asked again next time */
		return -1;
	}
	/* The cache was due for its check, with no hook of ours between, and
	 * the runtime names another device: it changed where we cannot see. */
	if (!moved && gg_self.hip_known && gg_self.hip_dev != d &&
	    !atomic_exchange_explicit(&dev_cache_off, 1, memory_order_relaxed))
		gg_log(GG_LOG_WARN, "the current HIP device changed through a path gpuguard does not wrap; "
		                    "asking the runtime for it on every allocation from now on");
	gg_self.hip_dev = (int16_t)d;
	gg_self.hip_known = 1;
	gg_self.hip_left = atomic_load_explicit(&dev_cache_off, memory_order_relaxed) ? 0 : DEV_RECHECK;
	return d;
}

/* The calling thread's device, or -1 where the runtime names none. */
static inline __attribute__((always_inline)) int current_device(void)
{
	if (GG_LIKELY(gg_self.hip_left != 0)) {
		gg_self.hip_left--;
		return gg_self.hip_dev;
	}
	return current_device_ask();
}
/* The same, out of line: struct gg_runtime's device(). */
static int device_of_thread(void)
{
	return current_device();
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
static _Atomic uint16_t hip_ctx_ids[GG_MAX_DEVICES];

static uint16_t __attribute__((noinline)) hip_ctx_slow(int dev)
{
	uint16_t id = gg_ctx_id(GG_CTX_HIP_KEY(dev), dev, 1);
	/* relaxed: every thread computes the same id (gg_ctx_id is idempotent). */
	atomic_store_explicit(&hip_ctx_ids[dev], id, memory_order_relaxed);
	gg_shared_check_card(dev, GG_RT_HIP); /* CUDA's dev on another card? */
	return id;
}

/* Inline, for the allocation hooks (gg_bind_budget calls it through the
 * constant struct below, which the compiler folds): a load and a test. */
static inline uint16_t hip_ctx(int dev)
{
	/* relaxed: as in hip_ctx_slow. */
	uint16_t id = atomic_load_explicit(&hip_ctx_ids[dev], memory_order_relaxed);
	return GG_LIKELY(id != 0) ? id : hip_ctx_slow(dev);
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
GG_VENEER_CALL(pool_free_async, hipFreeAsync, (uint64_t ptr, void *stream), ((void *)(uintptr_t)ptr, stream))
GG_VENEER_CALL(pool_sync, hipDeviceSynchronize, (void), ())
GG_VENEER_CALL(pool_trim_to, hipMemPoolTrimTo, (void *pool, uint64_t keep), (pool, keep))

/* What the shapes (shape.c) need of the runtime. A refusal is
 * hipErrorOutOfMemory; each device is one context of the books, and pinned
 * memory belongs to none. ROCm cannot say which pool a pointer came from. */
static const struct gg_runtime hip = {
    .runtime = GG_RT_HIP,
    .ok = GG_hipSuccess,
    .oom = GG_hipErrorOutOfMemory,
    .device = device_of_thread,
    .dev_ctx = hip_ctx,
    .total = device_total,
    .pool_query = pool_query,
    .pool_trim = pool_trim,
    .free_async = pool_free_async,
    .sync = pool_sync,
    .trim = pool_trim_to,
};

/* hipMalloc(&p, 0) succeeds with NULL: the runtime's answer. */
GG_VENEER_ALLOC(hipMalloc, (void **ptr, size_t size), (ptr, size), !ptr || size == 0, .dev = current_device(),
                .api = GPUGUARD_API_HIP_MALLOC, .ns = GG_NS_PTR, .charged = 1, .size = size, .out = ptr)

GG_VENEER_ALLOC(hipExtMallocWithFlags, (void **ptr, size_t size, unsigned int flags), (ptr, size, flags),
                !ptr || size == 0, .dev = current_device(), .api = GPUGUARD_API_HIP_EXT_MALLOC, .ns = GG_NS_PTR,
                .charged = 1, .size = size, .out = ptr)

GG_VENEER_ALLOC(hipMallocManaged, (void **ptr, size_t size, unsigned int flags), (ptr, size, flags), !ptr || size == 0,
                .dev = current_device(), .api = GPUGUARD_API_HIP_MALLOC_MANAGED, .ns = GG_NS_PTR,
                .charged = gg_opt.charge_managed, .size = size, .out = ptr)

/* reserved for a 512-byte-aligned pitch, settled to the runtime's */
GG_VENEER_ALLOC(hipMallocPitch, (void **ptr, size_t *pitch, size_t width, size_t height), (ptr, pitch, width, height),
                !ptr || !pitch || width == 0 || height == 0 || width > SIZE_MAX / 2 / height, .dev = current_device(),
                .api = GPUGUARD_API_HIP_MALLOC_PITCH, .ns = GG_NS_PTR, .charged = 1,
                .size = (width + 511) / 512 * 512 * height, .out = ptr, .pitch = pitch, .rows = height)

GG_VENEER_FREE(hipFree, (void *ptr), (ptr), GG_NS_PTR, ptr)

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

GG_VENEER_HOST_ALLOC(hipHostMalloc, (void **ptr, size_t size, unsigned int flags), (ptr, size, flags), ptr, size)

GG_VENEER_HOST_FREE(hipHostFree, (void *ptr), (ptr), ptr)

/* ---- stream-ordered ---------------------------------------------------- */

/* The device a stream-ordered call on s is charged to: the stream's own (a
 * stream of another device draws from that device's pool), the current one
 * for the null and per-thread streams or when the runtime cannot tell. */
static int __attribute__((noinline)) stream_device_ask(gg_hipStream_t s)
{
	int dev = current_device();
	gg_pfn_hipStreamGetDevice f = HELPER(hipStreamGetDevice);
	int d = -1;
	if (!f || f(s, &d) != GG_hipSuccess || d < 0 || d >= GG_MAX_DEVICES)
		return dev;
	return d;
}
/* Inline: the null stream's device is the cached current one, with no
 * call (what PyTorch's hipMallocAsync backend passes most). */
static inline __attribute__((always_inline)) int stream_device(gg_hipStream_t s)
{
	if (GG_LIKELY((uintptr_t)s <= 2))
		return current_device();
	return stream_device_ask(s);
}

/* dev's current pool as the runtime says, or NULL. */
static gg_hipMemPool_t device_pool_handle(int dev)
{
	gg_hipMemPool_t pool = NULL;
	gg_pfn_hipDeviceGetMemPool gp = HELPER(hipDeviceGetMemPool);
	if (dev < 0 || !gp || gp(&pool, dev) != GG_hipSuccess)
		return NULL;
	return pool;
}

/* A device's current pool's registry entry as this thread last asked the
 * runtime for it: gg_self.hip_pool (pool.h's gg_pool_home_*, which say when
 * it holds; ROCm 7's hipMemSetMemPool is a path no hook sees).
 * hipGetProcAddress is no such path: ROCm answers it by dlsym on its own
 * handle, and our dlsym override hands out our hooks for the names we
 * govern (t_hip_lhip). The cache's miss: asks the runtime and fills it
 * (NULL: the whole way, the hook). */
static struct gg_pool *__attribute__((noinline)) device_pool_slow(int dev, uint32_t gen)
{
	return gg_pool_home_fill(&gg_self.hip_pool, device_pool_handle(dev), dev, gen, pool_query);
}

/* The device pool's blocks are charged to. As in hook_cuda.c's pool_home,
 * a pool we did not see created is a default or current one and belongs to
 * the device it was asked for (issue 25, item 2); only one no device owns
 * goes with its stream's. */
static int pool_device(gg_hipMemPool_t pool, gg_hipStream_t stream)
{
	int dev = gg_pool_device(pool);
	if (dev >= 0)
		return dev;
	gg_pfn_hipDeviceGetDefaultMemPool gd = HELPER(hipDeviceGetDefaultMemPool);
	gg_pfn_hipDeviceGetMemPool gc = HELPER(hipDeviceGetMemPool);
	for (int d = 0; gd && d < GG_MAX_DEVICES; d++) {
		gg_hipMemPool_t p = NULL;
		if (gd(&p, d) != GG_hipSuccess)
			break; /* past the last device */
		if (p == pool || (gc && gc(&p, d) == GG_hipSuccess && p == pool))
			return d;
	}
	return stream_device(stream);
}

/* hipMallocAsync draws from the current pool of the stream's device. As
 * hook_cuda.c's alloc_async: one path for a hit and a fill alike, so that
 * the record's commit is one call site (the stack cache checks its return
 * address, stack.c); pool: read only by begin's registry lookup, which that
 * path skips (gg_pool_alloc_begin_at). */
static inline __attribute__((always_inline)) gg_hipError_t alloc_async(gg_pfn_hipMallocAsync f, void **ptr, size_t size,
                                                                       gg_hipStream_t s)
{
	int dev = stream_device(s);
	struct gg_pool_alloc pa;
	uint32_t gen;
	struct gg_pool *p;
	if (GG_LIKELY(gg_pool_home_hit(&gg_self.hip_pool, dev, &gen)))
		p = gg_self.hip_pool.p;
	else if (!(p = device_pool_slow(dev, gen)))
		goto whole_way;
	gg_pool_alloc_init(&pa, GPUGUARD_API_HIP_MALLOC_ASYNC, dev, NULL, size, ptr, s);
	pa.p = p;
	return GG_POOL_ALLOC_HOME(&hip, &pa, f(ptr, size, s));
whole_way:
	gg_pool_alloc_init(&pa, GPUGUARD_API_HIP_MALLOC_ASYNC, dev, device_pool_handle(dev), size, ptr, s);
	return GG_POOL_ALLOC(&hip, &pa, f(ptr, size, s));
}

GG_VENEER(hipMallocAsync, (void **ptr, size_t size, gg_hipStream_t stream), (ptr, size, stream), 1, !ptr || size == 0,
          rc = alloc_async(real, ptr, size, stream);)

GG_VENEER_POOL_ALLOC(hipMallocFromPoolAsync, (void **ptr, size_t size, gg_hipMemPool_t pool, gg_hipStream_t stream),
                     (ptr, size, pool, stream), !ptr || size == 0 || !pool, GPUGUARD_API_HIP_MALLOC_FROM_POOL,
                     pool_device(pool, stream), pool, size, ptr, stream)

GG_VENEER_FREE(hipFreeAsync, (void *ptr, gg_hipStream_t stream), (ptr, stream), GG_NS_PTR, ptr)

#define POOL_DEV(props) ((props) && (props)->location.type == GG_hipMemLocationTypeDevice ? (props)->location.id : -1)
GG_VENEER_NOTE(hipMemPoolCreate, (gg_hipMemPool_t * pool, const gg_hipMemPoolProps *props), (pool, props),
               gg_pool_created, pool, POOL_DEV(props))

GG_VENEER_POOL_DESTROY(hipMemPoolDestroy, (gg_hipMemPool_t pool), (pool), pool)

GG_VENEER_POOL_TRIM(hipMemPoolTrimTo, (gg_hipMemPool_t pool, size_t keep), (pool, keep), pool)

/* A device's current pool changed: every thread's cached one (device_pool)
 * is asked for again. After the call, as in hook_cuda.c. */
static gg_hipError_t current_pool_set(gg_hipError_t rc)
{
	gg_pool_current_changed();
	return rc;
}
GG_VENEER_TO(hipDeviceSetMemPool, (int device, gg_hipMemPool_t mem_pool), current_pool_set, (real(device, mem_pool)))

/* ---- the current device ------------------------------------------------ */

/* The thread's next allocation asks for its device again (current_device).
 * The runtime's result is returned untouched, and the books are not
 * entered: a context's destroy frees nothing the books follow (README's
 * "Not governed"; hipDeviceReset does). */
#define DEV_HOOK(name, params, args) GG_VENEER_AROUND(name, params, args, dev_moved(), dev_moved_after)
#define DEV_NAME(n, ...) #n,

int gg_hip_dev_symbol(const char *name)
{
	static const char *const names[] = {GG_HIP_DEV_HOOKS(DEV_NAME)};
	return gg_sym_named(names, sizeof(names) / sizeof(names[0]), name);
}

DEV_HOOK(hipSetDevice, (int deviceId), (deviceId))
DEV_HOOK(hipCtxCreate, (gg_hipCtx_t * ctx, unsigned int flags, gg_hipDevice_t device), (ctx, flags, device))
DEV_HOOK(hipCtxDestroy, (gg_hipCtx_t ctx), (ctx))
DEV_HOOK(hipCtxSetCurrent, (gg_hipCtx_t ctx), (ctx))
DEV_HOOK(hipCtxPushCurrent, (gg_hipCtx_t ctx), (ctx))
DEV_HOOK(hipCtxPopCurrent, (gg_hipCtx_t * ctx), (ctx))

/* ---- reset --------------------------------------------------------------- */

/* hipDeviceReset frees every allocation of the current device (ROCm: "destroy
 * all resources ... on the current device"): the books follow. */
static gg_hipError_t device_reset(gg_pfn_hipDeviceReset real)
{
	int dev = current_device();
	struct gg_ctx_drop d = {0};
	if (dev >= 0)
		gg_ctx_drop_begin(&d, dev, GG_CTX_HIP_KEY(dev));
	gg_hipError_t rc = real();
	gg_ctx_drop_end(&d, rc == GG_hipSuccess, NULL); /* ROCm: not seen; as the simulator */
	if (rc == GG_hipSuccess && dev >= 0)
		gg_pool_after_reset(dev);
	return rc;
}

GG_VENEER(hipDeviceReset, (void), (), 0, 0, rc = device_reset(real);)

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

GG_VENEER_ALLOC(hipMemCreate,
                (gg_hipMemGenericAllocationHandle_t * handle, size_t size, const gg_hipMemAllocationProp *prop,
                 unsigned long long flags),
                (handle, size, prop, flags), !handle || !prop || size == 0, .dev = vmm_device(prop),
                .api = GPUGUARD_API_HIP_MEM_CREATE, .ns = GG_NS_VMM, .charged = 1, .size = size, .out = handle)

GG_VENEER_RELEASE(hipMemRelease, (gg_hipMemGenericAllocationHandle_t handle), (handle), !handle, handle)

GG_VENEER_NOTE(hipMemRetainAllocationHandle, (gg_hipMemGenericAllocationHandle_t * handle, void *addr), (handle, addr),
               gg_note_retained, handle)

/* Imported memory is its exporter's charge (see hook_cuda.c). */
GG_VENEER_NOTE(hipMemImportFromShareableHandle,
               (gg_hipMemGenericAllocationHandle_t * handle, void *osHandle,
                gg_hipMemAllocationHandleType shHandleType),
               (handle, osHandle, shHandleType), gg_note_imported, handle)

/* Reservations and mappings, for dumps (see hook_cuda.c, vmm.c). */
GG_VENEER_NOTE(hipMemAddressReserve, (void **ptr, size_t size, size_t alignment, void *addr, unsigned long long flags),
               (ptr, size, alignment, addr, flags), gg_note_reserved, ptr, size)

GG_VENEER_UNMAP(hipMemAddressFree, (void *ptr, size_t size), (ptr, size), ptr, size, 1)

GG_VENEER_NOTE(hipMemMap,
               (void *ptr, size_t size, size_t offset, gg_hipMemGenericAllocationHandle_t handle,
                unsigned long long flags),
               (ptr, size, offset, handle, flags), gg_note_mapped, (uint64_t)(uintptr_t)ptr, size,
               (uint64_t)(uintptr_t)handle)

GG_VENEER_UNMAP(hipMemUnmap, (void *ptr, size_t size), (ptr, size), ptr, size, 0)

/* ---- memory info ------------------------------------------------------- */

GG_VENEER_MEMINFO(hipMemGetInfo)

GG_VENEER_TOTAL(hipDeviceTotalMem, (size_t * bytes, gg_hipDevice_t dev), (bytes, dev), bytes, dev)

/* ---- synchronisation points ------------------------------------------- */

/* As in hook_cuda.c: pools give reserve back at a synchronisation; credit it
 * there (issue 9, finding 3). The runtime's result is returned untouched. */
GG_VENEER_NOTE(hipStreamSynchronize, (gg_hipStream_t stream), (stream), gg_note_synced)

GG_VENEER_NOTE(hipDeviceSynchronize, (void), (), gg_note_synced)

/* ---- for the dlsym override -------------------------------------------- */

#define SYM_ROW(n, ...) {#n, (void *)n, SLOT(n)},
GG_VENEER_SYMS(hip, GG_HIP_HOOKS(SYM_ROW))
