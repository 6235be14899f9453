/* gpuguard: the hooks' bodies, one core function per shape, written once
 * for every runtime. A hook file lends its codes and the few runtime calls
 * the books need (struct gg_runtime); each hook is a veneer that resolves
 * the real function, fills the shape's arguments and calls the shape around
 * the real call. CUDA and HIP share these bodies, so they cannot drift. */
#include <string.h>

#include "shape.h"
#include "account.h"
#include "base.h"
#include "ceiling.h"
#include "dump.h"
#include "graph.h"
#include "handles.h"
#include "init.h"
#include "log.h"
#include "meminfo.h"
#include "pool.h"
#include "table.h"
#include "vmm.h"

_Static_assert(sizeof(void *) == sizeof(uint64_t), "an out slot is 8 bytes");

_Atomic int gg_hooks_ready;

void gg_enter_first(void)
{
	gg_init_done();
	gg_first_call();
	/* relaxed: both once-set flags, read after gg_init_done's acquire of
	 * the finished initialisation (which set gg_inert, if ever). release:
	 * publishes that acquire to every hook that reads 1 (GG_ENTER). */
	if (!atomic_load_explicit(&gg_inert, memory_order_relaxed) &&
	    atomic_load_explicit(&gg_gpu_called, memory_order_relaxed))
		atomic_store_explicit(&gg_hooks_ready, 1, memory_order_release);
}

void gg_enter_not_ready(void)
{
	/* acquire: GG_HOOKS_READY's, as any hook read it before (shape.h);
	 * the thread's later hooks follow this load in program order. */
	if (GG_HOOKS_READY())
		gg_self.ready = 1;
	else
		gg_enter_first();
}

int gg_enter_gate_slow(uint8_t runtime)
{
	if (gg_hook_active)
		return 0;
	int ready = GG_HOOKS_READY(); /* acquire: as in gg_enter_not_ready */
	if (!ready && gg_in_hook)
		return 0; /* an inert copy */
	gg_hook_active = 1;
	gg_cur_runtime = runtime;
	if (ready)
		gg_self.ready = 1;
	else
		gg_enter_first();
	return 1;
}

/* GG_ENTER for the runtime that lent rt (this file is no hook file). */
static void enter(const struct gg_runtime *rt)
{
	GG_ENTER(rt->runtime);
}

static uint64_t out_value(const void *out)
{
	uint64_t v;
	memcpy(&v, out, sizeof(v)); /* a device pointer, a void * or a handle */
	return v;
}

void gg_bind_device(const struct gg_runtime *rt, int dev)
{
	gg_bind(rt, dev);
}

/* ---- allocate ----------------------------------------------------------- */

int gg_alloc_begin(const struct gg_runtime *rt, struct gg_alloc *a)
{
	return gg_alloc_begin_inline(rt, a);
}

int gg_alloc_settle(const struct gg_runtime *rt, struct gg_alloc *a, int rc)
{
	uint64_t raw = 0;
	if (rc == rt->ok)
		memcpy(&raw, a->out, sizeof(raw)); /* as gg_alloc_end read it */
	if (!raw) {
		/* A refusal by the runtime names the request: begin noted it
		 * only when it went past its first try (account.h). */
		gg_dump_note_request(a->api, a->size);
		gg_account_rollback(a->dev, a->charge, rc == rt->oom);
		return rc;
	}
	if (a->pitch) {
		/* The runtime chose the pitch: settle the charge to the real size. */
		a->size = (uint64_t)*a->pitch * a->rows;
		uint64_t charge = gg_ceiling_charge_size(a->api, a->size);
		if (charge > a->charge)
			gg_ceiling_force(a->dev, charge - a->charge);
		else
			gg_ceiling_release(a->dev, a->charge - charge);
		a->charge = charge;
	}
	/* Else raw 1 or 2 (gg_alloc_end): committed as the inline end would,
	 * and kept charged, as the table has no slot for such a key. */
	if (a->ns == GG_NS_VMM)
		gg_handle_created(raw, GG_HANDLE_CHARGED);
	gg_account_commit(a->dev, a->ns, raw, a->size, a->api, a->charge);
	return rc;
}

/* ---- allocate from a pool ------------------------------------------------ */

/* At the ceiling the runtime could not serve the request from the warm
 * reserve and grew the pool instead: that growth does not fit. Hand the
 * block back, let the stream reach the free, trim the pool to what it held.
 * Only on this refusal path. 0 when undone. */
static int undo_growth(const struct gg_runtime *rt, struct gg_pool_alloc *pa, uint64_t raw)
{
	if (rt->free_async(raw, pa->stream) != 0)
		return -1;
	rt->sync();
	/* The entry's handle, not pa->pool, which a request the hook found
	 * the entry for never sets (shape.h, gg_pool_alloc_begin_at). Stable:
	 * we hold the entry's lock, without which it is never forgotten
	 * (pool.c's forget_keeping). relaxed: as in pool.c's reads of it. */
	rt->trim(atomic_load_explicit(&pa->p->handle, memory_order_relaxed), pa->before);
	return 0;
}

int gg_pool_alloc_end_slow(const struct gg_runtime *rt, struct gg_pool_alloc *pa, int rc, uint64_t raw,
                           enum gg_verdict v, uint64_t grew)
{
	struct gg_alloc *a = &pa->a;
	if (!pa->p) {
		if (!raw || a->dev < 0)
			return gg_alloc_end(rt, a, rc);
		gg_account_commit(a->dev, GG_NS_PTR, raw, a->size, a->api, 0); /* charged, not refunded */
		return rc;
	}
	uint64_t credit = pa->reserved;
	if (raw && pa->reserved == 0 && v != GG_VERDICT_GRANTED) {
		/* Served from the warm reserve, unreserved, and the read after
		 * it (gg_pool_alloc_end, inline) refused the growth under v
		 * (granted: a raw of 1 or 2, sent here unread; the settle below
		 * reads, and its commit finds no room for such a key):
		 * the card holds the growth now, past the ceiling, until it is
		 * handed back: a neighbour's OOM on a shared card. Charged for
		 * that moment, so pool_overshoot counts it and the peak shows
		 * it even when the hand-back succeeds (issue 25, item 5: 1,400
		 * MiB held under 1 GiB with pool_overshoot 0). */
		gg_ceiling_force_over(a->dev, grew);
		if (undo_growth(rt, pa, raw) == 0) {
			/* The out pointer names freed memory now: null it, so a
			 * caller that reads it despite the error reads no live
			 * block. */
			memset(a->out, 0, sizeof(uint64_t));
			raw = 0;
			rc = rt->oom;
			gg_account_refuse(a->dev, gg_verdict_reason(v));
		}
		/* Charged now: the settle below reads the pool and gives back
		 * what the hand-back returned. What the card still holds of
		 * grew (growths of earlier requests that skipped their read,
		 * pool.c's may_skip_read, backing live blocks) stays charged as
		 * it is, not forced over a second time: released and charged
		 * again here, the same bytes were counted twice in
		 * pool_overshoot (t_pod_lcuda_lnvml,
		 * a_pools_late_read_is_bounded_and_counted: 14 MiB for 8). */
		credit = grew;
	}
	gg_pool_end(pa->p, credit);
	if (raw)
		gg_account_commit(a->dev, GG_NS_PTR, raw, a->size, a->api, 0); /* the pool carries the charge */
	else if (rc == rt->oom && pa->reserved != 0)
		gg_account_refuse(a->dev, GPUGUARD_REFUSED_DRIVER);
	return rc;
}

/* ---- free ------------------------------------------------------------------ */

void gg_free_untracked(const struct gg_runtime *rt, const struct gg_free *f)
{
	/* A graph allocation's address is the graph reserve's (graph.c). */
	if (f->ns == GG_NS_PTR && gg_graph_va_known(f->raw))
		return;
	gg_account_untracked(rt->device());
}

void gg_release_begin(struct gg_release *r, uint64_t handle)
{
	r->tracked = gg_handle_release_begin(handle, &r->op);
	if (!r->tracked)
		gg_free_begin(&r->f, GG_NS_VMM, handle);
}

int gg_release_end(const struct gg_runtime *rt, struct gg_release *r, int rc)
{
	if (!r->tracked)
		return gg_free_end(rt, &r->f, rc);
	gg_handle_release_end(&r->op, rc == rt->ok);
	return rc;
}

void gg_unmap_begin(struct gg_vmm_op *op, uint64_t ptr, uint64_t size)
{
	/* The last unmap of a released handle frees it: its record leaves
	 * before the runtime can reuse the handle value (DESIGN.md §3). */
	gg_handle_unmap_begin(ptr, size, op);
}

int gg_unmap_end(const struct gg_runtime *rt, struct gg_vmm_op *op, int rc, uint64_t ptr, uint64_t size, int range)
{
	gg_handle_unmap_end(op, rc == rt->ok);
	if (rc == rt->ok) {
		if (range)
			gg_vmm_freed(ptr);
		else
			gg_vmm_mapped(ptr, size, 0);
	}
	return rc;
}

/* ---- pinned host memory ------------------------------------------------- */

void gg_host_alloc_begin(const struct gg_runtime *rt)
{
	if (rt->host_in_ctx)
		rt->device(); /* sets gg_cur_ctx */
	else
		gg_cur_ctx = 0; /* not a device's memory: no reset takes it */
}

int gg_host_alloc_end(const struct gg_runtime *rt, int rc, const void *out, uint64_t size)
{
	uint64_t p = rc == rt->ok ? out_value(out) : 0;
	if (p)
		gg_account_host_alloc(p, size);
	return rc;
}

void gg_host_free_begin(struct gg_free *f, uint64_t raw)
{
	f->raw = raw;
	if (!gg_account_host_forget(raw, &f->rec))
		f->rec.flags = 0; /* found: GG_REC_HOST (struct gg_free) */
}

int gg_host_free_end(const struct gg_runtime *rt, struct gg_free *f, int rc)
{
	if (f->rec.flags & GG_REC_HOST)
		gg_account_host_freed(&f->rec, rc == rt->ok);
	return rc;
}

/* ---- memory info ------------------------------------------------------- */

int gg_meminfo_end(const struct gg_runtime *rt, int rc, size_t f, size_t t, size_t *free_out, size_t *total_out)
{
	if (rc != rt->ok)
		return rc;
	int dev = rt->device();
	if (dev >= 0) {
		gg_account_meminfo(dev, &f, &t);
		gg_dump_note_meminfo(dev, f, t);
	}
	if (free_out)
		*free_out = f;
	if (total_out)
		*total_out = t;
	return rc;
}

int gg_total_end(const struct gg_runtime *rt, int rc, size_t *bytes, int dev)
{
	if (rc == rt->ok)
		*bytes = gg_account_total(dev, *bytes);
	return rc;
}

/* ---- pool management --------------------------------------------------- */

int gg_pool_created(const struct gg_runtime *rt, int rc, const void *pool_out, int dev)
{
	if (rc != rt->ok || gg_in_hook || dev < 0 || dev >= GG_MAX_DEVICES)
		return rc;
	enter(rt);
	gg_pool_get((void *)(uintptr_t)out_value(pool_out), dev, rt->pool_query);
	GG_LEAVE();
	return rc;
}

int gg_pool_trimmed(const struct gg_runtime *rt, int rc, void *pool)
{
	/* Trimming is how torch.cuda.empty_cache() gives a cudaMallocAsync pool
	 * back; refund it at once so the next request sees the room. */
	int dev = gg_pool_device(pool);
	if (rc == rt->ok && dev >= 0)
		gg_pool_reconcile_device(dev);
	return rc;
}

void gg_pool_destroy_enter(const struct gg_runtime *rt, void *pool, struct gg_pool_doom *d)
{
	/* Live blocks keep their memory past the destroy (pool.c). Without
	 * pool_owner (ROCm does not answer HIP_POINTER_ATTRIBUTE_MEMPOOL_HANDLE)
	 * they cannot be told apart: what they hold stays charged. */
	gg_pool_destroy_begin(pool, rt->pool_owner, rt->pool_trim, d);
}

int gg_pool_destroy_leave(const struct gg_runtime *rt, void *pool, struct gg_pool_doom *d, int rc)
{
	gg_pool_destroy_end(pool, d, rc == rt->ok);
	return rc;
}

/* ---- note after success ------------------------------------------------- */

int gg_note_synced(const struct gg_runtime *rt, int rc)
{
	if (rc != rt->ok || gg_in_hook)
		return rc;
	enter(rt);
	gg_pool_sync_point();
	GG_LEAVE();
	return rc;
}

int gg_note_retained(const struct gg_runtime *rt, int rc, const void *handle_out)
{
	if (rc != rt->ok || !handle_out || gg_in_hook)
		return rc;
	enter(rt);
	gg_handle_retained(out_value(handle_out));
	GG_LEAVE();
	return rc;
}

int gg_note_imported(const struct gg_runtime *rt, int rc, const void *handle_out)
{
	if (rc != rt->ok || !handle_out || gg_in_hook)
		return rc;
	enter(rt);
	gg_handle_created(out_value(handle_out), GG_HANDLE_IMPORTED);
	GG_LEAVE();
	return rc;
}

int gg_note_reserved(const struct gg_runtime *rt, int rc, const void *ptr_out, uint64_t size)
{
	if (rc != rt->ok || !ptr_out || gg_in_hook)
		return rc;
	enter(rt);
	gg_vmm_reserved(out_value(ptr_out), size);
	GG_LEAVE();
	return rc;
}

int gg_note_mapped(const struct gg_runtime *rt, int rc, uint64_t ptr, uint64_t size, uint64_t handle)
{
	if (rc != rt->ok || gg_in_hook)
		return rc;
	enter(rt);
	gg_handle_mapped(ptr, size, handle);
	gg_vmm_mapped(ptr, size, 1);
	GG_LEAVE();
	return rc;
}
