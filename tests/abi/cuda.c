/* gpuguard: include/gpuguard/cuda_abi.h against the toolkit's cuda.h, at
 * compile time only: a wrong size, offset, constant or prototype fails the build.
 * check.sh compiles this once per GG_ABI_GROUP, because cuda.h declares the
 * _ptsz and the unversioned legacy entry points only under its own macros. */
#define GG_ABI_GROUP_MAIN 1
#define GG_ABI_GROUP_PTSZ 2
#define GG_ABI_GROUP_LEGACY 3
#define GG_ABI_GROUP_CUDART 4
#ifndef GG_ABI_GROUP
#error "define GG_ABI_GROUP (tests/abi/check.sh does)"
#endif

/* cuda.h declares cuMemAllocAsync as cuMemAllocAsync_ptsz when asked for the
 * per-thread default stream, and the pre-_v2 ABIs only for the driver's own
 * build (__CUDA_API_VERSION_INTERNAL, which also selects the _ptsz names). */
#if GG_ABI_GROUP == GG_ABI_GROUP_PTSZ
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#elif GG_ABI_GROUP == GG_ABI_GROUP_LEGACY
#define __CUDA_API_VERSION_INTERNAL 1
#endif

#include <stddef.h>

#define GG_ABI_NO_PROTOTYPES 1
#include "gpuguard/cuda_abi.h"

#include <cuda.h>
#if GG_ABI_GROUP == GG_ABI_GROUP_CUDART
#include <cuda_runtime_api.h>
#endif

#include "same.h"
/* The name must reach the compiler unchanged: cuda.h renames some entry points
 * by macro (cuMemAlloc -> cuMemAlloc_v2), and we must not check the wrong one.
 * GG_CU_FN passes #name because its argument is macro-expanded on the way in. */
#define GG_CU_PROTO(as_written, name, params)                                                              \
	_Static_assert(sizeof(as_written) == sizeof(#name), as_written " is renamed by cuda.h to " #name); \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&name), CUresult(*) params),                \
	               #name ": prototype differs from cuda.h");

#define GGT(t) t

#if GG_ABI_GROUP == GG_ABI_GROUP_MAIN
_Static_assert(CUDA_VERSION >= 12000, "cuda.h older than CUDA 12");

/* scalar types and opaque handles */
SAME_SCALAR(gg_CUresult, CUresult);
SAME_TYPE(gg_cuuint32_t, cuuint32_t);
SAME_TYPE(gg_cuuint64_t, cuuint64_t);
SAME_TYPE(gg_CUdeviceptr, CUdeviceptr);
SAME_TYPE(gg_CUdeviceptr, CUdeviceptr_v2);
SAME_TYPE(gg_CUdevice, CUdevice);
SAME_TYPE(gg_CUcontext, CUcontext);
SAME_TYPE(gg_CUstream, CUstream);
SAME_TYPE(gg_CUarray, CUarray);
SAME_TYPE(gg_CUmipmappedArray, CUmipmappedArray);
SAME_TYPE(gg_CUmemoryPool, CUmemoryPool);
SAME_TYPE(gg_CUmemGenericAllocationHandle, CUmemGenericAllocationHandle);
SAME_SCALAR(gg_CUdriverProcAddressQueryResult, CUdriverProcAddressQueryResult);
SAME_SCALAR(gg_CUmemPool_attribute, CUmemPool_attribute);
SAME_SCALAR(gg_CUmemLocationType, CUmemLocationType);
SAME_SCALAR(gg_CUmemAllocationType, CUmemAllocationType);
SAME_SCALAR(gg_CUmemAllocationHandleType, CUmemAllocationHandleType);
SAME_SCALAR(gg_CUmemAllocationGranularity_flags, CUmemAllocationGranularity_flags);
SAME_SCALAR(gg_CUmemAccess_flags, CUmemAccess_flags);
SAME_SCALAR(gg_CUarray_format, CUarray_format);

/* structures: every field, nested ones included */
SAME_STRUCT(gg_CUuuid, CUuuid);
SAME_FIELD(gg_CUuuid, CUuuid, bytes);

SAME_STRUCT(gg_CUmemLocation, CUmemLocation);
SAME_FIELD(gg_CUmemLocation, CUmemLocation, type);
SAME_FIELD(gg_CUmemLocation, CUmemLocation, id);

SAME_STRUCT(gg_CUmemAllocationProp, CUmemAllocationProp);
SAME_FIELD(gg_CUmemAllocationProp, CUmemAllocationProp, type);
SAME_FIELD(gg_CUmemAllocationProp, CUmemAllocationProp, requestedHandleTypes);
SAME_FIELD(gg_CUmemAllocationProp, CUmemAllocationProp, location);
SAME_FIELD(gg_CUmemAllocationProp, CUmemAllocationProp, location.type);
SAME_FIELD(gg_CUmemAllocationProp, CUmemAllocationProp, location.id);
SAME_FIELD(gg_CUmemAllocationProp, CUmemAllocationProp, win32HandleMetaData);
SAME_FIELD(gg_CUmemAllocationProp, CUmemAllocationProp, allocFlags);
SAME_FIELD(gg_CUmemAllocationProp, CUmemAllocationProp, allocFlags.compressionType);
SAME_FIELD(gg_CUmemAllocationProp, CUmemAllocationProp, allocFlags.gpuDirectRDMACapable);
SAME_FIELD(gg_CUmemAllocationProp, CUmemAllocationProp, allocFlags.usage);
SAME_FIELD(gg_CUmemAllocationProp, CUmemAllocationProp, allocFlags.reserved);
_Static_assert(_Alignof(__typeof__(((gg_CUmemAllocationProp *)0)->allocFlags)) ==
                   _Alignof(__typeof__(((CUmemAllocationProp *)0)->allocFlags)),
               "gg_CUmemAllocationProp.allocFlags alignment");

SAME_STRUCT(gg_CUmemAccessDesc, CUmemAccessDesc);
SAME_FIELD(gg_CUmemAccessDesc, CUmemAccessDesc, location);
SAME_FIELD(gg_CUmemAccessDesc, CUmemAccessDesc, location.type);
SAME_FIELD(gg_CUmemAccessDesc, CUmemAccessDesc, location.id);
SAME_FIELD(gg_CUmemAccessDesc, CUmemAccessDesc, flags);

SAME_STRUCT(gg_CUmemPoolProps, CUmemPoolProps);
SAME_FIELD(gg_CUmemPoolProps, CUmemPoolProps, allocType);
SAME_FIELD(gg_CUmemPoolProps, CUmemPoolProps, handleTypes);
SAME_FIELD(gg_CUmemPoolProps, CUmemPoolProps, location);
SAME_FIELD(gg_CUmemPoolProps, CUmemPoolProps, location.type);
SAME_FIELD(gg_CUmemPoolProps, CUmemPoolProps, location.id);
SAME_FIELD(gg_CUmemPoolProps, CUmemPoolProps, win32SecurityAttributes);
SAME_FIELD(gg_CUmemPoolProps, CUmemPoolProps, maxSize);
SAME_FIELD(gg_CUmemPoolProps, CUmemPoolProps, usage);
SAME_FIELD(gg_CUmemPoolProps, CUmemPoolProps, reserved);

SAME_STRUCT(gg_CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR);
SAME_FIELD(gg_CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR, Width);
SAME_FIELD(gg_CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR, Height);
SAME_FIELD(gg_CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR, Format);
SAME_FIELD(gg_CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR, NumChannels);

SAME_STRUCT(gg_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR);
SAME_FIELD(gg_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR, Width);
SAME_FIELD(gg_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR, Height);
SAME_FIELD(gg_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR, Depth);
SAME_FIELD(gg_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR, Format);
SAME_FIELD(gg_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR, NumChannels);
SAME_FIELD(gg_CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR, Flags);

/* constants */
SAME_CONST(GG_CUDA_SUCCESS, CUDA_SUCCESS);
SAME_CONST(GG_CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
SAME_CONST(GG_CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME_CONST(GG_CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED);
SAME_CONST(GG_CUDA_ERROR_DEINITIALIZED, CUDA_ERROR_DEINITIALIZED);
SAME_CONST(GG_CUDA_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
SAME_CONST(GG_CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE);
SAME_CONST(GG_CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT);
SAME_CONST(GG_CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_HANDLE);
SAME_CONST(GG_CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_FOUND);
SAME_CONST(GG_CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED);

SAME_CONST(GG_CU_GET_PROC_ADDRESS_DEFAULT, CU_GET_PROC_ADDRESS_DEFAULT);
SAME_CONST(GG_CU_GET_PROC_ADDRESS_LEGACY_STREAM, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
SAME_CONST(GG_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
SAME_CONST(GG_CU_GET_PROC_ADDRESS_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
SAME_CONST(GG_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
SAME_CONST(GG_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

SAME_CONST(GG_CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_GLOBAL);
SAME_CONST(GG_CU_MEM_ATTACH_HOST, CU_MEM_ATTACH_HOST);
SAME_CONST(GG_CU_MEM_ATTACH_SINGLE, CU_MEM_ATTACH_SINGLE);

SAME_CONST(GG_CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_PORTABLE);
SAME_CONST(GG_CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTALLOC_DEVICEMAP);
SAME_CONST(GG_CU_MEMHOSTALLOC_WRITECOMBINED, CU_MEMHOSTALLOC_WRITECOMBINED);

SAME_CONST(GG_CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES);
SAME_CONST(GG_CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC);
SAME_CONST(GG_CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES);
SAME_CONST(GG_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
SAME_CONST(GG_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
SAME_CONST(GG_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH);
SAME_CONST(GG_CU_MEMPOOL_ATTR_USED_MEM_CURRENT, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
SAME_CONST(GG_CU_MEMPOOL_ATTR_USED_MEM_HIGH, CU_MEMPOOL_ATTR_USED_MEM_HIGH);

SAME_CONST(GG_CU_MEM_LOCATION_TYPE_INVALID, CU_MEM_LOCATION_TYPE_INVALID);
SAME_CONST(GG_CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE);
SAME_CONST(GG_CU_MEM_LOCATION_TYPE_HOST, CU_MEM_LOCATION_TYPE_HOST);
SAME_CONST(GG_CU_MEM_ALLOCATION_TYPE_INVALID, CU_MEM_ALLOCATION_TYPE_INVALID);
SAME_CONST(GG_CU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_ALLOCATION_TYPE_PINNED);
SAME_CONST(GG_CU_MEM_HANDLE_TYPE_NONE, CU_MEM_HANDLE_TYPE_NONE);
SAME_CONST(GG_CU_MEM_ALLOC_GRANULARITY_MINIMUM, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
SAME_CONST(GG_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
SAME_CONST(GG_CU_MEM_ACCESS_FLAGS_PROT_NONE, CU_MEM_ACCESS_FLAGS_PROT_NONE);
SAME_CONST(GG_CU_MEM_ACCESS_FLAGS_PROT_READ, CU_MEM_ACCESS_FLAGS_PROT_READ);
SAME_CONST(GG_CU_MEM_ACCESS_FLAGS_PROT_READWRITE, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

SAME_CONST(GG_CU_AD_FORMAT_UNSIGNED_INT8, CU_AD_FORMAT_UNSIGNED_INT8);
SAME_CONST(GG_CU_AD_FORMAT_UNSIGNED_INT16, CU_AD_FORMAT_UNSIGNED_INT16);
SAME_CONST(GG_CU_AD_FORMAT_UNSIGNED_INT32, CU_AD_FORMAT_UNSIGNED_INT32);
SAME_CONST(GG_CU_AD_FORMAT_SIGNED_INT8, CU_AD_FORMAT_SIGNED_INT8);
SAME_CONST(GG_CU_AD_FORMAT_SIGNED_INT16, CU_AD_FORMAT_SIGNED_INT16);
SAME_CONST(GG_CU_AD_FORMAT_SIGNED_INT32, CU_AD_FORMAT_SIGNED_INT32);
SAME_CONST(GG_CU_AD_FORMAT_HALF, CU_AD_FORMAT_HALF);
SAME_CONST(GG_CU_AD_FORMAT_FLOAT, CU_AD_FORMAT_FLOAT);

/* prototypes, current ABIs */
#define GG_CU_FN(name, params) GG_CU_PROTO(#name, name, params)
#define GG_CU_FN_PTSZ(name, params)
#define GG_CU_FN_LEGACY(name, params)
#include "gpuguard/cuda_abi_funcs.h"

#elif GG_ABI_GROUP == GG_ABI_GROUP_PTSZ
#define GG_CU_FN(name, params)
#define GG_CU_FN_PTSZ(name, params) GG_CU_PROTO(#name, name, params)
#define GG_CU_FN_LEGACY(name, params)
#include "gpuguard/cuda_abi_funcs.h"

#elif GG_ABI_GROUP == GG_ABI_GROUP_LEGACY
SAME_TYPE(gg_CUdeviceptr_v1, CUdeviceptr_v1); /* declared by cuda.h only here */
#define GG_CU_FN(name, params)
#define GG_CU_FN_PTSZ(name, params)
#define GG_CU_FN_LEGACY(name, params) GG_CU_PROTO(#name, name, params)
#include "gpuguard/cuda_abi_funcs.h"

#elif GG_ABI_GROUP == GG_ABI_GROUP_CUDART
/* The runtime turns our CUDA_ERROR_OUT_OF_MEMORY into cudaErrorMemoryAllocation;
 * programs on cudart see a refusal only if the two numbers agree. */
SAME_CONST(GG_CUDA_SUCCESS, cudaSuccess);
SAME_CONST(GG_CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation);
SAME_CONST(cudaErrorMemoryAllocation, 2);
SAME_CONST(GG_CUDA_ERROR_INVALID_VALUE, cudaErrorInvalidValue);
SAME_CONST(GG_CUDA_ERROR_NOT_INITIALIZED, cudaErrorInitializationError);

#else
#error "unknown GG_ABI_GROUP"
#endif
