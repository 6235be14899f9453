/* gpuguard: per-device books and the ceiling. A reservation is one
 * compare-and-swap on the device's `used` word that refuses to pass the
 * limit, so two threads racing for the last bytes can never both get them
 * (DESIGN.md §3); every subtraction saturates at zero. */
#include <limits.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "ceiling.h"
#include "base.h"
#include "gpuguard/charge.h"
#include "gpuguard/region.h"
#include "history.h"
#include "options.h"

struct gg_device gg_devices[GG_MAX_DEVICES];

/* relaxed: a code pointer set once by initialisation, before it publishes
 * itself to the hooks that bind (gg_init_once's release). */
static _Atomic gg_ceiling_binder_fn binder;
/* The region was lost (gg_ceiling_lose_pod); seq_cst, see there. */
static _Atomic int pod_lost;
/* A pod budget whose region was lost (gg_ceiling_lose_pod): its words may
 * be another pod's by now (a file written afresh), so not a word into them.
 * seq_cst: the flag's load, as the binder's in gg_ceiling_bind_slow. */
static int pod_gone(const struct gg_budget *b)
{
	return b->claim && atomic_load_explicit(&pod_lost, memory_order_seq_cst);
}
/* Our slot's count of counted threads, once a device is bound to the pod;
 * NULL before and after (exit, loss). relaxed: the slot's mapping was
 * published with the budget that carried it (release in bind_slow), and
 * this thread or one that acquired that budget stored it. */
static _Atomic uint32_t *_Atomic pod_threads;

void gg_ceiling_set_binder(gg_ceiling_binder_fn fn)
{
	atomic_store_explicit(&binder, fn, memory_order_relaxed);
}

static void local_budget(struct gg_device *g)
{
	g->local = (struct gg_budget){
	    .used = &g->used,
	    .peak = &g->peak,
	    .limit = &g->limit,
	    .refused = &g->refused_all,
	    .waiters = &g->waiters,
	    .wake = &g->wake,
	    .wait_ns = &g->wait_ns,
	    .stalemate = &g->stalemate,
	    .mine = NULL,
	    .futex_private = 1,
	};
}

/* The limits in force when not GPUGUARD_LIMIT's: a pod region's budget,
 * once adopted (pod scope keeps it: gg_ceiling_adopt_limits). NULL: the
 * options' own. */
static const struct gpuguard_limits *_Atomic limits_adopted;

/* The spec in force for dev. acquire: pairs with the release in
 * gg_ceiling_adopt_limits, for the adopted limits' contents. */
static const struct gpuguard_limit *limit_spec(int dev)
{
	const struct gpuguard_limits *l = atomic_load_explicit(&limits_adopted, memory_order_acquire);
	return &(l ? l : &gg_opt.limits)->dev[dev];
}

uint64_t gg_ceiling_limit_for(int dev, uint64_t physical)
{
	const struct gpuguard_limit *s = limit_spec(dev);
	if (gg_opt.limit_bad)
		return 0;
	if (s->kind == GPUGUARD_LIMIT_BYTES)
		return s->value;
	if (s->kind == GPUGUARD_LIMIT_PERCENT)
		return physical ? (uint64_t)((unsigned __int128)physical * s->value / 10000) : GG_LIMIT_UNRESOLVED;
	return GG_UNLIMITED;
}

void gg_ceiling_adopt_limits(const struct gpuguard_limits *l)
{
	/* release: the limits' contents (written by the caller) before the
	 * pointer that limit_spec acquires. Once, under the pod's setup lock. */
	atomic_store_explicit(&limits_adopted, l, memory_order_release);
	gg_ceiling_configure();
}

void gg_ceiling_configure(void)
{
	for (int d = 0; d < GG_MAX_DEVICES; d++) {
		uint64_t lim = gg_ceiling_limit_for(d, 0);
		/* relaxed: configure runs during initialisation, before any hook
		 * reads the limit (gg_init_once publishes it with release). */
		atomic_store_explicit(&gg_devices[d].limit, lim, memory_order_relaxed);
		/* Once: configure runs again when a pod region's budget is
		 * adopted, while other threads may read these pointers. */
		if (!gg_devices[d].local.used)
			local_budget(&gg_devices[d]);
	}
}

struct gg_budget *gg_ceiling_bind_slow(int dev)
{
	struct gg_device *g = &gg_devices[dev];
	int expect = 0;
	/* acquire/release on bind_state only elects the binder; the budget
	 * pointer below is what publishes the result. */
	if (atomic_compare_exchange_strong_explicit(&g->bind_state, &expect, 1, memory_order_acquire,
	                                            memory_order_acquire)) {
		struct gg_budget *b = &g->local;
		gg_ceiling_binder_fn bind = atomic_load_explicit(&binder, memory_order_relaxed);
		if (bind && bind(dev, &g->pod) == 0) {
			b = &g->pod;
			atomic_store_explicit(&pod_threads, b->threads, memory_order_relaxed);
		} else if (gg_opt.context_reserve)
			gg_ceiling_force_budget(b, gg_opt.context_reserve);
		/* release: pairs with the acquire in gg_ceiling_budget; whoever
		 * sees the pointer sees the budget's words filled in.
		 * seq_cst (release included): our store of the budget, then
		 * the seq_cst load of the lost flag, against lose_region's flag
		 * then its loads of the budgets (a Dekker pair): a region lost
		 * while we bound is never kept. Once per device. */
		atomic_store_explicit(&g->budget, b, memory_order_seq_cst);
		if (b == &g->pod && atomic_load_explicit(&pod_lost, memory_order_seq_cst)) {
			gg_ceiling_unbind_pod();
			b = &g->local;
		}
		atomic_store_explicit(&g->bind_state, 2, memory_order_release);
		return b;
	}
	/* Another thread binds: it attaches to a file and asks the driver one
	 * question, each bounded (the region's setup lock is tried for at most
	 * 2 s), so this wait is short and cannot depend on us. */
	struct gg_budget *b;
	while (!(b = atomic_load_explicit(&g->budget, memory_order_acquire)))
		sched_yield();
	return b;
}

void gg_ceiling_lose_pod(void)
{
	/* seq_cst, with the seq_cst loads of the budgets in
	 * gg_ceiling_unbind_pod: a Dekker pair with a binder that publishes a
	 * pod budget, then reads the flag (gg_ceiling_bind_slow): either we
	 * see its budget and point it back, or it sees the flag. */
	atomic_store_explicit(&pod_lost, 1, memory_order_seq_cst);
	gg_ceiling_unbind_pod();
}

void gg_ceiling_unbind_pod(void)
{
	/* relaxed: see pod_threads; a thread that loaded it before this
	 * publishes once more into our slot, as it could before. */
	atomic_store_explicit(&pod_threads, NULL, memory_order_relaxed);
	for (int d = 0; d < GG_MAX_DEVICES; d++) {
		struct gg_device *g = &gg_devices[d];
		struct gg_budget *pod = &g->pod;
		/* release: as in gg_ceiling_bind_slow (the local budget's words
		 * were filled in at configure time). seq_cst (which includes
		 * it), also on failure: the load half of the pair with a binder
		 * when the region is lost (shared_guard.c, gg_shared_lose_region). Rare: exit
		 * and loss only. */
		atomic_compare_exchange_strong_explicit(&g->budget, &pod, &g->local, memory_order_seq_cst,
		                                        memory_order_seq_cst);
	}
}

void gg_ceiling_resolve(int dev, uint64_t physical_total)
{
	if (limit_spec(dev)->kind != GPUGUARD_LIMIT_PERCENT)
		return;
	/* a card that says it has no memory has room for none */
	uint64_t v = physical_total ? gg_ceiling_limit_for(dev, physical_total) : 0;
	uint64_t expect = GG_LIMIT_UNRESOLVED;
	/* Every thread computes the same value, so whichever CAS wins is right;
	 * relaxed because the limit is a plain number read with relaxed loads. */
	atomic_compare_exchange_strong_explicit(gg_ceiling_budget_peek(dev)->limit, &expect, (uint64_t)v,
	                                        memory_order_relaxed, memory_order_relaxed);
}

void gg_ceiling_count_refusal(int dev, enum gpuguard_refusal why)
{
	/* relaxed: statistics. */
	atomic_fetch_add_explicit(&gg_devices[dev].refused[why], 1, memory_order_relaxed);
	struct gg_budget *b = gg_ceiling_budget_peek(dev);
	if (why != GPUGUARD_REFUSED_DRIVER)
		atomic_fetch_add_explicit(b->refused, 1, memory_order_relaxed);
	else if (b->driver_oom)
		atomic_fetch_add_explicit(b->driver_oom, 1, memory_order_relaxed); /* the pod's, for metrics */
}

/* ---- pod scope: sums over the region's slots (region.h) ------------------ */

/* A walk over the region's occupied slots for b's pod, word by word.
 * Each occupancy word is loaded seq_cst when the walk reaches it: the
 * loads of the Dekker pairs each caller names (R2 against R1/R4, R3b
 * against F2, the wait's against a waiter's waiting++). A slot whose bit
 * is set after its word was loaded is not visited; the callers say why
 * that is safe for them. */
struct occupied_walk {
	const struct gg_budget *b;
	unsigned w;    /* the occupancy word being walked */
	uint64_t bits; /* its set bits not yet visited */
};

static inline struct occupied_walk occupied_first(const struct gg_budget *b)
{
	return (struct occupied_walk){
	    b, 0,
	    atomic_load_explicit(&((struct gpuguard_region_header *)b->region)->occupied[0], memory_order_seq_cst)};
}

/* The next occupied slot, or -1 when the walk is done. */
static inline int occupied_next(struct occupied_walk *it)
{
	while (!it->bits) {
		if (++it->w == GPUGUARD_REGION_PROCS / 64)
			return -1;
		/* seq_cst: see occupied_walk */
		it->bits = atomic_load_explicit(&((struct gpuguard_region_header *)it->b->region)->occupied[it->w],
		                                memory_order_seq_cst);
	}
	unsigned s = it->w * 64 + (unsigned)__builtin_ctzll(it->bits);
	it->bits &= it->bits - 1;
	return (int)s;
}

/* R2 (tests/model/pod.pml): the occupancy bits, then, slot by slot,
 * claim, credit, used, saturating; *used_out gets the used part alone.
 * seq_cst: the loads of the Dekker pair with R1 and R4 (gg_ceiling_pod_reserve_slow).
 * A word a request moves bytes out of is read before the word it moves
 * them into: R4 and R4b raise used and the credit before R5 lowers the
 * claim, F1 raises used before F2 lowers the credit; so a request in
 * flight is seen in one word or the other, never in neither. */
static uint64_t pod_sum(const struct gg_budget *b, uint64_t *used_out)
{
	uint64_t sum = 0, used = 0;
	struct occupied_walk it = occupied_first(b);
	for (int s; (s = occupied_next(&it)) >= 0;) {
		struct gpuguard_region_proc *p = gpuguard_region_proc(b->region, (unsigned)s);
		uint64_t c = atomic_load_explicit(&p->claim[b->entry], memory_order_seq_cst);
		uint64_t k = atomic_load_explicit(gpuguard_region_credit_word(b->region, (unsigned)s, b->entry),
		                                  memory_order_seq_cst);
		uint64_t u = atomic_load_explicit(&p->used[b->entry], memory_order_seq_cst);
		if (__builtin_add_overflow(sum, c, &sum) || __builtin_add_overflow(sum, k, &sum) ||
		    __builtin_add_overflow(sum, u, &sum)) {
			*used_out = UINT64_MAX;
			return UINT64_MAX; /* a scribbled slot: refuse rather than wrap */
		}
		used = used + u < used ? UINT64_MAX : used + u;
	}
	*used_out = used;
	return sum;
}

/* R3b: every occupied slot's credit taken back, ours included, before a
 * refusal. An exchange each (seq_cst: against the owner's F2, a CAS that
 * then finds too little and takes the slow path; and before our second
 * R2). Credit is memory reserved and not handed out, so taking it frees
 * room and harms nobody: its owner reserves again when it next needs. */
static void pod_take_back(const struct gg_budget *b)
{
	struct occupied_walk it = occupied_first(b);
	for (int s; (s = occupied_next(&it)) >= 0;) {
		_Atomic uint64_t *k = gpuguard_region_credit_word(b->region, (unsigned)s, b->entry);
		/* relaxed: only spares a write to a line that holds none;
		 * a credit raised after this load is R4b's, whose R1 claim
		 * our second R2 sees in one word or the other. */
		if (atomic_load_explicit(k, memory_order_relaxed))
			atomic_exchange_explicit(k, 0, memory_order_seq_cst);
	}
}

/* What the budget holds: in pod scope the slots' used, summed. */
static uint64_t budget_used(const struct gg_budget *b)
{
	return b->claim ? gpuguard_region_used(b->region, b->entry)
	                : atomic_load_explicit(b->used, memory_order_relaxed);
}

/* After a change of our charge in the pod: the entry's snapshot (region.h)
 * set to now, the pod's charge as the caller already knows it, then the
 * region's own upkeep. relaxed: a snapshot for readers of the file; the
 * books are the slots, and nothing decides by it. No re-sum of the slots
 * here: the hot path has the sum in hand (R2), and the sweep republishes
 * the exact sum (shared_sweep.c, publish). A release (L1) publishes nothing
 * (gg_ceiling_release_budget). */
static void pod_publish(struct gg_budget *b, uint64_t now)
{
	atomic_store_explicit(b->used, now, memory_order_relaxed);
	b->changed();
}

/* Whether another live process could still free memory on b's entry:
 * holds or claims some and has a counted thread not asleep in a wait (its
 * slot's threads against the sum of its waiting). */
static int pod_others_could_free(const struct gg_budget *b)
{
	/* seq_cst, as every load here (the walk's too): against a waiter's
	 * waiting++ then wake bump (gg_ceiling_wait_enter) and a holder's
	 * charge (R4) then its reads; see wait_reserve in account.c. */
	struct occupied_walk it = occupied_first(b);
	for (int s; (s = occupied_next(&it)) >= 0;) {
		if ((unsigned)s == b->slot)
			continue; /* our own threads: gg_ceiling_nobody_frees */
		struct gpuguard_region_proc *p = gpuguard_region_proc(b->region, (unsigned)s);
		if (!atomic_load_explicit(&p->claim[b->entry], memory_order_seq_cst) &&
		    !atomic_load_explicit(&p->used[b->entry], memory_order_seq_cst))
			continue; /* holds nothing here: nothing to free */
		/* Untrusted words: a scribbled count can only make us
		 * wait (as before) or give up early (as fail would). */
		uint32_t asleep = 0;
		for (unsigned d = 0; d < GPUGUARD_REGION_DEVICES; d++)
			asleep += atomic_load_explicit(&p->waiting[d], memory_order_seq_cst);
		uint32_t threads = atomic_load_explicit(&p->threads, memory_order_seq_cst);
		if (asleep == 0 || asleep < threads)
			return 1; /* a thread of it is awake and may free */
	}
	return 0;
}

/* Raises our slot's published thread count to n (no-op outside the pod). */
static void pod_set_threads(_Atomic uint32_t *threads, uint32_t n)
{
	if (!threads)
		return;
	uint32_t cur = atomic_load_explicit(threads, memory_order_relaxed);
	/* seq_cst: before the caller's waiting++ (gg_ceiling_wait_enter), so
	 * a reader that sees us asleep sees the count we sleep against.
	 * Raise only: two threads publishing out of order keep the larger. */
	while (cur < n &&
	       !atomic_compare_exchange_weak_explicit(threads, &cur, n, memory_order_seq_cst, memory_order_relaxed))
		;
}

void gg_ceiling_read(int dev, struct gpuguard_device_stats *out)
{
	struct gg_device *g = &gg_devices[dev];
	struct gg_budget *b = gg_ceiling_budget_peek(dev);
	/* relaxed throughout: a snapshot of statistics, ordering nothing. */
	uint64_t lim = atomic_load_explicit(b->limit, memory_order_relaxed);
	out->limit = lim == GG_LIMIT_UNRESOLVED ? GG_UNLIMITED : lim;
	out->used = budget_used(b);
	out->peak = atomic_load_explicit(b->peak, memory_order_relaxed);
	out->pod = b->mine != NULL;
	out->process_used = b->mine ? atomic_load_explicit(b->mine, memory_order_relaxed) : out->used;
	out->pool_reserved = atomic_load_explicit(&g->pool_reserved, memory_order_relaxed);
	out->untracked_frees = atomic_load_explicit(&g->untracked_frees, memory_order_relaxed);
	for (int r = 0; r < GPUGUARD_REFUSED_COUNT; r++)
		out->refused[r] = atomic_load_explicit(&g->refused[r], memory_order_relaxed);
	out->pool_overshoot = atomic_load_explicit(&g->pool_overshoot, memory_order_relaxed);
	int64_t allocs = 0, frees = 0;
	for (int i = 0; i < GG_STRIPES; i++) {
		allocs += atomic_load_explicit(&g->stripe[i].allocs, memory_order_relaxed);
		frees += atomic_load_explicit(&g->stripe[i].frees, memory_order_relaxed);
	}
	out->allocs = (uint64_t)allocs;
	out->frees = (uint64_t)frees;
	/* The same events' bytes, counted once (struct gg_stripe); never
	 * negative. A free moves it at the record's removal from the table,
	 * before the driver's free (the stripes' own live count moved after
	 * it), so it agrees with the live table a dump copies. */
	out->live_bytes = gg_history_live(dev);
}

static void raise_peak(_Atomic uint64_t *peak, uint64_t now)
{
	uint64_t p = atomic_load_explicit(peak, memory_order_relaxed);
	/* relaxed: peak is a monotone statistic; it orders nothing else. */
	while (now > p &&
	       !atomic_compare_exchange_weak_explicit(peak, &p, now, memory_order_relaxed, memory_order_relaxed))
		;
}

/* Subtracts from *w, saturating at zero: a counter that wrapped below zero
 * would read as ~16 EiB used and refuse everything (HAMi#1181). */
static void sub_saturating(_Atomic uint64_t *w, uint64_t bytes)
{
	uint64_t cur = atomic_load_explicit(w, memory_order_relaxed);
	/* seq_cst: in gg_ceiling_release this CAS is the store of a Dekker pair
	 * with the waiters load after it (see gg_ceiling_wait_enter and gg_ceiling_wait_sleep). */
	while (!atomic_compare_exchange_weak_explicit(w, &cur, cur > bytes ? cur - bytes : 0, memory_order_seq_cst,
	                                              memory_order_relaxed))
		;
}

/* What sub_own gives back when its subtraction passed zero: the part of
 * bytes that the word did not hold when it was taken (all of it where the
 * word already read below zero, another subtraction's repair pending). */
__attribute__((noinline, cold)) static void sub_own_repair(_Atomic uint64_t *w, uint64_t old, uint64_t bytes)
{
	uint64_t give = (int64_t)old <= 0 ? bytes : bytes - old;
	/* seq_cst: as the subtraction it repairs */
	atomic_fetch_add_explicit(w, give, memory_order_seq_cst);
}

/* sub_saturating in one read-modify-write, for the words a release takes
 * from (issue 24: L1 was two compare-and-swap loops): our slot's used in the
 * pod and this process's own books. Each is raised only by adds of ours
 * (R4, F1, force) and lowered only through here; the sweep zeroes a slot
 * only once its owner is dead or exiting (an exchange). So: subtract, and
 * where the result reads below zero (a release of more than the word holds:
 * books already wrong, the case saturation guards), add back what passed
 * zero. At rest the word is then never below zero: each subtraction that
 * passes zero takes at most what the word held above zero when it took it,
 * so the word plus the repairs pending never reads below zero. It can end
 * above sub_saturating's result (a subtraction that met another's pending
 * repair takes nothing): charge kept, which errs toward refusing. Between a
 * subtraction that passed zero and its repair, a reader sees ~16 EiB for an
 * instant (a reservation's sum refuses: pod_sum's scribbled slot). Words
 * hold bytes of device memory, far below 2^63, so the sign bit is only
 * ever set by such a pass (a book past 8 EiB, which only an unlimited
 * ceiling allows and no card holds, keeps its charge on a release that
 * leaves it there: the side of refusing); bytes below 2^63 too, which
 * gg_ceiling_release_budget sees to. seq_cst: as sub_saturating (L1 is the
 * store of the Dekker pair with gg_ceiling_wake_waiters). */
static inline void sub_own(_Atomic uint64_t *w, uint64_t bytes)
{
	uint64_t old = atomic_fetch_sub_explicit(w, bytes, memory_order_seq_cst);
	if (GG_UNLIKELY((int64_t)(old - bytes) < 0))
		sub_own_repair(w, old, bytes);
}

/* The credit (issue 24): what a slow-path reservation reserves beyond its
 * request while the pod has plenty of room, so that the next requests of
 * this process are granted from its own slot's words alone (F1-F2). */
#define POD_CREDIT_CHUNK (4 * GG_MIB)
/* Room the pod must keep, beyond the refill, for a refill to be taken: at
 * least GG_CEILING_NEAR, so that no credit is taken near the ceiling, where
 * a grant reads the runtime charge fresh (gg_ceiling_near; a fast grant
 * keeps the thread's last answer). */
#define POD_CREDIT_ROOM (16 * POD_CREDIT_CHUNK)
_Static_assert(POD_CREDIT_ROOM >= (uint64_t)GG_CEILING_NEAR, "no credit near the ceiling");

/* Pod scope (b->claim set): the slots are the books, and this follows
 * tests/model/pod.pml step by step. A process killed at any instruction
 * leaves only words of its own slot, which the sweep zeroes (S2-S4): the
 * pod's used is then exactly what the live processes hold. The fast grant
 * (F0-F3) is ceiling.h's gg_ceiling_grant, inline in the allocation hooks;
 * the refill and R1-R5 are here. */
/* The fast grant past its F0-F2 (gg_ceiling_grant, ceiling.h): k is the
 * credit it read; f3 when its F1 raised used for a grant that F2 then
 * found taken back. F3 here, not in the fast grant, so that the grant
 * saves no registers for it (issue 24). */
enum gg_verdict gg_ceiling_pod_reserve_slow(struct gg_budget *b, uint64_t bytes, uint64_t lim, uint64_t k, int f3)
{
	/* F3: used -= b, then the slow path. seq_cst: as F1. */
	if (f3)
		sub_own(b->mine, bytes);
	/* A refill while our credit holds less than a chunk (so it never
	 * holds two): claimed with the request, kept only if the pod has
	 * plenty of room (R4b). */
	uint64_t extra = 0;
	if (k < POD_CREDIT_CHUNK && lim >= POD_CREDIT_ROOM + POD_CREDIT_CHUNK &&
	    bytes <= lim - POD_CREDIT_ROOM - POD_CREDIT_CHUNK)
		extra = POD_CREDIT_CHUNK;
	uint64_t claimed = bytes + extra; /* what R5 takes back */
	/* R1: announce the request. seq_cst, as every step here: R1 then R2
	 * in one process against R1 then R2 in another is a Dekker pair, so
	 * of two racing requests at least one sees the other's claim (the
	 * last to claim sees every earlier one), and the sum of grants never
	 * passes the ceiling. */
	atomic_fetch_add_explicit(b->claim, claimed, memory_order_seq_cst);
	int taken_back = 0;
	uint64_t used, sum;
	for (;;) {
		/* R2: claim, credit, used of every occupied slot, ours included */
		sum = pod_sum(b, &used);
		if (sum <= lim)
			break;
		if (extra) {
			/* R3a: the refill goes. Our claim still covers bytes, so
			 * whoever summed since R1 saw at least them: the sum less
			 * the refill is a sum for bytes alone. */
			sub_saturating(b->claim, extra);
			sum -= extra;
			claimed = bytes;
			extra = 0;
			if (sum <= lim)
				break;
		}
		if (taken_back) {
			/* R3: refused; the claim goes, nothing was charged */
			sub_saturating(b->claim, bytes);
			return GG_VERDICT_CEILING;
		}
		/* R3b: every slot's credit taken back, then R2 once more: no
		 * false refusal (the model's property) */
		pod_take_back(b);
		taken_back = 1;
	}
	/* R4 before R5: a reader between them counts us twice (safe); the
	 * other order would let one read neither. */
	atomic_fetch_add_explicit(b->mine, bytes, memory_order_seq_cst);
	/* relaxed: a private copy of the R4 word for the fall-back to our own
	 * books; the RMW loses no update, and nothing is published by it. */
	atomic_fetch_add_explicit(b->shadow, bytes, memory_order_relaxed);
	/* R4b: the refill, where plenty of room is left (sum holds it; a
	 * refill not kept was only claimed). seq_cst: before R5, as R4. */
	if (extra && lim - sum >= POD_CREDIT_ROOM)
		atomic_fetch_add_explicit(b->credit, extra, memory_order_seq_cst);
	sub_saturating(b->claim, claimed); /* R5 */
	/* R2's sum counted our whole credit and fits lim: it stands under
	 * lim (F0). relaxed: as F0's load. */
	atomic_store_explicit(&b->credit_lim, lim, memory_order_relaxed);
	raise_peak(b->peak, used + bytes);
	pod_publish(b, used + bytes);                  /* the pod's used, ours now included */
	gg_ceiling_near = lim - sum < GG_CEILING_NEAR; /* sum <= lim: granted */
	return GG_VERDICT_GRANTED;
}

enum gg_verdict gg_ceiling_try_reserve_on(struct gg_budget *b, uint64_t bytes, uint64_t lim)
{
	return gg_ceiling_grant(b, bytes, lim);
}

enum gg_verdict gg_ceiling_try_reserve_local(struct gg_budget *b, uint64_t bytes, uint64_t lim)
{
	/* The one place the configuration's verdict is read: every caller
	 * gets the reason with the refusal. Process scope only: no pod is
	 * attached under a GPUGUARD_LIMIT that did not parse (shared_attach.c,
	 * gg_shared_attached), so the pod's grant reads nothing extra (issue
	 * 24). Not folded into the limit (0 under it, gg_ceiling_limit_for):
	 * a charge of 0 bytes fits a limit of 0, and must fail closed too. */
	if (GG_UNLIKELY(gg_opt.limit_bad))
		return GG_VERDICT_CONFIG;
	/* seq_cst load and CAS: the waiter's side of the Dekker pair in
	 * gg_ceiling_wait_enter (waiters++ then this read; release's RMW then
	 * its waiters read), so one of the two always sees the other. */
	uint64_t cur = atomic_load_explicit(b->used, memory_order_seq_cst);
	uint64_t next;
	do {
		if (__builtin_add_overflow(cur, bytes, &next) || next > lim)
			return GG_VERDICT_CEILING;
		/* The CAS itself is the whole decision (check and take in one
		 * step): two requests racing for the last bytes cannot both pass. */
	} while (
	    !atomic_compare_exchange_weak_explicit(b->used, &cur, next, memory_order_seq_cst, memory_order_seq_cst));
	raise_peak(b->peak, next);
	gg_ceiling_near = lim - next < GG_CEILING_NEAR; /* next <= lim: granted */
	return GG_VERDICT_GRANTED;
}

enum gg_verdict gg_ceiling_try_reserve(int dev, uint64_t bytes)
{
	struct gg_budget *b = gg_ceiling_budget(dev);
	return gg_ceiling_try_reserve_on(b, bytes, gg_ceiling_budget_limit(b));
}

int gg_ceiling_reserve(int dev, uint64_t bytes)
{
	enum gg_verdict v = gg_ceiling_try_reserve(dev, bytes);
	if (v == GG_VERDICT_GRANTED)
		return 0;
	gg_ceiling_count_refusal(dev, gg_verdict_reason(v));
	return -1;
}

/* Someone may be waiting for room: bump the word and wake them all (each
 * retries; those that still do not fit sleep again). */
void gg_ceiling_wake_waiters(struct gg_budget *b)
{
	/* seq_cst: the load half of the Dekker pair (see gg_ceiling_wait_enter and gg_ceiling_wait_sleep). */
	if (GG_LIKELY(atomic_load_explicit(b->waiters, memory_order_seq_cst) == 0))
		return;
	atomic_fetch_add_explicit(b->wake, 1, memory_order_seq_cst);
	gg_futex_wake(b->wake, INT_MAX, b->futex_private);
}

/* A release of 2^63 bytes or more (no block is that large: a scribbled
 * or made-up figure) saturates the old way, which needs no sign bit. */
__attribute__((noinline, cold)) static void release_huge(struct gg_budget *b, uint64_t bytes)
{
	if (b->claim) {
		sub_saturating(b->mine, bytes);
		sub_saturating(b->shadow, bytes);
	} else {
		sub_saturating(b->used, bytes);
	}
	gg_ceiling_wake_waiters(b);
}

/* A release whose subtraction from w1 (old value o1) or w2 (o2; NULL in
 * process scope) passed zero: sub_own's repair, then the wake-up. Apart,
 * so that the release makes tail calls only and needs no frame. */
__attribute__((noinline, cold)) void gg_ceiling_release_repair(struct gg_budget *b, uint64_t bytes,
                                                               _Atomic uint64_t *w1, uint64_t o1, _Atomic uint64_t *w2,
                                                               uint64_t o2)
{
	if ((int64_t)(o1 - bytes) < 0)
		sub_own_repair(w1, o1, bytes);
	if (w2 && (int64_t)(o2 - bytes) < 0)
		sub_own_repair(w2, o2, bytes);
	gg_ceiling_wake_waiters(b);
}

void gg_ceiling_release_budget(struct gg_budget *b, uint64_t bytes)
{
	if (GG_UNLIKELY((int64_t)bytes < 0))
		return release_huge(b, bytes);
	if (b->claim)
		return gg_ceiling_release_pod(b, bytes); /* L1 (ceiling.h) */
	/* sub_own, as above (also the sweep's wake-up, on a pod entry's
	 * snapshot word with 0 bytes: no change) */
	uint64_t u = atomic_fetch_sub_explicit(b->used, bytes, memory_order_seq_cst);
	if (GG_UNLIKELY((int64_t)(u - bytes) < 0))
		return gg_ceiling_release_repair(b, bytes, b->used, u, NULL, 0);
	gg_ceiling_wake_waiters(b);
}

void gg_ceiling_force_budget(struct gg_budget *b, uint64_t bytes)
{
	if (b->claim) {
		/* as R4, with no check: memory the driver already handed out.
		 * seq_cst: later reservations' sums (R2) must see it. */
		atomic_fetch_add_explicit(b->mine, bytes, memory_order_seq_cst);
		/* relaxed: the private copy, as in gg_ceiling_grant */
		atomic_fetch_add_explicit(b->shadow, bytes, memory_order_relaxed);
		uint64_t now = budget_used(b);
		raise_peak(b->peak, now);
		pod_publish(b, now);
		return;
	}
	/* relaxed: no check to make, so nothing to order; a racing reserve's
	 * CAS sees the new value or retries. */
	uint64_t now = atomic_fetch_add_explicit(b->used, bytes, memory_order_relaxed) + bytes;
	raise_peak(b->peak, now);
}

void gg_ceiling_force(int dev, uint64_t bytes)
{
	gg_ceiling_force_budget(gg_ceiling_budget(dev), bytes);
}

void gg_ceiling_force_over(int dev, uint64_t bytes)
{
	/* The budget the ceiling holds us to: in pod scope the pod's limit
	 * and what the whole pod uses, not this process's books. relaxed: a
	 * statistic. */
	struct gg_budget *b = gg_ceiling_budget(dev);
	uint64_t lim = atomic_load_explicit(b->limit, memory_order_relaxed);
	uint64_t now = budget_used(b) + bytes;
	if (now > lim && lim != GG_LIMIT_UNRESOLVED)
		atomic_fetch_add_explicit(&gg_devices[dev].pool_overshoot, now - lim, memory_order_relaxed);
	gg_ceiling_force_budget(b, bytes);
}

/* Waiting for room (GPUGUARD_ON_LIMIT=wait). The caller does
 *	enter; loop { seen = wake_seq; retry; sleep(seen) }; leave
 * which with gg_ceiling_wake_waiters is a Dekker pair: the waiter publishes waiters++
 * and then reads `used` (its retry); a releaser writes `used` and then reads
 * waiters. seq_cst on all four makes at least one side see the other: either
 * the retry fits, or the releaser bumps `wake` after the waiter read it and
 * the futex wait returns at once. (gg_ceiling_could_fit, ceiling.h, is
 * the waiter's first question: whether waiting can help at all.) */

/* Who could free (GPUGUARD_ON_LIMIT=wait without stalls, issue 11).
 * Memory a budget holds comes back only when a thread that holds it frees
 * it (or its process dies, which the retry's sweep notices). A waiter that
 * is the only one who could free would sleep out its whole duration for
 * nothing: a lone server at its ceiling, or two servers of a pod each
 * asleep on the other. So before each sleep it asks whether anyone is left.
 *
 * Other processes (pod scope) are judged by their slot: one holding or
 * claiming nothing on the entry cannot free there; one whose every counted
 * thread is asleep in a wait cannot either. Our own process is judged by
 * two counters: threads that made a governed allocation, free or memory
 * query (gpu_threads), and threads asleep in a wait (waiting_threads). Per
 * thread holdings would cost a word per thread and per call; a thread that
 * has never called us holds nothing we charged, and one that frees memory
 * another thread allocated has (almost always) freed or queried before.
 * So when every counted thread waits, nobody who has shown up can free.
 * The two ways this errs: a thread whose very first governed call will be
 * a free of memory handed to it is not counted yet, nor one between its
 * first grant and that grant's tick, which counts it (account.h) (the
 * waiter gives up early, as `fail` would have: never worse than
 * GPUGUARD_ON_LIMIT=fail), and a thread that exited stays counted (the
 * waiter sleeps, as before). */
static _Atomic uint32_t gpu_threads;     /* counted threads of this process */
static _Atomic uint32_t waiting_threads; /* of those, asleep in a wait (any device) */

void gg_ceiling_note_thread_slow(void)
{
	gg_thread_counted = 1;
	/* seq_cst: read by waiters of this process (gg_ceiling_nobody_frees)
	 * after their waiting_threads++; a thread counted after that read is
	 * one that had not called us yet (see above). */
	uint32_t n = atomic_fetch_add_explicit(&gpu_threads, 1, memory_order_seq_cst) + 1;
	/* Readers in other processes look at our count only while one of our
	 * threads waits, and each waiter publishes it on entering; this keeps
	 * it current for a thread that shows up while others wait. */
	if (atomic_load_explicit(&waiting_threads, memory_order_seq_cst))
		pod_set_threads(atomic_load_explicit(&pod_threads, memory_order_relaxed), n);
}

int gg_ceiling_nobody_frees(const struct gg_budget *b)
{
	/* seq_cst: as in gg_ceiling_note_thread */
	if (atomic_load_explicit(&waiting_threads, memory_order_seq_cst) <
	    atomic_load_explicit(&gpu_threads, memory_order_seq_cst))
		return 0; /* a thread of ours is awake and may free */
	return !(b->claim && pod_others_could_free(b));
}

void gg_ceiling_count_wait(int dev, struct gg_budget *b, uint64_t ns)
{
	/* relaxed: statistics */
	atomic_fetch_add_explicit(&gg_devices[dev].wait_ns, ns, memory_order_relaxed);
	if (b->wait_ns != &gg_devices[dev].wait_ns && !pod_gone(b))
		atomic_fetch_add_explicit(b->wait_ns, ns, memory_order_relaxed);
}

uint64_t gg_ceiling_wait_ns(int dev)
{
	/* relaxed: a statistic */
	return atomic_load_explicit(&gg_devices[dev].wait_ns, memory_order_relaxed);
}

uint32_t gg_ceiling_wait_enter(struct gg_budget *b)
{
	/* seq_cst: read before we count as asleep, so a stalemate declared
	 * by anyone who saw us asleep is one we see (gg_ceiling_give_up). */
	uint32_t since = atomic_load_explicit(b->stalemate, memory_order_seq_cst);
	/* seq_cst: before our retry and our look at who could free; a waiter
	 * of ours that looks after this sees one more of us asleep. */
	atomic_fetch_add_explicit(&waiting_threads, 1, memory_order_seq_cst);
	/* Our slot first, the pod's word second, undone in the opposite order
	 * (as for charges): a process killed while waiting leaves a slot count
	 * that reclaiming takes off the pod's. The thread count is published
	 * before the slot's waiting++, so a reader that sees us asleep sees
	 * what we sleep against. seq_cst: against other processes' looks at
	 * who could free (pod_others_could_free), as the wake-up below. */
	if (b->mine_waiting) {
		pod_set_threads(b->threads, atomic_load_explicit(&gpu_threads, memory_order_seq_cst));
		atomic_fetch_add_explicit(b->mine_waiting, 1, memory_order_seq_cst);
	}
	/* the Dekker pair above */
	uint32_t before = atomic_fetch_add_explicit(b->waiters, 1, memory_order_seq_cst);
	/* One more asleep may leave nobody to free: those already waiting
	 * look again now rather than at the end of their slice. Our waiting
	 * words (stored above) come before the bump in the total order, so a
	 * waiter that reads the new wake value also sees us asleep. */
	if (before) {
		atomic_fetch_add_explicit(b->wake, 1, memory_order_seq_cst);
		gg_futex_wake(b->wake, INT_MAX, b->futex_private);
	}
	return since;
}

int gg_ceiling_give_up(struct gg_budget *b, uint32_t seen, uint32_t since)
{
	/* seq_cst: the declarer's bump comes before its wake-up below, so a
	 * waiter woken by it reads the new count. */
	if (atomic_load_explicit(b->stalemate, memory_order_seq_cst) != since)
		return 1; /* another waiter found nobody could free, us included */
	/* Nobody to free, and no room given back since `seen` (a free between
	 * our retry and the look bumped the wake word, and its holder's
	 * waiting++ came after that free: both seq_cst, so seeing it asleep
	 * means seeing the bump too; then retry instead). */
	if (!gg_ceiling_nobody_frees(b) || gg_ceiling_wake_seq(b) != seen)
		return 0;
	/* A stalemate: everyone waiting now waits on someone who waits. All
	 * of them give up, not only the first to look (the others would
	 * otherwise see it awake again and wait out their time for it). */
	atomic_fetch_add_explicit(b->stalemate, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(b->wake, 1, memory_order_seq_cst);
	gg_futex_wake(b->wake, INT_MAX, b->futex_private);
	return 1;
}

uint32_t gg_ceiling_wake_seq(const struct gg_budget *b)
{
	/* seq_cst: read before the retry, in the Dekker pair above */
	return atomic_load_explicit(b->wake, memory_order_seq_cst);
}

int gg_ceiling_wait_sleep(const struct gg_budget *b, uint32_t seen, uint64_t deadline_ns)
{
	uint64_t now = gg_mono_ns();
	if (now >= deadline_ns)
		return -1;
	/* Slices of at most 100 ms: memory a dead process held comes back by
	 * reclaiming, which wakes nobody; the caller reclaims between slices. */
	uint64_t left = deadline_ns - now;
	if (left > 100000000ull)
		left = 100000000ull;
	struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
	gg_futex_wait(b->wake, seen, &ts, b->futex_private);
	return 0;
}

void gg_ceiling_waiters_sub(_Atomic uint32_t *waiters, uint32_t n)
{
	uint32_t cur = atomic_load_explicit(waiters, memory_order_relaxed);
	/* seq_cst as the increment in gg_ceiling_wait_enter; saturating: the
	 * word is shared with other processes, and a count wrapped below zero
	 * would make every free pay for a wake-up. */
	while (n && !atomic_compare_exchange_weak_explicit(waiters, &cur, cur > n ? cur - n : 0, memory_order_seq_cst,
	                                                   memory_order_relaxed))
		;
}

int gg_ceiling_wait_moved(int dev, const struct gg_budget *b)
{
	return gg_ceiling_budget(dev) != b;
}

void gg_ceiling_wait_leave(struct gg_budget *b)
{
	if (!pod_gone(b)) {
		gg_ceiling_waiters_sub(b->waiters, 1);
		if (b->mine_waiting)
			atomic_fetch_sub_explicit(b->mine_waiting, 1, memory_order_seq_cst); /* as in wait_enter */
	}
	atomic_fetch_sub_explicit(&waiting_threads, 1, memory_order_seq_cst); /* likewise */
}

void gg_ceiling_meminfo(int dev, uint64_t real_free, uint64_t real_total, uint64_t *free_out, uint64_t *total_out)
{
	/* total = min(ceiling, physical); free = min(physical free, ceiling - used),
	 * never below zero, also when usage is over the ceiling (DESIGN.md §2). */
	struct gg_budget *b = gg_ceiling_budget_peek(dev);
	uint64_t lim = atomic_load_explicit(b->limit, memory_order_relaxed);
	uint64_t used = budget_used(b);
	if (lim == GG_LIMIT_UNRESOLVED)
		lim = GG_UNLIMITED;
	uint64_t total = real_total < lim ? real_total : lim;
	uint64_t room = lim > used ? lim - used : 0;
	*total_out = total;
	*free_out = real_free < room ? real_free : room;
}

void gg_ceiling_reset(void)
{
	/* relaxed: the fork child has one thread. */
	for (int d = 0; d < GG_MAX_DEVICES; d++) {
		struct gg_device *g = &gg_devices[d];
		atomic_store_explicit(&g->used, 0, memory_order_relaxed);
		atomic_store_explicit(&g->peak, 0, memory_order_relaxed);
		atomic_store_explicit(&g->pool_reserved, 0, memory_order_relaxed);
		atomic_store_explicit(&g->untracked_frees, 0, memory_order_relaxed);
		for (int i = 0; i < GG_STRIPES; i++) {
			atomic_store_explicit(&g->stripe[i].allocs, 0, memory_order_relaxed);
			atomic_store_explicit(&g->stripe[i].frees, 0, memory_order_relaxed);
		}
		for (int r = 0; r < GPUGUARD_REFUSED_COUNT; r++)
			atomic_store_explicit(&g->refused[r], 0, memory_order_relaxed);
		atomic_store_explicit(&g->pool_overshoot, 0, memory_order_relaxed);
		atomic_store_explicit(&g->refused_all, 0, memory_order_relaxed);
		atomic_store_explicit(&g->waiters, 0, memory_order_relaxed);
		atomic_store_explicit(&g->wait_ns, 0, memory_order_relaxed);
		atomic_store_explicit(&g->stalemate, 0, memory_order_relaxed);
		/* The parent's bindings (its region slot) are not the child's. */
		atomic_store_explicit(&g->budget, NULL, memory_order_relaxed);
		atomic_store_explicit(&g->bind_state, 0, memory_order_relaxed);
	}
	/* relaxed: as above. The parent's region is not the child's yet. */
	atomic_store_explicit(&pod_lost, 0, memory_order_relaxed);
	atomic_store_explicit(&pod_threads, NULL, memory_order_relaxed);
	/* The child's one thread is the forking one: counted if it was. */
	atomic_store_explicit(&gpu_threads, gg_thread_counted, memory_order_relaxed);
	atomic_store_explicit(&waiting_threads, 0, memory_order_relaxed);
}
