/* gpuguard example: a toy inference server. It reaches the driver the way
 * cudart does (dlopen + cuGetProcAddress_v2, never a symbol), sizes its KV
 * cache from cuMemGetInfo the way vLLM does, and answers
 * CUDA_ERROR_OUT_OF_MEMORY the way PyTorch does: empty the cache, retry once,
 * then give up on that one request and keep serving. No GPU needed: run it
 * on the simulated driver (examples/demo.sh).
 *
 * For the demo's pod of two servers: KVCACHE_BARRIER=DIR makes it write
 * DIR/ready.PID once its weights are loaded and wait (at most 30 s) for
 * DIR/go before sizing its cache, so both start serving together;
 * KVCACHE_STEP_US paces its steps so the two overlap; KVCACHE_UTIL is its
 * gpu_memory_utilization (default 0.9). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuguard.h"
#include "gpuguard/cuda_abi.h"

#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)

/* The model and the traffic. Sizes are absolute, as a real model's are: the
 * same server fits a 16 GiB card with room to spare and a 4 GiB one tightly. */
#define WEIGHT_SHARDS 6
#define WEIGHT_SHARD (256 * MIB) /* 1.5 GiB of weights */
#define BLOCK (2 * MIB)          /* one KV-cache block (a GPU page) */
#define WS_PER_SEQ (4 * MIB)     /* per-step scratch (activations) per sequence */
#define GPU_UTIL 0.9             /* vLLM's gpu_memory_utilization */
#define NREQ 400
#define MAX_BATCH 64
#define MAX_BLOCKS 96 /* prompt + generated, in blocks */
#define MAX_STEPS 5000
#define PROGRESS_EVERY 80 /* steps between progress lines */
#define SHOW_RETRIES 3    /* OOM-then-retry events printed */
#define SHOW_REJECTS 4    /* rejections printed */

/* The driver, as cudart holds it: pointers from cuGetProcAddress. */
static struct {
	gg_pfn_cuInit init;
	gg_pfn_cuDriverGetVersion driver_version;
	gg_pfn_cuDeviceGet device_get;
	gg_pfn_cuDeviceGetName device_name;
	gg_pfn_cuDevicePrimaryCtxRetain ctx_retain;
	gg_pfn_cuDevicePrimaryCtxRelease_v2 ctx_release;
	gg_pfn_cuCtxSetCurrent ctx_set;
	gg_pfn_cuMemGetInfo_v2 mem_info;
	gg_pfn_cuMemAlloc_v2 alloc;
	gg_pfn_cuMemFree_v2 free;
	gg_pfn_cuMemAllocAsync alloc_async;
	gg_pfn_cuMemFreeAsync free_async;
	gg_pfn_cuStreamCreate stream_create;
	gg_pfn_cuStreamSynchronize stream_sync;
	gg_pfn_cuStreamDestroy_v2 stream_destroy;
	gg_pfn_cuGetErrorName error_name;
} cu;

struct request {
	int id;
	int prompt, gen; /* blocks: prompt filled at admission, gen grown one a step */
	int produced;
	int nblocks;
	gg_CUdeviceptr blocks[MAX_BLOCKS];
};

static struct {
	gg_CUstream stream;
	uint64_t total;                          /* as cuMemGetInfo reports it */
	uint64_t peak_used;                      /* highest total - free seen */
	int budget_blocks;                       /* KV blocks the server allows itself */
	int in_use;                              /* blocks held by running requests */
	gg_CUdeviceptr cache[NREQ * MAX_BLOCKS]; /* freed blocks kept for reuse */
	int ncache;
	struct request *running[MAX_BATCH];
	gg_CUdeviceptr scratch[MAX_BATCH];
	int nrunning;
	int served, rejected, retries, retries_failed;
	int step;
} srv;

static const char *err_name(gg_CUresult rc)
{
	const char *s = NULL;
	if (cu.error_name && cu.error_name(rc, &s) == GG_CUDA_SUCCESS && s)
		return s;
	return "CUDA error";
}

static const char *gib(char *buf, size_t n, uint64_t bytes)
{
	if (bytes >= GIB)
		snprintf(buf, n, "%.2f GiB", (double)bytes / (double)GIB);
	else
		snprintf(buf, n, "%llu MiB", (unsigned long long)(bytes / MIB));
	return buf;
}
#define GIB_STR(b) gib((char[32]){0}, 32, (b))

static void die(const char *what, gg_CUresult rc)
{
	fprintf(stderr, "kvcache: %s failed: %s (%d)\n", what, err_name(rc), rc);
	exit(1);
}

/* cudart's way in: one dlsym, then everything through cuGetProcAddress. */
static void load_driver(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "kvcache: cannot open libcuda.so.1: %s\n", dlerror());
		exit(1);
	}
	gg_pfn_cuGetProcAddress_v2 first = (gg_pfn_cuGetProcAddress_v2)dlsym(h, "cuGetProcAddress_v2");
	if (!first) {
		fprintf(stderr, "kvcache: libcuda.so.1 has no cuGetProcAddress_v2\n");
		exit(1);
	}
	void *p = NULL;
	gg_CUdriverProcAddressQueryResult st;
	first("", &p, 0, 0, &st); /* cudart's probe; NOT_FOUND is the expected answer */
	gg_pfn_cuGetProcAddress_v2 gpa = NULL;
	if (first("cuGetProcAddress", (void **)&gpa, 12000, 0, &st) != GG_CUDA_SUCCESS || !gpa) {
		fprintf(stderr, "kvcache: cuGetProcAddress at 12000 not found\n");
		exit(1);
	}
#define GET(field, name)                                                        \
	do {                                                                    \
		gg_CUresult rc_ = gpa(name, (void **)&cu.field, 12000, 0, &st); \
		if (rc_ != GG_CUDA_SUCCESS || !cu.field)                        \
			die("cuGetProcAddress(\"" name "\")", rc_);             \
	} while (0)
	GET(error_name, "cuGetErrorName");
	GET(init, "cuInit");
	GET(driver_version, "cuDriverGetVersion");
	GET(device_get, "cuDeviceGet");
	GET(device_name, "cuDeviceGetName");
	GET(ctx_retain, "cuDevicePrimaryCtxRetain");
	GET(ctx_release, "cuDevicePrimaryCtxRelease");
	GET(ctx_set, "cuCtxSetCurrent");
	GET(mem_info, "cuMemGetInfo");
	GET(alloc, "cuMemAlloc");
	GET(free, "cuMemFree");
	GET(alloc_async, "cuMemAllocAsync");
	GET(free_async, "cuMemFreeAsync");
	GET(stream_create, "cuStreamCreate");
	GET(stream_sync, "cuStreamSynchronize");
	GET(stream_destroy, "cuStreamDestroy");
#undef GET
}

static void mem_info(uint64_t *free_out, uint64_t *total_out)
{
	size_t f = 0, t = 0;
	gg_CUresult rc = cu.mem_info(&f, &t);
	if (rc != GG_CUDA_SUCCESS)
		die("cuMemGetInfo", rc);
	if (free_out)
		*free_out = f;
	if (total_out)
		*total_out = t;
}

static void sample_usage(void)
{
	uint64_t f, t;
	mem_info(&f, &t);
	if (t > f && t - f > srv.peak_used)
		srv.peak_used = t - f;
}

/* torch.cuda.empty_cache(): hand every cached block back to the driver. */
static int empty_cache(void)
{
	int n = srv.ncache;
	while (srv.ncache > 0) {
		gg_CUresult rc = cu.free(srv.cache[--srv.ncache]);
		if (rc != GG_CUDA_SUCCESS)
			die("cuMemFree", rc);
	}
	return n;
}

/* What the PyTorch caching allocator does on out-of-memory: free the cache
 * and try once more. Only CUDA_ERROR_OUT_OF_MEMORY earns the retry; any
 * other code is a real error. */
static void report_retry(const char *call, uint64_t size, int freed, gg_CUresult rc)
{
	srv.retries++;
	if (rc != GG_CUDA_SUCCESS)
		srv.retries_failed++;
	if (srv.retries <= SHOW_RETRIES)
		printf("step %4d: %s(%s): %s; freed %d cached blocks, retried: %s\n", srv.step, call, GIB_STR(size),
		       err_name(GG_CUDA_ERROR_OUT_OF_MEMORY), freed, rc == GG_CUDA_SUCCESS ? "ok" : "failed again");
}

/* Not static: built with -rdynamic, so the dump's stacks name them. */
gg_CUresult alloc_retry(gg_CUdeviceptr *p, uint64_t size);
gg_CUresult alloc_async_retry(gg_CUdeviceptr *p, uint64_t size);
gg_CUresult grow(struct request *r, int n);
/* KVCACHE_BARRIER: say we are ready, wait for the go (demo.sh). */
static void barrier(void)
{
	const char *dir = getenv("KVCACHE_BARRIER");
	if (!dir || !*dir)
		return;
	char path[4096];
	snprintf(path, sizeof path, "%s/ready.%d", dir, (int)getpid());
	FILE *f = fopen(path, "w");
	if (f)
		fclose(f);
	snprintf(path, sizeof path, "%s/go", dir);
	struct stat st;
	for (int i = 0; i < 3000 && stat(path, &st) != 0; i++)
		nanosleep(&(struct timespec){0, 10000000}, NULL);
}

static void pace(void)
{
	static long us = -1;
	if (us < 0) {
		const char *v = getenv("KVCACHE_STEP_US");
		us = v ? atol(v) : 0;
		if (us < 0 || us > 100000)
			us = 0;
	}
	if (us)
		nanosleep(&(struct timespec){0, us * 1000}, NULL);
}

void serve(struct request *reqs);

gg_CUresult alloc_retry(gg_CUdeviceptr *p, uint64_t size)
{
	gg_CUresult rc = cu.alloc(p, size);
	if (rc == GG_CUDA_ERROR_OUT_OF_MEMORY) {
		int freed = empty_cache();
		rc = cu.alloc(p, size);
		report_retry("cuMemAlloc", size, freed, rc);
	}
	if (rc != GG_CUDA_SUCCESS && rc != GG_CUDA_ERROR_OUT_OF_MEMORY)
		die("cuMemAlloc", rc);
	return rc;
}

gg_CUresult alloc_async_retry(gg_CUdeviceptr *p, uint64_t size)
{
	gg_CUresult rc = cu.alloc_async(p, size, srv.stream);
	if (rc == GG_CUDA_ERROR_OUT_OF_MEMORY) {
		int freed = empty_cache();
		rc = cu.alloc_async(p, size, srv.stream);
		report_retry("cuMemAllocAsync", size, freed, rc);
	}
	if (rc != GG_CUDA_SUCCESS && rc != GG_CUDA_ERROR_OUT_OF_MEMORY)
		die("cuMemAllocAsync", rc);
	return rc;
}

/* Gives r n more KV blocks, cached ones first. */
gg_CUresult grow(struct request *r, int n)
{
	for (int i = 0; i < n; i++) {
		gg_CUdeviceptr b;
		if (srv.ncache > 0) {
			b = srv.cache[--srv.ncache];
		} else {
			gg_CUresult rc = alloc_retry(&b, BLOCK);
			if (rc != GG_CUDA_SUCCESS)
				return rc;
		}
		r->blocks[r->nblocks++] = b;
		srv.in_use++;
	}
	return GG_CUDA_SUCCESS;
}

/* A finished or abandoned request's blocks stay cached for the next one. */
static void release(struct request *r)
{
	while (r->nblocks > 0) {
		srv.cache[srv.ncache++] = r->blocks[--r->nblocks];
		srv.in_use--;
	}
}

static void reject(struct request *r, gg_CUresult rc)
{
	release(r);
	srv.rejected++;
	if (srv.rejected <= SHOW_REJECTS)
		printf("step %4d: request %d rejected: out of memory (%s), server keeps serving\n", srv.step, r->id,
		       err_name(rc));
	else if (srv.rejected == SHOW_REJECTS + 1)
		printf("step %4d: (further rejections counted, not shown)\n", srv.step);
}

static void drop_running(int i)
{
	srv.running[i] = srv.running[--srv.nrunning];
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static int rand_between(int lo, int hi)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return lo + (int)(rng % (uint64_t)(hi - lo + 1));
}

static void progress(int next)
{
	uint64_t f, t;
	mem_info(&f, &t);
	printf("step %4d: running %2d, waiting %3d, served %3d, rejected %2d, KV blocks %4d (+%d cached), "
	       "device used %s of %s\n",
	       srv.step, srv.nrunning, NREQ - next, srv.served, srv.rejected, srv.in_use, srv.ncache,
	       GIB_STR(t > f ? t - f : 0), GIB_STR(t));
}

void serve(struct request *reqs)
{
	int next = 0;
	for (srv.step = 1; srv.served + srv.rejected < NREQ && srv.step <= MAX_STEPS; srv.step++) {
		pace();
		/* Load ramps up: more concurrent sequences as the run goes on. */
		int cap = 4 + srv.step / 2;
		if (cap > MAX_BATCH)
			cap = MAX_BATCH;
		/* Admit while the prompt fits the budget (like vLLM, growth of
		 * running sequences is not reserved in advance). */
		while (next < NREQ && srv.nrunning < cap) {
			struct request *r = &reqs[next];
			if (srv.in_use + r->prompt > srv.budget_blocks && srv.nrunning > 0)
				break;
			next++;
			gg_CUresult rc = grow(r, r->prompt);
			if (rc != GG_CUDA_SUCCESS) {
				reject(r, rc);
				continue;
			}
			srv.running[srv.nrunning++] = r;
		}
		/* One forward pass: a scratch buffer per sequence from the stream's
		 * pool. A sequence whose buffer cannot be placed, even after a
		 * retry, is preempted: its request is rejected. */
		for (int i = 0; i < srv.nrunning;) {
			gg_CUresult rc = alloc_async_retry(&srv.scratch[i], WS_PER_SEQ);
			if (rc != GG_CUDA_SUCCESS) {
				reject(srv.running[i], rc);
				drop_running(i);
				continue;
			}
			i++;
		}
		int nscratch = srv.nrunning;
		/* Decode: every running sequence writes one more block. */
		for (int i = 0; i < srv.nrunning;) {
			struct request *r = srv.running[i];
			gg_CUresult rc = grow(r, 1);
			if (rc != GG_CUDA_SUCCESS) {
				reject(r, rc);
				drop_running(i);
				continue;
			}
			if (++r->produced == r->gen) {
				release(r);
				srv.served++;
				drop_running(i);
				continue;
			}
			i++;
		}
		sample_usage(); /* the peak is with the scratch buffers still held */
		for (int i = 0; i < nscratch; i++) {
			gg_CUresult rc = cu.free_async(srv.scratch[i], srv.stream);
			if (rc != GG_CUDA_SUCCESS)
				die("cuMemFreeAsync", rc);
		}
		gg_CUresult rc = cu.stream_sync(srv.stream);
		if (rc != GG_CUDA_SUCCESS)
			die("cuStreamSynchronize", rc);
		if (srv.step % PROGRESS_EVERY == 0)
			progress(next);
	}
	srv.step--;
	if (srv.step % PROGRESS_EVERY != 0)
		progress(next);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	load_driver();
	gg_CUresult rc;
	if ((rc = cu.init(0)) != GG_CUDA_SUCCESS)
		die("cuInit", rc);
	gg_CUdevice dev;
	gg_CUcontext ctx;
	if ((rc = cu.device_get(&dev, 0)) != GG_CUDA_SUCCESS)
		die("cuDeviceGet", rc);
	if ((rc = cu.ctx_retain(&ctx, dev)) != GG_CUDA_SUCCESS)
		die("cuDevicePrimaryCtxRetain", rc);
	if ((rc = cu.ctx_set(ctx)) != GG_CUDA_SUCCESS)
		die("cuCtxSetCurrent", rc);
	if ((rc = cu.stream_create(&srv.stream, 0)) != GG_CUDA_SUCCESS)
		die("cuStreamCreate", rc);
	char name[64] = "?";
	int version = 0;
	cu.device_name(name, sizeof(name), dev);
	cu.driver_version(&version);

	uint64_t free0;
	mem_info(&free0, &srv.total);
	printf("kvcache: driver %d.%d reached as cudart does (dlopen + cuGetProcAddress_v2)\n", version / 1000,
	       version % 1000 / 10);
	printf("kvcache: device 0 \"%s\": cuMemGetInfo says total %s, free %s\n", name, GIB_STR(srv.total),
	       GIB_STR(free0));

	/* Weights first, as every server loads them before sizing its cache. */
	gg_CUdeviceptr weights[WEIGHT_SHARDS];
	for (int i = 0; i < WEIGHT_SHARDS; i++) {
		rc = cu.alloc(&weights[i], WEIGHT_SHARD);
		if (rc != GG_CUDA_SUCCESS) {
			printf("kvcache: the weights (%d x %s) do not fit: %s; nothing to serve\n", WEIGHT_SHARDS,
			       GIB_STR(WEIGHT_SHARD), err_name(rc));
			return rc == GG_CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1;
		}
	}
	uint64_t weight_bytes = (uint64_t)WEIGHT_SHARDS * WEIGHT_SHARD;

	barrier();
	/* vLLM: the KV cache gets gpu_memory_utilization x total, less the
	 * weights; never more than is actually free. */
	uint64_t free1;
	mem_info(&free1, NULL);
	const char *u = getenv("KVCACHE_UTIL"); /* gpu_memory_utilization */
	double util = u ? atof(u) : GPU_UTIL;
	if (!(util > 0 && util <= 1))
		util = GPU_UTIL;
	double want = util * (double)srv.total - (double)weight_bytes;
	uint64_t budget = want > 0 ? (uint64_t)want : 0;
	if (budget > free1)
		budget = free1;
	srv.budget_blocks = (int)(budget / BLOCK);
	printf("kvcache: weights loaded: %d x %s; KV cache budget %.2g x %s - %s = %s (%d blocks of 2 MiB)\n",
	       WEIGHT_SHARDS, GIB_STR(WEIGHT_SHARD), util, GIB_STR(srv.total), GIB_STR(weight_bytes), GIB_STR(budget),
	       srv.budget_blocks);
	if (srv.budget_blocks < MAX_BLOCKS) {
		printf("kvcache: no room for a KV cache; nothing to serve\n");
		return 0;
	}

	static struct request reqs[NREQ];
	for (int i = 0; i < NREQ; i++) {
		reqs[i].id = i + 1;
		reqs[i].prompt = rand_between(4, 32);
		reqs[i].gen = rand_between(8, MAX_BLOCKS - 32);
	}
	printf("kvcache: serving %d requests, load ramping up to %d concurrent sequences\n", NREQ, MAX_BATCH);
	serve(reqs);

	/* Shut down cleanly: everything goes back, so the books end at zero. */
	for (int i = 0; i < srv.nrunning; i++)
		release(srv.running[i]);
	empty_cache();
	for (int i = 0; i < WEIGHT_SHARDS; i++)
		cu.free(weights[i]);
	cu.stream_sync(srv.stream);
	cu.stream_destroy(srv.stream);

	printf("summary: %d requests: %d served, %d rejected; %d out-of-memory retries (%d still failed)\n", NREQ,
	       srv.served, srv.rejected, srv.retries, srv.retries_failed);
	printf("summary: peak device usage seen by cuMemGetInfo: %s of %s\n", GIB_STR(srv.peak_used),
	       GIB_STR(srv.total));
	int (*stats)(int, struct gpuguard_device_stats *) =
	    (int (*)(int, struct gpuguard_device_stats *))dlsym(RTLD_DEFAULT, "gpuguard_device_stats");
	struct gpuguard_device_stats s;
	if (stats && stats(0, &s) == 0) {
		printf("summary: gpuguard: %slimit %s, this server's use %s at exit, peak %s, refused %llu at the "
		       "ceiling, %llu by the driver\n",
		       s.pod ? "pod " : "", s.limit == UINT64_MAX ? "none" : GIB_STR(s.limit), GIB_STR(s.process_used),
		       GIB_STR(s.peak), (unsigned long long)s.refused[GPUGUARD_REFUSED_CEILING],
		       (unsigned long long)s.refused[GPUGUARD_REFUSED_DRIVER]);
	} else {
		printf("summary: gpuguard not loaded: the server saw the whole card\n");
	}
	cu.ctx_release(dev);
	return 0;
}
