/* gpuguard simulated GPU: driver entry points the fake libcuda exports that
 * nothing in gpuguard calls or hooks, as an X-list SIM_FN(name, params) for
 * sim_cuda.c (prototype and local_ alias). Opaque structures the simulator
 * does not read are void *; the ABI is the same. No include guard. */

/* contexts, devices */
SIM_FN(cuCtxGetFlags, (unsigned int *flags))
SIM_FN(cuCtxGetStreamPriorityRange, (int *leastPriority, int *greatestPriority))
SIM_FN(cuCtxGetLimit, (size_t * pvalue, gg_CUlimit limit))
SIM_FN(cuCtxSetLimit, (gg_CUlimit limit, size_t value))
SIM_FN(cuCtxGetCacheConfig, (gg_CUfunc_cache * pconfig))
SIM_FN(cuCtxSetCacheConfig, (gg_CUfunc_cache config))
SIM_FN(cuDeviceGetAttribute, (int *pi, gg_CUdevice_attribute attrib, gg_CUdevice dev))
SIM_FN(cuDeviceComputeCapability, (int *major, int *minor, gg_CUdevice dev))
SIM_FN(cuDeviceGetPCIBusId, (char *pciBusId, int len, gg_CUdevice dev))
SIM_FN(cuDeviceGetByPCIBusId, (gg_CUdevice * dev, const char *pciBusId))
SIM_FN(cuDeviceCanAccessPeer, (int *canAccessPeer, gg_CUdevice dev, gg_CUdevice peerDev))
SIM_FN(cuCtxEnablePeerAccess, (gg_CUcontext peerContext, unsigned int Flags))
SIM_FN(cuCtxDisablePeerAccess, (gg_CUcontext peerContext))
SIM_FN(cuDeviceGetP2PAttribute,
       (int *value, gg_CUdevice_P2PAttribute attrib, gg_CUdevice srcDevice, gg_CUdevice dstDevice))

/* streams and events */
SIM_FN(cuStreamCreateWithPriority, (gg_CUstream * phStream, unsigned int flags, int priority))
SIM_FN(cuStreamGetPriority, (gg_CUstream hStream, int *priority))
SIM_FN(cuStreamGetPriority_ptsz, (gg_CUstream hStream, int *priority))
SIM_FN(cuStreamGetFlags, (gg_CUstream hStream, unsigned int *flags))
SIM_FN(cuStreamGetFlags_ptsz, (gg_CUstream hStream, unsigned int *flags))
SIM_FN(cuStreamGetId, (gg_CUstream hStream, unsigned long long *streamId))
SIM_FN(cuStreamGetId_ptsz, (gg_CUstream hStream, unsigned long long *streamId))
SIM_FN(cuStreamGetCtx, (gg_CUstream hStream, gg_CUcontext *pctx))
SIM_FN(cuStreamGetCtx_ptsz, (gg_CUstream hStream, gg_CUcontext *pctx))
SIM_FN(cuStreamGetDevice, (gg_CUstream hStream, gg_CUdevice *device))
SIM_FN(cuStreamGetDevice_ptsz, (gg_CUstream hStream, gg_CUdevice *device))
SIM_FN(cuStreamWaitEvent, (gg_CUstream hStream, gg_CUevent hEvent, unsigned int Flags))
SIM_FN(cuStreamWaitEvent_ptsz, (gg_CUstream hStream, gg_CUevent hEvent, unsigned int Flags))
SIM_FN(cuStreamAddCallback, (gg_CUstream hStream, void *callback, void *userData, unsigned int flags))
SIM_FN(cuStreamAddCallback_ptsz, (gg_CUstream hStream, void *callback, void *userData, unsigned int flags))
SIM_FN(cuLaunchHostFunc, (gg_CUstream hStream, gg_CUhostFn fn, void *userData))
SIM_FN(cuLaunchHostFunc_ptsz, (gg_CUstream hStream, gg_CUhostFn fn, void *userData))
SIM_FN(cuEventRecordWithFlags, (gg_CUevent hEvent, gg_CUstream hStream, unsigned int flags))
SIM_FN(cuEventRecordWithFlags_ptsz, (gg_CUevent hEvent, gg_CUstream hStream, unsigned int flags))
SIM_FN(cuEventElapsedTime, (float *pMilliseconds, gg_CUevent hStart, gg_CUevent hEnd))
SIM_FN(cuEventElapsedTime_v2, (float *pMilliseconds, gg_CUevent hStart, gg_CUevent hEnd))

/* graphs */
SIM_FN(cuGraphGetNodes, (gg_CUgraph hGraph, gg_CUgraphNode *nodes, size_t *numNodes))
SIM_FN(cuGraphNodeGetType, (gg_CUgraphNode hNode, int *type))
SIM_FN(cuGraphKernelNodeGetParams, (gg_CUgraphNode hNode, void *nodeParams))
SIM_FN(cuGraphKernelNodeGetParams_v2, (gg_CUgraphNode hNode, void *nodeParams))
SIM_FN(cuGraphExecKernelNodeSetParams, (gg_CUgraphExec hGraphExec, gg_CUgraphNode hNode, const void *nodeParams))
SIM_FN(cuGraphExecKernelNodeSetParams_v2, (gg_CUgraphExec hGraphExec, gg_CUgraphNode hNode, const void *nodeParams))

/* host memory, pointers */
SIM_FN(cuMemHostGetDevicePointer_v2, (gg_CUdeviceptr * pdptr, void *p, unsigned int Flags))
SIM_FN(cuMemHostGetFlags, (unsigned int *pFlags, void *p))
SIM_FN(cuPointerGetAttribute, (void *data, gg_CUpointer_attribute attribute, gg_CUdeviceptr ptr))
SIM_FN(cuPointerGetAttributes,
       (unsigned int numAttributes, gg_CUpointer_attribute *attributes, void **data, gg_CUdeviceptr ptr))

/* copies and sets (validated, never performed) */
SIM_FN(cuMemcpy, (gg_CUdeviceptr dst, gg_CUdeviceptr src, size_t ByteCount))
SIM_FN(cuMemcpy_ptds, (gg_CUdeviceptr dst, gg_CUdeviceptr src, size_t ByteCount))
SIM_FN(cuMemcpyAsync, (gg_CUdeviceptr dst, gg_CUdeviceptr src, size_t ByteCount, gg_CUstream hStream))
SIM_FN(cuMemcpyAsync_ptsz, (gg_CUdeviceptr dst, gg_CUdeviceptr src, size_t ByteCount, gg_CUstream hStream))
SIM_FN(cuMemcpyPeer,
       (gg_CUdeviceptr dst, gg_CUcontext dstCtx, gg_CUdeviceptr src, gg_CUcontext srcCtx, size_t ByteCount))
SIM_FN(cuMemcpyPeer_ptds,
       (gg_CUdeviceptr dst, gg_CUcontext dstCtx, gg_CUdeviceptr src, gg_CUcontext srcCtx, size_t ByteCount))
SIM_FN(cuMemcpyPeerAsync, (gg_CUdeviceptr dst, gg_CUcontext dstCtx, gg_CUdeviceptr src, gg_CUcontext srcCtx,
                           size_t ByteCount, gg_CUstream hStream))
SIM_FN(cuMemcpyPeerAsync_ptsz, (gg_CUdeviceptr dst, gg_CUcontext dstCtx, gg_CUdeviceptr src, gg_CUcontext srcCtx,
                                size_t ByteCount, gg_CUstream hStream))
SIM_FN(cuMemcpyHtoD_v2, (gg_CUdeviceptr dst, const void *src, size_t ByteCount))
SIM_FN(cuMemcpyHtoD_v2_ptds, (gg_CUdeviceptr dst, const void *src, size_t ByteCount))
SIM_FN(cuMemcpyHtoDAsync_v2, (gg_CUdeviceptr dst, const void *src, size_t ByteCount, gg_CUstream hStream))
SIM_FN(cuMemcpyHtoDAsync_v2_ptsz, (gg_CUdeviceptr dst, const void *src, size_t ByteCount, gg_CUstream hStream))
SIM_FN(cuMemcpyDtoH_v2, (void *dst, gg_CUdeviceptr src, size_t ByteCount))
SIM_FN(cuMemcpyDtoH_v2_ptds, (void *dst, gg_CUdeviceptr src, size_t ByteCount))
SIM_FN(cuMemcpyDtoHAsync_v2, (void *dst, gg_CUdeviceptr src, size_t ByteCount, gg_CUstream hStream))
SIM_FN(cuMemcpyDtoHAsync_v2_ptsz, (void *dst, gg_CUdeviceptr src, size_t ByteCount, gg_CUstream hStream))
SIM_FN(cuMemcpyDtoD_v2, (gg_CUdeviceptr dst, gg_CUdeviceptr src, size_t ByteCount))
SIM_FN(cuMemcpyDtoD_v2_ptds, (gg_CUdeviceptr dst, gg_CUdeviceptr src, size_t ByteCount))
SIM_FN(cuMemcpyDtoDAsync_v2, (gg_CUdeviceptr dst, gg_CUdeviceptr src, size_t ByteCount, gg_CUstream hStream))
SIM_FN(cuMemcpyDtoDAsync_v2_ptsz, (gg_CUdeviceptr dst, gg_CUdeviceptr src, size_t ByteCount, gg_CUstream hStream))
SIM_FN(cuMemcpy2D_v2, (const void *pCopy))
SIM_FN(cuMemcpy2D_v2_ptds, (const void *pCopy))
SIM_FN(cuMemcpy2DUnaligned_v2, (const void *pCopy))
SIM_FN(cuMemcpy2DUnaligned_v2_ptds, (const void *pCopy))
SIM_FN(cuMemcpy2DAsync_v2, (const void *pCopy, gg_CUstream hStream))
SIM_FN(cuMemcpy2DAsync_v2_ptsz, (const void *pCopy, gg_CUstream hStream))
SIM_FN(cuMemsetD8_v2, (gg_CUdeviceptr dstDevice, unsigned char uc, size_t N))
SIM_FN(cuMemsetD8_v2_ptds, (gg_CUdeviceptr dstDevice, unsigned char uc, size_t N))
SIM_FN(cuMemsetD8Async, (gg_CUdeviceptr dstDevice, unsigned char uc, size_t N, gg_CUstream hStream))
SIM_FN(cuMemsetD8Async_ptsz, (gg_CUdeviceptr dstDevice, unsigned char uc, size_t N, gg_CUstream hStream))
SIM_FN(cuMemsetD32_v2, (gg_CUdeviceptr dstDevice, unsigned int ui, size_t N))
SIM_FN(cuMemsetD32_v2_ptds, (gg_CUdeviceptr dstDevice, unsigned int ui, size_t N))
SIM_FN(cuMemsetD32Async, (gg_CUdeviceptr dstDevice, unsigned int ui, size_t N, gg_CUstream hStream))
SIM_FN(cuMemsetD32Async_ptsz, (gg_CUdeviceptr dstDevice, unsigned int ui, size_t N, gg_CUstream hStream))
SIM_FN(cuMemsetD2D8_v2, (gg_CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height))
SIM_FN(cuMemsetD2D8_v2_ptds, (gg_CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height))
SIM_FN(cuMemsetD2D8Async,
       (gg_CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height, gg_CUstream hStream))
SIM_FN(cuMemsetD2D8Async_ptsz,
       (gg_CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height, gg_CUstream hStream))

/* stream memory operations (validated, never performed), prefetch */
SIM_FN(cuStreamWaitValue32, (gg_CUstream stream, gg_CUdeviceptr addr, uint32_t value, unsigned int flags))
SIM_FN(cuStreamWaitValue32_ptsz, (gg_CUstream stream, gg_CUdeviceptr addr, uint32_t value, unsigned int flags))
SIM_FN(cuStreamWaitValue32_v2, (gg_CUstream stream, gg_CUdeviceptr addr, uint32_t value, unsigned int flags))
SIM_FN(cuStreamWaitValue32_v2_ptsz, (gg_CUstream stream, gg_CUdeviceptr addr, uint32_t value, unsigned int flags))
SIM_FN(cuStreamBatchMemOp, (gg_CUstream stream, unsigned int count, void *paramArray, unsigned int flags))
SIM_FN(cuStreamBatchMemOp_ptsz, (gg_CUstream stream, unsigned int count, void *paramArray, unsigned int flags))
SIM_FN(cuStreamBatchMemOp_v2, (gg_CUstream stream, unsigned int count, void *paramArray, unsigned int flags))
SIM_FN(cuStreamBatchMemOp_v2_ptsz, (gg_CUstream stream, unsigned int count, void *paramArray, unsigned int flags))
SIM_FN(cuMemPrefetchAsync, (gg_CUdeviceptr devPtr, size_t count, gg_CUdevice dstDevice, gg_CUstream hStream))
SIM_FN(cuMemPrefetchAsync_ptsz, (gg_CUdeviceptr devPtr, size_t count, gg_CUdevice dstDevice, gg_CUstream hStream))
SIM_FN(cuMemPrefetchAsync_v2,
       (gg_CUdeviceptr devPtr, size_t count, gg_CUmemLocation location, unsigned int flags, gg_CUstream hStream))
SIM_FN(cuMemPrefetchAsync_v2_ptsz,
       (gg_CUdeviceptr devPtr, size_t count, gg_CUmemLocation location, unsigned int flags, gg_CUstream hStream))

/* libraries, modules, kernels, functions: handles only */
SIM_FN(cuLibraryLoadData, (gg_CUlibrary * library, const void *code, gg_CUjit_option *jitOptions,
                           void **jitOptionsValues, unsigned int numJitOptions, gg_CUlibraryOption *libraryOptions,
                           void **libraryOptionValues, unsigned int numLibraryOptions))
SIM_FN(cuLibraryLoadFromFile, (gg_CUlibrary * library, const char *fileName, gg_CUjit_option *jitOptions,
                               void **jitOptionsValues, unsigned int numJitOptions, gg_CUlibraryOption *libraryOptions,
                               void **libraryOptionValues, unsigned int numLibraryOptions))
SIM_FN(cuLibraryUnload, (gg_CUlibrary library))
SIM_FN(cuLibraryGetKernel, (gg_CUkernel * pKernel, gg_CUlibrary library, const char *name))
SIM_FN(cuLibraryGetModule, (gg_CUmodule * pMod, gg_CUlibrary library))
SIM_FN(cuLibraryGetGlobal, (gg_CUdeviceptr * dptr, size_t *bytes, gg_CUlibrary library, const char *name))
SIM_FN(cuLibraryGetManaged, (gg_CUdeviceptr * dptr, size_t *bytes, gg_CUlibrary library, const char *name))
SIM_FN(cuLibraryGetUnifiedFunction, (void **fptr, gg_CUlibrary library, const char *symbol))
SIM_FN(cuKernelGetFunction, (gg_CUfunction * pFunc, gg_CUkernel kernel))
SIM_FN(cuKernelGetLibrary, (gg_CUlibrary * pLib, gg_CUkernel kernel))
SIM_FN(cuKernelGetName, (const char **name, gg_CUkernel hfunc))
SIM_FN(cuKernelGetAttribute, (int *pi, gg_CUfunction_attribute attrib, gg_CUkernel kernel, gg_CUdevice dev))
SIM_FN(cuKernelSetAttribute, (gg_CUfunction_attribute attrib, int val, gg_CUkernel kernel, gg_CUdevice dev))
SIM_FN(cuKernelSetCacheConfig, (gg_CUkernel kernel, gg_CUfunc_cache config, gg_CUdevice dev))
SIM_FN(cuModuleLoadData, (gg_CUmodule * module, const void *image))
SIM_FN(cuModuleLoadDataEx, (gg_CUmodule * module, const void *image, unsigned int numOptions, gg_CUjit_option *options,
                            void **optionValues))
SIM_FN(cuModuleLoadFatBinary, (gg_CUmodule * module, const void *fatCubin))
SIM_FN(cuModuleLoad, (gg_CUmodule * module, const char *fname))
SIM_FN(cuModuleUnload, (gg_CUmodule hmod))
SIM_FN(cuModuleGetFunction, (gg_CUfunction * hfunc, gg_CUmodule hmod, const char *name))
SIM_FN(cuModuleGetGlobal_v2, (gg_CUdeviceptr * dptr, size_t *bytes, gg_CUmodule hmod, const char *name))
SIM_FN(cuModuleGetLoadingMode, (gg_CUmoduleLoadingMode * mode))
SIM_FN(cuFuncGetAttribute, (int *pi, gg_CUfunction_attribute attrib, gg_CUfunction hfunc))
SIM_FN(cuFuncSetAttribute, (gg_CUfunction hfunc, gg_CUfunction_attribute attrib, int value))
SIM_FN(cuFuncSetCacheConfig, (gg_CUfunction hfunc, gg_CUfunc_cache config))
SIM_FN(cuFuncGetName, (const char **name, gg_CUfunction hfunc))
SIM_FN(cuFuncGetModule, (gg_CUmodule * hmod, gg_CUfunction hfunc))
SIM_FN(cuFuncIsLoaded, (int *state, gg_CUfunction hfunc))
SIM_FN(cuFuncLoad, (gg_CUfunction hfunc))
SIM_FN(cuLinkCreate_v2,
       (unsigned int numOptions, gg_CUjit_option *options, void **optionValues, gg_CUlinkState *stateOut))
SIM_FN(cuLinkAddData_v2, (gg_CUlinkState state, gg_CUjitInputType type, void *data, size_t size, const char *name,
                          unsigned int numOptions, gg_CUjit_option *options, void **optionValues))
SIM_FN(cuLinkAddFile_v2, (gg_CUlinkState state, gg_CUjitInputType type, const char *path, unsigned int numOptions,
                          gg_CUjit_option *options, void **optionValues))
SIM_FN(cuLinkComplete, (gg_CUlinkState state, void **cubinOut, size_t *sizeOut))
SIM_FN(cuLinkDestroy, (gg_CUlinkState state))
SIM_FN(cuLaunchKernel, (gg_CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                        unsigned int sharedMemBytes, gg_CUstream hStream, void **kernelParams, void **extra))
SIM_FN(cuLaunchKernel_ptsz, (gg_CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                             unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                             unsigned int sharedMemBytes, gg_CUstream hStream, void **kernelParams, void **extra))
SIM_FN(cuLaunchKernelEx, (const void *config, gg_CUfunction f, void **kernelParams, void **extra))
SIM_FN(cuLaunchKernelEx_ptsz, (const void *config, gg_CUfunction f, void **kernelParams, void **extra))
SIM_FN(cuTensorMapEncodeTiled, (void *tensorMap, int dataType, unsigned int rank, void *globalAddress,
                                const void *globalDim, const void *globalStrides, const void *boxDim,
                                const void *elementStrides, int interleave, int swizzle, int l2Promotion, int oobFill))

/* occupancy */
SIM_FN(cuOccupancyMaxActiveBlocksPerMultiprocessor,
       (int *numBlocks, gg_CUfunction func, int blockSize, size_t dynamicSMemSize))
SIM_FN(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
       (int *numBlocks, gg_CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags))
SIM_FN(cuOccupancyMaxPotentialBlockSize,
       (int *minGridSize, int *blockSize, gg_CUfunction func, gg_CUoccupancyB2DSize blockSizeToDynamicSMemSize,
        size_t dynamicSMemSize, int blockSizeLimit))
SIM_FN(cuOccupancyMaxPotentialBlockSizeWithFlags,
       (int *minGridSize, int *blockSize, gg_CUfunction func, gg_CUoccupancyB2DSize blockSizeToDynamicSMemSize,
        size_t dynamicSMemSize, int blockSizeLimit, unsigned int flags))
SIM_FN(cuOccupancyAvailableDynamicSMemPerBlock,
       (size_t * dynamicSmemSize, gg_CUfunction func, int numBlocks, int blockSize))
SIM_FN(cuOccupancyMaxPotentialClusterSize, (int *clusterSize, gg_CUfunction func, const void *config))
SIM_FN(cuOccupancyMaxActiveClusters, (int *numClusters, gg_CUfunction func, const void *config))
