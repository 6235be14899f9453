/* gpuguard: NVML hooks. Monitoring tools and servers that size themselves
 * from nvmlDeviceGetMemoryInfo[_v2] must see the same ceiling as cuMemGetInfo
 * (DESIGN.md §2), so each reports the budget's total and free in place of the
 * card's (shared.c). The return code and every failure are the driver's own. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "hook_nvml.h"
#include "base.h"
#include "gpuguard/nvml_abi.h"
#include "hooks.h"
#include "meminfo.h"
#include "resolve.h"
#include "shared.h"
#include "veneer.h"

#define LIBNVML "libnvidia-ml.so.1"

/* ---- real function pointers ------------------------------------------- */

/* Functions we only call. */
#define NVML_HELPERS(X)      \
	X(nvmlDeviceGetUUID) \
	X(nvmlDeviceGetIndex)

/* The functions we wrap (GG_NVML_HOOKS' rows, hooks.h) and those we only
 * call: one real pointer each. */
GG_NVML_HOOKS(DECLARE_HOOK)
NVML_HELPERS(DECLARE_REAL)

#define GG_VENEER_LIB LIBNVML
/* NVML has no GG_RT_* of its own: its hooks enter as CUDA's, as they always did */
#define GG_VENEER_RUNTIME GG_RT_CUDA
#define GG_VENEER_RESULT gg_nvmlReturn_t
#define GG_VENEER_OOM GG_NVML_ERROR_UNKNOWN /* never answered: no NVML hook allocates */
#define GG_VENEER_MISSING GG_NVML_ERROR_UNINITIALIZED

/* ---- helpers ----------------------------------------------------------- */

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20); /* either case */
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" into 16 bytes, and a MIG
 * instance's "MIG-xxxxxxxx-…" (R470 on) alike: a MIG instance is a card of
 * its own, and cuDeviceGetUuid names it by the same 16 bytes, so its NVML
 * answers are its own budget's, never the whole GPU's (issue 22). 0 or -1:
 * the older "MIG-GPU-…/gi/ci" form names no device the CUDA side reports. */
static int parse_uuid(const char *s, uint8_t out[16])
{
	if (strncmp(s, "GPU-", 4) != 0 && strncmp(s, "MIG-", 4) != 0)
		return -1;
	s += 4;
	for (int i = 0; i < 16; i++) {
		if (*s == '-' && (i == 4 || i == 6 || i == 8 || i == 10))
			s++;
		int hi = hex_digit(s[0]), lo = hi < 0 ? -1 : hex_digit(s[1]);
		if (lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
		s += 2;
	}
	return *s == '\0' ? 0 : -1;
}

/* The device's view under the budget: free and total replaced in place.
 * Asks the real NVML who the device is (bypassing us: we are in a hook). */
static unsigned budget_view(gg_nvmlDevice_t device, uint64_t *free_bytes, uint64_t *total_bytes)
{
	gg_pfn_nvmlDeviceGetUUID get_uuid = HELPER(nvmlDeviceGetUUID);
	gg_pfn_nvmlDeviceGetIndex get_index = HELPER(nvmlDeviceGetIndex);
	char text[GG_NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	uint8_t bytes[16];
	const uint8_t *uuid = NULL;
	unsigned int index = UINT32_MAX; /* not a device: left as it is */
	if (get_uuid && get_uuid(device, text, sizeof(text)) == GG_NVML_SUCCESS && parse_uuid(text, bytes) == 0)
		uuid = bytes;
	if (!get_index || get_index(device, &index) != GG_NVML_SUCCESS)
		index = UINT32_MAX;
	gg_nvml_meminfo(uuid, index, free_bytes, total_bytes);
	if (*free_bytes > *total_bytes)
		*free_bytes = *total_bytes;
	return index;
}

/* Rewrites one memory struct's fields with the budget's view. used is what
 * is left: total - free, less the driver's reserve where the struct has one
 * (v2), which is kept but never more than the budget leaves beside free. */
static void rewrite(gg_nvmlDevice_t device, unsigned long long *total, unsigned long long *free_,
                    unsigned long long *used, unsigned long long *reserved)
{
	uint64_t fr = *free_, to = *total;
	unsigned index = budget_view(device, &fr, &to);
	/* Recorded under NVML's index as the ordinal, as the process-scope
	 * books take it (CUDA_VISIBLE_DEVICES may renumber: the record says
	 * it came through NVML). */
	if (index < GG_MAX_DEVICES)
		gg_dump_note_meminfo_nvml((int)index, fr, to);
	uint64_t held = to - fr;
	if (reserved && *reserved > held)
		*reserved = held;
	*total = to;
	*free_ = fr;
	*used = held - (reserved ? *reserved : 0);
}

/* ---- memory info ------------------------------------------------------- */

/* reserved: the struct's field for what the driver reserves, or NULL. */
#define MEMINFO_HOOK(name, type, reserved)                                                                          \
	GG_VENEER(name, (gg_nvmlDevice_t device, type * memory), (device, memory), 0, 0, rc = real(device, memory); \
	          if (rc == GG_NVML_SUCCESS && memory)                                                              \
	              rewrite(device, &memory->total, &memory->free, &memory->used, reserved);)
MEMINFO_HOOK(nvmlDeviceGetMemoryInfo, gg_nvmlMemory_t, NULL) /* v1's used includes what the driver reserves */
MEMINFO_HOOK(nvmlDeviceGetMemoryInfo_v2, gg_nvmlMemory_v2_t, &memory->reserved) /* the real one checks the version */

/* ---- for the dlsym override -------------------------------------------- */

#define SYM_ROW(n, ...) {#n, (void *)n, SLOT(n)},
GG_VENEER_SYMS(nvml, GG_NVML_HOOKS(SYM_ROW))
