/* gpuguard on a real GPU: what the driver really holds for runs of small
 * cuMemAlloc_v2 blocks, against the charge rule (include/gpuguard/charge.h;
 * issue 25, item 4). Run WITHOUT the preload (run.sh): the driver's own
 * cuMemGetInfo, before and after each run of one size, gives what the card
 * gave up; the rule's total for the same blocks is set beside it, in a
 * table (GGINFO lines). The rule passes where it charges at least what the
 * card held, less one page (the last page of a run may be partly filled),
 * and no more than twice it plus a page (not wildly over). */
#include <cuda.h>

#include "gg_gpu.h"
#include "gpuguard/charge.h"

#define RUN_BYTES (512ull * GG_MIB) /* requested per run */
#define MAX_BLOCKS 140000

static CUdeviceptr blocks[MAX_BLOCKS];

static int driver_free(size_t *f)
{
	size_t t;
	if (cuMemGetInfo(f, &t) != CUDA_SUCCESS) {
		printf("GGFAIL %s: cuMemGetInfo failed\n", gg_v.program);
		gg_v.failures++;
		return -1;
	}
	return 0;
}

int main(void)
{
	gg_begin("packing");
	CUdevice dev;
	CUcontext ctx;
	if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
	    cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
		return gg_skip("no-cuda-context");
	static const unsigned long long sizes[] = {4 * GG_KIB,   64 * GG_KIB, 600 * GG_KIB,
	                                           700 * GG_KIB, 1 * GG_MIB,  1536 * GG_KIB};
	gg_info("%10s %8s %14s %14s %14s", "block", "count", "requested", "card holds", "charge rule");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		unsigned long long size = sizes[s];
		size_t n = RUN_BYTES / size, got = 0, f0 = 0, f1 = 0;
		if (n > MAX_BLOCKS)
			n = MAX_BLOCKS;
		cuCtxSynchronize();
		if (driver_free(&f0) != 0)
			break;
		while (got < n && cuMemAlloc(&blocks[got], size) == CUDA_SUCCESS)
			got++;
		cuCtxSynchronize();
		driver_free(&f1);
		unsigned long long held = f0 > f1 ? f0 - f1 : 0;
		unsigned long long rule = 0;
		for (size_t i = 0; i < got; i++)
			rule += gpuguard_charge_size(GPUGUARD_API_CU_MEM_ALLOC, size);
		gg_info("%10llu %8zu %14llu %14llu %14llu", size, got, (unsigned long long)got * size, held, rule);
		CHECK_COL(ceiling, got == n);
		CHECK_COL(ceiling, rule + GPUGUARD_PAGE >= held);     /* never short of the card */
		CHECK_COL(ceiling, rule <= 2 * held + GPUGUARD_PAGE); /* nor wildly over it */
		for (size_t i = 0; i < got; i++)
			cuMemFree(blocks[i]);
	}
	return gg_finish();
}
