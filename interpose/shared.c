/* gpuguard: pod scope's devices. Every process of a pod maps one small
 * file, the pod region (include/gpuguard/region.h), and charges its device
 * memory to the device entries there, so GPUGUARD_LIMIT is one budget for
 * all of them. This file finds or fills in a device's entry (a card is its
 * UUID, whichever runtime named it), points the device's budget there (the
 * reservation is ceiling.c's single CAS on the entry's `used` word), reads
 * the pod for dumps and turns NVML's view into the budget's.
 *
 * The rest of pod scope, bottom up (tests/layers.txt): the file, its locks
 * and this process's attachment (shared_file.c); the SIGBUS guard
 * (shared_guard.c); obituaries (shared_obit.c); reclaim and sweep
 * (shared_sweep.c); pinned host memory (shared_pinned.c); attach, exit and
 * fork (shared_attach.c). */
#define _GNU_SOURCE
#include "shared.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "ceiling.h"
#include "log.h"
#include "options.h"

static gg_identity_fn identity[2];

void gg_shared_set_identity(int runtime, gg_identity_fn fn)
{
	if (runtime == 0 || runtime == 1)
		identity[runtime] = fn;
}

/* ---- device entries --------------------------------------------------- */

/* A card is its UUID, whichever runtime named it: HIP on an NVIDIA card
 * and CUDA see one card and share its entry, and CUDA device 0 and HIP
 * device 0 on different cards never do (issue 9, finding 6). An entry
 * without a UUID matches only another without one. */
static int find_entry(uint32_t kind, const uint8_t uuid[16])
{
	int by_ordinal = kind == GPUGUARD_RDEV_ORDINAL;
	for (unsigned i = 0; i < GPUGUARD_REGION_DEVICES; i++) {
		struct gpuguard_region_device *e = gg_shared_entry(i);
		/* acquire: pairs with the release that made the entry READY. */
		if (atomic_load_explicit(&e->state, memory_order_acquire) == GPUGUARD_RDEV_READY &&
		    (e->kind == GPUGUARD_RDEV_ORDINAL) == by_ordinal && memcmp(e->uuid, uuid, 16) == 0)
			return (int)i;
	}
	return -1;
}

/* Finds or (under the setup lock) fills in the entry for this device. */
static int claim_entry(int dev, uint32_t kind, const uint8_t uuid[16], uint64_t physical)
{
	int i = find_entry(kind, uuid);
	if (i >= 0) {
		/* Made without a ceiling, before the pod had one: ours now. */
		uint64_t none = GG_UNLIMITED;
		/* relaxed: the limit is a plain number read with relaxed loads. */
		atomic_compare_exchange_strong_explicit(&gg_shared_entry((unsigned)i)->limit, &none,
		                                        gg_ceiling_limit_for(dev, physical), memory_order_relaxed,
		                                        memory_order_relaxed);
		return i;
	}
	int fd = gg_shared_open_again();
	if (fd < 0 || gg_shared_lock_setup(fd) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	i = find_entry(kind, uuid); /* someone may have been first */
	for (unsigned j = 0; i < 0 && j < GPUGUARD_REGION_DEVICES; j++) {
		struct gpuguard_region_device *e = gg_shared_entry(j);
		/* CLAIMING left over is a claimer that died holding the lock.
		 * relaxed here and in the stores below: we hold the setup lock,
		 * and readers look at nothing but READY (released below). */
		if (atomic_load_explicit(&e->state, memory_order_relaxed) == GPUGUARD_RDEV_READY)
			continue;
		atomic_store_explicit(&e->state, GPUGUARD_RDEV_CLAIMING, memory_order_relaxed);
		e->kind = kind;
		memcpy(e->uuid, uuid, 16);
		e->physical = physical;
		atomic_store_explicit(&e->limit, gg_ceiling_limit_for(dev, physical), memory_order_relaxed);
		atomic_store_explicit(&e->used, 0, memory_order_relaxed);
		atomic_store_explicit(&e->peak, 0, memory_order_relaxed);
		atomic_store_explicit(&e->refused, 0, memory_order_relaxed);
		atomic_store_explicit(&e->reclaimed, 0, memory_order_relaxed);
		atomic_store_explicit(&e->runtime, 0, memory_order_relaxed);
		atomic_store_explicit(&e->card_reserved, 0, memory_order_relaxed);
		atomic_store_explicit(&e->waiters, 0, memory_order_relaxed);
		atomic_store_explicit(&e->wait_ns, 0, memory_order_relaxed);
		atomic_store_explicit(&e->stalemate, 0, memory_order_relaxed);
		/* release: the fields above before READY (find_entry acquires). */
		atomic_store_explicit(&e->state, GPUGUARD_RDEV_READY, memory_order_release);
		i = (int)j;
	}
	gg_shared_lock_byte(fd, 0, F_UNLCK);
	close(fd);
	return i;
}

/* Who dev is: the UUID from the runtime whose hook binds it (its ordinal
 * dev is another runtime's ordinal dev only on the same card), from the
 * other runtime only when that one is not loaded at all, else just its
 * ordinal. */
static uint32_t identify(int dev, int runtime, uint8_t uuid[16], uint64_t *physical)
{
	*physical = 0;
	for (int k = 0; k < 2; k++) {
		int r = k ? !runtime : runtime;
		int rc = identity[r] ? identity[r](dev, uuid, physical) : 1;
		if (rc == 0)
			return r == GG_RT_CUDA ? GPUGUARD_RDEV_CUDA : GPUGUARD_RDEV_HIP;
		if (rc < 0)
			break; /* loaded, and cannot say: never the other runtime's card */
	}
	memset(uuid, 0, 16);
	memcpy(uuid, &dev, sizeof dev);
	return GPUGUARD_RDEV_ORDINAL;
}

int gg_shared_bind(int dev, struct gg_budget *b)
{
	if (!gg_shared_attached())
		return -1;
	uint8_t uuid[16];
	uint64_t physical;
	uint32_t kind = identify(dev, gg_cur_runtime == GG_RT_HIP, uuid, &physical);
	int i = claim_entry(dev, kind, uuid, physical);
	if (i < 0) {
		gg_log(GG_LOG_WARN, "pod region %s has no room for device %d; it keeps a per-process ceiling",
		       gg_opt.shared_path, dev);
		return -1;
	}
	struct gpuguard_region_device *e = gg_shared_entry((unsigned)i);
	*b = (struct gg_budget){
	    .used = &e->used,
	    .peak = &e->peak,
	    .limit = &e->limit,
	    .refused = &e->refused,
	    .waiters = &e->waiters,
	    .wake = &e->wake,
	    .mine = &gg_shared_me->used[i],
	    .mine_waiting = &gg_shared_me->waiting[i],
	    .claim = &gg_shared_me->claim[i],
	    .credit = gpuguard_region_credit_word(gg_shared_reg, gg_shared_slot, (unsigned)i),
	    .shadow = &gg_devices[dev].used,
	    .wait_ns = &e->wait_ns,
	    .stalemate = &e->stalemate,
	    .region = gg_shared_reg,
	    .slot = gg_shared_slot,
	    .driver_oom = &e->driver_oom,
	    .threads = &gg_shared_me->threads,
	    .changed = gg_shared_pod_changed,
	    .entry = (unsigned)i,
	    .futex_private = 0,
	};
	/* Once per process per device entry (two ordinals can name one card). */
	uint32_t bit = 1u << i;
	/* relaxed: the bit only has to be taken once among our threads (the
	 * RMW is atomic); nothing else is published through it. */
	if (gg_opt.context_reserve &&
	    !(atomic_fetch_or_explicit(&gg_shared_me->ctx_charged, bit, memory_order_relaxed) & bit))
		gg_ceiling_force_budget(b, gg_opt.context_reserve);
	return 0;
}

void gg_shared_check_card(int dev, int runtime)
{
	static _Atomic uint64_t checked[2]; /* bit dev: this runtime's dev compared */
	uint64_t bit = 1ull << dev;
	/* relaxed: a once-per-ordinal flag publishing nothing; racing threads
	 * may both compare, and the RMW below lets only one of them warn. */
	if (atomic_load_explicit(&checked[runtime], memory_order_relaxed) & bit)
		return;
	/* acquire: pairs with the release in gg_shared_attached(), for reg. Without
	 * binding: only a device already in the pod can be the other runtime's
	 * card. */
	if (atomic_load_explicit(&gg_shared_attach_state, memory_order_acquire) != ATTACH_OK)
		return;
	struct gg_budget *b = gg_ceiling_budget_peek(dev);
	uint8_t uuid[16];
	uint64_t physical = 0;
	if (!b->mine || !identity[runtime] || identity[runtime](dev, uuid, &physical) != 0)
		return;
	/* The entry's fields were written before it was READY; our binder
	 * acquired that, and released the budget that peek acquired. */
	const struct gpuguard_region_device *e = gg_shared_entry(b->entry);
	int same = e->kind == GPUGUARD_RDEV_ORDINAL || memcmp(e->uuid, uuid, 16) == 0;
	/* relaxed: as above. */
	if ((atomic_fetch_or_explicit(&checked[runtime], bit, memory_order_relaxed) & bit) || same)
		return;
	gg_log(GG_LOG_WARN,
	       "CUDA device %d and HIP device %d are different cards; this process charges both to the pod "
	       "budget of the card %s named first",
	       dev, dev, runtime == GG_RT_HIP ? "CUDA" : "HIP");
}

/* ---- for dumps ------------------------------------------------------------ */

/* Whether someone holds slot s's lock (read-only: F_OFD_GETLK). */
static int slot_alive(int fd, unsigned s)
{
	if (gg_shared_me && s == gg_shared_slot)
		return 1;
	struct flock fl = {
	    .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)gpuguard_region_slot_lock(s), .l_len = 1};
	return fd >= 0 && fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

void gg_shared_foreach_use(void (*fn)(const struct gg_pod_use *, void *), void *arg)
{
	/* acquire: pairs with the release in gg_shared_attached(), for reg and me. */
	if (atomic_load_explicit(&gg_shared_attach_state, memory_order_acquire) != ATTACH_OK)
		return;
	/* Entry -> local ordinal, from the budgets our devices are bound to. */
	int local[GPUGUARD_REGION_DEVICES];
	for (unsigned i = 0; i < GPUGUARD_REGION_DEVICES; i++)
		local[i] = -1;
	for (int d = 0; d < GG_MAX_DEVICES; d++) {
		struct gg_device *g = &gg_devices[d];
		/* acquire: as in gg_ceiling_budget. */
		if (atomic_load_explicit(&g->budget, memory_order_acquire) != &g->pod)
			continue;
		for (unsigned i = 0; i < GPUGUARD_REGION_DEVICES; i++)
			if (g->pod.used == &gg_shared_entry(i)->used && local[i] < 0)
				local[i] = d;
	}
	int fd = gg_shared_open_again();
	for (unsigned s = 0; s < GPUGUARD_REGION_PROCS; s++) {
		struct gpuguard_region_proc *p = gpuguard_region_proc(gg_shared_reg, s);
		struct gg_pod_use u = {.slot = s, .pid = p->pid, .self = gg_shared_me && s == gg_shared_slot};
		memcpy(u.comm, p->comm, sizeof u.comm);
		u.comm[sizeof u.comm - 1] = 0; /* untrusted: terminate our copy */
		int probed = 0;
		for (unsigned i = 0; i < GPUGUARD_REGION_DEVICES; i++) {
			/* relaxed: a snapshot for a report */
			u.used = atomic_load_explicit(&p->used[i], memory_order_relaxed);
			if (!u.used || local[i] < 0)
				continue;
			if (!probed++)
				u.alive = slot_alive(fd, s);
			u.dev = local[i];
			fn(&u, arg);
		}
	}
	if (fd >= 0)
		close(fd);
}

/* ---- NVML ----------------------------------------------------------------- */

/* The CUDA ordinal whose UUID is uuid (cuDeviceGetUuid_v2: a MIG instance's
 * is its MIG UUID); -1 when the driver is not in use here, so no ordinal is
 * known; -2 when the process's devices are known and none is it: a card
 * this process is not on, such as the GPU whose MIG instance it uses. */
static int cuda_ordinal_of(const uint8_t uuid[16])
{
	int seen = 0;
	for (int d = 0; d < GG_MAX_DEVICES && identity[GG_RT_CUDA]; d++) {
		uint8_t u[16];
		uint64_t physical;
		int rc = identity[GG_RT_CUDA](d, u, &physical);
		if (rc != 0)
			break; /* 1: no driver in use; -1: no device d (the end of the list) */
		if (memcmp(u, uuid, 16) == 0)
			return d;
		seen = 1;
	}
	return seen ? -2 : -1;
}

void gg_nvml_meminfo(const uint8_t *uuid, unsigned index, uint64_t *free_bytes, uint64_t *total_bytes)
{
	uint64_t lim = GG_LIMIT_UNRESOLVED, used = 0;
	int found = 0;
	gg_shared_probe();
	if (uuid && gg_shared_attached()) {
		int i = find_entry(GPUGUARD_RDEV_CUDA, uuid); /* any entry with this UUID */
		if (i >= 0) {
			struct gpuguard_region_device *e = gg_shared_entry((unsigned)i);
			/* relaxed: numbers to report, as gg_ceiling_meminfo reads them */
			lim = atomic_load_explicit(&e->limit, memory_order_relaxed);
			used = gpuguard_region_used(gg_shared_reg, (unsigned)i);
			found = 1;
		}
	}
	if (!found) {
		/* No process of the pod has used it yet, or process scope: this
		 * process's own books, for the ordinal with the device's UUID
		 * (CUDA_VISIBLE_DEVICES renumbers; a MIG handle has no index),
		 * else NVML's index as the ordinal while the driver is not in
		 * use. A device that is none of ours is left as the driver
		 * says: under MIG the parent GPU, whose instance is our card. */
		int d = uuid ? cuda_ordinal_of(uuid) : -1;
		if (d == -2)
			return;
		if (d >= 0)
			index = (unsigned)d;
		if (index >= GG_MAX_DEVICES)
			return;
		struct gg_budget *b = gg_ceiling_budget_peek((int)index);
		lim = atomic_load_explicit(b->limit, memory_order_relaxed); /* as above */
		used = atomic_load_explicit(b->used, memory_order_relaxed);
		if (lim == GG_LIMIT_UNRESOLVED)
			lim = gg_ceiling_limit_for((int)index, *total_bytes);
	}
	uint64_t room = lim > used ? lim - used : 0;
	if (*total_bytes > lim)
		*total_bytes = lim;
	if (*free_bytes > room)
		*free_bytes = room;
}
