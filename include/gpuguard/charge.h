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
 *   size, and each is charged 2 MiB / that many, rounded up to the byte
 *   (issue 25, item 4: 700 KiB
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
		/* size <= 1 MiB: rounding up to 512 cannot wrap. */
		uint64_t r = (size + GPUGUARD_SMALL_ALIGN - 1) & ~(GPUGUARD_SMALL_ALIGN - 1);
		/* 0 (size 0), or a power of two, 512 B .. 1 MiB: it divides the
		 * page, so a page holds 2 MiB / r of them and each one's share
		 * is r itself. Said without the two divisions below, which
		 * every allocation of the common sizes paid (issue 24; the
		 * unit test test_ceiling charge_size_matches_the_division
		 * checks every size up to 2 MiB against them). */
		if ((r & (r - 1)) == 0)
			return r;
		/* At least 2 to a page: size <= 1 MiB. The share is rounded up
		 * to the byte, so a page's worth adds up to the page (to 512
		 * bytes it would overcharge: 455 blocks of 4,608 bytes fill a
		 * page; at 5,120 each they would make 2.2 MiB). */
		return (GPUGUARD_PAGE + GPUGUARD_PAGE / r - 1) / (GPUGUARD_PAGE / r);
	}
}

#endif
