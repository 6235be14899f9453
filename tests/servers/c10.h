/* gpuguard test server: the face of the stand-in libc10_cuda.so
 * (libc10_cuda.c). The functions carry PyTorch's own mangled names, so a
 * stack through them reads as a real one does: libc10_cuda.so and
 * c10::cuda::CUDACachingAllocator::... frames. */
#ifndef SRV_C10_H
#define SRV_C10_H
#include <stddef.h>

/* c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long) */
void *c10_malloc(int dev,
                 size_t size) __asm__("_ZN3c104cuda20CUDACachingAllocator6Native22DeviceCachingAllocator6mallocEim");
/* ...::DeviceCachingAllocator::free(void*) */
void c10_free(void *p) __asm__("_ZN3c104cuda20CUDACachingAllocator6Native22DeviceCachingAllocator4freeEPv");
/* ...::DeviceCachingAllocator::emptyCache() */
void c10_empty_cache(void) __asm__("_ZN3c104cuda20CUDACachingAllocator6Native22DeviceCachingAllocator10emptyCacheEv");
#endif
