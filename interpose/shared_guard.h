/* gpuguard: pod scope's SIGBUS guard (shared_guard.c). */
#ifndef GG_SHARED_GUARD_H
#define GG_SHARED_GUARD_H

#include <stdatomic.h>

#include "base.h"
#include "shared_file.h"

extern void *_Atomic gg_shared_guarded; /* the mapping the handler answers for, or NULL */
extern _Atomic int gg_shared_lost;      /* the region is lost to this process */

/* The region is gone for this process: its own books from now on. Safe in
 * the handler and in any thread; the first caller says so. */
void gg_shared_lose_region(void);
/* Installs the handler, once per process (a fork child keeps it). Called
 * under the setup lock, by the one attaching thread. 0 or -1. */
int gg_shared_guard_install(void);

static inline int gg_shared_region_lost(void)
{
	/* seq_cst: the load half of the pair in lose_region */
	return atomic_load_explicit(&gg_shared_lost, memory_order_seq_cst);
}

#endif
