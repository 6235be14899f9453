/* gpuguard: virtual-address reservations and what is mapped in them (vmm.c),
 * for dumps. */
#ifndef GG_VMM_H
#define GG_VMM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* Virtual-address reservations and what is mapped in them (for dumps). */
struct gg_vmm_info {
	uint64_t base, size, mapped;
	uint64_t holes;        /* unmapped runs between mapped granules */
	uint64_t largest_hole; /* bytes */
};
void gg_vmm_reserved(uint64_t base, uint64_t size);
void gg_vmm_freed(uint64_t base);
void gg_vmm_mapped(uint64_t ptr, uint64_t size, int map);
void gg_vmm_foreach(void (*fn)(const struct gg_vmm_info *, void *), void *arg);
void gg_vmm_reset(void);

#endif
