/* gpuguard: every governed entry point, one row each, per runtime, and the
 * library's other exports. From these rows come the real pointers, the dlsym
 * table, the cuGetProcAddress substitutions (hook_cuda.c, hook_hip.c,
 * hook_nvml.c) and the export list tests/scripts/exports.sh holds the library
 * to (the Makefile's exports.txt). Adding a hook is one row here and its
 * body, a veneer (veneer.h); the prototype is the runtime's ABI list
 * (gpuguard/cuda_abi_funcs.h). */
#ifndef GG_HOOKS_H
#define GG_HOOKS_H

/* Every row's shape says which core function its body is a veneer over:
 * alloc, free, pool_alloc (a stream-ordered block), pool (pool management),
 * note (bookkeeping after the call succeeded), host (pinned host memory),
 * meminfo (memory queries answered under the ceiling) or lookup (entry-point
 * lookup). api is what the books record it as, GPUGUARD_API_<api>
 * (gpuguard/api.h); NONE where it makes no allocation. */

/* CUDA driver: H(name, base, min, below, shape, api).
 *   name   the ABI we export and wrap; its real pointer is real_<name>
 *   base   the name cuGetProcAddress is asked for
 *   min    the version from which the driver hands out `name` for base;
 *          below it comes a legacy ABI, which we never wrap (3020: _v2)
 *   below  0, or the version from which the next row of the same base
 *          serves it; a base's rows are in version order
 * HP(name, ptsz, base, min, below, shape, api): the same, with ptsz its
 * per-thread default stream variant, handed out for the flag
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM. Each variant has a real
 * pointer of its own (never share one between cuMemAllocAsync and
 * cuMemAllocAsync_ptsz). */
/* The calls that change a thread's current context (hook_cuda.c's
 * current_device keeps it per thread): in GG_CUDA_HOOKS, below. A copy of
 * the driver in another link-map namespace keeps them (hook_dlsym.c): its
 * current context is its own, and nothing of our books. */
#define GG_CUDA_CTX_HOOKS(H)                                          \
	H(cuCtxSetCurrent, cuCtxSetCurrent, 0, 0, note, NONE)         \
	H(cuCtxPushCurrent, cuCtxPushCurrent, 0, 4000, note, NONE)    \
	H(cuCtxPushCurrent_v2, cuCtxPushCurrent, 4000, 0, note, NONE) \
	H(cuCtxPopCurrent, cuCtxPopCurrent, 0, 4000, note, NONE)      \
	H(cuCtxPopCurrent_v2, cuCtxPopCurrent, 4000, 0, note, NONE)   \
	H(cuCtxCreate, cuCtxCreate, 0, 3020, note, NONE)              \
	H(cuCtxCreate_v2, cuCtxCreate, 3020, 11040, note, NONE)       \
	H(cuCtxCreate_v3, cuCtxCreate, 11040, 12050, note, NONE)      \
	H(cuCtxCreate_v4, cuCtxCreate, 12050, 0, note, NONE)

#define GG_CUDA_HOOKS(H, HP)                                                                                          \
	H(cuMemAlloc_v2, cuMemAlloc, 3020, 0, alloc, CU_MEM_ALLOC)                                                    \
	H(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, 0, alloc, CU_MEM_ALLOC_PITCH)                                    \
	H(cuMemAllocManaged, cuMemAllocManaged, 0, 0, alloc, CU_MEM_ALLOC_MANAGED)                                    \
	HP(cuMemAllocAsync, cuMemAllocAsync_ptsz, cuMemAllocAsync, 0, 0, pool_alloc, CU_MEM_ALLOC_ASYNC)              \
	HP(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 0, 0, pool_alloc,          \
	   CU_MEM_ALLOC_FROM_POOL)                                                                                    \
	H(cuMemFree_v2, cuMemFree, 3020, 0, free, NONE)                                                               \
	HP(cuMemFreeAsync, cuMemFreeAsync_ptsz, cuMemFreeAsync, 0, 0, free, NONE)                                     \
	H(cuMemCreate, cuMemCreate, 0, 0, alloc, CU_MEM_CREATE)                                                       \
	H(cuMemRelease, cuMemRelease, 0, 0, free, NONE)                                                               \
	H(cuMemAddressReserve, cuMemAddressReserve, 0, 0, note, NONE)                                                 \
	H(cuMemAddressFree, cuMemAddressFree, 0, 0, note, NONE)                                                       \
	H(cuMemMap, cuMemMap, 0, 0, note, NONE)                                                                       \
	H(cuMemUnmap, cuMemUnmap, 0, 0, note, NONE)                                                                   \
	H(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 0, 0, note, NONE)                                 \
	H(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle, 0, 0, note, NONE)                           \
	H(cuGraphAddMemAllocNode, cuGraphAddMemAllocNode, 0, 0, note, NONE)                                           \
	/* the legacy one-argument ABI below 10010, the one with a mode from it */                                    \
	HP(cuStreamBeginCapture, cuStreamBeginCapture_ptsz, cuStreamBeginCapture, 0, 10010, note, NONE)               \
	HP(cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture, 10010, 0, note, NONE)         \
	H(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 0, 0, note, NONE)                                 \
	/* CUDA 10's instantiate below 11000, CUDA 11's _v2 from it (issue 25, item 3) */                             \
	H(cuGraphInstantiate, cuGraphInstantiate, 0, 11000, note, NONE)                                               \
	H(cuGraphInstantiate_v2, cuGraphInstantiate, 11000, 0, note, NONE)                                            \
	HP(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, 0, 0, note, \
	   NONE)                                                                                                      \
	H(cuGraphExecUpdate, cuGraphExecUpdate, 0, 12000, note, NONE)                                                 \
	H(cuGraphExecUpdate_v2, cuGraphExecUpdate, 12000, 0, note, NONE)                                              \
	H(cuGraphAddNode, cuGraphAddNode, 0, 12030, note, NONE)                                                       \
	H(cuGraphAddNode_v2, cuGraphAddNode, 12030, 0, note, NONE)                                                    \
	HP(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph, 0, 0, note,    \
	   NONE)                                                                                                      \
	HP(cuGraphLaunch, cuGraphLaunch_ptsz, cuGraphLaunch, 0, 0, note, NONE)                                        \
	HP(cuGraphUpload, cuGraphUpload_ptsz, cuGraphUpload, 0, 0, note, NONE)                                        \
	H(cuGraphExecDestroy, cuGraphExecDestroy, 0, 0, note, NONE)                                                   \
	H(cuGraphDestroy, cuGraphDestroy, 0, 0, note, NONE)                                                           \
	H(cuDeviceGraphMemTrim, cuDeviceGraphMemTrim, 0, 0, note, NONE)                                               \
	H(cuArrayCreate_v2, cuArrayCreate, 3020, 0, alloc, CU_ARRAY)                                                  \
	H(cuArray3DCreate_v2, cuArray3DCreate, 3020, 0, alloc, CU_ARRAY)                                              \
	H(cuArrayDestroy, cuArrayDestroy, 0, 0, free, NONE)                                                           \
	H(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 0, 0, alloc, CU_MIPMAPPED_ARRAY)                            \
	H(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 0, 0, free, NONE)                                         \
	H(cuMemGetInfo_v2, cuMemGetInfo, 3020, 0, meminfo, NONE)                                                      \
	H(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, 0, meminfo, NONE)                                              \
	H(cuMemPoolCreate, cuMemPoolCreate, 0, 0, pool, NONE)                                                         \
	H(cuMemPoolDestroy, cuMemPoolDestroy, 0, 0, pool, NONE)                                                       \
	H(cuMemPoolTrimTo, cuMemPoolTrimTo, 0, 0, pool, NONE)                                                         \
	/* a device's current pool: the cached one is asked for again */                                              \
	H(cuDeviceSetMemPool, cuDeviceSetMemPool, 0, 0, note, NONE)                                                   \
	H(cuMemSetMemPool, cuMemSetMemPool, 0, 0, note, NONE)                                                         \
	H(cuMemAllocHost_v2, cuMemAllocHost, 3020, 0, host, NONE)                                                     \
	H(cuMemHostAlloc, cuMemHostAlloc, 0, 0, host, NONE)                                                           \
	H(cuMemFreeHost, cuMemFreeHost, 0, 0, host, NONE)                                                             \
	H(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 0, 0, note, NONE)                                       \
	/* what the driver takes without an allocation call (footprint.c) */                                          \
	H(cuCtxSetLimit, cuCtxSetLimit, 0, 0, note, NONE)                                                             \
	H(cuModuleLoad, cuModuleLoad, 0, 0, note, NONE)                                                               \
	H(cuModuleLoadData, cuModuleLoadData, 0, 0, note, NONE)                                                       \
	H(cuModuleLoadDataEx, cuModuleLoadDataEx, 0, 0, note, NONE)                                                   \
	H(cuModuleLoadFatBinary, cuModuleLoadFatBinary, 0, 0, note, NONE)                                             \
	H(cuLibraryLoadData, cuLibraryLoadData, 0, 0, note, NONE)                                                     \
	H(cuLibraryLoadFromFile, cuLibraryLoadFromFile, 0, 0, note, NONE)                                             \
	H(cuModuleGetFunction, cuModuleGetFunction, 0, 0, note, NONE)                                                 \
	H(cuLibraryGetKernel, cuLibraryGetKernel, 0, 0, note, NONE)                                                   \
	H(cuKernelGetFunction, cuKernelGetFunction, 0, 0, note, NONE)                                                 \
	/* cudart asks at 7000 and gets v1; from 11000 the driver hands out _v2 */                                    \
	H(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 0, 11000, note, NONE)                                     \
	H(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, 0, note, NONE)                                  \
	/* the last release resets the primary context; cudart asks at 7000 */                                        \
	H(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 0, 11000, note, NONE)                                 \
	H(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, 0, note, NONE)                              \
	H(cuCtxDestroy, cuCtxDestroy, 0, 4000, note, NONE)                                                            \
	H(cuCtxDestroy_v2, cuCtxDestroy, 4000, 0, note, NONE)                                                         \
	/* the current context: the hooks' cached one is asked for again */                                           \
	GG_CUDA_CTX_HOOKS(H)                                                                                          \
	HP(cuStreamSynchronize, cuStreamSynchronize_ptsz, cuStreamSynchronize, 0, 0, note, NONE)                      \
	/* the 13000 ABI takes the context to synchronise */                                                          \
	H(cuCtxSynchronize, cuCtxSynchronize, 0, 13000, note, NONE)                                                   \
	H(cuCtxSynchronize_v2, cuCtxSynchronize, 13000, 0, note, NONE)                                                \
	H(cuEventSynchronize, cuEventSynchronize, 0, 0, note, NONE)                                                   \
	/* the legacy 4-argument one below 12000, the 5-argument _v2 from 12000                                       \
	 * (what cudart asks for at 11030 and 12000) */                                                               \
	H(cuGetProcAddress, cuGetProcAddress, 0, 12000, lookup, NONE)                                                 \
	H(cuGetProcAddress_v2, cuGetProcAddress, 12000, 0, lookup, NONE)

/* CUDA hooks whose body and real pointer (gg_real_<name>) live in another
 * file: the runtime's private tables (export.c). Same columns. */
#define GG_CUDA_HOOKS_ELSEWHERE(H) H(cuGetExportTable, cuGetExportTable, 0, 0, lookup, NONE)

/* The HIP calls that may change a thread's current device (hook_hip.c's
 * current_device keeps it per thread): in GG_HIP_HOOKS, below. A copy of
 * the runtime in another link-map namespace keeps them (hook_dlsym.c), as
 * a copy of the CUDA driver keeps GG_CUDA_CTX_HOOKS. */
#define GG_HIP_DEV_HOOKS(H)              \
	H(hipSetDevice, note, NONE)      \
	H(hipCtxCreate, note, NONE)      \
	H(hipCtxDestroy, note, NONE)     \
	H(hipCtxSetCurrent, note, NONE)  \
	H(hipCtxPushCurrent, note, NONE) \
	H(hipCtxPopCurrent, note, NONE)

/* HIP: H(name, shape, api). HIP programs bind libamdhip64's symbols
 * directly, or look them up with dlsym, or ask hipGetProcAddress, which
 * ROCm answers with dlsym on its own handle: our dlsym override serves
 * both lookups (hook_dlsym.c); there is no table of our own to
 * substitute in. */
#define GG_HIP_HOOKS(H)                                             \
	H(hipMalloc, alloc, HIP_MALLOC)                             \
	H(hipExtMallocWithFlags, alloc, HIP_EXT_MALLOC)             \
	H(hipMallocManaged, alloc, HIP_MALLOC_MANAGED)              \
	H(hipMallocPitch, alloc, HIP_MALLOC_PITCH)                  \
	H(hipMallocAsync, pool_alloc, HIP_MALLOC_ASYNC)             \
	H(hipMallocFromPoolAsync, pool_alloc, HIP_MALLOC_FROM_POOL) \
	H(hipFree, free, NONE)                                      \
	H(hipFreeAsync, free, NONE)                                 \
	H(hipMemCreate, alloc, HIP_MEM_CREATE)                      \
	H(hipMemRelease, free, NONE)                                \
	H(hipMemAddressReserve, note, NONE)                         \
	H(hipMemAddressFree, note, NONE)                            \
	H(hipMemMap, note, NONE)                                    \
	H(hipMemUnmap, note, NONE)                                  \
	H(hipMemRetainAllocationHandle, note, NONE)                 \
	H(hipDeviceReset, note, NONE)                               \
	H(hipMemImportFromShareableHandle, note, NONE)              \
	H(hipMemGetInfo, meminfo, NONE)                             \
	H(hipDeviceTotalMem, meminfo, NONE)                         \
	H(hipMemPoolCreate, pool, NONE)                             \
	H(hipMemPoolDestroy, pool, NONE)                            \
	H(hipMemPoolTrimTo, pool, NONE)                             \
	H(hipDeviceSetMemPool, note, NONE)                          \
	GG_HIP_DEV_HOOKS(H)                                         \
	H(hipHostMalloc, host, NONE)                                \
	H(hipHostFree, host, NONE)                                  \
	H(hipStreamSynchronize, note, NONE)                         \
	H(hipDeviceSynchronize, note, NONE)

/* NVML: H(name, shape, api). */
#define GG_NVML_HOOKS(H)                          \
	H(nvmlDeviceGetMemoryInfo, meminfo, NONE) \
	H(nvmlDeviceGetMemoryInfo_v2, meminfo, NONE)

/* The library's exports that are not hooks, X(name), by where they are
 * defined: the public API (include/gpuguard.h, init.c) and the libc
 * functions we interpose (hook_dlsym.c). A new libc interposer is a row in
 * GG_LIBC_EXPORTS and a name in exports.map. */
#define GG_API_EXPORTS(X)        \
	X(gpuguard_version)      \
	X(gpuguard_device_stats) \
	X(gpuguard_table_stats)  \
	X(gpuguard_device_runtime)
#define GG_LIBC_EXPORTS(X) \
	X(dlsym)           \
	X(sigaction)       \
	X(__sigaction)     \
	X(signal)          \
	X(bsd_signal)      \
	X(ssignal)         \
	X(sysv_signal)     \
	X(__sysv_signal)   \
	X(sigset)          \
	X(siginterrupt)    \
	X(_exit)           \
	X(_Exit)

#endif
