/* gpuguard: pod scope (shared.c; the region itself:
 * include/gpuguard/region.h). */
#ifndef GG_SHARED_H
#define GG_SHARED_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "ceiling.h"

/* Points b at dev's entry in the pod region, attaching to the region on
 * first use; charges GPUGUARD_CONTEXT_RESERVE to this process's slot there.
 * 0, or -1 when dev stays in process scope (scope=process, region refused,
 * region full). Called once per device, by gg_ceiling_bind_slow (init.c
 * hands it to the ceiling: gg_ceiling_set_binder). */
int gg_shared_bind(int dev, struct gg_budget *b);
/* Returns the charges of pod processes that died to their devices (at most
 * every 10 ms; before a refusal and while waiting). */
void gg_shared_reclaim(void);
/* A dump written, for the pod's metrics. No-op outside pod scope. */
void gg_shared_count_dump(void);
/* Memory info's rate-limited sweep of dead members (at most every 250 ms). */
void gg_shared_probe(void);
/* A refusal of ours, counted in our slot for our obituary (which it
 * refreshes, rate-limited). */
void gg_shared_note_refusal(void);
/* This process's pinned host memory changed by bytes (account.c): kept in
 * our slot for the metrics. */
void gg_shared_note_pinned(int64_t bytes);
/* The pod's recent deaths (region.h's ring), oldest first; at most max. */
struct gpuguard_region_death;
size_t gg_shared_deaths(struct gpuguard_region_death *out, size_t max);
/* Who device dev is, asked of the runtime that owns it: 16 UUID bytes and
 * the physical total. One per runtime (GG_RT_CUDA, GG_RT_HIP): 0, -1 when
 * the runtime cannot say, 1 when it is not loaded in this process. */
typedef int (*gg_identity_fn)(int dev, uint8_t uuid[16], uint64_t *physical);
void gg_shared_set_identity(int runtime, gg_identity_fn fn);
/* Runtime `runtime` is using ordinal dev for the first time (once per
 * ordinal, or per context): if dev is already bound in the pod to another
 * card (the other runtime's dev), say once that this process keeps one
 * budget for both. The books are per ordinal within a process. */
void gg_shared_check_card(int dev, int runtime);
/* Fork child: the parent's slot is not ours; attach afresh on first use. */
void gg_shared_after_fork_child(void);
/* Host memory as the dump's host record and the obituary show it: taken by
 * dump_host.c (gg_dump_host_sample), which sits above this file. */
struct gg_host_sample {
	uint64_t rss;
	int version; /* 2, 1, 0 = no cgroup found */
	int have_lim, have_use, have_oom, have_inactive;
	uint64_t lim, use, oom, inactive_file;
};
/* How the obituary samples host memory: dump.c's gg_dump_host_sample_armed,
 * which sits above this file; set by init.c (none: no host figures). */
typedef int (*gg_host_sample_fn)(struct gg_host_sample *h);
void gg_shared_set_host_sample(gg_host_sample_fn fn);
/* For dumps: each process of the pod holding memory on a device this
 * process also uses (this process included). dev is the local ordinal. */
struct gg_pod_use {
	unsigned slot;
	uint32_t pid;
	char comm[16];
	int self, alive, dev;
	uint64_t used;
};
void gg_shared_foreach_use(void (*fn)(const struct gg_pod_use *, void *), void *arg);
/* NVML's view of one device, in place: the physical free/total become the
 * budget's, consistent with cuMemGetInfo. uuid: the 16 bytes of NVML's
 * "GPU-..." or "MIG-..." UUID, or NULL when unknown; index: NVML's index
 * (UINT32_MAX for none), used as the ordinal only while this process's
 * CUDA devices are not known. A device that is neither the pod's nor this
 * process's is left as it is. */
void gg_nvml_meminfo(const uint8_t *uuid, unsigned index, uint64_t *free_bytes, uint64_t *total_bytes);

#endif
