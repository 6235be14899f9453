/* gpuguard: initialisation (init.c), and the re-entry check every hook makes. */
#ifndef GG_INIT_H
#define GG_INIT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* Runs initialisation once; safe from any hook, constructor or thread. */
void gg_init_once(void);
/* gg_init_once's common case inline: once initialisation is done, one
 * acquire load (the same that gg_init_once makes, pairing with its
 * release) and no call. */
static inline void gg_init_done(void)
{
	if (GG_UNLIKELY(atomic_load_explicit(&gg_init_state, memory_order_acquire) != 2))
		gg_init_once();
}
/* relaxed: gg_inert is a once-set flag that orders nothing; a hook that
 * reads 0 before this copy's initialisation ran governs that one call. An
 * inert copy says so at the first call that passes through it
 * (gg_inert_note, always 1). */
int gg_inert_note(void);
#define gg_in_hook \
	(gg_hook_active || (GG_UNLIKELY(atomic_load_explicit(&gg_inert, memory_order_relaxed)) && gg_inert_note()))

#endif
