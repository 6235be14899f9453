/* gpuguard test plugin: reaches the driver both ways a plugin does, by its
 * own link to libcuda and by dlopen + dlsym, for t_deepbind (loaded with
 * RTLD_DEEPBIND, so neither goes through the preload by symbol binding) and
 * t_own_dlsym_rdyn (a program that defines dlsym). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

#include "gpuguard/cuda_abi.h"

int plugin_setup(void);
int plugin_direct_alloc(gg_CUdeviceptr *p, size_t n);
int plugin_dlsym_alloc(gg_CUdeviceptr *p, size_t n);
int plugin_free(gg_CUdeviceptr p);

int plugin_setup(void)
{
	gg_CUdevice d;
	gg_CUcontext ctx;
	if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx))
		return -1;
	return 0;
}

int plugin_direct_alloc(gg_CUdeviceptr *p, size_t n)
{
	return cuMemAlloc_v2(p, n);
}

int plugin_dlsym_alloc(gg_CUdeviceptr *p, size_t n)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return -1;
	gg_pfn_cuMemAlloc_v2 f = (gg_pfn_cuMemAlloc_v2)dlsym(h, "cuMemAlloc_v2");
	dlclose(h);
	return f ? f(p, n) : -1;
}

int plugin_free(gg_CUdeviceptr p)
{
	return cuMemFree_v2(p);
}
