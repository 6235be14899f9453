/* gpuguard: pod scope's reclaim: a slot whose owner died (its lock is free)
 * is swept, its charges returned to the pod (steps S1-S4 of
 * tests/model/pod.pml), and its obituary moved to the deaths ring. */
#define _GNU_SOURCE
#include "shared_sweep.h"

#include <fcntl.h>
#include <unistd.h>

#include "ceiling.h"
#include "shared_obit.h"

_Atomic uint64_t gg_shared_last_reclaim_ms;

/* After each change of our charge in the pod (the ceiling calls it through
 * the budget, gg_ceiling_bind_slow's pod budget) and each sweep. */
void gg_shared_pod_changed(void)
{
	/* Truncated and written afresh by a process that started since (no
	 * SIGBUS then: the file has its size again): our slot is no longer
	 * counted. relaxed: a word only we write, and the file's new owner's
	 * memset; any stale read is caught at our next step. */
	if (GG_UNLIKELY(gg_shared_me &&
	                !(atomic_load_explicit(gg_shared_occupied_word(gg_shared_slot), memory_order_relaxed) &
	                  (1ull << (gg_shared_slot % 64)))) &&
	    !atomic_load_explicit(&gg_shared_detached, memory_order_relaxed))
		gg_shared_lose_region();
	gg_shared_obit_refresh();
}

static void publish(unsigned i)
{
	/* relaxed: a snapshot for readers of the file (top, metrics); the
	 * books are the slots. */
	atomic_store_explicit(&gg_shared_entry(i)->used, gpuguard_region_used(gg_shared_reg, i), memory_order_relaxed);
	atomic_store_explicit(&gg_shared_entry(i)->runtime, gpuguard_region_runtime(gg_shared_reg, i),
	                      memory_order_relaxed);
	gg_shared_pod_changed();
}

/* Sweep steps S2-S4 (tests/model/pod.pml) on slot s, whose lock the caller
 * holds (S1), so its owner is dead (died != 0) or is us, exiting: its
 * claims and charges are zeroed and its occupancy bit cleared. Nothing is
 * subtracted from anyone: every word zeroed here belonged to the slot
 * alone, so the pod's used afterwards is exactly what the others hold,
 * whatever instruction the owner died at. A sweeper killed half-way
 * leaves a slot the next sweep finishes (each step is idempotent). */
void gg_shared_reclaim_slot(unsigned s, int died, int fd)
{
	struct gpuguard_region_proc *p = gpuguard_region_proc(gg_shared_reg, s);
	/* A LIVE slot whose owner is dead died without exiting (an exit
	 * frees its own slot): its obituary goes to the deaths ring, before
	 * the books it reads are zeroed. relaxed: the owner is dead. */
	if (died && fd >= 0 && atomic_load_explicit(&p->state, memory_order_relaxed) == GPUGUARD_RPROC_LIVE)
		gg_shared_obit_write(fd, s, gg_realtime_ms());
	for (unsigned d = 0; d < GPUGUARD_REGION_DEVICES; d++) {
		struct gpuguard_region_device *e = gg_shared_entry(d);
		/* relaxed: the owner is dead (its stores are all in memory) or
		 * is this thread, at exit. */
		gg_ceiling_waiters_sub(&e->waiters, atomic_exchange_explicit(&p->waiting[d], 0, memory_order_relaxed));
		/* S2, S3. seq_cst: ordered before S4 and the wake-up below for
		 * reservations summing (R2). The runtime word (S3a) before the
		 * used word it is part of (S3b): a reader summing both never
		 * sees more runtime than charge (region.h's runtime table). */
		atomic_store_explicit(&p->claim[d], 0, memory_order_seq_cst);
		/* S2b: the slot's credit (reserved, never handed out), before
		 * its used, as the model orders it: a death leaks none of it */
		atomic_store_explicit(gpuguard_region_credit_word(gg_shared_reg, s, d), 0, memory_order_seq_cst);
		atomic_store_explicit(gpuguard_region_runtime_word(gg_shared_reg, s, d), 0, memory_order_seq_cst);
		uint64_t held = atomic_exchange_explicit(&p->used[d], 0, memory_order_seq_cst);
		if (!held)
			continue;
		if (died)
			atomic_fetch_add_explicit(&e->reclaimed, held, memory_order_relaxed); /* statistic */
	}
	/* S4. seq_cst: after the zeroing, as the model orders it. */
	atomic_fetch_and_explicit(gg_shared_occupied_word(s), ~(1ull << (s % 64)), memory_order_seq_cst);
	for (unsigned d = 0; d < GPUGUARD_REGION_DEVICES; d++) {
		struct gpuguard_region_device *e = gg_shared_entry(d);
		if (atomic_load_explicit(&e->state, memory_order_acquire) != GPUGUARD_RDEV_READY)
			continue;
		publish(d);
		struct gg_budget b = {.used = &e->used, .waiters = &e->waiters, .wake = &e->wake};
		gg_ceiling_release_budget(&b, 0); /* wakes sleepers: room came back */
	}
	atomic_store_explicit(&p->ctx_charged, 0, memory_order_relaxed); /* ordered by the release below */
	/* relaxed, all: ordered by the release below, as ctx_charged */
	atomic_store_explicit(&p->obit_ms, 0, memory_order_relaxed);
	atomic_store_explicit(&p->refused, 0, memory_order_relaxed);
	atomic_store_explicit(&p->refused_ms, 0, memory_order_relaxed);
	atomic_store_explicit(&p->host_ws, 0, memory_order_relaxed);
	atomic_store_explicit(&p->host_usage, 0, memory_order_relaxed);
	atomic_store_explicit(&p->host_limit, 0, memory_order_relaxed);
	atomic_store_explicit(&p->host_flags, 0, memory_order_relaxed);
	p->container = 0;
	p->has_pinned = 0;
	atomic_store_explicit(&p->host_pinned, 0, memory_order_relaxed);
	atomic_store_explicit(&p->threads, 0, memory_order_relaxed);
	/* release: the zeroed books before the state a reader acquires. */
	atomic_store_explicit(&p->state, GPUGUARD_RPROC_FREE, memory_order_release);
}

static int slot_idle(unsigned s)
{
	struct gpuguard_region_proc *p = gpuguard_region_proc(gg_shared_reg, s);
	/* relaxed: only spares a reclaim of an empty slot; the slot's lock,
	 * which the caller holds, is what decides. */
	if (atomic_load_explicit(&p->state, memory_order_relaxed) != GPUGUARD_RPROC_FREE)
		return 0;
	for (unsigned d = 0; d < GPUGUARD_REGION_DEVICES; d++)
		if (atomic_load_explicit(&p->used[d], memory_order_relaxed) ||
		    atomic_load_explicit(&p->claim[d], memory_order_relaxed) ||
		    atomic_load_explicit(gpuguard_region_credit_word(gg_shared_reg, s, d), memory_order_relaxed) ||
		    atomic_load_explicit(&p->waiting[d], memory_order_relaxed))
			return 0;
	/* relaxed: as above */
	return !(atomic_load_explicit(gg_shared_occupied_word(s), memory_order_relaxed) & (1ull << (s % 64)));
}

/* With fd (not our main descriptor): reclaims every slot whose owner is
 * gone. Returns how many slots are held by live processes. */
unsigned gg_shared_sweep(int fd)
{
	unsigned live = 0;
	for (unsigned s = 0; s < GPUGUARD_REGION_PROCS; s++) {
		if (gg_shared_me && s == gg_shared_slot) {
			live++;
			continue;
		}
		/* Nothing to reclaim, and nobody mid-claim (claims are made
		 * under the setup lock, which every sweep's caller holds or
		 * does not need): spare the lock's system call. A slot whose
		 * owner died is never idle. */
		if (slot_idle(s))
			continue;
		uint64_t off = gpuguard_region_slot_lock(s);
		if (gg_shared_lock_byte(fd, off, F_WRLCK) != 0) {
			live++; /* held: its owner lives */
			continue;
		}
		if (!slot_idle(s))
			gg_shared_reclaim_slot(s, 1, fd);
		gg_shared_lock_byte(fd, off, F_UNLCK);
	}
	return live;
}

void gg_shared_reclaim(void)
{
	/* acquire: pairs with the release in gg_shared_attached(), for reg and me. */
	if (atomic_load_explicit(&gg_shared_attach_state, memory_order_acquire) != ATTACH_OK)
		return;
	uint64_t now = gg_now_ms(), last = atomic_load_explicit(&gg_shared_last_reclaim_ms, memory_order_relaxed);
	/* relaxed: a rate limit; at worst two threads sweep at once, and the
	 * slot locks keep them from reclaiming the same slot twice. */
	if (now - last < 10 && last != 0)
		return;
	if (!atomic_compare_exchange_strong_explicit(&gg_shared_last_reclaim_ms, &last, now ? now : 1,
	                                             memory_order_relaxed, memory_order_relaxed))
		return;
	gg_shared_check_path();
	int fd = gg_shared_open_again();
	if (fd < 0)
		return;
	gg_shared_sweep(fd);
	close(fd);
}

/* For memory info (cuMemGetInfo, hipMemGetInfo, NVML): a dead member's
 * charges are free again within a second, with no allocation needed to
 * trigger the sweep (issue 9, finding 4). At most every 250 ms per process:
 * a sweep costs a lock's system call per occupied slot; between sweeps a
 * query costs two loads here. */
void gg_shared_probe(void)
{
	static _Atomic uint64_t last_probe_ms;
	/* acquire: as in gg_shared_reclaim */
	if (atomic_load_explicit(&gg_shared_attach_state, memory_order_acquire) != ATTACH_OK)
		return;
	uint64_t now = gg_now_ms(), last = atomic_load_explicit(&last_probe_ms, memory_order_relaxed);
	/* relaxed: a rate limit, as in gg_shared_reclaim */
	if (last != 0 && now - last < 250)
		return;
	if (atomic_compare_exchange_strong_explicit(&last_probe_ms, &last, now ? now : 1, memory_order_relaxed,
	                                            memory_order_relaxed))
		gg_shared_reclaim();
}
