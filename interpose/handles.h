/* gpuguard: VMM physical-memory lifetime (handles.c, DESIGN.md §2). */
#ifndef GG_HANDLES_H
#define GG_HANDLES_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "table.h"

/* A handle's memory lives while it has a reference or a mapping; the hooks
 * tell handles.c each change, and it takes the record out of the table when
 * the last one goes, before the driver call (begin), settling after (end). */
#define GG_HANDLE_CHARGED 0x1  /* made by a governed create: it has a charged record */
#define GG_HANDLE_IMPORTED 0x2 /* imported from another process: never charged here */
#define GG_HANDLE_HOST 0x4     /* host memory (a HOST or HOST_NUMA location): never charged */
struct gg_vmm_item {
	uint64_t va, size, h;
	int dying, known, dropped;
	unsigned flags;
	struct gg_record rec;
};
struct gg_vmm_op {
	size_t n, cap, map_bytes;
	struct gg_vmm_item *items;
	struct gg_vmm_item inl[4];
};
/* After a successful create or import: one reference, no mapping. */
void gg_handle_created(uint64_t h, unsigned flags);
/* After a successful retain of h: one more reference (h unknown: nothing). */
void gg_handle_retained(uint64_t h);
/* Before the driver's release: 1 when handles.c knows h (then call end with
 * the driver's verdict), 0 when it does not (the caller falls back to the
 * plain free bracket). */
int gg_handle_release_begin(uint64_t h, struct gg_vmm_op *op);
void gg_handle_release_end(struct gg_vmm_op *op, int ok);
/* After a successful map of h at [va, va+size). */
void gg_handle_mapped(uint64_t va, uint64_t size, uint64_t h);
/* Around an unmap (or an address free) of [va, va+size). */
void gg_handle_unmap_begin(uint64_t va, uint64_t size, struct gg_vmm_op *op);
void gg_handle_unmap_end(struct gg_vmm_op *op, int ok);
/* h went with its context (reset, destroy): forget it and its mappings;
 * its record is the caller's to settle. */
void gg_handle_forget(uint64_t h);
/* For tests: h's references and mappings; 1 if known. */
int gg_handle_state(uint64_t h, uint32_t *refs, uint32_t *maps);
void gg_handle_reset(void);

#endif
