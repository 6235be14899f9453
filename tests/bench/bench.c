/* gpuguard benchmark: nanoseconds per allocate+free pair through one governed
 * path, with `live` small allocations already live and `threads` threads each
 * doing its own pairs. The same binary runs with and without the preload;
 * tests/bench/run.sh takes the difference. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpuguard.h"
#include "gpuguard/cuda_abi.h"
#include "gpuguard/hip_abi.h"

#define PAIR_SIZE 4096        /* each timed pair allocates 4 KiB */
#define VMM_SIZE (2ull << 20) /* one VMM granule */
#define LIVE_SIZE 512         /* the pre-filled live allocations */
#define WARMUP_PAIRS 10000
#define MAX_THREADS 64

enum path { P_SYMBOL, P_CUDART, P_ASYNC, P_VMM, P_HIP, P_SYNC, P_HIP_ASYNC, P_COUNT };
static const char *const path_names[P_COUNT] = {"cuMemAlloc_v2", "cudart", "async", "vmm", "hip", "sync", "hipasync"};

static gg_CUcontext ctx;
/* The cudart path: pointers from cuGetProcAddress_v2 at 12000, the way
 * cudart gets them (under the preload, our wrappers). */
static gg_pfn_cuMemAlloc_v2 rt_alloc;
static gg_pfn_cuMemFree_v2 rt_free;

static pthread_barrier_t start_line;

struct worker {
	pthread_t th;
	enum path path;
	long pairs;
	double ns_per_pair;
};

static void check_cu(gg_CUresult rc, const char *what)
{
	if (rc != GG_CUDA_SUCCESS) {
		fprintf(stderr, "bench: %s failed: %d\n", what, rc);
		exit(1);
	}
}

static void check_hip(gg_hipError_t rc, const char *what)
{
	if (rc != GG_hipSuccess) {
		fprintf(stderr, "bench: %s failed: %d\n", what, rc);
		exit(1);
	}
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static const gg_CUmemAllocationProp vmm_prop = {
    .type = GG_CU_MEM_ALLOCATION_TYPE_PINNED,
    .location = {.type = GG_CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
};

/* One pair through the path; every call is checked, so a refusal or a
 * broken path cannot pass for a fast one. */
static inline void pair(enum path p)
{
	switch (p) {
	case P_SYMBOL: {
		gg_CUdeviceptr d;
		check_cu(cuMemAlloc_v2(&d, PAIR_SIZE), "cuMemAlloc_v2");
		check_cu(cuMemFree_v2(d), "cuMemFree_v2");
		break;
	}
	case P_CUDART: {
		gg_CUdeviceptr d;
		check_cu(rt_alloc(&d, PAIR_SIZE), "cuMemAlloc (cuGetProcAddress)");
		check_cu(rt_free(d), "cuMemFree (cuGetProcAddress)");
		break;
	}
	case P_ASYNC: {
		gg_CUdeviceptr d;
		check_cu(cuMemAllocAsync(&d, PAIR_SIZE, NULL), "cuMemAllocAsync");
		check_cu(cuMemFreeAsync(d, NULL), "cuMemFreeAsync");
		break;
	}
	case P_VMM: {
		gg_CUmemGenericAllocationHandle h;
		check_cu(cuMemCreate(&h, VMM_SIZE, &vmm_prop, 0), "cuMemCreate");
		check_cu(cuMemRelease(h), "cuMemRelease");
		break;
	}
	case P_HIP: {
		void *d;
		check_hip(hipMalloc(&d, PAIR_SIZE), "hipMalloc");
		check_hip(hipFree(d), "hipFree");
		break;
	}
	case P_HIP_ASYNC: {
		void *d;
		check_hip(hipMallocAsync(&d, PAIR_SIZE, NULL), "hipMallocAsync");
		check_hip(hipFreeAsync(d, NULL), "hipFreeAsync");
		break;
	}
	case P_SYNC:
		/* a synchronisation point: one cuStreamSynchronize per "pair" (the
		 * sync hook's cost; with BENCH_NO_POOL=1 no pool is ever charged) */
		check_cu(cuStreamSynchronize(NULL), "cuStreamSynchronize");
		break;
	default:
		abort();
	}
}

static void *worker_loop(struct worker *w);
/* HIP's default pool, warmed once, by the first worker of the hipasync
 * path (hip_pool_warm, after setup). */
static void hip_pool_warm(void);
static pthread_once_t hip_pool_once = PTHREAD_ONCE_INIT;

/* BENCH_KEEP=N: after its timed pairs, each worker allocates N more blocks
 * through its path's allocation call and keeps them, so that they are live
 * in an exit dump beside the pre-fill (tests/bench/count.sh checks that
 * the dump puts a stack to the live bytes of this mix). */
static void keep_blocks(enum path p, long n)
{
	for (long i = 0; i < n; i++) {
		gg_CUdeviceptr d;
		void *h;
		switch (p) {
		case P_SYMBOL:
			check_cu(cuMemAlloc_v2(&d, PAIR_SIZE), "cuMemAlloc_v2 (kept)");
			break;
		case P_CUDART:
			check_cu(rt_alloc(&d, PAIR_SIZE), "cuMemAlloc (kept)");
			break;
		case P_ASYNC:
			check_cu(cuMemAllocAsync(&d, PAIR_SIZE, NULL), "cuMemAllocAsync (kept)");
			break;
		case P_HIP:
			check_hip(hipMalloc(&h, PAIR_SIZE), "hipMalloc (kept)");
			break;
		case P_HIP_ASYNC:
			check_hip(hipMallocAsync(&h, PAIR_SIZE, NULL), "hipMallocAsync (kept)");
			break;
		default:
			return;
		}
	}
}

/* BENCH_FRAMES=N runs the loop N calls deep, so stack capture
 * (GPUGUARD_STACK_DEPTH) walks as deep as in a framework. */
__attribute__((noinline)) static void *deep(struct worker *w, int n)
{
	void *r = n > 0 ? deep(w, n - 1) : worker_loop(w);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
	return r;
}

static void *worker_main(void *arg)
{
	const char *f = getenv("BENCH_FRAMES");
	return deep(arg, f ? atoi(f) : 0);
}

/* The measured pairs, in a function of their own: tests/bench/count.sh
 * counts instructions with callgrind --toggle-collect=timed_pairs, so the
 * set-up, the pre-fill and the warm-up are left out of the count. */
__attribute__((noinline)) void timed_pairs(enum path p, long pairs);
__attribute__((noinline)) void timed_pairs(enum path p, long pairs)
{
	for (long i = 0; i < pairs; i++)
		pair(p);
}

static void *worker_loop(struct worker *w)
{
	check_cu(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	check_hip(hipSetDevice(0), "hipSetDevice");
	if (w->path == P_HIP_ASYNC)
		pthread_once(&hip_pool_once, hip_pool_warm);
	for (int i = 0; i < WARMUP_PAIRS; i++)
		pair(w->path);
	pthread_barrier_wait(&start_line);
	double t0 = now_ns();
	timed_pairs(w->path, w->pairs);
	w->ns_per_pair = (now_ns() - t0) / (double)w->pairs;
	const char *keep = getenv("BENCH_KEEP");
	if (keep)
		keep_blocks(w->path, atol(keep));
	return NULL;
}

static double run(enum path p, int threads, long pairs)
{
	struct worker w[MAX_THREADS];
	pthread_barrier_init(&start_line, NULL, (unsigned)threads);
	for (int i = 0; i < threads; i++) {
		w[i].path = p;
		w[i].pairs = pairs;
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0) {
			fprintf(stderr, "bench: pthread_create failed\n");
			exit(1);
		}
	}
	double sum = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(w[i].th, NULL);
		sum += w[i].ns_per_pair;
	}
	pthread_barrier_destroy(&start_line);
	return sum / threads;
}

static void setup(void)
{
	gg_CUdevice dev;
	check_cu(cuInit(0), "cuInit");
	check_cu(cuDeviceGet(&dev, 0), "cuDeviceGet");
	check_cu(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	check_cu(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	check_hip(hipInit(0), "hipInit");
	check_hip(hipSetDevice(0), "hipSetDevice");

	/* cudart's route (DESIGN.md §1): dlopen, one dlsym, then cuGetProcAddress. */
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	gg_pfn_cuGetProcAddress_v2 first = h ? (gg_pfn_cuGetProcAddress_v2)dlsym(h, "cuGetProcAddress_v2") : NULL;
	gg_pfn_cuGetProcAddress_v2 gpa = NULL;
	gg_CUdriverProcAddressQueryResult st;
	if (!first) {
		fprintf(stderr, "bench: no cuGetProcAddress_v2 in libcuda.so.1\n");
		exit(1);
	}
	check_cu(first("cuGetProcAddress", (void **)&gpa, 12000, 0, &st), "cuGetProcAddress(cuGetProcAddress)");
	check_cu(gpa("cuMemAlloc", (void **)&rt_alloc, 12000, 0, &st), "cuGetProcAddress(cuMemAlloc)");
	check_cu(gpa("cuMemFree", (void **)&rt_free, 12000, 0, &st), "cuGetProcAddress(cuMemFree)");

	/* A warm default pool: it keeps its reserve across frees and syncs, so
	 * the async pairs are served from it (what PyTorch's cudaMallocAsync
	 * backend sets up). */
	if (getenv("BENCH_NO_POOL"))
		return;
	gg_CUmemoryPool pool;
	check_cu(cuDeviceGetDefaultMemPool(&pool, dev), "cuDeviceGetDefaultMemPool");
	gg_cuuint64_t keep = UINT64_MAX;
	check_cu(cuMemPoolSetAttribute(pool, GG_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep), "cuMemPoolSetAttribute");
	gg_CUdeviceptr warm;
	check_cu(cuMemAllocAsync(&warm, 64ull << 20, NULL), "cuMemAllocAsync (warm-up)");
	check_cu(cuMemFreeAsync(warm, NULL), "cuMemFreeAsync (warm-up)");
	check_cu(cuStreamSynchronize(NULL), "cuStreamSynchronize");
}

/* HIP's default pool made warm alike, by the first hipasync worker, before
 * its warm-up pairs: the other paths' runs hold no HIP pool. */
static void hip_pool_warm(void)
{
	if (getenv("BENCH_NO_POOL"))
		return;
	gg_hipMemPool_t hpool;
	uint64_t keep = UINT64_MAX;
	check_hip(hipDeviceGetDefaultMemPool(&hpool, 0), "hipDeviceGetDefaultMemPool");
	check_hip(hipMemPoolSetAttribute(hpool, GG_hipMemPoolAttrReleaseThreshold, &keep), "hipMemPoolSetAttribute");
	void *hwarm;
	check_hip(hipMallocAsync(&hwarm, 64ull << 20, NULL), "hipMallocAsync (warm-up)");
	check_hip(hipFreeAsync(hwarm, NULL), "hipFreeAsync (warm-up)");
	check_hip(hipStreamSynchronize(NULL), "hipStreamSynchronize");
}

static void prefill(long live)
{
	for (long i = 0; i < live; i++) {
		gg_CUdeviceptr d;
		check_cu(cuMemAlloc_v2(&d, LIVE_SIZE), "cuMemAlloc_v2 (pre-fill)");
	}
}

/* "preloaded" or "plain", so run.sh can tell a preload that silently did
 * nothing from one that worked; a refusal would distort the timing, so it
 * is an error here (run with a ceiling that never refuses). */
static const char *preload_state(void)
{
	int (*stats)(int, struct gpuguard_device_stats *) =
	    (int (*)(int, struct gpuguard_device_stats *))dlsym(RTLD_DEFAULT, "gpuguard_device_stats");
	struct gpuguard_device_stats s;
	if (!stats || stats(0, &s) != 0)
		return "plain";
	if (s.allocs == 0) {
		fprintf(stderr, "bench: gpuguard is loaded but counted no allocation\n");
		exit(1);
	}
	for (int i = 0; i < GPUGUARD_REFUSED_COUNT; i++)
		if (s.refused[i]) {
			fprintf(stderr, "bench: gpuguard refused %llu requests (reason %d); raise GPUGUARD_LIMIT\n",
			        (unsigned long long)s.refused[i], i);
			exit(1);
		}
	return "preloaded";
}

static int parse_path(const char *s)
{
	for (int i = 0; i < P_COUNT; i++)
		if (strcmp(s, path_names[i]) == 0)
			return i;
	return -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench PATH[,PATH...] LIVE THREADS[,THREADS...] PAIRS\n"
	                "  PATH: cuMemAlloc_v2 | cudart | async | vmm | hip | sync | hipasync | all\n"
	                "  prints one line per (path, threads): path live threads ns_per_pair plain|preloaded\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc != 5)
		usage();
	int paths[P_COUNT], npaths = 0;
	char *spec = strdup(argv[1]);
	for (char *save, *tok = strtok_r(spec, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (strcmp(tok, "all") == 0) {
			for (int i = 0; i < P_COUNT && npaths < P_COUNT; i++)
				paths[npaths++] = i;
			continue;
		}
		int p = parse_path(tok);
		if (p < 0 || npaths == P_COUNT)
			usage();
		paths[npaths++] = p;
	}
	long live = strtol(argv[2], NULL, 10);
	int threads[16], nthreads = 0;
	char *tspec = strdup(argv[3]);
	for (char *save, *tok = strtok_r(tspec, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int t = atoi(tok);
		if (t < 1 || t > MAX_THREADS || nthreads == 16)
			usage();
		threads[nthreads++] = t;
	}
	long pairs = strtol(argv[4], NULL, 10);
	if (npaths == 0 || nthreads == 0 || live < 0 || pairs < 1)
		usage();

	setup();
	prefill(live);
	for (int i = 0; i < npaths; i++)
		for (int j = 0; j < nthreads; j++) {
			double ns = run((enum path)paths[i], threads[j], pairs);
			printf("%s %ld %d %.1f %s\n", path_names[paths[i]], live, threads[j], ns, preload_state());
			fflush(stdout);
		}
	free(spec);
	free(tspec);
	return 0;
}
