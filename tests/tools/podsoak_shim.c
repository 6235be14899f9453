/* gpuguard tests: the kill soak's view of the simulated driver. Preloaded
 * after libgpuguard (LD_PRELOAD="libgpuguard.so libpodsoak_shim.so"), so
 * gpuguard's RTLD_NEXT finds these two functions and they, with RTLD_NEXT
 * again, the simulator's: every call here is one gpuguard has already
 * decided to pass to the driver. Each worker's slot in the stats file
 * (PODSOAK_STATS, PODSOAK_SLOT; podsoak.h) is kept so that, at every
 * instruction the worker can be stopped or killed at,
 *
 *	simulated memory held  <=  slot.held  <=  the worker's pod charge.
 *
 * - Allocation: held grows before the driver takes pages, and shrinks again
 *   after a driver failure. gpuguard charged its slot (R4) before calling
 *   us and rolls the charge back only after we return, so the right side
 *   holds too.
 * - Free: held shrinks after the driver gave the pages back; gpuguard
 *   uncharges its slot (L1) only after we return.
 * So the monitor, summing held over the live workers, never undercounts
 * the simulated memory, and a correct gpuguard never makes it pass the
 * ceiling. Sizes over 1 MiB only: the simulator takes whole 2 MiB pages
 * for those, as gpuguard charges them (gpuguard/charge.h); the soak uses
 * no others. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpuguard/cuda_abi.h"
#include "podsoak.h"

static gg_pfn_cuMemAlloc_v2 real_cuMemAlloc_v2;
static gg_pfn_cuMemFree_v2 real_cuMemFree_v2;
static gg_pfn_cuMemGetAddressRange_v2 real_cuMemGetAddressRange_v2;
static struct podsoak_slot *slot; /* NULL: no stats file, pass through */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
	real_cuMemAlloc_v2 = (gg_pfn_cuMemAlloc_v2)dlsym(RTLD_NEXT, "cuMemAlloc_v2");
	real_cuMemFree_v2 = (gg_pfn_cuMemFree_v2)dlsym(RTLD_NEXT, "cuMemFree_v2");
	real_cuMemGetAddressRange_v2 = (gg_pfn_cuMemGetAddressRange_v2)dlsym(RTLD_NEXT, "cuMemGetAddressRange_v2");
	const char *path = getenv("PODSOAK_STATS"), *s = getenv("PODSOAK_SLOT");
	if (!path || !s)
		return;
	int i = atoi(s), fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || i < 0 || i >= PODSOAK_WORKERS)
		abort(); /* a test tool: a soak without its stats would prove nothing */
	struct podsoak_stats *st = mmap(NULL, sizeof *st, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (st == MAP_FAILED)
		abort();
	slot = &st->slot[i];
}

static uint64_t pages_of(uint64_t bytes)
{
	return (bytes + PODSOAK_PAGE - 1) / PODSOAK_PAGE * PODSOAK_PAGE;
}

gg_CUresult cuMemAlloc_v2(gg_CUdeviceptr *dptr, size_t bytesize)
{
	pthread_once(&once, init);
	if (!real_cuMemAlloc_v2)
		return GG_CUDA_ERROR_NOT_INITIALIZED;
	uint64_t n = pages_of(bytesize);
	/* seq_cst RMW before the call: the driver takes its pages after this,
	 * in program order, so a worker stopped or killed anywhere inside the
	 * driver is already counted (held never below the simulated memory). */
	if (slot)
		atomic_fetch_add_explicit(&slot->held, n, memory_order_seq_cst);
	gg_CUresult rc = real_cuMemAlloc_v2(dptr, bytesize);
	/* seq_cst: after the failed call, which took nothing */
	if (rc != GG_CUDA_SUCCESS && slot)
		atomic_fetch_sub_explicit(&slot->held, n, memory_order_seq_cst);
	return rc;
}

gg_CUresult cuMemFree_v2(gg_CUdeviceptr dptr)
{
	pthread_once(&once, init);
	if (!real_cuMemFree_v2)
		return GG_CUDA_ERROR_NOT_INITIALIZED;
	size_t size = 0;
	gg_CUdeviceptr base = 0;
	int sized =
	    real_cuMemGetAddressRange_v2 && real_cuMemGetAddressRange_v2(&base, &size, dptr) == 0 && base == dptr;
	gg_CUresult rc = real_cuMemFree_v2(dptr);
	if (!slot || rc != GG_CUDA_SUCCESS)
		return rc;
	/* seq_cst RMW after the call: the pages are back before held drops,
	 * so a stop between the two counts them once more, never once less. */
	if (sized)
		atomic_fetch_sub_explicit(&slot->held, pages_of(size), memory_order_seq_cst);
	else
		atomic_fetch_add_explicit(&slot->shim_misses, 1, memory_order_relaxed); /* a statistic, read parked */
	return rc;
}
