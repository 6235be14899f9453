/* gpuguard: the HIP prototypes we call, hook or simulate, as an X-list.
 * The includer defines GGT(type) and GG_HIP_FN. No include guard. */

GG_HIP_FN(hipInit, (unsigned int flags))
GG_HIP_FN(hipDriverGetVersion, (int *driverVersion))
GG_HIP_FN(hipRuntimeGetVersion, (int *runtimeVersion))
GG_HIP_FN(hipGetDeviceCount, (int *count))
GG_HIP_FN(hipSetDevice, (int deviceId))
GG_HIP_FN(hipGetDevice, (int *deviceId))
/* the context calls, deprecated by ROCm: each may change the current device */
GG_HIP_FN(hipCtxCreate, (GGT(hipCtx_t) * ctx, unsigned int flags, GGT(hipDevice_t) device))
GG_HIP_FN(hipCtxDestroy, (GGT(hipCtx_t) ctx))
GG_HIP_FN(hipCtxSetCurrent, (GGT(hipCtx_t) ctx))
GG_HIP_FN(hipCtxGetCurrent, (GGT(hipCtx_t) * ctx))
GG_HIP_FN(hipCtxPushCurrent, (GGT(hipCtx_t) ctx))
GG_HIP_FN(hipCtxPopCurrent, (GGT(hipCtx_t) * ctx))
GG_HIP_FN(hipDeviceGetName, (char *name, int len, GGT(hipDevice_t) device))
GG_HIP_FN(hipDeviceTotalMem, (size_t * bytes, GGT(hipDevice_t) device))
GG_HIP_FN(hipDeviceGetUuid, (GGT(hipUUID) * uuid, GGT(hipDevice_t) device))
GG_HIP_FN(hipDeviceSynchronize, (void))
GG_HIP_FN(hipDeviceReset, (void))
GG_HIP_FN(hipStreamCreate, (GGT(hipStream_t) * stream))
GG_HIP_FN(hipStreamDestroy, (GGT(hipStream_t) stream))
GG_HIP_FN(hipStreamSynchronize, (GGT(hipStream_t) stream))

GG_HIP_FN(hipMalloc, (void **ptr, size_t size))
GG_HIP_FN(hipExtMallocWithFlags, (void **ptr, size_t sizeBytes, unsigned int flags))
GG_HIP_FN(hipMallocManaged, (void **dev_ptr, size_t size, unsigned int flags))
GG_HIP_FN(hipMallocPitch, (void **ptr, size_t *pitch, size_t width, size_t height))
GG_HIP_FN(hipFree, (void *ptr))
GG_HIP_FN(hipMemGetInfo, (size_t * free, size_t *total))
GG_HIP_FN(hipMemGetAddressRange, (GGT(hipDeviceptr_t) * pbase, size_t *psize, GGT(hipDeviceptr_t) dptr))
GG_HIP_FN(hipHostMalloc, (void **ptr, size_t size, unsigned int flags))
GG_HIP_FN(hipHostFree, (void *ptr))

GG_HIP_FN(hipMallocAsync, (void **dev_ptr, size_t size, GGT(hipStream_t) stream))
GG_HIP_FN(hipMallocFromPoolAsync, (void **dev_ptr, size_t size, GGT(hipMemPool_t) mem_pool, GGT(hipStream_t) stream))
GG_HIP_FN(hipFreeAsync, (void *dev_ptr, GGT(hipStream_t) stream))
GG_HIP_FN(hipDeviceGetDefaultMemPool, (GGT(hipMemPool_t) * mem_pool, int device))
GG_HIP_FN(hipDeviceGetMemPool, (GGT(hipMemPool_t) * mem_pool, int device))
GG_HIP_FN(hipDeviceSetMemPool, (int device, GGT(hipMemPool_t) mem_pool))
GG_HIP_FN(hipMemPoolCreate, (GGT(hipMemPool_t) * mem_pool, const GGT(hipMemPoolProps) * pool_props))
GG_HIP_FN(hipMemPoolDestroy, (GGT(hipMemPool_t) mem_pool))
GG_HIP_FN(hipMemPoolTrimTo, (GGT(hipMemPool_t) mem_pool, size_t min_bytes_to_hold))
GG_HIP_FN(hipMemPoolSetAttribute, (GGT(hipMemPool_t) mem_pool, GGT(hipMemPoolAttr) attr, void *value))
GG_HIP_FN(hipMemPoolGetAttribute, (GGT(hipMemPool_t) mem_pool, GGT(hipMemPoolAttr) attr, void *value))

GG_HIP_FN(hipMemCreate, (GGT(hipMemGenericAllocationHandle_t) * handle, size_t size,
                         const GGT(hipMemAllocationProp) * prop, unsigned long long flags))
GG_HIP_FN(hipMemRelease, (GGT(hipMemGenericAllocationHandle_t) handle))
GG_HIP_FN(hipMemAddressReserve, (void **ptr, size_t size, size_t alignment, void *addr, unsigned long long flags))
GG_HIP_FN(hipMemAddressFree, (void *devPtr, size_t size))
GG_HIP_FN(hipMemMap, (void *ptr, size_t size, size_t offset, GGT(hipMemGenericAllocationHandle_t) handle,
                      unsigned long long flags))
GG_HIP_FN(hipMemUnmap, (void *ptr, size_t size))
GG_HIP_FN(hipMemGetAllocationGranularity,
          (size_t * granularity, const GGT(hipMemAllocationProp) * prop, GGT(hipMemAllocationGranularity_flags) option))
GG_HIP_FN(hipMemRetainAllocationHandle, (GGT(hipMemGenericAllocationHandle_t) * handle, void *addr))
GG_HIP_FN(hipMemExportToShareableHandle, (void *shareableHandle, GGT(hipMemGenericAllocationHandle_t) handle,
                                          GGT(hipMemAllocationHandleType) handleType, unsigned long long flags))
GG_HIP_FN(hipMemImportFromShareableHandle,
          (GGT(hipMemGenericAllocationHandle_t) * handle, void *osHandle, GGT(hipMemAllocationHandleType) shHandleType))

/* inter-process memory */
GG_HIP_FN(hipIpcGetMemHandle, (GGT(hipIpcMemHandle_t) * handle, void *devPtr))
GG_HIP_FN(hipIpcOpenMemHandle, (void **devPtr, GGT(hipIpcMemHandle_t) handle, unsigned int flags))
GG_HIP_FN(hipIpcCloseMemHandle, (void *devPtr))
