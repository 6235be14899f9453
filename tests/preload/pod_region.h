/* gpuguard: the pod region (include/gpuguard/region.h) as a test's parent
 * sees it, beside the processes that share it. */
#ifndef GPUGUARD_TEST_PRELOAD_POD_REGION_H
#define GPUGUARD_TEST_PRELOAD_POD_REGION_H

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpuguard/region.h"

/* The region file at path, mapped read-only (never unmapped: the test's
 * own), or NULL. */
static inline struct gpuguard_region_header *map_region_at(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	void *p = mmap(NULL, GPUGUARD_REGION_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

#endif
