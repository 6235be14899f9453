/* gpuguard: pod scope (include/gpuguard/region.h). Work in progress. */
#include "internal.h"

void gg_nvml_meminfo(const uint8_t *uuid, unsigned index, uint64_t *free_bytes, uint64_t *total_bytes)
{
	(void)uuid;
	if (index >= GG_MAX_DEVICES)
		return;
	int dev = (int)index;
	if (gg_ceiling_unresolved(dev))
		gg_ceiling_resolve(dev, *total_bytes);
	gg_ceiling_meminfo(dev, *free_bytes, *total_bytes, free_bytes, total_bytes);
}
