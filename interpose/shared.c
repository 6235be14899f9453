/* gpuguard: pod scope. Every process of a pod maps one small file, the pod
 * region (include/gpuguard/region.h), and charges its device memory to the
 * device entries there, so GPUGUARD_LIMIT is one budget for all of them.
 *
 * - Reservation is the same single CAS as in process scope, on the entry's
 *   `used` word (ceiling.c); this file only points a device's budget there.
 * - A process owns its slot while it holds an OFD lock on the slot's byte;
 *   the kernel drops the lock when the process dies, in any PID namespace
 *   (DESIGN.md §4). Whoever next takes the lock returns what the slot held.
 *   Locks are only ever tried (F_OFD_SETLK), never waited on, except the
 *   setup lock, which is retried for at most 2 s: its holder is alive (else
 *   the kernel would have dropped it) and only writes a few fields.
 * - The file is hostile input: checked before use (gpuguard_region_check),
 *   never a symlink, refused when its owner or mode is wider than ours; no
 *   index is ever read from it, and every subtraction saturates.
 * Any failure leaves the process in process scope, with one message. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shared.h"
#include "base.h"
#include "ceiling.h"
#include "gpuguard/region.h"
#include "log.h"
#include "options.h"
#include "signal.h"

enum { ATTACH_NONE, ATTACH_BUSY, ATTACH_OK, ATTACH_FAILED };
static _Atomic int attach_state;
static int reg_fd = -1; /* holds our slot's lock for as long as we live */
static void *reg;       /* the mapping, GPUGUARD_REGION_SIZE bytes */
static dev_t reg_dev;
static ino_t reg_ino;
static struct gpuguard_region_proc *me;
static unsigned my_slot;
static _Atomic int detached;
static _Atomic uint64_t last_reclaim_ms;
static gg_identity_fn identity[2];
static unsigned my_container; /* 1 + our container's index in the header's names; 0 = none */
static void lose_region(void);
static int region_lost(void);

void gg_shared_set_identity(int runtime, gg_identity_fn fn)
{
	if (runtime == 0 || runtime == 1)
		identity[runtime] = fn;
}

/* ---- locks ------------------------------------------------------------- */

/* Tries an OFD lock (type F_WRLCK or F_UNLCK) on one byte. 0 = done. */
static int lock_byte(int fd, uint64_t off, short type)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)off, .l_len = 1};
	return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -1;
}

/* The setup lock (byte 0), tried for at most 2 s. */
static int lock_setup(int fd)
{
	for (int i = 0; i < 2000; i++) {
		if (lock_byte(fd, 0, F_WRLCK) == 0)
			return 0;
		if (errno != EAGAIN && errno != EACCES)
			return -1;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	errno = ETIMEDOUT;
	return -1;
}

/* ---- opening the file -------------------------------------------------- */

static void refuse(const char *why, int err)
{
	gg_log(GG_LOG_ERROR, "pod region %s: %s%s%s; using a per-process ceiling (as GPUGUARD_SCOPE=process)",
	       gg_opt.shared_path, why, err ? ": " : "", err ? strerror(err) : "");
}

static int in_my_groups(gid_t gid)
{
	if (gid == getegid())
		return 1;
	gid_t groups[256];
	int n = getgroups(256, groups);
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return 1;
	return 0;
}

/* Opens (creating it with our mode when absent) and vets the file. */
static int open_region(void)
{
	const char *path = gg_opt.shared_path;
	mode_t mode = gg_opt.shared_mode;
	/* O_NOFOLLOW: a symlink planted at the path is refused (ELOOP). */
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd >= 0) {
		if (fchmod(fd, mode) != 0) { /* the umask must not narrow it */
			refuse("cannot set its mode", errno);
			close(fd);
			unlink(path);
			return -1;
		}
	} else if (errno == EEXIST) {
		fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0) {
		refuse(errno == ELOOP ? "is a symbolic link, refused" : "cannot open", errno == ELOOP ? 0 : errno);
		return -1;
	}
	struct stat st;
	char why[128];
	if (fstat(fd, &st) != 0) {
		refuse("cannot stat", errno);
	} else if (!S_ISREG(st.st_mode)) {
		refuse("is not a regular file", 0);
	} else if (st.st_uid != geteuid() && !((mode & 060) && in_my_groups(st.st_gid))) {
		snprintf(why, sizeof why,
		         "owned by uid %u, not us (uid %u), and GPUGUARD_SHARED_MODE=%04o shares nothing",
		         (unsigned)st.st_uid, (unsigned)geteuid(), (unsigned)mode);
		refuse(why, 0);
	} else if ((st.st_mode & 0777 & ~mode) != 0) {
		snprintf(why, sizeof why, "its mode %04o is wider than GPUGUARD_SHARED_MODE=%04o",
		         (unsigned)(st.st_mode & 0777), (unsigned)mode);
		refuse(why, 0);
	} else {
		reg_dev = st.st_dev;
		reg_ino = st.st_ino;
		return fd;
	}
	close(fd);
	return -1;
}

/* A second descriptor on our file: its OFD locks conflict with our main
 * one's, so other threads and our own slot are seen as holders. Through
 * /proc/self/fd it is the same inode even if the path was removed or
 * replaced since we attached; by path only where /proc is not mounted. */
static int open_again(void)
{
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", reg_fd);
	int fd = open(self, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		fd = open(gg_opt.shared_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_dev != reg_dev || st.st_ino != reg_ino)) {
		close(fd); /* replaced under us: not our region any more */
		fd = -1;
	}
	return fd;
}

/* Someone removed or replaced the file while we use it: processes that
 * start now get a new budget beside ours. Said once; nothing else to do. */
static void check_path_still_ours(void)
{
	static _Atomic int warned;
	struct stat st;
	if (lstat(gg_opt.shared_path, &st) == 0 && st.st_dev == reg_dev && st.st_ino == reg_ino)
		return;
	/* relaxed: a once-only flag guarding a message */
	if (!atomic_exchange_explicit(&warned, 1, memory_order_relaxed))
		gg_log(GG_LOG_WARN,
		       "pod region %s was removed or replaced while in use; this process keeps the budget it "
		       "attached to, but processes that start now get a separate one",
		       gg_opt.shared_path);
}

/* ---- slots --------------------------------------------------------------- */

static struct gpuguard_region_device *entry(unsigned i)
{
	return gpuguard_region_dev(reg, i);
}

static _Atomic uint64_t *occupied_word(unsigned s)
{
	return &((struct gpuguard_region_header *)reg)->occupied[s / 64];
}

/* ---- obituaries -------------------------------------------------------- *
 *
 * Our slot carries what a post-mortem needs (region.h): refreshed at most
 * every GPUGUARD_OBIT_MS, from pod_changed (every charge change) and
 * refusals, so a process the kernel kills leaves its last GPU use, host
 * memory and refusals behind. The sweep that finds it dead moves them to
 * the pod's deaths ring. */

static _Atomic uint64_t obit_last_ms;
/* The dump's host sample (gg_dump_host_sample_armed), handed down by
 * initialisation: dump.c reads the pod, so this file cannot call it by
 * name. relaxed: a code pointer set once, before initialisation publishes
 * itself (gg_init_once's release), and it points to code, not data. */
static _Atomic gg_host_sample_fn host_sample;

void gg_shared_set_host_sample(gg_host_sample_fn fn)
{
	atomic_store_explicit(&host_sample, fn, memory_order_relaxed);
}

/* obit_refresh once the rate limit has let it through: apart, so that the
 * check on every charge change inlines into pod_changed with no stack frame
 * (issue 12, step 7). */
__attribute__((noinline)) static void obit_sample(uint64_t now, uint64_t last)
{
	/* relaxed: a rate limit; only the CAS winner samples. */
	if (!atomic_compare_exchange_strong_explicit(&obit_last_ms, &last, now ? now : 1, memory_order_relaxed,
	                                             memory_order_relaxed))
		return;
	int saved = errno; /* arming and the host sample's reads must not show in errno */
	struct gg_host_sample h;
	gg_host_sample_fn sample = atomic_load_explicit(&host_sample, memory_order_relaxed);
	if (!sample || sample(&h) != 0) {
		/* another thread is arming: its knobs are not ours to read yet;
		 * the next call tries again (relaxed: the rate limit's word) */
		atomic_store_explicit(&obit_last_ms, last, memory_order_relaxed);
		errno = saved;
		return;
	}
	uint64_t use = h.have_use ? h.use : 0;
	uint64_t inactive = h.have_use && h.have_inactive ? h.inactive_file : 0;
	uint32_t flags = (h.version == 1   ? GPUGUARD_OBIT_CGROUP_V1
	                  : h.version == 2 ? GPUGUARD_OBIT_CGROUP_V2
	                                   : 0) |
	                 (h.have_use && h.have_inactive ? GPUGUARD_OBIT_WS_KNOWN : 0);
	/* relaxed, all: a snapshot the sweeper reads once we are dead. */
	atomic_store_explicit(&me->host_usage, use, memory_order_relaxed);
	atomic_store_explicit(&me->host_ws, use > inactive ? use - inactive : 0, memory_order_relaxed);
	atomic_store_explicit(&me->host_limit, h.have_lim ? h.lim : 0, memory_order_relaxed);
	atomic_store_explicit(&me->host_flags, flags, memory_order_relaxed);
	atomic_store_explicit(&me->obit_ms, gg_realtime_ms(), memory_order_relaxed);
	errno = saved;
}

static inline __attribute__((always_inline)) void obit_refresh(void)
{
	/* relaxed: me is ours, published to this thread by attached()'s
	 * acquire (every caller got here through a bound budget); detached is
	 * a flag read for a best-effort skip at exit. A region lost under us
	 * may have given our slot to someone else: not a word into it. */
	if (!me || atomic_load_explicit(&detached, memory_order_relaxed) || region_lost())
		return;
	/* the coarse monotonic clock for the rate limit (a few ns on every
	 * charge change); the wall clock only for the record itself */
	uint64_t now = gg_now_ms(), last = atomic_load_explicit(&obit_last_ms, memory_order_relaxed);
	/* relaxed: a rate limit; the CAS in obit_sample picks one sampler. */
	if (last && now >= last && now - last < GPUGUARD_OBIT_MS)
		return;
	obit_sample(now, last);
}

void gg_shared_note_refusal(void)
{
	/* acquire: pairs with the release in attached(), for reg and me. */
	if (atomic_load_explicit(&attach_state, memory_order_acquire) != ATTACH_OK || !me || region_lost())
		return;
	/* relaxed: statistics for our own obituary */
	atomic_fetch_add_explicit(&me->refused, 1, memory_order_relaxed);
	atomic_store_explicit(&me->refused_ms, gg_realtime_ms(), memory_order_relaxed);
	obit_refresh();
}

/* The deaths ring, written through a descriptor (pwrite) and read through
 * one (pread), so in-process readers (the dump writer) never race with the
 * sweeper on the mapping's bytes; the file's page cache is the mapping's. */
static void obit_write(int fd, unsigned s, uint64_t now)
{
	struct gpuguard_region_proc *p = gpuguard_region_proc(reg, s);
	struct gpuguard_region_death d;
	memset(&d, 0, sizeof d);
	d.pid = p->pid;
	d.start_ms = p->start_ms;
	memcpy(d.comm, p->comm, sizeof d.comm);
	d.comm[sizeof d.comm - 1] = 0;
	/* relaxed, all: the owner is dead; its stores are all in memory. */
	d.refused = atomic_load_explicit(&p->refused, memory_order_relaxed);
	d.last_ms = atomic_load_explicit(&p->obit_ms, memory_order_relaxed);
	d.found_ms = now;
	d.host_ws = atomic_load_explicit(&p->host_ws, memory_order_relaxed);
	d.host_limit = atomic_load_explicit(&p->host_limit, memory_order_relaxed);
	d.host_flags = (uint16_t)atomic_load_explicit(&p->host_flags, memory_order_relaxed);
	uint64_t rms = atomic_load_explicit(&p->refused_ms, memory_order_relaxed);
	uint64_t ref = d.last_ms > rms ? d.last_ms : rms;
	d.refused_age_ms = !rms ? UINT32_MAX : ref - rms > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)(ref - rms);
	d.gpu_limit = UINT64_MAX;
	/* The entry where it held the largest share of the ceiling (bytes
	 * where no ceiling is set). */
	unsigned __int128 best = 0;
	for (unsigned i = 0; i < GPUGUARD_REGION_DEVICES; i++) {
		uint64_t u = atomic_load_explicit(&p->used[i], memory_order_relaxed);
		uint64_t lim = atomic_load_explicit(&entry(i)->limit, memory_order_relaxed);
		if (!u)
			continue;
		/* u / lim, compared as u * 2^64 / lim; no ceiling ranks below any */
		unsigned __int128 score = lim && lim != UINT64_MAX ? ((unsigned __int128)u << 64) / lim + 1 : u >> 32;
		if (score > best) {
			best = score;
			d.gpu_entry = (uint16_t)i;
			d.gpu_used = u;
			d.gpu_limit = lim ? lim : UINT64_MAX;
		}
	}
	struct gpuguard_region_header *h = reg;
	/* The same death swept twice (a sweeper killed between this and the
	 * slot's FREE): one obituary. */
	uint64_t head = atomic_load_explicit(&h->deaths_head, memory_order_relaxed);
	if (head) {
		struct gpuguard_region_death prev;
		off_t po = (off_t)GPUGUARD_REGION_DEATH_OFF + (off_t)((head - 1) % GPUGUARD_REGION_DEATHS) * 96;
		if (pread(fd, &prev, sizeof prev, po) == (ssize_t)sizeof prev && prev.pid == d.pid &&
		    prev.start_ms == d.start_ms)
			return;
	}
	/* relaxed: the position only has to be unique among sweepers (the RMW
	 * is atomic); the entry's seq says when its bytes are whole. */
	uint64_t n = atomic_fetch_add_explicit(&h->deaths_head, 1, memory_order_relaxed);
	off_t off = (off_t)GPUGUARD_REGION_DEATH_OFF + (off_t)(n % GPUGUARD_REGION_DEATHS) * 96;
	uint64_t zero = 0, seq = n + 1;
	/* seq 0, then the body, then seq: write(2)s to one file are ordered
	 * for any later read(2) of it. */
	if (pwrite(fd, &zero, 8, off) == 8 && pwrite(fd, (char *)&d + 8, sizeof d - 8, off + 8) == sizeof d - 8 &&
	    pwrite(fd, &seq, 8, off) == 8)
		return;
	/* A failed write leaves seq 0 (or a torn entry that readers skip):
	 * one obituary lost, nothing else. */
}

size_t gg_shared_deaths(struct gpuguard_region_death *out, size_t max)
{
	/* acquire: pairs with the release in attached(), for reg. */
	if (atomic_load_explicit(&attach_state, memory_order_acquire) != ATTACH_OK)
		return 0;
	int fd = open_again();
	if (fd < 0)
		return 0;
	size_t k = 0;
	for (unsigned i = 0; i < GPUGUARD_REGION_DEATHS && k < max; i++) {
		struct gpuguard_region_death d;
		off_t off = (off_t)GPUGUARD_REGION_DEATH_OFF + (off_t)i * 96;
		if (pread(fd, &d, sizeof d, off) != (ssize_t)sizeof d)
			break;
		uint64_t seq = d.seq, again;
		if (!seq || (seq - 1) % GPUGUARD_REGION_DEATHS != i || pread(fd, &again, 8, off) != 8 || again != seq)
			continue; /* empty, being written, or scribbled */
		d.comm[sizeof d.comm - 1] = 0;
		out[k++] = d;
	}
	close(fd);
	/* oldest first */
	for (size_t a = 1; a < k; a++)
		for (size_t b = a; b > 0 && out[b - 1].seq > out[b].seq; b--) {
			struct gpuguard_region_death t = out[b];
			out[b] = out[b - 1];
			out[b - 1] = t;
		}
	return k;
}

/* After each change of our charge in the pod (the ceiling calls it through
 * the budget, gg_ceiling_bind_slow's pod budget) and each sweep. */
static void pod_changed(void)
{
	/* Truncated and written afresh by a process that started since (no
	 * SIGBUS then: the file has its size again): our slot is no longer
	 * counted. relaxed: a word only we write, and the file's new owner's
	 * memset; any stale read is caught at our next step. */
	if (GG_UNLIKELY(me && !(atomic_load_explicit(occupied_word(my_slot), memory_order_relaxed) &
	                        (1ull << (my_slot % 64)))) &&
	    !atomic_load_explicit(&detached, memory_order_relaxed))
		lose_region();
	obit_refresh();
}

static void publish(unsigned i)
{
	/* relaxed: a snapshot for readers of the file (top, metrics); the
	 * books are the slots. */
	atomic_store_explicit(&entry(i)->used, gpuguard_region_used(reg, i), memory_order_relaxed);
	atomic_store_explicit(&entry(i)->runtime, gpuguard_region_runtime(reg, i), memory_order_relaxed);
	pod_changed();
}

/* Sweep steps S2-S4 (tests/model/pod.pml) on slot s, whose lock the caller
 * holds (S1), so its owner is dead (died != 0) or is us, exiting: its
 * claims and charges are zeroed and its occupancy bit cleared. Nothing is
 * subtracted from anyone: every word zeroed here belonged to the slot
 * alone, so the pod's used afterwards is exactly what the others hold,
 * whatever instruction the owner died at. A sweeper killed half-way
 * leaves a slot the next sweep finishes (each step is idempotent). */
static void reclaim_slot(unsigned s, int died, int fd)
{
	struct gpuguard_region_proc *p = gpuguard_region_proc(reg, s);
	/* A LIVE slot whose owner is dead died without exiting (an exit
	 * frees its own slot): its obituary goes to the deaths ring, before
	 * the books it reads are zeroed. relaxed: the owner is dead. */
	if (died && fd >= 0 && atomic_load_explicit(&p->state, memory_order_relaxed) == GPUGUARD_RPROC_LIVE)
		obit_write(fd, s, gg_realtime_ms());
	for (unsigned d = 0; d < GPUGUARD_REGION_DEVICES; d++) {
		struct gpuguard_region_device *e = entry(d);
		/* relaxed: the owner is dead (its stores are all in memory) or
		 * is this thread, at exit. */
		gg_ceiling_waiters_sub(&e->waiters, atomic_exchange_explicit(&p->waiting[d], 0, memory_order_relaxed));
		/* S2, S3. seq_cst: ordered before S4 and the wake-up below for
		 * reservations summing (R2). The runtime word (S3a) before the
		 * used word it is part of (S3b): a reader summing both never
		 * sees more runtime than charge (region.h's runtime table). */
		atomic_store_explicit(&p->claim[d], 0, memory_order_seq_cst);
		atomic_store_explicit(gpuguard_region_runtime_word(reg, s, d), 0, memory_order_seq_cst);
		uint64_t held = atomic_exchange_explicit(&p->used[d], 0, memory_order_seq_cst);
		if (!held)
			continue;
		if (died)
			atomic_fetch_add_explicit(&e->reclaimed, held, memory_order_relaxed); /* statistic */
	}
	/* S4. seq_cst: after the zeroing, as the model orders it. */
	atomic_fetch_and_explicit(occupied_word(s), ~(1ull << (s % 64)), memory_order_seq_cst);
	for (unsigned d = 0; d < GPUGUARD_REGION_DEVICES; d++) {
		struct gpuguard_region_device *e = entry(d);
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
	struct gpuguard_region_proc *p = gpuguard_region_proc(reg, s);
	/* relaxed: only spares a reclaim of an empty slot; the slot's lock,
	 * which the caller holds, is what decides. */
	if (atomic_load_explicit(&p->state, memory_order_relaxed) != GPUGUARD_RPROC_FREE)
		return 0;
	for (unsigned d = 0; d < GPUGUARD_REGION_DEVICES; d++)
		if (atomic_load_explicit(&p->used[d], memory_order_relaxed) ||
		    atomic_load_explicit(&p->claim[d], memory_order_relaxed) ||
		    atomic_load_explicit(&p->waiting[d], memory_order_relaxed))
			return 0;
	/* relaxed: as above */
	return !(atomic_load_explicit(occupied_word(s), memory_order_relaxed) & (1ull << (s % 64)));
}

/* With fd (not our main descriptor): reclaims every slot whose owner is
 * gone. Returns how many slots are held by live processes. */
static unsigned sweep(int fd)
{
	unsigned live = 0;
	for (unsigned s = 0; s < GPUGUARD_REGION_PROCS; s++) {
		if (me && s == my_slot) {
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
		if (lock_byte(fd, off, F_WRLCK) != 0) {
			live++; /* held: its owner lives */
			continue;
		}
		if (!slot_idle(s))
			reclaim_slot(s, 1, fd);
		lock_byte(fd, off, F_UNLCK);
	}
	return live;
}

void gg_shared_reclaim(void)
{
	/* acquire: pairs with the release in attached(), for reg and me. */
	if (atomic_load_explicit(&attach_state, memory_order_acquire) != ATTACH_OK)
		return;
	uint64_t now = gg_now_ms(), last = atomic_load_explicit(&last_reclaim_ms, memory_order_relaxed);
	/* relaxed: a rate limit; at worst two threads sweep at once, and the
	 * slot locks keep them from reclaiming the same slot twice. */
	if (now - last < 10 && last != 0)
		return;
	if (!atomic_compare_exchange_strong_explicit(&last_reclaim_ms, &last, now ? now : 1, memory_order_relaxed,
	                                             memory_order_relaxed))
		return;
	check_path_still_ours();
	int fd = open_again();
	if (fd < 0)
		return;
	sweep(fd);
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
	if (atomic_load_explicit(&attach_state, memory_order_acquire) != ATTACH_OK)
		return;
	uint64_t now = gg_now_ms(), last = atomic_load_explicit(&last_probe_ms, memory_order_relaxed);
	/* relaxed: a rate limit, as in gg_shared_reclaim */
	if (last != 0 && now - last < 250)
		return;
	if (atomic_compare_exchange_strong_explicit(&last_probe_ms, &last, now ? now : 1, memory_order_relaxed,
	                                            memory_order_relaxed))
		gg_shared_reclaim();
}

/* Takes a free (or dead) slot with our main descriptor and makes it ours. */
static int claim_slot(void)
{
	for (unsigned s = 0; s < GPUGUARD_REGION_PROCS; s++) {
		/* A1: the slot's lock, tried (never waited on) */
		if (lock_byte(reg_fd, gpuguard_region_slot_lock(s), F_WRLCK) != 0)
			continue;
		reclaim_slot(s, 1, reg_fd); /* A2: whatever a dead owner left */
		struct gpuguard_region_proc *p = gpuguard_region_proc(reg, s);
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
		atomic_fetch_or_explicit(occupied_word(s), 1ull << (s % 64), memory_order_seq_cst);
		/* release: the fields above before LIVE, which readers acquire. */
		atomic_store_explicit(&p->state, GPUGUARD_RPROC_LIVE, memory_order_release);
		me = p;
		my_slot = s;
		return 0;
	}
	return -1;
}

/* ---- a file shrunk under us --------------------------------------------- *
 *
 * Anyone who may write the file can truncate it while we have it mapped,
 * and the next access to the lost pages, in whatever hook or thread, would
 * raise SIGBUS and kill the process. A handler, installed when we first
 * attach, takes the faults that fall in our mapping: it puts private zero
 * pages in the mapping's place (so the faulting access, retried, lands
 * there), points every device back at this process's own books, which hold
 * what we hold (gg_budget.shadow), and says so once. Every other SIGBUS goes
 * to the handler that was there before, or to the default action, as if we
 * were not installed. Only async-signal-safe calls here: mmap, write,
 * sigaction, raise. */

static struct sigaction prev_bus;
static _Atomic int guard_state; /* 0 none, 1 installing, 2 installed */
static void *_Atomic guarded;   /* the mapping the handler answers for, or NULL */
static _Atomic int lost;

static void say(const char *s)
{
	ssize_t w = write(2, s, strlen(s));
	(void)w; /* nowhere to report a failed report */
}

/* The region is gone for this process: its own books from now on. Safe in
 * the handler and in any thread; the first caller says so. */
static void lose_region(void)
{
	/* seq_cst: elects the one caller that says so. The Dekker pair with a
	 * binder that publishes a pod budget, then reads whether the pod was
	 * lost, is gg_ceiling_lose_pod's (ceiling.c). */
	if (atomic_exchange_explicit(&lost, 1, memory_order_seq_cst))
		return;
	/* release: later hooks acquire the state (attached()) and bind new
	 * devices to their own books; nothing else is published. */
	atomic_store_explicit(&attach_state, ATTACH_FAILED, memory_order_release);
	gg_ceiling_lose_pod();
	say("gpuguard: error: pod region ");
	say(gg_opt.shared_path ? gg_opt.shared_path : "?");
	say(": truncated, shrunk or written afresh while in use; this process stops using it and keeps a "
	    "per-process ceiling, with what it holds (as GPUGUARD_SCOPE=process)\n");
}

/* Statistics for metrics, on the pod's words (relaxed: counters that order
 * nothing). Nothing once the region is lost or before we attached. */
void gg_shared_count_dump(void)
{
	/* acquire: as above */
	if (atomic_load_explicit(&attach_state, memory_order_acquire) == ATTACH_OK)
		atomic_fetch_add_explicit(&((struct gpuguard_region_header *)reg)->dumps_written, 1,
		                          memory_order_relaxed);
}

static int region_lost(void)
{
	/* seq_cst: the load half of the pair in lose_region */
	return atomic_load_explicit(&lost, memory_order_seq_cst);
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	/* acquire: pairs with the release after the mmap in attach_locked */
	char *base = atomic_load_explicit(&guarded, memory_order_acquire);
	char *a = si ? (char *)si->si_addr : NULL;
	if (base && si && si->si_code > 0 && a >= base && a < base + GPUGUARD_REGION_SIZE) {
		int saved = errno;
		void *m = mmap(base, GPUGUARD_REGION_SIZE, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (m == base) {
			lose_region();
			errno = saved;
			return; /* the access is retried, on the zero pages */
		}
		errno = saved;
	}
	/* Not ours: the previous disposition's. */
	if (prev_bus.sa_flags & SA_SIGINFO) {
		if (prev_bus.sa_sigaction) {
			prev_bus.sa_sigaction(sig, si, uc);
			return;
		}
	} else if (prev_bus.sa_handler != SIG_DFL && prev_bus.sa_handler != SIG_IGN) {
		prev_bus.sa_handler(sig);
		return;
	}
	int sent = !si || si->si_code <= 0; /* kill(2), raise(3), sigqueue(3) */
	if (sent && prev_bus.sa_handler == SIG_IGN && !(prev_bus.sa_flags & SA_SIGINFO))
		return; /* ignored, as it would have been */
	/* The default action: for a fault, the access is retried and faults
	 * again; a sent signal is raised again (blocked until we return). The
	 * kernel forces the default on a fault whose signal is ignored, too. */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	gg_real_sigaction(SIGBUS, &dfl, NULL);
	if (sent)
		raise(sig);
}

/* Once per process (a fork child keeps it). Called under the setup lock,
 * by the one attaching thread. */
static int guard_install(void)
{
	/* acquire: pairs with the release below, for prev_bus */
	if (atomic_load_explicit(&guard_state, memory_order_acquire) == 2)
		return 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (gg_real_sigaction(SIGBUS, &sa, &prev_bus) != 0)
		return -1;
	/* release: prev_bus, written by sigaction above, before anyone reads
	 * the state as installed. */
	atomic_store_explicit(&guard_state, 2, memory_order_release);
	return 0;
}

/* ---- pinned host memory ----------------------------------------------- *
 *
 * Our slot's host_pinned follows pinned_total, this process's pinned host
 * bytes (account.c reports every change), so the exporter can show it per
 * process; a dead process's slot is swept, and its figure with it. Threads
 * change the total at once: each stores what it read and stores again
 * while the total has moved since, so the last store is of the latest
 * total (seq_cst throughout: one order of every add, load and store). */

static _Atomic uint64_t pinned_total;
static _Atomic int pinned_live; /* our slot is attached: host_pinned follows pinned_total */

static void pinned_publish(uint64_t t)
{
	/* relaxed: detached and lost are best-effort skips, as in obit_refresh */
	if (atomic_load_explicit(&detached, memory_order_relaxed) || region_lost())
		return;
	for (;;) {
		atomic_store_explicit(&me->host_pinned, t, memory_order_seq_cst);
		uint64_t now = atomic_load_explicit(&pinned_total, memory_order_seq_cst);
		if (now == t)
			return;
		t = now;
	}
}

/* Once attached (me set): from now on every change publishes itself. An
 * add that read pinned_live as 0 comes before our store in the one order,
 * so the load below sees it. */
static void pinned_start(void)
{
	atomic_store_explicit(&pinned_live, 1, memory_order_seq_cst);
	pinned_publish(atomic_load_explicit(&pinned_total, memory_order_seq_cst));
}

void gg_shared_note_pinned(int64_t bytes)
{
	/* seq_cst: ordered against pinned_start's store and load (see above) */
	uint64_t t = atomic_fetch_add_explicit(&pinned_total, (uint64_t)bytes, memory_order_seq_cst) + (uint64_t)bytes;
	/* seq_cst: pairs with pinned_start; seeing 1 also makes `me` visible
	 * (written before that store) */
	if (atomic_load_explicit(&pinned_live, memory_order_seq_cst))
		pinned_publish(t);
}

/* ---- the header ---------------------------------------------------------- */

static void write_fresh(const char *limit_text)
{
	struct gpuguard_region_header *h = reg;
	/* The pod's deaths outlive a restart of its region (nobody is
	 * attached now: the sweep before this found no live slot). A region
	 * that was not valid (a zero magic: new, or its creator died) has
	 * none worth keeping. */
	static struct gpuguard_region_death keep[GPUGUARD_REGION_DEATHS]; /* under the setup lock */
	int carry = gpuguard_region_check(reg, GPUGUARD_REGION_SIZE, NULL, 0) == 0 ||
	            gpuguard_region_check(reg, GPUGUARD_REGION_V3_SIZE, NULL, 0) == 0; /* same ring */
	/* relaxed: we hold the setup lock and nobody is attached */
	uint64_t head = carry ? atomic_load_explicit(&h->deaths_head, memory_order_relaxed) : 0;
	if (carry)
		memcpy(keep, gpuguard_region_death(reg, 0), sizeof keep);
	/* relaxed: nobody uses a region whose magic is not yet set (release
	 * below), and we hold the setup lock. */
	atomic_store_explicit((_Atomic uint64_t *)&h->magic, 0, memory_order_relaxed);
	uint64_t gen = atomic_load_explicit(&h->limit_gen, memory_order_relaxed);
	memset(reg, 0, GPUGUARD_REGION_SIZE);
	gpuguard_region_layout(h, gg_realtime_ms(), limit_text);
	atomic_store_explicit(&h->limit_gen, gen + 1, memory_order_relaxed);
	if (carry) {
		memcpy(gpuguard_region_death(reg, 0), keep, sizeof keep);
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
	struct gpuguard_region_header *h = reg;
	char theirs[GPUGUARD_REGION_LIMIT_TEXT];
	memcpy(theirs, h->limit_text, sizeof theirs);
	theirs[sizeof theirs - 1] = 0; /* checked once, but others can write it since */
	struct gpuguard_limits l;
	if (theirs[0] && gpuguard_parse_limit(theirs, &l) != 0) {
		refuse("holds a GPUGUARD_LIMIT that does not parse (corrupted)", 0);
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
	gg_opt.limits = l;
	gg_opt.limit_set = 1;
	gg_ceiling_configure();
	return 0;
}

/* The pod's identity, for its metrics' labels (region.h): the namespace and
 * pod name from the first process that has both, and our container's name
 * added to the pod's list if it is not there. Called under the setup lock;
 * every other writer holds it too. */
static void write_identity(void)
{
	struct gpuguard_region_header *h = reg;
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
		if (lock_byte(fd, off, F_WRLCK) != 0)
			return 0;
		lock_byte(fd, off, F_UNLCK);
	}
	return 1;
}

static int attach_locked(void)
{
	const char *mine_text = gg_opt.limit_text ? gg_opt.limit_text : "";
	struct stat st;
	if (fstat(reg_fd, &st) != 0) {
		refuse("cannot stat", errno);
		return -1;
	}
	int older = 0;
	if ((uint64_t)st.st_size == GPUGUARD_REGION_V3_SIZE) {
		/* Version 3, an older library's (no runtime table): extended
		 * and written afresh where none of its processes is left. */
		int fd = open_again();
		older = fd >= 0 && older_region_idle(fd) ? 1 : -1;
		if (fd >= 0)
			close(fd);
		if (older < 0) {
			refuse("was written by an older gpuguard (region version 3) whose processes still use it", 0);
			return -1;
		}
	} else if (st.st_size != 0 && (uint64_t)st.st_size != GPUGUARD_REGION_SIZE) {
		refuse("file size does not match the region size (truncated, extended or not a region)", 0);
		return -1;
	}
	/* Every block of the file before we map it, sizing a new one: a store
	 * to a hole that the filesystem has no room for raises SIGBUS (a full
	 * /dev/shm; DataLoader workers fill it). Cheap where the blocks are
	 * there already, so done by every process, which also fills in a
	 * sparse file an earlier creator left. */
	int err = posix_fallocate(reg_fd, 0, (off_t)GPUGUARD_REGION_SIZE);
	if (err) {
		if (st.st_size == 0 && ftruncate(reg_fd, 0) != 0) { /* leave it empty, for a later try */
		}
		refuse("cannot allocate the file's blocks (is the filesystem full?)", err);
		return -1;
	}
	if (guard_install() != 0) {
		refuse("cannot install its SIGBUS guard", errno);
		return -1;
	}
	reg = mmap(NULL, GPUGUARD_REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, reg_fd, 0);
	if (reg == MAP_FAILED) {
		reg = NULL;
		refuse("cannot map", errno);
		return -1;
	}
	/* release: the handler acquires it (and looks at nothing else of ours
	 * until the address matches). */
	atomic_store_explicit(&guarded, reg, memory_order_release);
	const struct gpuguard_region_header *h = reg;
	/* acquire: pairs with the release of the magic in write_fresh. A zero
	 * magic is a new file, or one whose creator died before finishing; we
	 * hold the setup lock, so nobody else is writing it now. (Not "we
	 * created it": another process can open it and take the setup lock
	 * between our O_EXCL create and our lock.) */
	int fresh = older || atomic_load_explicit((_Atomic uint64_t *)&h->magic, memory_order_acquire) == 0;
	char why[96];
	if (!fresh && gpuguard_region_check(reg, GPUGUARD_REGION_SIZE, why, sizeof why) != 0) {
		refuse(why, 0);
		return -1;
	}
	if (!fresh) {
		/* A region nobody is attached to is left over (an earlier run, a
		 * restarted pod): start it afresh with our own budget. */
		int fd = open_again();
		if (fd >= 0) {
			fresh = sweep(fd) == 0;
			close(fd);
		}
	}
	if (fresh)
		write_fresh(mine_text);
	if (adopt_limit(mine_text) != 0)
		return -1;
	write_identity();
	if (claim_slot() != 0) {
		refuse("all process slots are taken", 0);
		return -1;
	}
	if (gg_opt.verbose) {
		const char *text = ((const struct gpuguard_region_header *)reg)->limit_text;
		gg_log(GG_LOG_INFO, "pod region %s: attached as slot %u; the pod's budget is %s%s (%s)",
		       gg_opt.shared_path, my_slot, text[0] ? "GPUGUARD_LIMIT=" : "", text[0] ? text : "no ceiling",
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
		refuse(why, 0);
		return -1;
	}
	reg_fd = open_region();
	if (reg_fd < 0)
		return -1;
	if (lock_setup(reg_fd) != 0) {
		refuse("cannot take its setup lock", errno);
	} else {
		int rc = attach_locked();
		lock_byte(reg_fd, 0, F_UNLCK);
		if (rc == 0)
			return 0;
	}
	/* relaxed: this thread's own store, before the munmap below */
	atomic_store_explicit(&guarded, NULL, memory_order_relaxed);
	if (reg)
		munmap(reg, GPUGUARD_REGION_SIZE);
	reg = NULL;
	close(reg_fd); /* drops any slot lock we took */
	reg_fd = -1;
	return -1;
}

static int attached(void)
{
	int st = atomic_load_explicit(&attach_state, memory_order_acquire);
	if (GG_LIKELY(st == ATTACH_OK || st == ATTACH_FAILED))
		return st == ATTACH_OK;
	int expect = ATTACH_NONE;
	/* acquire/release: the winner's reg, me and limits are published by the
	 * release store below; losers acquire them. */
	if (atomic_compare_exchange_strong_explicit(&attach_state, &expect, ATTACH_BUSY, memory_order_acquire,
	                                            memory_order_acquire)) {
		int ok = !gg_opt.scope_process && !gg_opt.limit_bad && attach() == 0;
		atomic_store_explicit(&attach_state, ok ? ATTACH_OK : ATTACH_FAILED, memory_order_release);
		if (ok)
			pinned_start();
		return ok;
	}
	/* Bounded: the attaching thread tries the setup lock for at most 2 s. */
	while ((st = atomic_load_explicit(&attach_state, memory_order_acquire)) == ATTACH_BUSY)
		sched_yield();
	return st == ATTACH_OK;
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
		struct gpuguard_region_device *e = entry(i);
		/* acquire: pairs with the release that made the entry READY. */
		if (atomic_load_explicit(&e->state, memory_order_acquire) == GPUGUARD_RDEV_READY &&
		    (e->kind == GPUGUARD_RDEV_ORDINAL) == by_ordinal && memcmp(e->uuid, uuid, 16) == 0)
			return (int)i;
	}
	return -1;
}

static uint64_t limit_for(int dev, uint64_t physical)
{
	const struct gpuguard_limit *s = &gg_opt.limits.dev[dev];
	if (s->kind == GPUGUARD_LIMIT_BYTES)
		return s->value;
	if (s->kind == GPUGUARD_LIMIT_PERCENT)
		return physical ? (uint64_t)((unsigned __int128)physical * s->value / 10000) : GG_LIMIT_UNRESOLVED;
	return GG_UNLIMITED;
}

/* Finds or (under the setup lock) fills in the entry for this device. */
static int claim_entry(int dev, uint32_t kind, const uint8_t uuid[16], uint64_t physical)
{
	int i = find_entry(kind, uuid);
	if (i >= 0) {
		/* Made without a ceiling, before the pod had one: ours now. */
		uint64_t none = GG_UNLIMITED;
		/* relaxed: the limit is a plain number read with relaxed loads. */
		atomic_compare_exchange_strong_explicit(&entry((unsigned)i)->limit, &none, limit_for(dev, physical),
		                                        memory_order_relaxed, memory_order_relaxed);
		return i;
	}
	int fd = open_again();
	if (fd < 0 || lock_setup(fd) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	i = find_entry(kind, uuid); /* someone may have been first */
	for (unsigned j = 0; i < 0 && j < GPUGUARD_REGION_DEVICES; j++) {
		struct gpuguard_region_device *e = entry(j);
		/* CLAIMING left over is a claimer that died holding the lock.
		 * relaxed here and in the stores below: we hold the setup lock,
		 * and readers look at nothing but READY (released below). */
		if (atomic_load_explicit(&e->state, memory_order_relaxed) == GPUGUARD_RDEV_READY)
			continue;
		atomic_store_explicit(&e->state, GPUGUARD_RDEV_CLAIMING, memory_order_relaxed);
		e->kind = kind;
		memcpy(e->uuid, uuid, 16);
		e->physical = physical;
		atomic_store_explicit(&e->limit, limit_for(dev, physical), memory_order_relaxed);
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
	lock_byte(fd, 0, F_UNLCK);
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
	if (!attached())
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
	struct gpuguard_region_device *e = entry((unsigned)i);
	*b = (struct gg_budget){
	    .used = &e->used,
	    .peak = &e->peak,
	    .limit = &e->limit,
	    .refused = &e->refused,
	    .waiters = &e->waiters,
	    .wake = &e->wake,
	    .mine = &me->used[i],
	    .mine_waiting = &me->waiting[i],
	    .claim = &me->claim[i],
	    .shadow = &gg_devices[dev].used,
	    .wait_ns = &e->wait_ns,
	    .stalemate = &e->stalemate,
	    .region = reg,
	    .slot = my_slot,
	    .driver_oom = &e->driver_oom,
	    .threads = &me->threads,
	    .changed = pod_changed,
	    .entry = (unsigned)i,
	    .futex_private = 0,
	};
	/* Once per process per device entry (two ordinals can name one card). */
	uint32_t bit = 1u << i;
	/* relaxed: the bit only has to be taken once among our threads (the
	 * RMW is atomic); nothing else is published through it. */
	if (gg_opt.context_reserve && !(atomic_fetch_or_explicit(&me->ctx_charged, bit, memory_order_relaxed) & bit))
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
	/* acquire: pairs with the release in attached(), for reg. Without
	 * binding: only a device already in the pod can be the other runtime's
	 * card. */
	if (atomic_load_explicit(&attach_state, memory_order_acquire) != ATTACH_OK)
		return;
	struct gg_budget *b = gg_ceiling_budget_peek(dev);
	uint8_t uuid[16];
	uint64_t physical = 0;
	if (!b->mine || !identity[runtime] || identity[runtime](dev, uuid, &physical) != 0)
		return;
	/* The entry's fields were written before it was READY; our binder
	 * acquired that, and released the budget that peek acquired. */
	const struct gpuguard_region_device *e = entry(b->entry);
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
	if (me && s == my_slot)
		return 1;
	struct flock fl = {
	    .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)gpuguard_region_slot_lock(s), .l_len = 1};
	return fd >= 0 && fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

void gg_shared_foreach_use(void (*fn)(const struct gg_pod_use *, void *), void *arg)
{
	/* acquire: pairs with the release in attached(), for reg and me. */
	if (atomic_load_explicit(&attach_state, memory_order_acquire) != ATTACH_OK)
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
			if (g->pod.used == &entry(i)->used && local[i] < 0)
				local[i] = d;
	}
	int fd = open_again();
	for (unsigned s = 0; s < GPUGUARD_REGION_PROCS; s++) {
		struct gpuguard_region_proc *p = gpuguard_region_proc(reg, s);
		struct gg_pod_use u = {.slot = s, .pid = p->pid, .self = me && s == my_slot};
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
	if (atomic_load_explicit(&attach_state, memory_order_acquire) != ATTACH_OK ||
	    atomic_exchange_explicit(&detached, 1, memory_order_relaxed))
		return;
	gg_ceiling_unbind_pod();
	reclaim_slot(my_slot, 0, -1); /* we hold its lock: as for a dead owner */
}

void gg_shared_after_fork_child(void)
{
	/* The child shares the parent's open file description, and with it the
	 * parent's slot lock: close our copy (the parent's stays) and attach
	 * afresh, to a slot of our own, on first use. */
	atomic_store_explicit(&guarded, NULL, memory_order_relaxed); /* one thread */
	atomic_store_explicit(&lost, 0, memory_order_relaxed);
	if (reg)
		munmap(reg, GPUGUARD_REGION_SIZE);
	if (reg_fd >= 0)
		close(reg_fd);
	reg = NULL;
	reg_fd = -1;
	me = NULL;
	/* relaxed: the fork child has one thread. */
	atomic_store_explicit(&pinned_live, 0, memory_order_relaxed);
	atomic_store_explicit(&detached, 0, memory_order_relaxed);
	atomic_store_explicit(&last_reclaim_ms, 0, memory_order_relaxed);
	atomic_store_explicit(&attach_state, ATTACH_NONE, memory_order_relaxed);
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
	if (uuid && attached()) {
		int i = find_entry(GPUGUARD_RDEV_CUDA, uuid); /* any entry with this UUID */
		if (i >= 0) {
			struct gpuguard_region_device *e = entry((unsigned)i);
			/* relaxed: numbers to report, as gg_ceiling_meminfo reads them */
			lim = atomic_load_explicit(&e->limit, memory_order_relaxed);
			used = gpuguard_region_used(reg, (unsigned)i);
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
			lim = limit_for((int)index, *total_bytes);
	}
	uint64_t room = lim > used ? lim - used : 0;
	if (*total_bytes > lim)
		*total_bytes = lim;
	if (*free_bytes > room)
		*free_bytes = room;
}
