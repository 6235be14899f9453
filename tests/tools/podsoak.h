/* gpuguard tests: the stats file of the kill soak (tests/tools/podsoak.c,
 * tests/scripts/soak.sh). One slot per worker process; the worker's shim
 * (podsoak_shim.c), which sits between gpuguard and the simulated driver,
 * keeps `held` equal to the simulated memory the worker holds, never below
 * it. The controller reads the slots only while every worker is stopped
 * (SIGSTOP, waited for), so a sample is one consistent cut. */
#ifndef PODSOAK_H
#define PODSOAK_H

#include <stdatomic.h>
#include <stdint.h>

#define PODSOAK_WORKERS 4
#define PODSOAK_THREADS 4
#define PODSOAK_PAGE (2ull * 1024 * 1024) /* the simulator's page (tests/sim/simcore.h) */

struct podsoak_slot {
	_Atomic uint64_t held;        /* simulated bytes this worker holds, or more (never less) */
	_Atomic uint64_t sim_used;    /* the simulator's own figure, written once parked */
	_Atomic uint64_t allocs;      /* granted cuMemAlloc_v2 calls */
	_Atomic uint64_t refusals;    /* CUDA_ERROR_OUT_OF_MEMORY answers */
	_Atomic uint64_t errors;      /* any other answer: a failure of the soak */
	_Atomic uint64_t shim_misses; /* frees the shim could not size: a failure */
	_Atomic uint32_t parked;      /* 1: threads joined, `held` final, sim_used written */
	uint32_t pad;
	uint64_t pad2;
};

struct podsoak_stats {
	_Atomic uint32_t stop; /* set by the controller: finish, free one, park */
	uint32_t pad[15];
	struct podsoak_slot slot[PODSOAK_WORKERS];
};

#endif
