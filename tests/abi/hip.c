/* gpuguard: include/gpuguard/hip_abi.h against the HIP runtime header, at
 * compile time only: a wrong size, offset, constant or prototype fails the build.
 * Written against Debian's libamdhip64-dev (HIP 5.2); check.sh passes
 * -D__HIP_PLATFORM_AMD__. */
#include <stddef.h>

#define GG_ABI_NO_PROTOTYPES 1
#include "gpuguard/hip_abi.h"

#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>

#define GG_STR_(x) #x
#define GG_XSTR(x) GG_STR_(x)
#include "same.h"

/* scalar types and opaque handles */
SAME_SCALAR(gg_hipError_t, hipError_t);
SAME_TYPE(gg_hipDevice_t, hipDevice_t);
SAME_TYPE(gg_hipDeviceptr_t, hipDeviceptr_t);
SAME_TYPE(gg_hipStream_t, hipStream_t);
SAME_TYPE(gg_hipCtx_t, hipCtx_t);
SAME_TYPE(gg_hipMemPool_t, hipMemPool_t);
SAME_TYPE(gg_hipMemGenericAllocationHandle_t, hipMemGenericAllocationHandle_t);
SAME_SCALAR(gg_hipMemPoolAttr, hipMemPoolAttr);
SAME_SCALAR(gg_hipMemLocationType, hipMemLocationType);
SAME_SCALAR(gg_hipMemAllocationType, hipMemAllocationType);
SAME_SCALAR(gg_hipMemAllocationHandleType, hipMemAllocationHandleType);
SAME_SCALAR(gg_hipMemAllocationGranularity_flags, hipMemAllocationGranularity_flags);
SAME_SCALAR(gg_hipMemAccessFlags, hipMemAccessFlags);

/* structures: every field, nested ones included */
SAME_STRUCT(gg_hipUUID, hipUUID);
SAME_FIELD(gg_hipUUID, hipUUID, bytes);
SAME_STRUCT(gg_hipIpcMemHandle_t, hipIpcMemHandle_t);
SAME_FIELD(gg_hipIpcMemHandle_t, hipIpcMemHandle_t, reserved);
SAME_STRUCT(gg_hipMemLocation, hipMemLocation);
SAME_FIELD(gg_hipMemLocation, hipMemLocation, type);
SAME_FIELD(gg_hipMemLocation, hipMemLocation, id);

/* ROCm 6 reordered hipMemAllocationProp to CUDA's layout (a union of
 * requestedHandleType/requestedHandleTypes, then location, win32HandleMetaData
 * and allocFlags). The 5.x headers cannot check that layout, so we pin down
 * what the hook relies on: the size, and location at offset 8 where ROCm 5 has
 * it at 4. The hook tells them apart by hipRuntimeGetVersion. */
#define V6_FIELD(field, type, offset)                                                                              \
	_Static_assert(__builtin_types_compatible_p(__typeof__(((gg_hipMemAllocationProp_v6 *)0)->field), type) && \
	                   offsetof(gg_hipMemAllocationProp_v6, field) == (offset),                                \
	               "gg_hipMemAllocationProp_v6." #field " is not " #type " at " #offset)
#if defined(__LP64__)
_Static_assert(sizeof(gg_hipMemAllocationProp_v6) == 32, "gg_hipMemAllocationProp_v6 size");
_Static_assert(_Alignof(gg_hipMemAllocationProp_v6) == 8, "gg_hipMemAllocationProp_v6 alignment");
V6_FIELD(type, gg_hipMemAllocationType, 0);
V6_FIELD(requestedHandleTypes, gg_hipMemAllocationHandleType, 4);
V6_FIELD(location, gg_hipMemLocation, 8);
V6_FIELD(win32HandleMetaData, void *, 16);
V6_FIELD(allocFlags.compressionType, unsigned char, 24);
V6_FIELD(allocFlags.gpuDirectRDMACapable, unsigned char, 25);
V6_FIELD(allocFlags.usage, unsigned short, 26);
#endif
_Static_assert(offsetof(gg_hipMemAllocationProp_v6, location) != offsetof(gg_hipMemAllocationProp, location),
               "the two hipMemAllocationProp layouts must differ where the hook looks");

#if HIP_VERSION_MAJOR >= 6
SAME_STRUCT(gg_hipMemAllocationProp_v6, hipMemAllocationProp);
SAME_FIELD(gg_hipMemAllocationProp_v6, hipMemAllocationProp, type);
SAME_FIELD(gg_hipMemAllocationProp_v6, hipMemAllocationProp, requestedHandleTypes);
SAME_FIELD(gg_hipMemAllocationProp_v6, hipMemAllocationProp, location);
SAME_FIELD(gg_hipMemAllocationProp_v6, hipMemAllocationProp, win32HandleMetaData);
SAME_FIELD(gg_hipMemAllocationProp_v6, hipMemAllocationProp, allocFlags.compressionType);
SAME_FIELD(gg_hipMemAllocationProp_v6, hipMemAllocationProp, allocFlags.gpuDirectRDMACapable);
SAME_FIELD(gg_hipMemAllocationProp_v6, hipMemAllocationProp, allocFlags.usage);
#else
SAME_STRUCT(gg_hipMemAllocationProp, hipMemAllocationProp);
SAME_FIELD(gg_hipMemAllocationProp, hipMemAllocationProp, compressionType);
SAME_FIELD(gg_hipMemAllocationProp, hipMemAllocationProp, location);
SAME_FIELD(gg_hipMemAllocationProp, hipMemAllocationProp, location.type);
SAME_FIELD(gg_hipMemAllocationProp, hipMemAllocationProp, location.id);
SAME_FIELD(gg_hipMemAllocationProp, hipMemAllocationProp, requestedHandleType);
SAME_FIELD(gg_hipMemAllocationProp, hipMemAllocationProp, type);
SAME_FIELD(gg_hipMemAllocationProp, hipMemAllocationProp, usage);
SAME_FIELD(gg_hipMemAllocationProp, hipMemAllocationProp, win32HandleMetaData);
#endif

SAME_STRUCT(gg_hipMemAccessDesc, hipMemAccessDesc);
SAME_FIELD(gg_hipMemAccessDesc, hipMemAccessDesc, location);
SAME_FIELD(gg_hipMemAccessDesc, hipMemAccessDesc, location.type);
SAME_FIELD(gg_hipMemAccessDesc, hipMemAccessDesc, location.id);
SAME_FIELD(gg_hipMemAccessDesc, hipMemAccessDesc, flags);

SAME_STRUCT(gg_hipMemPoolProps, hipMemPoolProps);
SAME_FIELD(gg_hipMemPoolProps, hipMemPoolProps, allocType);
SAME_FIELD(gg_hipMemPoolProps, hipMemPoolProps, handleTypes);
SAME_FIELD(gg_hipMemPoolProps, hipMemPoolProps, location);
SAME_FIELD(gg_hipMemPoolProps, hipMemPoolProps, location.type);
SAME_FIELD(gg_hipMemPoolProps, hipMemPoolProps, location.id);
SAME_FIELD(gg_hipMemPoolProps, hipMemPoolProps, win32SecurityAttributes);
SAME_FIELD(gg_hipMemPoolProps, hipMemPoolProps, reserved);

/* constants */
SAME_CONST(GG_hipSuccess, hipSuccess);
SAME_CONST(GG_hipErrorInvalidValue, hipErrorInvalidValue);
SAME_CONST(GG_hipErrorOutOfMemory, hipErrorOutOfMemory);
SAME_CONST(GG_hipErrorNotInitialized, hipErrorNotInitialized);
SAME_CONST(GG_hipErrorInvalidDevicePointer, hipErrorInvalidDevicePointer);
SAME_CONST(GG_hipErrorNoDevice, hipErrorNoDevice);
SAME_CONST(GG_hipErrorInvalidDevice, hipErrorInvalidDevice);
SAME_CONST(GG_hipErrorInvalidContext, hipErrorInvalidContext);
SAME_CONST(GG_hipErrorInvalidHandle, hipErrorInvalidHandle);
SAME_CONST(GG_hipErrorNotFound, hipErrorNotFound);
SAME_CONST(GG_hipErrorNotSupported, hipErrorNotSupported);

SAME_CONST(GG_hipMemAttachGlobal, hipMemAttachGlobal);
SAME_CONST(GG_hipMemAttachHost, hipMemAttachHost);
SAME_CONST(GG_hipDeviceMallocDefault, hipDeviceMallocDefault);
SAME_CONST(GG_hipDeviceMallocFinegrained, hipDeviceMallocFinegrained);

SAME_CONST(GG_hipMemPoolAttrReleaseThreshold, hipMemPoolAttrReleaseThreshold);
SAME_CONST(GG_hipMemPoolAttrReservedMemCurrent, hipMemPoolAttrReservedMemCurrent);
SAME_CONST(GG_hipMemPoolAttrReservedMemHigh, hipMemPoolAttrReservedMemHigh);
SAME_CONST(GG_hipMemPoolAttrUsedMemCurrent, hipMemPoolAttrUsedMemCurrent);
SAME_CONST(GG_hipMemPoolAttrUsedMemHigh, hipMemPoolAttrUsedMemHigh);

SAME_CONST(GG_hipMemLocationTypeInvalid, hipMemLocationTypeInvalid);
SAME_CONST(GG_hipMemLocationTypeDevice, hipMemLocationTypeDevice);
SAME_CONST(GG_hipMemAllocationTypePinned, hipMemAllocationTypePinned);

/* prototypes. The name must reach the compiler unchanged, so that a vendor
 * macro cannot make us check some other function. The context calls are
 * marked deprecated by the header: naming them is the point here. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define GGT(t) t
#define GG_HIP_FN(name, params)                                                               \
	_Static_assert(sizeof(#name) == sizeof(GG_XSTR(name)),                                \
	               #name " is renamed by the HIP header to " GG_XSTR(name));              \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&name), hipError_t(*) params), \
	               #name ": prototype differs from the HIP header");
#include "gpuguard/hip_abi_funcs.h"

/* hipGetErrorString is the one that returns no hipError_t. */
_Static_assert(__builtin_types_compatible_p(__typeof__(&hipGetErrorString), const char *(*)(hipError_t)),
               "hipGetErrorString: prototype differs from the HIP header");
_Static_assert(__builtin_types_compatible_p(gg_pfn_hipGetErrorString, const char *(*)(gg_hipError_t)),
               "gg_pfn_hipGetErrorString");
