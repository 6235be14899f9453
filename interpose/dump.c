/* gpuguard: allocation dumps (include/gpuguard/dump.h): the triggers and the
 * writer thread. Triggers only post a request; a writer thread, started on
 * first device activity, writes the file: never from a signal handler,
 * never holding anything a hook takes. Each file is written under a hidden
 * temporary name, fsync'ed and renamed, so a reader sees a whole dump or
 * none. The records are dump_records.c's, the JSON writer dump_json.c's,
 * the host probes dump_host.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dump_write.h"

/* ---- state shared by triggers, the signal handler and the writer ---- */

static gg_meminfo_fn meminfo_fn[2];

void gg_dump_set_meminfo(int runtime, gg_meminfo_fn fn)
{
	if (runtime == 0 || runtime == 1)
		meminfo_fn[runtime] = fn;
}

static _Atomic int armed;          /* 0 no, 1 arming, 2 armed */
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
static char hostname[256];

static int write_req(enum gg_dump_trigger trig, const struct gg_dump_req *req, char *path_out, size_t path_len);

static void refusal_body(int dev, enum gpuguard_refusal why);

static GG_TLS enum gpuguard_api req_api;
static GG_TLS uint64_t req_size;

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

void gg_dump_note_request(enum gpuguard_api api, uint64_t size)
{
	req_api = api;
	req_size = size;
}

void gg_dump_noted_request(enum gpuguard_api *api, uint64_t *size)
{
	*api = req_api;
	*size = req_size;
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
	gg_log_bytes(rq, sizeof rq, req_size);
	gg_log_bytes(us, sizeof us, used);
	int n;
	if (why == GPUGUARD_REFUSED_DRIVER)
		n = snprintf(line, sizeof line,
		             "gpuguard: %s of %s on device %d failed: the driver is out of memory (%s charged); "
		             "pid %d; dumps in %s\n",
		             gg_dump_api_name(req_api), rq, dev, us, (int)getpid(), gg_opt.dump_dir);
	else if (why == GPUGUARD_REFUSED_CONFIG)
		n = snprintf(line, sizeof line,
		             "gpuguard: %s of %s on device %d refused: GPUGUARD_LIMIT is not valid, every allocation "
		             "is refused; pid %d\n",
		             gg_dump_api_name(req_api), rq, dev, (int)getpid());
	else if (gg_footprint_refusal_is_runtime(dev, req_size)) {
		struct gg_footprint_stats fs;
		char rt[32];
		gg_footprint_read(dev, &fs);
		n = snprintf(line, sizeof line,
		             "gpuguard: %s of %s on device %d refused at the ceiling because of the runtime: %s of "
		             "%s%s used, of which %s is what the driver holds beyond the allocations (context, "
		             "modules, local memory)%s; pid %d; dumps in %s\n",
		             gg_dump_api_name(req_api), rq, dev, us,
		             lim >= GG_LIMIT_UNRESOLVED ? "?" : gg_log_bytes(li, sizeof li, lim),
		             ds.pod ? " (the pod's budget)" : "", gg_log_bytes(rt, sizeof rt, fs.charged),
		             gg_opt.wait_ms ? " after waiting" : "", (int)getpid(), gg_opt.dump_dir);
	} else
		n = snprintf(line, sizeof line,
		             "gpuguard: %s of %s on device %d refused at the ceiling: %s of %s%s used%s; pid %d; "
		             "dumps in %s\n",
		             gg_dump_api_name(req_api), rq, dev, us,
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
	gg_history_add(GG_HIST_REFUSE, dev, req_api, 0, req_size, st);
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
	slot_req =
	    (struct gg_dump_req){1, dev, req_api, req_size, gg_gettid(), st, why == GPUGUARD_REFUSED_DRIVER, 0, 0, 0};
	/* The failing thread has the context the writer lacks: ask the driver
	 * here, once per dump (rate-limited above), with our hooks bypassed. */
	gg_meminfo_fn mi = meminfo_fn[gpuguard_api_runtime(req_api) == GPUGUARD_RUNTIME_HIP ? 1 : 0];
	if (mi && mi(&slot_req.driver_free, &slot_req.driver_total) == 0)
		slot_req.have_meminfo = 1;
	slot_trigger = why == GPUGUARD_REFUSED_DRIVER ? GG_DUMP_DRIVER_OOM : GG_DUMP_CEILING;
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

static void *writer_main(void *arg)
{
	(void)arg;
	/* The writer must not take the dump signal itself, nor any other the
	 * application directs at "some thread": block them all here. */
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	gg_hook_active = 1; /* our own CUDA calls (none today) pass through */
	for (;;) {
		uint32_t w = atomic_load_explicit(&wake_word, memory_order_acquire);
		write_queued();
		uint64_t seen = atomic_load_explicit(&signals_seen, memory_order_relaxed);
		if (seen != atomic_load_explicit(&signals_done, memory_order_relaxed)) {
			/* A storm of signals is one request: one dump, rate-limited. */
			atomic_store_explicit(&signals_done, seen, memory_order_relaxed);
			if (rate_ok())
				write_req(GG_DUMP_SIGNAL, NULL, NULL, 0);
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

void gg_dump_arm(void)
{
	/* acquire: pairs with the release store of 2 below. */
	if (GG_LIKELY(atomic_load_explicit(&armed, memory_order_acquire) == 2))
		return;
	int expect = 0;
	/* acq_rel: exactly one thread wins the right to start the writer. */
	if (!atomic_compare_exchange_strong_explicit(&armed, &expect, 1, memory_order_acq_rel, memory_order_acquire))
		return; /* another thread arms; a trigger meanwhile just waits queued */
	gg_dump_read_test_knobs();
	if (gg_opt.dump_max == 0) {
		/* No dumps at all: no thread, and the signal keeps its meaning. */
		atomic_store_explicit(&armed, 2, memory_order_release);
		return;
	}
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
	/* release: whoever sees 2 sees the handler installed. */
	atomic_store_explicit(&armed, 2, memory_order_release);
}

void gg_dump_after_fork_child(void)
{
	/* No writer thread exists here; the handler (inherited) stays installed. */
	atomic_store_explicit(&armed, 0, memory_order_relaxed);
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
	if (atomic_load_explicit(&armed, memory_order_acquire) != 2)
		return -1;
	gg_dump_host_sample(h);
	return 0;
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
	pthread_mutex_lock(&write_lock);
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
	gg_dump_stacks_reset();
	/* History first: it is the state at the trigger, before we spend time. */
	uint64_t nev = ev ? gg_history_snapshot(ev, hcap) : 0;

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
	gg_dump_rec_devices(&o, req);
	gg_shared_foreach_use(gg_dump_rec_pod_one, &o);
	gg_dump_rec_deaths(&o);
	if (req && req->valid) {
		gg_dump_mark_stack(req->stack);
		gg_dump_rec_request(&o, req);
	}
	gg_dump_rec_host(&o, &pinned_bytes, &pinned_count);
	gg_dump_rec_meminfo(&o);
	gg_dump_rec_peaks(&o);
	gg_vmm_foreach(gg_dump_rec_vmm_one, &o);
	gg_dump_rec_allocs(&o, since_start);
	snapshot_done();
	snapped = 1;
	for (uint64_t i = 0; i < nev; i++)
		gg_dump_mark_stack(ev[i].stack);
	gg_dump_rec_stacks(&o);
	gg_dump_rec_history(&o, ev, nev);
	gg_dump_rec_end(&o, atomic_load_explicit(&n_suppressed, memory_order_relaxed),
	                atomic_load_explicit(&n_errors, memory_order_relaxed));
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
	gg_log(GG_LOG_INFO, "wrote allocation dump %s (%s, %llu records, %llu bytes, %llu ms)", final,
	       gg_dump_trigger_name(trig), (unsigned long long)o.records + 1, (unsigned long long)o.bytes,
	       (unsigned long long)(gg_mono_ms() - t0));
	gg_shared_count_dump(); /* for the pod's metrics */
	rc = 0;
out:
	if (!snapped)
		snapshot_done();
	pthread_mutex_unlock(&write_lock);
	return rc;
}
