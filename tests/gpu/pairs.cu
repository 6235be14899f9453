/* gpuguard on a real card (issue 24): the wall time of one allocate+free pair,
 * 4 KiB, with 1k blocks live beside it. tests/gpu/run.sh runs it bare and
 * under the preload (shipped defaults, and the accounting alone) in one run
 * and sets the medians side by side. Prints, per pair,
 *   GGPAIR name=<pair> ns=<median ns per pair> rounds=<n> pairs=<per round>
 * A call that fails is a GGFAIL line and exit status 1; the times are
 * measurements, never judged. Host code only.
 *   pairs [PAIRS_PER_ROUND [ROUNDS]]   (defaults 2000 and 15) */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIVE 1000
#define SIZE 4096

static int failures;

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

enum kind { MALLOC, ASYNC_NULL, ASYNC_STREAM };

/* One round of n pairs; 0, or the first error. */
static cudaError_t round_of(enum kind k, cudaStream_t s, int n)
{
	for (int i = 0; i < n; i++) {
		void *p = NULL;
		cudaError_t e;
		if (k == MALLOC) {
			if ((e = cudaMalloc(&p, SIZE)) != cudaSuccess || (e = cudaFree(p)) != cudaSuccess)
				return e;
		} else {
			if ((e = cudaMallocAsync(&p, SIZE, s)) != cudaSuccess ||
			    (e = cudaFreeAsync(p, s)) != cudaSuccess)
				return e;
		}
	}
	/* the stream's work is part of the pair's cost; one sync per round */
	return k == MALLOC ? cudaSuccess : cudaStreamSynchronize(s);
}

static void measure(const char *name, enum kind k, cudaStream_t s, int n, int rounds)
{
	double *t = (double *)calloc((size_t)rounds, sizeof *t);
	if (!t)
		return;
	cudaError_t e = round_of(k, s, n); /* warm: the pool holds its blocks */
	for (int r = 0; e == cudaSuccess && r < rounds; r++) {
		double t0 = now_ns();
		e = round_of(k, s, n);
		t[r] = (now_ns() - t0) / n;
	}
	if (e != cudaSuccess) {
		printf("GGFAIL pairs: %s: %s\n", name, cudaGetErrorString(e));
		failures++;
	} else {
		qsort(t, (size_t)rounds, sizeof *t, cmp);
		printf("GGPAIR name=%s ns=%.0f rounds=%d pairs=%d\n", name, t[rounds / 2], rounds, n);
	}
	free(t);
}

static int count(const char *s, int dflt, int hi)
{
	char *end;
	long v = s ? strtol(s, &end, 10) : dflt;
	if (s && (!*s || *end || v < 1 || v > hi)) {
		fprintf(stderr, "pairs: '%s': expected an integer from 1 to %d\n", s, hi);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int n = count(argc > 1 ? argv[1] : NULL, 2000, 10000000);
	int rounds = count(argc > 2 ? argv[2] : NULL, 15, 1000);
	if (cudaSetDevice(0) != cudaSuccess || cudaFree(0) != cudaSuccess) {
		printf("GGFAIL pairs: the runtime does not start\n");
		return 1;
	}
	/* The default pool keeps what is freed (release threshold: all), so
	 * every pair after the first is served warm, as PyTorch's backend is. */
	cudaMemPool_t pool;
	uint64_t all = UINT64_MAX;
	if (cudaDeviceGetDefaultMemPool(&pool, 0) != cudaSuccess ||
	    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &all) != cudaSuccess) {
		printf("GGFAIL pairs: the default pool's release threshold\n");
		return 1;
	}
	cudaStream_t s;
	if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
		printf("GGFAIL pairs: cudaStreamCreate\n");
		return 1;
	}
	/* 1k live blocks of each kind beside the pairs */
	static void *live[2][LIVE];
	for (int i = 0; i < LIVE; i++)
		if (cudaMalloc(&live[0][i], SIZE) != cudaSuccess ||
		    cudaMallocAsync(&live[1][i], SIZE, 0) != cudaSuccess) {
			printf("GGFAIL pairs: %d live blocks\n", LIVE);
			return 1;
		}
	cudaStreamSynchronize(0);
	measure("cudaMalloc+cudaFree", MALLOC, 0, n, rounds);
	measure("cudaMallocAsync+cudaFreeAsync/stream0", ASYNC_NULL, 0, n, rounds);
	measure("cudaMallocAsync+cudaFreeAsync/stream", ASYNC_STREAM, s, n, rounds);
	for (int i = 0; i < LIVE; i++) {
		cudaFree(live[0][i]);
		cudaFreeAsync(live[1][i], 0);
	}
	cudaStreamSynchronize(0);
	cudaStreamDestroy(s);
	printf("GGRESULT program=pairs ceiling=n/a meminfo=n/a refusal=n/a working=n/a result=%s\n",
	       failures ? "FAIL" : "PASS");
	return failures != 0;
}
