/* gpuguard: pod scope's attach, exit and fork (shared_attach.c). */
#ifndef GG_SHARED_ATTACH_H
#define GG_SHARED_ATTACH_H

#include "base.h"
#include "shared_file.h"

/* Attaches to the region on first use (every thread waits for the one
 * attaching). 1 when attached, 0 when this process stays in process scope. */
int gg_shared_attached(void);
/* A dump written, for the pod's metrics. No-op outside pod scope. */
void gg_shared_count_dump(void);
/* Fork child: the parent's slot is not ours; attach afresh on first use. */
void gg_shared_after_fork_child(void);

#endif
