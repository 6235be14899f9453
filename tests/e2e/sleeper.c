/* gpuguard: a process for tests/scripts/report_e2e.sh: allocates on the
 * simulated GPU (which arms the library's dump machinery), then waits for
 * `gpuguard dump` to signal it. Usage: sleeper MIB SECONDS. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpuguard/cuda_abi.h"

int main(int argc, char **argv)
{
	int mib = argc > 1 ? atoi(argv[1]) : 64, secs = argc > 2 ? atoi(argv[2]) : 5;
	gg_CUdevice d;
	gg_CUcontext ctx;
	gg_CUdeviceptr p;
	if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx)) {
		fprintf(stderr, "sleeper: the simulated driver did not start\n");
		return 2;
	}
	for (int i = 0; i < 4; i++)
		if (cuMemAlloc_v2(&p, (size_t)mib << 20)) {
			fprintf(stderr, "sleeper: allocation failed\n");
			return 2;
		}
	printf("ready\n");
	fflush(stdout);
	struct timespec ts = {0, 100 * 1000 * 1000};
	for (int i = 0; i < secs * 10; i++)
		nanosleep(&ts, NULL);
	return 0;
}
