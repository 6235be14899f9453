/* gpuguard: what the test servers (tests/servers/, issue 11) share. Each
 * behaves as one kind of real program behaves towards the driver: how it
 * sizes itself, what it allocates outside what it sized, how it answers
 * CUDA_ERROR_OUT_OF_MEMORY. They run on the simulated GPU under gpuguard
 * (tests/scripts/servers.sh) so the report's advice is tried on the
 * program it was given for: applied, it must reject fewer requests. */
#ifndef SRV_H
#define SRV_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpuguard/cuda_abi.h"

#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)

static inline void srv_init(const char *who)
{
	gg_CUdevice d;
	gg_CUcontext ctx;
	if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx)) {
		fprintf(stderr, "%s: the driver did not start\n", who);
		exit(2);
	}
}

/* A fraction from the environment, as the frameworks read theirs. */
static inline double srv_fraction(const char *name, double dflt)
{
	const char *v = getenv(name);
	double f = v ? strtod(v, NULL) : dflt;
	return f > 0 && f <= 1 ? f : dflt;
}

/* The same traffic on every run: a small LCG. */
static inline unsigned srv_rand(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(*s >> 33);
}

static inline uint64_t srv_round(uint64_t b, uint64_t to)
{
	return b / to * to;
}
#endif
