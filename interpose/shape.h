/* gpuguard: the hooks' bodies, one core function per shape (shape.c): the
 * runtime struct, the alloc and free brackets (their fast paths inline, so
 * that a record's stack is unwound from the hook itself) and GG_ENTER.
 * Included only by shape.c, the hook files and export.c. */
#ifndef GG_SHAPE_H
#define GG_SHAPE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "account.h"
#include "base.h"
#include "ceiling.h"
#include "dump.h"
#include "handles.h"
#include "init.h"
#include "log.h"
#include "pool.h"
#include "table.h"

/* Every hook runs inside GG_ENTER ... GG_LEAVE. A call made while a hook runs
 * on this thread (a runtime calling its own entry points, our helper calls)
 * sees gg_in_hook and passes straight through. runtime: the GG_RT_* whose
 * hook this is (a device bound for the pod is named by that runtime's
 * UUID), given by each caller; a hook file's veneers pass its
 * GG_VENEER_RUNTIME (veneer.h).
 *
 * gg_hooks_ready: 1 once initialisation is done, the first GPU call has
 * written what it held back, and this copy is not inert. Set once by
 * gg_enter_first, never cleared (a fork child keeps its parent's
 * initialisation). acquire: pairs with the release store there, made after
 * that thread's acquire of the finished initialisation, so a hook that sees
 * 1 sees what initialisation wrote.
 *
 * Each thread reads it with acquire until it sees 1, then notes that in its
 * own block (gg_self.ready, base.h): its later hooks come after that acquire
 * in its own program order, so they see what initialisation wrote without a
 * load of the shared word (issue 24). A fork child's thread keeps its
 * parent thread's block, and gg_hooks_ready too. So a hook's entry, once
 * ready, is one 16-bit compare of the thread's ready and re-entry bytes. */
extern _Atomic int gg_hooks_ready;
/* GG_ENTER's first calls on any thread: runs initialisation and the first
 * call's log release, then sets gg_hooks_ready when the copy governs. */
void gg_enter_first(void);
#define GG_HOOKS_READY() GG_LIKELY(atomic_load_explicit(&gg_hooks_ready, memory_order_acquire))
/* gg_self's ready and hook_active bytes as one word reads them when this
 * thread is ready and in no hook (both targets are little-endian; the
 * other order is spelt out for a big-endian build). */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define GG_GATE_OPEN 0x0100u
#else
#define GG_GATE_OPEN 0x0001u
#endif
_Static_assert(offsetof(struct gg_self, hook_active) == offsetof(struct gg_self, ready) + 1,
               "the gate reads ready and hook_active as one word");
static inline int gg_gate_open(void)
{
	uint16_t g;
	__builtin_memcpy(&g, &gg_self.ready, sizeof(g));
	return g == GG_GATE_OPEN;
}
/* GG_ENTER past its stores, on a thread not yet ready: gg_hooks_ready
 * read with acquire (then gg_self.ready set), else gg_enter_first. */
void gg_enter_not_ready(void);
#define GG_ENTER(runtime)                        \
	do {                                     \
		gg_hook_active = 1;              \
		gg_cur_runtime = (runtime);      \
		if (GG_UNLIKELY(!gg_self.ready)) \
			gg_enter_not_ready();    \
	} while (0)
/* A veneer's entry (below) past its gate: 0 when the call passes through
 * (re-entered, or an inert copy), else 1 after GG_ENTER's work. */
int gg_enter_gate_slow(uint8_t runtime);
static inline __attribute__((always_inline)) int gg_enter_gate(uint8_t runtime)
{
	if (GG_LIKELY(gg_gate_open())) {
		gg_hook_active = 1;
		gg_cur_runtime = runtime;
		return 1;
	}
	return gg_enter_gate_slow(runtime);
}
/* A veneer's entry: passes straight through (returns what pass_through
 * returns) when re-entered, or in an inert copy; else GG_ENTER. The inert
 * flag is read only while the hooks are not ready (ready implies governed). */
#define GG_ENTER_OR_PASS(runtime, pass_through) \
	do {                                    \
		if (!gg_enter_gate(runtime))    \
			return pass_through;    \
	} while (0)
#define GG_LEAVE() (gg_hook_active = 0)

/* What a runtime lends the shapes: its codes and the few calls the books
 * need. One per hook file (CUDA, HIP); the shapes never name a runtime. */
struct gg_runtime {
	uint8_t runtime; /* GG_RT_*, for gg_cur_runtime */
	int ok, oom;     /* the runtime's success and out-of-memory codes */
	/* Pinned host memory goes with the current context (freed by its
	 * destroy), so the host shape asks device() first; else it has none. */
	int host_in_ctx;
	/* The calling thread's device, or -1; sets gg_cur_ctx. */
	int (*device)(void);
	/* The context id of dev's memory, or NULL when device() and the hook's
	 * own lookups already set gg_cur_ctx. */
	uint16_t (*dev_ctx)(int dev);
	/* The card's physical size. 0 or -1. */
	int (*total)(int dev, uint64_t *bytes);
	gg_pool_reserved_fn pool_query;
	gg_pool_owner_fn pool_owner; /* NULL when the runtime cannot say */
	gg_pool_trim_fn pool_trim;   /* for a destroy */
	/* Undoing a pool's growth: free the block in stream order, wait for
	 * the stream, trim the pool to keep bytes. Each 0 or -1. */
	int (*free_async)(uint64_t ptr, void *stream);
	int (*sync)(void);
	int (*trim)(void *pool, uint64_t keep);
};

/* Before a charge on dev: resolves a percentage ceiling from the card's
 * size on first use (never from a constructor: no runtime calls there,
 * DESIGN.md §1), and sets the record's context (rt->dev_ctx), where the
 * runtime has none of its own. Inline on the allocation paths. */
/* gg_bind for a charge: dev's budget, bound now (gg_ceiling_budget), and
 * its ceiling, resolved first where it is still a percentage, looked up
 * once for the check and the reservation both (issue 24). */
static inline __attribute__((always_inline)) struct gg_budget *gg_bind_budget(const struct gg_runtime *rt, int dev,
                                                                              uint64_t *lim)
{
	struct gg_budget *b = gg_ceiling_budget(dev);
	uint64_t total;
	*lim = gg_ceiling_budget_limit(b);
	if (GG_UNLIKELY(*lim == GG_LIMIT_UNRESOLVED) && rt->total(dev, &total) == 0) {
		gg_ceiling_resolve(dev, total); /* on b->limit: dev is bound to b */
		*lim = gg_ceiling_budget_limit(b);
	}
	if (rt->dev_ctx)
		gg_cur_ctx = rt->dev_ctx(dev);
	return b;
}
static inline void gg_bind(const struct gg_runtime *rt, int dev)
{
	uint64_t total;
	if (GG_UNLIKELY(gg_ceiling_unresolved(dev)) && rt->total(dev, &total) == 0)
		gg_ceiling_resolve(dev, total);
	if (rt->dev_ctx)
		gg_cur_ctx = rt->dev_ctx(dev);
}
void gg_bind_device(const struct gg_runtime *rt, int dev);
/* Allocate (DESIGN.md §3): begin admits the charge (0 = go ahead, -1 =
 * refuse with rt->oom), the hook calls the runtime, end commits and records
 * or rolls back, and returns the code for the caller. A negative dev means
 * "not ours to govern" (no context, not device memory): the call passes
 * through. A result of zero from a successful call (no memory handed out)
 * is rolled back: nothing could ever free it. */
struct gg_alloc {
	int dev;
	enum gpuguard_api api;
	enum gg_key_ns ns;
	int charged; /* 0: recorded, never charged (managed memory, if told) */
	uint64_t size;
	void *out;           /* the runtime's out slot: 8 bytes, pointer or handle */
	const size_t *pitch; /* when the runtime picks a pitch: size = *pitch * rows */
	uint64_t rows;
	uint64_t charge; /* set by begin */
};
int gg_alloc_begin(const struct gg_runtime *rt, struct gg_alloc *a);
/* The same inline, where GG_ALLOC runs it in the hook (issue 24: a frame
 * less, and a gg_alloc the compiler keeps in registers). */
static inline __attribute__((always_inline)) int gg_alloc_begin_inline(const struct gg_runtime *rt, struct gg_alloc *a)
{
	a->charge = 0;
	if (a->dev < 0)
		return 0;
	uint64_t lim;
	struct gg_budget *b = gg_bind_budget(rt, a->dev, &lim);
	a->charge = a->charged ? gg_ceiling_charge_size(a->api, a->size) : 0;
	return gg_account_begin_noting(a->dev, b, lim, a->charge, a->api, a->size);
}
/* end's uncommon paths: a failure to roll back (raw 0), a pitch, or raw 1
 * or 2. It reads raw from a->out again, so that the hook keeps no copy of
 * it for the call (issue 24: a store a call). */
int gg_alloc_settle(const struct gg_runtime *rt, struct gg_alloc *a, int rc);
/* Inline, so that the record's stack is unwound from the hook itself: a
 * frame more costs the unwinder a step on every allocation. Always: with
 * commit inline in it, gcc took it out of line (a frame and its saved
 * registers again, issue 24). */
static inline __attribute__((always_inline)) int gg_alloc_end(const struct gg_runtime *rt, struct gg_alloc *a, int rc)
{
	if (a->dev < 0) {
		/* Not device memory. A VMM handle of host memory (NCCL 2.28's
		 * host buffers, cuMemCreate at a HOST_NUMA location) is never
		 * charged, but known, so that its release and unmaps are not
		 * counted as frees of memory we never saw. */
		uint64_t h = 0;
		if (a->ns == GG_NS_VMM && rc == rt->ok)
			__builtin_memcpy(&h, a->out, sizeof(h));
		if (h)
			gg_handle_created(h, GG_HANDLE_HOST);
		return rc;
	}
	uint64_t raw = 0;
	if (rc == rt->ok)
		__builtin_memcpy(&raw, a->out, sizeof(raw)); /* a device pointer, a void * or a handle */
	/* raw 1 and 2, never an address or a handle but table.h's slot
	 * states, go out of line with 0: then the insert below, for a plain
	 * pointer, drops its own test of the key (issue 24: 2 instructions),
	 * and settle commits them, whose insert finds no room for them. */
	if (GG_UNLIKELY(raw <= GG_TABLE_BUSY || a->pitch)) {
		/* A copy goes out of line, so that a's own address never leaves
		 * the hook: the compiler then keeps a in registers and folds
		 * the hook's constants (api, ns, charged) into begin and the
		 * charge rule (issue 24). */
		struct gg_alloc slow = *a;
		return gg_alloc_settle(rt, &slow, rc);
	}
	/* A VMM handle is known to handles.c before its record exists: nobody
	 * can release it before this hook returns it. */
	if (a->ns == GG_NS_VMM)
		gg_handle_created(raw, GG_HANDLE_CHARGED);
	gg_account_commit_inline(a->dev, a->ns, raw, a->size, a->api, a->charge);
	return rc;
}
#define GG_ALLOC(rt, a, call) (gg_alloc_begin_inline(rt, a) == 0 ? gg_alloc_end(rt, a, call) : (rt)->oom)

/* Allocate from a stream-ordered pool (pool.c): charged by what the pool
 * reserves. A growth past the ceiling is undone and refused (*out nulled). */
struct gg_pool_alloc {
	struct gg_alloc a; /* a.dev: the pool's device */
	void *pool, *stream;
	struct gg_pool *p; /* set by begin, as below */
	uint64_t before, reserved;
};
/* Fills a stream-ordered request of size bytes from pool on dev, for stream:
 * the fields begin reads. Not a designated initialiser, which zeroes the
 * whole struct (11 stores a request, issue 24); begin sets p, before,
 * reserved and a.charge before anything reads them, and rows is read only
 * with a pitch. */
static inline void gg_pool_alloc_init(struct gg_pool_alloc *pa, enum gpuguard_api api, int dev, void *pool,
                                      uint64_t size, void *out, void *stream)
{
	pa->a.dev = dev;
	pa->a.api = api;
	pa->a.ns = GG_NS_PTR;
	pa->a.charged = 1;
	pa->a.size = size;
	pa->a.out = out;
	pa->a.pitch = NULL;
	pa->pool = pool;
	pa->stream = stream;
}
/* Inline in the hook (issue 24: a frame less on every stream-ordered
 * request). home: the hook has pa->p already, an entry registered on a->dev
 * (hook_cuda.c's cache of the current pool holds no other), so neither the
 * registry nor the entry's device is looked at again, and the thread was
 * noted where that cache was filled (gg_pool_begin_on). */
static inline __attribute__((always_inline)) int gg_pool_alloc_begin_at(const struct gg_runtime *rt,
                                                                        struct gg_pool_alloc *pa, int home)
{
	struct gg_alloc *a = &pa->a;
	if (!home)
		pa->p = a->dev >= 0 ? gg_pool_get(pa->pool, a->dev, rt->pool_query) : NULL;
	if (!home && GG_UNLIKELY(!pa->p)) {
		/* Unknown device, or the pool registry full (65536 pools) or
		 * out of memory: charge it like a plain allocation, but never
		 * refund it (end), as the pool may keep the memory after the
		 * free and we cannot read what it holds. Safe, not exact. A
		 * copy goes out of line, as in gg_alloc_end, so that pa's
		 * address never leaves the hook (issue 24: then the compiler
		 * keeps pa in registers, not eight stores on the stack). */
		struct gg_alloc slow = *a;
		int r = gg_alloc_begin(rt, &slow);
		a->charge = slow.charge;
		pa->before = 0; /* not GG_POOL_UNREAD: end looks no further */
		return r;
	}
	uint64_t lim, before;
	if (!home)
		gg_ceiling_note_thread(); /* a thread that allocates may free (ceiling.c) */
	struct gg_budget *b = gg_bind_budget(rt, a->dev, &lim);
	gg_dump_note_request(a->api, a->size);
	if (!home && GG_UNLIKELY(pa->p->dev != a->dev)) {
		/* A pool registered on another device (its first request's):
		 * charged there. */
		b = gg_ceiling_budget(pa->p->dev);
		lim = gg_ceiling_budget_limit(b);
	}
	pa->reserved = gg_pool_begin_on(pa->p, b, gg_pool_skip_limit(lim), a->size, &before);
	pa->before = before;
	return pa->reserved == GG_POOL_REFUSED ? -1 : 0;
}
#define gg_pool_alloc_begin(rt, pa) gg_pool_alloc_begin_at(rt, pa, 0)
/* end's paths other than a warm request granted (shape.c): no pool entry,
 * a request that reserved, the runtime's failure, or a warm request whose
 * growth the read after it refused under v (grew: that growth). */
int gg_pool_alloc_end_slow(const struct gg_runtime *rt, struct gg_pool_alloc *pa, int rc, uint64_t raw,
                           enum gg_verdict v, uint64_t grew);
/* Inline: the common case, a request the warm reserve served, is one read
 * of the reserve and the record, with no frame of shape.c between. */
static inline __attribute__((always_inline)) int gg_pool_alloc_end(const struct gg_runtime *rt,
                                                                   struct gg_pool_alloc *pa, int rc)
{
	struct gg_alloc *a = &pa->a;
	uint64_t raw = 0;
	if (rc == rt->ok)
		__builtin_memcpy(&raw, a->out, sizeof(raw)); /* a device pointer */
	enum gg_verdict v = GG_VERDICT_GRANTED;
	uint64_t grew = 0;
	/* raw 1 and 2 (table.h's slot states, never a device address) go
	 * the slow way, as gg_alloc_end's do: then the inline insert drops
	 * its own test of the key (issue 24: 2 instructions). */
	if (GG_LIKELY(raw > GG_TABLE_BUSY && (pa->before == GG_POOL_UNREAD || (pa->p && pa->reserved == 0)))) {
		/* Served from the warm reserve, unreserved: its read was
		 * skipped (begin set GG_POOL_UNREAD, only on an entry and with
		 * nothing reserved: one compare for the three; only the lock
		 * to give back, pool.h's gg_pool_end_warm), or one read of the
		 * reserve settles it. One
		 * commit for both: the stack cache (stack.c) checks the return
		 * address of its call, and two sites taken in turn missed it
		 * at every read (issue 24). */
		if (GG_LIKELY(pa->before == GG_POOL_UNREAD))
			gg_pool_unlock(pa->p);
		else
			v = gg_pool_end_warm_reading(pa->p, pa->before, &grew);
		if (GG_LIKELY(v == GG_VERDICT_GRANTED)) {
			gg_account_commit_inline(a->dev, GG_NS_PTR, raw, a->size, a->api,
			                         0); /* the pool carries the charge */
			return rc;
		}
	}
	struct gg_pool_alloc slow = *pa; /* pa's address stays in the hook (begin) */
	return gg_pool_alloc_end_slow(rt, &slow, rc, raw, v, grew);
}
#define GG_POOL_ALLOC(rt, pa, call) (gg_pool_alloc_begin(rt, pa) == 0 ? gg_pool_alloc_end(rt, pa, call) : (rt)->oom)
/* The same with pa->p set, an entry of pa->a.dev (gg_pool_alloc_begin_at). */
#define GG_POOL_ALLOC_HOME(rt, pa, call) \
	(gg_pool_alloc_begin_at(rt, pa, 1) == 0 ? gg_pool_alloc_end(rt, pa, call) : (rt)->oom)

/* Free: take the record out before the runtime can hand the address to
 * another thread, put it back if it refuses (DESIGN.md §3). An unknown
 * pointer freed is counted on the current device (never a graph's). The
 * record's flags say whether it was found: GG_REC_NONE when a device
 * record was not (begin stores it then; issue 24: a found flag of its own
 * was a store and a load from the stack on every free); on the host free,
 * GG_REC_HOST when one was, 0 when not. */
struct gg_free {
	struct gg_record rec;
	enum gg_key_ns ns;
	uint64_t raw;
};
void gg_free_untracked(const struct gg_runtime *rt, const struct gg_free *f);
/* begin and end always inline: with the table's remove inline in begin
 * (table.h), gcc otherwise keeps begin as a function of its own, a call
 * and a frame on every free (issue 24: +10 a pair). */
static inline __attribute__((always_inline)) void gg_free_begin(struct gg_free *f, enum gg_key_ns ns, uint64_t raw)
{
	if (GG_UNLIKELY(!gg_account_forget_inline(ns, raw, &f->rec))) {
		/* ns and raw are read only for a pointer we do not know
		 * (gg_free_untracked): a known one's free stores neither. */
		f->rec.flags = GG_REC_NONE;
		f->ns = ns;
		f->raw = raw;
	}
}
static inline __attribute__((always_inline)) int gg_free_end(const struct gg_runtime *rt, struct gg_free *f, int rc)
{
	int ok = rc == rt->ok;
	if (GG_LIKELY(gg_account_freed_fast(&f->rec, ok)))
		return rc;
	if (!(f->rec.flags & GG_REC_NONE)) {
		f->rec.flags |= GG_REC_FREE_SAID; /* forget said its event */
		gg_account_freed(&f->rec, ok);
	} else if (ok)
		gg_free_untracked(rt, f);
	return rc;
}
/* A VMM handle's release: handles.c's when it knows the handle (a mapped or
 * retained one outlives the release), else the plain free. */
struct gg_release {
	struct gg_vmm_op op;
	struct gg_free f;
	int tracked;
};
void gg_release_begin(struct gg_release *r, uint64_t handle);
int gg_release_end(const struct gg_runtime *rt, struct gg_release *r, int rc);
/* An unmap of [ptr, ptr+size), or the free of the address range itself
 * (range: the driver drops what is still mapped there with it). */
void gg_unmap_begin(struct gg_vmm_op *op, uint64_t ptr, uint64_t size);
int gg_unmap_end(const struct gg_runtime *rt, struct gg_vmm_op *op, int rc, uint64_t ptr, uint64_t size, int range);

/* Pinned host memory: recorded for dumps, never charged. begin before the
 * runtime's call sets the context of the record. */
void gg_host_alloc_begin(const struct gg_runtime *rt);
int gg_host_alloc_end(const struct gg_runtime *rt, int rc, const void *out, uint64_t size);
void gg_host_free_begin(struct gg_free *f, uint64_t raw);
int gg_host_free_end(const struct gg_runtime *rt, struct gg_free *f, int rc);

/* Memory info, after the runtime answered into f and t (the hook's own
 * variables, so NULL outputs are tolerated, HAMi-core #333): the ceiling's
 * view, copied out on success. Device total: min(ceiling, physical). */
int gg_meminfo_end(const struct gg_runtime *rt, int rc, size_t f, size_t t, size_t *free_out, size_t *total_out);
int gg_total_end(const struct gg_runtime *rt, int rc, size_t *bytes, int dev);

/* Pool management. created: after the runtime's create of a pool on dev
 * (-1: not device memory). trimmed: after a trim, whose refund the next
 * request sees at once. destroy: around the destroy (pool.c's doom). */
int gg_pool_created(const struct gg_runtime *rt, int rc, const void *pool_out, int dev);
int gg_pool_trimmed(const struct gg_runtime *rt, int rc, void *pool);
void gg_pool_destroy_enter(const struct gg_runtime *rt, void *pool, struct gg_pool_doom *d);
int gg_pool_destroy_leave(const struct gg_runtime *rt, void *pool, struct gg_pool_doom *d, int rc);

/* Note after success: each runs the books only when the runtime's call
 * succeeded and no hook of ours is already running on this thread, and
 * returns rc. A handle out slot may be NULL (then nothing is noted). */
int gg_note_synced(const struct gg_runtime *rt, int rc);
int gg_note_retained(const struct gg_runtime *rt, int rc, const void *handle_out);
int gg_note_imported(const struct gg_runtime *rt, int rc, const void *handle_out);
int gg_note_reserved(const struct gg_runtime *rt, int rc, const void *ptr_out, uint64_t size);
int gg_note_mapped(const struct gg_runtime *rt, int rc, uint64_t ptr, uint64_t size, uint64_t handle);

#endif
