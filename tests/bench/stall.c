/* gpuguard benchmark: how long a refused cuMemAlloc_v2 holds its thread
 * (issue 24: the refusing thread waits until the dump writer has its copy of
 * the live table). `live` 512 B allocations are made live, then one request
 * past the ceiling is timed; it must be refused. Prints "live ms". One
 * process per measurement: the first refusal is the one that is dumped. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpuguard/cuda_abi.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: stall LIVE REQUEST_BYTES (run under a ceiling below the request)\n");
		return 2;
	}
	long live = strtol(argv[1], NULL, 10);
	uint64_t req = strtoull(argv[2], NULL, 10);
	gg_CUdevice dev;
	gg_CUcontext ctx;
	if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
		fprintf(stderr, "stall: no device\n");
		return 1;
	}
	for (long i = 0; i < live; i++) {
		gg_CUdeviceptr d;
		if (cuMemAlloc_v2(&d, 512)) {
			fprintf(stderr, "stall: pre-fill allocation %ld failed\n", i);
			return 1;
		}
	}
	gg_CUdeviceptr p;
	double t0 = now_ms();
	gg_CUresult rc = cuMemAlloc_v2(&p, req);
	double t1 = now_ms();
	if (rc != GG_CUDA_ERROR_OUT_OF_MEMORY) {
		fprintf(stderr, "stall: the request was not refused (%d): is the preload on, the ceiling below it?\n",
		        (int)rc);
		return 1;
	}
	printf("%ld %.3f\n", live, t1 - t0);
	return 0;
}
