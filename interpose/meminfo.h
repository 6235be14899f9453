/* gpuguard: the memory-info queries the process made (meminfo.c), for the
 * dump's meminfo records. */
#ifndef GG_MEMINFO_H
#define GG_MEMINFO_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* A memory-info query (cuMemGetInfo, hipMemGetInfo) answered on dev with
 * these figures (what the process was told, ceilings applied): kept in a
 * small ring (the first GG_MI_FIRST and the last GG_MI_LAST) for the dump's
 * "meminfo" records, so the report can tell a process that sizes itself
 * from the total (issue 11, finding 1). Lock-free, no allocation; the hooks
 * call it after gg_account_meminfo. */
#define GG_MI_FIRST 8
#define GG_MI_LAST 8
void gg_dump_note_meminfo(int dev, uint64_t free_bytes, uint64_t total_bytes);
/* The same for nvmlDeviceGetMemoryInfo[_v2], dev being NVML's index: the
 * record says "via":"nvml" (a server may size itself from NVML, and a
 * monitoring thread polling it should be told apart). */
void gg_dump_note_meminfo_nvml(int dev, uint64_t free_bytes, uint64_t total_bytes);
struct gg_meminfo_q {
	uint64_t n;  /* 0-based index among all queries of the process */
	uint64_t ms; /* since start */
	uint64_t free, total;
	uint64_t used; /* this process's live bytes on dev then (gg_history_live) */
	int nvml;      /* asked through NVML, not the runtime */
	int dev;
};
/* Whole entries, by n; the number of queries in all goes to *count. */
size_t gg_dump_meminfo_snapshot(struct gg_meminfo_q *out, size_t max, uint64_t *count);

#endif
