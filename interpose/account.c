/* gpuguard: the bookkeeping every hook shares (DESIGN.md §3). Allocate:
 * reserve against the ceiling, call the driver, then record or roll back.
 * Free: take the record out first, call the driver, put it back if the
 * driver refused. Unknown pointers pass through and are only counted. */
#include "account.h"
#include "base.h"
#include "ceiling.h"
#include "dump.h"
#include "footprint.h"
#include "history.h"
#include "log.h"
#include "options.h"
#include "pool.h"
#include "shared.h"
#include "stack.h"
#include "table.h"

/* Before refusing: count what pools on this device released at
 * synchronisation points we did not see, and what dead processes of the
 * pod held. Then try again. */
static enum gg_verdict retry_reserve(int dev, uint64_t charge)
{
	/* A refusal is a reconcile moment: the runtime charge is set to what
	 * the driver holds now, which may take it down (a context destroyed)
	 * as well as up (footprint.c). */
	gg_footprint_reconcile(dev, GG_FP_MAY_LOWER);
	gg_pool_reconcile_device(dev);
	gg_shared_reclaim();
	return gg_ceiling_try_reserve(dev, charge);
}

int gg_hook_sleep(const struct gg_budget *b, uint32_t seen, uint64_t deadline_ns)
{
	/* Asleep for room (ON_LIMIT=wait), a hook runs no driver code and
	 * holds no lock of ours: a signal handler that allocates now is not
	 * the driver re-entering us, so it must be governed, not passed
	 * through (issue 10, finding 9). The hook's per-thread state is put
	 * back afterwards: the handler's own hook sets and clears it. */
	int active = gg_hook_active;
	uint8_t runtime = gg_cur_runtime;
	uint16_t ctx = gg_cur_ctx;
	enum gpuguard_api req_api;
	uint64_t req_size;
	gg_dump_noted_request(&req_api, &req_size);
	gg_hook_active = 0;
	/* signal fences: a handler on this thread sees the stores above
	 * before the sleep begins, and ours below happen after it ends (no
	 * other thread reads these thread-local words). */
	atomic_signal_fence(memory_order_seq_cst);
	int rc = gg_ceiling_wait_sleep(b, seen, deadline_ns);
	atomic_signal_fence(memory_order_seq_cst);
	gg_hook_active = active;
	gg_cur_runtime = runtime;
	gg_cur_ctx = ctx;
	gg_dump_note_request(req_api, req_size);
	return rc;
}

/* GPUGUARD_ON_LIMIT=wait: waits for room and reserves. The verdict: granted,
 * or the refusal that stands (the last retry's; `v` when not waiting at all:
 * fail mode, a configuration that fails closed, or a request past the
 * ceiling itself). */
static enum gg_verdict wait_reserve(int dev, uint64_t charge, enum gg_verdict v)
{
	/* The budget, looked up once: its waiting words are entered and left
	 * as a pair, also when a lost pod region rebinds the device
	 * meanwhile (then the wait moves to the device's own books, and the
	 * lost region's words are not touched again; before, the leave
	 * decremented the local budget's waiters, which another thread
	 * waiting there may have raised). The retry reserves against what
	 * the device is bound to now. */
	struct gg_budget *b = gg_ceiling_budget(dev);
	if (gg_opt.wait_ms == 0 || v == GG_VERDICT_CONFIG || !gg_ceiling_could_fit(b, charge))
		return v;
	/* GPUGUARD_ON_LIMIT=wait: sleep until memory comes back anywhere in
	 * the budget or the time is up (the protocol is in ceiling.c), or
	 * until nobody is left who could free any (ceiling.c, "Who could
	 * free"): then waiting cannot help, and giving up at once is what
	 * keeps a lone process, or two that wait on each other, from
	 * stalling for the whole duration. */
	gg_ceiling_note_thread(); /* the waiter itself, whichever path it came by */
	uint64_t start = gg_mono_ns(), deadline = start + gg_opt.wait_ms * 1000000ull;
	uint32_t since = gg_ceiling_wait_enter(b);
	for (;;) {
		if (GG_UNLIKELY(gg_ceiling_wait_moved(dev, b))) {
			/* The pod region was lost meanwhile: its words are
			 * not ours any more; wait on what the device is
			 * bound to now (this process's own books). */
			gg_ceiling_wait_leave(b);
			b = gg_ceiling_budget(dev);
			since = gg_ceiling_wait_enter(b);
		}
		uint32_t seen = gg_ceiling_wake_seq(b);
		v = retry_reserve(dev, charge);
		if (v == GG_VERDICT_GRANTED || v == GG_VERDICT_CONFIG)
			break;
		if (gg_ceiling_give_up(b, seen, since))
			break;
		if (gg_hook_sleep(b, seen, deadline) != 0) /* a signal handler's allocation is governed */
			break;
	}
	gg_ceiling_wait_leave(b);
	gg_ceiling_count_wait(dev, b, gg_mono_ns() - start);
	return v;
}

/* Apart from gg_account_begin_inline, so that the granted path saves no
 * more registers than its own calls need (issue 24: 6 pushes and pops a
 * pair). */
int gg_account_begin_slow(int dev, uint64_t charge)
{
	enum gg_verdict v = retry_reserve(dev, charge);
	if (v != GG_VERDICT_GRANTED)
		v = wait_reserve(dev, charge, v);
	if (v == GG_VERDICT_GRANTED)
		return 0;
	gg_account_refuse(dev, gg_verdict_reason(v));
	return -1;
}

int gg_account_begin(int dev, uint64_t charge)
{
	return gg_account_begin_inline(dev, charge);
}

void gg_account_refuse(int dev, enum gpuguard_refusal why)
{
	gg_ceiling_count_refusal(dev, why);
	gg_dump_on_refusal(dev, why);
}

void gg_account_commit(int dev, enum gg_key_ns ns, uint64_t raw, uint64_t size, enum gpuguard_api api, uint64_t charge)
{
	gg_account_commit_inline(dev, ns, raw, size, api, charge);
}

void gg_account_commit_unrecorded(uint64_t key)
{
	/* relaxed, both: once-only flags guarding a warning; they order
	 * nothing. */
	static _Atomic int warned, warned_key;
	if (key <= GG_TABLE_BUSY) {
		/* The runtime handed out 1 or 2 (shape.c: gg_alloc_settle,
		 * gg_pool_alloc_end_slow), which the table keeps as its slots'
		 * states, never as a key. No runtime does; one that did would
		 * otherwise be reported as a full table. Its free goes to the
		 * runtime unseen (GG_VENEER_FREE, cuMemFreeAsync), so the
		 * charge stays, on the side of refusing. */
		if (!atomic_exchange_explicit(&warned_key, 1, memory_order_relaxed))
			gg_log(GG_LOG_WARN,
			       "the runtime returned %#llx as an allocation's address; gpuguard cannot track "
			       "it, and its charge stays until exit",
			       (unsigned long long)key);
		return;
	}
	/* Not even the overflow area had room (mmap failed). The allocation
	 * works and stays charged, but we cannot refund it at its free: the
	 * ceiling then errs on the safe side. Say so once. */
	if (!atomic_exchange_explicit(&warned, 1, memory_order_relaxed))
		gg_log(GG_LOG_WARN, "allocation table and overflow area full; "
		                    "further allocations stay charged until exit");
}

void gg_account_rollback(int dev, uint64_t charge, int driver_oom)
{
	gg_ceiling_release(dev, charge);
	gg_footprint_after(dev, 0);
	if (driver_oom)
		gg_account_refuse(dev, GPUGUARD_REFUSED_DRIVER);
}

/* A remove that missed while pool.c's flagging may have held the record out
 * of the table: waits for the flagging and looks again. seq_cst, the
 * second load: against the flagging's increments around its remove and
 * insert (pool.c): a remove that missed a record the flagging held out saw
 * the count odd, or saw it move. Apart from gg_account_forget_inline: a
 * free of an unknown pointer is rare, and the fast path then needs no more. */
__attribute__((noinline)) int gg_account_forget_missed(uint64_t key, struct gg_record *out, uint64_t gen)
{
	if (!(gen & 1) && atomic_load_explicit(&gg_pool_flag_gen, memory_order_seq_cst) == gen)
		return 0;
	gg_pool_flagging_wait();
	return gg_table_remove(gg_table, key, out);
}

__attribute__((noinline)) int gg_account_forget_slow(uint64_t key, struct gg_record *out, uint64_t gen, uint64_t h,
                                                     unsigned top, int rc)
{
	if (rc == 0 && gg_table_remove_slow(gg_table, key, h, top, out))
		return 1;
	return gg_account_forget_missed(key, out, gen);
}

int gg_account_forget(enum gg_key_ns ns, uint64_t raw, struct gg_record *out)
{
	if (!gg_account_forget_inline(ns, raw, out))
		return 0;
	out->flags |= GG_REC_FREE_SAID; /* for gg_account_freed: its event is said */
	return 1;
}

void gg_account_freed(const struct gg_record *rec, int ok)
{
	if (!ok) {
		/* The driver kept the memory: the record goes back, books
		 * unchanged; the free's event, already said, is answered by an
		 * allocation's, claimed after the insert as at any commit. */
		struct gg_record back = *rec;
		back.flags &= (uint8_t)~GG_REC_FREE_SAID;
		if (gg_table)
			gg_table_insert(gg_table, &back);
		if (rec->flags & GG_REC_FREE_SAID)
			gg_history_add(GG_HIST_ALLOC, rec->dev, (enum gpuguard_api)rec->api, gg_account_free_raw(rec),
			               rec->size, rec->stack);
		return;
	}
	if (rec->flags & GG_REC_CHARGED)
		gg_ceiling_release(rec->dev, gg_account_charge_of(rec));
	if (rec->flags & GG_REC_POOL_GONE)
		gg_pool_gone_block_freed(rec->key); /* the destroyed pool's memory, at its last block */
	gg_ceiling_count_free(rec->dev, rec->size);
	if (!(rec->flags & GG_REC_FREE_SAID)) /* a context's records, taken out by ctx.c */
		gg_history_add(GG_HIST_FREE, rec->dev, (enum gpuguard_api)rec->api, gg_account_free_raw(rec), rec->size,
		               rec->stack);
}

void gg_account_host_alloc(uint64_t raw, uint64_t size)
{
	struct gg_record r = {
	    .key = gg_key(GG_NS_PTR, raw) ^ GG_HOST_KEY_BIT,
	    .size = size,
	    .ids = gg_table_ids(gg_gettid(), gg_now_ms()),
	    .ctx = gg_cur_ctx,
	    .flags = GG_REC_HOST,
	};
	gg_dump_pinned((int64_t)size, 1);
	gg_shared_note_pinned((int64_t)size);
	if (gg_table)
		gg_table_insert(gg_table, &r);
}

int gg_account_host_forget(uint64_t raw, struct gg_record *out)
{
	return gg_table && gg_table_remove(gg_table, gg_key(GG_NS_PTR, raw) ^ GG_HOST_KEY_BIT, out);
}

void gg_account_host_freed(const struct gg_record *rec, int ok)
{
	if (!ok) {
		if (gg_table)
			gg_table_insert(gg_table, rec);
		return;
	}
	gg_dump_pinned(-(int64_t)rec->size, -1);
	gg_shared_note_pinned(-(int64_t)rec->size);
}

void gg_account_untracked(int dev)
{
	if (dev >= 0 && dev < GG_MAX_DEVICES)
		atomic_fetch_add_explicit(&gg_devices[dev].untracked_frees, 1, memory_order_relaxed);
}

void gg_account_meminfo(int dev, size_t *free_bytes, size_t *total_bytes)
{
	/* a thread that asks how much is free may free too (ceiling.c) */
	gg_ceiling_note_thread();
	gg_ceiling_budget(dev); /* pod scope: the pod's budget from the first query on */
	/* A percentage ceiling can be resolved from the total we were just given;
	 * pools released at syncs we did not see are credited first, so free
	 * moves as soon as memory really comes back. */
	if (gg_ceiling_unresolved(dev))
		gg_ceiling_resolve(dev, *total_bytes);
	gg_pool_reconcile_device(dev);
	gg_shared_probe(); /* dead members' memory, rate-limited */
	uint64_t f, t;
	gg_ceiling_meminfo(dev, *free_bytes, *total_bytes, &f, &t);
	*free_bytes = f;
	*total_bytes = t;
}

size_t gg_account_total(int dev, size_t physical)
{
	gg_ceiling_budget(dev);
	if (gg_ceiling_unresolved(dev))
		gg_ceiling_resolve(dev, physical);
	uint64_t f, t;
	gg_ceiling_meminfo(dev, physical, physical, &f, &t);
	return t;
}
