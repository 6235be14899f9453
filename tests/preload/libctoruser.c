/* gpuguard test library: reaches the driver from its constructor, as a
 * framework's static initialiser may. The loader runs this constructor
 * before the preloaded library's (a preload's initialiser runs after those
 * of the libraries the program links), so the hooks must govern a call
 * that comes before gpuguard's own start-up. */
#define _GNU_SOURCE
#include <stddef.h>

#include "gpuguard/cuda_abi.h"

#define MIB (1024ull * 1024ull)

int ctor_setup_rc = -1, ctor_kept_rc = -1, ctor_big_rc = -1;
gg_CUdeviceptr ctor_kept;

__attribute__((constructor)) static void ctor_user(void)
{
	gg_CUdevice d;
	gg_CUcontext ctx;
	ctor_setup_rc = cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx);
	if (ctor_setup_rc)
		return;
	ctor_kept_rc = cuMemAlloc_v2(&ctor_kept, 512 * MIB);
	gg_CUdeviceptr big;
	ctor_big_rc = cuMemAlloc_v2(&big, 2048 * MIB);
	if (ctor_big_rc == GG_CUDA_SUCCESS)
		cuMemFree_v2(big);
}
