/* gpuguard: pod scope's pinned host memory figure (shared_pinned.c). */
#ifndef GG_SHARED_PINNED_H
#define GG_SHARED_PINNED_H

#include <stdatomic.h>
#include <stdint.h>

#include "base.h"
#include "shared_file.h"

/* This process's pinned host memory changed by bytes (account.c): kept in
 * our slot for the metrics. */
void gg_shared_note_pinned(int64_t bytes);
/* Our slot is attached: host_pinned follows the total (a fork child clears
 * it). */
extern _Atomic int gg_shared_pinned_live;
/* Once attached (gg_shared_me set): from now on every change publishes
 * itself. */
void gg_shared_pinned_start(void);

#endif
