/* gpuguard on a real GPU: what every tests/gpu program shares. Each program
 * runs under LD_PRELOAD=libgpuguard.so GPUGUARD_LIMIT=4Gi and ends with ONE
 * machine-parsable line that tests/gpu/run.sh turns into its table:
 *
 *   GGRESULT program=<name> ceiling=yes|no|n/a meminfo=yes|no|n/a
 *            refusal=<error name> working=yes|no|n/a result=PASS|FAIL|SKIP
 *
 * Lines before it are GGINFO (facts worth reading) and GGFAIL (one per failed
 * check, with file:line). Exit status 0 = pass. The checks carry on after a
 * failure so one run shows everything that is wrong. */
#ifndef GG_GPU_H
#define GG_GPU_H

#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuguard.h"

#define GG_KIB (1024ull)
#define GG_MIB (1024ull * GG_KIB)
#define GG_GIB (1024ull * GG_MIB)
/* The ceiling run.sh sets (GPUGUARD_LIMIT=4Gi). */
#define GG_CEILING (4ull * GG_GIB)
/* Allocation step: 16 of them fill the ceiling exactly. */
#define GG_CHUNK (256ull * GG_MIB)

/* One verdict per table column. -1 = not measured (n/a), 0 = no, 1 = yes. */
struct gg_verdict {
	const char *program;
	int ceiling;
	int meminfo;
	int working;
	char refusal[64];
	int failures;
};

static struct gg_verdict gg_v = {"?", -1, -1, -1, "none", 0};

static inline void gg_begin(const char *program)
{
	gg_v.program = program;
	setvbuf(stdout, NULL, _IOLBF, 0);
}

static inline void gg_info(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("GGINFO %s: ", gg_v.program);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
}

/* Records a failed check; a column is marked "no" if `col` points at it. */
static inline int gg_check_at(int ok, int *col, const char *file, int line, const char *what)
{
	if (col && *col != 0)
		*col = ok ? 1 : 0;
	if (!ok) {
		gg_v.failures++;
		printf("GGFAIL %s: %s:%d: %s\n", gg_v.program, file, line, what);
	}
	return ok;
}
/* CHECK(cond): a plain check. CHECK_COL(column, cond): one that also sets
 * that table column (ceiling, meminfo, working); once "no", it stays "no". */
#define CHECK(cond) gg_check_at(!!(cond), NULL, __FILE__, __LINE__, #cond)
#define CHECK_COL(col, cond) gg_check_at(!!(cond), &gg_v.col, __FILE__, __LINE__, #cond)

static inline void gg_set_refusal(const char *name)
{
	snprintf(gg_v.refusal, sizeof(gg_v.refusal), "%s", name ? name : "?");
}

static inline const char *gg_yn(int v)
{
	return v < 0 ? "n/a" : v ? "yes" : "no";
}

/* Prints the GGRESULT line and returns the exit status. */
static inline int gg_finish(void)
{
	printf("GGRESULT program=%s ceiling=%s meminfo=%s refusal=%s working=%s result=%s\n", gg_v.program,
	       gg_yn(gg_v.ceiling), gg_yn(gg_v.meminfo), gg_v.refusal, gg_yn(gg_v.working),
	       gg_v.failures ? "FAIL" : "PASS");
	fflush(stdout);
	return gg_v.failures ? 1 : 0;
}

/* Not a verdict on gpuguard (e.g. the driver is older than the toolkit that
 * built this program): a GGRESULT with result=SKIP, exit status 77. */
static inline int gg_skip(const char *reason)
{
	printf("GGRESULT program=%s ceiling=n/a meminfo=n/a refusal=n/a working=n/a result=SKIP reason=%s\n",
	       gg_v.program, reason);
	fflush(stdout);
	return 77;
}

/* The runtime would not start with `err`. A skip only when the installed
 * driver is older than the runtime this was built with (or there is no
 * driver at all): anything else may be gpuguard breaking the start-up
 * (its dlsym/cuGetProcAddress hooks are on that path), so it fails. The
 * driver is asked directly, not through the runtime. */
static inline int gg_startup_failed(const char *err, int runtime_version)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	int (*ver)(int *) = h ? (int (*)(int *))dlsym(h, "cuDriverGetVersion") : NULL;
	int drv = 0;
	if (!h)
		return gg_skip("no-libcuda.so.1");
	if (ver && ver(&drv) == 0 && drv > 0 && drv < runtime_version) {
		char why[128];
		snprintf(why, sizeof(why), "%s:driver-%d-older-than-runtime-%d", err, drv, runtime_version);
		return gg_skip(why);
	}
	gg_v.failures++;
	printf("GGFAIL %s: runtime start-up failed: %s (driver %d, runtime %d)\n", gg_v.program, err, drv,
	       runtime_version);
	return gg_finish();
}

/* ---- the library's books ------------------------------------------------ */

typedef int (*gg_stats_fn)(int, struct gpuguard_device_stats *);

/* gpuguard_device_stats from the preloaded library, or NULL if it is not
 * there (then nothing this program sees is governed: a failure). */
static inline gg_stats_fn gg_resolve_stats(void)
{
	static gg_stats_fn fn;
	if (!fn)
		fn = (gg_stats_fn)dlsym(RTLD_DEFAULT, "gpuguard_device_stats");
	return fn;
}

/* Device `dev`'s books; all zero (and a failed check) if unavailable. */
static inline struct gpuguard_device_stats gg_stats(int dev)
{
	struct gpuguard_device_stats s;
	memset(&s, 0, sizeof(s));
	gg_stats_fn fn = gg_resolve_stats();
	if (!fn || fn(dev, &s) != 0) {
		gg_v.failures++;
		printf("GGFAIL %s: gpuguard_device_stats(%d) unavailable\n", gg_v.program, dev);
	}
	return s;
}

/* Start-up: the library must be preloaded and the ceiling must be 4 GiB.
 * Returns 0 when it is safe to go on (the program stops otherwise: without
 * the library, filling the ceiling would mean filling the card). */
static inline int gg_require_guard(int dev)
{
	if (!gg_resolve_stats()) {
		gg_v.failures++;
		printf("GGFAIL %s: gpuguard_device_stats not found: is libgpuguard.so in LD_PRELOAD?\n",
		       gg_v.program);
		return -1;
	}
	const char *lim = getenv("GPUGUARD_LIMIT");
	struct gpuguard_device_stats s = gg_stats(dev);
	gg_info("GPUGUARD_LIMIT=%s limit=%llu used=%llu", lim ? lim : "(unset)", (unsigned long long)s.limit,
		(unsigned long long)s.used);
	if (!CHECK(s.limit == GG_CEILING)) {
		printf("GGFAIL %s: the effective ceiling is not 4 GiB; run with GPUGUARD_LIMIT=4Gi\n",
		       gg_v.program);
		return -1;
	}
	return 0;
}

/* Whether the code at `fn` lives in libgpuguard.so (so the call is governed). */
static inline int gg_is_ours(const void *fn)
{
	Dl_info info;
	if (!fn || !dladdr(fn, &info) || !info.dli_fname)
		return 0;
	return strstr(info.dli_fname, "libgpuguard") != NULL;
}

/* Shared by the programs: a checked runtime call, and a kernel that
 * touches memory to prove the process still works. */
#define RT_OK(call)                                                                                \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			printf("GGFAIL %s: %s:%d: %s = %s\n", gg_v.program, __FILE__, __LINE__, #call, \
			       cudaGetErrorName(e_));                                              \
			gg_v.failures++;                                                           \
		}                                                                                  \
	} while (0)

__global__ void fill(unsigned *p, size_t n, unsigned v)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		p[i] = v ^ (unsigned)i;
}

/* Starts the runtime (cudaFree(0) creates the primary context) and sets
 * *dev. Returns -1 to go on, else the exit code main should return: a skip
 * without a device or with too old a driver, a failure otherwise. */
static inline int gg_runtime_start(int *dev)
{
	*dev = 0;
	cudaError_t e = cudaFree(0);
	if (e == cudaErrorNoDevice)
		return gg_skip(cudaGetErrorName(e));
	if (e == cudaErrorInsufficientDriver)
		return gg_startup_failed(cudaGetErrorName(e), CUDART_VERSION);
	if (e != cudaSuccess || cudaGetDevice(dev) != cudaSuccess) {
		printf("GGFAIL %s: runtime start-up: %s\n", gg_v.program, cudaGetErrorName(e));
		gg_v.failures++;
		return gg_finish();
	}
	return -1;
}

#endif
