/* gpuguard: the CUDA driver prototypes we call, hook or simulate, as an
 * X-list. The includer defines GGT(type), GG_CU_FN, GG_CU_FN_PTSZ (per-thread
 * default stream variants) and GG_CU_FN_LEGACY (pre-_v2 ABIs). No include guard:
 * cuda_abi.h and tests/abi/ expand it with different definitions. */

/* initialisation, devices, contexts, streams */
GG_CU_FN(cuInit, (unsigned int Flags))
GG_CU_FN(cuDriverGetVersion, (int *driverVersion))
GG_CU_FN(cuDeviceGet, (GGT(CUdevice) * device, int ordinal))
GG_CU_FN(cuDeviceGetCount, (int *count))
GG_CU_FN(cuDeviceGetName, (char *name, int len, GGT(CUdevice) dev))
GG_CU_FN(cuDeviceTotalMem_v2, (size_t * bytes, GGT(CUdevice) dev))
/* cuda.h maps cuDeviceGetUuid to _v2 (CUDA 11.4+): the same UUID, but a MIG
 * instance's own under MIG. The legacy one is below. */
GG_CU_FN(cuDeviceGetUuid_v2, (GGT(CUuuid) * uuid, GGT(CUdevice) dev))
GG_CU_FN(cuDevicePrimaryCtxRetain, (GGT(CUcontext) * pctx, GGT(CUdevice) dev))
GG_CU_FN(cuDevicePrimaryCtxRelease_v2, (GGT(CUdevice) dev))
GG_CU_FN(cuCtxSetCurrent, (GGT(CUcontext) ctx))
GG_CU_FN(cuCtxGetCurrent, (GGT(CUcontext) * pctx))
GG_CU_FN(cuCtxGetDevice, (GGT(CUdevice) * device))
GG_CU_FN(cuCtxPushCurrent_v2, (GGT(CUcontext) ctx))
GG_CU_FN(cuCtxPopCurrent_v2, (GGT(CUcontext) * pctx))
GG_CU_FN(cuCtxSynchronize, (void))
GG_CU_FN(cuStreamCreate, (GGT(CUstream) * phStream, unsigned int Flags))
GG_CU_FN(cuStreamDestroy_v2, (GGT(CUstream) hStream))
GG_CU_FN(cuStreamSynchronize, (GGT(CUstream) hStream))
GG_CU_FN(cuGetErrorString, (GGT(CUresult) error, const char **pStr))
GG_CU_FN(cuGetErrorName, (GGT(CUresult) error, const char **pStr))

/* device memory */
GG_CU_FN(cuMemGetInfo_v2, (size_t * free, size_t *total))
GG_CU_FN(cuMemAlloc_v2, (GGT(CUdeviceptr) * dptr, size_t bytesize))
GG_CU_FN(cuMemAllocPitch_v2,
         (GGT(CUdeviceptr) * dptr, size_t *pPitch, size_t WidthInBytes, size_t Height, unsigned int ElementSizeBytes))
GG_CU_FN(cuMemFree_v2, (GGT(CUdeviceptr) dptr))
GG_CU_FN(cuMemGetAddressRange_v2, (GGT(CUdeviceptr) * pbase, size_t *psize, GGT(CUdeviceptr) dptr))
GG_CU_FN(cuMemAllocManaged, (GGT(CUdeviceptr) * dptr, size_t bytesize, unsigned int flags))

/* pinned host memory */
GG_CU_FN(cuMemAllocHost_v2, (void **pp, size_t bytesize))
GG_CU_FN(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int Flags))
GG_CU_FN(cuMemFreeHost, (void *p))

/* arrays */
GG_CU_FN(cuArrayCreate_v2, (GGT(CUarray) * pHandle, const GGT(CUDA_ARRAY_DESCRIPTOR) * pAllocateArray))
GG_CU_FN(cuArray3DCreate_v2, (GGT(CUarray) * pHandle, const GGT(CUDA_ARRAY3D_DESCRIPTOR) * pAllocateArray))
GG_CU_FN(cuArrayDestroy, (GGT(CUarray) hArray))
GG_CU_FN(cuMipmappedArrayCreate,
         (GGT(CUmipmappedArray) * pHandle, const GGT(CUDA_ARRAY3D_DESCRIPTOR) * pMipmappedArrayDesc,
          unsigned int numMipmapLevels))
GG_CU_FN(cuMipmappedArrayDestroy, (GGT(CUmipmappedArray) hMipmappedArray))

/* virtual memory management */
GG_CU_FN(cuMemAddressReserve,
         (GGT(CUdeviceptr) * ptr, size_t size, size_t alignment, GGT(CUdeviceptr) addr, unsigned long long flags))
GG_CU_FN(cuMemAddressFree, (GGT(CUdeviceptr) ptr, size_t size))
GG_CU_FN(cuMemCreate, (GGT(CUmemGenericAllocationHandle) * handle, size_t size, const GGT(CUmemAllocationProp) * prop,
                       unsigned long long flags))
GG_CU_FN(cuMemRelease, (GGT(CUmemGenericAllocationHandle) handle))
GG_CU_FN(cuMemMap, (GGT(CUdeviceptr) ptr, size_t size, size_t offset, GGT(CUmemGenericAllocationHandle) handle,
                    unsigned long long flags))
GG_CU_FN(cuMemUnmap, (GGT(CUdeviceptr) ptr, size_t size))
GG_CU_FN(cuMemSetAccess, (GGT(CUdeviceptr) ptr, size_t size, const GGT(CUmemAccessDesc) * desc, size_t count))
GG_CU_FN(cuMemGetAllocationGranularity,
         (size_t * granularity, const GGT(CUmemAllocationProp) * prop, GGT(CUmemAllocationGranularity_flags) option))
GG_CU_FN(cuMemGetAllocationPropertiesFromHandle,
         (GGT(CUmemAllocationProp) * prop, GGT(CUmemGenericAllocationHandle) handle))

/* stream-ordered allocation and pools */
GG_CU_FN(cuMemAllocAsync, (GGT(CUdeviceptr) * dptr, size_t bytesize, GGT(CUstream) hStream))
GG_CU_FN(cuMemAllocFromPoolAsync,
         (GGT(CUdeviceptr) * dptr, size_t bytesize, GGT(CUmemoryPool) pool, GGT(CUstream) hStream))
GG_CU_FN(cuMemFreeAsync, (GGT(CUdeviceptr) dptr, GGT(CUstream) hStream))
GG_CU_FN(cuDeviceGetDefaultMemPool, (GGT(CUmemoryPool) * pool_out, GGT(CUdevice) dev))
GG_CU_FN(cuDeviceGetMemPool, (GGT(CUmemoryPool) * pool, GGT(CUdevice) dev))
GG_CU_FN(cuDeviceSetMemPool, (GGT(CUdevice) dev, GGT(CUmemoryPool) pool))
GG_CU_FN(cuMemPoolCreate, (GGT(CUmemoryPool) * pool, const GGT(CUmemPoolProps) * poolProps))
GG_CU_FN(cuMemPoolDestroy, (GGT(CUmemoryPool) pool))
GG_CU_FN(cuMemPoolTrimTo, (GGT(CUmemoryPool) pool, size_t minBytesToKeep))
GG_CU_FN(cuMemPoolSetAttribute, (GGT(CUmemoryPool) pool, GGT(CUmemPool_attribute) attr, void *value))
GG_CU_FN(cuMemPoolGetAttribute, (GGT(CUmemoryPool) pool, GGT(CUmemPool_attribute) attr, void *value))

/* entry points */
GG_CU_FN(cuGetProcAddress_v2, (const char *symbol, void **pfn, int cudaVersion, GGT(cuuint64_t) flags,
                               GGT(CUdriverProcAddressQueryResult) * symbolStatus))

/* private tables of the runtime (tests/sim/README.md) */
GG_CU_FN(cuGetExportTable, (const void **ppExportTable, const GGT(CUuuid) * pExportTableId))

/* primary and created contexts */
GG_CU_FN(cuDevicePrimaryCtxReset_v2, (GGT(CUdevice) dev))
GG_CU_FN(cuDevicePrimaryCtxGetState, (GGT(CUdevice) dev, unsigned int *flags, int *active))
GG_CU_FN(cuDevicePrimaryCtxSetFlags_v2, (GGT(CUdevice) dev, unsigned int flags))
GG_CU_FN(cuCtxCreate_v4,
         (GGT(CUcontext) * pctx, GGT(CUctxCreateParams) * ctxCreateParams, unsigned int flags, GGT(CUdevice) dev))
GG_CU_FN(cuCtxDestroy_v2, (GGT(CUcontext) ctx))
/* the 13000 ABIs of cuCtxGetDevice / cuCtxSynchronize name the context */
GG_CU_FN(cuCtxGetDevice_v2, (GGT(CUdevice) * device, GGT(CUcontext) ctx))
GG_CU_FN(cuCtxSynchronize_v2, (GGT(CUcontext) ctx))
GG_CU_FN(cuCtxGetApiVersion, (GGT(CUcontext) ctx, unsigned int *version))

/* VMM sharing and retain */
GG_CU_FN(cuMemRetainAllocationHandle, (GGT(CUmemGenericAllocationHandle) * handle, void *addr))
GG_CU_FN(cuMemExportToShareableHandle, (void *shareableHandle, GGT(CUmemGenericAllocationHandle) handle,
                                        GGT(CUmemAllocationHandleType) handleType, unsigned long long flags))
GG_CU_FN(cuMemImportFromShareableHandle,
         (GGT(CUmemGenericAllocationHandle) * handle, void *osHandle, GGT(CUmemAllocationHandleType) shHandleType))

/* IPC and host registration */
GG_CU_FN(cuIpcGetMemHandle, (GGT(CUipcMemHandle) * pHandle, GGT(CUdeviceptr) dptr))
GG_CU_FN(cuIpcOpenMemHandle_v2, (GGT(CUdeviceptr) * pdptr, GGT(CUipcMemHandle) handle, unsigned int Flags))
GG_CU_FN(cuIpcCloseMemHandle, (GGT(CUdeviceptr) dptr))
GG_CU_FN(cuMemHostRegister_v2, (void *p, size_t bytesize, unsigned int Flags))
GG_CU_FN(cuMemHostUnregister, (void *p))

/* events */
GG_CU_FN(cuEventCreate, (GGT(CUevent) * phEvent, unsigned int Flags))
GG_CU_FN(cuEventRecord, (GGT(CUevent) hEvent, GGT(CUstream) hStream))
GG_CU_FN(cuEventSynchronize, (GGT(CUevent) hEvent))
GG_CU_FN(cuEventQuery, (GGT(CUevent) hEvent))
GG_CU_FN(cuEventDestroy_v2, (GGT(CUevent) hEvent))
GG_CU_FN(cuStreamQuery, (GGT(CUstream) hStream))

/* stream capture and graphs (memory nodes) */
GG_CU_FN(cuStreamBeginCapture_v2, (GGT(CUstream) hStream, GGT(CUstreamCaptureMode) mode))
GG_CU_FN(cuStreamEndCapture, (GGT(CUstream) hStream, GGT(CUgraph) * phGraph))
GG_CU_FN(cuStreamIsCapturing, (GGT(CUstream) hStream, GGT(CUstreamCaptureStatus) * captureStatus))
GG_CU_FN(cuStreamGetCaptureInfo_v3,
         (GGT(CUstream) hStream, GGT(CUstreamCaptureStatus) * captureStatus_out, GGT(cuuint64_t) * id_out,
          GGT(CUgraph) * graph_out, const GGT(CUgraphNode) * *dependencies_out,
          const GGT(CUgraphEdgeData) * *edgeData_out, size_t *numDependencies_out))
GG_CU_FN(cuThreadExchangeStreamCaptureMode, (GGT(CUstreamCaptureMode) * mode))
GG_CU_FN(cuGraphCreate, (GGT(CUgraph) * phGraph, unsigned int flags))
GG_CU_FN(cuGraphAddMemAllocNode,
         (GGT(CUgraphNode) * phGraphNode, GGT(CUgraph) hGraph, const GGT(CUgraphNode) * dependencies,
          size_t numDependencies, GGT(CUDA_MEM_ALLOC_NODE_PARAMS) * nodeParams))
GG_CU_FN(cuGraphAddMemFreeNode, (GGT(CUgraphNode) * phGraphNode, GGT(CUgraph) hGraph,
                                 const GGT(CUgraphNode) * dependencies, size_t numDependencies, GGT(CUdeviceptr) dptr))
GG_CU_FN(cuGraphInstantiateWithFlags, (GGT(CUgraphExec) * phGraphExec, GGT(CUgraph) hGraph, unsigned long long flags))
GG_CU_FN(cuGraphInstantiateWithParams,
         (GGT(CUgraphExec) * phGraphExec, GGT(CUgraph) hGraph, GGT(CUDA_GRAPH_INSTANTIATE_PARAMS) * instantiateParams))
GG_CU_FN(cuGraphExecUpdate_v2,
         (GGT(CUgraphExec) hGraphExec, GGT(CUgraph) hGraph, GGT(CUgraphExecUpdateResultInfo) * resultInfo))
GG_CU_FN(cuGraphAddNode_v2,
         (GGT(CUgraphNode) * phGraphNode, GGT(CUgraph) hGraph, const GGT(CUgraphNode) * dependencies,
          const GGT(CUgraphEdgeData) * dependencyData, size_t numDependencies, GGT(CUgraphNodeParams) * nodeParams))
GG_CU_FN(cuStreamBeginCaptureToGraph,
         (GGT(CUstream) hStream, GGT(CUgraph) hGraph, const GGT(CUgraphNode) * dependencies,
          const GGT(CUgraphEdgeData) * dependencyData, size_t numDependencies, GGT(CUstreamCaptureMode) mode))
GG_CU_FN(cuGraphLaunch, (GGT(CUgraphExec) hGraphExec, GGT(CUstream) hStream))
GG_CU_FN(cuGraphUpload, (GGT(CUgraphExec) hGraphExec, GGT(CUstream) hStream))
GG_CU_FN(cuGraphExecDestroy, (GGT(CUgraphExec) hGraphExec))
GG_CU_FN(cuGraphDestroy, (GGT(CUgraph) hGraph))
GG_CU_FN(cuDeviceGetGraphMemAttribute, (GGT(CUdevice) device, GGT(CUgraphMem_attribute) attr, void *value))
GG_CU_FN(cuDeviceSetGraphMemAttribute, (GGT(CUdevice) device, GGT(CUgraphMem_attribute) attr, void *value))
GG_CU_FN(cuDeviceGraphMemTrim, (GGT(CUdevice) device))

/* per-thread default stream variants (cuGetProcAddress flag 2) */
GG_CU_FN_PTSZ(cuMemAllocAsync_ptsz, (GGT(CUdeviceptr) * dptr, size_t bytesize, GGT(CUstream) hStream))
GG_CU_FN_PTSZ(cuMemAllocFromPoolAsync_ptsz,
              (GGT(CUdeviceptr) * dptr, size_t bytesize, GGT(CUmemoryPool) pool, GGT(CUstream) hStream))
GG_CU_FN_PTSZ(cuMemFreeAsync_ptsz, (GGT(CUdeviceptr) dptr, GGT(CUstream) hStream))
GG_CU_FN_PTSZ(cuStreamSynchronize_ptsz, (GGT(CUstream) hStream))
GG_CU_FN_PTSZ(cuStreamQuery_ptsz, (GGT(CUstream) hStream))
GG_CU_FN_PTSZ(cuEventRecord_ptsz, (GGT(CUevent) hEvent, GGT(CUstream) hStream))
GG_CU_FN_PTSZ(cuStreamBeginCapture_v2_ptsz, (GGT(CUstream) hStream, GGT(CUstreamCaptureMode) mode))
GG_CU_FN_PTSZ(cuStreamEndCapture_ptsz, (GGT(CUstream) hStream, GGT(CUgraph) * phGraph))
GG_CU_FN_PTSZ(cuStreamIsCapturing_ptsz, (GGT(CUstream) hStream, GGT(CUstreamCaptureStatus) * captureStatus))
GG_CU_FN_PTSZ(cuStreamGetCaptureInfo_v3_ptsz,
              (GGT(CUstream) hStream, GGT(CUstreamCaptureStatus) * captureStatus_out, GGT(cuuint64_t) * id_out,
               GGT(CUgraph) * graph_out, const GGT(CUgraphNode) * *dependencies_out,
               const GGT(CUgraphEdgeData) * *edgeData_out, size_t *numDependencies_out))
GG_CU_FN_PTSZ(cuGraphLaunch_ptsz, (GGT(CUgraphExec) hGraphExec, GGT(CUstream) hStream))
GG_CU_FN_PTSZ(cuGraphUpload_ptsz, (GGT(CUgraphExec) hGraphExec, GGT(CUstream) hStream))
GG_CU_FN_PTSZ(cuGraphInstantiateWithParams_ptsz, (GGT(CUgraphExec) * phGraphExec, GGT(CUgraph) hGraph,
                                                  GGT(CUDA_GRAPH_INSTANTIATE_PARAMS) * instantiateParams))
GG_CU_FN_PTSZ(cuStreamBeginCaptureToGraph_ptsz,
              (GGT(CUstream) hStream, GGT(CUgraph) hGraph, const GGT(CUgraphNode) * dependencies,
               const GGT(CUgraphEdgeData) * dependencyData, size_t numDependencies, GGT(CUstreamCaptureMode) mode))

/* legacy unversioned ABIs: never wrapped, only simulated and passed through */
GG_CU_FN_LEGACY(cuGetProcAddress, (const char *symbol, void **pfn, int cudaVersion, GGT(cuuint64_t) flags))
GG_CU_FN_LEGACY(cuDeviceGetUuid, (GGT(CUuuid) * uuid, GGT(CUdevice) dev))
GG_CU_FN_LEGACY(cuMemAlloc, (GGT(CUdeviceptr_v1) * dptr, unsigned int bytesize))
GG_CU_FN_LEGACY(cuMemFree, (GGT(CUdeviceptr_v1) dptr))
GG_CU_FN_LEGACY(cuMemGetInfo, (unsigned int *free, unsigned int *total))
GG_CU_FN_LEGACY(cuDeviceTotalMem, (unsigned int *bytes, GGT(CUdevice) dev))
GG_CU_FN_LEGACY(cuDevicePrimaryCtxReset, (GGT(CUdevice) dev))
GG_CU_FN_LEGACY(cuDevicePrimaryCtxRelease, (GGT(CUdevice) dev))
GG_CU_FN_LEGACY(cuCtxPushCurrent, (GGT(CUcontext) ctx))
GG_CU_FN_LEGACY(cuCtxPopCurrent, (GGT(CUcontext) * pctx))
GG_CU_FN_LEGACY(cuStreamDestroy, (GGT(CUstream) hStream))
GG_CU_FN_LEGACY(cuDevicePrimaryCtxSetFlags, (GGT(CUdevice) dev, unsigned int flags))
GG_CU_FN_LEGACY(cuCtxCreate, (GGT(CUcontext) * pctx, unsigned int flags, GGT(CUdevice) dev))
GG_CU_FN_LEGACY(cuCtxCreate_v2, (GGT(CUcontext) * pctx, unsigned int flags, GGT(CUdevice) dev))
GG_CU_FN_LEGACY(cuCtxCreate_v3, (GGT(CUcontext) * pctx, GGT(CUexecAffinityParam) * paramsArray, int numParams,
                                 unsigned int flags, GGT(CUdevice) dev))
GG_CU_FN_LEGACY(cuCtxDestroy, (GGT(CUcontext) ctx))
GG_CU_FN_LEGACY(cuEventDestroy, (GGT(CUevent) hEvent))
GG_CU_FN_LEGACY(cuMemHostRegister, (void *p, size_t bytesize, unsigned int Flags))
GG_CU_FN_LEGACY(cuIpcOpenMemHandle, (GGT(CUdeviceptr) * pdptr, GGT(CUipcMemHandle) handle, unsigned int Flags))
GG_CU_FN_LEGACY(cuStreamBeginCapture, (GGT(CUstream) hStream))
GG_CU_FN_LEGACY(cuStreamBeginCapture_ptsz, (GGT(CUstream) hStream))
/* CUDA 10's and 11's graph instantiate (the same ABI; what cuGraphInstantiate
 * means below 11000 and from it), the update before 12000, and the generic
 * node add before edge data (12020) */
GG_CU_FN_LEGACY(cuGraphInstantiate, (GGT(CUgraphExec) * phGraphExec, GGT(CUgraph) hGraph,
                                     GGT(CUgraphNode) * phErrorNode, char *logBuffer, size_t bufferSize))
GG_CU_FN_LEGACY(cuGraphInstantiate_v2, (GGT(CUgraphExec) * phGraphExec, GGT(CUgraph) hGraph,
                                        GGT(CUgraphNode) * phErrorNode, char *logBuffer, size_t bufferSize))
GG_CU_FN_LEGACY(cuGraphExecUpdate, (GGT(CUgraphExec) hGraphExec, GGT(CUgraph) hGraph, GGT(CUgraphNode) * hErrorNode_out,
                                    GGT(CUgraphExecUpdateResult) * updateResult_out))
GG_CU_FN_LEGACY(cuGraphAddNode,
                (GGT(CUgraphNode) * phGraphNode, GGT(CUgraph) hGraph, const GGT(CUgraphNode) * dependencies,
                 size_t numDependencies, GGT(CUgraphNodeParams) * nodeParams))
GG_CU_FN_LEGACY(cuStreamGetCaptureInfo,
                (GGT(CUstream) hStream, GGT(CUstreamCaptureStatus) * captureStatus_out, GGT(cuuint64_t) * id_out))
GG_CU_FN_LEGACY(cuStreamGetCaptureInfo_ptsz,
                (GGT(CUstream) hStream, GGT(CUstreamCaptureStatus) * captureStatus_out, GGT(cuuint64_t) * id_out))
GG_CU_FN_LEGACY(cuStreamGetCaptureInfo_v2,
                (GGT(CUstream) hStream, GGT(CUstreamCaptureStatus) * captureStatus_out, GGT(cuuint64_t) * id_out,
                 GGT(CUgraph) * graph_out, const GGT(CUgraphNode) * *dependencies_out, size_t *numDependencies_out))
GG_CU_FN_LEGACY(cuStreamGetCaptureInfo_v2_ptsz,
                (GGT(CUstream) hStream, GGT(CUstreamCaptureStatus) * captureStatus_out, GGT(cuuint64_t) * id_out,
                 GGT(CUgraph) * graph_out, const GGT(CUgraphNode) * *dependencies_out, size_t *numDependencies_out))
