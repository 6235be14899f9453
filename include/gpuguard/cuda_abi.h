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
typedef struct CUevent_st *gg_CUevent;
typedef struct CUgraph_st *gg_CUgraph;
typedef struct CUgraphNode_st *gg_CUgraphNode;
typedef struct CUgraphExec_st *gg_CUgraphExec;
typedef struct CUmod_st *gg_CUmodule;
typedef struct CUfunc_st *gg_CUfunction;
typedef struct CUlib_st *gg_CUlibrary;
typedef struct CUkern_st *gg_CUkernel;
typedef struct CUlinkState_st *gg_CUlinkState;
typedef void (*gg_CUhostFn)(void *userData);
typedef size_t (*gg_CUoccupancyB2DSize)(int blockSize);
typedef int gg_CUdevice_attribute;       /* CUdevice_attribute */
typedef int gg_CUstreamCaptureMode;      /* CUstreamCaptureMode */
typedef int gg_CUstreamCaptureStatus;    /* CUstreamCaptureStatus */
typedef int gg_CUgraphMem_attribute;     /* CUgraphMem_attribute */
typedef int gg_CUjit_option;             /* CUjit_option */
typedef int gg_CUjitInputType;           /* CUjitInputType */
typedef int gg_CUlibraryOption;          /* CUlibraryOption */
typedef int gg_CUfunction_attribute;     /* CUfunction_attribute */
typedef int gg_CUmoduleLoadingMode;      /* CUmoduleLoadingMode */
typedef int gg_CUgraphNodeType;          /* CUgraphNodeType */
typedef int gg_CUgraphExecUpdateResult;  /* CUgraphExecUpdateResult */
typedef int gg_CUgraphInstantiateResult; /* CUgraphInstantiateResult */
#define GG_CU_GRAPH_NODE_TYPE_MEM_ALLOC 10
typedef int gg_CUlimit;               /* CUlimit */
typedef int gg_CUfunc_cache;          /* CUfunc_cache */
typedef int gg_CUpointer_attribute;   /* CUpointer_attribute */
typedef int gg_CUdevice_P2PAttribute; /* CUdevice_P2PAttribute */
typedef struct gg_CUipcMemHandle {
	char reserved[64];
} gg_CUipcMemHandle; /* CUipcMemHandle */
typedef struct gg_CUgraphEdgeData {
	unsigned char from_port;
	unsigned char to_port;
	unsigned char type;
	unsigned char reserved[5];
} gg_CUgraphEdgeData; /* CUgraphEdgeData */
typedef struct gg_CUexecAffinityParam {
	int type;
	union {
		struct {
			unsigned int val;
		} smCount;
	} param;
} gg_CUexecAffinityParam; /* CUexecAffinityParam */
typedef struct gg_CUctxCreateParams {
	gg_CUexecAffinityParam *execAffinityParams;
	int numExecAffinityParams;
	void *cigParams; /* CUctxCigParam *: we accept none */
} gg_CUctxCreateParams;  /* CUctxCreateParams */

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
#define GG_CUDA_ERROR_PROFILER_DISABLED 5
#define GG_CUDA_ERROR_INVALID_IMAGE 200
#define GG_CUDA_ERROR_CONTEXT_ALREADY_IN_USE 216
#define GG_CUDA_ERROR_INVALID_SOURCE 300
#define GG_CUDA_ERROR_FILE_NOT_FOUND 301
#define GG_CUDA_ERROR_ILLEGAL_STATE 401
#define GG_CUDA_ERROR_NOT_READY 600
#define GG_CUDA_ERROR_PEER_ACCESS_UNSUPPORTED 217
#define GG_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712
#define GG_CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED 713
#define GG_CUDA_ERROR_NOT_PERMITTED 800
#define GG_CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE 708
#define GG_CUDA_ERROR_CONTEXT_IS_DESTROYED 709
#define GG_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED 900
#define GG_CUDA_ERROR_STREAM_CAPTURE_INVALIDATED 901
#define GG_CUDA_ERROR_STREAM_CAPTURE_UNMATCHED 903
#define GG_CUDA_ERROR_STREAM_CAPTURE_UNJOINED 904
#define GG_CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD 908
#define GG_CUDA_ERROR_UNKNOWN 999

/* stream capture (CUstreamCaptureStatus, CUstreamCaptureMode) */
#define GG_CU_STREAM_CAPTURE_STATUS_NONE 0
#define GG_CU_STREAM_CAPTURE_STATUS_ACTIVE 1
#define GG_CU_STREAM_CAPTURE_STATUS_INVALIDATED 2
#define GG_CU_STREAM_CAPTURE_MODE_GLOBAL 0
#define GG_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1
#define GG_CU_STREAM_CAPTURE_MODE_RELAXED 2

/* graph memory (CUgraphMem_attribute) */
#define GG_CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT 0
#define GG_CU_GRAPH_MEM_ATTR_USED_MEM_HIGH 1
#define GG_CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT 2
#define GG_CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH 3
#define GG_CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH 1
#define GG_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD 2

/* cuMemHostRegister flags */
#define GG_CU_MEMHOSTREGISTER_PORTABLE 1
#define GG_CU_MEMHOSTREGISTER_DEVICEMAP 2
#define GG_CU_MEMHOSTREGISTER_IOMEMORY 4
#define GG_CU_MEMHOSTREGISTER_READ_ONLY 8

/* context flags (CUctx_flags) */
#define GG_CU_CTX_SCHED_MASK 0x07
#define GG_CU_CTX_MAP_HOST 0x08
#define GG_CU_CTX_LMEM_RESIZE_TO_MAX 0x10
#define GG_CU_CTX_COREDUMP_ENABLE 0x20
#define GG_CU_CTX_USER_COREDUMP_ENABLE 0x40
#define GG_CU_CTX_SYNC_MEMOPS 0x80
#define GG_CU_CTX_FLAGS_MASK 0xFF

/* event flags (CUevent_flags) */
#define GG_CU_EVENT_DEFAULT 0
#define GG_CU_EVENT_BLOCKING_SYNC 1
#define GG_CU_EVENT_DISABLE_TIMING 2
#define GG_CU_EVENT_INTERPROCESS 4

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
#define GG_CU_MEM_LOCATION_TYPE_HOST_NUMA 3
#define GG_CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT 4
#define GG_CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED 141
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

typedef struct gg_CUDA_MEM_ALLOC_NODE_PARAMS {
	gg_CUmemPoolProps poolProps;
	const gg_CUmemAccessDesc *accessDescs;
	size_t accessDescCount;
	size_t bytesize;
	gg_CUdeviceptr dptr;
} gg_CUDA_MEM_ALLOC_NODE_PARAMS; /* CUDA_MEM_ALLOC_NODE_PARAMS */

typedef struct gg_CUDA_GRAPH_INSTANTIATE_PARAMS {
	gg_cuuint64_t flags;
	gg_CUstream hUploadStream;
	gg_CUgraphNode hErrNode_out;
	gg_CUgraphInstantiateResult result_out;
} gg_CUDA_GRAPH_INSTANTIATE_PARAMS; /* CUDA_GRAPH_INSTANTIATE_PARAMS */

typedef struct gg_CUgraphExecUpdateResultInfo {
	gg_CUgraphExecUpdateResult result;
	gg_CUgraphNode errorNode;
	gg_CUgraphNode errorFromNode;
} gg_CUgraphExecUpdateResultInfo; /* CUgraphExecUpdateResultInfo */

/* cuGraphAddNode's parameters: only the type and an allocation node's
 * parameters are read; the rest of the union is padding to the same size. */
typedef struct gg_CUgraphNodeParams {
	gg_CUgraphNodeType type;
	int reserved0[3];
	union {
		long long reserved1[29];
		gg_CUDA_MEM_ALLOC_NODE_PARAMS alloc;
	};
	long long reserved2;
} gg_CUgraphNodeParams; /* CUgraphNodeParams */

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
