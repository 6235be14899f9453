/* gpuguard: pod scope's attach: the first governed call maps the region,
 * writes it afresh where nobody is left in it, takes the pod's budget and
 * a slot; at exit the slot is given back, and a fork child attaches anew. */
#define _GNU_SOURCE
#include "shared_attach.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ceiling.h"
#include "log.h"
#include "options.h"
#include "shared_guard.h"
#include "shared_pinned.h"
#include "shared_sweep.h"

static unsigned my_container; /* 1 + our container's index in the header's names; 0 = none */
/* The pod's budget, once adopted: pod scope's own, never the options'
 * (which stay as the environment gave them). Written once, under the setup
 * lock, before gg_ceiling_adopt_limits publishes it; a fork child keeps it,
 * as it keeps the region's budget. */
static struct gpuguard_limits pod_limits;

/* Takes a free (or dead) slot with our main descriptor and makes it ours. */
static int claim_slot(void)
{
	for (unsigned s = 0; s < GPUGUARD_REGION_PROCS; s++) {
		/* A1: the slot's lock, tried (never waited on) */
		if (gg_shared_lock_byte(gg_shared_fd, gpuguard_region_slot_lock(s), F_WRLCK) != 0)
			continue;
		gg_shared_reclaim_slot(s, 1, gg_shared_fd); /* A2: whatever a dead owner left */
		struct gpuguard_region_proc *p = gpuguard_region_proc(gg_shared_reg, s);
		p->pid = (uint32_t)getpid();
		p->start_ms = gg_realtime_ms();
		char comm[16] = {0};
		prctl(PR_GET_NAME, comm, 0, 0, 0);
		memcpy(p->comm, comm, sizeof p->comm);
		p->comm[sizeof p->comm - 1] = 0;
		p->container = (uint8_t)my_container;
		/* pinned_start publishes our figure once we are attached */
		atomic_store_explicit(&p->host_pinned, 0, memory_order_relaxed);
		p->has_pinned = 1;
		/* A3: our occupancy bit, before any claim of ours (R1 comes
		 * later in program order; seq_cst orders it for R2 readers). */
		atomic_fetch_or_explicit(gg_shared_occupied_word(s), 1ull << (s % 64), memory_order_seq_cst);
		/* release: the fields above before LIVE, which readers acquire. */
		atomic_store_explicit(&p->state, GPUGUARD_RPROC_LIVE, memory_order_release);
		gg_shared_me = p;
		gg_shared_slot = s;
		return 0;
	}
	return -1;
}

/* ---- the header ---------------------------------------------------------- */

static void write_fresh(const char *limit_text)
{
	struct gpuguard_region_header *h = gg_shared_reg;
	/* The pod's deaths outlive a restart of its region (nobody is
	 * attached now: the sweep before this found no live slot). A region
	 * that was not valid (a zero magic: new, or its creator died) has
	 * none worth keeping. */
	static struct gpuguard_region_death keep[GPUGUARD_REGION_DEATHS]; /* under the setup lock */
	int carry = gpuguard_region_check(gg_shared_reg, GPUGUARD_REGION_SIZE, NULL, 0) == 0 ||
	            gpuguard_region_check(gg_shared_reg, GPUGUARD_REGION_V4_SIZE, NULL, 0) == 0 ||
	            gpuguard_region_check(gg_shared_reg, GPUGUARD_REGION_V3_SIZE, NULL, 0) == 0; /* same ring */
	/* relaxed: we hold the setup lock and nobody is attached */
	uint64_t head = carry ? atomic_load_explicit(&h->deaths_head, memory_order_relaxed) : 0;
	if (carry)
		memcpy(keep, gpuguard_region_death(gg_shared_reg, 0), sizeof keep);
	/* relaxed: nobody uses a region whose magic is not yet set (release
	 * below), and we hold the setup lock. */
	atomic_store_explicit((_Atomic uint64_t *)&h->magic, 0, memory_order_relaxed);
	uint64_t gen = atomic_load_explicit(&h->limit_gen, memory_order_relaxed);
	memset(gg_shared_reg, 0, GPUGUARD_REGION_SIZE);
	gpuguard_region_layout(h, gg_realtime_ms(), limit_text);
	atomic_store_explicit(&h->limit_gen, gen + 1, memory_order_relaxed);
	if (carry) {
		memcpy(gpuguard_region_death(gg_shared_reg, 0), keep, sizeof keep);
		atomic_store_explicit(&h->deaths_head, head, memory_order_relaxed);
	}
	/* release: everything above before the magic that makes it valid. */
	atomic_store_explicit((_Atomic uint64_t *)&h->magic, GPUGUARD_REGION_MAGIC, memory_order_release);
}

/* The pod's budget wins over ours: adopt it, saying so when both are set
 * and differ. "No ceiling" is no budget at all: a region that holds none
 * (its first process had no GPUGUARD_LIMIT, a sidecar say) takes ours, so a
 * ceiling is never lost to whoever happened to start first. Called under
 * the setup lock. */
static int adopt_limit(const char *mine_text)
{
	struct gpuguard_region_header *h = gg_shared_reg;
	char theirs[GPUGUARD_REGION_LIMIT_TEXT];
	memcpy(theirs, h->limit_text, sizeof theirs);
	theirs[sizeof theirs - 1] = 0; /* checked once, but others can write it since */
	struct gpuguard_limits l;
	if (theirs[0] && gpuguard_parse_limit(theirs, &l) != 0) {
		gg_shared_refuse("holds a GPUGUARD_LIMIT that does not parse (corrupted)", 0);
		return -1;
	}
	if (strcmp(theirs, mine_text) == 0)
		return 0; /* ours already: nothing to change under running threads */
	if (!theirs[0]) {
		/* Device entries made without a ceiling get theirs as processes
		 * with this one bind them (claim_entry). */
		snprintf(h->limit_text, sizeof h->limit_text, "%s", mine_text);
		atomic_fetch_add_explicit(&h->limit_gen, 1, memory_order_relaxed); /* statistic */
		if (gg_opt.verbose)
			gg_log(GG_LOG_INFO, "pod region %s had no ceiling; GPUGUARD_LIMIT=%s is now the pod's",
			       gg_opt.shared_path, mine_text);
		return 0;
	}
	if (mine_text[0])
		gg_log(GG_LOG_WARN,
		       "GPUGUARD_LIMIT is \"%s\" here, but the pod region %s holds \"%s\": the region's value wins",
		       mine_text, gg_opt.shared_path, theirs);
	else if (gg_opt.verbose)
		gg_log(GG_LOG_INFO, "GPUGUARD_LIMIT is unset here; the pod region %s holds \"%s\"", gg_opt.shared_path,
		       theirs);
	/* A fork child that attaches afresh adopts the same budget again:
	 * limits other threads may be reading are not written over. */
	if (memcmp(&pod_limits, &l, sizeof l) != 0)
		pod_limits = l;
	gg_ceiling_adopt_limits(&pod_limits);
	return 0;
}

/* The pod's identity, for its metrics' labels (region.h): the namespace and
 * pod name from the first process that has both, and our container's name
 * added to the pod's list if it is not there. Called under the setup lock;
 * every other writer holds it too. */
static void write_identity(void)
{
	struct gpuguard_region_header *h = gg_shared_reg;
	/* NULL where options were never loaded (unit tests): not given */
	const char *ns = gg_opt.pod_namespace ? gg_opt.pod_namespace : "";
	const char *pod = gg_opt.pod_name ? gg_opt.pod_name : "";
	/* relaxed: we hold the setup lock, and the writers' release stores
	 * below are what readers acquire */
	if (ns[0] && pod[0] && !atomic_load_explicit(&h->ident, memory_order_relaxed)) {
		memset(h->pod_namespace, 0, sizeof h->pod_namespace);
		memset(h->pod_name, 0, sizeof h->pod_name);
		memcpy(h->pod_namespace, ns, strlen(ns)); /* under 64: options.c */
		memcpy(h->pod_name, pod, strlen(pod));
		/* release: the names before the flag that says they are whole */
		atomic_store_explicit(&h->ident, 1, memory_order_release);
	}
	my_container = 0;
	const char *mine = gg_opt.container_name;
	if (!mine || !mine[0])
		return;
	/* The list is hostile input: walked within its bounds, a count that
	 * overstates it ends the walk. */
	uint32_t n = atomic_load_explicit(&h->ncontainers, memory_order_relaxed);
	size_t off = 0, len = strlen(mine);
	uint32_t i = 0;
	for (; i < n && off < sizeof h->containers; i++) {
		const char *name = h->containers + off;
		const char *end = memchr(name, 0, sizeof h->containers - off);
		if (!end)
			return;
		if ((size_t)(end - name) == len && memcmp(name, mine, len) == 0) {
			my_container = i + 1;
			return;
		}
		off += (size_t)(end - name) + 1;
	}
	if (i < n || i >= 255 || off + len + 1 > sizeof h->containers) {
		if (gg_opt.verbose)
			gg_log(GG_LOG_INFO,
			       "pod region %s has no room for container name %s; its metrics go without it",
			       gg_opt.shared_path, mine);
		return;
	}
	memcpy(h->containers + off, mine, len + 1);
	/* release: the name before the count that takes it in */
	atomic_store_explicit(&h->ncontainers, i + 1, memory_order_release);
	my_container = i + 1;
}

/* Whether no process holds a slot of a version 3 file (the slot locks are
 * at the same offsets in every version): fd is not our main descriptor. */
static int older_region_idle(int fd)
{
	for (unsigned s = 0; s < GPUGUARD_REGION_PROCS; s++) {
		uint64_t off = gpuguard_region_slot_lock(s);
		if (gg_shared_lock_byte(fd, off, F_WRLCK) != 0)
			return 0;
		gg_shared_lock_byte(fd, off, F_UNLCK);
	}
	return 1;
}

static int attach_locked(void)
{
	const char *mine_text = gg_opt.limit_text ? gg_opt.limit_text : "";
	struct stat st;
	if (fstat(gg_shared_fd, &st) != 0) {
		gg_shared_refuse("cannot stat", errno);
		return -1;
	}
	int older = 0;
	int v3 = (uint64_t)st.st_size == GPUGUARD_REGION_V3_SIZE;
	if (v3 || (uint64_t)st.st_size == GPUGUARD_REGION_V4_SIZE) {
		/* Version 3 or 4, an older library's (no runtime table, no
		 * credit table; its sums would leave our credit out): extended
		 * and written afresh where none of its processes is left. */
		int fd = gg_shared_open_again();
		older = fd >= 0 && older_region_idle(fd) ? 1 : -1;
		if (fd >= 0)
			close(fd);
		if (older < 0) {
			gg_shared_refuse(
			    v3 ? "was written by an older gpuguard (region version 3) whose processes still use it"
			       : "was written by an older gpuguard (region version 4) whose processes still use it",
			    0);
			return -1;
		}
	} else if (st.st_size != 0 && (uint64_t)st.st_size != GPUGUARD_REGION_SIZE) {
		gg_shared_refuse("file size does not match the region size (truncated, extended or not a region)", 0);
		return -1;
	}
	/* Every block of the file before we map it, sizing a new one: a store
	 * to a hole that the filesystem has no room for raises SIGBUS (a full
	 * /dev/shm; DataLoader workers fill it). Cheap where the blocks are
	 * there already, so done by every process, which also fills in a
	 * sparse file an earlier creator left. */
	int err = posix_fallocate(gg_shared_fd, 0, (off_t)GPUGUARD_REGION_SIZE);
	if (err) {
		if (st.st_size == 0 && ftruncate(gg_shared_fd, 0) != 0) { /* leave it empty, for a later try */
		}
		gg_shared_refuse("cannot allocate the file's blocks (is the filesystem full?)", err);
		return -1;
	}
	if (gg_shared_guard_install() != 0) {
		gg_shared_refuse("cannot install its SIGBUS guard", errno);
		return -1;
	}
	gg_shared_reg = mmap(NULL, GPUGUARD_REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, gg_shared_fd, 0);
	if (gg_shared_reg == MAP_FAILED) {
		gg_shared_reg = NULL;
		gg_shared_refuse("cannot map", errno);
		return -1;
	}
	/* release: the handler acquires it (and looks at nothing else of ours
	 * until the address matches). */
	atomic_store_explicit(&gg_shared_guarded, gg_shared_reg, memory_order_release);
	const struct gpuguard_region_header *h = gg_shared_reg;
	/* acquire: pairs with the release of the magic in write_fresh. A zero
	 * magic is a new file, or one whose creator died before finishing; we
	 * hold the setup lock, so nobody else is writing it now. (Not "we
	 * created it": another process can open it and take the setup lock
	 * between our O_EXCL create and our lock.) */
	int fresh = older || atomic_load_explicit((_Atomic uint64_t *)&h->magic, memory_order_acquire) == 0;
	char why[96];
	if (!fresh && gpuguard_region_check(gg_shared_reg, GPUGUARD_REGION_SIZE, why, sizeof why) != 0) {
		gg_shared_refuse(why, 0);
		return -1;
	}
	if (!fresh) {
		/* A region nobody is attached to is left over (an earlier run, a
		 * restarted pod): start it afresh with our own budget. */
		int fd = gg_shared_open_again();
		if (fd >= 0) {
			fresh = gg_shared_sweep(fd) == 0;
			close(fd);
		}
	}
	if (fresh)
		write_fresh(mine_text);
	if (adopt_limit(mine_text) != 0)
		return -1;
	write_identity();
	if (claim_slot() != 0) {
		gg_shared_refuse("all process slots are taken", 0);
		return -1;
	}
	if (gg_opt.verbose) {
		const char *text = ((const struct gpuguard_region_header *)gg_shared_reg)->limit_text;
		gg_log(GG_LOG_INFO, "pod region %s: attached as slot %u; the pod's budget is %s%s (%s)",
		       gg_opt.shared_path, gg_shared_slot, text[0] ? "GPUGUARD_LIMIT=" : "",
		       text[0] ? text : "no ceiling",
		       fresh ? "set by this process" : "set by the first process to attach");
	}
	return 0;
}

static int attach(void)
{
	/* The region holds the budget's text in a fixed field; a longer list
	 * would be shared cut short (`13=1024Mi` read as 1024 bytes), so this
	 * process keeps its own, whole ceiling instead, and says so (issue 9,
	 * finding 5). limit_len is the whole value's length: limit_text is
	 * already cut to the field. */
	if (gg_opt.limit_text && gg_opt.limit_len >= GPUGUARD_REGION_LIMIT_TEXT) {
		char why[160];
		snprintf(why, sizeof why, "GPUGUARD_LIMIT is %zu characters, too long to share (at most %u)",
		         gg_opt.limit_len, GPUGUARD_REGION_LIMIT_TEXT - 1);
		gg_shared_refuse(why, 0);
		return -1;
	}
	gg_shared_fd = gg_shared_open_region();
	if (gg_shared_fd < 0)
		return -1;
	if (gg_shared_lock_setup(gg_shared_fd) != 0) {
		gg_shared_refuse("cannot take its setup lock", errno);
	} else {
		int rc = attach_locked();
		gg_shared_lock_byte(gg_shared_fd, 0, F_UNLCK);
		if (rc == 0)
			return 0;
	}
	/* relaxed: this thread's own store, before the munmap below */
	atomic_store_explicit(&gg_shared_guarded, NULL, memory_order_relaxed);
	if (gg_shared_reg)
		munmap(gg_shared_reg, GPUGUARD_REGION_SIZE);
	gg_shared_reg = NULL;
	close(gg_shared_fd); /* drops any slot lock we took */
	gg_shared_fd = -1;
	return -1;
}

int gg_shared_attached(void)
{
	int st = atomic_load_explicit(&gg_shared_attach_state, memory_order_acquire);
	if (GG_LIKELY(st == ATTACH_OK || st == ATTACH_FAILED))
		return st == ATTACH_OK;
	int expect = ATTACH_NONE;
	/* acquire/release: the winner's reg, me and limits are published by the
	 * release store below; losers acquire them. */
	if (atomic_compare_exchange_strong_explicit(&gg_shared_attach_state, &expect, ATTACH_BUSY, memory_order_acquire,
	                                            memory_order_acquire)) {
		int ok = !gg_opt.scope_process && !gg_opt.limit_bad && attach() == 0;
		atomic_store_explicit(&gg_shared_attach_state, ok ? ATTACH_OK : ATTACH_FAILED, memory_order_release);
		if (ok)
			gg_shared_pinned_start();
		return ok;
	}
	/* Bounded: the attaching thread tries the setup lock for at most 2 s. */
	while ((st = atomic_load_explicit(&gg_shared_attach_state, memory_order_acquire)) == ATTACH_BUSY)
		sched_yield();
	return st == ATTACH_OK;
}

/* Statistics for metrics, on the pod's words (relaxed: counters that order
 * nothing). Nothing once the region is lost or before we attached. */
void gg_shared_count_dump(void)
{
	/* acquire: as above */
	if (atomic_load_explicit(&gg_shared_attach_state, memory_order_acquire) == ATTACH_OK)
		atomic_fetch_add_explicit(&((struct gpuguard_region_header *)gg_shared_reg)->dumps_written, 1,
		                          memory_order_relaxed);
}

/* ---- exit and fork ----------------------------------------------------- */

/* A normal exit gives our charges back at once rather than at the next
 * sweep. Frees after this (other destructors) go to this process's own
 * books, so they cannot take from the pod what other processes hold; one
 * already in flight can, by at most its own size. Priority 101: destructors
 * with smaller numbers run later, so the exit dump (dump.c) still sees our
 * books. */
__attribute__((destructor(101))) static void detach(void)
{
	/* acquire: as in gg_shared_reclaim; relaxed exchange: a once-only flag. */
	if (atomic_load_explicit(&gg_shared_attach_state, memory_order_acquire) != ATTACH_OK ||
	    atomic_exchange_explicit(&gg_shared_detached, 1, memory_order_relaxed))
		return;
	gg_ceiling_unbind_pod();
	gg_shared_reclaim_slot(gg_shared_slot, 0, -1); /* we hold its lock: as for a dead owner */
}

void gg_shared_after_fork_child(void)
{
	/* The child shares the parent's open file description, and with it the
	 * parent's slot lock: close our copy (the parent's stays) and attach
	 * afresh, to a slot of our own, on first use. */
	atomic_store_explicit(&gg_shared_guarded, NULL, memory_order_relaxed); /* one thread */
	atomic_store_explicit(&gg_shared_lost, 0, memory_order_relaxed);
	if (gg_shared_reg)
		munmap(gg_shared_reg, GPUGUARD_REGION_SIZE);
	if (gg_shared_fd >= 0)
		close(gg_shared_fd);
	gg_shared_reg = NULL;
	gg_shared_fd = -1;
	gg_shared_me = NULL;
	/* relaxed: the fork child has one thread. */
	atomic_store_explicit(&gg_shared_pinned_live, 0, memory_order_relaxed);
	atomic_store_explicit(&gg_shared_detached, 0, memory_order_relaxed);
	atomic_store_explicit(&gg_shared_last_reclaim_ms, 0, memory_order_relaxed);
	atomic_store_explicit(&gg_shared_attach_state, ATTACH_NONE, memory_order_relaxed);
}