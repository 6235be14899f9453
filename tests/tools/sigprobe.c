/* gpuguard tests: the signal the library's dump handler listens on, as the
 * library itself decided it. Run under LD_PRELOAD with the simulated GPU:
 * one allocation arms the dump machinery (which installs the handler), then
 * every signal's handler is looked up and the ones inside libgpuguard are
 * printed ("dump-signal N", or "dump-signal none"). tests/scripts/
 * dump_target.sh compares that with the command's parser (tests/tools/
 * signame). */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "gpuguard/cuda_abi.h"

int main(void)
{
	gg_CUdevice d;
	gg_CUcontext ctx;
	gg_CUdeviceptr p;
	if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx) ||
	    cuMemAlloc_v2(&p, 1 << 20)) {
		fprintf(stderr, "sigprobe: the simulated driver did not start\n");
		return 2;
	}
	int found = 0;
	for (int s = 1; s <= SIGRTMAX; s++) {
		if (s == SIGBUS)
			continue; /* the pod region's guard (shared.c), never a dump signal */
		struct sigaction sa;
		if (sigaction(s, NULL, &sa))
			continue;
		void *h = (sa.sa_flags & SA_SIGINFO) ? (void *)sa.sa_sigaction : (void *)sa.sa_handler;
		if (h == (void *)SIG_DFL || h == (void *)SIG_IGN)
			continue;
		Dl_info di;
		if (dladdr(h, &di) && di.dli_fname && strstr(di.dli_fname, "libgpuguard")) {
			printf("dump-signal %d\n", s);
			found = 1;
		}
	}
	if (!found)
		puts("dump-signal none");
	return 0;
}
