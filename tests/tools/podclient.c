/* gpuguard tests: a pod member driven line by line from stdin, for the
 * scripts that change the pod region under a running process (tests/
 * scripts/region_fault.sh). Run under LD_PRELOAD with the simulated GPU.
 *   a MIB   cuMemAlloc_v2 of MIB MiB: prints "alloc ok" or "alloc refused N"
 *   f       frees the most recent live allocation: "free ok" or "free N"
 *   h KIB   cuMemHostAlloc (pinned host memory) of KIB KiB: "host ok" or
 *           "host failed N"; H frees the most recent: "host free ok"
 *   i       cuMemGetInfo: "info FREE TOTAL" in bytes
 *   n       NVML's nvmlDeviceGetMemoryInfo for index 0: "nvml FREE TOTAL"
 *   N UUID  the same for the device NVML finds by UUID ("GPU-…" or
 *           "MIG-…"), v2 and v1: "nvmlu FREE TOTAL FREE1 TOTAL1"
 *   M K     the UUID of GPU 0's MIG instance K: "mig UUID" or "mig failed N"
 *   F MIB   cuMemAlloc_v2 of MIB MiB until one fails, all kept:
 *           "filled BYTES err CODE"
 *   l PATH  dlopen(PATH, RTLD_NOW | RTLD_LOCAL), as a plugin: "load ok" or
 *           "load failed"; g PATH: the same with RTLD_GLOBAL
 *   u       dlclose of the last one loaded: "unload ok"
 *   q       exits 0
 * Prints "ready" once the context is current. Every line is flushed.
 * With --nvml it makes no context (a monitoring agent, NVML only). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuguard/cuda_abi.h"
#include "gpuguard/nvml_abi.h"

/* NVML as a monitoring agent reaches it: dlopen and dlsym. */
static void nvml_info(void)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	gg_nvmlReturn_t (*init)(void) = h ? (gg_nvmlReturn_t(*)(void))dlsym(h, "nvmlInit_v2") : NULL;
	gg_nvmlReturn_t (*get)(unsigned, gg_nvmlDevice_t *) =
	    h ? (gg_nvmlReturn_t(*)(unsigned, gg_nvmlDevice_t *))dlsym(h, "nvmlDeviceGetHandleByIndex_v2") : NULL;
	gg_nvmlReturn_t (*mem)(gg_nvmlDevice_t, gg_nvmlMemory_t *) =
	    h ? (gg_nvmlReturn_t(*)(gg_nvmlDevice_t, gg_nvmlMemory_t *))dlsym(h, "nvmlDeviceGetMemoryInfo") : NULL;
	gg_nvmlDevice_t dev;
	gg_nvmlMemory_t m;
	if (!init || !get || !mem || init() || get(0, &dev) || mem(dev, &m))
		puts("nvml failed");
	else
		printf("nvml %llu %llu\n", m.free, m.total);
}

/* NVML's function name in libnvidia-ml.so.1, found as a monitoring agent
 * would (dlsym). */
static void *nvml_sym(const char *name)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	gg_nvmlReturn_t (*init)(void) = h ? (gg_nvmlReturn_t(*)(void))dlsym(h, "nvmlInit_v2") : NULL;
	return init && init() == GG_NVML_SUCCESS ? dlsym(h, name) : NULL;
}

/* The device NVML finds by UUID: its memory, v2 then v1. */
static void nvml_by_uuid(const char *uuid)
{
	gg_pfn_nvmlDeviceGetHandleByUUID by = (gg_pfn_nvmlDeviceGetHandleByUUID)nvml_sym("nvmlDeviceGetHandleByUUID");
	gg_pfn_nvmlDeviceGetMemoryInfo_v2 mem2 =
	    (gg_pfn_nvmlDeviceGetMemoryInfo_v2)nvml_sym("nvmlDeviceGetMemoryInfo_v2");
	gg_pfn_nvmlDeviceGetMemoryInfo mem1 = (gg_pfn_nvmlDeviceGetMemoryInfo)nvml_sym("nvmlDeviceGetMemoryInfo");
	gg_nvmlDevice_t dev;
	gg_nvmlMemory_v2_t m2 = {.version = GG_nvmlMemory_v2};
	gg_nvmlMemory_t m1;
	int rc = !by || !mem2 || !mem1 ? -1 : by(uuid, &dev);
	if (!rc)
		rc = mem2(dev, &m2);
	if (!rc)
		rc = mem1(dev, &m1);
	if (rc)
		printf("nvmlu failed %d\n", rc);
	else
		printf("nvmlu %llu %llu %llu %llu\n", m2.free, m2.total, m1.free, m1.total);
}

static void mig_uuid(unsigned k)
{
	gg_pfn_nvmlDeviceGetHandleByIndex_v2 get =
	    (gg_pfn_nvmlDeviceGetHandleByIndex_v2)nvml_sym("nvmlDeviceGetHandleByIndex_v2");
	gg_pfn_nvmlDeviceGetMigDeviceHandleByIndex mig =
	    (gg_pfn_nvmlDeviceGetMigDeviceHandleByIndex)nvml_sym("nvmlDeviceGetMigDeviceHandleByIndex");
	gg_pfn_nvmlDeviceGetUUID name = (gg_pfn_nvmlDeviceGetUUID)nvml_sym("nvmlDeviceGetUUID");
	gg_nvmlDevice_t gpu, inst;
	char u[GG_NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	int rc = !get || !mig || !name ? -1 : get(0, &gpu);
	if (!rc)
		rc = mig(gpu, k, &inst);
	if (!rc)
		rc = name(inst, u, sizeof u);
	if (rc)
		printf("mig failed %d\n", rc);
	else
		printf("mig %s\n", u);
}

int main(int argc, char **argv)
{
	gg_CUdevice d;
	gg_CUcontext ctx;
	int nvml_only = argc > 1 && !strcmp(argv[1], "--nvml");
	if (!nvml_only &&
	    (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx))) {
		fprintf(stderr, "podclient: the simulated driver did not start\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	puts("ready");
	static gg_CUdeviceptr live[4096];
	unsigned n = 0;
	static void *host[256];
	unsigned nhost = 0;
	void *plugin = NULL;
	char line[4096];
	while (fgets(line, sizeof line, stdin)) {
		if (line[0] == 'a') {
			unsigned long mib = strtoul(line + 1, NULL, 10);
			gg_CUdeviceptr p;
			int rc = cuMemAlloc_v2(&p, (size_t)mib << 20);
			if (rc == 0 && n < sizeof live / sizeof live[0])
				live[n++] = p;
			if (rc == 0)
				puts("alloc ok");
			else
				printf("alloc refused %d\n", rc);
		} else if (line[0] == 'f') {
			int rc = n ? cuMemFree_v2(live[--n]) : -1;
			if (rc == 0)
				puts("free ok");
			else
				printf("free %d\n", rc);
		} else if (line[0] == 'h') {
			void *p = NULL;
			int rc = nhost < sizeof host / sizeof host[0]
			             ? cuMemHostAlloc(&p, (size_t)strtoul(line + 1, NULL, 10) << 10, 0)
			             : -1;
			if (rc == 0)
				host[nhost++] = p;
			if (rc == 0)
				puts("host ok");
			else
				printf("host failed %d\n", rc);
		} else if (line[0] == 'H') {
			int rc = nhost ? cuMemFreeHost(host[--nhost]) : -1;
			if (rc == 0)
				puts("host free ok");
			else
				printf("host free %d\n", rc);
		} else if (line[0] == 'i') {
			size_t fr = 0, tot = 0;
			int rc = cuMemGetInfo_v2(&fr, &tot);
			if (rc == 0)
				printf("info %zu %zu\n", fr, tot);
			else
				printf("info failed %d\n", rc);
		} else if (line[0] == 'n') {
			nvml_info();
		} else if (line[0] == 'N') {
			char *u = line + 1;
			while (*u == ' ')
				u++;
			u[strcspn(u, "\n")] = 0;
			nvml_by_uuid(u);
		} else if (line[0] == 'M') {
			mig_uuid((unsigned)strtoul(line + 1, NULL, 10));
		} else if (line[0] == 'F') {
			size_t step = (size_t)strtoul(line + 1, NULL, 10) << 20, got = 0;
			gg_CUdeviceptr p;
			int rc = step ? 0 : 1;
			while (!rc && n < sizeof live / sizeof live[0] && !(rc = cuMemAlloc_v2(&p, step))) {
				live[n++] = p;
				got += step;
			}
			printf("filled %zu err %d\n", got, rc);
		} else if (line[0] == 'l' || line[0] == 'g') {
			char *path = line + 1;
			while (*path == ' ')
				path++;
			path[strcspn(path, "\n")] = 0;
			plugin = dlopen(path, RTLD_NOW | (line[0] == 'g' ? RTLD_GLOBAL : RTLD_LOCAL));
			puts(plugin ? "load ok" : "load failed");
		} else if (line[0] == 'u') {
			puts(plugin && dlclose(plugin) == 0 ? "unload ok" : "unload failed");
			plugin = NULL;
		} else if (line[0] == 'q') {
			return 0;
		}
	}
	return 0;
}
