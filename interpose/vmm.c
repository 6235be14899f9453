/* gpuguard: virtual-address reservations (cuMemAddressReserve,
 * hipMemAddressReserve) and which of their 2 MiB granules are mapped, for
 * dumps: unmapped holes between mapped chunks are the fragmentation VMM users
 * (PyTorch expandable segments, vLLM sleep mode) can run into. Address space
 * is never charged; this is bookkeeping only, off the allocation hot path. */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "vmm.h"
#include "base.h"

#define MAX_RES 1024

struct res {
	uint64_t base, size;
	uint64_t mapped; /* bytes mapped now */
	uint64_t *bits;  /* one bit per 2 MiB granule, mmap'd */
	size_t bits_bytes;
};

static struct res res[MAX_RES];
static int nres;
/* Guards res[]. Taken by the map/unmap/reserve hooks after the driver call
 * returns and by the dump writer; never held across a call out of the
 * library, so it cannot be part of a cycle with a driver lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct res *find_locked(uint64_t p)
{
	for (int i = 0; i < nres; i++)
		if (p >= res[i].base && p - res[i].base < res[i].size)
			return &res[i];
	return NULL;
}

void gg_vmm_reserved(uint64_t base, uint64_t size)
{
	if (size == 0)
		return;
	uint64_t granules = (size + GG_PAGE - 1) / GG_PAGE;
	size_t bytes = (size_t)((granules + 63) / 64 * 8);
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return; /* not tracked: the dump simply lacks this reservation */
	pthread_mutex_lock(&lock);
	if (nres < MAX_RES) {
		res[nres++] = (struct res){base, size, 0, m, bytes};
		m = NULL;
	}
	pthread_mutex_unlock(&lock);
	if (m)
		munmap(m, bytes);
}

void gg_vmm_freed(uint64_t base)
{
	void *m = NULL;
	size_t bytes = 0;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nres; i++)
		if (res[i].base == base) {
			m = res[i].bits;
			bytes = res[i].bits_bytes;
			res[i] = res[--nres];
			break;
		}
	pthread_mutex_unlock(&lock);
	if (m)
		munmap(m, bytes);
}

void gg_vmm_mapped(uint64_t ptr, uint64_t size, int map)
{
	pthread_mutex_lock(&lock);
	struct res *r = find_locked(ptr);
	if (r && size) {
		uint64_t end = ptr + size - r->base;
		if (end > r->size)
			end = r->size;
		uint64_t done = end - (ptr - r->base);
		for (uint64_t g = (ptr - r->base) / GG_PAGE; g < (end + GG_PAGE - 1) / GG_PAGE; g++) {
			if (map)
				r->bits[g / 64] |= 1ull << (g % 64);
			else
				r->bits[g / 64] &= ~(1ull << (g % 64));
		}
		if (map)
			r->mapped += done;
		else
			r->mapped = r->mapped > done ? r->mapped - done : 0;
	}
	pthread_mutex_unlock(&lock);
}

void gg_vmm_foreach(void (*fn)(const struct gg_vmm_info *, void *), void *arg)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nres; i++) {
		const struct res *r = &res[i];
		struct gg_vmm_info info = {r->base, r->size, r->mapped, 0, 0};
		uint64_t granules = (r->size + GG_PAGE - 1) / GG_PAGE, run = 0;
		int seen_mapped = 0;
		/* A hole is an unmapped run with mapped granules on both sides. */
		for (uint64_t g = 0; g < granules; g++) {
			if (r->bits[g / 64] & (1ull << (g % 64))) {
				if (seen_mapped && run) {
					info.holes++;
					if (run * GG_PAGE > info.largest_hole)
						info.largest_hole = run * GG_PAGE;
				}
				seen_mapped = 1;
				run = 0;
			} else {
				run++;
			}
		}
		fn(&info, arg);
	}
	pthread_mutex_unlock(&lock);
}

void gg_vmm_reset(void)
{
	/* Fork child: one thread; the parent's reservations are not ours. */
	for (int i = 0; i < nres; i++)
		munmap(res[i].bits, res[i].bits_bytes);
	nres = 0;
	pthread_mutex_init(&lock, NULL);
}
