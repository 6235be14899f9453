/* gpuguard test server: a stand-in for PyTorch's CUDA caching allocator
 * (libc10_cuda.so). As the real one does, it rounds requests to segments
 * (2 MiB for small ones, 20 MiB up to 10 MiB, else 2 MiB multiples), keeps
 * freed segments cached for reuse, and on CUDA_ERROR_OUT_OF_MEMORY empties
 * its cache and retries once before raising OutOfMemoryError (NULL). */
#include <stdint.h>
#include <stdlib.h>

#include "c10.h"
#include "gpuguard/cuda_abi.h"

#define MIB (1024ull * 1024ull)
#define MAX_SEGS 8192

static struct seg {
	gg_CUdeviceptr p;
	uint64_t size;
	int used;
} segs[MAX_SEGS];
static int nsegs;

static uint64_t segment_size(uint64_t n)
{
	if (n <= 1 * MIB)
		return 2 * MIB;
	if (n < 10 * MIB)
		return 20 * MIB;
	return (n + 2 * MIB - 1) / (2 * MIB) * (2 * MIB);
}

/* c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::alloc_block(unsigned long) */
__attribute__((noinline, visibility("default"))) gg_CUdeviceptr c10_alloc_block(uint64_t size) __asm__(
    "_ZN3c104cuda20CUDACachingAllocator6Native22DeviceCachingAllocator11alloc_blockEm");
gg_CUdeviceptr c10_alloc_block(uint64_t size)
{
	gg_CUdeviceptr p = 0;
	int rc = cuMemAlloc_v2(&p, size);
	__asm__ volatile("" ::: "memory"); /* not a tail call: keep this frame */
	return rc == GG_CUDA_SUCCESS ? p : 0;
}

void c10_empty_cache(void)
{
	int k = 0;
	for (int i = 0; i < nsegs; i++) {
		if (segs[i].used)
			segs[k++] = segs[i];
		else
			cuMemFree_v2(segs[i].p);
	}
	nsegs = k;
}

void *c10_malloc(int dev, size_t size)
{
	(void)dev;
	uint64_t want = segment_size(size);
	/* A cached segment of the size class, never one much larger (the
	 * real allocator does not hand a big block to a small request). */
	for (int i = 0; i < nsegs; i++)
		if (!segs[i].used && segs[i].size >= want && segs[i].size < want + 20 * MIB) {
			segs[i].used = 1;
			return (void *)(uintptr_t)segs[i].p;
		}
	if (nsegs == MAX_SEGS)
		c10_empty_cache();
	gg_CUdeviceptr p = c10_alloc_block(want);
	if (!p) {
		c10_empty_cache();
		p = c10_alloc_block(want);
	}
	if (!p || nsegs == MAX_SEGS)
		return NULL;
	segs[nsegs++] = (struct seg){p, want, 1};
	return (void *)(uintptr_t)p;
}

void c10_free(void *ptr)
{
	for (int i = 0; i < nsegs; i++)
		if (segs[i].p == (gg_CUdeviceptr)(uintptr_t)ptr) {
			segs[i].used = 0;
			return;
		}
}
