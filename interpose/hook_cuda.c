/* gpuguard: CUDA driver hooks. Each resolves the real function, runs its
 * shape (shape.c) around it and returns the driver's own result; a
 * refusal is CUDA_ERROR_OUT_OF_MEMORY, the one code PyTorch answers by
 * freeing its cache and retrying (DESIGN.md §2). Also the cuGetProcAddress
 * override through which cudart reaches every one of them (DESIGN.md §1). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "hook_cuda.h"
#include "account.h"
#include "base.h"
#include "ceiling.h"
#include "ctx.h"
#include "dump.h"
#include "export.h"
#include "footprint.h"
#include "gpuguard/cuda_abi.h"
#include "graph.h"
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

#define LIBCUDA "libcuda.so.1"

/* ---- real function pointers ------------------------------------------- */

/* Functions we only call that cuda_abi.h does not list (the simulator
 * exports them among its extras): a stream's context and device (12080),
 * and the pool a pointer came from (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE). */
typedef gg_CUresult (*gg_pfn_cuStreamGetCtx)(gg_CUstream hStream, gg_CUcontext *pctx);
typedef gg_CUresult (*gg_pfn_cuStreamGetDevice)(gg_CUstream hStream, gg_CUdevice *device);
typedef gg_CUresult (*gg_pfn_cuPointerGetAttribute)(void *data, gg_CUpointer_attribute attribute, gg_CUdeviceptr ptr);
#define GG_CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE 17
/* CUDA 13's cuMemSetMemPool, which we wrap (it can change a device's
 * current pool): not in cuda_abi.h's list, which the simulator implements
 * whole, and the simulator lacks it. */
gg_CUresult cuMemSetMemPool(gg_CUmemLocation *location, gg_CUmemAllocationType type, gg_CUmemoryPool pool);
typedef gg_CUresult (*gg_pfn_cuMemSetMemPool)(gg_CUmemLocation *location, gg_CUmemAllocationType type,
                                              gg_CUmemoryPool pool);

/* Functions we only call. */
#define CU_HELPERS(X)                     \
	X(cuCtxGetDevice)                 \
	X(cuCtxGetLimit)                  \
	X(cuDeviceGetAttribute)           \
	X(cuStreamGetCtx)                 \
	X(cuStreamGetDevice)              \
	X(cuPointerGetAttribute)          \
	X(cuCtxGetCurrent)                \
	X(cuDeviceGetGraphMemAttribute)   \
	X(cuStreamGetCaptureInfo_v3)      \
	X(cuStreamGetCaptureInfo_v3_ptsz) \
	X(cuDeviceGetUuid_v2)             \
	X(cuDeviceGet)                    \
	X(cuDeviceGetMemPool)             \
	X(cuDeviceGetDefaultMemPool)      \
	X(cuMemPoolGetAttribute)          \
	X(cuDevicePrimaryCtxGetState)

/* The graph-memory attribute and capture status we read (cuda_abi.h names). */
#define GRAPH_MEM_USED_CURRENT GG_CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT
#define GRAPH_MEM_RESERVED_CURRENT GG_CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT
#define CAPTURE_ACTIVE GG_CU_STREAM_CAPTURE_STATUS_ACTIVE

/* The functions we wrap (GG_CUDA_HOOKS' rows, hooks.h) and those we only
 * call: one real pointer each. */
GG_CUDA_HOOKS(DECLARE_HOOK, DECLARE_HOOK_PTSZ)
CU_HELPERS(DECLARE_REAL)

#define GG_VENEER_LIB LIBCUDA
#define GG_VENEER_RUNTIME GG_RT_CUDA
#define GG_VENEER_RESULT gg_CUresult
#define GG_VENEER_RT cuda
#define GG_VENEER_OK GG_CUDA_SUCCESS
#define GG_VENEER_OOM GG_CUDA_ERROR_OUT_OF_MEMORY
#define GG_VENEER_MISSING GG_CUDA_ERROR_NOT_INITIALIZED

/* ---- helpers ----------------------------------------------------------- */

static void graph_reconcile(int dev, uint64_t credit);

/* The calling thread's current context, as our hooks last knew it (issue
 * 24: cuCtxGetCurrent was about 45 instructions of every allocation, the
 * simulator's answer and our checks of it). The driver keeps the current
 * context per thread, and it changes only on the thread itself: by
 * cuCtxSetCurrent, cuCtxPushCurrent, cuCtxPopCurrent, cuCtxCreate (which
 * pushes) and cuCtxDestroy (which pops its own), each of which we wrap
 * (the context hooks below, and cudart reaches them through
 * cuGetProcAddress, tests/abi/cudart13-lookups.txt, cuBLASLt through dlsym:
 * both hand out our hooks). A context hook clears the cache of its thread;
 * the destroy of a context we know, on any thread, moves gg_ctx_epoch
 * (ctx.c), as the driver may hand the same pointer to a new context. A
 * primary context's reset clears the cache of the thread that makes it;
 * the registry keeps the primary's id and device over it.
 *
 * So the cache is trusted while the epoch has not moved, for CTX_RECHECK
 * allocations of the thread; then the driver is asked again, as the pool
 * cache does (pool.h), against a path no hook sees (a private table's entry
 * point). An answer that differs from a cache no hook cleared is such a
 * path: then the process asks the driver on every allocation from then on
 * (ctx_cache_off), and says so once. Kept in the thread's block (base.h:
 * gg_self.cu_*), whose address the hook holds for its other per-thread
 * words already. */
#define CTX_RECHECK 256
/* Set for good once an answer showed a change no hook saw. relaxed: a
 * thread that reads 0 a little late keeps its cache for at most
 * CTX_RECHECK more allocations, and finds the same change itself. */
static _Atomic int ctx_cache_off;

/* A context hook ran on this thread: its next allocation asks the driver.
 * Before and after the driver's call, so that a signal handler that
 * allocates in between asks too, and whatever it cached is cleared again. */
static inline void ctx_moved(void)
{
	gg_self.cu_left = 0;
	gg_self.cu_moved = 1;
}
/* The same after the driver's call, whose result it passes on. */
static inline gg_CUresult ctx_moved_after(gg_CUresult rc)
{
	ctx_moved();
	return rc;
}

/* c's device and id, from the registry or, on the first sight of c on any
 * thread, from the driver; the cache filled with them under epoch (loaded
 * before the lookup, so that a destroy that lands after it is seen). */
static int __attribute__((noinline)) current_device_slow(gg_CUcontext c, uint32_t epoch)
{
	int dev = -1;
	uint16_t id = gg_ctx_find(c, &dev);
	if (!id) {
		/* First sight of this context on any thread: ask its device. */
		gg_pfn_cuCtxGetDevice f = HELPER(cuCtxGetDevice);
		gg_CUdevice d = -1;
		if (!f || f(&d) != GG_CUDA_SUCCESS || d < 0 || d >= GG_MAX_DEVICES) {
			gg_self.cu_ctx = NULL;
			gg_cur_ctx = 0;
			return -1;
		}
		dev = d;
		id = gg_ctx_id(c, dev, 0);
		gg_shared_check_card(dev, GG_RT_CUDA); /* HIP's dev on another card? */
	}
	gg_self.cu_ctx = c;
	gg_self.cu_epoch = epoch;
	gg_self.cu_id = id;
	gg_self.cu_dev = (int16_t)dev;
	gg_self.cu_left = atomic_load_explicit(&ctx_cache_off, memory_order_relaxed) ? 0 : CTX_RECHECK;
	gg_cur_ctx = id;
	return dev;
}

/* current_device past its cache: ask the driver. */
static int __attribute__((noinline)) current_device_ask(uint32_t epoch)
{
	gg_pfn_cuCtxGetCurrent f = HELPER(cuCtxGetCurrent);
	gg_CUcontext c = NULL;
	int moved = gg_self.cu_moved;
	gg_self.cu_moved = 0;
	if (!f || f(&c) != GG_CUDA_SUCCESS || !c) {
		gg_self.cu_ctx = NULL;
		gg_cur_ctx = 0;
		return -1;
	}
	if (GG_LIKELY(gg_self.cu_ctx == c && gg_self.cu_epoch == epoch)) {
		gg_self.cu_left = atomic_load_explicit(&ctx_cache_off, memory_order_relaxed) ? 0 : CTX_RECHECK;
		gg_cur_ctx = gg_self.cu_id;
		return gg_self.cu_dev;
	}
	/* The cache was due for its check, with no hook of ours between, and
	 * the driver names another context: it changed where we cannot see. */
	if (!moved && gg_self.cu_ctx && gg_self.cu_epoch == epoch &&
	    !atomic_exchange_explicit(&ctx_cache_off, 1, memory_order_relaxed))
		gg_log(GG_LOG_WARN, "the current context changed through a path gpuguard does not wrap; "
		                    "asking the driver for it on every allocation from now on");
	return current_device_slow(c, epoch);
}

/* The calling thread's device, or -1 without a context; sets gg_cur_ctx to
 * its context's id for the record the hook is about to make. */
static inline __attribute__((always_inline)) int current_device(void)
{
	/* acquire: pairs with the release bump in gg_ctx_forget, so a cache
	 * filled before a destroy is never trusted after it. */
	uint32_t epoch = atomic_load_explicit(&gg_ctx_epoch, memory_order_acquire);
	if (GG_LIKELY(gg_self.cu_left != 0 && gg_self.cu_epoch == epoch)) {
		gg_self.cu_left--;
		gg_cur_ctx = gg_self.cu_id;
		return gg_self.cu_dev;
	}
	return current_device_ask(epoch);
}
/* The same, out of line: struct gg_runtime's device(). */
static int device_of_thread(void)
{
	return current_device();
}

static int device_total(int dev, uint64_t *bytes)
{
	gg_pfn_cuDeviceTotalMem_v2 f = REAL(cuDeviceTotalMem_v2);
	size_t total;
	if (!f || f(&total, dev) != GG_CUDA_SUCCESS)
		return -1;
	*bytes = total;
	return 0;
}

static int pool_query(void *pool, uint64_t *reserved, uint64_t *used)
{
	gg_pfn_cuMemPoolGetAttribute f = HELPER(cuMemPoolGetAttribute);
	gg_cuuint64_t r = 0, u = 0;
	if (!f || f((gg_CUmemoryPool)pool, GG_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r) != GG_CUDA_SUCCESS ||
	    (used && f((gg_CUmemoryPool)pool, GG_CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &u) != GG_CUDA_SUCCESS))
		return -1;
	*reserved = r;
	if (used)
		*used = u;
	return 0;
}

static int pool_owner(uint64_t ptr, void *pool)
{
	gg_pfn_cuPointerGetAttribute f = HELPER(cuPointerGetAttribute);
	gg_CUmemoryPool owner = NULL;
	if (!f || f(&owner, GG_CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, ptr) != GG_CUDA_SUCCESS)
		return -1;
	return owner == (gg_CUmemoryPool)pool;
}

/* Before a destroy: a pool that is not its device's default one (whose
 * destroy the driver refuses) is trimmed, as the destroy would. */
static int pool_trim(void *pool)
{
	gg_pfn_cuMemPoolTrimTo trim = REAL(cuMemPoolTrimTo);
	gg_pfn_cuDeviceGetDefaultMemPool gd = HELPER(cuDeviceGetDefaultMemPool);
	gg_CUmemoryPool def = NULL;
	int dev = gg_pool_device(pool);
	if (!trim || !gd || dev < 0 || gd(&def, dev) != GG_CUDA_SUCCESS || def == (gg_CUmemoryPool)pool)
		return -1;
	return trim((gg_CUmemoryPool)pool, 0) == GG_CUDA_SUCCESS ? 0 : -1;
}

/* Undoing a pool's growth (shape.c). */
GG_VENEER_CALL(pool_free_async, cuMemFreeAsync, (uint64_t ptr, void *stream), (ptr, stream))
GG_VENEER_CALL(pool_sync, cuCtxSynchronize, (void), ())
GG_VENEER_CALL(pool_trim_to, cuMemPoolTrimTo, (void *pool, uint64_t keep), (pool, keep))

/* What the shapes (shape.c) need of the driver. A refusal is
 * CUDA_ERROR_OUT_OF_MEMORY; pinned memory goes with its context. */
static const struct gg_runtime cuda = {
    .runtime = GG_RT_CUDA,
    .ok = GG_CUDA_SUCCESS,
    .oom = GG_CUDA_ERROR_OUT_OF_MEMORY,
    .host_in_ctx = 1,
    .device = device_of_thread,
    .total = device_total,
    .pool_query = pool_query,
    .pool_owner = pool_owner,
    .pool_trim = pool_trim,
    .free_async = pool_free_async,
    .sync = pool_sync,
    .trim = pool_trim_to,
};

/* ---- linear allocations ------------------------------------------------ */

/* Bad arguments get the driver's own answer. */
GG_VENEER_ALLOC(cuMemAlloc_v2, (gg_CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize), !dptr || bytesize == 0,
                .dev = current_device(), .api = GPUGUARD_API_CU_MEM_ALLOC, .ns = GG_NS_PTR, .charged = 1,
                .size = bytesize, .out = dptr)

/* Managed memory can live on the host until touched, but a server that
 * touches it on the GPU holds it there: charged unless told otherwise. */
GG_VENEER_ALLOC(cuMemAllocManaged, (gg_CUdeviceptr * dptr, size_t bytesize, unsigned int flags),
                (dptr, bytesize, flags), !dptr || bytesize == 0, .dev = current_device(),
                .api = GPUGUARD_API_CU_MEM_ALLOC_MANAGED, .ns = GG_NS_PTR, .charged = gg_opt.charge_managed,
                .size = bytesize, .out = dptr)

/* The driver picks the pitch; reserve for a 512-byte-aligned one and settle
 * to the real figure afterwards. */
GG_VENEER_ALLOC(cuMemAllocPitch_v2,
                (gg_CUdeviceptr * dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                 unsigned int ElementSizeBytes),
                (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes),
                !dptr || !pPitch || WidthInBytes == 0 || Height == 0 || WidthInBytes > SIZE_MAX / 2 / Height,
                .dev = current_device(), .api = GPUGUARD_API_CU_MEM_ALLOC_PITCH, .ns = GG_NS_PTR, .charged = 1,
                .size = (WidthInBytes + 511) / 512 * 512 * Height, .out = dptr, .pitch = pPitch, .rows = Height)

GG_VENEER_FREE(cuMemFree_v2, (gg_CUdeviceptr dptr), (dptr), GG_NS_PTR, dptr)

/* For a dump on a failure: the driver's free/total, on the failing thread
 * (its context is current there), our cuMemGetInfo bypassed. */
static int driver_meminfo(uint64_t *free_bytes, uint64_t *total_bytes)
{
	gg_pfn_cuMemGetInfo_v2 f = REAL(cuMemGetInfo_v2);
	size_t fr, to;
	if (!f || f(&fr, &to) != GG_CUDA_SUCCESS)
		return -1;
	*free_bytes = fr;
	*total_bytes = to;
	return 0;
}

/* Who device dev is, for the pod region: its UUID and physical total. */
static int driver_identity(int dev, uint8_t uuid[16], uint64_t *physical)
{
	gg_pfn_cuDeviceGetUuid_v2 f = HELPER(cuDeviceGetUuid_v2);
	gg_CUuuid u;
	gg_CUresult rc = f ? f(&u, dev) : GG_CUDA_ERROR_NOT_INITIALIZED;
	if (rc == GG_CUDA_ERROR_NOT_INITIALIZED || rc == GG_CUDA_ERROR_DEINITIALIZED)
		return 1; /* no driver in use here: not this process's CUDA card */
	if (rc != GG_CUDA_SUCCESS)
		return -1;
	memcpy(uuid, u.bytes, 16);
	gg_pfn_cuDeviceTotalMem_v2 t = REAL(cuDeviceTotalMem_v2);
	size_t total;
	if (t && t(&total, dev) == GG_CUDA_SUCCESS)
		*physical = total;
	return 0;
}

/* Only stores pointers: no CUDA call from a constructor (DESIGN.md §1). */
/* The device's UUID alone, for NVML (footprint.c). */
static int driver_uuid(int dev, uint8_t uuid[16])
{
	uint64_t physical = 0;
	return driver_identity(dev, uuid, &physical) == 0 ? 0 : -1;
}

__attribute__((constructor)) static void register_meminfo(void)
{
	gg_dump_set_meminfo(0, driver_meminfo);
	gg_shared_set_identity(0, driver_identity);
	gg_footprint_set_uuid(driver_uuid);
}

/* Whether the driver accepts ordinal dev (0 <= dev < GG_MAX_DEVICES), for
 * the calls that name a device themselves: a device is bound in the pod
 * region only once the driver has said it exists, so an invalid ordinal
 * goes to the driver uncharged, gets the driver's own answer and creates
 * no entry (issue 9, finding 6: ids 16..31 filled the region). */
static _Atomic uint64_t accepted; /* bit d: cuDeviceGet(d) succeeded */
_Static_assert(GG_MAX_DEVICES <= 64, "one bit per ordinal");

static int device_accepted(int dev)
{
	uint64_t bit = 1ull << dev;
	/* relaxed: the bit publishes nothing but itself (the driver's answer
	 * never changes in a process); a missing bit costs one more question. */
	if (GG_LIKELY(atomic_load_explicit(&accepted, memory_order_relaxed) & bit))
		return 1;
	gg_pfn_cuDeviceGet f = HELPER(cuDeviceGet);
	gg_CUdevice d;
	if (!f)
		return 1; /* cannot ask: governed as before */
	if (f(&d, dev) != GG_CUDA_SUCCESS)
		return 0; /* not remembered: before cuInit every ordinal is refused */
	/* relaxed: as above; the RMW keeps other threads' bits. */
	atomic_fetch_or_explicit(&accepted, bit, memory_order_relaxed);
	return 1;
}

/* ---- contexts: where GPUGUARD_CONTEXT_RESERVE is charged ---------------- */

/* cudart, PyTorch and JAX all make their context here. The device is bound
 * (its pod-region entry found) and its context reserve charged once. */
static void primary_retained(const gg_CUcontext *pctx, int dev)
{
	gg_ceiling_budget(dev);
	gg_shared_check_card(dev, GG_RT_CUDA); /* bound by HIP's dev, another card? */
	if (pctx)
		gg_ctx_id(*pctx, dev, 1); /* known as dev's primary, for its reset */
	/* A context is what the driver holds most of for a process: its
	 * figure is read now (and, the first time, our NVML PID found). */
	gg_footprint_reconcile(dev, GG_FP_AFTER_CTX);
}

/* The card's processes before the context, for the PID diff (footprint.c),
 * then the books after. */
GG_VENEER(cuDevicePrimaryCtxRetain, (gg_CUcontext * pctx, gg_CUdevice dev), (pctx, dev), 0,
          dev < 0 || dev >= GG_MAX_DEVICES, gg_footprint_ctx_before(dev);
          rc = real(pctx, dev); if (rc == GG_CUDA_SUCCESS) primary_retained(pctx, dev);)

/* ---- what the driver takes without an allocation call (footprint.c) ---- */

/* cuCtxSetLimit grows local memory (the stack), the malloc heap or the
 * printf FIFO by a known amount: charged before the call, refused past the
 * ceiling with the driver's own out-of-memory code, as the driver itself
 * refuses a limit it cannot back. */
_Static_assert(GG_CU_LIMIT_STACK_SIZE == GG_FP_STACK && GG_CU_LIMIT_PRINTF_FIFO_SIZE == GG_FP_FIFO &&
                   GG_CU_LIMIT_MALLOC_HEAP_SIZE == GG_FP_HEAP,
               "footprint.c's limits are CUDA's");
static gg_CUresult set_limit(gg_CUlimit limit, size_t value, gg_pfn_cuCtxSetLimit real)
{
	if (limit != GG_CU_LIMIT_STACK_SIZE && limit != GG_CU_LIMIT_PRINTF_FIFO_SIZE &&
	    limit != GG_CU_LIMIT_MALLOC_HEAP_SIZE)
		return real(limit, value);
	GG_SIG_REFUSE(GG_CUDA_ERROR_OUT_OF_MEMORY);
	if (gg_in_hook)
		return real(limit, value);
	GG_ENTER(GG_VENEER_RUNTIME);
	int dev = current_device();
	gg_pfn_cuCtxGetLimit get = HELPER(cuCtxGetLimit);
	gg_pfn_cuDeviceGetAttribute attr = HELPER(cuDeviceGetAttribute);
	size_t cur = 0;
	int tps = 0, sms = 0;
	if (dev < 0 || !get || get(&cur, limit) != GG_CUDA_SUCCESS ||
	    (limit == GG_CU_LIMIT_STACK_SIZE &&
	     (!attr || attr(&tps, GG_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev) != GG_CUDA_SUCCESS ||
	      attr(&sms, GG_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != GG_CUDA_SUCCESS || tps < 0 || sms < 0)))
		dev = -1; /* cannot foresee: the driver's answer, reconciled after */
	struct gg_footprint_limit l;
	uint64_t grow = gg_footprint_limit_begin(dev, limit, value, cur, (uint64_t)tps, (uint64_t)sms, &l);
	if (grow) {
		gg_ceiling_budget(dev);
		gg_dump_note_request(GPUGUARD_API_NONE, grow);
		if (gg_account_begin(dev, grow) != 0) {
			gg_footprint_limit_end(&l, 0, 0);
			GG_LEAVE();
			return GG_CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	gg_CUresult rc = real(limit, value);
	gg_footprint_limit_end(&l, rc == GG_CUDA_SUCCESS, 1);
	if (!grow && dev >= 0 && rc == GG_CUDA_SUCCESS)
		gg_footprint_reconcile(dev, 0);
	GG_LEAVE();
	return rc;
}

GG_VENEER_TO(cuCtxSetLimit, (gg_CUlimit limit, size_t value), set_limit, (limit, value, real))

/* A module or library load takes device memory for its code and globals
 * (at once under EAGER; under LAZY at each function's first use, which the
 * headroom and the next reconcile cover): read the driver's figure after. */
static void loaded(void)
{
	int dev = current_device();
	if (dev >= 0)
		gg_footprint_reconcile(dev, 0);
	/* relaxed: a hint for the lookups below (footprint.c). Every device:
	 * a library loads without a context and binds to the first one that
	 * uses it. */
	_Static_assert(GG_MAX_DEVICES <= 64, "one bit per device");
	atomic_store_explicit(&gg_footprint_pending, UINT64_MAX, memory_order_relaxed);
}

/* The first function looked up after a load: what LAZY loading took. */
static void looked_up(void)
{
	gg_footprint_first_use(current_device());
}

#define LAZY_PENDING (!gg_in_hook && atomic_load_explicit(&gg_footprint_pending, memory_order_relaxed))
GG_VENEER_AFTER(cuModuleGetFunction, (gg_CUfunction * hfunc, gg_CUmodule hmod, const char *name), (hfunc, hmod, name),
                LAZY_PENDING, looked_up();)
GG_VENEER_AFTER(cuLibraryGetKernel, (gg_CUkernel * pKernel, gg_CUlibrary library, const char *name),
                (pKernel, library, name), LAZY_PENDING, looked_up();)
GG_VENEER_AFTER(cuKernelGetFunction, (gg_CUfunction * pFunc, gg_CUkernel kernel), (pFunc, kernel), LAZY_PENDING,
                looked_up();)

GG_VENEER_AFTER(cuModuleLoad, (gg_CUmodule * module, const char *fname), (module, fname), !gg_in_hook, loaded();)
GG_VENEER_AFTER(cuModuleLoadData, (gg_CUmodule * module, const void *image), (module, image), !gg_in_hook, loaded();)
GG_VENEER_AFTER(cuModuleLoadDataEx,
                (gg_CUmodule * module, const void *image, unsigned int numOptions, gg_CUjit_option *options,
                 void **optionValues),
                (module, image, numOptions, options, optionValues), !gg_in_hook, loaded();)
GG_VENEER_AFTER(cuModuleLoadFatBinary, (gg_CUmodule * module, const void *fatCubin), (module, fatCubin), !gg_in_hook,
                loaded();)
GG_VENEER_AFTER(cuLibraryLoadData,
                (gg_CUlibrary * library, const void *code, gg_CUjit_option *jitOptions, void **jitOptionsValues,
                 unsigned int numJitOptions, gg_CUlibraryOption *libraryOptions, void **libraryOptionValues,
                 unsigned int numLibraryOptions),
                (library, code, jitOptions, jitOptionsValues, numJitOptions, libraryOptions, libraryOptionValues,
                 numLibraryOptions),
                !gg_in_hook, loaded();)
GG_VENEER_AFTER(cuLibraryLoadFromFile,
                (gg_CUlibrary * library, const char *fileName, gg_CUjit_option *jitOptions, void **jitOptionsValues,
                 unsigned int numJitOptions, gg_CUlibraryOption *libraryOptions, void **libraryOptionValues,
                 unsigned int numLibraryOptions),
                (library, fileName, jitOptions, jitOptionsValues, numJitOptions, libraryOptions, libraryOptionValues,
                 numLibraryOptions),
                !gg_in_hook, loaded();)

/* Around the driver call that frees what a context of dev held (ctx; NULL
 * for its primary): the hook's GG_ENTER and GG_LEAVE, and the books. */
static void drop_begin(struct gg_ctx_drop *d, int dev, gg_CUcontext ctx)
{
	GG_ENTER(GG_VENEER_RUNTIME);
	gg_ctx_drop_begin(d, dev, ctx);
}

/* A stream-ordered block the driver still knows after a reset or destroy:
 * pools, the default one and created ones, keep their blocks over
 * cudaDeviceReset (seen on an H200, driver 580: still in use by the pools'
 * figures and by cudaMemGetInfo), and they are freed later as any other.
 * Only uncharged device-pointer records are pool blocks (the pool carries
 * their charge). */
static int block_survived(const struct gg_record *r)
{
	if ((r->key >> 62) != GG_NS_PTR || (r->flags & (GG_REC_CHARGED | GG_REC_HOST)))
		return 0;
	gg_pfn_cuPointerGetAttribute f = HELPER(cuPointerGetAttribute);
	gg_CUmemoryPool owner = NULL;
	return f &&
	       f(&owner, GG_CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, r->key ^ ((uint64_t)GG_NS_PTR << 62)) ==
	           GG_CUDA_SUCCESS &&
	       owner != NULL;
}

static gg_CUresult drop_end(struct gg_ctx_drop *d, gg_CUresult rc, int dev, gg_CUcontext ctx)
{
	gg_ctx_drop_end(d, rc == GG_CUDA_SUCCESS, block_survived);
	if (rc == GG_CUDA_SUCCESS) {
		if (ctx)
			gg_ctx_forget(ctx);
		gg_pool_after_reset(dev);
		graph_reconcile(dev, 0);
	}
	GG_LEAVE();
	return rc;
}

/* cudaDeviceReset: the driver frees everything the primary context holds
 * (its allocations, pools, VMM handles); the books follow. v1 (what cudart
 * asks at 7000) and v2 (11000 on) differ only in name. The calling thread's
 * cached context is cleared on both sides (current_device), in case the
 * driver changes what is current there. */
static gg_CUresult primary_reset(gg_CUdevice dev, gg_pfn_cuDevicePrimaryCtxReset_v2 real)
{
	ctx_moved();
	if (gg_in_hook || dev < 0 || dev >= GG_MAX_DEVICES)
		return ctx_moved_after(real(dev));
	struct gg_ctx_drop d;
	drop_begin(&d, dev, NULL);
	return ctx_moved_after(drop_end(&d, real(dev), dev, NULL));
}

GG_VENEER_TO(cuDevicePrimaryCtxReset, (gg_CUdevice dev), primary_reset, (dev, real))

GG_VENEER_TO(cuDevicePrimaryCtxReset_v2, (gg_CUdevice dev), primary_reset, (dev, real))

/* The last release of a primary context resets it: the driver frees all it
 * held, as cuDevicePrimaryCtxReset does ("The context is automatically
 * reset once the last reference to it is released", the driver API's
 * reference; Numba's cuda.close() takes this path). Whether this release
 * was the last only the driver knows, after the call: the context is then
 * inactive, and the books follow as for a reset. They follow after the
 * call, not around it as a reset's do: no other thread can be allocating
 * in a context nobody holds any more, so none can be handed the freed
 * addresses meanwhile, and a release that is not the last (most are)
 * costs one question, not a walk of the table. Unlike a destroy, a
 * release pops nothing: the cached current context stays (the handle
 * lives on, inactive, on the same device). Once exit() has begun the books
 * stay as they are: cudart releases from its destructor (a reference it
 * holds to the end), which may run before our exit dump, and that dump
 * must list what the application left, not find it freed by the
 * teardown. */
static gg_CUresult primary_release(gg_CUdevice dev, gg_pfn_cuDevicePrimaryCtxRelease_v2 real)
{
	gg_CUresult rc = real(dev);
	if (rc != GG_CUDA_SUCCESS || gg_in_hook || dev < 0 || dev >= GG_MAX_DEVICES ||
	    atomic_load_explicit(&gg_exiting, memory_order_relaxed))
		return rc;
	gg_pfn_cuDevicePrimaryCtxGetState st = HELPER(cuDevicePrimaryCtxGetState);
	unsigned flags = 0;
	int active = 1;
	if (!st || st(dev, &flags, &active) != GG_CUDA_SUCCESS || active)
		return rc; /* lives on, or cannot tell: the books stay as they are */
	struct gg_ctx_drop d;
	drop_begin(&d, dev, NULL);
	return drop_end(&d, rc, dev, NULL);
}

GG_VENEER_TO(cuDevicePrimaryCtxRelease, (gg_CUdevice dev), primary_release, (dev, real))

GG_VENEER_TO(cuDevicePrimaryCtxRelease_v2, (gg_CUdevice dev), primary_release, (dev, real))

/* cuCtxDestroy frees everything made in ctx, and pops it when it is the
 * calling thread's current one (the cached context, current_device). */
static gg_CUresult ctx_destroy(gg_CUcontext ctx, gg_pfn_cuCtxDestroy_v2 real)
{
	int dev = -1;
	ctx_moved();
	if (gg_in_hook || !ctx || !gg_ctx_find(ctx, &dev))
		return ctx_moved_after(real(ctx)); /* a context that never allocated through us */
	struct gg_ctx_drop d;
	drop_begin(&d, dev, ctx);
	return ctx_moved_after(drop_end(&d, real(ctx), dev, ctx));
}

GG_VENEER_TO(cuCtxDestroy, (gg_CUcontext ctx), ctx_destroy, (ctx, real))

GG_VENEER_TO(cuCtxDestroy_v2, (gg_CUcontext ctx), ctx_destroy, (ctx, real))

/* ---- the current context: the calls that change it (current_device) ---- */

/* Each passes straight through, clearing the calling thread's cached
 * context before and after (ctx_moved): thread-local stores only, so also
 * on re-entry, before initialisation, and in an inert copy. */
#define CTX_HOOK(name, params, args) GG_VENEER_AROUND(name, params, args, ctx_moved(), ctx_moved_after)
CTX_HOOK(cuCtxSetCurrent, (gg_CUcontext ctx), (ctx))
CTX_HOOK(cuCtxPushCurrent, (gg_CUcontext ctx), (ctx))
CTX_HOOK(cuCtxPushCurrent_v2, (gg_CUcontext ctx), (ctx))
CTX_HOOK(cuCtxPopCurrent, (gg_CUcontext * pctx), (pctx))
CTX_HOOK(cuCtxPopCurrent_v2, (gg_CUcontext * pctx), (pctx))
/* A new context is pushed as the thread's current one. */
CTX_HOOK(cuCtxCreate, (gg_CUcontext * pctx, unsigned int flags, gg_CUdevice dev), (pctx, flags, dev))
CTX_HOOK(cuCtxCreate_v2, (gg_CUcontext * pctx, unsigned int flags, gg_CUdevice dev), (pctx, flags, dev))
CTX_HOOK(cuCtxCreate_v3,
         (gg_CUcontext * pctx, gg_CUexecAffinityParam *params, int n, unsigned int flags, gg_CUdevice dev),
         (pctx, params, n, flags, dev))
CTX_HOOK(cuCtxCreate_v4, (gg_CUcontext * pctx, gg_CUctxCreateParams *params, unsigned int flags, gg_CUdevice dev),
         (pctx, params, flags, dev))

/* ---- pinned host memory: tracked for dumps, never charged ------------- */

GG_VENEER_HOST_ALLOC(cuMemAllocHost_v2, (void **pp, size_t bytesize), (pp, bytesize), pp, bytesize)

GG_VENEER_HOST_ALLOC(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int Flags), (pp, bytesize, Flags), pp,
                     bytesize)

GG_VENEER_HOST_FREE(cuMemFreeHost, (void *p), (p), p)

/* ---- stream-ordered allocations ---------------------------------------- */

/* The device a stream-ordered call on s is charged to, with gg_cur_ctx set
 * to s's context for the record: the stream's own device (a stream of
 * another device draws from that device's pool), the current context's for
 * the default streams (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD). If
 * the driver cannot tell (a handle it refuses, or no cuStreamGetDevice for
 * a context we never saw), the current device, as the driver call itself
 * then fails or runs in the current context. */
static int __attribute__((noinline)) stream_device_slow(gg_CUstream s, int dev)
{
	gg_pfn_cuStreamGetCtx gc = HELPER(cuStreamGetCtx);
	gg_CUcontext c = NULL;
	if (!gc || gc(s, &c) != GG_CUDA_SUCCESS || !c)
		return dev;
	int sdev = -1;
	uint16_t id = gg_ctx_find(c, &sdev);
	if (!id) {
		gg_pfn_cuStreamGetDevice gd = HELPER(cuStreamGetDevice);
		gg_CUdevice d = -1;
		if (!gd || gd(s, &d) != GG_CUDA_SUCCESS || d < 0 || d >= GG_MAX_DEVICES)
			return dev;
		sdev = d;
		id = gg_ctx_id(c, sdev, 0);
	}
	gg_cur_ctx = id;
	return sdev;
}
/* Inline: a default stream (the common case) asks the current context
 * alone. */
static inline int stream_device(gg_CUstream s)
{
	int dev = current_device();
	if ((uintptr_t)s <= 2)
		return dev;
	return stream_device_slow(s, dev);
}

/* Set, for good, by the first stream capture begun through our hooks: until
 * then no allocation pays for asking whether its stream is capturing.
 * relaxed: the capture call itself returned before any allocation on the
 * capturing stream can be made. */
static _Atomic int captures_seen;

#define BEGIN_CAPTURE_HOOK(name, params, args) \
	GG_VENEER_PASS(name, params, args, atomic_store_explicit(&captures_seen, 1, memory_order_relaxed);)
BEGIN_CAPTURE_HOOK(cuStreamBeginCapture, (gg_CUstream s), (s))
BEGIN_CAPTURE_HOOK(cuStreamBeginCapture_ptsz, (gg_CUstream s), (s))
BEGIN_CAPTURE_HOOK(cuStreamBeginCapture_v2, (gg_CUstream s, gg_CUstreamCaptureMode m), (s, m))
BEGIN_CAPTURE_HOOK(cuStreamBeginCapture_v2_ptsz, (gg_CUstream s, gg_CUstreamCaptureMode m), (s, m))
/* Capture into a graph the caller made (CUDA 12.3): its captured allocations
 * are that graph's (issue 25, item 3). */
#define CAPTURE_TO_GRAPH_PARAMS                                                                              \
	(gg_CUstream s, gg_CUgraph g, const gg_CUgraphNode *deps, const gg_CUgraphEdgeData *edges, size_t n, \
	 gg_CUstreamCaptureMode m)
BEGIN_CAPTURE_HOOK(cuStreamBeginCaptureToGraph, CAPTURE_TO_GRAPH_PARAMS, (s, g, deps, edges, n, m))
BEGIN_CAPTURE_HOOK(cuStreamBeginCaptureToGraph_ptsz, CAPTURE_TO_GRAPH_PARAMS, (s, g, deps, edges, n, m))

/* The graph hStream is capturing into, or NULL when it is not capturing.
 * A capturing stream allocates nothing: the request becomes a node of that
 * graph, whose memory the graph reserve holds (graph.c). */
static gg_CUgraph __attribute__((noinline)) capture_graph_slow(gg_CUstream hStream, int ptsz)
{
	gg_pfn_cuStreamGetCaptureInfo_v3 f =
	    ptsz ? HELPER(cuStreamGetCaptureInfo_v3_ptsz) : HELPER(cuStreamGetCaptureInfo_v3);
	gg_CUstreamCaptureStatus st = 0;
	gg_CUgraph g = NULL;
	if (!f || f(hStream, &st, NULL, &g, NULL, NULL, NULL) != GG_CUDA_SUCCESS || st != CAPTURE_ACTIVE)
		return NULL;
	return g;
}
/* Inline: until the first capture, a load and no call on every
 * stream-ordered request. */
static inline gg_CUgraph capture_graph(gg_CUstream hStream, int ptsz)
{
	if (GG_LIKELY(!atomic_load_explicit(&captures_seen, memory_order_relaxed)))
		return NULL;
	return capture_graph_slow(hStream, ptsz);
}

/* A captured allocation: passed through, not charged, not recorded; its
 * bytes count towards the graph's needs at launch. */
static gg_CUresult captured_alloc(gg_CUdeviceptr *dptr, size_t bytesize, gg_CUgraph graph, gg_CUstream s,
                                  gg_CUresult rc)
{
	if (rc == GG_CUDA_SUCCESS) {
		int dev = stream_device(s);
		gg_graph_add_bytes(graph, dev, bytesize);
		gg_graph_va_add(*dptr);
	}
	return rc;
}

/* dev's current pool as the driver says, or NULL. */
static gg_CUmemoryPool device_pool_handle(int dev)
{
	gg_CUmemoryPool pool = NULL;
	gg_pfn_cuDeviceGetMemPool gp = HELPER(cuDeviceGetMemPool);
	if (dev < 0 || !gp || gp(&pool, dev) != GG_CUDA_SUCCESS)
		return NULL;
	return pool;
}

/* A device's current pool's registry entry as this thread last asked the
 * driver for it: gg_self.cu_pool (pool.h's gg_pool_home_*, which say when
 * it holds). cudart's cudaDeviceSetMemPool and cudaMemSetMemPool reach
 * cuDeviceSetMemPool and CUDA 13's cuMemSetMemPool through cuGetProcAddress
 * (tests/abi/cudart13-lookups.txt), which hands out our hooks. The cache's
 * miss: asks the driver and fills it (NULL: the whole way, the hook). */
static struct gg_pool *__attribute__((noinline)) device_pool_slow(int dev, uint32_t gen)
{
	return gg_pool_home_fill(&gg_self.cu_pool, device_pool_handle(dev), dev, gen, pool_query);
}

/* The device pool belongs to. A pool we did not see created is a default
 * or current one, asked for by ordinal (cuDeviceGetDefaultMemPool(&p, 1)),
 * and it belongs to that device whatever stream it is used from (issue 25,
 * item 2: device 1's pool on a stream of device 0 was charged to device 0):
 * ask the driver each device's pools until one matches. Once: the first
 * allocation registers the pool with its device (pool.c). If none matches
 * (a pool made before we loaded), the stream's device `fallback`. */
static int pool_home(gg_CUmemoryPool pool, int fallback)
{
	int dev = gg_pool_device(pool);
	if (dev >= 0)
		return dev;
	gg_pfn_cuDeviceGetDefaultMemPool gd = HELPER(cuDeviceGetDefaultMemPool);
	gg_pfn_cuDeviceGetMemPool gc = HELPER(cuDeviceGetMemPool);
	for (int d = 0; gd && d < GG_MAX_DEVICES; d++) {
		gg_CUmemoryPool p = NULL;
		if (gd(&p, d) != GG_CUDA_SUCCESS)
			break; /* past the last device */
		if (p == pool || (gc && gc(&p, d) == GG_CUDA_SUCCESS && p == pool))
			return d;
	}
	return fallback;
}

/* The bodies each default-stream variant of a name shares (ptsz: the
 * per-thread one). Inline: the record's stack is unwound from the hook. */

/* cuMemAllocAsync draws from the current pool of the stream's device. */
static inline __attribute__((always_inline)) gg_CUresult alloc_async(gg_pfn_cuMemAllocAsync f, gg_CUdeviceptr *dptr,
                                                                     size_t bytesize, gg_CUstream s, int ptsz)
{
	gg_CUgraph graph = capture_graph(s, ptsz);
	if (graph)
		return captured_alloc(dptr, bytesize, graph, s, f(dptr, bytesize, s));
	int dev = stream_device(s); /* its pool is that device's current one */
	struct gg_pool_alloc pa;
	uint32_t gen;
	struct gg_pool *p;
	if (GG_LIKELY(gg_pool_home_hit(&gg_self.cu_pool, dev, &gen)))
		p = gg_self.cu_pool.p;
	else if (!(p = device_pool_slow(dev, gen)))
		goto whole_way;
	/* One path for a hit and a fill alike, so that the record's commit
	 * is one call site (the stack cache checks its return address,
	 * stack.c). pool: read only by begin's registry lookup, which this
	 * path skips (gg_pool_alloc_begin_at). */
	gg_pool_alloc_init(&pa, GPUGUARD_API_CU_MEM_ALLOC_ASYNC, dev, NULL, bytesize, dptr, s);
	pa.p = p;
	return GG_POOL_ALLOC_HOME(&cuda, &pa, f(dptr, bytesize, s));
whole_way:
	gg_pool_alloc_init(&pa, GPUGUARD_API_CU_MEM_ALLOC_ASYNC, dev, device_pool_handle(dev), bytesize, dptr, s);
	return GG_POOL_ALLOC(&cuda, &pa, f(dptr, bytesize, s));
}

static inline gg_CUresult alloc_from_pool(gg_pfn_cuMemAllocFromPoolAsync f, gg_CUdeviceptr *dptr, size_t bytesize,
                                          gg_CUmemoryPool pool, gg_CUstream s, int ptsz)
{
	gg_CUgraph graph = capture_graph(s, ptsz);
	if (graph)
		return captured_alloc(dptr, bytesize, graph, s, f(dptr, bytesize, pool, s));
	int sdev = stream_device(s); /* and gg_cur_ctx, for the record */
	int dev = pool_home(pool, sdev);
	struct gg_pool_alloc pa;
	gg_pool_alloc_init(&pa, GPUGUARD_API_CU_MEM_ALLOC_FROM_POOL, dev, pool, bytesize, dptr, s);
	return GG_POOL_ALLOC(&cuda, &pa, f(dptr, bytesize, pool, s));
}

static inline __attribute__((always_inline)) gg_CUresult free_async(gg_pfn_cuMemFreeAsync f, gg_CUdeviceptr dptr,
                                                                    gg_CUstream s, int ptsz)
{
	/* A free node of the graph: nothing is freed now, and nothing of ours
	 * (a captured allocation was never recorded). */
	if (capture_graph(s, ptsz))
		return f(dptr, s);
	/* The block goes back to its pool, which keeps the reserve: nothing is
	 * refunded here unless the allocation was charged directly. */
	struct gg_free fr;
	gg_free_begin(&fr, GG_NS_PTR, dptr);
	return gg_free_end(&cuda, &fr, f(dptr, s));
}

#define ALLOC_ASYNC(name, ptsz)                                                                                      \
	GG_VENEER(name, (gg_CUdeviceptr * dptr, size_t bytesize, gg_CUstream hStream), (dptr, bytesize, hStream), 1, \
	          !dptr || bytesize == 0, rc = alloc_async(real, dptr, bytesize, hStream, ptsz);)
#define ALLOC_FROM_POOL(name, ptsz)                                                                          \
	GG_VENEER(name, (gg_CUdeviceptr * dptr, size_t bytesize, gg_CUmemoryPool pool, gg_CUstream hStream), \
	          (dptr, bytesize, pool, hStream), 1, !dptr || bytesize == 0 || !pool,                       \
	          rc = alloc_from_pool(real, dptr, bytesize, pool, hStream, ptsz);)
/* A free of 0, 1 or 2 goes to the driver unseen, as GG_VENEER_FREE's do
 * (veneer.h): the table's key test folds into this one (issue 24). */
#define FREE_ASYNC(name, ptsz)                                                                                 \
	GG_VENEER(name, (gg_CUdeviceptr dptr, gg_CUstream hStream), (dptr, hStream), 0, dptr <= GG_TABLE_BUSY, \
	          rc = free_async(real, dptr, hStream, ptsz);)
ALLOC_ASYNC(cuMemAllocAsync, 0)
ALLOC_ASYNC(cuMemAllocAsync_ptsz, 1)
ALLOC_FROM_POOL(cuMemAllocFromPoolAsync, 0)
ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz, 1)
FREE_ASYNC(cuMemFreeAsync, 0)
FREE_ASYNC(cuMemFreeAsync_ptsz, 1)

#define POOL_DEV(props) \
	((props) && (props)->location.type == GG_CU_MEM_LOCATION_TYPE_DEVICE ? (props)->location.id : -1)
GG_VENEER_NOTE(cuMemPoolCreate, (gg_CUmemoryPool * pool, const gg_CUmemPoolProps *props), (pool, props),
               gg_pool_created, pool, POOL_DEV(props))

GG_VENEER_POOL_DESTROY(cuMemPoolDestroy, (gg_CUmemoryPool pool), (pool), pool)

GG_VENEER_POOL_TRIM(cuMemPoolTrimTo, (gg_CUmemoryPool pool, size_t minBytesToKeep), (pool, minBytesToKeep), pool)

/* A device's current pool changed (or may have: moved whatever the
 * driver's answer): every thread's cached one (gg_pool_home_hit) is asked for
 * again. After the call, so a thread that asks after the move sees the new
 * pool. */
static gg_CUresult current_pool_set(gg_CUresult rc)
{
	gg_pool_current_changed();
	return rc;
}
GG_VENEER_TO(cuDeviceSetMemPool, (gg_CUdevice dev, gg_CUmemoryPool pool), current_pool_set, (real(dev, pool)))
GG_VENEER_TO(cuMemSetMemPool, (gg_CUmemLocation * location, gg_CUmemAllocationType type, gg_CUmemoryPool pool),
             current_pool_set, (real(location, type, pool)))

/* ---- virtual memory management ---------------------------------------- */

/* Physical memory is charged here; address space (cuMemAddressReserve,
 * 1.125x the card under PyTorch) never is. The device comes from the
 * properties, checked (HAMi-core #187 read an uninitialised id). */
/* Inline: the record's stack is unwound from the hook itself. */
static inline gg_CUresult mem_create(gg_pfn_cuMemCreate real, gg_CUmemGenericAllocationHandle *handle, size_t size,
                                     const gg_CUmemAllocationProp *prop, unsigned long long flags)
{
	/* Any other location is host memory (HOST, HOST_NUMA: NCCL's host
	 * buffers), never charged: dev -1 (GG_ALLOC notes its handle). */
	int dev = prop->location.type == GG_CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
	if (dev >= 0 && !device_accepted(dev))
		return real(handle, size, prop, flags); /* the driver's own INVALID_DEVICE */
	if (dev >= 0)
		current_device(); /* the handle belongs to the current context (gg_cur_ctx) */
	struct gg_alloc a = {
	    .dev = dev, .api = GPUGUARD_API_CU_MEM_CREATE, .ns = GG_NS_VMM, .charged = 1, .size = size, .out = handle};
	return GG_ALLOC(&cuda, &a, real(handle, size, prop, flags));
}

GG_VENEER(cuMemCreate,
          (gg_CUmemGenericAllocationHandle * handle, size_t size, const gg_CUmemAllocationProp *prop,
           unsigned long long flags),
          (handle, size, prop, flags), 1,
          !handle || !prop || size == 0 ||
              (prop->location.type == GG_CU_MEM_LOCATION_TYPE_DEVICE &&
               (prop->location.id < 0 || prop->location.id >= GG_MAX_DEVICES)),
          rc = mem_create(real, handle, size, prop, flags);)

/* A mapped or retained handle outlives this release (handles.c); only the
 * last of its references and mappings refunds it. */
GG_VENEER_RELEASE(cuMemRelease, (gg_CUmemGenericAllocationHandle handle), (handle), 0, handle)

/* Another reference to the handle mapped at addr (NCCL's free path:
 * retain, release, unmap, release). */
GG_VENEER_NOTE(cuMemRetainAllocationHandle, (gg_CUmemGenericAllocationHandle * handle, void *addr), (handle, addr),
               gg_note_retained, handle)

/* Memory another process exported stays that process's charge (its
 * cuMemCreate): the importer is never charged, and its release and unmaps
 * are no untracked frees (handles.c knows the handle as imported). */
GG_VENEER_NOTE(cuMemImportFromShareableHandle,
               (gg_CUmemGenericAllocationHandle * handle, void *osHandle, gg_CUmemAllocationHandleType shHandleType),
               (handle, osHandle, shHandleType), gg_note_imported, handle)

/* Address space is free, but what is mapped where goes into dumps: holes
 * between mapped chunks are VMM fragmentation (vmm.c). */
GG_VENEER_NOTE(cuMemAddressReserve,
               (gg_CUdeviceptr * ptr, size_t size, size_t alignment, gg_CUdeviceptr addr, unsigned long long flags),
               (ptr, size, alignment, addr, flags), gg_note_reserved, ptr, size)

GG_VENEER_UNMAP(cuMemAddressFree, (gg_CUdeviceptr ptr, size_t size), (ptr, size), ptr, size, 1)

GG_VENEER_NOTE(cuMemMap,
               (gg_CUdeviceptr ptr, size_t size, size_t offset, gg_CUmemGenericAllocationHandle handle,
                unsigned long long flags),
               (ptr, size, offset, handle, flags), gg_note_mapped, ptr, size, handle)

GG_VENEER_UNMAP(cuMemUnmap, (gg_CUdeviceptr ptr, size_t size), (ptr, size), ptr, size, 0)

/* ---- graph memory (graph.c) ---------------------------------------------- */

/* The device's graph reserve and what of it is in use. 0 or -1. */
static int graph_mem(int dev, uint64_t *reserved, uint64_t *used)
{
	gg_pfn_cuDeviceGetGraphMemAttribute f = HELPER(cuDeviceGetGraphMemAttribute);
	gg_cuuint64_t r = 0, u = 0;
	if (!f || f(dev, GRAPH_MEM_RESERVED_CURRENT, &r) != GG_CUDA_SUCCESS ||
	    (used && f(dev, GRAPH_MEM_USED_CURRENT, &u) != GG_CUDA_SUCCESS))
		return -1;
	*reserved = r;
	if (used)
		*used = u;
	return 0;
}

/* Charges dev's graph reserve as it is now; `credit` was reserved for it. */
static void graph_reconcile(int dev, uint64_t credit)
{
	uint64_t r;
	if (dev < 0 || dev >= GG_MAX_DEVICES)
		return;
	if (graph_mem(dev, &r, NULL) == 0)
		gg_graph_settle(dev, r, credit);
	else if (credit)
		gg_ceiling_release(dev, credit);
}

/* Nothing is allocated until the graph runs: only its needs grow. */
static void alloc_node_added(gg_CUgraph graph, const gg_CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
	gg_graph_add_bytes(graph, p->poolProps.location.id, p->bytesize);
	gg_graph_va_add(p->dptr);
}

GG_VENEER_AFTER(cuGraphAddMemAllocNode,
                (gg_CUgraphNode * phGraphNode, gg_CUgraph hGraph, const gg_CUgraphNode *dependencies,
                 size_t numDependencies, gg_CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams),
                (phGraphNode, hGraph, dependencies, numDependencies, nodeParams),
                nodeParams && !gg_in_hook && nodeParams->poolProps.location.type == GG_CU_MEM_LOCATION_TYPE_DEVICE,
                alloc_node_added(hGraph, nodeParams);)

static void instantiated(gg_CUgraphExec exec, gg_CUgraph graph)
{
	gg_graph_instantiated(exec, graph);
	/* CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD may have reserved already */
	int dev;
	uint64_t need;
	if (gg_graph_exec_bytes(exec, &dev, &need) == 0)
		graph_reconcile(dev, 0);
}

GG_VENEER_AFTER(cuGraphInstantiateWithFlags,
                (gg_CUgraphExec * phGraphExec, gg_CUgraph hGraph, unsigned long long flags),
                (phGraphExec, hGraph, flags), phGraphExec && !gg_in_hook, instantiated(*phGraphExec, hGraph);)

/* Every other way to instantiate: CUDA 10's and 11's (cuGraphInstantiate,
 * _v2: what cuGraphInstantiate means in CUDA 11 headers and at 11000 and
 * 12000 through cuGetProcAddress) and CUDA 12's with parameters. Without
 * them the exec's needs were unknown and its launch unchecked (issue 25,
 * item 3: a 1,536 MiB node launched under 1 GiB). */
#define INSTANTIATE_LEGACY_PARAMS                                                                        \
	(gg_CUgraphExec * phGraphExec, gg_CUgraph hGraph, gg_CUgraphNode * phErrorNode, char *logBuffer, \
	 size_t bufferSize)
GG_VENEER_AFTER(cuGraphInstantiate, INSTANTIATE_LEGACY_PARAMS,
                (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize), phGraphExec && !gg_in_hook,
                instantiated(*phGraphExec, hGraph);)

GG_VENEER_AFTER(cuGraphInstantiate_v2, INSTANTIATE_LEGACY_PARAMS,
                (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize), phGraphExec && !gg_in_hook,
                instantiated(*phGraphExec, hGraph);)

#define INSTANTIATE_WITH_PARAMS(name)                                                                                  \
	GG_VENEER_AFTER(name, (gg_CUgraphExec * phGraphExec, gg_CUgraph hGraph, gg_CUDA_GRAPH_INSTANTIATE_PARAMS * p), \
	                (phGraphExec, hGraph, p), phGraphExec && !gg_in_hook, instantiated(*phGraphExec, hGraph);)
INSTANTIATE_WITH_PARAMS(cuGraphInstantiateWithParams)
INSTANTIATE_WITH_PARAMS(cuGraphInstantiateWithParams_ptsz)

/* An update gives the exec the node parameters of a topologically identical
 * graph: its needs become that graph's. */
GG_VENEER_AFTER(cuGraphExecUpdate,
                (gg_CUgraphExec hGraphExec, gg_CUgraph hGraph, gg_CUgraphNode *hErrorNode_out,
                 gg_CUgraphExecUpdateResult *updateResult_out),
                (hGraphExec, hGraph, hErrorNode_out, updateResult_out), !gg_in_hook,
                gg_graph_instantiated(hGraphExec, hGraph);)

GG_VENEER_AFTER(cuGraphExecUpdate_v2,
                (gg_CUgraphExec hGraphExec, gg_CUgraph hGraph, gg_CUgraphExecUpdateResultInfo *resultInfo),
                (hGraphExec, hGraph, resultInfo), !gg_in_hook, gg_graph_instantiated(hGraphExec, hGraph);)

/* The generic node add (CUDA 12.2; edge data from 12.3) makes allocation
 * nodes too: counted as cuGraphAddMemAllocNode's. */
#define ALLOC_NODE_OF(p)                                        \
	((p) && (p)->type == GG_CU_GRAPH_NODE_TYPE_MEM_ALLOC && \
	 (p)->alloc.poolProps.location.type == GG_CU_MEM_LOCATION_TYPE_DEVICE)
GG_VENEER_AFTER(cuGraphAddNode,
                (gg_CUgraphNode * phGraphNode, gg_CUgraph hGraph, const gg_CUgraphNode *dependencies,
                 size_t numDependencies, gg_CUgraphNodeParams *nodeParams),
                (phGraphNode, hGraph, dependencies, numDependencies, nodeParams),
                !gg_in_hook && ALLOC_NODE_OF(nodeParams), alloc_node_added(hGraph, &nodeParams->alloc);)

GG_VENEER_AFTER(cuGraphAddNode_v2,
                (gg_CUgraphNode * phGraphNode, gg_CUgraph hGraph, const gg_CUgraphNode *dependencies,
                 const gg_CUgraphEdgeData *dependencyData, size_t numDependencies, gg_CUgraphNodeParams *nodeParams),
                (phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams),
                !gg_in_hook && ALLOC_NODE_OF(nodeParams), alloc_node_added(hGraph, &nodeParams->alloc);)

/* Launch and upload: a graph whose allocation nodes could grow the reserve
 * past the ceiling is refused before the driver call. The need is the
 * graph's allocation bytes beyond what the reserve has free (an upper
 * bound: the driver may reuse memory freed inside the graph). Afterwards
 * the charge follows the reserve, whatever the graph. */
static gg_CUresult graph_run(gg_CUgraphExec exec, gg_CUstream stream, gg_CUresult (*real)(gg_CUgraphExec, gg_CUstream))
{
	if (gg_in_hook)
		return real(exec, stream);
	GG_ENTER(GG_VENEER_RUNTIME);
	int dev = -1;
	uint64_t need = 0, growth = 0, r, u;
	if (gg_graph_exec_bytes(exec, &dev, &need) == 0 && graph_mem(dev, &r, &u) == 0) {
		uint64_t free_res = r > u ? r - u : 0;
		if (need > free_res)
			growth = (need - free_res + GG_PAGE - 1) / GG_PAGE * GG_PAGE;
	}
	if (growth) {
		gg_bind_device(&cuda, dev);
		gg_dump_note_request(GPUGUARD_API_CU_MEM_ALLOC_ASYNC, growth);
		if (gg_account_begin(dev, growth) != 0) {
			GG_LEAVE();
			return GG_CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	gg_CUresult rc = real(exec, stream);
	if (dev < 0)
		dev = current_device();
	graph_reconcile(dev, growth);
	GG_LEAVE();
	return rc;
}

GG_VENEER_TO(cuGraphLaunch, (gg_CUgraphExec hGraphExec, gg_CUstream hStream), graph_run, (hGraphExec, hStream, real))

GG_VENEER_TO(cuGraphLaunch_ptsz, (gg_CUgraphExec hGraphExec, gg_CUstream hStream), graph_run,
             (hGraphExec, hStream, real))

GG_VENEER_TO(cuGraphUpload, (gg_CUgraphExec hGraphExec, gg_CUstream hStream), graph_run, (hGraphExec, hStream, real))

GG_VENEER_TO(cuGraphUpload_ptsz, (gg_CUgraphExec hGraphExec, gg_CUstream hStream), graph_run,
             (hGraphExec, hStream, real))

GG_VENEER(
    cuGraphExecDestroy, (gg_CUgraphExec hGraphExec), (hGraphExec), 0, 0, int dev = -1; uint64_t need;
    int known = gg_graph_exec_bytes(hGraphExec, &dev, &need) == 0; rc = real(hGraphExec); if (rc == GG_CUDA_SUCCESS) {
	    gg_graph_forget(hGraphExec, 1);
	    if (known)
		    graph_reconcile(dev, 0);
    })

GG_VENEER_AFTER(cuGraphDestroy, (gg_CUgraph hGraph), (hGraph), !gg_in_hook, gg_graph_forget(hGraph, 0);)

/* The driver gives the unused part of the reserve back: so do we. */
GG_VENEER_AFTER(cuDeviceGraphMemTrim, (gg_CUdevice device), (device),
                !gg_in_hook && device >= 0 && device < GG_MAX_DEVICES, graph_reconcile(device, 0);)

/* ---- arrays ------------------------------------------------------------ */

static uint64_t format_bytes(gg_CUarray_format f)
{
	switch (f) {
	case GG_CU_AD_FORMAT_UNSIGNED_INT16:
	case GG_CU_AD_FORMAT_SIGNED_INT16:
	case GG_CU_AD_FORMAT_HALF:
		return 2;
	case GG_CU_AD_FORMAT_UNSIGNED_INT32:
	case GG_CU_AD_FORMAT_SIGNED_INT32:
	case GG_CU_AD_FORMAT_FLOAT:
		return 4;
	default:
		return 1; /* 8-bit and packed video / block-compressed formats */
	}
}

/* Bytes an array occupies, estimated from its descriptor (the driver adds
 * tiling padding we cannot see); saturates instead of overflowing. */
static uint64_t array_bytes(size_t w, size_t h, size_t d, gg_CUarray_format f, unsigned ch, unsigned levels)
{
	uint64_t total = 0;
	if (levels == 0)
		levels = 1;
	for (unsigned l = 0; l < levels && l < 32; l++) {
		uint64_t v = format_bytes(f) * (ch ? ch : 1), r;
		if (__builtin_mul_overflow(v, w ? w : 1, &r) || __builtin_mul_overflow(r, h ? h : 1, &r) ||
		    __builtin_mul_overflow(r, d ? d : 1, &r) || __builtin_add_overflow(total, r, &total))
			return UINT64_MAX / 2;
		w = w > 1 ? w / 2 : 1;
		h = h > 1 ? h / 2 : h;
		d = d > 1 ? d / 2 : d;
	}
	return total;
}

GG_VENEER_ALLOC(cuArrayCreate_v2, (gg_CUarray * pHandle, const gg_CUDA_ARRAY_DESCRIPTOR *d), (pHandle, d),
                !pHandle || !d, .dev = current_device(), .api = GPUGUARD_API_CU_ARRAY, .ns = GG_NS_ARRAY, .charged = 1,
                .size = array_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels, 1), .out = pHandle)

GG_VENEER_ALLOC(cuArray3DCreate_v2, (gg_CUarray * pHandle, const gg_CUDA_ARRAY3D_DESCRIPTOR *d), (pHandle, d),
                !pHandle || !d, .dev = current_device(), .api = GPUGUARD_API_CU_ARRAY, .ns = GG_NS_ARRAY, .charged = 1,
                .size = array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, 1), .out = pHandle)

GG_VENEER_ALLOC(cuMipmappedArrayCreate,
                (gg_CUmipmappedArray * pHandle, const gg_CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int numMipmapLevels),
                (pHandle, d, numMipmapLevels), !pHandle || !d, .dev = current_device(),
                .api = GPUGUARD_API_CU_MIPMAPPED_ARRAY, .ns = GG_NS_MIPMAP, .charged = 1,
                .size = array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, numMipmapLevels),
                .out = pHandle)

GG_VENEER_FREE(cuArrayDestroy, (gg_CUarray hArray), (hArray), GG_NS_ARRAY, hArray)

GG_VENEER_FREE(cuMipmappedArrayDestroy, (gg_CUmipmappedArray h), (h), GG_NS_MIPMAP, h)

/* ---- memory info ------------------------------------------------------- */

GG_VENEER_MEMINFO(cuMemGetInfo_v2)

GG_VENEER_TOTAL(cuDeviceTotalMem_v2, (size_t * bytes, gg_CUdevice dev), (bytes, dev), bytes, dev)

/* ---- synchronisation points ------------------------------------------- */

/* A pool hands reserve above its release threshold back to the driver at a
 * synchronisation; credit it there, so no process of the pod is refused for
 * memory already given back (issue 9, finding 3). The driver's result is
 * returned untouched; with no pool ever seen this costs one load. */
#define SYNC_HOOK(name, params, args) GG_VENEER_NOTE(name, params, args, gg_note_synced)
SYNC_HOOK(cuStreamSynchronize, (gg_CUstream s), (s))
SYNC_HOOK(cuStreamSynchronize_ptsz, (gg_CUstream s), (s))
SYNC_HOOK(cuCtxSynchronize, (void), ())
SYNC_HOOK(cuCtxSynchronize_v2, (gg_CUcontext c), (c))
SYNC_HOOK(cuEventSynchronize, (gg_CUevent e), (e))

/* ---- cuGetProcAddress --------------------------------------------------- */

/* A governed name as cuGetProcAddress sees it, one per GG_CUDA_HOOKS row
 * (hooks.h): the base name, the ABI version from which the driver hands out
 * the variant we wrap (below it the legacy ABI comes back, which we never
 * wrap), our wrappers and real slots. */
struct gpa_entry {
	const char *name;
	int min_version;
	int below_version; /* 0, or the version from which the next row serves the name */
	void *ours;
	void *_Atomic *real;
	void *ours_ptsz; /* for flag CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
	void *_Atomic *real_ptsz;
};

#define SLOT_ELSEWHERE(n) ((void *_Atomic *)&gg_real_##n)
#define GPA_ROW(n, base, min, below, ...) {#base, min, below, (void *)n, SLOT(n), NULL, NULL},
#define GPA_ROW_PTSZ(n, ptsz, base, min, below, ...) {#base, min, below, (void *)n, SLOT(n), (void *)ptsz, SLOT(ptsz)},
#define GPA_ROW_ELSEWHERE(n, base, min, below, ...) {#base, min, below, (void *)n, SLOT_ELSEWHERE(n), NULL, NULL},
static const struct gpa_entry gpa_table[] = {GG_CUDA_HOOKS(GPA_ROW, GPA_ROW_PTSZ)
                                                 GG_CUDA_HOOKS_ELSEWHERE(GPA_ROW_ELSEWHERE)};

/* The row serving name at version (a name's rows are in version order). */
static const struct gpa_entry *gpa_find(const char *name, int version)
{
	if (name[0] != 'c' || name[1] != 'u')
		return NULL;
	for (size_t i = 0; i < sizeof(gpa_table) / sizeof(gpa_table[0]); i++)
		if (strcmp(name, gpa_table[i].name) == 0 &&
		    (gpa_table[i].below_version == 0 || version < gpa_table[i].below_version))
			return &gpa_table[i];
	return NULL;
}

/* Given what the real cuGetProcAddress returned for (symbol, version, flags),
 * returns what the caller gets. */
static void *gpa_substitute(const char *symbol, int version, gg_cuuint64_t flags, void *real)
{
	const struct gpa_entry *e = gpa_find(symbol, version);
	if (!e || version < e->min_version || gg_cuda_is_ours(real))
		return real;
	if ((flags & GG_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && e->ours_ptsz) {
		gg_real_offer(e->real_ptsz, real);
		return e->ours_ptsz;
	}
	gg_real_offer(e->real, real);
	return e->ours;
}

GG_EXPORT gg_CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, gg_cuuint64_t flags,
                                          gg_CUdriverProcAddressQueryResult *symbolStatus)
{
	gg_pfn_cuGetProcAddress_v2 real = REAL(cuGetProcAddress_v2);
	if (!real)
		return GG_CUDA_ERROR_NOT_FOUND;
	/* The real one first, with the caller's own version and flags. */
	gg_CUresult rc = real(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (rc == GG_CUDA_SUCCESS && symbol && pfn && *pfn && !gg_in_hook)
		*pfn = gpa_substitute(symbol, cudaVersion, flags, *pfn);
	return rc;
}

GG_EXPORT gg_CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, gg_cuuint64_t flags)
{
	gg_pfn_cuGetProcAddress real = REAL(cuGetProcAddress);
	if (!real)
		return GG_CUDA_ERROR_NOT_FOUND;
	gg_CUresult rc = real(symbol, pfn, cudaVersion, flags);
	if (rc == GG_CUDA_SUCCESS && symbol && pfn && *pfn && !gg_in_hook)
		*pfn = gpa_substitute(symbol, cudaVersion, flags, *pfn);
	return rc;
}

/* ---- for the dlsym override -------------------------------------------- */

#define SYM_ROW(n) {#n, (void *)n, SLOT(n)},
#define SYM_ROW_HOOK(n, ...) SYM_ROW(n)
#define SYM_ROW_PTSZ(n, ptsz, ...) SYM_ROW(n) SYM_ROW(ptsz)
#define SYM_ROW_ELSEWHERE(n, ...) {#n, (void *)n, SLOT_ELSEWHERE(n)},
GG_VENEER_SYMS(cuda, GG_CUDA_HOOKS(SYM_ROW_HOOK, SYM_ROW_PTSZ) GG_CUDA_HOOKS_ELSEWHERE(SYM_ROW_ELSEWHERE))

#define CTX_NAME(n, ...) #n,
int gg_cuda_ctx_symbol(const char *name)
{
	static const char *const names[] = {GG_CUDA_CTX_HOOKS(CTX_NAME)};
	return gg_sym_named(names, sizeof(names) / sizeof(names[0]), name);
}
