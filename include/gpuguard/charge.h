/* gpuguard: the charge rule, shared by the library (what a request costs
 * against the ceiling) and the gpuguard command (what a dump's records were
 * granted). One definition, so the two never drift (README "What is
 * charged"; the card's granularity is DESIGN.md §5). */
#ifndef GPUGUARD_CHARGE_H
#define GPUGUARD_CHARGE_H

#include <stdint.h>

#include "../gpuguard.h"

#define GPUGUARD_PAGE (2ull * 1024 * 1024)      /* GPU page, VMM granularity */
#define GPUGUARD_SMALL_MAX (1ull * 1024 * 1024) /* <= this is packed */
#define GPUGUARD_SMALL_ALIGN 512ull

/* v rounded up to a multiple of to. Saturates: near 2^64, v + to - 1 would
 * wrap to a tiny charge that any ceiling lets through; UINT64_MAX is refused
 * like the request. */
static inline uint64_t gpuguard_round_up(uint64_t v, uint64_t to)
{
	if (v > UINT64_MAX - (to - 1))
		return UINT64_MAX;
	return (v + to - 1) / to * to;
}

/* Bytes the card gives up for a request of `size` through `api`:
 * - VMM handles: their size, already a granularity multiple;
 * - arrays: whole 2 MiB pages, however small (the driver gives every array
 *   pages of its own: 3000 arrays of 16x16 bytes take 3000 pages);
 * - anything else over 1 MiB: whole 2 MiB pages;
 * - 1 MiB or less: its share of the 2 MiB page it is packed into. The card
 *   packs small allocations into pages at 512-byte alignment, but a block
 *   never straddles two pages, so a page holds floor(2 MiB / size) of one
 *   size, and each is charged 2 MiB / that many (issue 25, item 4: 700 KiB
 *   blocks, two to a page, were charged 700 KiB and the card held 1,498 MiB
 *   for 1,023 on the books). Exact for runs of one size; mixed sizes and
 *   fragmentation are left to the card's own figures (docs/escapes.md).
 * Stream-ordered blocks are not charged one by one: their pool's reserve
 * is (interpose/pool.c). */
static inline uint64_t gpuguard_charge_size(uint32_t api, uint64_t size)
{
	switch (gpuguard_api_kind(api)) {
	case GPUGUARD_KIND_VMM:
		return size;
	case GPUGUARD_KIND_ARRAY:
	case GPUGUARD_KIND_MIPMAP:
		return gpuguard_round_up(size ? size : 1, GPUGUARD_PAGE);
	default:
		if (size > GPUGUARD_SMALL_MAX)
			return gpuguard_round_up(size, GPUGUARD_PAGE);
		if (size == 0)
			return 0;
		/* at least 2 to a page: size <= 1 MiB */
		return gpuguard_round_up(GPUGUARD_PAGE /
		                             (GPUGUARD_PAGE / gpuguard_round_up(size, GPUGUARD_SMALL_ALIGN)),
		                         GPUGUARD_SMALL_ALIGN);
	}
}

#endif
