/* gpuguard: our own declaration of the NVML (libnvidia-ml.so.1) ABI subset we
 * hook or simulate, with gg_ / GG_ prefixes as in cuda_abi.h. Values and
 * layouts follow NVIDIA's nvml.h; the prototypes are an X-list, GG_NVML_FUNCS,
 * so a conformance test can expand it once more against that header. */
#ifndef GPUGUARD_NVML_ABI_H
#define GPUGUARD_NVML_ABI_H

typedef int gg_nvmlReturn_t; /* enum nvmlReturn_enum */
typedef struct nvmlDevice_st *gg_nvmlDevice_t;

typedef struct gg_nvmlMemory_t {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used; /* includes what the driver reserves */
} gg_nvmlMemory_t;               /* nvmlMemory_t */

typedef struct gg_nvmlMemory_v2_t {
	unsigned int version; /* must be GG_nvmlMemory_v2 */
	unsigned long long total;
	unsigned long long reserved; /* driver and firmware */
	unsigned long long free;
	unsigned long long used;
} gg_nvmlMemory_v2_t; /* nvmlMemory_v2_t */

/* NVML_STRUCT_VERSION(Memory, 2): the size in the low bits, the version above. */
#define GG_nvmlMemory_v2 ((unsigned int)(sizeof(gg_nvmlMemory_v2_t) | (2u << 24)))

/* The legacy nvmlDeviceGetComputeRunningProcesses fills this; _v2 and _v3 the
 * next (nvml.h calls it both nvmlProcessInfo_v2_t and nvmlProcessInfo_t). */
typedef struct gg_nvmlProcessInfo_v1_t {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} gg_nvmlProcessInfo_v1_t; /* nvmlProcessInfo_v1_t */

typedef struct gg_nvmlProcessInfo_t {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;     /* 0xFFFFFFFF outside MIG */
	unsigned int computeInstanceId; /* likewise */
} gg_nvmlProcessInfo_t;                 /* nvmlProcessInfo_t (v2 layout) */

/* nvmlReturn_t values we produce or test for. */
#define GG_NVML_SUCCESS 0
#define GG_NVML_ERROR_UNINITIALIZED 1
#define GG_NVML_ERROR_INVALID_ARGUMENT 2
#define GG_NVML_ERROR_NOT_SUPPORTED 3
#define GG_NVML_ERROR_NO_PERMISSION 4
#define GG_NVML_ERROR_NOT_FOUND 6
#define GG_NVML_ERROR_INSUFFICIENT_SIZE 7
#define GG_NVML_ERROR_FUNCTION_NOT_FOUND 13
#define GG_NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define GG_NVML_ERROR_GPU_NOT_FOUND 28
#define GG_NVML_ERROR_UNKNOWN 999

/* nvmlInitWithFlags */
#define GG_NVML_INIT_FLAG_NO_GPUS 1
#define GG_NVML_INIT_FLAG_NO_ATTACH 2

/* Buffer sizes nvml.h promises are enough (the V2 ones for current drivers). */
#define GG_NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define GG_NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define GG_NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define GG_NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80

/* X(name, params) for every function returning nvmlReturn_t. Unversioned
 * names whose ABI differs from their successor's are marked legacy. */
#define GG_NVML_FUNCS(X)                                                                     \
	X(nvmlInit_v2, (void))                                                               \
	X(nvmlInit, (void)) /* legacy: same ABI as _v2 */                                    \
	X(nvmlInitWithFlags, (unsigned int flags))                                           \
	X(nvmlShutdown, (void))                                                              \
	X(nvmlSystemGetDriverVersion, (char *version, unsigned int length))                  \
	X(nvmlSystemGetNVMLVersion, (char *version, unsigned int length))                    \
	X(nvmlDeviceGetCount_v2, (unsigned int *deviceCount))                                \
	X(nvmlDeviceGetCount, (unsigned int *deviceCount))                                   \
	X(nvmlDeviceGetHandleByIndex_v2, (unsigned int index, gg_nvmlDevice_t *device))      \
	X(nvmlDeviceGetHandleByIndex, (unsigned int index, gg_nvmlDevice_t *device))         \
	X(nvmlDeviceGetHandleByUUID, (const char *uuid, gg_nvmlDevice_t *device))            \
	X(nvmlDeviceGetIndex, (gg_nvmlDevice_t device, unsigned int *index))                 \
	X(nvmlDeviceGetName, (gg_nvmlDevice_t device, char *name, unsigned int length))      \
	X(nvmlDeviceGetUUID, (gg_nvmlDevice_t device, char *uuid, unsigned int length))      \
	X(nvmlDeviceGetMemoryInfo, (gg_nvmlDevice_t device, gg_nvmlMemory_t * memory))       \
	X(nvmlDeviceGetMemoryInfo_v2, (gg_nvmlDevice_t device, gg_nvmlMemory_v2_t * memory)) \
	X(nvmlDeviceGetComputeRunningProcesses_v3,                                           \
	  (gg_nvmlDevice_t device, unsigned int *infoCount, gg_nvmlProcessInfo_t *infos))    \
	X(nvmlDeviceGetComputeRunningProcesses_v2,                                           \
	  (gg_nvmlDevice_t device, unsigned int *infoCount, gg_nvmlProcessInfo_t *infos))    \
	X(nvmlDeviceGetComputeRunningProcesses, /* legacy: the v1 layout */                  \
	  (gg_nvmlDevice_t device, unsigned int *infoCount, gg_nvmlProcessInfo_v1_t *infos))

/* MPS v3 memory partitioning (CUDA 13.4, driver r615; NVML API reference,
 * nvmlDeviceGetMemoryLimits_v1 and struct nvmlGetMemoryLimits_v1_t, and
 * docs.nvidia.com/deploy/mps/latest/mpsv3-memory-partitioning.html): the
 * limits the driver enforces on a cgroup v2 (the dmem controller: hard =
 * dmem.max, an allocation past it fails with out-of-memory; soft =
 * dmem.min) and what the cgroup uses, all device memory of its processes
 * counted. Declared here and outside GG_NVML_FUNCS: CUDA 13.0's nvml.h,
 * the toolkit here, has neither, so the conformance test cannot check
 * them, and callers resolve the function at run time (older drivers lack
 * it). MIG handles are not supported. The layout is the documented one:
 * one pointer then three unsigned long long. */
typedef struct gg_nvmlGetMemoryLimits_v1_t {
	const char *nameSpace;          /* [in] full path to the cgroup's sysfs directory */
	unsigned long long softLimit;   /* [out] bytes; 0 = none */
	unsigned long long hardLimit;   /* [out] bytes; GG_NVML_DEVICE_MEMORY_LIMIT_MAX = none */
	unsigned long long currentUsed; /* [out] bytes the cgroup uses on the device */
} gg_nvmlGetMemoryLimits_v1_t;          /* nvmlGetMemoryLimits_v1_t */
/* NVML_DEVICE_MEMORY_LIMIT_MAX: "no hard limit". Its value is not in the
 * pages we could read; all ones is assumed (dmem.max reads "max"), and any
 * hard limit at or above the card's memory is treated as none anyway. */
#define GG_NVML_DEVICE_MEMORY_LIMIT_MAX (~0ull)
_Static_assert(sizeof(void *) != 8 || sizeof(gg_nvmlGetMemoryLimits_v1_t) == 32,
               "nvmlGetMemoryLimits_v1_t is 32 bytes on LP64");
typedef gg_nvmlReturn_t (*gg_pfn_nvmlDeviceGetMemoryLimits_v1)(gg_nvmlDevice_t device,
                                                               gg_nvmlGetMemoryLimits_v1_t *limits);

#ifdef GG_ABI_NO_PROTOTYPES
#define GG_NVML_DECLARE(name, params) typedef gg_nvmlReturn_t(*gg_pfn_##name) params;
#else
#define GG_NVML_DECLARE(name, params)                   \
	typedef gg_nvmlReturn_t(*gg_pfn_##name) params; \
	gg_nvmlReturn_t name params;
const char *nvmlErrorString(gg_nvmlReturn_t result);
gg_nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(gg_nvmlDevice_t device, gg_nvmlGetMemoryLimits_v1_t *limits);
#endif
GG_NVML_FUNCS(GG_NVML_DECLARE)
#undef GG_NVML_DECLARE
typedef const char *(*gg_pfn_nvmlErrorString)(gg_nvmlReturn_t result);

#endif
