/* gpuguard: the public face of libgpuguard.so. Most users never include this:
 * they preload the library and set GPUGUARD_LIMIT. Programs that want to read
 * the books (tests, a server's health endpoint) resolve these with dlsym. */
#ifndef GPUGUARD_H
#define GPUGUARD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUGUARD_VERSION "0.1.0"
#define GPUGUARD_MAX_DEVICES 64

/* Which call made an allocation (enum gpuguard_api, GPUGUARD_API_*): one
 * row per call in gpuguard/api.h. Stable numbers: the dump format uses them. */
#include "gpuguard/api.h"

/* Why a request was refused or failed. */
enum gpuguard_refusal {
	GPUGUARD_REFUSED_CEILING = 0, /* did not fit GPUGUARD_LIMIT */
	GPUGUARD_REFUSED_CONFIG = 1,  /* GPUGUARD_LIMIT was invalid: failing closed */
	GPUGUARD_REFUSED_DRIVER = 2,  /* the driver itself returned out-of-memory */
	GPUGUARD_REFUSED_COUNT
};

/* One device's books, as this process sees them. */
struct gpuguard_device_stats {
	uint64_t limit;           /* effective ceiling in bytes; UINT64_MAX = none */
	uint64_t used;            /* bytes charged now (including reservations in flight) */
	uint64_t peak;            /* highest value `used` ever had */
	uint64_t pool_reserved;   /* part of `used` held by stream-ordered pools */
	uint64_t live_bytes;      /* requested bytes of live tracked allocations */
	uint64_t allocs;          /* successful governed allocations */
	uint64_t frees;           /* frees of tracked allocations */
	uint64_t untracked_frees; /* frees of pointers we never saw, passed through */
	uint64_t refused[GPUGUARD_REFUSED_COUNT];
	/* Bytes by which this device went past the ceiling because a
	 * stream-ordered pool (or the graph reserve) grew where no reservation
	 * covered it: a growth from a fragmented warm reserve, counted even
	 * when it is handed back at once (the card held it meanwhile; `peak`
	 * shows it too). A sign to look at, not an error. */
	uint64_t pool_overshoot;
	/* Pod scope (README "Pod scope"): limit, used and peak above are the
	 * pod's, shared by every process of the pod on this device, and
	 * process_used is this process's part of `used`. In process scope
	 * pod is 0 and process_used equals used. */
	uint64_t pod;
	uint64_t process_used;
};

/* Library version string, e.g. "0.1.0". */
const char *gpuguard_version(void);

/* Copies device `dev`'s books into *out. Returns 0, or -1 for a bad ordinal. */
int gpuguard_device_stats(int dev, struct gpuguard_device_stats *out);

/* The runtime category's charge on device `dev` now (bytes): what the driver
 * holds for this process beyond its allocation calls (context, modules,
 * local memory), as last reconciled, plus the headroom held for its growth
 * (GPUGUARD_RUNTIME, docs/sharing.md). It is part of `used` and
 * `process_used` above, so the books alone are process_used less this.
 * Returns 0, or -1 for a bad ordinal. */
int gpuguard_device_runtime(int dev, uint64_t *charged);

/* Number of live records in the allocation table, and how many of them sit in
 * the overflow area because the main table was full. */
int gpuguard_table_stats(uint64_t *live, uint64_t *spilled);

#ifdef __cplusplus
}
#endif

#endif
