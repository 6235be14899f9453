/* gpuguard: helpers for the real-library programs (tests/reallib/, the .cu files). They
 * are built by the toolkit's nvcc against its own libcudart, cuBLAS and NCCL,
 * host code only, and run on the simulated GPU: plainly (the simulator must
 * host the real libraries) and under LD_PRELOAD (the books must hold). */
#ifndef GPUGUARD_TEST_REALLIB_H
#define GPUGUARD_TEST_REALLIB_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "../harness.h"
#include "gpuguard.h"

#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)

/* Every program runs with GPUGUARD_LIMIT=2Gi on an 8Gi simulated card
 * (tests/run.sh sets both). */
#define RL_LIMIT (2 * GIB)
#define RL_CARD (8 * GIB)

typedef int (*rl_stats_fn)(int, struct gpuguard_device_stats *);

/* gpuguard's public API, found at run time: present only under the preload. */
static inline rl_stats_fn rl_stats_api(void)
{
	return (rl_stats_fn)dlsym(RTLD_DEFAULT, "gpuguard_device_stats");
}

static inline int rl_governed(void)
{
	return rl_stats_api() != NULL;
}

/* gpuguard's books for device 0; all zero when not preloaded. */
static inline struct gpuguard_device_stats rl_gg(void)
{
	struct gpuguard_device_stats s;
	memset(&s, 0, sizeof(s));
	rl_stats_fn f = rl_stats_api();
	if (f && f(0, &s) != 0)
		memset(&s, 0xff, sizeof(s));
	return s;
}

/* The runtime category's part of rl_gg().used (gpuguard_device_runtime):
 * what NVML shows for the process beyond the books (on the simulator, the
 * card's own overhead and what a library leaves behind it), plus the
 * headroom held once it shows any. 0 when not preloaded. */
static inline uint64_t rl_runtime(void)
{
	uint64_t v = 0;
	int (*f)(int, uint64_t *) = (int (*)(int, uint64_t *))dlsym(RTLD_DEFAULT, "gpuguard_device_runtime");
	if (!f || f(0, &v) != 0)
		return 0;
	return v;
}

/* gpuguard's books for device 0, without the runtime category (which the
 * reconciles move at moments of their own: GPUGUARD_RUNTIME is on). */
static inline uint64_t rl_books(void)
{
	return rl_gg().used - rl_runtime();
}

/* What the simulated card really holds on device 0 (pages in use x 2 MiB),
 * from the simulator's own introspection; cudart opened libcuda.so.1 with
 * RTLD_LOCAL, so look it up through that handle. UINT64_MAX if unknown. */
static inline uint64_t rl_sim_used(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return UINT64_MAX;
	int (*f)(int, unsigned long long *, unsigned long long *, unsigned long long *) =
	    (int (*)(int, unsigned long long *, unsigned long long *, unsigned long long *))dlsym(
	        h, "simgpu_cuda_debug_used");
	unsigned long long used = UINT64_MAX;
	if (!f || f(0, &used, NULL, NULL) != 0)
		used = UINT64_MAX;
	dlclose(h);
	return used;
}

/* What the card holds that no allocation call shows: the memory of loaded
 * modules (cuBLAS's and NCCL's kernels and globals) and small allocations
 * packed into pages of their own, which GPUGUARD_CONTEXT_RESERVE exists
 * for. Taken at a quiet moment (everything live is charged): card - books. */
static uint64_t rl_overhead;

static inline void rl_note_overhead(uint64_t charged)
{
	uint64_t card = rl_sim_used();
	rl_overhead = card != UINT64_MAX && card > charged ? card - charged : 0;
}

/* Under the preload the simulated card never holds more than the ceiling
 * plus that overhead (on a real card, under make check-gpu, there is no
 * simulator to ask). */
#define CHECK_CEILING_HELD()                                                   \
	do {                                                                   \
		if (rl_governed() && rl_sim_used() != UINT64_MAX)              \
			CHECK(rl_sim_used() <= RL_LIMIT + rl_overhead);        \
	} while (0)

/* The result a governed request past the ceiling gets: the runtime's own
 * out-of-memory code under the preload, success on the bare simulator
 * (8Gi card). Whatever was wrongly granted is given back, so one failure
 * does not cascade into the next test. */
#define CHECK_REFUSED_IF_GOVERNED(expr, ok_value, oom_value, cleanup)                 \
	do {                                                                          \
		int rc_ = (int)(expr);                                                \
		if (rl_governed())                                                    \
			CHECK_EQ_INT(rc_, (oom_value));                               \
		else                                                                  \
			CHECK_EQ_INT(rc_, (ok_value));                                \
		if (rc_ == (int)(ok_value)) {                                         \
			cleanup;                                                      \
		}                                                                     \
	} while (0)

#define CUDA_OK(expr) CHECK_EQ_INT((expr), cudaSuccess)
#define CU_OK(expr) CHECK_EQ_INT((expr), CUDA_SUCCESS)

/* A driver entry point through the runtime, as PyTorch and NCCL reach VMM
 * (cudaGetDriverEntryPointByVersion goes through the driver's
 * cuGetProcAddress_v2). NULL if the driver does not have it. */
static inline void *rl_driver_fn(const char *name, unsigned version)
{
	void *fn = NULL;
	cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
	if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &st) != cudaSuccess ||
	    st != cudaDriverEntryPointSuccess)
		return NULL;
	return fn;
}

#endif
