/* gpuguard benchmark (issue 27): the allocate+free pairs of the Python
 * capture's count, called from Python through ctypes.CDLL (the GIL
 * released, as PyTorch enters its allocator) at the bottom of a Python
 * stack of tests/bench/pybench.py's depth. timed_pairs is the function
 * callgrind counts (--toggle-collect=timed_pairs), as in bench.c. */
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(void **, int);
CUresult cuCtxSetCurrent(void *);
CUresult cuMemAlloc_v2(uint64_t *, size_t);
CUresult cuMemFree_v2(uint64_t);

int pybench_setup(void);
long timed_pairs(long n);
long warm_pairs(long n);

int pybench_setup(void)
{
	void *ctx;
	if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx))
		return -1;
	return 0;
}

static long pairs(long n, size_t size)
{
	long bad = 0;
	for (long i = 0; i < n; i++) {
		uint64_t p;
		if (cuMemAlloc_v2(&p, size) || cuMemFree_v2(p))
			bad++;
	}
	return bad;
}

/* Distinct bodies and noipa: identical code folding would make one the
 * other, and callgrind would never see timed_pairs entered. */
__attribute__((noipa)) long warm_pairs(long n)
{
	return pairs(n, 8192);
}

__attribute__((noipa)) long timed_pairs(long n)
{
	return pairs(n, 4096);
}
