/* gpuguard: contexts, for reset and destroy (ctx.c, REAL-CUDA.md §5). */
#ifndef GG_CTX_H
#define GG_CTX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "table.h"

#define GG_CTX_MAX 4096 /* ids 1 .. GG_CTX_MAX-1; 0 = none */
/* Bumped whenever a context is forgotten: per-thread caches of "the current
 * context's id" compare it before trusting themselves. Hidden, as defined:
 * read in place by every allocation (issue 24). */
extern _Atomic uint32_t gg_ctx_epoch __attribute__((visibility("hidden")));
/* ctx's id and device if registered, else 0. Lock-free. */
uint16_t gg_ctx_find(const void *ctx, int *dev);
/* ctx's id, registering it on device dev on first sight (primary: it is
 * dev's primary context). 0 when the registry is full. HIP, which has no
 * contexts, uses one key per device (GG_CTX_HIP_KEY). */
uint16_t gg_ctx_id(const void *ctx, int dev, int primary);
#define GG_CTX_HIP_KEY(dev) ((const void *)(uintptr_t)(16 + (dev))) /* never a pointer */
/* ctx was destroyed: its id can be reused. */
void gg_ctx_forget(const void *ctx);
/* Around the driver's reset of dev's primary context (ctx NULL) or the
 * destroy of ctx: begin takes every record of it out of the table, end
 * settles them (refunds) or, when the driver failed, puts them back. A
 * record for which survived() says 1 after a successful call is put back
 * too: the driver kept that memory (CUDA's pools keep their blocks over a
 * reset). survived may be NULL: every record went. */
struct gg_ctx_drop {
	struct gg_record *recs;
	size_t n, cap;
};
void gg_ctx_drop_begin(struct gg_ctx_drop *d, int dev, const void *ctx);
void gg_ctx_drop_end(struct gg_ctx_drop *d, int ok, int (*survived)(const struct gg_record *));
void gg_ctx_reset(void);

#endif
