/* gpuguard: allocation dumps (include/gpuguard/dump.h): the triggers and the
 * writer thread. Triggers only post a request; a writer thread, started on
 * first device activity, writes the file: never from a signal handler,
 * never holding anything a hook takes. Each file is written under a hidden
 * temporary name, fsync'ed and renamed, so a reader sees a whole dump or
 * none; the fatal paths (abort, SIGSEGV, SIGBUS, _exit) wait for a dump in
 * flight, and a temporary file left by a process that died anyway (kill -9)
 * is renamed to a visible .partial.jsonl when dumps are next set up in its
 * directory (docs/dumps.md). The records are dump_records.c's, the JSON
 * writer dump_json.c's, the host probes dump_host.c's. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dump.h"
#include "base.h"
#include "ceiling.h"
#include "dump_host.h"
#include "dump_json.h"
#include "dump_records.h"
#include "footprint.h"
#include "history.h"
#include "log.h"
#include "options.h"
#include "shared.h"
#include "signal.h"
#include "stack.h"
#include "table.h"
#include "vmm.h"

/* ---- state shared by triggers, the signal handler and the writer ---- */

static gg_meminfo_fn meminfo_fn[2];

void gg_dump_set_meminfo(int runtime, gg_meminfo_fn fn)
{
	if (runtime == 0 || runtime == 1)
		meminfo_fn[runtime] = fn;
}

_Atomic int gg_dump_armed;         /* 0 no, 1 arming, 2 armed (dump.h) */
static _Atomic int writer_running; /* the writer thread exists (exit waits for it) */
static _Atomic int handler_installed;
static _Atomic uint32_t wake_word; /* futex the writer sleeps on */
/* Bumped (and futex-woken) each time the writer has copied the live table
 * into a dump: a refusing thread waits for it, so the dump shows memory as
 * it was at the refusal, before the application frees its caches and
 * retries (PyTorch does exactly that on out-of-memory). */
static _Atomic uint32_t snap_word;
static _Atomic uint64_t signals_seen, signals_done;
/* The one queued failure dump: 0 free, 1 being filled, 2 queued, 3 writing. */
static _Atomic int slot_state;
static struct gg_dump_req slot_req;
static enum gg_dump_trigger slot_trigger;
static _Atomic uint64_t n_started, n_written, n_suppressed, n_errors;
static _Atomic uint64_t last_ms;
static _Atomic int64_t pinned_bytes, pinned_count;
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER; /* dump writers only */
/* A dump is being written (write_req), for the fatal paths, which may not
 * look at the mutex from a signal handler. */
static _Atomic int writing;
static _Atomic pid_t writer_tid, armed_pid;
/* GPUGUARD_TEST_DUMP_DELAY_MS (tests only): the writer sleeps this long
 * after the cut, so that tests can kill or crash the process mid-write. */
static unsigned test_delay_ms;
static char hostname[256];

static int write_req(enum gg_dump_trigger trig, const struct gg_dump_req *req, char *path_out, size_t path_len);

static void refusal_body(int dev, enum gpuguard_refusal why);

static void wake_writer(void)
{
	/* release: the queued request (or signal count) is visible to the
	 * writer that sees the new word. */
	atomic_fetch_add_explicit(&wake_word, 1, memory_order_release);
	gg_futex_wake(&wake_word, 1, 1);
}

/* Rate limit: GPUGUARD_DUMP_MAX per process, GPUGUARD_DUMP_INTERVAL apart.
 * 1 = go ahead (counted as started), 0 = suppressed (counted). */
static int rate_ok(void)
{
	uint64_t now = gg_mono_ms() + 1; /* never 0: 0 means "no dump yet" */
	uint64_t last = atomic_load_explicit(&last_ms, memory_order_relaxed);
	if (atomic_load_explicit(&n_started, memory_order_relaxed) >= gg_opt.dump_max ||
	    (last && now - last < gg_opt.dump_interval_ms) ||
	    /* relaxed: the CAS only elects one dump per interval */
	    !atomic_compare_exchange_strong_explicit(&last_ms, &last, now, memory_order_relaxed,
	                                             memory_order_relaxed) ||
	    atomic_fetch_add_explicit(&n_started, 1, memory_order_relaxed) >= gg_opt.dump_max) {
		atomic_fetch_add_explicit(&n_suppressed, 1, memory_order_relaxed);
		return 0;
	}
	return 1;
}

void gg_dump_noted_request(enum gpuguard_api *api, uint64_t *size)
{
	*api = gg_self.noted_api;
	*size = gg_self.noted_size;
}

void gg_dump_pinned(int64_t bytes, int64_t count)
{
	atomic_fetch_add_explicit(&pinned_bytes, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&pinned_count, count, memory_order_relaxed);
}

/* Kubernetes shows the file terminationMessagePath names (default
 * /dev/termination-log) as the container's last state: the first refusal
 * of this process says there why memory ran out, in one line. Only an
 * existing regular file we may write is appended to (never created, never
 * a symlink, a FIFO or a device), without blocking. */
static void termination_note(int dev, enum gpuguard_refusal why)
{
	static _Atomic int written;
	const char *path = gg_opt.termination_log;
	/* relaxed: a once-per-process flag publishing nothing; racing
	 * refusals let exactly one of them write. */
	if (!path || !*path || atomic_load_explicit(&written, memory_order_relaxed) ||
	    atomic_exchange_explicit(&written, 1, memory_order_relaxed))
		return;
	int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return;
	}
	/* the budget's figures (the pod's sum of its slots in pod scope, not
	 * the file's snapshot) */
	struct gpuguard_device_stats ds;
	gg_ceiling_read(dev, &ds);
	uint64_t lim = ds.limit, used = ds.used;
	char rq[32], us[32], li[32], line[512];
	gg_log_bytes(rq, sizeof rq, gg_self.noted_size);
	gg_log_bytes(us, sizeof us, used);
	int n;
	struct gg_footprint_dmem dl;
	if (why == GPUGUARD_REFUSED_DRIVER)
		n = snprintf(line, sizeof line,
		             "gpuguard: %s of %s on device %d failed: the driver is out of memory (%s charged); "
		             "pid %d; dumps in %s\n",
		             gg_dump_api_name(gg_self.noted_api), rq, dev, us, (int)getpid(), gg_opt.dump_dir);
	else if (why == GPUGUARD_REFUSED_CONFIG)
		n = snprintf(line, sizeof line,
		             "gpuguard: %s of %s on device %d refused: GPUGUARD_LIMIT is not valid, every allocation "
		             "is refused; pid %d\n",
		             gg_dump_api_name(gg_self.noted_api), rq, dev, (int)getpid());
	else if (gg_footprint_driver_limit(dev, &dl) && dl.binds) {
		char hb[32], ub[32];
		n = snprintf(
		    line, sizeof line,
		    "gpuguard: %s of %s on device %d refused at the ceiling set by the driver's limit: %s of "
		    "%s%s used; the cgroup's hard limit (MPS memory partitioning) is %s, of which its processes "
		    "used %s; refused before the driver would%s; pid %d; dumps in %s\n",
		    gg_dump_api_name(gg_self.noted_api), rq, dev, us, gg_log_bytes(li, sizeof li, lim),
		    ds.pod ? " (the pod's budget)" : "", gg_log_bytes(hb, sizeof hb, dl.hard),
		    gg_log_bytes(ub, sizeof ub, dl.used), gg_opt.wait_ms ? " after waiting" : "", (int)getpid(),
		    gg_opt.dump_dir);
	} else if (gg_footprint_refusal_is_runtime(dev, gg_self.noted_size)) {
		struct gg_footprint_stats fs;
		char rt[32];
		gg_footprint_read(dev, &fs);
		n = snprintf(line, sizeof line,
		             "gpuguard: %s of %s on device %d refused at the ceiling because of the runtime: %s of "
		             "%s%s used, of which %s is what the driver holds beyond the allocations (context, "
		             "modules, local memory)%s; pid %d; dumps in %s\n",
		             gg_dump_api_name(gg_self.noted_api), rq, dev, us,
		             lim >= GG_LIMIT_UNRESOLVED ? "?" : gg_log_bytes(li, sizeof li, lim),
		             ds.pod ? " (the pod's budget)" : "", gg_log_bytes(rt, sizeof rt, fs.charged),
		             gg_opt.wait_ms ? " after waiting" : "", (int)getpid(), gg_opt.dump_dir);
	} else
		n = snprintf(line, sizeof line,
		             "gpuguard: %s of %s on device %d refused at the ceiling: %s of %s%s used%s; pid %d; "
		             "dumps in %s\n",
		             gg_dump_api_name(gg_self.noted_api), rq, dev, us,
		             lim >= GG_LIMIT_UNRESOLVED ? "?" : gg_log_bytes(li, sizeof li, lim),
		             ds.pod ? " (the pod's budget)" : "", gg_opt.wait_ms ? " after waiting" : "", (int)getpid(),
		             gg_opt.dump_dir);
	if (n > 0) {
		ssize_t w = write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
		(void)w; /* nowhere to report a failed report */
	}
	close(fd);
}

void gg_dump_on_refusal(int dev, enum gpuguard_refusal why)
{
	int saved_errno = errno; /* the application sees the refusal code, nothing else */
	gg_shared_note_refusal();
	termination_note(dev, why);
	refusal_body(dev, why);
	errno = saved_errno;
}

static void refusal_body(int dev, enum gpuguard_refusal why)
{
	uint32_t st = gg_stack_capture();
	gg_history_add(GG_HIST_REFUSE, dev, gg_self.noted_api, 0, gg_self.noted_size, st);
	if (why == GPUGUARD_REFUSED_CONFIG || !rate_ok())
		return;
	gg_dump_arm();
	int expect = 0;
	/* acquire on success: we own the slot; the writer released it after use. */
	if (!atomic_compare_exchange_strong_explicit(&slot_state, &expect, 1, memory_order_acquire,
	                                             memory_order_relaxed)) {
		atomic_fetch_add_explicit(&n_suppressed, 1, memory_order_relaxed);
		return; /* one is queued or being written: it tells the same story */
	}
	slot_req = (struct gg_dump_req){
	    1, dev, gg_self.noted_api, gg_self.noted_size, gg_gettid(), st, why == GPUGUARD_REFUSED_DRIVER, 0, 0, 0, 0};
	/* The failing thread has the context the writer lacks: ask the driver
	 * here, once per dump (rate-limited above), with our hooks bypassed. */
	gg_meminfo_fn mi = meminfo_fn[gpuguard_api_runtime(gg_self.noted_api) == GPUGUARD_RUNTIME_HIP ? 1 : 0];
	if (mi && mi(&slot_req.driver_free, &slot_req.driver_total) == 0)
		slot_req.have_meminfo = 1;
	slot_trigger = why == GPUGUARD_REFUSED_DRIVER ? GG_DUMP_DRIVER_OOM : GG_DUMP_CEILING;
	/* The dump's moment: after this refusal's own event, before anything
	 * the application does about it (issue 25, finding 7). Other threads'
	 * events from here on are undone from the copy. */
	slot_req.cut = gg_history_head();
	/* acquire: pairs with the writer's release bump below; read before we
	 * post, so the bump we wait for is the one for this dump or later. */
	uint32_t snap = atomic_load_explicit(&snap_word, memory_order_acquire);
	/* release: the writer that sees 2 sees the request filled in. */
	atomic_store_explicit(&slot_state, 2, memory_order_release);
	wake_writer();
	/* Hold this thread (the one the application will free and retry on)
	 * until the live table is copied, at most 2 s: the writer needs
	 * nothing this thread holds (no lock of ours, no driver call), so the
	 * bound is only a guard against a stalled writer. */
	uint64_t deadline = gg_mono_ms() + 2000;
	while (atomic_load_explicit(&snap_word, memory_order_acquire) == snap) {
		uint64_t now = gg_mono_ms();
		if (now >= deadline)
			break;
		struct timespec ts = {(time_t)((deadline - now) / 1000), (long)((deadline - now) % 1000) * 1000000};
		gg_futex_wait(&snap_word, snap, &ts, 1);
	}
}

/* The live table is in the dump (or the dump failed before it): let a
 * refusing thread that waits for it go on. */
static void snapshot_done(void)
{
	/* release: orders our reads of the table before the waiter's return
	 * to an application that will then free. */
	atomic_fetch_add_explicit(&snap_word, 1, memory_order_release);
	gg_futex_wake(&snap_word, INT32_MAX, 1);
}

/* ---- the signal handler: async-signal-safe, wakes the writer only ---- */

static void on_signal(int sig, siginfo_t *info, void *ctx)
{
	(void)sig;
	(void)info;
	(void)ctx;
	int saved = errno;
	atomic_fetch_add_explicit(&signals_seen, 1, memory_order_relaxed);
	wake_writer();
	errno = saved;
}

/* The dump signal is ours only while nobody else has claimed it (issue 10,
 * finding 2). A handler the application installed, or SIG_IGN it inherited
 * or chose, means the signal is the application's: we install nothing, so
 * its handler keeps exactly its own flags, mask and stack, and its own
 * traffic on that signal never turns into dumps. Where the disposition is
 * the default (terminate), ours replaces a kill; SA_RESTART then keeps a
 * dump request from interrupting the application's system calls, which
 * never expected the signal. An application that installs its own handler
 * later simply replaces ours. */
static void install_handler(void)
{
	int sig = gg_opt.dump_signal;
	if (sig <= 0 || atomic_exchange_explicit(&handler_installed, 1, memory_order_relaxed))
		return;
	struct sigaction old;
	if (gg_real_sigaction(sig, NULL, &old) != 0)
		return;
	int theirs = (old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != NULL : old.sa_handler != SIG_DFL;
	if (theirs) {
		gg_log(GG_LOG_WARN,
		       "signal %d is the application's own: no dumps on it (GPUGUARD_DUMP_SIGNAL names another, "
		       "e.g. SIGRTMIN+3)",
		       sig);
		return;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (gg_real_sigaction(sig, &sa, NULL) != 0)
		gg_log(GG_LOG_WARN, "could not install the dump signal handler for signal %d", sig);
}

/* ---- the writer thread ---- */

static void write_queued(void)
{
	/* acquire: pairs with the trigger's release store of 2. */
	int two = 2;
	if (atomic_compare_exchange_strong_explicit(&slot_state, &two, 3, memory_order_acquire, memory_order_relaxed)) {
		struct gg_dump_req r = slot_req;
		enum gg_dump_trigger t = slot_trigger;
		write_req(t, &r, NULL, 0);
		/* release: the next trigger that takes the slot sees us done with it. */
		atomic_store_explicit(&slot_state, 0, memory_order_release);
	}
}

static void sweep_partials(void);
static void sanitize(char *s);

static void *writer_main(void *arg)
{
	(void)arg;
	/* The writer must not take the dump signal itself, nor any other the
	 * application directs at "some thread": block them all here. */
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	gg_hook_active = 1; /* our own CUDA calls (none today) pass through */
	/* relaxed: read by the fatal paths only to skip waiting for themselves */
	atomic_store_explicit(&writer_tid, (pid_t)gg_gettid(), memory_order_relaxed);
	sweep_partials();
	for (;;) {
		uint32_t w = atomic_load_explicit(&wake_word, memory_order_acquire);
		write_queued();
		uint64_t seen = atomic_load_explicit(&signals_seen, memory_order_relaxed);
		if (seen != atomic_load_explicit(&signals_done, memory_order_relaxed)) {
			/* A storm of signals is one request: one dump, rate-limited.
			 * Marked as writing first (release: before the request is
			 * seen taken), so a fatal path never finds neither. */
			atomic_store_explicit(&writing, 1, memory_order_release);
			atomic_store_explicit(&signals_done, seen, memory_order_relaxed);
			if (rate_ok())
				write_req(GG_DUMP_SIGNAL, NULL, NULL, 0);
			else
				atomic_store_explicit(&writing, 0, memory_order_release); /* release: as in write_req */
			continue;
		}
		/* acquire: pairs with the trigger's release store of 2 (a request
		 * posted after write_queued looked); go round instead of sleeping. */
		if (atomic_load_explicit(&slot_state, memory_order_acquire) == 2)
			continue;
		gg_futex_wait(&wake_word, w, NULL, 1);
	}
	return NULL;
}

/* ---- the fatal paths: a dump in flight is finished first ---- */

/* A dump is queued or being written (a refusal's slot posted or taken, a
 * signal's request not yet taken, the writer inside write_req). */
static int in_flight(void)
{
	/* acquire: pairs with the writer's release stores that end a dump,
	 * so that "done" is seen with the file renamed. */
	int s = atomic_load_explicit(&slot_state, memory_order_acquire);
	return s >= 2 || atomic_load_explicit(&writing, memory_order_acquire) ||
	       atomic_load_explicit(&signals_seen, memory_order_relaxed) !=
	           atomic_load_explicit(&signals_done, memory_order_relaxed);
}

/* Called by signal.c on SIGABRT, SIGSEGV, SIGBUS and _exit, before the
 * process goes: waits, at most 5 s (the exit bound), for the dump in
 * flight. Async-signal-safe: atomics, getpid, gettid and nanosleep only.
 * Never on the writer itself (it would wait for its own dump), nor in a
 * process that has no writer: a fork or vfork child, whose memory says
 * what its parent's writer is doing. A writer stuck on something the dying
 * thread holds (the loader's lock in dladdr) costs the bound, no more. */
static void finish_in_flight(int sig)
{
	(void)sig;
	int saved = errno;
	/* relaxed: all three are this process's own, set before arming ended */
	if (atomic_load_explicit(&writer_running, memory_order_relaxed) &&
	    atomic_load_explicit(&armed_pid, memory_order_relaxed) == getpid() &&
	    atomic_load_explicit(&writer_tid, memory_order_relaxed) != (pid_t)gg_gettid())
		for (int i = 0; i < 5000 && in_flight(); i++)
			nanosleep(&(struct timespec){0, 1000000}, NULL);
	errno = saved;
}

/* ---- stale temporary files ---- */

/* When the process with this pid started, in ms since the epoch, or 0 when
 * there is none (or it cannot be told). */
static uint64_t started_ms(long pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* field 22, starttime in clock ticks since boot, counted after the
	 * command's closing parenthesis (the command may hold spaces) */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	unsigned long long ticks = 0;
	int field = 2;
	for (; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (field != 22 || sscanf(p, "%llu", &ticks) != 1)
		return 0;
	unsigned long long btime = 0;
	FILE *f = fopen("/proc/stat", "re");
	if (!f)
		return 0;
	char line[256];
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "btime %llu", &btime) == 1)
			break;
	fclose(f);
	long hz = sysconf(_SC_CLK_TCK);
	if (!btime || hz <= 0)
		return 0;
	return btime * 1000 + ticks * 1000 / (unsigned long long)hz;
}

/* A hidden temporary file is left only by a writer that died before its
 * rename (kill -9, the OOM killer, a fatal path's bound run out). When
 * dumps are set up (the writer's start), each one of this host whose
 * process is gone is renamed to a visible gpuguard-...-N.partial.jsonl,
 * which `gpuguard report` reads up to its last whole record with a
 * warning; nothing else removes it, as nothing removes a whole dump. Gone
 * means: no process with that pid, or one that started after the file's
 * dump was begun (the pid was reused, as in a restarted container). A
 * live process's file, or one of another host (a shared volume), is left
 * alone. */
static void sweep_partials(void)
{
	const char *dir = gg_opt.dump_dir;
	DIR *d = dir ? opendir(dir) : NULL;
	if (!d)
		return;
	char hn[256] = "", host[64];
	if (gethostname(hn, sizeof hn - 1) != 0)
		strcpy(hn, "unknown");
	snprintf(host, sizeof host, "%s", hn); /* as write_req names files */
	sanitize(host);
	size_t hl = strlen(host);
	struct dirent *e;
	while ((e = readdir(d))) {
		/* .gpuguard-<host>-<pid>-<unix_ms>-<n>.jsonl.tmp */
		const char *nm = e->d_name;
		size_t l = strlen(nm);
		if (strncmp(nm, ".gpuguard-", 10) || l < 10 + hl + 11 || strcmp(nm + l - 10, ".jsonl.tmp") ||
		    strncmp(nm + 10, host, hl) || nm[10 + hl] != '-')
			continue;
		long pid;
		unsigned long long ms, seq;
		int used = 0;
		if (sscanf(nm + 11 + hl, "%ld-%llu-%llu.jsonl.tmp%n", &pid, &ms, &seq, &used) != 3 ||
		    (size_t)used != l - 11 - hl || pid <= 0)
			continue;
		uint64_t st = started_ms(pid);
		/* 1 s of slack: btime and the tick count are coarse */
		if (st && st <= ms + 1000)
			continue; /* that process may still be writing it */
		char from[4096], to[4096];
		int n1 = snprintf(from, sizeof from, "%s/%s", dir, nm);
		int n2 = snprintf(to, sizeof to, "%s/%.*s.partial.jsonl", dir, (int)(l - 11), nm + 1);
		if (n1 <= 0 || n2 <= 0 || (size_t)n1 >= sizeof from || (size_t)n2 >= sizeof to)
			continue;
		struct stat sb;
		/* never a link or anything but a file, never over a name in use */
		if (lstat(from, &sb) || !S_ISREG(sb.st_mode) || !lstat(to, &sb))
			continue;
		if (rename(from, to) == 0)
			gg_log(GG_LOG_WARN, "a dump cut off by its process's death (pid %ld) is now %s", pid, to);
	}
	closedir(d);
}

void gg_dump_arm_thread(void)
{
	/* acquire: as gg_dump_arm's was (dump.h) */
	if (atomic_load_explicit(&gg_dump_armed, memory_order_acquire) == 2)
		gg_self.dump_armed = 1;
	else
		gg_dump_arm_slow();
}

void gg_dump_arm_slow(void)
{
	int expect = 0;
	/* acq_rel: exactly one thread wins the right to start the writer. */
	if (!atomic_compare_exchange_strong_explicit(&gg_dump_armed, &expect, 1, memory_order_acq_rel,
	                                             memory_order_acquire))
		return; /* another thread arms; a trigger meanwhile just waits queued */
	gg_dump_read_test_knobs();
	if (gg_opt.dump_max == 0) {
		/* No dumps at all: no thread, and the signal keeps its meaning. */
		atomic_store_explicit(&gg_dump_armed, 2, memory_order_release);
		return;
	}
	const char *delay = secure_getenv("GPUGUARD_TEST_DUMP_DELAY_MS");
	test_delay_ms = delay ? (unsigned)strtoul(delay, NULL, 10) : 0;
	/* relaxed: compared by the fatal paths of this process only */
	atomic_store_explicit(&armed_pid, getpid(), memory_order_relaxed);
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 256 * 1024);
	if (pthread_create(&t, &a, writer_main, NULL) == 0)
		atomic_store_explicit(&writer_running, 1, memory_order_relaxed);
	else
		gg_log(GG_LOG_WARN, "could not start the dump writer thread; only exit dumps can be written");
	pthread_attr_destroy(&a);
	install_handler();
	gg_sig_watch_fatal(finish_in_flight);
	/* release: whoever sees 2 sees the handler installed. */
	atomic_store_explicit(&gg_dump_armed, 2, memory_order_release);
}

void gg_dump_after_fork_child(void)
{
	/* No writer thread exists here; the handler (inherited) stays installed. */
	atomic_store_explicit(&gg_dump_armed, 0, memory_order_relaxed);
	gg_self.dump_armed = 0; /* this thread's note of it (dump.h) */
	atomic_store_explicit(&writer_running, 0, memory_order_relaxed);
	atomic_store_explicit(&slot_state, 0, memory_order_relaxed);
	atomic_store_explicit(&n_started, 0, memory_order_relaxed);
	atomic_store_explicit(&n_written, 0, memory_order_relaxed);
	atomic_store_explicit(&last_ms, 0, memory_order_relaxed);
	atomic_store_explicit(&signals_done, atomic_load_explicit(&signals_seen, memory_order_relaxed),
	                      memory_order_relaxed);
	atomic_store_explicit(&pinned_bytes, 0, memory_order_relaxed);
	atomic_store_explicit(&pinned_count, 0, memory_order_relaxed);
	pthread_mutex_init(&write_lock, NULL);
}

__attribute__((destructor)) static void dump_at_exit(void)
{
	/* Let a dump in flight finish (bounded): the process is exiting and the
	 * writer thread will not survive it. */
	for (int i = 0; i < 5000 && atomic_load_explicit(&writer_running, memory_order_relaxed); i++) {
		int s = atomic_load_explicit(&slot_state, memory_order_acquire);
		if (s == 0 &&
		    atomic_load_explicit(&signals_seen, memory_order_relaxed) ==
		        atomic_load_explicit(&signals_done, memory_order_relaxed) &&
		    pthread_mutex_trylock(&write_lock) == 0) {
			pthread_mutex_unlock(&write_lock);
			break;
		}
		usleep(1000);
	}
	gg_dump_read_test_knobs();
	/* Only a process that reached a GPU runtime leaves a leak report: with
	 * the option set pod-wide, `ls` and exec probes write nothing. */
	if (gg_opt.dump_at_exit && atomic_load_explicit(&gg_gpu_touched, memory_order_relaxed))
		write_req(GG_DUMP_EXIT, NULL, NULL, 0);
}

int gg_dump_host_sample_armed(struct gg_host_sample *h)
{
	gg_dump_arm(); /* reads the test knobs the host sample uses; once */
	/* acquire: pairs with the release store of 2 in gg_dump_arm, after
	 * which the test knobs are read and stay put. */
	if (atomic_load_explicit(&gg_dump_armed, memory_order_acquire) != 2)
		return -1;
	gg_dump_host_sample(h);
	return 0;
}

/* ---- the cut: what the dump says, at one moment ---- */

#define GG_CUT_MAX (256u << 10)

static void copy_rec(const struct gg_record *r, void *arg)
{
	struct gg_dump_cut *c = arg;
	if (r->flags & GG_REC_HOST)
		return; /* pinned host memory: the host record sums it apart */
	if (gg_records_push(&c->recs, &c->nrecs, &c->cap, 4096, r) != 0)
		c->exact = -1; /* out of memory: the dump lists what it holds */
}

/* Copies the books, the peaks and the live table, then the history: the
 * waiting refusing thread goes on after this. */
static void take_cut(struct gg_dump_cut *c, uint64_t seq, struct gg_hist_event *ev, uint64_t hcap)
{
	c->seq = seq;
	c->exact = 0;
	c->skew = 0;
	c->nrecs = 0;
	uint64_t live = 0;
	for (int d = 0; d < GG_MAX_DEVICES; d++) {
		gg_ceiling_read(d, &c->dev[d]);
		gg_history_peak(d, &c->peak[d], &c->peak_ms[d]);
		c->live[d] = gg_history_live(d);
		live += c->dev[d].allocs > c->dev[d].frees ? c->dev[d].allocs - c->dev[d].frees : 0;
	}
	/* Past GG_CUT_MAX live records the copy would cost more than the
	 * dump (fresh memory for 40 bytes a record, page by page): the table
	 * is then written as it is walked, as before the cut, and the refusing
	 * thread waits for that walk; the cut is not exact (the trailer says
	 * so). Below it, room for what the books say is live, mapped populated
	 * in one go. */
	c->stream = live > GG_CUT_MAX;
	uint64_t want = live + live / 8 + 4096;
	if (!c->stream && want > c->cap) {
		void *m = mmap(NULL, want * sizeof *c->recs, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (m != MAP_FAILED) {
			if (c->recs)
				munmap(c->recs, c->cap * sizeof *c->recs);
			c->recs = m;
			c->cap = want;
		}
	}
	if (gg_table && !c->stream)
		gg_table_foreach(gg_table, copy_rec, c);
	c->through = gg_history_head();
	c->ev = ev;
	c->nev = ev ? gg_history_snapshot(ev, hcap) : 0;
}

/* The events since the cut, one per key (the first), in an open-addressing
 * set mapped per dump. */
struct since {
	uint64_t key;   /* 0: empty */
	uint32_t ev;    /* index into the snapshot */
	uint8_t op;     /* the first event's */
	uint8_t listed; /* the copy holds the key */
};

static struct since *since_find(struct since *set, uint64_t mask, uint64_t key)
{
	uint64_t h = key * 0x9e3779b97f4a7c15ull;
	for (uint64_t i = h >> 20;; i++) {
		struct since *e = &set[i & mask];
		if (e->key == key || e->key == 0)
			return e;
	}
}

/* Puts the copied table back to the cut's moment, and trims the history to
 * it. An allocation's event is claimed just after its record is inserted,
 * and a free's just after its record is removed, before the driver's free
 * (account.c): a call in flight at the cut is then on one side of it in
 * both, or has its event since the cut, which undoes what the copy saw of
 * it. The one blind spot: a thread stopped between its table operation
 * and its claim for longer than the whole copy and history read. */
static void settle_cut(struct gg_dump_cut *c, uint64_t hcap)
{
	c->skew = c->through > c->seq ? c->through - c->seq : 0;
	/* Exact only when every event from the cut to the end of the copy was
	 * read: none overwritten, dropped or still being written (a thread
	 * that claimed its event may still be filling it in: read again). */
	uint64_t first = 0, n_after = 0, in_copy = 0;
	for (int tries = 0; tries < 4; tries++) {
		if (tries) {
			nanosleep(&(struct timespec){0, 1000000}, NULL);
			c->nev = gg_history_snapshot(c->ev, hcap);
		}
		first = c->nev, n_after = 0, in_copy = 0;
		for (uint64_t i = 0; i < c->nev; i++)
			if (c->ev[i].i >= c->seq) {
				if (first == c->nev)
					first = i;
				n_after++;
				in_copy += c->ev[i].i < c->through;
			}
		if (in_copy == c->skew)
			break;
	}
	int whole = c->exact == 0 && !c->stream && hcap && c->ev && in_copy == c->skew;
	c->nev = first; /* the history ends at the cut, whatever follows */
	c->exact = 0;
	if (!whole)
		return;
	if (n_after == 0) {
		c->exact = 1;
		return;
	}
	uint64_t cap = 64;
	while (cap < n_after * 2)
		cap <<= 1;
	size_t bytes = cap * sizeof(struct since);
	struct since *set = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (set == MAP_FAILED)
		return;
	for (uint64_t i = first; i < first + n_after; i++) {
		const struct gg_hist_event *e = &c->ev[i];
		if (e->op != GG_HIST_ALLOC && e->op != GG_HIST_FREE)
			continue;
		uint64_t key = gg_dump_event_key(e->p, e->api);
		struct since *s = since_find(set, cap - 1, key);
		if (s->key)
			continue; /* only the first event since the cut tells */
		s->key = key;
		s->ev = (uint32_t)i;
		s->op = e->op;
	}
	/* Records allocated since the cut go; those freed since were live. */
	size_t kept = 0;
	for (size_t i = 0; i < c->nrecs; i++) {
		struct gg_record *r = &c->recs[i];
		struct since *s = since_find(set, cap - 1, r->key);
		if (s->key && s->op == GG_HIST_ALLOC)
			continue;
		if (s->key)
			s->listed = 1;
		c->recs[kept++] = *r;
	}
	c->nrecs = kept;
	int lost = 0;
	for (uint64_t i = 0; i < cap; i++) {
		struct since *s = &set[i];
		if (!s->key || s->op != GG_HIST_FREE || s->listed)
			continue;
		/* Freed since the cut and gone from the copy: back, as its free
		 * event tells it; its age from its allocation's event when the
		 * history has it. */
		const struct gg_hist_event *e = &c->ev[s->ev];
		struct gg_record r = {.key = s->key,
		                      .size = e->s,
		                      .ids = gg_table_ids(0, e->ms),
		                      .stack = e->stack,
		                      .dev = e->dev,
		                      .api = (uint8_t)e->api};
		for (uint64_t j = first; j-- > 0;)
			if (c->ev[j].op == GG_HIST_ALLOC && c->ev[j].p == e->p) {
				r.ids = gg_table_ids(0, c->ev[j].ms);
				break;
			}
		if (gg_records_push(&c->recs, &c->nrecs, &c->cap, 4096, &r) != 0)
			lost = 1;
	}
	munmap(set, bytes);
	c->exact = !lost;
}

/* ---- one dump, start to finish ---- */

static void sanitize(char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
		      *s == '-' || *s == '_'))
			*s = '_';
}

static void report_error(const char *what, const char *path, int err)
{
	atomic_fetch_add_explicit(&n_errors, 1, memory_order_relaxed);
	/* One message per process: a full disk would otherwise repeat it. */
	static _Atomic int said;
	if (!atomic_exchange_explicit(&said, 1, memory_order_relaxed))
		gg_log(GG_LOG_ERROR,
		       "could not write allocation dump %s: %s: %s (further dump errors are only counted)", path, what,
		       strerror(err));
}

static int write_req(enum gg_dump_trigger trig, const struct gg_dump_req *req, char *path_out, size_t path_len)
{
	static void *buf, *hist;
	static struct gg_dump_cut cut;
	pthread_mutex_lock(&write_lock);
	/* release: pairs with the fatal paths' acquire (in_flight) */
	atomic_store_explicit(&writing, 1, memory_order_release);
	uint64_t t0 = gg_mono_ms();
	struct gg_out o = {.fd = -1};
	o.buf = gg_dump_map_once(&buf, GG_OUT_CAP);
	uint64_t hcap = gg_history_capacity();
	struct gg_hist_event *ev = hcap ? gg_dump_map_once(&hist, hcap * sizeof(struct gg_hist_event)) : NULL;
	int rc = -1, snapped = 0;
	char final[4096], tmp[4096];
	if (!o.buf) {
		report_error("no memory for the output buffer", gg_opt.dump_dir, ENOMEM);
		goto out;
	}
	/* The cut first, before anything slow (the host's files, the stacks'
	 * symbols): a refusing thread waits for it, and only for it. */
	uint64_t cut_ns = gg_mono_ns();
	take_cut(&cut, req && req->valid ? req->cut : gg_history_head(), ev, ev ? hcap : 0);
	cut_ns = gg_mono_ns() - cut_ns; /* what a refusing thread waits for, less its wake-up */
	if (!cut.stream) {
		snapshot_done();
		snapped = 1;
	}
	settle_cut(&cut, ev ? hcap : 0);
	gg_dump_stacks_reset();

	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	uint64_t unix_ms = (uint64_t)rt.tv_sec * 1000 + (uint64_t)rt.tv_nsec / 1000000;
	if (gethostname(hostname, sizeof hostname - 1) != 0)
		strcpy(hostname, "unknown");
	char host[64];
	snprintf(host, sizeof host, "%s", hostname);
	sanitize(host);
	uint64_t seq = atomic_fetch_add_explicit(&n_written, 1, memory_order_relaxed) + 1;
	int n1 = snprintf(final, sizeof final, "%s/gpuguard-%s-%d-%llu-%llu.jsonl", gg_opt.dump_dir, host,
	                  (int)getpid(), (unsigned long long)unix_ms, (unsigned long long)seq);
	int n2 = snprintf(tmp, sizeof tmp, "%s/.gpuguard-%s-%d-%llu-%llu.jsonl.tmp", gg_opt.dump_dir, host,
	                  (int)getpid(), (unsigned long long)unix_ms, (unsigned long long)seq);
	if (n1 <= 0 || n2 <= 0 || (size_t)n2 >= sizeof tmp) {
		atomic_fetch_sub_explicit(&n_written, 1, memory_order_relaxed);
		report_error("directory name too long", gg_opt.dump_dir, ENAMETOOLONG);
		goto out;
	}
	o.fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (o.fd < 0) {
		atomic_fetch_sub_explicit(&n_written, 1, memory_order_relaxed);
		report_error("cannot create the file", tmp, errno);
		goto out;
	}

	uint64_t since_start = gg_now_ms();
	gg_dump_rec_header(&o, trig, unix_ms, since_start, hostname);
	gg_dump_rec_config(&o);
	gg_dump_rec_devices(&o, req, &cut);
	gg_shared_foreach_use(gg_dump_rec_pod_one, &o);
	gg_dump_rec_deaths(&o);
	if (req && req->valid) {
		gg_dump_mark_stack(req->stack);
		gg_dump_rec_request(&o, req);
	}
	gg_dump_rec_host(&o, &pinned_bytes, &pinned_count);
	gg_dump_rec_meminfo(&o);
	gg_dump_rec_peaks(&o, &cut);
	gg_vmm_foreach(gg_dump_rec_vmm_one, &o);
	gg_dump_rec_allocs(&o, since_start, &cut);
	if (!snapped) { /* streamed: the live table is in the file now */
		snapshot_done();
		snapped = 1;
	}
	if (test_delay_ms) { /* what a kill then leaves: the records so far */
		gg_out_flush(&o);
		nanosleep(&(struct timespec){test_delay_ms / 1000, (long)(test_delay_ms % 1000) * 1000000}, NULL);
	}
	for (uint64_t i = 0; i < cut.nev; i++)
		gg_dump_mark_stack(cut.ev[i].stack);
	gg_dump_rec_stacks(&o);
	gg_dump_rec_history(&o, cut.ev, cut.nev);
	gg_dump_rec_end(&o, atomic_load_explicit(&n_suppressed, memory_order_relaxed),
	                atomic_load_explicit(&n_errors, memory_order_relaxed), &cut);
	gg_out_flush(&o);
	if (!o.err && fsync(o.fd) != 0)
		o.err = errno;
	if (close(o.fd) != 0 && !o.err)
		o.err = errno;
	o.fd = -1;
	if (!o.err && rename(tmp, final) != 0)
		o.err = errno;
	if (o.err) {
		unlink(tmp);
		atomic_fetch_sub_explicit(&n_written, 1, memory_order_relaxed);
		report_error("write failed", final, o.err);
		goto out;
	}
	if (path_out && path_len)
		snprintf(path_out, path_len, "%s", final);
	gg_log(GG_LOG_INFO, "wrote allocation dump %s (%s, %llu records, %llu bytes, %llu ms, copied in %llu us)",
	       final, gg_dump_trigger_name(trig), (unsigned long long)o.records + 1, (unsigned long long)o.bytes,
	       (unsigned long long)(gg_mono_ms() - t0), (unsigned long long)(cut_ns / 1000));
	gg_shared_count_dump(); /* for the pod's metrics */
	rc = 0;
out:
	if (!snapped)
		snapshot_done();
	/* release: the file is renamed (or removed) before a fatal path that
	 * sees 0 lets the process go. */
	atomic_store_explicit(&writing, 0, memory_order_release);
	pthread_mutex_unlock(&write_lock);
	return rc;
}
