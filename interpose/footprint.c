/* gpuguard: the footprint the card shows (issue 22). What the driver holds
 * for this process beyond its allocation calls (its contexts, module loads,
 * local memory, the malloc heap and printf FIFO) is charged as one more
 * category, "runtime": the driver's own per-process figure (NVML's used
 * memory for our PID) less the books, reconciled at moments the hot path
 * never sees (docs/sharing.md says which and why), and pre-charged where
 * the growth can be foreseen (cuCtxSetLimit). Where the driver enforces a
 * limit itself (MPS v3 memory partitioning, a cgroup's dmem.max), the
 * ceiling is kept under it, read at the same moments. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "footprint.h"
#include "base.h"
#include "ceiling.h"
#include "gpuguard/nvml_abi.h"
#include "gpuguard/region.h"
#include "log.h"
#include "options.h"
#include "resolve.h"

/* The ceiling's "near" is one tick (ceiling.h cannot name our step). */
_Static_assert(GG_CEILING_NEAR == GG_FOOTPRINT_STEP, "a grant is near the ceiling within one tick");

/* NVML's "no per-process figure" (NVML_VALUE_NOT_AVAILABLE). */
#define NV_NOT_AVAILABLE (~0ull)
/* Processes read per device in one call, on the stack (no malloc on any
 * path a hook takes): 256 × 24 bytes. A card with more is read as "cannot
 * say" for this once. */
#define NV_PROCS 256

struct fp_dev {
	/* bytes charged now as runtime: measured + headroom + foreseen; only
	 * changed under lock (relaxed loads elsewhere: a figure for readers) */
	_Atomic uint64_t charged;
	_Atomic uint64_t measured; /* the driver's figure less the books, at the last reconcile */
	_Atomic uint64_t driver;   /* the driver's per-process figure then; 0 = never read */
	_Atomic uint64_t foreseen; /* heap + FIFO sizes set by cuCtxSetLimit, held until the driver shows them */
	_Atomic uint64_t local;    /* local memory per the stack formula, as last pre-charged */
	_Atomic uint64_t over;     /* runtime the ceiling had no room for, at the last reconcile */
	_Atomic uint64_t last_ms;
	_Atomic uint64_t reconciles;
	/* A reconcile asked for while the lock was held: its asker's growth
	 * may postdate the holder's reading, so the holder reads again after
	 * letting go (unlock_catch_up). */
	_Atomic uint32_t again;
	/* when gg_footprint_near_slow last read (or tried to: a reading NVML
	 * cannot give leaves last_ms alone), for its rate limit */
	_Atomic uint64_t near_ms;
	pthread_mutex_t lock; /* one reconcile or pre-charge at a time per device */
	gg_nvmlDevice_t handle;
	int handle_state; /* under lock: 0 not looked up, 1 found, -1 none */
	int card_checked; /* under lock: card_check ran */
	/* The driver's own limit (dmem_update). Under lock: whether it was
	 * asked (0 not yet, 1 a hard limit found, -1 none or no
	 * partitioning) and which cgroup levels have one (bit 0: ours, 1 its
	 * parent, ...). Relaxed figures for readers: the binding level's
	 * limits and use at the last reading, the ceiling gpuguard has of
	 * its own, and the one it keeps now. */
	int dmem_state;
	unsigned dmem_levels;
	_Atomic uint32_t dmem_found; /* the figures below are written (release, after them) */
	_Atomic uint64_t dmem_hard, dmem_soft, dmem_used, dmem_own, dmem_ceiling;
};
static struct fp_dev fp[GG_MAX_DEVICES] = {
    [0 ... GG_MAX_DEVICES - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER},
};

/* Who the device is (hook_cuda.c hands it down: 16 bytes, the driver's). */
static _Atomic gg_footprint_uuid_fn uuid_fn;

void gg_footprint_set_uuid(gg_footprint_uuid_fn fn)
{
	/* relaxed: a code pointer set by a constructor before any hook runs */
	atomic_store_explicit(&uuid_fn, fn, memory_order_relaxed);
}

/* ---- NVML, loaded by us, called around our own hooks -------------------- */

static struct {
	gg_pfn_nvmlInit_v2 init;
	gg_pfn_nvmlShutdown shutdown;
	gg_pfn_nvmlDeviceGetHandleByUUID by_uuid;
	gg_pfn_nvmlDeviceGetComputeRunningProcesses_v3 procs3;
	gg_pfn_nvmlDeviceGetComputeRunningProcesses_v2 procs2;
	gg_pfn_nvmlDeviceGetMemoryInfo_v2 mem2;
	gg_pfn_nvmlDeviceGetMemoryInfo mem1;
	gg_pfn_nvmlDeviceGetMemoryLimits_v1 limits; /* NULL before driver r615: no partitioning */
	int ok;
} nv;
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

static void nv_load(void)
{
	/* Loaded at the first reconcile, inside a hook, never from a
	 * constructor or the dlsym override (DESIGN.md §1). Looked up with
	 * glibc's own dlsym: our override would hand back our NVML hooks. */
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	nv.init = (gg_pfn_nvmlInit_v2)gg_real_dlsym(h, "nvmlInit_v2");
	nv.by_uuid = (gg_pfn_nvmlDeviceGetHandleByUUID)gg_real_dlsym(h, "nvmlDeviceGetHandleByUUID");
	nv.procs3 =
	    (gg_pfn_nvmlDeviceGetComputeRunningProcesses_v3)gg_real_dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
	nv.procs2 =
	    (gg_pfn_nvmlDeviceGetComputeRunningProcesses_v2)gg_real_dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v2");
	nv.mem2 = (gg_pfn_nvmlDeviceGetMemoryInfo_v2)gg_real_dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
	nv.mem1 = (gg_pfn_nvmlDeviceGetMemoryInfo)gg_real_dlsym(h, "nvmlDeviceGetMemoryInfo");
	nv.shutdown = (gg_pfn_nvmlShutdown)gg_real_dlsym(h, "nvmlShutdown");
	nv.limits = (gg_pfn_nvmlDeviceGetMemoryLimits_v1)gg_real_dlsym(h, "nvmlDeviceGetMemoryLimits_v1");
	nv.ok = nv.init && nv.shutdown && nv.by_uuid && (nv.procs3 || nv.procs2);
}

/* NVML counts its inits: ours brackets each use, so that the process's own
 * last nvmlShutdown still shuts it (its calls then fail as they would
 * without us). 0 or -1. */
static int nv_enter(void)
{
	return nv.ok && nv.init() == GG_NVML_SUCCESS ? 0 : -1;
}

static void nv_leave(void)
{
	nv.shutdown();
}

/* dev's NVML handle, by UUID (CUDA_VISIBLE_DEVICES renumbers; NVML's
 * indices are the host's): "GPU-…", else "MIG-…" for a MIG instance, whose
 * handle answers for the instance alone. Under the device's lock. */
static gg_nvmlDevice_t nv_handle(int dev)
{
	struct fp_dev *d = &fp[dev];
	if (d->handle_state)
		return d->handle_state > 0 ? d->handle : NULL;
	d->handle_state = -1;
	gg_footprint_uuid_fn f = atomic_load_explicit(&uuid_fn, memory_order_relaxed);
	uint8_t u[16];
	if (!f || f(dev, u) != 0)
		return NULL;
	static const char *const prefix[] = {"GPU", "MIG"};
	for (int p = 0; p < 2; p++) {
		char s[64];
		snprintf(s, sizeof s, "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		         prefix[p], u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		         u[13], u[14], u[15]);
		if (nv.by_uuid(s, &d->handle) == GG_NVML_SUCCESS) {
			d->handle_state = 1;
			return d->handle;
		}
	}
	return NULL;
}

/* The card's processes: count filled, 0; -1 when NVML cannot say. */
static int nv_procs(gg_nvmlDevice_t h, gg_nvmlProcessInfo_t *out, unsigned *count)
{
	unsigned n = NV_PROCS;
	gg_nvmlReturn_t rc = nv.procs3 ? nv.procs3(h, &n, out) : nv.procs2(h, &n, out);
	if (rc != GG_NVML_SUCCESS)
		return -1;
	*count = n;
	return 0;
}

/* ---- which of NVML's processes is us ------------------------------------ */

/* NVML's PIDs are the host's (the driver knows no PID namespaces,
 * REAL-CUDA.md §7). Ours, in order: getpid() (no namespace), the
 * outermost NSpid where /proc shows the host's, the one PID that appeared
 * around our own first context (HAMi's method). 0 = not known yet. */
static _Atomic uint32_t my_pid;
static uint32_t ns_pid; /* the outermost NSpid; read once under nv_once's caller */

static uint32_t outer_nspid(void)
{
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *p = strstr(buf, "\nNSpid:");
	if (!p)
		return 0;
	p += 7;
	while (*p == ' ' || *p == '\t')
		p++;
	uint32_t v = 0;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (uint32_t)(*p++ - '0');
	return v;
}

static int has_pid(const gg_nvmlProcessInfo_t *p, unsigned n, uint32_t pid)
{
	for (unsigned i = 0; i < n; i++)
		if (p[i].pid == pid)
			return 1;
	return 0;
}

/* This process's cgroup v2 as the driver's nameSpace wants it: "full path
 * to sysfs cgroup" (NVML's nvmlGetMemoryLimits_v1_t), so /sys/fs/cgroup and
 * the path of /proc/self/cgroup's "0::" line, or GPUGUARD_CGROUP's. Inside
 * a container with a cgroup namespace that line is the namespace's view
 * ("0::/") and /sys/fs/cgroup is the container's own cgroup, so the path
 * names the same directory from where NVML runs. "" = none. Read once. */
#define CG_ROOT "/sys/fs/cgroup"
static char cg_path[sizeof(CG_ROOT) + 4096];
static size_t cg_len;

static void cgroup_read(void)
{
	char buf[4096];
	const char *rel = gg_opt.cgroup && *gg_opt.cgroup ? gg_opt.cgroup : NULL;
	int from_opt = rel != NULL;
	if (!rel) {
		int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0)
			return;
		buf[n] = '\0';
		/* cgroup v2's one line, "0::/path"; v1 lines have controllers */
		char *p = strncmp(buf, "0::", 3) == 0 ? buf : strstr(buf, "\n0::");
		if (!p)
			return;
		p += p == buf ? 3 : 4;
		p[strcspn(p, "\n")] = '\0';
		rel = p;
	}
	size_t n = strlen(rel);
	while (n > 1 && rel[n - 1] == '/')
		n--;
	if (rel[0] != '/' || sizeof(CG_ROOT) + n > sizeof cg_path) {
		if (from_opt)
			gg_log(
			    GG_LOG_WARN,
			    "GPUGUARD_CGROUP=%s is not valid; accepted: an absolute cgroup v2 path as "
			    "/proc/self/cgroup writes it (/kubepods/pod1/ctr); the driver's memory limit is not read",
			    rel);
		return;
	}
	if (n == 1) /* the root: its own directory, no trailing '/' */
		n = 0;
	memcpy(cg_path, CG_ROOT, sizeof(CG_ROOT) - 1);
	memcpy(cg_path + sizeof(CG_ROOT) - 1, rel, n);
	cg_len = sizeof(CG_ROOT) - 1 + n;
	cg_path[cg_len] = '\0';
}

static void pid_once(void)
{
	nv_load();
	ns_pid = outer_nspid();
	if (nv.limits)
		cgroup_read();
}

/* Our entry among p[0..n), or -1. */
static int find_me(const gg_nvmlProcessInfo_t *p, unsigned n)
{
	uint32_t pid = atomic_load_explicit(&my_pid, memory_order_relaxed);
	if (!pid) {
		if (has_pid(p, n, (uint32_t)getpid()))
			pid = (uint32_t)getpid();
		else if (ns_pid && has_pid(p, n, ns_pid))
			pid = ns_pid;
		if (pid) /* relaxed: a number every finder agrees on */
			atomic_store_explicit(&my_pid, pid, memory_order_relaxed);
	}
	for (unsigned i = 0; pid && i < n; i++)
		if (p[i].pid == pid)
			return (int)i;
	return -1;
}

/* The PIDs on the card before our context: one snapshot, taken by the first
 * context creation while our PID is unknown. */
static pthread_mutex_t diff_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t before_pids[NV_PROCS];
static unsigned before_n;
static int before_dev = -1;

void gg_footprint_ctx_before(int dev)
{
	if (!gg_opt.runtime || dev < 0 || dev >= GG_MAX_DEVICES)
		return;
	pthread_once(&nv_once, pid_once);
	if (!nv.ok || atomic_load_explicit(&my_pid, memory_order_relaxed))
		return;
	if (pthread_mutex_trylock(&diff_lock) != 0)
		return; /* another thread takes the snapshot */
	gg_nvmlProcessInfo_t p[NV_PROCS];
	unsigned n = 0;
	before_dev = -1;
	/* trylock: a cuCtxSetLimit may hold the device's lock while it waits
	 * for room (GPUGUARD_ON_LIMIT=wait); a context is never held up by it,
	 * it only goes without the diff. */
	if (pthread_mutex_trylock(&fp[dev].lock) == 0) {
		int entered = nv_enter() == 0;
		gg_nvmlDevice_t h = entered ? nv_handle(dev) : NULL;
		pthread_mutex_unlock(&fp[dev].lock);
		if (h && nv_procs(h, p, &n) == 0 && find_me(p, n) < 0) {
			for (unsigned i = 0; i < n; i++)
				before_pids[i] = p[i].pid;
			before_n = n;
			before_dev = dev;
		}
		if (entered)
			nv_leave();
	}
	pthread_mutex_unlock(&diff_lock);
}

static void cand_keep(int dev, const gg_nvmlProcessInfo_t *p, unsigned n);

static void ctx_diff(int dev, const gg_nvmlProcessInfo_t *p, unsigned n)
{
	if (pthread_mutex_trylock(&diff_lock) != 0)
		return;
	if (before_dev == dev) {
		uint32_t found = 0;
		int several = 0;
		for (unsigned i = 0; i < n; i++) {
			int old = 0;
			for (unsigned j = 0; j < before_n && !old; j++)
				old = before_pids[j] == p[i].pid;
			if (!old) {
				several |= found != 0;
				found = p[i].pid;
			}
		}
		/* Another process that made its context at the same moment
		 * makes two new entries: none is taken yet, rather than a
		 * neighbour's. They become candidates, told apart by our own
		 * next allocations (the probe, below). */
		if (found && !several)
			atomic_store_explicit(&my_pid, found, memory_order_relaxed); /* as in find_me */
		else if (several)
			cand_keep(dev, p, n);
		before_dev = -1;
	}
	pthread_mutex_unlock(&diff_lock);
}

/* ---- telling ours apart from contexts made at the same moment ------------ */

static void fallback(int dev, const char *why);

/* Several PIDs new around our first context (pods of one rollout starting
 * together on a shared card): each is a candidate. Our own allocations
 * tell them apart: the card's processes are read just before the driver
 * call of one (the tick, gg_footprint_tick_slow) and just after it
 * (gg_footprint_probe_end), and ours is the one candidate that grew by
 * what the call took. A neighbour that allocated as much in the same
 * instant makes two candidates match, and that reading says nothing.
 * PROBE_VOTES readings naming the same candidate, and none naming
 * another, decide; so does being the only candidate left on the card (we
 * are on it). All of it under diff_lock. */
#define NV_CANDS 8
#define PROBE_MIN GG_PAGE /* a smaller call may land in pages the process holds already */
#define PROBE_TOL GG_PAGE /* what the charge rule and the driver's rounding may differ by */
#define PROBE_VOTES 2
#define PROBE_TRIES 64     /* then the fallback stands for good (said once) */
#define PROBE_STALE_MS 100 /* a probe whose call never returned through us (refused) */
static uint32_t cand_pid[NV_CANDS];
static uint64_t cand_before[NV_CANDS]; /* each one's used, read before the probe's call */
static unsigned cand_n, cand_tries, cand_votes;
static int cand_dev = -1;
static uint32_t cand_vote; /* the candidate the last useful reading named */
static uint32_t probe_tid; /* the thread whose probe is in flight; 0 = none */
static uint64_t probe_bytes, probe_ms;
/* Candidates wait for a probe: the tick's one extra check (relaxed: a
 * hint; the candidates themselves are read under diff_lock). */
static _Atomic int cand_pending;

/* The candidates from the diff: p[0..n) less the PIDs seen before. */
static void cand_keep(int dev, const gg_nvmlProcessInfo_t *p, unsigned n)
{
	unsigned k = 0;
	for (unsigned i = 0; i < n; i++) {
		int old = 0;
		for (unsigned j = 0; j < before_n && !old; j++)
			old = before_pids[j] == p[i].pid;
		if (!old && k < NV_CANDS)
			cand_pid[k++] = p[i].pid;
	}
	cand_n = k;
	cand_dev = dev;
	cand_tries = cand_votes = 0;
	cand_vote = probe_tid = 0;
	atomic_store_explicit(&cand_pending, 1, memory_order_relaxed);
	gg_log(GG_LOG_INFO,
	       "device %d: %u processes made their contexts at the same moment as ours; ours is told apart by "
	       "our next allocations (until then no runtime is charged for it)",
	       dev, k);
}

static void cand_done(void)
{
	cand_n = 0;
	cand_dev = -1;
	probe_tid = 0;
	atomic_store_explicit(&cand_pending, 0, memory_order_relaxed);
}

/* used of pid in p[0..n), or NV_NOT_AVAILABLE when it is not listed */
static uint64_t used_of(const gg_nvmlProcessInfo_t *p, unsigned n, uint32_t pid)
{
	for (unsigned i = 0; i < n; i++)
		if (p[i].pid == pid)
			return p[i].usedGpuMemory;
	return NV_NOT_AVAILABLE;
}

/* The card's processes on dev for a probe: 0, or -1 (the device busy, or
 * NVML cannot say). */
static int probe_list(int dev, gg_nvmlProcessInfo_t *p, unsigned *n)
{
	if (pthread_mutex_trylock(&fp[dev].lock) != 0)
		return -1; /* a reconcile or a cuCtxSetLimit holds it: another time */
	int rc = -1;
	if (nv_enter() == 0) {
		gg_nvmlDevice_t h = nv_handle(dev);
		rc = h && nv_procs(h, p, n) == 0 ? 0 : -1;
		nv_leave();
	}
	pthread_mutex_unlock(&fp[dev].lock);
	return rc;
}

/* Before the driver call of an allocation of `bytes` on dev (this thread
 * holds its grant): arms a probe. */
static void probe_begin(int dev, uint64_t bytes)
{
	/* While candidates wait, the next allocation of PROBE_MIN or more
	 * ticks at once; smaller ones only every PROBE_MIN bytes, so a
	 * process that makes no large ones pays for this rarely. */
	gg_footprint_countdown = (int64_t)PROBE_MIN - 1;
	if (bytes < PROBE_MIN || pthread_mutex_trylock(&diff_lock) != 0)
		return;
	gg_nvmlProcessInfo_t p[NV_PROCS];
	unsigned n = 0;
	if (cand_dev == dev && cand_n && !probe_tid && probe_list(dev, p, &n) == 0) {
		for (unsigned i = 0; i < cand_n; i++)
			cand_before[i] = used_of(p, n, cand_pid[i]);
		probe_tid = gg_gettid();
		probe_bytes = bytes;
		probe_ms = gg_now_ms();
		gg_footprint_probe = 1;
	}
	pthread_mutex_unlock(&diff_lock);
}

void gg_footprint_probe_end(int dev, uint64_t made)
{
	gg_footprint_probe = 0;
	gg_nvmlProcessInfo_t p[NV_PROCS];
	unsigned n = 0;
	uint32_t decided = 0;
	pthread_mutex_lock(&diff_lock); /* held briefly, never across a driver call */
	if (probe_tid != gg_gettid() || cand_dev != dev) {
		pthread_mutex_unlock(&diff_lock);
		return;
	}
	probe_tid = 0;
	/* Refused, or not the call probed (a refusal left the probe armed):
	 * the reading says nothing. */
	int useful = made == probe_bytes && gg_now_ms() - probe_ms < PROBE_STALE_MS;
	if (useful && probe_list(dev, p, &n) == 0) {
		unsigned left = 0, matched = 0;
		uint32_t match = 0, last = 0;
		for (unsigned i = 0; i < cand_n; i++) {
			uint64_t after = used_of(p, n, cand_pid[i]);
			if (after == NV_NOT_AVAILABLE)
				continue; /* gone from the card: not us */
			cand_pid[left] = cand_pid[i];
			cand_before[left++] = cand_before[i];
			last = cand_pid[i];
			uint64_t before = cand_before[i];
			if (before == NV_NOT_AVAILABLE || after < before)
				continue;
			uint64_t grew = after - before;
			if (grew + PROBE_TOL >= made && grew <= made + PROBE_TOL) {
				matched++;
				match = cand_pid[i];
			}
		}
		cand_n = left;
		if (left == 1) {
			decided = last;
		} else if (matched == 1) {
			cand_votes = match == cand_vote ? cand_votes + 1 : 1;
			cand_vote = match;
			if (cand_votes >= PROBE_VOTES)
				decided = match;
		}
		if (!left)
			cand_done();
	}
	if (decided) {
		atomic_store_explicit(&my_pid, decided, memory_order_relaxed); /* as in find_me */
		cand_done();
		gg_log(GG_LOG_INFO, "device %d: our process is PID %u on the card (told apart by our own allocations)",
		       dev, decided);
	} else if (cand_n && ++cand_tries >= PROBE_TRIES) {
		cand_done();
		fallback(dev, "our PID could not be told from those of processes that made their contexts at the "
		              "same moment");
	}
	pthread_mutex_unlock(&diff_lock);
	if (decided)
		gg_footprint_reconcile(dev, 0); /* the driver's figure, at once */
}

/* ---- the reconcile ------------------------------------------------------ */

/* What this process's books hold on dev without the runtime category. */
static uint64_t books_of(int dev, uint64_t charged)
{
	struct gg_budget *b = gg_ceiling_budget_peek(dev);
	/* relaxed: a figure; the reconcile is a correction, not a decision */
	uint64_t mine = atomic_load_explicit(b->mine ? b->mine : b->used, memory_order_relaxed);
	return mine > charged ? mine - charged : 0;
}

/* Publishes our runtime charge on dev to our slot's runtime word in the pod
 * region (region.h's runtime table), where readers sum it over the live
 * slots and a sweep of our slot, kill -9 included, zeroes it with the
 * charge. Called after the ceiling took a growth (set_charge, limit_end)
 * and before it gives a shrink back, so the word never exceeds the part of
 * our slot's used that it names (tests/model/pod.pml, steps T2 and U1). */
static void publish(int dev, uint64_t before, uint64_t after)
{
	struct gg_budget *b = gg_ceiling_budget_peek(dev);
	if (!b->region || before == after)
		return;
	/* seq_cst, as the slot's used words: one order with the used word
	 * the growth went to before (R4) and the shrink goes to after (L1),
	 * which a sweeper's zeroing (S3) and readers' sums take part in.
	 * Written only by us (under the device's lock) and by whoever sweeps
	 * our slot once we are dead: a plain store of the whole figure. */
	atomic_store_explicit(gpuguard_region_runtime_word(b->region, b->slot, b->entry), after, memory_order_seq_cst);
	/* relaxed: the entry's snapshot for readers of the file, as its used
	 * (shared_sweep.c, publish); the sum is the table's. */
	atomic_store_explicit(&gpuguard_region_dev(b->region, b->entry)->runtime,
	                      gpuguard_region_runtime(b->region, b->entry), memory_order_relaxed);
}

/* Sets the runtime charge of dev to target (under its lock). */
static void set_charge(int dev, uint64_t target)
{
	struct fp_dev *d = &fp[dev];
	uint64_t cur = atomic_load_explicit(&d->charged, memory_order_relaxed);
	if (target > cur) {
		/* Memory the driver already holds, charged as far as the
		 * ceiling goes and no further: the budget never passes its
		 * limit by our own doing, and every later request is refused
		 * while it sits there. What did not fit is counted (`over`). */
		uint64_t grow = target - cur;
		if (gg_ceiling_try_reserve(dev, grow) != 0) {
			struct gpuguard_device_stats st;
			gg_ceiling_read(dev, &st);
			grow = st.limit > st.used ? st.limit - st.used : 0;
			if (grow > target - cur || (grow && gg_ceiling_try_reserve(dev, grow) != 0))
				grow = 0;
		}
		atomic_store_explicit(&d->over, target - cur - grow, memory_order_relaxed); /* a figure */
		target = cur + grow;
		/* relaxed: written under the lock, read as a figure */
		atomic_store_explicit(&d->charged, target, memory_order_relaxed);
		publish(dev, cur, target); /* T2: after the used word took it */
		return;
	}
	atomic_store_explicit(&d->over, 0, memory_order_relaxed);
	atomic_store_explicit(&d->charged, target, memory_order_relaxed); /* as above */
	/* U1: before the used word gives it back */
	publish(dev, cur, target);
	if (target < cur)
		gg_ceiling_release(dev, cur - target);
}

uint64_t gg_footprint_target(uint64_t driver, uint64_t books, uint64_t foreseen, uint64_t headroom)
{
	uint64_t measured = driver > books ? driver - books : 0;
	/* Heap and FIFO set by cuCtxSetLimit are taken at a later launch:
	 * held until the driver's figure covers them. Headroom only where the
	 * driver shows a runtime at all (a real card always does: the
	 * context); a figure that matches the books has nothing to grow. */
	uint64_t t = measured > foreseen ? measured : foreseen;
	return measured ? t + headroom : t;
}

static _Atomic int said_fallback;

static void fallback(int dev, const char *why)
{
	/* relaxed: a once-only flag */
	if (atomic_exchange_explicit(&said_fallback, 1, memory_order_relaxed))
		return;
	char r[32];
	gg_log(GG_LOG_WARN,
	       "device %d: %s; the driver's own figure for this process is not known, so only "
	       "GPUGUARD_CONTEXT_RESERVE (%s) stands for what no allocation call shows",
	       dev, why, gg_log_bytes(r, sizeof r, gg_opt.context_reserve));
}

static int driver_figure_in(int dev, uint64_t *out, gg_nvmlProcessInfo_t *p, unsigned *n);
static void dmem_update(int dev, gg_nvmlDevice_t h, uint64_t drv);

/* The driver's figure for us on dev: 0 and *out, or -1 (said once). Under
 * the device's lock. p, n: the process list read, for the caller. */
static int driver_figure(int dev, uint64_t *out, gg_nvmlProcessInfo_t *p, unsigned *n)
{
	pthread_once(&nv_once, pid_once);
	if (nv_enter() != 0) {
		fallback(dev, "NVML (libnvidia-ml.so.1) is not there or does not start");
		return -1;
	}
	int rc = driver_figure_in(dev, out, p, n);
	nv_leave();
	return rc;
}

/* Once per device, what the card can hold: NVML's total less what the
 * driver and firmware reserve (v2), kept for the region's entry (the node
 * compares ceilings with it) and held against the ceiling: one the card
 * cannot hold is said once, at the first reconcile, which is the context's
 * creation. Under the device's lock. */
static void card_check(int dev, gg_nvmlDevice_t h)
{
	struct fp_dev *d = &fp[dev];
	if (d->card_checked || !nv.mem2)
		return;
	d->card_checked = 1;
	gg_nvmlMemory_v2_t m = {.version = GG_nvmlMemory_v2};
	if (nv.mem2(h, &m) != GG_NVML_SUCCESS || m.reserved > m.total)
		return;
	struct gg_budget *b = gg_ceiling_budget_peek(dev);
	if (b->region) {
		uint64_t zero = 0; /* the first member's word stands (relaxed: a figure) */
		atomic_compare_exchange_strong_explicit(&gpuguard_region_dev(b->region, b->entry)->card_reserved, &zero,
		                                        m.reserved ? m.reserved : 1, memory_order_relaxed,
		                                        memory_order_relaxed);
	}
	uint64_t lim = atomic_load_explicit(b->limit, memory_order_relaxed), room = m.total - m.reserved;
	if (lim < GG_LIMIT_UNRESOLVED && lim > room) {
		char l[32], r[32];
		gg_log(GG_LOG_WARN,
		       "device %d: the ceiling (%s) is more than the card can hold (%s: its memory less what the "
		       "driver reserves); the card runs out before the ceiling refuses",
		       dev, gg_log_bytes(l, sizeof l, lim), gg_log_bytes(r, sizeof r, room));
	}
}

static int driver_figure_in(int dev, uint64_t *out, gg_nvmlProcessInfo_t *p, unsigned *n)
{
	gg_nvmlDevice_t h = nv_handle(dev);
	if (h)
		card_check(dev, h);
	if (!h) {
		fallback(dev, "NVML does not know the device's UUID");
		return -1;
	}
	if (nv_procs(h, p, n) != 0) {
		fallback(dev, "NVML does not list the card's processes");
		return -1;
	}
	int i = find_me(p, *n);
	if (i < 0)
		return -1; /* not on the card yet, or not found yet: nothing to say */
	if (p[i].usedGpuMemory == NV_NOT_AVAILABLE) {
		fallback(dev, "NVML gives no per-process figure (MIG on some drivers)");
		return -1;
	}
	*out = p[i].usedGpuMemory;
	dmem_update(dev, h, *out);
	return 0;
}

/* ---- the driver's own limit: MPS v3 memory partitioning ----------------- */

/* Cgroup levels read: ours and up to 7 above it (dmem.max binds a whole
 * subtree, so a limit on the pod's cgroup holds its containers). */
#define DMEM_LEVELS 8

/* The ceiling gpuguard has of its own on dev: the limits in force
 * (GPUGUARD_LIMIT, or the pod's budget once adopted; a percentage of NVML's
 * total), GG_UNLIMITED for none. */
static uint64_t own_ceiling(int dev, gg_nvmlDevice_t h)
{
	gg_nvmlMemory_t m;
	uint64_t total = nv.mem1 && nv.mem1(h, &m) == GG_NVML_SUCCESS ? m.total : 0;
	return gg_ceiling_limit_for(dev, total);
}

static int said_dmem[GG_MAX_DEVICES]; /* under each device's lock */

/* Reads the driver's limits on our cgroup and those above it, and keeps
 * dev's ceiling at min(our own, the room the tightest one leaves us). A
 * cgroup's currentUsed counts every process in it (and below), contexts
 * and modules included; ours is the part of it that the budget already
 * holds: this process's own figure in process scope; in pod scope the
 * other members' charge and our own figure (its members share the
 * cgroup; their headroom counts as theirs, which errs by at most their
 * headroom, kept inside the ceiling anyway). So the room is
 * hard - (currentUsed - ours), and a budget at the ceiling leaves the
 * cgroup at its hard limit less our headroom. Under the device's lock,
 * NVML entered. The levels with a limit are found at the first reading;
 * a limit set later on another level is not seen (docs/sharing.md). */
static void dmem_update(int dev, gg_nvmlDevice_t h, uint64_t drv)
{
	struct fp_dev *d = &fp[dev];
	if (!nv.limits || !cg_len || d->dmem_state < 0 || gg_opt.limit_bad)
		return;
	struct gg_budget *b = gg_ceiling_budget_peek(dev);
	uint64_t ours = drv;
	if (b->region && b->mine) {
		/* relaxed: figures; the next reading corrects a stale one */
		uint64_t pod = gpuguard_region_used(b->region, b->entry);
		uint64_t mine = atomic_load_explicit(b->mine, memory_order_relaxed);
		ours = (pod > mine ? pod - mine : 0) + drv;
	}
	char path[sizeof cg_path];
	memcpy(path, cg_path, cg_len + 1);
	size_t len = cg_len;
	int first = d->dmem_state == 0;
	uint64_t room = UINT64_MAX, hard = 0, soft = 0, used = 0;
	for (unsigned lvl = 0; lvl < DMEM_LEVELS; lvl++) {
		if (first || (d->dmem_levels & (1u << lvl))) {
			gg_nvmlGetMemoryLimits_v1_t l = {.nameSpace = path};
			gg_nvmlReturn_t rc = nv.limits(h, &l);
			if (rc == GG_NVML_SUCCESS && l.hardLimit != GG_NVML_DEVICE_MEMORY_LIMIT_MAX) {
				d->dmem_levels |= 1u << lvl;
				uint64_t others = l.currentUsed > ours ? l.currentUsed - ours : 0;
				uint64_t r = l.hardLimit > others ? l.hardLimit - others : 0;
				if (r < room) {
					room = r;
					hard = l.hardLimit;
					soft = l.softLimit;
					used = l.currentUsed;
				}
			} else if (first && lvl == 0 && rc != GG_NVML_SUCCESS && rc != GG_NVML_ERROR_NOT_FOUND) {
				break; /* no partitioning here (an older NVML, MIG, not supported): off, silently */
			}
		}
		if (len <= sizeof(CG_ROOT) - 1)
			break; /* the root read */
		while (len > sizeof(CG_ROOT) - 1 && path[len - 1] != '/')
			len--;
		len--; /* the '/' before the last name */
		path[len] = '\0';
	}
	if (first)
		d->dmem_state = d->dmem_levels ? 1 : -1;
	if (d->dmem_state < 0 || room == UINT64_MAX)
		return;
	uint64_t own = own_ceiling(dev, h);
	uint64_t ceiling = own < room ? own : room;
	/* relaxed: figures for readers, written under the lock */
	atomic_store_explicit(&d->dmem_hard, hard, memory_order_relaxed);
	atomic_store_explicit(&d->dmem_soft, soft, memory_order_relaxed);
	atomic_store_explicit(&d->dmem_used, used, memory_order_relaxed);
	atomic_store_explicit(&d->dmem_own, own, memory_order_relaxed);
	atomic_store_explicit(&d->dmem_ceiling, ceiling, memory_order_relaxed);
	/* release: a reader that sees the flag (acquire) sees the first
	 * figures above whole; later ones are a snapshot, as any figure */
	atomic_store_explicit(&d->dmem_found, 1, memory_order_release);
	/* relaxed: the limit is a plain number, read with relaxed loads by
	 * every reservation (gg_ceiling_resolve sets it the same way); a
	 * request racing this store is judged by either ceiling. In pod
	 * scope it is the pod's word, and every member sets it alike. */
	atomic_store_explicit(b->limit, ceiling, memory_order_relaxed);
	if (!said_dmem[dev]) {
		said_dmem[dev] = 1;
		char hb[32], sb[32], cb[32];
		gg_log(
		    GG_LOG_INFO,
		    "driver memory limit on device %d: hard %s, soft %s (cgroup %s); gpuguard's ceiling is %s%s", dev,
		    gg_log_bytes(hb, sizeof hb, hard), gg_log_bytes(sb, sizeof sb, soft), cg_path,
		    gg_log_bytes(cb, sizeof cb, ceiling),
		    own >= GG_LIMIT_UNRESOLVED
		        ? " (no GPUGUARD_LIMIT: the driver's limit, less what others in the cgroup use, is the ceiling)"
		    : own > room ? " (the driver's limit binds: gpuguard refuses first)"
		                 : " (GPUGUARD_LIMIT binds)");
	}
}

int gg_footprint_driver_limit(int dev, struct gg_footprint_dmem *out)
{
	memset(out, 0, sizeof(*out));
	if (dev < 0 || dev >= GG_MAX_DEVICES)
		return 0;
	struct fp_dev *d = &fp[dev];
	/* acquire: pairs with dmem_update's release */
	if (!atomic_load_explicit(&d->dmem_found, memory_order_acquire))
		return 0;
	/* relaxed: a snapshot of figures */
	out->hard = atomic_load_explicit(&d->dmem_hard, memory_order_relaxed);
	out->soft = atomic_load_explicit(&d->dmem_soft, memory_order_relaxed);
	out->used = atomic_load_explicit(&d->dmem_used, memory_order_relaxed);
	out->own = atomic_load_explicit(&d->dmem_own, memory_order_relaxed);
	out->ceiling = atomic_load_explicit(&d->dmem_ceiling, memory_order_relaxed);
	out->binds = out->ceiling < out->own;
	return 1;
}

/* inflight: bytes of this thread's grant that the books hold and the
 * driver does not yet (gg_footprint_near_slow), left out of the books. */
static void reconcile_locked(int dev, int how, uint64_t inflight)
{
	int after_ctx = how & GG_FP_AFTER_CTX;
	struct fp_dev *d = &fp[dev];
	gg_nvmlProcessInfo_t p[NV_PROCS];
	unsigned n = 0;
	uint64_t drv;
	/* The books are read on both sides of the driver's figure, and the
	 * larger kept. Read after it alone, a free that completed in between
	 * (the driver's free, then the release of its charge) was gone from
	 * the books but still in the driver's figure, and read as that much
	 * runtime, held until the next refusal: a 64 MiB block taken for
	 * runtime, with the headroom on top, refused a churning thread's
	 * request that fitted (t_postmortem's multithreaded refusal, a fourth
	 * dump, under qemu). An allocation completing in between is in the
	 * second reading. acquire fences: the first reading is done before
	 * the driver's figure is read, and the second after it. */
	uint64_t books_before = books_of(dev, atomic_load_explicit(&d->charged, memory_order_relaxed));
	atomic_thread_fence(memory_order_acquire);
	int rc = driver_figure(dev, &drv, p, &n);
	if (rc != 0 && after_ctx && nv.ok && n) {
		ctx_diff(dev, p, n);
		rc = driver_figure(dev, &drv, p, &n);
	}
	if (rc != 0)
		return;
	atomic_thread_fence(memory_order_acquire);
	uint64_t charged = atomic_load_explicit(&d->charged, memory_order_relaxed);
	uint64_t books = books_of(dev, charged);
	if (books_before > books)
		books = books_before;
	books = books > inflight ? books - inflight : 0;
	uint64_t foreseen = atomic_load_explicit(&d->foreseen, memory_order_relaxed);
	if (foreseen && drv >= books + foreseen) {
		/* the driver shows them now: nothing more to hold apart */
		foreseen = 0;
		atomic_store_explicit(&d->foreseen, 0, memory_order_relaxed);
	}
	uint64_t target = gg_footprint_target(drv, books, foreseen, gg_opt.runtime_headroom);
	/* Down only at a refusal: elsewhere the books may hold grants the
	 * driver has not made yet (seen under TSan's timing on the shared
	 * card: a tick's reading 62 MiB low gave that much room to the fill,
	 * which then passed the ceiling on the card by as much). */
	if (!(how & GG_FP_MAY_LOWER) && target < charged)
		target = charged;
	/* relaxed: figures for readers (dumps, metrics), written under lock */
	atomic_store_explicit(&d->measured, drv > books ? drv - books : 0, memory_order_relaxed);
	atomic_store_explicit(&d->driver, drv, memory_order_relaxed);
	atomic_store_explicit(&d->last_ms, gg_now_ms(), memory_order_relaxed);
	atomic_fetch_add_explicit(&d->reconciles, 1, memory_order_relaxed);
	set_charge(dev, target);
}

/* Lets go of dev's lock, then does the reconcile that a thread asked for
 * while it was held: the holder's reading of the driver's figure may
 * predate that thread's growth (a library it just loaded), which would
 * otherwise wait for the next tick or refusal. */
static void unlock_catch_up(int dev)
{
	struct fp_dev *d = &fp[dev];
	for (;;) {
		pthread_mutex_unlock(&d->lock);
		/* seq_cst, against the asker's seq_cst store of `again` then its
		 * trylock (store then load on each side, with glibc's unlock
		 * and trylock atomic RMWs on the lock word): either the asker
		 * finds the lock free and reconciles itself, or we see its
		 * flag here. Not both missed. */
		if (!atomic_load_explicit(&d->again, memory_order_seq_cst) || pthread_mutex_trylock(&d->lock) != 0)
			return; /* none asked, or the new holder answers it when it lets go */
		/* relaxed: under the lock, before the reading that answers it */
		atomic_store_explicit(&d->again, 0, memory_order_relaxed);
		reconcile_locked(dev, 0, 0);
	}
}

static void reconcile(int dev, int how, uint64_t inflight)
{
	struct fp_dev *d = &fp[dev];
	/* One at a time: a thread that finds the lock held leaves its
	 * reconcile to the holder, which reads again when it lets go. */
	if (pthread_mutex_trylock(&d->lock) != 0) {
		/* seq_cst: the store of the pair in unlock_catch_up */
		atomic_store_explicit(&d->again, 1, memory_order_seq_cst);
		if (pthread_mutex_trylock(&d->lock) != 0)
			return; /* the holder saw the flag, or its catch-up will */
	}
	/* relaxed: under the lock, before the reading below */
	atomic_store_explicit(&d->again, 0, memory_order_relaxed);
	reconcile_locked(dev, how, inflight);
	unlock_catch_up(dev);
}

void gg_footprint_reconcile(int dev, int how)
{
	if (!gg_opt.runtime || dev < 0 || dev >= GG_MAX_DEVICES)
		return;
	reconcile(dev, how, 0);
}

int gg_footprint_near_slow(int dev, uint64_t charge)
{
	if (!gg_opt.runtime || dev < 0 || dev >= GG_MAX_DEVICES)
		return 0;
	/* Read fresh at most every GG_FOOTPRINT_NEAR_MS (relaxed: a rate
	 * limit): growth in the last such interval is the headroom's. */
	uint64_t now = gg_now_ms();
	if (now - atomic_load_explicit(&fp[dev].last_ms, memory_order_relaxed) < GG_FOOTPRINT_NEAR_MS ||
	    now - atomic_load_explicit(&fp[dev].near_ms, memory_order_relaxed) < GG_FOOTPRINT_NEAR_MS)
		return 0;
	/* relaxed: the rate limit's own clock, also where NVML cannot say
	 * (no per-process figure, our PID not found), so that no request
	 * near the ceiling pays for a process listing more than once a ms */
	atomic_store_explicit(&fp[dev].near_ms, now, memory_order_relaxed);
	/* Read with the grant held (it is left out of the books: the driver
	 * has not made it yet). Giving it back first would let another
	 * thread take the room meanwhile, and refuse a request that fits. */
	reconcile(dev, 0, charge);
	/* relaxed: written under the lock by the reading above (or one after
	 * it); a figure. */
	if (atomic_load_explicit(&fp[dev].over, memory_order_relaxed) == 0)
		return 0;
	/* The runtime found did not all fit beside the grant: the driver
	 * already holds it, the request not yet. The grant goes back, the
	 * runtime takes the room, and the request asks again, as any other. */
	gg_ceiling_release(dev, charge);
	reconcile(dev, 0, 0);
	return gg_ceiling_try_reserve(dev, charge) == 0 ? 0 : -1;
}

void gg_footprint_tick_slow(int dev, uint64_t charge)
{
	if (GG_UNLIKELY(gg_footprint_countdown < GG_FOOTPRINT_FIRST / 2)) {
		/* This thread's first grant (the countdown started at
		 * GG_FOOTPRINT_FIRST): counted among the threads that could
		 * free, then ticking on as if it had started at
		 * GG_FOOTPRINT_STEP, as before. */
		gg_ceiling_note_thread();
		gg_footprint_countdown =
		    (int64_t)((uint64_t)gg_footprint_countdown + (uint64_t)(GG_FOOTPRINT_STEP - GG_FOOTPRINT_FIRST));
		if (gg_footprint_countdown >= 0)
			return;
	}
	gg_footprint_countdown = GG_FOOTPRINT_STEP;
	if (dev < 0 || dev >= GG_MAX_DEVICES)
		return;
	/* Every GG_FOOTPRINT_STEP bytes a thread allocates, at most every
	 * GG_FOOTPRINT_MIN_MS per device: a bound on NVML's cost whatever the
	 * allocation rate. relaxed: a rate limit. */
	uint64_t now = gg_now_ms();
	if (now - atomic_load_explicit(&fp[dev].last_ms, memory_order_relaxed) >= GG_FOOTPRINT_MIN_MS)
		gg_footprint_reconcile(dev, 0);
	/* Last, nearest the driver call: our PID still to be told apart. */
	if (GG_UNLIKELY(atomic_load_explicit(&cand_pending, memory_order_relaxed)))
		probe_begin(dev, charge);
}

_Atomic uint64_t gg_footprint_pending;

void gg_footprint_first_use(int dev)
{
	if (dev < 0 || dev >= GG_MAX_DEVICES)
		return;
	uint64_t bit = 1ull << dev;
	/* relaxed: a hint; a lost race costs one reconcile more or leaves the
	 * growth to the headroom and the next reconcile */
	if (!(atomic_fetch_and_explicit(&gg_footprint_pending, ~bit, memory_order_relaxed) & bit))
		return;
	gg_footprint_reconcile(dev, 0);
}

/* ---- pre-charge: cuCtxSetLimit ------------------------------------------ */

uint64_t gg_footprint_local_bytes(uint64_t stack, uint64_t threads_per_sm, uint64_t sms)
{
	/* The driver's local memory: the per-thread stack rounded up to its
	 * granularity, for every thread that can be resident at once
	 * (REAL-CUDA.md §7). Saturating: a silly value refuses, never wraps. */
	uint64_t r = (stack + GG_FOOTPRINT_STACK_ALIGN - 1) / GG_FOOTPRINT_STACK_ALIGN * GG_FOOTPRINT_STACK_ALIGN;
	unsigned __int128 v = (unsigned __int128)r * threads_per_sm * sms;
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

uint64_t gg_footprint_limit_begin(int dev, int limit, uint64_t value, uint64_t current, uint64_t threads_per_sm,
                                  uint64_t sms, struct gg_footprint_limit *out)
{
	*out = (struct gg_footprint_limit){.dev = dev, .limit = limit};
	if (!gg_opt.runtime || dev < 0 || dev >= GG_MAX_DEVICES)
		return 0;
	struct fp_dev *d = &fp[dev];
	pthread_mutex_lock(&d->lock);
	uint64_t grow = 0;
	if (limit == GG_FP_STACK) {
		/* Local memory never shrinks: only growth past what it is now
		 * (the driver's current stack, or more if we saw more). */
		uint64_t now = gg_footprint_local_bytes(current, threads_per_sm, sms);
		uint64_t seen = atomic_load_explicit(&d->local, memory_order_relaxed);
		if (seen > now)
			now = seen;
		uint64_t next = gg_footprint_local_bytes(value, threads_per_sm, sms);
		grow = next > now ? next - now : 0;
		out->local = next > now ? next : now;
	} else if (limit == GG_FP_FIFO || limit == GG_FP_HEAP) {
		grow = value > current ? value - current : 0;
	}
	if (!grow)
		unlock_catch_up(dev);
	out->grow = grow;
	return grow;
}

void gg_footprint_limit_end(struct gg_footprint_limit *l, int ok, int charged)
{
	if (!l->grow)
		return;
	struct fp_dev *d = &fp[l->dev];
	if (charged && !ok)
		gg_ceiling_release(l->dev, l->grow);
	if (charged && ok) {
		/* The admitted growth becomes part of the runtime charge. */
		uint64_t cur = atomic_load_explicit(&d->charged, memory_order_relaxed);
		atomic_store_explicit(&d->charged, cur + l->grow, memory_order_relaxed); /* under lock */
		publish(l->dev, cur, cur + l->grow);
		if (l->limit == GG_FP_STACK)
			atomic_store_explicit(&d->local, l->local, memory_order_relaxed);
		else
			atomic_fetch_add_explicit(&d->foreseen, l->grow, memory_order_relaxed);
		/* What the driver really took, at once (a rare call). */
		reconcile_locked(l->dev, 0, 0);
	}
	unlock_catch_up(l->dev);
}

/* ---- readers ------------------------------------------------------------ */

void gg_footprint_read(int dev, struct gg_footprint_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (dev < 0 || dev >= GG_MAX_DEVICES)
		return;
	struct fp_dev *d = &fp[dev];
	/* relaxed: a snapshot of figures */
	out->charged = atomic_load_explicit(&d->charged, memory_order_relaxed);
	out->measured = atomic_load_explicit(&d->measured, memory_order_relaxed);
	out->driver = atomic_load_explicit(&d->driver, memory_order_relaxed);
	out->foreseen = atomic_load_explicit(&d->foreseen, memory_order_relaxed);
	out->reconciles = atomic_load_explicit(&d->reconciles, memory_order_relaxed);
	out->over = atomic_load_explicit(&d->over, memory_order_relaxed);
}

int gg_footprint_refusal_is_runtime(int dev, uint64_t request)
{
	if (dev < 0 || dev >= GG_MAX_DEVICES)
		return 0;
	struct gg_budget *b = gg_ceiling_budget_peek(dev);
	uint64_t charged = atomic_load_explicit(&fp[dev].charged, memory_order_relaxed);
	uint64_t lim = atomic_load_explicit(b->limit, memory_order_relaxed);
	uint64_t used =
	    b->claim ? gpuguard_region_used(b->region, b->entry) : atomic_load_explicit(b->used, memory_order_relaxed);
	uint64_t books = used > charged ? used - charged : 0;
	/* Refused because of the runtime: the books alone would have fit. */
	return charged && books + request <= lim;
}

void gg_footprint_reset(void)
{
	/* Fork child: the parent's context and figures are not the child's. */
	for (int i = 0; i < GG_MAX_DEVICES; i++) {
		struct fp_dev *d = &fp[i];
		atomic_store_explicit(&d->charged, 0, memory_order_relaxed);
		atomic_store_explicit(&d->measured, 0, memory_order_relaxed);
		atomic_store_explicit(&d->driver, 0, memory_order_relaxed);
		atomic_store_explicit(&d->foreseen, 0, memory_order_relaxed);
		atomic_store_explicit(&d->local, 0, memory_order_relaxed);
		atomic_store_explicit(&d->last_ms, 0, memory_order_relaxed);
		atomic_store_explicit(&d->near_ms, 0, memory_order_relaxed);
		atomic_store_explicit(&d->again, 0, memory_order_relaxed);
		pthread_mutex_init(&d->lock, NULL);
		d->card_checked = 0;
		d->dmem_state = 0; /* the child asks again: its own figure is not its parent's */
		d->dmem_levels = 0;
	}
	atomic_store_explicit(&my_pid, 0, memory_order_relaxed);
	pthread_mutex_init(&diff_lock, NULL);
	before_dev = -1;
	cand_done();
	gg_footprint_probe = 0;
}
