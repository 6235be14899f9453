/* gpuguard: our own declaration of the HIP runtime ABI subset we touch.
 * Checked by tests/abi/ against Debian's libamdhip64-dev (hip/hip_runtime_api.h).
 * hipMemAllocationProp is the ROCm 5 layout that header has; ROCm 6 moved its
 * fields, so the hook validates location.type and id before trusting them. */
#ifndef GPUGUARD_HIP_ABI_H
#define GPUGUARD_HIP_ABI_H

#include <stddef.h>

typedef int gg_hipError_t; /* enum hipError_t */
typedef int gg_hipDevice_t;
typedef void *gg_hipDeviceptr_t;
typedef struct ihipStream_t *gg_hipStream_t;
typedef struct ihipCtx_t *gg_hipCtx_t; /* ROCm's contexts: deprecated, still exported */
typedef struct ihipMemPoolHandle_t *gg_hipMemPool_t;
typedef struct ihipMemGenericAllocationHandle *gg_hipMemGenericAllocationHandle_t;
/* hipIpcMemHandle_t: 64 opaque bytes, passed by value. */
typedef struct gg_hipIpcMemHandle_t {
	char reserved[64];
} gg_hipIpcMemHandle_t;
typedef struct gg_hipUUID {
	char bytes[16];
} gg_hipUUID; /* hipUUID */

#define GG_hipSuccess 0
#define GG_hipErrorInvalidValue 1
#define GG_hipErrorOutOfMemory 2
#define GG_hipErrorNotInitialized 3
#define GG_hipErrorInvalidDevicePointer 17
#define GG_hipErrorNoDevice 100
#define GG_hipErrorInvalidDevice 101
#define GG_hipErrorInvalidContext 201
#define GG_hipErrorInvalidHandle 400
#define GG_hipErrorNotFound 500
#define GG_hipErrorNotSupported 801

#define GG_hipMemAttachGlobal 0x01
#define GG_hipMemAttachHost 0x02
#define GG_hipDeviceMallocDefault 0x0
#define GG_hipDeviceMallocFinegrained 0x1

typedef int gg_hipMemPoolAttr;
#define GG_hipMemPoolAttrReleaseThreshold 0x4
#define GG_hipMemPoolAttrReservedMemCurrent 0x5
#define GG_hipMemPoolAttrReservedMemHigh 0x6
#define GG_hipMemPoolAttrUsedMemCurrent 0x7
#define GG_hipMemPoolAttrUsedMemHigh 0x8

typedef int gg_hipMemLocationType;
#define GG_hipMemLocationTypeInvalid 0
#define GG_hipMemLocationTypeDevice 1
typedef int gg_hipMemAllocationType;
#define GG_hipMemAllocationTypePinned 1
typedef int gg_hipMemAllocationHandleType;
typedef int gg_hipMemAllocationGranularity_flags;
typedef int gg_hipMemAccessFlags;

typedef struct gg_hipMemLocation {
	gg_hipMemLocationType type;
	int id;
} gg_hipMemLocation;

typedef struct gg_hipMemAllocationProp {
	unsigned char compressionType;
	gg_hipMemLocation location;
	gg_hipMemAllocationHandleType requestedHandleType;
	gg_hipMemAllocationType type;
	unsigned short usage;
	void *win32HandleMetaData;
} gg_hipMemAllocationProp;

/* ROCm 6 reordered hipMemAllocationProp to mirror CUDA's. Not in Debian's
 * 5.2 headers; the hook picks the layout by hipRuntimeGetVersion. */
typedef struct gg_hipMemAllocationProp_v6 {
	gg_hipMemAllocationType type;
	gg_hipMemAllocationHandleType requestedHandleTypes;
	gg_hipMemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
	} allocFlags;
} gg_hipMemAllocationProp_v6;

typedef struct gg_hipMemAccessDesc {
	gg_hipMemLocation location;
	gg_hipMemAccessFlags flags;
} gg_hipMemAccessDesc;

typedef struct gg_hipMemPoolProps {
	gg_hipMemAllocationType allocType;
	gg_hipMemAllocationHandleType handleTypes;
	gg_hipMemLocation location;
	void *win32SecurityAttributes;
	unsigned char reserved[64];
} gg_hipMemPoolProps;

/* GG_ABI_NO_PROTOTYPES: as in cuda_abi.h, for tests/abi/ beside the vendor
 * header, whose hipError_t is an enum rather than our int. */
#define GGT(t) gg_##t
#ifdef GG_ABI_NO_PROTOTYPES
#define GG_HIP_FN(name, params) typedef gg_hipError_t(*gg_pfn_##name) params;
#else
#define GG_HIP_FN(name, params)                       \
	typedef gg_hipError_t(*gg_pfn_##name) params; \
	gg_hipError_t name params;
#endif
#include "hip_abi_funcs.h"
#undef GG_HIP_FN
#undef GGT

typedef const char *(*gg_pfn_hipGetErrorString)(gg_hipError_t);
#ifndef GG_ABI_NO_PROTOTYPES
const char *hipGetErrorString(gg_hipError_t err);
#endif

#endif
