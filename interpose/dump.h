/* gpuguard: dumps (dump.c): the triggers, the writer thread, and one dump
 * from start to finish. */
#ifndef GG_DUMP_H
#define GG_DUMP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "shared.h"

/* What the hook about to call gg_ceiling_count_refusal is asking for, so a
 * refusal can name the request (set by the pool paths, and by a plain
 * allocation only past its first try or at the runtime's refusal:
 * account.h's gg_account_begin_noting, shape.c's gg_alloc_settle). Inline,
 * two stores into the thread's block (base.h's gg_self, whose address the
 * hook holds already; issue 24). */
static inline void gg_dump_note_request(enum gpuguard_api api, uint64_t size)
{
	gg_self.noted_api = api;
	gg_self.noted_size = size;
}
/* The request noted last on this thread (gg_hook_sleep keeps it across a
 * signal handler's own hook). */
void gg_dump_noted_request(enum gpuguard_api *api, uint64_t *size);
/* A refusal was counted on dev: history event + rate-limited dump. */
void gg_dump_on_refusal(int dev, enum gpuguard_refusal why);
/* Arms dumps on first device activity: starts the writer thread and
 * installs the signal handler. gg_dump_armed: 0 no, 1 arming, 2 armed;
 * acquire: pairs with the slow path's release store of 2, made once the
 * writer and handler are set. Each thread reads it until it sees 2, then
 * notes that in its own block (gg_self.dump_armed, base.h), so that after
 * a thread's first calls the check is one byte of the block its hook
 * holds already (issue 24). A fork child's thread clears its note with
 * the word (gg_dump_after_fork_child): the child re-arms. Nothing a caller
 * does after gg_dump_arm depends on its having armed (a trigger reads
 * gg_dump_armed itself). */
extern _Atomic int gg_dump_armed;
void gg_dump_arm_slow(void);
void gg_dump_arm_thread(void);
static inline void gg_dump_arm(void)
{
	if (GG_UNLIKELY(!gg_self.dump_armed))
		gg_dump_arm_thread();
}
/* The driver's own free/total for the calling thread's current device,
 * asked on the failing thread (the writer has no context). One per runtime
 * (0 = CUDA, 1 = HIP), registered by the hook files. 0 or -1. */
typedef int (*gg_meminfo_fn)(uint64_t *free_bytes, uint64_t *total_bytes);
void gg_dump_set_meminfo(int runtime, gg_meminfo_fn fn);
/* Arms dumps (gg_dump_arm) and, once that has finished (the knobs above
 * are read), takes the host sample: 0, or -1 while another thread arms. For
 * the pod obituary (shared_obit.c), on application threads. */
int gg_dump_host_sample_armed(struct gg_host_sample *h);
/* Pinned host memory, tracked for the dump's host record only. */
void gg_dump_pinned(int64_t bytes, int64_t count);
/* Fork child: no writer thread here; start again from nothing. */
void gg_dump_after_fork_child(void);

#endif
