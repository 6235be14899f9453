/* gpuguard simulated GPU: a fake libnvidia-ml.so.1. Same devices, sizes and
 * UUIDs as the fake libcuda (simcore with SIM_LIB_ID 0). On a shared card
 * (SIMGPU_SHARED) it reads the card's books: every process and the whole
 * card's memory. Otherwise "used" is what this process holds in that libcuda,
 * if it is loaded. Reference-counted init and NVML's error codes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpuguard/nvml_abi.h"
#include "simcore.h"

/* A handle points into this array; it is checked, never trusted. */
struct nvmlDevice_st {
	int index;
};
static struct nvmlDevice_st g_nvdev[SIM_MAX_DEVICES];

/* nvmlInit* calls not yet matched by nvmlShutdown. */
static atomic_int g_refs;

static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static uint64_t g_reserved; /* SIMGPU_NVML_RESERVED */

#define UUID_LEN 40 /* "GPU-" + 36 */

static void env_init(void)
{
	const char *e = getenv("SIMGPU_NVML_RESERVED");
	if (e && *e && sim_parse_quantity(e, &g_reserved)) {
		fprintf(stderr, "simgpu: ignoring invalid SIMGPU_NVML_RESERVED=%s\n", e);
		g_reserved = 0;
	}
	for (int i = 0; i < SIM_MAX_DEVICES; i++)
		g_nvdev[i].index = i;
}

static int inited(void)
{
	/* acquire: pairs with the release in init_flags, so a thread that sees
	 * the count also sees env_init's stores (pthread_once orders them too). */
	return atomic_load_explicit(&g_refs, memory_order_acquire) > 0;
}

/* The device behind a handle, or -1. */
static int dev_of(gg_nvmlDevice_t h)
{
	uintptr_t p = (uintptr_t)h, lo = (uintptr_t)&g_nvdev[0];
	if (p < lo || (p - lo) % sizeof(g_nvdev[0]))
		return -1;
	uintptr_t i = (p - lo) / sizeof(g_nvdev[0]);
	return i < (uintptr_t)sim_device_count() ? (int)i : -1;
}

#define REQUIRE_INIT()                                      \
	do {                                                \
		if (!inited())                              \
			return GG_NVML_ERROR_UNINITIALIZED; \
	} while (0)

/* init check, then the handle's device */
#define REQUIRE_DEV(devvar, handle)                            \
	int devvar;                                            \
	do {                                                   \
		REQUIRE_INIT();                                \
		if ((devvar = dev_of(handle)) < 0)             \
			return GG_NVML_ERROR_INVALID_ARGUMENT; \
	} while (0)

/* Copies s into buf as NVML does: the whole string and its NUL, or nothing. */
static gg_nvmlReturn_t put_string(const char *s, char *buf, unsigned int length)
{
	if (!buf)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	size_t n = strlen(s) + 1;
	if (length < n)
		return GG_NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(buf, s, n);
	return GG_NVML_SUCCESS;
}

static void uuid_string(int dev, char out[UUID_LEN + 1])
{
	uint8_t u[16];
	sim_device_uuid(dev, u);
	snprintf(out, UUID_LEN + 1, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
	         u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* What this process holds on dev in the simulated libcuda (its pages and
 * any footprint: context, modules, local memory), found by soname
 * (RTLD_NOLOAD: linked, or dlopen'ed even RTLD_LOCAL); 0 if it is not loaded. */
static unsigned long long cuda_used(int dev)
{
	typedef int (*used_fn)(int, unsigned long long *, unsigned long long *, unsigned long long *);
	typedef int (*fp_fn)(int, unsigned long long *, int);
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return 0;
	fp_fn fp = (fp_fn)dlsym(h, "simgpu_cuda_debug_footprint");
	used_fn f = (used_fn)dlsym(h, "simgpu_cuda_debug_used");
	unsigned long long used = 0, v[SIM_USE_N];
	if (fp && fp(dev, v, SIM_USE_N) == 0)
		for (int i = 0; i < SIM_USE_N; i++)
			used += v[i];
	else if (!f || f(dev, &used, NULL, NULL) != 0)
		used = 0;
	dlclose(h); /* NOLOAD took a reference; the library stays */
	return used;
}

/* total = reserved + free + used, as the driver reports it. */
struct mem {
	unsigned long long total, reserved, free, used;
};

static struct mem mem_of(int dev)
{
	if (sim_card_shared()) {
		/* the card's reserve was taken when it was made, for every process */
		struct mem m = {sim_device_total(dev), sim_card_reserved(dev), 0, sim_card_used(dev)};
		m.free = m.total - m.reserved - m.used;
		return m;
	}
	struct mem m = {sim_device_total(dev), g_reserved, 0, cuda_used(dev)};
	if (m.reserved > m.total)
		m.reserved = m.total;
	if (m.used > m.total - m.reserved)
		m.used = m.total - m.reserved;
	m.free = m.total - m.reserved - m.used;
	return m;
}

/* ------------------------------------------------------- init and system */

static gg_nvmlReturn_t init_flags(unsigned int flags)
{
	pthread_once(&g_env_once, env_init);
	if (sim_device_count() == 0 && !(flags & GG_NVML_INIT_FLAG_NO_GPUS))
		return GG_NVML_ERROR_GPU_NOT_FOUND;
	/* release: pairs with the acquire in inited(). */
	atomic_fetch_add_explicit(&g_refs, 1, memory_order_release);
	return GG_NVML_SUCCESS;
}

gg_nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	return init_flags(flags);
}

gg_nvmlReturn_t nvmlInit_v2(void)
{
	return init_flags(0);
}

gg_nvmlReturn_t nvmlInit(void)
{
	return init_flags(0);
}

gg_nvmlReturn_t nvmlShutdown(void)
{
	/* relaxed: the count guards nothing that shutdown tears down. */
	int r = atomic_load_explicit(&g_refs, memory_order_relaxed);
	do {
		if (r <= 0)
			return GG_NVML_ERROR_UNINITIALIZED;
	} while (
	    !atomic_compare_exchange_weak_explicit(&g_refs, &r, r - 1, memory_order_relaxed, memory_order_relaxed));
	return GG_NVML_SUCCESS;
}

const char *nvmlErrorString(gg_nvmlReturn_t result)
{
	switch (result) {
	case GG_NVML_SUCCESS:
		return "Success";
	case GG_NVML_ERROR_UNINITIALIZED:
		return "Uninitialized";
	case GG_NVML_ERROR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case GG_NVML_ERROR_NOT_SUPPORTED:
		return "Not Supported";
	case GG_NVML_ERROR_NO_PERMISSION:
		return "Insufficient Permissions";
	case GG_NVML_ERROR_NOT_FOUND:
		return "Not Found";
	case GG_NVML_ERROR_INSUFFICIENT_SIZE:
		return "Insufficient Size";
	case GG_NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
		return "Argument Version Mismatch";
	case GG_NVML_ERROR_GPU_NOT_FOUND:
		return "GPU Not Found";
	default:
		return "Unknown Error";
	}
}

/* The driver that ships CUDA 13.0, as the fake libcuda reports 13000. */
gg_nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	REQUIRE_INIT();
	return put_string("580.65.06", version, length);
}

gg_nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
	REQUIRE_INIT();
	return put_string("13.580.65.06", version, length);
}

/* ---------------------------------------------------------------- devices */

static gg_nvmlReturn_t device_count(unsigned int *count)
{
	REQUIRE_INIT();
	if (!count)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	*count = (unsigned int)sim_device_count();
	return GG_NVML_SUCCESS;
}

gg_nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
	return device_count(deviceCount);
}

gg_nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
	return device_count(deviceCount);
}

static gg_nvmlReturn_t handle_by_index(unsigned int index, gg_nvmlDevice_t *device)
{
	REQUIRE_INIT();
	if (!device || !sim_device_valid((int)index))
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	*device = &g_nvdev[index];
	return GG_NVML_SUCCESS;
}

gg_nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, gg_nvmlDevice_t *device)
{
	return handle_by_index(index, device);
}

gg_nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, gg_nvmlDevice_t *device)
{
	return handle_by_index(index, device);
}

gg_nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, gg_nvmlDevice_t *device)
{
	REQUIRE_INIT();
	if (!uuid || !device)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	char s[UUID_LEN + 1];
	for (int d = 0; d < sim_device_count(); d++) {
		uuid_string(d, s);
		if (!strcmp(s, uuid)) {
			*device = &g_nvdev[d];
			return GG_NVML_SUCCESS;
		}
	}
	return GG_NVML_ERROR_NOT_FOUND;
}

gg_nvmlReturn_t nvmlDeviceGetIndex(gg_nvmlDevice_t device, unsigned int *index)
{
	REQUIRE_DEV(dev, device);
	if (!index)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	*index = (unsigned int)dev;
	return GG_NVML_SUCCESS;
}

gg_nvmlReturn_t nvmlDeviceGetName(gg_nvmlDevice_t device, char *name, unsigned int length)
{
	REQUIRE_DEV(dev, device);
	(void)dev;
	return put_string("gpuguard simulated GPU", name, length);
}

gg_nvmlReturn_t nvmlDeviceGetUUID(gg_nvmlDevice_t device, char *uuid, unsigned int length)
{
	REQUIRE_DEV(dev, device);
	char s[UUID_LEN + 1];
	uuid_string(dev, s);
	return put_string(s, uuid, length);
}

/* ----------------------------------------------------------------- memory */

/* v1 has no reserved field: it is counted as used, as the driver does. */
gg_nvmlReturn_t nvmlDeviceGetMemoryInfo(gg_nvmlDevice_t device, gg_nvmlMemory_t *memory)
{
	REQUIRE_DEV(dev, device);
	if (!memory)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	struct mem m = mem_of(dev);
	memory->total = m.total;
	memory->free = m.free;
	memory->used = m.reserved + m.used;
	return GG_NVML_SUCCESS;
}

gg_nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(gg_nvmlDevice_t device, gg_nvmlMemory_v2_t *memory)
{
	REQUIRE_DEV(dev, device);
	if (!memory)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	if (memory->version != GG_nvmlMemory_v2)
		return GG_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	struct mem m = mem_of(dev);
	memory->total = m.total;
	memory->reserved = m.reserved;
	memory->free = m.free;
	memory->used = m.used;
	return GG_NVML_SUCCESS;
}

/* ------------------------------------------------------------- processes */

#define MAX_PROCS 64 /* simcard.c's CARD_PROCS */

/* Every process with memory on the device (a shared card), else this one if
 * it holds any: *infoCount in, the count needed out; INSUFFICIENT_SIZE when it
 * is too small (infos may then be NULL). usedGpuMemory is all the process
 * holds there: allocations, contexts, modules, local memory, heap, FIFO. */
static gg_nvmlReturn_t processes(gg_nvmlDevice_t device, unsigned int *infoCount, void *infos, int v1)
{
	REQUIRE_DEV(dev, device);
	if (!infoCount)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	struct sim_card_proc p[MAX_PROCS];
	unsigned int n;
	if (sim_card_shared()) {
		int k = sim_card_procs(dev, p, MAX_PROCS);
		n = (unsigned)(k < MAX_PROCS ? k : MAX_PROCS);
	} else {
		unsigned long long used = mem_of(dev).used;
		n = used ? 1 : 0;
		p[0].nvml_pid = sim_nvml_pid_self();
		memset(p[0].use, 0, sizeof(p[0].use));
		p[0].use[SIM_USE_MEMORY] = used;
	}
	if (*infoCount < n) {
		*infoCount = n;
		return GG_NVML_ERROR_INSUFFICIENT_SIZE;
	}
	if (n && !infos)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	for (unsigned int i = 0; i < n; i++) {
		unsigned long long used = 0;
		for (int u = 0; u < SIM_USE_N; u++)
			used += p[i].use[u];
		if (v1)
			((gg_nvmlProcessInfo_v1_t *)infos)[i] = (gg_nvmlProcessInfo_v1_t){p[i].nvml_pid, used};
		else
			((gg_nvmlProcessInfo_t *)infos)[i] = (gg_nvmlProcessInfo_t){p[i].nvml_pid, used, ~0u, ~0u};
	}
	*infoCount = n;
	return GG_NVML_SUCCESS;
}

gg_nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(gg_nvmlDevice_t device, unsigned int *infoCount,
                                                        gg_nvmlProcessInfo_t *infos)
{
	return processes(device, infoCount, infos, 0);
}

gg_nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(gg_nvmlDevice_t device, unsigned int *infoCount,
                                                        gg_nvmlProcessInfo_t *infos)
{
	return processes(device, infoCount, infos, 0);
}

gg_nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(gg_nvmlDevice_t device, unsigned int *infoCount,
                                                     gg_nvmlProcessInfo_v1_t *infos)
{
	return processes(device, infoCount, infos, 1);
}

/* ------------------------- MPS v3 memory partitioning (the cgroup's limits) */

/* nvmlDeviceGetMemoryLimits_v1 (CUDA 13.4, driver r615): the limits the
 * driver enforces on the cgroup whose sysfs directory nameSpace names, and
 * what it uses, on the shared card's model (simcard.c). Not on a card of
 * one process's own (NOT_SUPPORTED, as on a driver without partitioning);
 * SIMGPU_NVML_NO_MEMORY_LIMITS=1 answers as an NVML that predates the
 * function would through a stub (FUNCTION_NOT_FOUND). A path no process on
 * the card was ever in, or below: NOT_FOUND (NVIDIA's page names no code
 * for it; ours is a guess). Its own block, apart from the rest, so that
 * it merges alongside other additions. */
gg_nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(gg_nvmlDevice_t device, gg_nvmlGetMemoryLimits_v1_t *limits)
{
	REQUIRE_DEV(dev, device);
	const char *off = getenv("SIMGPU_NVML_NO_MEMORY_LIMITS");
	if (off && !strcmp(off, "1"))
		return GG_NVML_ERROR_FUNCTION_NOT_FOUND;
	if (!limits || !limits->nameSpace)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	if (!sim_card_shared())
		return GG_NVML_ERROR_NOT_SUPPORTED;
	uint64_t soft, hard, used;
	if (sim_card_dmem(dev, limits->nameSpace, &soft, &hard, &used) != 0)
		return GG_NVML_ERROR_NOT_FOUND;
	limits->softLimit = soft;
	limits->hardLimit = hard ? hard : GG_NVML_DEVICE_MEMORY_LIMIT_MAX;
	limits->currentUsed = used;
	return GG_NVML_SUCCESS;
}

/* ----------------------------------------------- topology queries (NCCL) */

/* What NCCL asks of NVML to build its topology, for a PCIe card without
 * NVLink, fabric or confidential computing. Declared here: nothing in
 * gpuguard calls them. The PCI location is simcore's, as in libcuda. */
gg_nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, gg_nvmlDevice_t *device);
gg_nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, gg_nvmlDevice_t *device);
gg_nvmlReturn_t nvmlDeviceGetCudaComputeCapability(gg_nvmlDevice_t device, int *major, int *minor);
gg_nvmlReturn_t nvmlDeviceGetNvLinkState(gg_nvmlDevice_t device, unsigned int link, int *isActive);
gg_nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(gg_nvmlDevice_t device, unsigned int link, void *pci);
gg_nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(gg_nvmlDevice_t device, unsigned int link, void *pci);
gg_nvmlReturn_t nvmlDeviceGetNvLinkCapability(gg_nvmlDevice_t device, unsigned int link, int capability,
                                              unsigned int *capResult);
gg_nvmlReturn_t nvmlDeviceGetP2PStatus(gg_nvmlDevice_t device1, gg_nvmlDevice_t device2, int p2pIndex, int *p2pStatus);
gg_nvmlReturn_t nvmlDeviceGetFieldValues(gg_nvmlDevice_t device, int valuesCount, void *values);
gg_nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(gg_nvmlDevice_t device, void *gpuFabricInfo);
gg_nvmlReturn_t nvmlDeviceGetPlatformInfo(gg_nvmlDevice_t device, void *platformInfo);
gg_nvmlReturn_t nvmlSystemGetConfComputeState(void *state);
gg_nvmlReturn_t nvmlSystemGetConfComputeSettings(void *settings);

/* "[domain:]bus:device[.function]", hex, 4- or 8-digit domain */
gg_nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, gg_nvmlDevice_t *device)
{
	REQUIRE_INIT();
	if (!pciBusId || !device)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	unsigned a, b, c, f = 0;
	if (sscanf(pciBusId, "%x:%x:%x.%x", &a, &b, &c, &f) < 3) {
		a = 0;
		if (sscanf(pciBusId, "%x:%x.%x", &b, &c, &f) < 2)
			return GG_NVML_ERROR_INVALID_ARGUMENT;
	}
	for (int d = 0; d < sim_device_count(); d++) {
		int dom, bus, slot;
		sim_device_pci(d, &dom, &bus, &slot);
		if ((unsigned)dom == a && (unsigned)bus == b && (unsigned)slot == c && f == 0) {
			*device = &g_nvdev[d];
			return GG_NVML_SUCCESS;
		}
	}
	return GG_NVML_ERROR_NOT_FOUND;
}

gg_nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, gg_nvmlDevice_t *device)
{
	return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

/* the libcuda attribute table's 9.0 */
gg_nvmlReturn_t nvmlDeviceGetCudaComputeCapability(gg_nvmlDevice_t device, int *major, int *minor)
{
	REQUIRE_DEV(dev, device);
	(void)dev;
	if (!major || !minor)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	*major = 9;
	*minor = 0;
	return GG_NVML_SUCCESS;
}

/* no NVLink: every link query is NOT_SUPPORTED, as on a PCIe card */
gg_nvmlReturn_t nvmlDeviceGetNvLinkState(gg_nvmlDevice_t device, unsigned int link, int *isActive)
{
	REQUIRE_DEV(dev, device);
	(void)dev, (void)link;
	if (!isActive)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	return GG_NVML_ERROR_NOT_SUPPORTED;
}

gg_nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(gg_nvmlDevice_t device, unsigned int link, void *pci)
{
	REQUIRE_DEV(dev, device);
	(void)dev, (void)link;
	if (!pci)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	return GG_NVML_ERROR_NOT_SUPPORTED;
}

gg_nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(gg_nvmlDevice_t device, unsigned int link, void *pci)
{
	return nvmlDeviceGetNvLinkRemotePciInfo_v2(device, link, pci);
}

gg_nvmlReturn_t nvmlDeviceGetNvLinkCapability(gg_nvmlDevice_t device, unsigned int link, int capability,
                                              unsigned int *capResult)
{
	REQUIRE_DEV(dev, device);
	(void)dev, (void)link, (void)capability;
	if (!capResult)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	return GG_NVML_ERROR_NOT_SUPPORTED;
}

/* PCIe peers: every capability (read, write, atomics, prop, ...) reports
 * NVML_P2P_STATUS_OK (0) between two devices; a device and itself too */
gg_nvmlReturn_t nvmlDeviceGetP2PStatus(gg_nvmlDevice_t device1, gg_nvmlDevice_t device2, int p2pIndex, int *p2pStatus)
{
	REQUIRE_INIT();
	if (dev_of(device1) < 0 || dev_of(device2) < 0 || !p2pStatus || p2pIndex < 0 || p2pIndex > 6)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	*p2pStatus = 0;
	return GG_NVML_SUCCESS;
}

/* nvmlFieldValue_t: fieldId, scopeId, timestamp, latencyUsec, valueType,
 * nvmlReturn, value (40 bytes); no field is simulated, each says so */
struct field_value {
	unsigned int fieldId, scopeId;
	long long timestamp, latencyUsec;
	int valueType, nvmlReturn;
	unsigned long long value;
};
_Static_assert(sizeof(struct field_value) == 40, "nvmlFieldValue_t layout");

gg_nvmlReturn_t nvmlDeviceGetFieldValues(gg_nvmlDevice_t device, int valuesCount, void *values)
{
	REQUIRE_DEV(dev, device);
	(void)dev;
	if (valuesCount < 0 || (valuesCount && !values))
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	struct field_value *v = values;
	for (int i = 0; i < valuesCount; i++) {
		v[i].timestamp = 0;
		v[i].latencyUsec = 0;
		v[i].nvmlReturn = GG_NVML_ERROR_NOT_SUPPORTED;
	}
	return GG_NVML_SUCCESS;
}

gg_nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(gg_nvmlDevice_t device, void *gpuFabricInfo)
{
	REQUIRE_DEV(dev, device);
	(void)dev;
	if (!gpuFabricInfo)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	return GG_NVML_ERROR_NOT_SUPPORTED;
}

gg_nvmlReturn_t nvmlDeviceGetPlatformInfo(gg_nvmlDevice_t device, void *platformInfo)
{
	REQUIRE_DEV(dev, device);
	(void)dev;
	if (!platformInfo)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	return GG_NVML_ERROR_NOT_SUPPORTED;
}

/* confidential computing off: environment, feature and dev-tools mode 0 */
gg_nvmlReturn_t nvmlSystemGetConfComputeState(void *state)
{
	REQUIRE_INIT();
	if (!state)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	memset(state, 0, 3 * sizeof(unsigned int));
	return GG_NVML_SUCCESS;
}

/* nvmlSystemConfComputeSettings_v1: version, then four unsigned, all 0 */
gg_nvmlReturn_t nvmlSystemGetConfComputeSettings(void *settings)
{
	REQUIRE_INIT();
	if (!settings)
		return GG_NVML_ERROR_INVALID_ARGUMENT;
	unsigned int *s = settings;
	if (s[0] != (5u * sizeof(unsigned int) | (1u << 24)))
		return GG_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	memset(s + 1, 0, 4 * sizeof(unsigned int));
	return GG_NVML_SUCCESS;
}
