/* gpuguard: the ceiling (ceiling.c): the per-device books and budgets, and
 * the reservation that races on a budget's `used` word. */
#ifndef GG_CEILING_H
#define GG_CEILING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "gpuguard/charge.h"

/* Statistics every alloc and free touch are striped by thread, so that the
 * ceiling word `used` is the only cache line all threads fight over. The
 * live bytes are not counted here: the history's live word (history.h)
 * counts the same events, and gg_ceiling_read reports it (issue 24: one
 * atomic add less per event). */
struct gg_stripe {
	_Atomic int64_t allocs;
	_Atomic int64_t frees;
} __attribute__((aligned(1 << GG_STRIPE_SHIFT))); /* GG_STRIPES of them: base.h */
_Static_assert(sizeof(struct gg_stripe) == 1 << GG_STRIPE_SHIFT, "gg_self.stripe_off steps by one stripe");

/* The words a reservation races on, wherever they live: in this process's
 * gg_device (process scope) or in the pod region's device entry (pod scope,
 * shared.c). Set up once per device by the first governed call there. */
struct gg_budget {
	_Atomic uint64_t *used;
	_Atomic uint64_t *peak;
	_Atomic uint64_t *limit;
	_Atomic uint64_t *refused;      /* refusals at the ceiling, all processes */
	_Atomic uint32_t *waiters;      /* requests sleeping for room (ON_LIMIT=wait) */
	_Atomic uint32_t *wake;         /* futex word, bumped when room is given back */
	_Atomic uint64_t *mine;         /* this process's share (pod scope), else NULL */
	_Atomic uint16_t *mine_waiting; /* ... and its count of sleepers there */
	_Atomic uint64_t *claim;        /* pod scope: our slot's reservations in flight, else NULL */
	_Atomic uint64_t *credit;       /* pod scope: our slot's credit (region.h), else NULL */
	/* pod scope: the ceiling our credit was last weighed against, by a
	 * slow-path grant whose sum counted it (ceiling.c, gg_ceiling_pod_reserve_slow);
	 * a fast grant needs the ceiling unchanged since. Process-local. */
	_Atomic uint64_t credit_lim;
	/* pod scope: this process's own `used` (gg_device), kept equal to
	 * *mine, so that losing the region (shared_guard.c) or leaving it at exit
	 * falls back to books that already hold what we hold; else NULL */
	_Atomic uint64_t *shadow;
	unsigned entry; /* pod scope: the device entry in the region */
	/* pod scope: the region's mapping and our slot in it, for the sums
	 * over its slots (region.h), our slot's count of counted threads and
	 * the entry's count of driver refusals; NULL in process scope */
	void *region;
	unsigned slot;
	_Atomic uint32_t *threads;
	_Atomic uint64_t *driver_oom;
	/* pod scope: called after each change of our charge there (shared_sweep.c:
	 * our slot still counted, the obituary kept fresh). The ceiling's one
	 * call up, through the budget its binder filled in. */
	void (*changed)(void);
	int futex_private; /* 0 when the words are shared with other processes */
	/* nanoseconds spent waiting (pod scope: all processes'), and a count
	 * bumped when nobody could free, at which every waiter gives up */
	_Atomic uint64_t *wait_ns;
	_Atomic uint32_t *stalemate;
};

/* Per-device books. */
struct gg_device {
	_Atomic uint64_t used; /* the only word a reservation races on */
	_Atomic uint64_t peak;
	_Atomic uint64_t limit; /* resolved ceiling; GG_LIMIT_UNRESOLVED until known */
	_Atomic uint64_t pool_reserved;
	_Atomic uint64_t untracked_frees;
	_Atomic uint64_t refused[GPUGUARD_REFUSED_COUNT];
	_Atomic uint64_t pool_overshoot;
	_Atomic uint64_t refused_all; /* process scope's budget->refused */
	_Atomic uint32_t waiters, wake;
	/* this process's time spent waiting for room here; process scope's
	 * budget->stalemate */
	_Atomic uint64_t wait_ns;
	_Atomic uint32_t stalemate;
	/* NULL until the device's first governed call binds it (gg_ceiling_budget);
	 * then &local or &pod, changing only at exit (pod to local). */
	struct gg_budget *_Atomic budget;
	struct gg_budget local, pod;
	_Atomic int bind_state; /* 0 unbound, 1 binding, 2 bound */
	struct gg_stripe stripe[GG_STRIPES];
} __attribute__((aligned(64)));
#define GG_LIMIT_UNRESOLVED (UINT64_MAX - 1)
extern struct gg_device gg_devices[GG_MAX_DEVICES];
/* &gg_devices[dev] as one value, opaque to gcc (the empty asm): an
 * allocation's budget lookup and its stripe count then share one address,
 * kept across the driver call, where gcc folded each field's offset into
 * a multiply of dev of its own (issue 24: 4 instructions an allocation).
 * The free's common end (gg_account_freed_fast) shares one the same way
 * between the release's budget and its stripe (5 a pair, measured, once
 * the release was inline there; before, with the release a call, it cost
 * 5 more). */
static inline struct gg_device *gg_ceiling_device(int dev)
{
	struct gg_device *d = &gg_devices[dev];
	__asm__("" : "+r"(d));
	return d;
}

/* The budget of dev, binding it (pod region, context reserve) on first use.
 * Call only from a hook, where the driver can be asked who the device is. */
struct gg_budget *gg_ceiling_bind_slow(int dev);
/* What binds a device to the pod (shared.c's gg_shared_bind, which sits
 * above the ceiling): set by initialisation; none = process scope. */
typedef int (*gg_ceiling_binder_fn)(int dev, struct gg_budget *b);
void gg_ceiling_set_binder(gg_ceiling_binder_fn fn);
/* The pod region was lost (shared_guard.c): every device back to this process's
 * books, and none bound to the pod from now on. */
void gg_ceiling_lose_pod(void);
static inline struct gg_budget *gg_ceiling_budget(int dev)
{
	/* acquire: pairs with the release in gg_ceiling_bind_slow, so the
	 * budget's pointers are seen filled in. */
	struct gg_budget *b = atomic_load_explicit(&gg_ceiling_device(dev)->budget, memory_order_acquire);
	return GG_LIKELY(b != NULL) ? b : gg_ceiling_bind_slow(dev);
}
/* At exit, after our charges went back to the pod: later frees (other
 * destructors) settle against this process's own books, not the pod's. */
void gg_ceiling_unbind_pod(void);
/* The budget if bound, else this process's own books (no binding: for
 * readers outside a hook, which must not call the driver). */
static inline struct gg_budget *gg_ceiling_budget_peek_on(struct gg_device *d)
{
	/* acquire: as in gg_ceiling_budget. */
	struct gg_budget *b = atomic_load_explicit(&d->budget, memory_order_acquire);
	return b ? b : &d->local;
}
static inline struct gg_budget *gg_ceiling_budget_peek(int dev)
{
	return gg_ceiling_budget_peek_on(&gg_devices[dev]);
}
/* Waiting for room (GPUGUARD_ON_LIMIT=wait), see ceiling.c: b =
 * gg_ceiling_budget(dev) once; enter(b); loop { seen = wake_seq(b); retry;
 * give_up(b); sleep(b, seen) }; leave(b). The waiting words are the entered
 * budget's throughout, so that leave undoes what enter did even if the
 * device was rebound meanwhile (a lost pod region); only the retry looks
 * the budget up again. sleep returns -1 once deadline_ns (CLOCK_MONOTONIC)
 * has passed, else 0 after a wake-up or a slice of at most 100 ms. */
uint32_t gg_ceiling_wait_enter(struct gg_budget *b); /* returns the stalemate count, for give_up */
uint32_t gg_ceiling_wake_seq(const struct gg_budget *b);
int gg_ceiling_wait_sleep(const struct gg_budget *b, uint32_t seen, uint64_t deadline_ns);
void gg_ceiling_wait_leave(struct gg_budget *b);
/* True when dev is bound to another budget than b now: the pod region was
 * lost during the wait (the device fell back to this process's books).
 * The waiter then leaves b (whose region words wait_leave no longer
 * touches) and enters the device's budget. */
int gg_ceiling_wait_moved(int dev, const struct gg_budget *b);
/* Takes n sleepers off a waiters word, saturating at zero. */
void gg_ceiling_waiters_sub(_Atomic uint32_t *waiters, uint32_t n);
/* False when bytes exceed b's ceiling outright: no amount of waiting helps.
 * relaxed: the limit is a plain number (see gg_ceiling_resolve). */
static inline int gg_ceiling_could_fit(const struct gg_budget *b, uint64_t bytes)
{
	return bytes <= atomic_load_explicit(b->limit, memory_order_relaxed);
}
/* Counts the calling thread, once, among those that could free memory
 * (every governed allocation, free and memory query calls it). Inline: the
 * hot path asks twice per pair, and only a thread's first call counts. */
#define gg_thread_counted (gg_self.thread_counted) /* base.h */
void gg_ceiling_note_thread_slow(void);
static inline void gg_ceiling_note_thread(void)
{
	if (GG_UNLIKELY(!gg_thread_counted))
		gg_ceiling_note_thread_slow();
}
/* True when nobody is left to free memory on dev's budget: every counted
 * thread of ours is asleep waiting, and (pod scope) every other process
 * holding memory there is wholly asleep too. */
int gg_ceiling_nobody_frees(const struct gg_budget *b);
/* After a failed retry: whether the waiter should give up now, because
 * nobody could free (and no room came back since `seen`), which it then
 * declares so that every other waiter gives up too, or because another
 * waiter declared that since `since` (wait_enter's value). */
int gg_ceiling_give_up(struct gg_budget *b, uint32_t seen, uint32_t since);
/* Adds ns of waiting on dev (through budget b) to this process's count and
 * the budget's. */
void gg_ceiling_count_wait(int dev, struct gg_budget *b, uint64_t ns);
/* This process's nanoseconds spent waiting for room on dev. */
uint64_t gg_ceiling_wait_ns(int dev);
/* Device dev's ceiling in bytes, from the limits in force (GPUGUARD_LIMIT,
 * or the pod's budget once adopted): GG_UNLIMITED for none, 0 for a
 * GPUGUARD_LIMIT that did not parse (fail closed), GG_LIMIT_UNRESOLVED for
 * a percentage while physical (the card's total) is 0, unknown. The one
 * place a percentage becomes bytes. */
uint64_t gg_ceiling_limit_for(int dev, uint64_t physical);
struct gpuguard_limits;
/* A pod region's budget wins over GPUGUARD_LIMIT: l (pod scope's own,
 * unchanged from now on) becomes the limits in force, and every device's
 * limit is set again (gg_ceiling_configure). NULL: the options' own. */
void gg_ceiling_adopt_limits(const struct gpuguard_limits *l);
/* Sets every device's limit from the limits in force (percent limits stay
 * unresolved). */
void gg_ceiling_configure(void);
/* b's ceiling now. relaxed: the limit is a plain number (see
 * gg_ceiling_resolve); the budget's words came with its acquire. */
static inline uint64_t gg_ceiling_budget_limit(const struct gg_budget *b)
{
	return atomic_load_explicit(b->limit, memory_order_relaxed);
}
/* True when dev's limit is a percentage not yet turned into bytes. Inline:
 * every allocation asks. relaxed: the limit is a plain number (see
 * gg_ceiling_resolve); the budget's acquire is gg_ceiling_budget_peek's. */
static inline int gg_ceiling_unresolved(int dev)
{
	return atomic_load_explicit(gg_ceiling_budget_peek(dev)->limit, memory_order_relaxed) == GG_LIMIT_UNRESOLVED;
}
/* Turns a percentage limit into bytes, given the device's physical total. */
void gg_ceiling_resolve(int dev, uint64_t physical_total);
/* What a reservation says (issue 24): granted, or refused with its reason,
 * so that no caller reads the configuration to tell why. GRANTED is 0, so
 * `verdict != 0` reads "refused". */
enum gg_verdict {
	GG_VERDICT_GRANTED = 0,
	GG_VERDICT_CEILING, /* it did not fit the budget's limit */
	GG_VERDICT_CONFIG,  /* GPUGUARD_LIMIT was invalid: every request fails closed */
};
/* The refusal a refused verdict is counted and dumped under. */
static inline enum gpuguard_refusal gg_verdict_reason(enum gg_verdict v)
{
	return v == GG_VERDICT_CONFIG ? GPUGUARD_REFUSED_CONFIG : GPUGUARD_REFUSED_CEILING;
}
/* Atomically adds `bytes` to dev's usage if it stays within the ceiling.
 * 0 on success; -1 refused (and counted under the verdict's reason). */
int gg_ceiling_reserve(int dev, uint64_t bytes);
/* Set by each grant of gg_ceiling_try_reserve on this thread: whether it
 * left less than GG_CEILING_NEAR of room (gg_account_begin then reads the
 * runtime charge fresh, footprint.c). GG_CEILING_NEAR is footprint.h's
 * GG_FOOTPRINT_STEP (footprint.c asserts it), written out here since the
 * footprint sits above the ceiling. */
#define GG_CEILING_NEAR ((int64_t)(64 * GG_MIB))
#define gg_ceiling_near (gg_self.ceiling_near) /* base.h */
/* The same, without counting a refusal (a first try before reconciling):
 * the verdict. */
enum gg_verdict gg_ceiling_try_reserve(int dev, uint64_t bytes);
/* The same on a budget and its ceiling the caller already looked up
 * (gg_ceiling_budget, gg_ceiling_budget_limit): the allocation hook looks
 * them up once, for the unresolved check and the reservation (issue 24). */
enum gg_verdict gg_ceiling_try_reserve_on(struct gg_budget *b, uint64_t bytes, uint64_t lim);
/* gg_ceiling_try_reserve_on's parts (ceiling.c): process scope's
 * reservation, and pod scope's past the fast grant (its refill and R1-R5,
 * and F3 when f3: k is the credit the fast grant read). */
enum gg_verdict gg_ceiling_try_reserve_local(struct gg_budget *b, uint64_t bytes, uint64_t lim);
enum gg_verdict gg_ceiling_pod_reserve_slow(struct gg_budget *b, uint64_t bytes, uint64_t lim, uint64_t k, int f3);
/* gg_ceiling_try_reserve_on itself, inline in the allocation hooks (issue
 * 24: the call, its arguments and the scope's test were paid in the hook
 * and again in the callee). Pod scope (b->claim set) follows
 * tests/model/pod.pml: this is its fast grant, F0-F3. */
static inline __attribute__((always_inline)) enum gg_verdict gg_ceiling_grant(struct gg_budget *b, uint64_t bytes,
                                                                              uint64_t lim)
{
	if (!b->claim)
		return gg_ceiling_try_reserve_local(b, bytes, lim);
	/* A request past the ceiling itself can never be granted: refused
	 * before R1, so that its claim never makes a racing request that
	 * fits see the pod as full (a 2 GiB request under a 1 GiB ceiling
	 * refused a churning thread's 64 MiB under TSan: t_postmortem). */
	if (bytes > lim)
		return GG_VERDICT_CEILING;
	/* The word's address read once: F1's seq_cst add would make the
	 * compiler read b->credit again for F2 (issue 24). */
	_Atomic uint64_t *credit = b->credit;
	/* relaxed: a hint; F2's CAS decides. Only this process raises its
	 * credit (R4b), anyone may take it (R3b). */
	uint64_t k = atomic_load_explicit(credit, memory_order_relaxed);
	/* F0: only under the ceiling the credit was last weighed against. A
	 * ceiling lowered since (the driver's limit, MPS v3: dmem_update in
	 * footprint.c; a pod's limit rewritten) may no longer hold the credit
	 * beside what is used: the slow path sums it against the new one, and
	 * takes it back before refusing. relaxed: a process-local hint; a
	 * request racing the change is judged by either ceiling, as any. */
	if (GG_UNLIKELY(k < bytes) || GG_UNLIKELY(atomic_load_explicit(&b->credit_lim, memory_order_relaxed) != lim))
		return gg_ceiling_pod_reserve_slow(b, bytes, lim, k, 0);
	/* F1: used += b FIRST. seq_cst: against other reservations' R2,
	 * which read our credit before our used: between F1 and F2 they
	 * count b twice (safe), never in neither word. */
	atomic_fetch_add_explicit(b->mine, bytes, memory_order_seq_cst);
	/* F2: credit -= b, if it still holds b. seq_cst: against a refuser's
	 * take-back (R3b), an exchange: either our CAS comes first (the bytes
	 * are ours, in used) or it fails. A failed CAS reloads k. */
	while (
	    !atomic_compare_exchange_weak_explicit(credit, &k, k - bytes, memory_order_seq_cst, memory_order_relaxed))
		if (GG_UNLIKELY(k < bytes))
			/* F3 (the slow path's first step): taken back meanwhile */
			return gg_ceiling_pod_reserve_slow(b, bytes, lim, k, 1);
	/* relaxed: the private copy of our used, as in R4 */
	atomic_fetch_add_explicit(b->shadow, bytes, memory_order_relaxed);
	/* No peak, snapshot or region upkeep here: they follow the slow path,
	 * at each refill (see docs/pod-scope.md); gg_ceiling_near keeps this
	 * thread's last slow answer. */
	return GG_VERDICT_GRANTED;
}
/* Gives back bytes reserved or charged earlier; saturates at 0. Inline:
 * every free of a charged block calls it. Nothing came back (a pool settled
 * at what it held): no wake-up. A waiter's own retry settles pools, and
 * waking itself would turn its sleep into a busy loop. (Reclaiming a dead
 * slot wakes with 0 bytes through gg_ceiling_release_budget: room did come
 * back there.) */
void gg_ceiling_release_budget(struct gg_budget *b, uint64_t bytes);
static inline void gg_ceiling_release(int dev, uint64_t bytes)
{
	if (bytes != 0)
		gg_ceiling_release_budget(gg_ceiling_budget_peek(dev), bytes);
}
/* The release's uncommon ends (ceiling.c): a subtraction from w1 (old
 * value o1) or w2 (o2; NULL in process scope) that passed zero, repaired,
 * then the wake-up; and the wake-up itself, when someone waits. */
void gg_ceiling_release_repair(struct gg_budget *b, uint64_t bytes, _Atomic uint64_t *w1, uint64_t o1,
                               _Atomic uint64_t *w2, uint64_t o2);
void gg_ceiling_wake_waiters(struct gg_budget *b);
/* Pod scope's release (b->claim set), L1 of tests/model/pod.pml, for bytes
 * below 2^63 (gg_ceiling_release_budget takes the rest): inline in the
 * free hooks' common end (gg_ceiling_release_inline), and
 * gg_ceiling_release_budget's own. */
static inline __attribute__((always_inline)) void gg_ceiling_release_pod(struct gg_budget *b, uint64_t bytes)
{
	/* L1: after the driver freed the memory, one step on our slot
	 * (seq_cst: the store of the Dekker pair with
	 * gg_ceiling_wake_waiters), then the private copy, as in R4 (a pod
	 * budget always has one: gg_shared_bind), each sub_own's subtraction
	 * (ceiling.c) with its repair out of line. No publish: the entry's
	 * snapshot (region.h) is a reported figure, nobody decides by it, and
	 * our tools sum the slots instead. It is refreshed by the next
	 * reservation (R2's sum) or sweep (the exact sum); a third
	 * read-modify-write on a cache line every member writes cost each
	 * free ~12 instructions (issue 24). The region's upkeep (b->changed:
	 * the truncated-file check and the obituary's rate-limited host
	 * sample) likewise waits for the next charge or sweep: a release has
	 * already written its slot words when the check would run. */
	uint64_t m = atomic_fetch_sub_explicit(b->mine, bytes, memory_order_seq_cst);
	/* seq_cst: as sub_own (relaxed would do for the private copy; the
	 * same instruction here) */
	uint64_t c = atomic_fetch_sub_explicit(b->shadow, bytes, memory_order_seq_cst);
	if (GG_UNLIKELY((int64_t)((m - bytes) | (c - bytes)) < 0))
		return gg_ceiling_release_repair(b, bytes, b->mine, m, b->shadow, c);
	/* seq_cst: the load half of the Dekker pair (see
	 * gg_ceiling_wait_enter and gg_ceiling_wait_sleep); it reads the
	 * word again before a wake-up. */
	if (GG_UNLIKELY(atomic_load_explicit(b->waiters, memory_order_seq_cst) != 0))
		gg_ceiling_wake_waiters(b);
}
/* gg_ceiling_release with pod scope's L1 inline, on the device d
 * (gg_ceiling_device): the free hooks' common end (issue 24: the call and
 * the scope's test, paid in the hook and again in
 * gg_ceiling_release_budget). */
static inline __attribute__((always_inline)) void gg_ceiling_release_inline(struct gg_device *d, uint64_t bytes)
{
	struct gg_budget *b = gg_ceiling_budget_peek_on(d);
	/* One signed test for both of L1's bounds: nothing to give back, and
	 * 2^63 or more (gg_ceiling_release_budget's release_huge). */
	if (GG_LIKELY((int64_t)bytes > 0) && GG_LIKELY(b->claim != NULL))
		gg_ceiling_release_pod(b, bytes);
	else if (bytes != 0)
		gg_ceiling_release_budget(b, bytes);
}
/* Adds bytes with no ceiling check (pool growth the driver already made). */
void gg_ceiling_force(int dev, uint64_t bytes);
/* The same for growth nobody reserved (a pool's or the graph reserve's):
 * how far it takes the budget past its limit (pod scope: what the whole
 * pod uses against the pod's limit) is counted as pool overshoot. */
void gg_ceiling_force_over(int dev, uint64_t bytes);
/* The same on a budget (binding and region reclaim use it, and
 * gg_ceiling_release_budget above). */
void gg_ceiling_force_budget(struct gg_budget *b, uint64_t bytes);
/* What a governed allocation of `size` bytes through `api` is charged: one
 * rule for the library and the command (gpuguard/charge.h). Inline: every
 * allocation and every free asks (issue 24, fewer calls per pair). */
static inline uint64_t gg_ceiling_charge_size(enum gpuguard_api api, uint64_t size)
{
	return gpuguard_charge_size(api, size);
}
/* Memory-info virtualisation (DESIGN.md §2). */
void gg_ceiling_meminfo(int dev, uint64_t real_free, uint64_t real_total, uint64_t *free_out, uint64_t *total_out);
/* Zero counters and unbind every device (fork child). Limits stay. */
void gg_ceiling_reset(void);
void gg_ceiling_count_refusal(int dev, enum gpuguard_refusal why);
/* Counts one allocation or free on the calling thread's stripe. relaxed
 * throughout: statistics, summed by readers that want a snapshot, never
 * used to decide anything. Inline: each runs once per pair. The stripe is
 * the one at the thread's gg_self.stripe_off (base.h: its thread id's low
 * bits, stripe 0 until the id is first asked): any stripe is correct, as
 * only the sums mean anything; the thread's own keeps threads off each
 * other's lines. size: the history's live word counts the bytes (see
 * struct gg_stripe). */
static inline struct gg_stripe *gg_ceiling_stripe_at(struct gg_device *d)
{
	return (struct gg_stripe *)((char *)d->stripe + gg_self.stripe_off);
}
static inline void gg_ceiling_count_alloc(int dev, uint64_t size)
{
	(void)size;
	atomic_fetch_add_explicit(&gg_ceiling_stripe_at(gg_ceiling_device(dev))->allocs, 1, memory_order_relaxed);
}
static inline void gg_ceiling_count_free_on(struct gg_device *d)
{
	atomic_fetch_add_explicit(&gg_ceiling_stripe_at(d)->frees, 1, memory_order_relaxed);
}
static inline void gg_ceiling_count_free(int dev, uint64_t size)
{
	(void)size;
	gg_ceiling_count_free_on(gg_ceiling_device(dev));
}
/* Copies dev's books, summing the stripes; live_bytes is the history's
 * live word (gg_history_live). */
void gg_ceiling_read(int dev, struct gpuguard_device_stats *out);

#endif
