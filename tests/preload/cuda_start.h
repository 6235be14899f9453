/* gpuguard: the start the CUDA preload programs share: the simulated
 * driver up, device 0's (and device 1's) primary context retained, device
 * 0's current. */
#ifndef GPUGUARD_TEST_PRELOAD_CUDA_START_H
#define GPUGUARD_TEST_PRELOAD_CUDA_START_H

#include <stdio.h>
#include <stdlib.h>

#include "gpuguard/cuda_abi.h"

/* ctx1 NULL: one device is enough. A driver that does not start ends the
 * program (exit 2: no test ran). */
static inline void cuda_start(gg_CUcontext *ctx0, gg_CUcontext *ctx1)
{
	gg_CUdevice d;
	if (cuInit(0) != 0 || cuDeviceGet(&d, 0) != 0 || cuDevicePrimaryCtxRetain(ctx0, d) != 0 ||
	    (ctx1 && (cuDeviceGet(&d, 1) != 0 || cuDevicePrimaryCtxRetain(ctx1, d) != 0)) ||
	    cuCtxSetCurrent(*ctx0) != 0) {
		fprintf(stderr, ctx1 ? "simulated driver did not start with two devices\n"
		                     : "simulated driver did not start\n");
		exit(2);
	}
}

#endif
