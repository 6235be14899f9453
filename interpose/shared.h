/* gpuguard: pod scope (shared.c, the devices, at its top; the region
 * itself: include/gpuguard/region.h). Its lower modules' headers are
 * included here, so a user of pod scope includes this one. */
#ifndef GG_SHARED_H
#define GG_SHARED_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "ceiling.h"
#include "shared_attach.h"
#include "shared_file.h"
#include "shared_guard.h"
#include "shared_obit.h"
#include "shared_pinned.h"
#include "shared_sweep.h"

/* Points b at dev's entry in the pod region, attaching to the region on
 * first use; charges GPUGUARD_CONTEXT_RESERVE to this process's slot there.
 * 0, or -1 when dev stays in process scope (scope=process, region refused,
 * region full). Called once per device, by gg_ceiling_bind_slow (init.c
 * hands it to the ceiling: gg_ceiling_set_binder). */
int gg_shared_bind(int dev, struct gg_budget *b);
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
 * "GPU-..." UUID, or NULL when unknown; index: NVML's index, used as the
 * ordinal when the UUID names no device this process or the pod knows. */
void gg_nvml_meminfo(const uint8_t *uuid, unsigned index, uint64_t *free_bytes, uint64_t *total_bytes);

#endif
