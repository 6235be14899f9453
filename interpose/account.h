/* gpuguard: the accounting every shape shares (account.c). */
#ifndef GG_ACCOUNT_H
#define GG_ACCOUNT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "table.h"

/* The context id (ctx.c) the calling hook found current: set by the hooks'
 * device lookup, stamped on each record gg_account_commit makes. */
extern GG_TLS uint16_t gg_cur_ctx;
/* Bracket around one governed allocation (DESIGN.md §3): begin reserves the
 * charge, end commits + records or rolls back. begin is the one admission
 * path every shape takes (plain, pool, graph launch): try; reconcile the
 * device's pools and reclaim dead members' charges, try again; wait
 * (ON_LIMIT=wait); else refuse, counted and dumped. 0 or -1. */
int gg_account_begin(int dev, uint64_t charge);
void gg_account_commit(int dev, enum gg_key_ns ns, uint64_t raw, uint64_t size, enum gpuguard_api api, uint64_t charge);
void gg_account_rollback(int dev, uint64_t charge, int driver_oom);
/* A refusal: counted under why, then dumped (rate-limited). */
void gg_account_refuse(int dev, enum gpuguard_refusal why);
/* Removes the record of raw (before the driver frees it). 1 if found. */
int gg_account_forget(enum gg_key_ns ns, uint64_t raw, struct gg_record *out);
/* After the driver's free: settles the books, or puts the record back. */
void gg_account_freed(const struct gg_record *rec, int ok);
void gg_account_untracked(int dev);
/* Pinned host memory: recorded and counted for dumps, never charged. */
void gg_account_host_alloc(uint64_t raw, uint64_t size);
int gg_account_host_forget(uint64_t raw, struct gg_record *out);
void gg_account_host_freed(const struct gg_record *rec, int ok);

struct gg_budget;
/* GPUGUARD_ON_LIMIT=wait's sleep (gg_ceiling_wait_sleep) as a hook makes
 * it: for its duration this thread counts as outside any hook, so that a
 * signal handler allocating meanwhile is charged or refused, never passed
 * through as re-entry (issue 10, finding 9). */
int gg_hook_sleep(const struct gg_budget *b, uint32_t seen, uint64_t deadline_ns);

/* Memory-info virtualisation for dev, in place (DESIGN.md §2). */
void gg_account_meminfo(int dev, size_t *free_bytes, size_t *total_bytes);
/* What a device-total query reports for dev: min(ceiling, physical). */
size_t gg_account_total(int dev, size_t physical);

#endif
