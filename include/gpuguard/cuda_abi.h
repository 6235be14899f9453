/* gpuguard: our own declaration of the CUDA driver ABI subset we touch.
 * We never need the CUDA toolkit to build or run; tests/abi/ checks every type,
 * constant and prototype here against the toolkit's cuda.h with static asserts.
 * Names carry a gg_ / GG_ prefix so both can meet in one translation unit. */
#ifndef GPUGUARD_CUDA_ABI_H
#define GPUGUARD_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int gg_CUresult; /* enum cudaError_enum: an int-sized enum */
typedef uint32_t gg_cuuint32_t;
typedef uint64_t gg_cuuint64_t;
typedef unsigned long long gg_CUdeviceptr; /* CUdeviceptr_v2 */
typedef unsigned int gg_CUdeviceptr_v1;    /* legacy 32-bit pointer */
typedef int gg_CUdevice;
typedef struct CUctx_st *gg_CUcontext;
typedef struct CUstream_st *gg_CUstream;
typedef struct CUarray_st *gg_CUarray;
typedef struct CUmipmappedArray_st *gg_CUmipmappedArray;
typedef struct CUmemPoolHandle_st *gg_CUmemoryPool;
typedef unsigned long long gg_CUmemGenericAllocationHandle;
typedef struct gg_CUuuid {
	char bytes[16];
} gg_CUuuid; /* CUuuid */

/* CUresult values we produce or test for. */
#define GG_CUDA_SUCCESS 0
#define GG_CUDA_ERROR_INVALID_VALUE 1
#define GG_CUDA_ERROR_OUT_OF_MEMORY 2
#define GG_CUDA_ERROR_NOT_INITIALIZED 3
#define GG_CUDA_ERROR_DEINITIALIZED 4
#define GG_CUDA_ERROR_NO_DEVICE 100
#define GG_CUDA_ERROR_INVALID_DEVICE 101
#define GG_CUDA_ERROR_INVALID_CONTEXT 201
#define GG_CUDA_ERROR_INVALID_HANDLE 400
#define GG_CUDA_ERROR_NOT_FOUND 500
#define GG_CUDA_ERROR_NOT_SUPPORTED 801

/* cuGetProcAddress flags and status (CUdriverProcAddress_flags, ...QueryResult). */
#define GG_CU_GET_PROC_ADDRESS_DEFAULT 0
#define GG_CU_GET_PROC_ADDRESS_LEGACY_STREAM 1
#define GG_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2
typedef int gg_CUdriverProcAddressQueryResult;
#define GG_CU_GET_PROC_ADDRESS_SUCCESS 0
#define GG_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND 1
#define GG_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT 2

/* cuMemAllocManaged flags (CUmemAttach_flags). */
#define GG_CU_MEM_ATTACH_GLOBAL 1
#define GG_CU_MEM_ATTACH_HOST 2
#define GG_CU_MEM_ATTACH_SINGLE 4

/* cuMemHostAlloc flags. */
#define GG_CU_MEMHOSTALLOC_PORTABLE 1
#define GG_CU_MEMHOSTALLOC_DEVICEMAP 2
#define GG_CU_MEMHOSTALLOC_WRITECOMBINED 4

/* Stream-ordered pools (CUmemPool_attribute). */
typedef int gg_CUmemPool_attribute;
#define GG_CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES 1
#define GG_CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC 2
#define GG_CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES 3
#define GG_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD 4
#define GG_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT 5
#define GG_CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH 6
#define GG_CU_MEMPOOL_ATTR_USED_MEM_CURRENT 7
#define GG_CU_MEMPOOL_ATTR_USED_MEM_HIGH 8

/* Virtual memory management. */
typedef int gg_CUmemLocationType;
#define GG_CU_MEM_LOCATION_TYPE_INVALID 0
#define GG_CU_MEM_LOCATION_TYPE_DEVICE 1
#define GG_CU_MEM_LOCATION_TYPE_HOST 2
typedef int gg_CUmemAllocationType;
#define GG_CU_MEM_ALLOCATION_TYPE_INVALID 0
#define GG_CU_MEM_ALLOCATION_TYPE_PINNED 1
typedef int gg_CUmemAllocationHandleType;
#define GG_CU_MEM_HANDLE_TYPE_NONE 0
typedef int gg_CUmemAllocationGranularity_flags;
#define GG_CU_MEM_ALLOC_GRANULARITY_MINIMUM 0
#define GG_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED 1
typedef int gg_CUmemAccess_flags;
#define GG_CU_MEM_ACCESS_FLAGS_PROT_NONE 0
#define GG_CU_MEM_ACCESS_FLAGS_PROT_READ 1
#define GG_CU_MEM_ACCESS_FLAGS_PROT_READWRITE 3

typedef struct gg_CUmemLocation {
	gg_CUmemLocationType type;
	int id;
} gg_CUmemLocation;

typedef struct gg_CUmemAllocationProp {
	gg_CUmemAllocationType type;
	gg_CUmemAllocationHandleType requestedHandleTypes;
	gg_CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} gg_CUmemAllocationProp;

typedef struct gg_CUmemAccessDesc {
	gg_CUmemLocation location;
	gg_CUmemAccess_flags flags;
} gg_CUmemAccessDesc;

typedef struct gg_CUmemPoolProps {
	gg_CUmemAllocationType allocType;
	gg_CUmemAllocationHandleType handleTypes;
	gg_CUmemLocation location;
	void *win32SecurityAttributes;
	size_t maxSize;
	unsigned short usage;
	unsigned char reserved[54];
} gg_CUmemPoolProps;

/* Arrays (CUarray_format is an int-sized enum). */
typedef int gg_CUarray_format;
#define GG_CU_AD_FORMAT_UNSIGNED_INT8 0x01
#define GG_CU_AD_FORMAT_UNSIGNED_INT16 0x02
#define GG_CU_AD_FORMAT_UNSIGNED_INT32 0x03
#define GG_CU_AD_FORMAT_SIGNED_INT8 0x08
#define GG_CU_AD_FORMAT_SIGNED_INT16 0x09
#define GG_CU_AD_FORMAT_SIGNED_INT32 0x0a
#define GG_CU_AD_FORMAT_HALF 0x10
#define GG_CU_AD_FORMAT_FLOAT 0x20

typedef struct gg_CUDA_ARRAY_DESCRIPTOR {
	size_t Width;
	size_t Height;
	gg_CUarray_format Format;
	unsigned int NumChannels;
} gg_CUDA_ARRAY_DESCRIPTOR;

typedef struct gg_CUDA_ARRAY3D_DESCRIPTOR {
	size_t Width;
	size_t Height;
	size_t Depth;
	gg_CUarray_format Format;
	unsigned int NumChannels;
	unsigned int Flags;
} gg_CUDA_ARRAY3D_DESCRIPTOR;

/* The prototypes live in an X-list so that the conformance test can expand
 * them once more with the vendor's types and compare. That test includes us
 * beside cuda.h with GG_ABI_NO_PROTOTYPES: C holds our int and cuda.h's enum
 * CUresult to be different types, though size and calling convention agree. */
#define GGT(t) gg_##t
#ifdef GG_ABI_NO_PROTOTYPES
#define GG_CU_FN(name, params) typedef gg_CUresult(*gg_pfn_##name) params;
#else
#define GG_CU_FN(name, params)                      \
	typedef gg_CUresult(*gg_pfn_##name) params; \
	gg_CUresult name params;
#endif
#define GG_CU_FN_PTSZ(name, params) GG_CU_FN(name, params)
#define GG_CU_FN_LEGACY(name, params) GG_CU_FN(name, params)
#include "cuda_abi_funcs.h"
#undef GG_CU_FN
#undef GG_CU_FN_PTSZ
#undef GG_CU_FN_LEGACY
#undef GGT

#endif
