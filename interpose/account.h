/* gpuguard: the accounting every shape shares (account.c). */
#ifndef GG_ACCOUNT_H
#define GG_ACCOUNT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "ceiling.h"
#include "dump.h"
#include "footprint.h"
#include "history.h"
#include "pool.h"
#include "stack.h"
#include "table.h"

/* The context id (ctx.c) the calling hook found current: set by the hooks'
 * device lookup, stamped on each record gg_account_commit makes. */
#define gg_cur_ctx (gg_self.ctx) /* base.h */
/* Bracket around one governed allocation (DESIGN.md §3): begin reserves the
 * charge, end commits + records or rolls back. begin is the one admission
 * path every shape takes (plain, pool, graph launch): try; reconcile the
 * device's pools and reclaim dead members' charges, try again; wait
 * (ON_LIMIT=wait); else refuse, counted and dumped. 0 or -1. */
int gg_account_begin(int dev, uint64_t charge);
/* begin past its first try: the retry, the wait, the refusal. */
int gg_account_begin_slow(int dev, uint64_t charge);
/* begin, inline in the allocation hooks (issue 24: the hook, begin and the
 * shape's begin were three frames on every allocation): the first try, and
 * the footprint's tick, with everything else out of line. b and lim: dev's
 * budget and its ceiling, which the hook looked up (gg_bind_budget).
 * try_on is the first try alone: 1 granted, 0 for begin_slow. */
static inline __attribute__((always_inline)) int gg_account_try_on(int dev, struct gg_budget *b, uint64_t lim,
                                                                   uint64_t charge)
{
	/* A thread that allocates may free (ceiling.c): it is counted at its
	 * first grant, by the footprint's tick (its countdown starts far below
	 * zero), or at its first wait (account.c), so that the grant reads one
	 * per-thread word, not two (issue 24). A waiter that looks between a
	 * thread's first grant and its tick sees it not yet counted, and may
	 * give up early: what GPUGUARD_ON_LIMIT=fail does, as for a thread
	 * whose first call is a free (ceiling.c). */
	if (GG_LIKELY(gg_ceiling_grant(b, charge, lim) == GG_VERDICT_GRANTED)) {
		gg_footprint_tick(dev, charge); /* a reconcile every so many MiB (footprint.c) */
		/* Near the ceiling, the runtime charge is read fresh before the
		 * grant stands: the ticks are rate-limited, and growth between
		 * them (libraries loaded lazily) must not take the last bytes. */
		if (GG_LIKELY(!gg_ceiling_near) || gg_footprint_near_slow(dev, charge) == 0)
			return 1;
	}
	return 0;
}
static inline __attribute__((always_inline)) int gg_account_begin_on(int dev, struct gg_budget *b, uint64_t lim,
                                                                     uint64_t charge)
{
	return GG_LIKELY(gg_account_try_on(dev, b, lim, charge)) ? 0 : gg_account_begin_slow(dev, charge);
}
/* begin_on for a request the caller has not noted (dump.h): noted only
 * past the first try, where a refusal may name it, not on every
 * allocation (issue 24: two stores into the thread's block a request). */
static inline __attribute__((always_inline)) int gg_account_begin_noting(int dev, struct gg_budget *b, uint64_t lim,
                                                                         uint64_t charge, enum gpuguard_api api,
                                                                         uint64_t size)
{
	if (GG_LIKELY(gg_account_try_on(dev, b, lim, charge)))
		return 0;
	gg_dump_note_request(api, size);
	return gg_account_begin_slow(dev, charge);
}
static inline __attribute__((always_inline)) int gg_account_begin_inline(int dev, uint64_t charge)
{
	struct gg_budget *b = gg_ceiling_budget(dev);
	return gg_account_begin_on(dev, b, gg_ceiling_budget_limit(b), charge);
}
/* Records an allocation the driver made (after begin granted its charge,
 * or for one the pool or nobody charges: charge 0): the record, the
 * statistics, the history's event. */
void gg_account_commit(int dev, enum gg_key_ns ns, uint64_t raw, uint64_t size, enum gpuguard_api api, uint64_t charge);
/* A commit whose record of key found no room anywhere, or whose key is a
 * slot state, never stored (account.c). */
void gg_account_commit_unrecorded(uint64_t key);
/* commit, inline in the allocation hooks' common ends (gg_alloc_end,
 * gg_pool_alloc_end): out of line it was a frame of its own, which saved
 * six registers for its calls (the clock, and the cold ones) and took its
 * six arguments into them, about 21 instructions an allocation (issue 24).
 * The hook has saved its registers already, and keeps dev, size and
 * charge in them across the driver call. Its stack is taken from the
 * hook's frame: one frame less for the unwinder to step over. */
static inline __attribute__((always_inline)) void gg_account_commit_stack(int dev, enum gg_key_ns ns, uint64_t raw,
                                                                          uint64_t size, enum gpuguard_api api,
                                                                          uint64_t charge, uint16_t stack)
{
	/* The record as its slot's words, in registers (table.h): the meta
	 * word is ctx, dev, api, flags, spare 0 and the stack id. */
	uint64_t t_ms = gg_now_ms();
	uint8_t flags = (uint8_t)(!charge          ? 0
	                          : charge == size ? GG_REC_CHARGED | GG_REC_CHARGE_IS_SIZE
	                                           : GG_REC_CHARGED);
	struct gg_slot_words w;
	w.key = gg_key(ns, raw);
	w.size = size;
	w.ids = gg_table_ids(gg_gettid(), t_ms);
	w.meta = gg_table_meta(gg_cur_ctx, (uint8_t)dev, (uint8_t)api, flags, 0, stack);
	gg_ceiling_count_alloc(dev, size);
	gg_footprint_after(dev, charge); /* one thread-local load, unless a probe waits */
	/* The record goes in before its event is claimed, as a free's event
	 * follows its record's removal (forgotten, below): a dump's cut
	 * (dump.c, settle_cut) then sees every call that was in flight at
	 * its moment either on both sides of it, or with its event after it,
	 * which the cut undoes from the copy. With the event first, an
	 * allocation whose insert came after the copy had walked past its
	 * slot was in the history but in no dump: the dump listed 64 MiB
	 * less than its history added up to (t_postmortem's churn cases,
	 * about 1 run in 12 under load). No other thread can free the
	 * address before its event: we have not returned it yet. */
	/* No room: said at once (a warning nothing else waits on), so that
	 * no flag lives on to the end (issue 24: 3 instructions a call). */
	if (GG_UNLIKELY(!gg_table || gg_table_insert_words(gg_table, &w) < 0))
		gg_account_commit_unrecorded(w.key);
	gg_history_event(GG_HIST_ALLOC, dev, api, raw, size, stack, t_ms); /* the record's clock reading */
	gg_dump_arm();
}
/* Two copies of the commit: with stacks off, its stack id is the constant
 * 0, so the meta word's stack field and the history's site-row test fold
 * away, and no stack slot holds them (issue 24). */
static inline __attribute__((always_inline)) void gg_account_commit_inline(int dev, enum gg_key_ns ns, uint64_t raw,
                                                                           uint64_t size, enum gpuguard_api api,
                                                                           uint64_t charge)
{
	if (!gg_stack_want) {
		gg_account_commit_stack(dev, ns, raw, size, api, charge, 0);
		return;
	}
	uint32_t st = gg_stack_take();
	/* no stack rather than another's */
	gg_account_commit_stack(dev, ns, raw, size, api, charge, (uint16_t)(st <= 0xffff ? st : 0));
}
void gg_account_rollback(int dev, uint64_t charge, int driver_oom);
/* A refusal: counted under why, then dumped (rate-limited). */
void gg_account_refuse(int dev, enum gpuguard_refusal why);
/* Removes the record of raw (before the driver frees it), its event said
 * (GG_REC_FREE_SAID set). 1 if found. */
int gg_account_forget(enum gg_key_ns ns, uint64_t raw, struct gg_record *out);
/* After the driver's free: settles the books, or puts the record back. */
void gg_account_freed(const struct gg_record *rec, int ok);
/* The address a record's key names (its namespace bits cleared). */
static inline uint64_t gg_account_free_raw(const struct gg_record *rec)
{
	return rec->key ^ ((rec->key >> 62) << 62);
}
/* forget's remove that missed: looks again once pool.c's flagging, which
 * may have held the record out of the table, is done (account.c). */
int gg_account_forget_missed(uint64_t key, struct gg_record *out, uint64_t gen);
/* All of forget past the table's fast remove (rc, h and top its, table.h):
 * the rest of the table, then gg_account_forget_missed. One call, so that
 * gen and out live across no call in the free hook (issue 24: two saved
 * registers less). */
int gg_account_forget_slow(uint64_t key, struct gg_record *out, uint64_t gen, uint64_t h, unsigned top, int rc);
/* forget and freed, inline in the free hooks (issue 24: two frames less
 * on every free), forget with the table's fast remove
 * (gg_table_remove_fast: its call, frame and arguments, about 14 a pair);
 * freed's uncommon cases (the driver refused, a destroyed pool's block, a
 * record taken out by ctx.c) are gg_account_freed's. */
static inline __attribute__((always_inline)) int gg_account_forget_inline(enum gg_key_ns ns, uint64_t raw,
                                                                          struct gg_record *out)
{
	gg_ceiling_note_thread(); /* a thread that frees may free again */
	/* Read once: the seq_cst load below would make the compiler read it
	 * again for the remove (issue 24). */
	struct gg_table *t = gg_table;
	if (!t)
		return 0;
	/* seq_cst: the first of the pair gg_account_forget_missed completes
	 * (pool.c's flagging). */
	uint64_t gen = atomic_load_explicit(&gg_pool_flag_gen, memory_order_seq_cst);
	uint64_t key = gg_key(ns, raw);
	uint64_t h = 0;
	unsigned top = 0;
	int rc = gg_table_remove_fast(t, key, out, &h, &top);
	if (GG_UNLIKELY(rc <= 0) && !gg_account_forget_slow(key, out, gen, h, top, rc))
		return 0;
	/* The free's event is claimed as soon as its record is out of the
	 * table, before the driver call (the address is not reusable until
	 * then). A dump's cut (dump.c, settle_cut) whose copy of the table no
	 * longer holds the record then finds the event when it reads the
	 * history, unless this thread stops between the two for longer than
	 * the whole copy. Claimed after the driver's free, as it was, the
	 * event was missed whenever the free was still inside the driver. */
	gg_history_event(GG_HIST_FREE, out->dev, (enum gpuguard_api)out->api, raw, out->size, out->stack,
	                 GG_HIST_NOW); /* raw: the record's key less its namespace */
	/* The record comes out with its flags as the table kept them, not
	 * yet GG_REC_FREE_SAID: the common end (gg_account_freed_fast) then
	 * tests them for "nothing but the charge" in one, and the bit is set
	 * only where gg_account_freed reads it (gg_account_freed_inline,
	 * gg_free_end, gg_account_forget). Set here, it was a store before
	 * the driver call and a mask and compare after (issue 24: 3 a pair). */
	return 1;
}
/* What a charged record's free refunds: its charge, the rule's result for
 * its api and size (every charged commit is charged exactly that), read
 * from the record when commit found it equal to the size. */
static inline uint64_t gg_account_charge_of(const struct gg_record *rec)
{
	if (GG_LIKELY(rec->flags & GG_REC_CHARGE_IS_SIZE))
		return rec->size;
	return gg_ceiling_charge_size((enum gpuguard_api)rec->api, rec->size);
}
/* freed's common case, for a record gg_account_forget_inline took out:
 * the driver freed it, its event is said (forget), charged or not,
 * nothing else flagged. 1 when it settled the books; 0 leaves them to
 * gg_account_freed, with GG_REC_FREE_SAID set first (and a record not
 * found, GG_REC_NONE, to the caller: gg_free_end). */
static inline __attribute__((always_inline)) int gg_account_freed_fast(const struct gg_record *rec, int ok)
{
	if (GG_LIKELY(ok && !(rec->flags & ~(GG_REC_CHARGED | GG_REC_CHARGE_IS_SIZE)))) {
		/* One device address for the release's budget and the
		 * stripe, kept in a register between them (issue 24) */
		struct gg_device *d = gg_ceiling_device(rec->dev);
		if (rec->flags & GG_REC_CHARGED)
			gg_ceiling_release_inline(d, gg_account_charge_of(rec));
		gg_ceiling_count_free_on(d);
		return 1;
	}
	return 0;
}
static inline __attribute__((always_inline)) void gg_account_freed_inline(struct gg_record *rec, int ok)
{
	if (!gg_account_freed_fast(rec, ok)) {
		rec->flags |= GG_REC_FREE_SAID; /* forget said its event */
		gg_account_freed(rec, ok);
	}
}
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
