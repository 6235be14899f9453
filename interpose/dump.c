/* gpuguard: allocation dumps (include/gpuguard/dump.h). Triggers only post a
 * request; a writer thread, started on first device activity, writes the
 * file: never from a signal handler, never holding anything a hook takes.
 * Each file is written under a hidden temporary name, fsync'ed and renamed,
 * so a reader sees a whole dump or none. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gpuguard/dump.h"
#include "gpuguard/region.h"
#include "internal.h"

static const char *const trigger_names[] = {GPUGUARD_DUMP_TRIGGERS};
static const char *const api_names[] = {GPUGUARD_API_NAMES};

/* ---- state shared by triggers, the signal handler and the writer ---- */

struct request {
	int valid;
	int dev;
	enum gpuguard_api api;
	uint64_t size;
	uint32_t tid, stack;
	int driver_oom;
	int have_meminfo; /* driver_free/driver_total for dev, asked on the failing thread */
	uint64_t driver_free, driver_total;
};

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
static struct request slot_req;
static enum gg_dump_trigger slot_trigger;
static _Atomic uint64_t n_started, n_written, n_suppressed, n_errors;
static _Atomic uint64_t last_ms;
static _Atomic int64_t pinned_bytes, pinned_count;
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER; /* dump writers only */

static int write_req(enum gg_dump_trigger trig, const struct request *req, char *path_out, size_t path_len);

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

/* ---- memory-info queries: how the process sized itself ---- */

/* The first GG_MI_FIRST queries (a server sizes itself at start-up) and the
 * last GG_MI_LAST (what it saw lately), one seqlock per slot as in the
 * history ring: 2n+1 while query n is written, 2n+2 once whole. */
struct mi_slot {
	_Atomic uint64_t seq;
	_Atomic uint64_t ms, free, total, used;
	_Atomic int dev, nvml;
};
static struct mi_slot mi_slots[GG_MI_FIRST + GG_MI_LAST];
static _Atomic uint64_t mi_count;

static void note_meminfo(int dev, uint64_t free_bytes, uint64_t total_bytes, int nvml)
{
	/* relaxed: the index only has to be unique; the slot's seq orders. */
	uint64_t n = atomic_fetch_add_explicit(&mi_count, 1, memory_order_relaxed);
	struct mi_slot *sl = &mi_slots[n < GG_MI_FIRST ? n : GG_MI_FIRST + (n - GG_MI_FIRST) % GG_MI_LAST];
	uint64_t cur = atomic_load_explicit(&sl->seq, memory_order_relaxed);
	/* A writer a lap behind, or racing one on the same slot, gives up: the
	 * slot keeps a whole query either way. relaxed CAS + release fence =
	 * the seqlock's writer side (odd seq before any payload store). */
	if ((cur & 1) || cur >= 2 * n + 1 ||
	    !atomic_compare_exchange_strong_explicit(&sl->seq, &cur, 2 * n + 1, memory_order_relaxed,
	                                             memory_order_relaxed))
		return;
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&sl->ms, gg_now_ms(), memory_order_relaxed);
	atomic_store_explicit(&sl->free, free_bytes, memory_order_relaxed);
	atomic_store_explicit(&sl->total, total_bytes, memory_order_relaxed);
	atomic_store_explicit(&sl->used, gg_history_live(dev), memory_order_relaxed);
	atomic_store_explicit(&sl->dev, dev, memory_order_relaxed);
	atomic_store_explicit(&sl->nvml, nvml, memory_order_relaxed);
	/* release: pairs with the reader's acquire load; 2n+2 = payload whole. */
	atomic_store_explicit(&sl->seq, 2 * n + 2, memory_order_release);
}

void gg_dump_note_meminfo(int dev, uint64_t free_bytes, uint64_t total_bytes)
{
	note_meminfo(dev, free_bytes, total_bytes, 0);
}

void gg_dump_note_meminfo_nvml(int dev, uint64_t free_bytes, uint64_t total_bytes)
{
	note_meminfo(dev, free_bytes, total_bytes, 1);
}

size_t gg_dump_meminfo_snapshot(struct gg_meminfo_q *out, size_t max, uint64_t *count)
{
	size_t k = 0;
	*count = atomic_load_explicit(&mi_count, memory_order_relaxed);
	for (size_t i = 0; i < GG_MI_FIRST + GG_MI_LAST && k < max; i++) {
		struct mi_slot *sl = &mi_slots[i];
		/* acquire: pairs with the writer's release store of 2n+2. */
		uint64_t s1 = atomic_load_explicit(&sl->seq, memory_order_acquire);
		if (!s1 || (s1 & 1))
			continue;
		struct gg_meminfo_q q = {
		    .n = s1 / 2 - 1,
		    .ms = atomic_load_explicit(&sl->ms, memory_order_relaxed),
		    .free = atomic_load_explicit(&sl->free, memory_order_relaxed),
		    .total = atomic_load_explicit(&sl->total, memory_order_relaxed),
		    .used = atomic_load_explicit(&sl->used, memory_order_relaxed),
		    .dev = atomic_load_explicit(&sl->dev, memory_order_relaxed),
		    .nvml = atomic_load_explicit(&sl->nvml, memory_order_relaxed),
		};
		/* acquire fence: payload loads before the re-check of seq. */
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&sl->seq, memory_order_relaxed) != s1)
			continue; /* rewritten meanwhile: skip */
		/* insertion by n: the last slots wrap, the output is in order */
		size_t j = k++;
		while (j > 0 && out[j - 1].n > q.n) {
			out[j] = out[j - 1];
			j--;
		}
		out[j] = q;
	}
	return k;
}

/* Kubernetes shows the file terminationMessagePath names (default
 * /dev/termination-log) as the container's last state: the first refusal
 * of this process says there why memory ran out, in one line. Only an
 * existing regular file we may write is appended to (never created, never
 * a symlink, a FIFO or a device), without blocking. */
static const char *api_name(unsigned api);

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
	struct gg_budget *b = gg_ceiling_budget_peek(dev);
	/* relaxed: numbers for a message */
	uint64_t lim = b && b->limit ? atomic_load_explicit(b->limit, memory_order_relaxed) : GG_UNLIMITED;
	uint64_t used = b && b->used ? atomic_load_explicit(b->used, memory_order_relaxed) : 0;
	char rq[32], us[32], li[32], line[512];
	gg_log_bytes(rq, sizeof rq, req_size);
	gg_log_bytes(us, sizeof us, used);
	int n;
	if (why == GPUGUARD_REFUSED_DRIVER)
		n = snprintf(line, sizeof line,
		             "gpuguard: %s of %s on device %d failed: the driver is out of memory (%s charged); "
		             "pid %d; dumps in %s\n",
		             api_name(req_api), rq, dev, us, (int)getpid(), gg_opt.dump_dir);
	else if (why == GPUGUARD_REFUSED_CONFIG)
		n = snprintf(line, sizeof line,
		             "gpuguard: %s of %s on device %d refused: GPUGUARD_LIMIT is not valid, every allocation "
		             "is refused; pid %d\n",
		             api_name(req_api), rq, dev, (int)getpid());
	else
		n = snprintf(line, sizeof line,
		             "gpuguard: %s of %s on device %d refused at the ceiling: %s of %s%s used%s; pid %d; "
		             "dumps in %s\n",
		             api_name(req_api), rq, dev, us,
		             lim >= GG_LIMIT_UNRESOLVED ? "?" : gg_log_bytes(li, sizeof li, lim),
		             b && b->claim ? " (the pod's budget)" : "", gg_opt.wait_ms ? " after waiting" : "",
		             (int)getpid(), gg_opt.dump_dir);
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
	    (struct request){1, dev, req_api, req_size, gg_gettid(), st, why == GPUGUARD_REFUSED_DRIVER, 0, 0, 0};
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
		struct request r = slot_req;
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

/* ---- output: an mmap'd buffer and hand-rolled formatting ---- */

#define OUT_CAP (4u << 20)
struct out {
	int fd;
	int err; /* first errno, 0 if none */
	char *buf;
	size_t len;
	uint64_t records;
	uint64_t bytes; /* written so far */
};

static void out_flush(struct out *o)
{
	size_t off = 0;
	while (!o->err && off < o->len) {
		ssize_t w = write(o->fd, o->buf + off, o->len - off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			o->err = errno;
		} else if (w == 0) {
			o->err = EIO;
		} else {
			off += (size_t)w;
			o->bytes += (uint64_t)w;
		}
	}
	o->len = 0;
}

static inline void out_need(struct out *o, size_t n)
{
	if (o->len + n > OUT_CAP)
		out_flush(o);
}

static inline void out_mem(struct out *o, const char *s, size_t n)
{
	if (n > OUT_CAP / 2) { /* never: every piece is small */
		out_flush(o);
		return;
	}
	out_need(o, n);
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

#define OUT_LIT(o, s) out_mem(o, s, sizeof(s) - 1)

static inline void out_str(struct out *o, const char *s)
{
	out_mem(o, s, strlen(s));
}

static inline void out_u64(struct out *o, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[23 - n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	out_mem(o, tmp + 24 - n, (size_t)n);
}

static inline void out_i64(struct out *o, int64_t v)
{
	if (v < 0) {
		OUT_LIT(o, "-");
		out_u64(o, (uint64_t)0 - (uint64_t)v);
	} else {
		out_u64(o, (uint64_t)v);
	}
}

static inline void out_hex(struct out *o, uint64_t v)
{
	static const char dig[] = "0123456789abcdef";
	char tmp[16];
	int n = 0;
	do {
		tmp[15 - n++] = dig[v & 15];
		v >>= 4;
	} while (v);
	out_mem(o, tmp + 16 - n, (size_t)n);
}

static void out_u64_or_null(struct out *o, int known, uint64_t v)
{
	if (known)
		out_u64(o, v);
	else
		OUT_LIT(o, "null");
}

/* Length of a valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0;
		if (c == 0xed)
			hi = 0x9f; /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;
		if (c == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (len > n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* A JSON string: quotes, backslashes and control characters escaped; valid
 * UTF-8 kept; any other byte written as \u00XX, so the line stays valid
 * JSON whatever the input (a command line can hold anything). */
static void out_json_n(struct out *o, const char *s, size_t n)
{
	static const char dig[] = "0123456789abcdef";
	OUT_LIT(o, "\"");
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		unsigned c = p[i];
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			out_need(o, 1);
			o->buf[o->len++] = (char)c;
			i++;
		} else if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			out_mem(o, e, 2);
			i++;
		} else if (c >= 0x80 && utf8_len(p + i, n - i)) {
			size_t l = utf8_len(p + i, n - i);
			out_mem(o, (const char *)p + i, l);
			i += l;
		} else {
			char e[6] = {'\\', 'u', '0', '0', dig[c >> 4], dig[c & 15]};
			out_mem(o, e, 6);
			i++;
		}
	}
	OUT_LIT(o, "\"");
}

static void out_json(struct out *o, const char *s)
{
	out_json_n(o, s, strlen(s));
}

static void out_end_record(struct out *o)
{
	OUT_LIT(o, "}\n");
	o->records++;
}

/* ---- the records ---- */

static char hostname[256];

/* since_start is the clock reading every age in the dump is taken from, so
 * that start_unix_ms + (since_start - age) is when a record was made: an
 * age read later (after the host files, slow under load) would place an
 * allocation before the query that sized it. */
static void rec_header(struct out *o, enum gg_dump_trigger trig, uint64_t unix_ms, uint64_t since_start)
{
	time_t secs = (time_t)(unix_ms / 1000);
	struct tm tm;
	char iso[32];
	gmtime_r(&secs, &tm);
	strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
	OUT_LIT(o, "{\"t\":\"header\",\"format\":");
	out_u64(o, GPUGUARD_DUMP_FORMAT);
	OUT_LIT(o, ",\"lib\":");
	out_json(o, GPUGUARD_VERSION);
	OUT_LIT(o, ",\"time\":");
	out_json(o, iso);
	OUT_LIT(o, ",\"unix_ms\":");
	out_u64(o, unix_ms);
	OUT_LIT(o, ",\"start_unix_ms\":");
	out_u64(o, unix_ms > since_start ? unix_ms - since_start : 0);
	OUT_LIT(o, ",\"host\":");
	out_json(o, hostname);
	OUT_LIT(o, ",\"pid\":");
	out_u64(o, (uint64_t)getpid());
	OUT_LIT(o, ",\"cmdline\":[");
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		static char cmd[65536];
		ssize_t n = read(fd, cmd, sizeof cmd);
		close(fd);
		size_t start = 0;
		int first = 1;
		for (ssize_t i = 0; i < n; i++) {
			if (cmd[i] != 0 && i + 1 < n)
				continue;
			size_t end = cmd[i] == 0 ? (size_t)i : (size_t)i + 1;
			if (!first)
				OUT_LIT(o, ",");
			first = 0;
			out_json_n(o, cmd + start, end - start);
			start = (size_t)i + 1;
		}
	}
	OUT_LIT(o, "],\"trigger\":");
	out_json(o, trigger_names[trig]);
	OUT_LIT(o, ",\"unwinder\":");
	out_json(o, gg_stack_unwinder());
	OUT_LIT(o, ",\"stack_depth\":");
	out_u64(o, (uint64_t)gg_stack_depth());
	OUT_LIT(o, ",\"history_capacity\":");
	out_u64(o, gg_history_capacity());
	out_end_record(o);
}

static void rec_config(struct out *o)
{
	for (size_t i = 0; i < gg_option_nrows; i++) {
		const char *src;
		const char *v = gg_options_value(i, &src);
		OUT_LIT(o, "{\"t\":\"config\",\"name\":");
		out_json(o, gg_option_rows[i].name);
		OUT_LIT(o, ",\"value\":");
		out_json(o, v);
		OUT_LIT(o, ",\"source\":");
		out_json(o, src);
		out_end_record(o);
	}
}

static void rec_devices(struct out *o, const struct request *req)
{
	for (int d = 0; d < GG_MAX_DEVICES; d++) {
		struct gpuguard_device_stats s;
		gg_ceiling_read(d, &s);
		if (!s.allocs && !s.frees && !s.used && !s.peak && !s.untracked_frees && !s.pool_reserved &&
		    !s.refused[0] && !s.refused[1] && !s.refused[2])
			continue;
		OUT_LIT(o, "{\"t\":\"device\",\"dev\":");
		out_u64(o, (uint64_t)d);
		OUT_LIT(o, ",\"limit\":");
		out_u64_or_null(o, s.limit != GG_UNLIMITED, s.limit);
		OUT_LIT(o, ",\"used\":");
		out_u64(o, s.used);
		OUT_LIT(o, ",\"peak\":");
		out_u64(o, s.peak);
		OUT_LIT(o, ",\"pool_reserved\":");
		out_u64(o, s.pool_reserved);
		OUT_LIT(o, ",\"live_bytes\":");
		out_u64(o, s.live_bytes);
		OUT_LIT(o, ",\"allocs\":");
		out_u64(o, s.allocs);
		OUT_LIT(o, ",\"frees\":");
		out_u64(o, s.frees);
		OUT_LIT(o, ",\"untracked_frees\":");
		out_u64(o, s.untracked_frees);
		OUT_LIT(o, ",\"refused_ceiling\":");
		out_u64(o, s.refused[GPUGUARD_REFUSED_CEILING]);
		OUT_LIT(o, ",\"refused_config\":");
		out_u64(o, s.refused[GPUGUARD_REFUSED_CONFIG]);
		OUT_LIT(o, ",\"refused_driver\":");
		out_u64(o, s.refused[GPUGUARD_REFUSED_DRIVER]);
		OUT_LIT(o, ",\"pool_overshoot\":");
		out_u64(o, s.pool_overshoot);
		/* Known for the failing request's device only: the writer
		 * thread has no context to ask the driver with. */
		int mi = req && req->valid && req->have_meminfo && req->dev == d;
		OUT_LIT(o, ",\"driver_free\":");
		out_u64_or_null(o, mi, mi ? req->driver_free : 0);
		OUT_LIT(o, ",\"driver_total\":");
		out_u64_or_null(o, mi, mi ? req->driver_total : 0);
		if (s.pod)
			OUT_LIT(o, ",\"scope\":\"pod\",\"process_used\":");
		else
			OUT_LIT(o, ",\"scope\":\"process\",\"process_used\":");
		out_u64(o, s.process_used);
		OUT_LIT(o, ",\"wait_ms\":");
		out_u64(o, gg_ceiling_wait_ns(d) / 1000000u);
		out_end_record(o);
	}
}

static const char *api_name(unsigned api)
{
	return api < sizeof(api_names) / sizeof(api_names[0]) ? api_names[api] : "none";
}

static void rec_vmm_one(const struct gg_vmm_info *v, void *arg)
{
	struct out *o = arg;
	OUT_LIT(o, "{\"t\":\"vmm\",\"base\":\"");
	out_hex(o, v->base);
	OUT_LIT(o, "\",\"size\":");
	out_u64(o, v->size);
	OUT_LIT(o, ",\"mapped\":");
	out_u64(o, v->mapped);
	OUT_LIT(o, ",\"holes\":");
	out_u64(o, v->holes);
	OUT_LIT(o, ",\"largest_hole\":");
	out_u64(o, v->largest_hole);
	out_end_record(o);
}

static void rec_pod_one(const struct gg_pod_use *u, void *arg)
{
	struct out *o = arg;
	OUT_LIT(o, "{\"t\":\"pod\",\"slot\":");
	out_u64(o, u->slot);
	OUT_LIT(o, ",\"pid\":");
	out_u64(o, u->pid);
	OUT_LIT(o, ",\"comm\":");
	out_json(o, u->comm);
	OUT_LIT(o, ",\"self\":");
	out_u64(o, (uint64_t)u->self);
	OUT_LIT(o, ",\"alive\":");
	out_u64(o, (uint64_t)u->alive);
	OUT_LIT(o, ",\"dev\":");
	out_u64(o, (uint64_t)u->dev);
	OUT_LIT(o, ",\"used\":");
	out_u64(o, u->used);
	out_end_record(o);
}

/* The pod's recent deaths (region.h): what each process that died without
 * exiting last showed; the report gives the verdict. */
static void rec_deaths(struct out *o)
{
	struct gpuguard_region_death d[GPUGUARD_REGION_DEATHS];
	size_t n = gg_shared_deaths(d, GPUGUARD_REGION_DEATHS);
	for (size_t i = 0; i < n; i++) {
		OUT_LIT(o, "{\"t\":\"death\",\"n\":");
		out_u64(o, d[i].seq);
		OUT_LIT(o, ",\"pid\":");
		out_u64(o, d[i].pid);
		OUT_LIT(o, ",\"comm\":");
		out_json(o, d[i].comm);
		OUT_LIT(o, ",\"start_ms\":");
		out_u64(o, d[i].start_ms);
		OUT_LIT(o, ",\"last_ms\":");
		out_u64(o, d[i].last_ms);
		OUT_LIT(o, ",\"found_ms\":");
		out_u64(o, d[i].found_ms);
		OUT_LIT(o, ",\"gpu_entry\":");
		out_u64(o, d[i].gpu_entry);
		OUT_LIT(o, ",\"gpu_used\":");
		out_u64(o, d[i].gpu_used);
		OUT_LIT(o, ",\"gpu_limit\":");
		out_u64_or_null(o, d[i].gpu_limit < GG_LIMIT_UNRESOLVED, d[i].gpu_limit);
		OUT_LIT(o, ",\"refused\":");
		out_u64(o, d[i].refused);
		OUT_LIT(o, ",\"refused_age_ms\":");
		out_u64_or_null(o, d[i].refused_age_ms != UINT32_MAX, d[i].refused_age_ms);
		OUT_LIT(o, ",\"cgroup_version\":");
		out_u64(o, d[i].host_flags & GPUGUARD_OBIT_CGROUP_V2   ? 2
		           : d[i].host_flags & GPUGUARD_OBIT_CGROUP_V1 ? 1
		                                                       : 0);
		OUT_LIT(o, ",\"working_set\":");
		out_u64(o, d[i].host_ws);
		OUT_LIT(o, ",\"working_set_known\":");
		out_u64(o, (d[i].host_flags & GPUGUARD_OBIT_WS_KNOWN) != 0);
		OUT_LIT(o, ",\"host_limit\":");
		out_u64_or_null(o, d[i].host_limit != 0, d[i].host_limit);
		out_end_record(o);
	}
}

static void rec_request(struct out *o, const struct request *r)
{
	OUT_LIT(o, "{\"t\":\"request\",\"api\":");
	out_json(o, api_name(r->api));
	OUT_LIT(o, ",\"size\":");
	out_u64(o, r->size);
	OUT_LIT(o, ",\"dev\":");
	out_i64(o, r->dev);
	OUT_LIT(o, ",\"tid\":");
	out_u64(o, r->tid);
	OUT_LIT(o, ",\"stack\":");
	out_u64(o, r->stack);
	OUT_LIT(o, ",\"outcome\":");
	out_json(o, r->driver_oom ? "driver_oom" : "refused_ceiling");
	out_end_record(o);
}

/* Reads a small file into buf (NUL-terminated). Bytes read, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = 0;
	return r;
}

static int read_u64_file(const char *path, uint64_t *out)
{
	char b[64];
	if (read_small(path, b, sizeof b) <= 0 || b[0] < '0' || b[0] > '9')
		return -1;
	*out = strtoull(b, NULL, 10);
	return 0;
}

static int read_keyed(const char *path, const char *key, uint64_t *out)
{
	char b[8192]; /* memory.stat: v1's total_* lines come late */
	if (read_small(path, b, sizeof b) <= 0)
		return -1;
	size_t kl = strlen(key);
	for (char *p = b; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
			*out = strtoull(p + kl + 1, NULL, 10);
			return 0;
		}
	return -1;
}

/* GPUGUARD_TEST_CGROUP_DIR, read once on an application thread (arm or
 * exit), never by the writer while the application may setenv. */
static char test_cgroup_dir[1024];

void gg_dump_read_test_knobs(void)
{
	const char *e = secure_getenv("GPUGUARD_TEST_CGROUP_DIR");
	/* Written only when it changed: other threads' obituary refreshes
	 * (shared.c) read it once arming is done, so the re-read at exit
	 * must not rewrite the same bytes under them. */
	if (strncmp(test_cgroup_dir, e ? e : "", sizeof test_cgroup_dir - 1) != 0)
		snprintf(test_cgroup_dir, sizeof test_cgroup_dir, "%s", e ? e : "");
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

/* One cgroup directory: v2 (memory.current) or v1 (memory.usage_in_bytes).
 * 1 if it is one. The working set the kubelet evicts and the OOM killer
 * weighs is usage minus inactive file pages (page cache the kernel drops
 * first), so those are read too: cgroup v2 memory.stat "inactive_file",
 * v1 "total_inactive_file". */
static int read_cgroup_dir(const char *dir, int want, struct gg_host_sample *h)
{
	char path[4200];
	if (want != 1) {
		snprintf(path, sizeof path, "%s/memory.current", dir);
		if (read_u64_file(path, &h->use) == 0) {
			h->version = 2, h->have_use = 1;
			snprintf(path, sizeof path, "%s/memory.max", dir);
			h->have_lim = read_u64_file(path, &h->lim) == 0; /* "max" = none */
			snprintf(path, sizeof path, "%s/memory.events", dir);
			h->have_oom = read_keyed(path, "oom_kill", &h->oom) == 0;
			snprintf(path, sizeof path, "%s/memory.stat", dir);
			h->have_inactive = read_keyed(path, "inactive_file", &h->inactive_file) == 0;
			return 1;
		}
	}
	if (want != 2) {
		snprintf(path, sizeof path, "%s/memory.usage_in_bytes", dir);
		if (read_u64_file(path, &h->use) == 0) {
			h->version = 1, h->have_use = 1;
			snprintf(path, sizeof path, "%s/memory.limit_in_bytes", dir);
			h->have_lim = read_u64_file(path, &h->lim) == 0 && h->lim < (1ull << 62);
			snprintf(path, sizeof path, "%s/memory.oom_control", dir);
			h->have_oom = read_keyed(path, "oom_kill", &h->oom) == 0;
			snprintf(path, sizeof path, "%s/memory.stat", dir);
			h->have_inactive = read_keyed(path, "total_inactive_file", &h->inactive_file) == 0;
			return 1;
		}
	}
	return 0;
}

void gg_dump_host_sample(struct gg_host_sample *h)
{
	char b[4096], path[4200];
	memset(h, 0, sizeof *h);
	if (read_small("/proc/self/statm", b, sizeof b) > 0) {
		char *sp = strchr(b, ' ');
		if (sp)
			h->rss = strtoull(sp + 1, NULL, 10) * (uint64_t)sysconf(_SC_PAGESIZE);
	}
	if (test_cgroup_dir[0]) {
		read_cgroup_dir(test_cgroup_dir, 0, h);
		return;
	}
	if (read_small("/proc/self/cgroup", b, sizeof b) <= 0)
		return;
	char *v2 = strstr(b, "0::");
	char *v1 = strstr(b, ":memory:");
	if (v2 && (v2 == b || v2[-1] == '\n')) {
		char *p = v2 + 3, *nl = strchr(p, '\n');
		if (nl)
			*nl = 0;
		/* The path as the host names it, then the container's root
		 * (a private cgroup namespace shows "/"). */
		const char *bases[2] = {p, ""};
		for (int i = 0; i < 2 && !h->version; i++) {
			snprintf(path, sizeof path, "/sys/fs/cgroup%s", bases[i]);
			read_cgroup_dir(path, 2, h);
		}
	}
	if (!h->version && v1) {
		char *p = v1 + 8, *nl = strchr(p, '\n');
		if (nl)
			*nl = 0;
		const char *bases[2] = {p, ""};
		for (int i = 0; i < 2 && !h->version; i++) {
			snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s", bases[i]);
			read_cgroup_dir(path, 1, h);
		}
	}
}

static void rec_host(struct out *o)
{
	struct gg_host_sample h;
	gg_dump_host_sample(&h);
	int64_t pb = atomic_load_explicit(&pinned_bytes, memory_order_relaxed);
	int64_t pc = atomic_load_explicit(&pinned_count, memory_order_relaxed);
	OUT_LIT(o, "{\"t\":\"host\",\"rss\":");
	out_u64(o, h.rss);
	OUT_LIT(o, ",\"cgroup_version\":");
	out_u64(o, (uint64_t)h.version);
	OUT_LIT(o, ",\"cgroup_limit\":");
	out_u64_or_null(o, h.have_lim, h.lim);
	OUT_LIT(o, ",\"cgroup_usage\":");
	out_u64_or_null(o, h.have_use, h.use);
	OUT_LIT(o, ",\"cgroup_oom_kill\":");
	out_u64_or_null(o, h.have_oom, h.oom);
	OUT_LIT(o, ",\"cgroup_inactive_file\":");
	out_u64_or_null(o, h.have_use && h.have_inactive, h.inactive_file);
	OUT_LIT(o, ",\"pinned_bytes\":");
	out_u64(o, pb > 0 ? (uint64_t)pb : 0);
	OUT_LIT(o, ",\"pinned_allocs\":");
	out_u64(o, pc > 0 ? (uint64_t)pc : 0);
	out_end_record(o);
}

static void rec_meminfo(struct out *o)
{
	struct gg_meminfo_q q[GG_MI_FIRST + GG_MI_LAST];
	uint64_t count;
	size_t n = gg_dump_meminfo_snapshot(q, GG_MI_FIRST + GG_MI_LAST, &count);
	for (size_t i = 0; i < n; i++) {
		OUT_LIT(o, "{\"t\":\"meminfo\",\"n\":");
		out_u64(o, q[i].n);
		OUT_LIT(o, ",\"of\":");
		out_u64(o, count);
		OUT_LIT(o, ",\"ms\":");
		out_u64(o, q[i].ms);
		OUT_LIT(o, ",\"dev\":");
		out_u64(o, (uint64_t)(q[i].dev < 0 ? 0 : q[i].dev));
		OUT_LIT(o, ",\"free\":");
		out_u64(o, q[i].free);
		OUT_LIT(o, ",\"total\":");
		out_u64(o, q[i].total);
		OUT_LIT(o, ",\"used\":");
		out_u64(o, q[i].used);
		if (q[i].nvml)
			OUT_LIT(o, ",\"via\":\"nvml\"");
		out_end_record(o);
	}
}

/* Stack ids referenced by this dump, one bit each. */
static uint64_t *stack_bits;
static size_t stack_bits_words;

static inline void mark_stack(uint32_t id)
{
	if (id && stack_bits && id / 64 < stack_bits_words)
		stack_bits[id / 64] |= 1ull << (id % 64);
}

static void rec_peaks(struct out *o)
{
	for (int d = 0; d < GG_MAX_DEVICES; d++) {
		uint64_t bytes, ms;
		gg_history_peak(d, &bytes, &ms);
		if (!bytes)
			continue;
		OUT_LIT(o, "{\"t\":\"peak\",\"dev\":");
		out_u64(o, (uint64_t)d);
		OUT_LIT(o, ",\"bytes\":");
		out_u64(o, bytes);
		OUT_LIT(o, ",\"ms\":");
		out_u64(o, ms);
		OUT_LIT(o, ",\"live\":");
		out_u64(o, gg_history_live(d));
		out_end_record(o);
		struct gg_peak_sites ps;
		if (gg_history_peak_sites(d, &ps) != 0)
			continue;
		for (unsigned k = 0; k < ps.n; k++) {
			OUT_LIT(o, "{\"t\":\"peak_site\",\"dev\":");
			out_u64(o, (uint64_t)d);
			OUT_LIT(o, ",\"st\":");
			out_u64(o, ps.st[k]);
			OUT_LIT(o, ",\"bytes\":");
			out_u64(o, ps.b[k]);
			OUT_LIT(o, ",\"at\":");
			out_u64(o, ps.bytes);
			OUT_LIT(o, ",\"ms\":");
			out_u64(o, ps.ms);
			out_end_record(o);
			mark_stack(ps.st[k]);
		}
	}
}

struct alloc_ctx {
	struct out *o;
	uint64_t now;
};

static uint64_t raw_of(const struct gg_record *r)
{
	enum gg_key_ns ns = GG_NS_PTR;
	switch (gpuguard_api_kind(r->api)) {
	case GPUGUARD_KIND_VMM:
		ns = GG_NS_VMM;
		break;
	case GPUGUARD_KIND_ARRAY:
		ns = GG_NS_ARRAY;
		break;
	case GPUGUARD_KIND_MIPMAP:
		ns = GG_NS_MIPMAP;
		break;
	case GPUGUARD_KIND_PTR:
	case GPUGUARD_KIND_POOL:
		break;
	}
	return r->key ^ ((uint64_t)ns << 62);
}

static void rec_alloc(const struct gg_record *r, void *arg)
{
	struct alloc_ctx *c = arg;
	struct out *o = c->o;
	if (r->flags & GG_REC_HOST)
		return; /* pinned host memory: summed in the host record */
	mark_stack(r->stack);
	out_need(o, 160);
	OUT_LIT(o, "{\"t\":\"a\",\"p\":\"");
	out_hex(o, raw_of(r));
	OUT_LIT(o, "\",\"s\":");
	out_u64(o, r->size);
	OUT_LIT(o, ",\"d\":");
	out_u64(o, r->dev);
	OUT_LIT(o, ",\"api\":");
	out_u64(o, r->api);
	OUT_LIT(o, ",\"age\":");
	out_u64(o, c->now > r->t_ms ? c->now - r->t_ms : 0);
	OUT_LIT(o, ",\"tid\":");
	out_u64(o, r->tid);
	OUT_LIT(o, ",\"st\":");
	out_u64(o, r->stack);
	out_end_record(o);
}

static void rec_stacks(struct out *o)
{
	for (size_t w = 0; w < stack_bits_words; w++) {
		for (uint64_t bits = stack_bits[w]; bits; bits &= bits - 1) {
			uint32_t id = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
			const uintptr_t *fr;
			int n = gg_stack_frames(id, &fr);
			if (n <= 0)
				continue;
			OUT_LIT(o, "{\"t\":\"stack\",\"id\":");
			out_u64(o, id);
			OUT_LIT(o, ",\"frames\":[");
			for (int i = 0; i < n; i++) {
				Dl_info info;
				/* A return address points after the call: look up
				 * the byte before it, so the frame names the caller. */
				uintptr_t pc = fr[i] - 1;
				if (i)
					OUT_LIT(o, ",");
				if (dladdr((void *)pc, &info) && info.dli_fname) {
					const char *base = strrchr(info.dli_fname, '/');
					base = base ? base + 1 : info.dli_fname;
					OUT_LIT(o, "{\"m\":");
					out_json(o, *base ? base : "?");
					OUT_LIT(o, ",\"o\":\"");
					out_hex(o, fr[i] - (uintptr_t)info.dli_fbase);
					OUT_LIT(o, "\"");
					if (info.dli_sname) {
						OUT_LIT(o, ",\"s\":");
						out_json(o, info.dli_sname);
					}
					OUT_LIT(o, "}");
				} else {
					OUT_LIT(o, "{\"m\":\"?\",\"o\":\"");
					out_hex(o, fr[i]);
					OUT_LIT(o, "\"}");
				}
			}
			OUT_LIT(o, "]");
			out_end_record(o);
		}
	}
}

static void rec_history(struct out *o, const struct gg_hist_event *ev, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		const struct gg_hist_event *e = &ev[i];
		out_need(o, 160);
		OUT_LIT(o, "{\"t\":\"h\",\"ms\":");
		out_u64(o, e->ms);
		OUT_LIT(o, ",\"op\":\"");
		char op = (char)e->op;
		out_mem(o, &op, 1);
		OUT_LIT(o, "\",\"p\":\"");
		out_hex(o, e->p);
		OUT_LIT(o, "\",\"s\":");
		out_u64(o, e->s);
		OUT_LIT(o, ",\"d\":");
		out_u64(o, e->dev);
		OUT_LIT(o, ",\"api\":");
		out_u64(o, e->api);
		OUT_LIT(o, ",\"st\":");
		out_u64(o, e->stack);
		out_end_record(o);
	}
}

/* ---- one dump, start to finish ---- */

static void *map_once(void **slot, size_t size)
{
	if (!*slot) {
		void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		*slot = m == MAP_FAILED ? NULL : m;
	}
	return *slot;
}

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

static int write_req(enum gg_dump_trigger trig, const struct request *req, char *path_out, size_t path_len)
{
	static void *buf, *hist, *bits;
	pthread_mutex_lock(&write_lock);
	uint64_t t0 = gg_mono_ms();
	struct out o = {.fd = -1};
	o.buf = map_once(&buf, OUT_CAP);
	uint64_t hcap = gg_history_capacity();
	struct gg_hist_event *ev = hcap ? map_once(&hist, hcap * sizeof(struct gg_hist_event)) : NULL;
	stack_bits_words = (size_t)(1u << 15) / 64 + 1;
	stack_bits = map_once(&bits, stack_bits_words * 8);
	int rc = -1, snapped = 0;
	char final[4096], tmp[4096];
	if (!o.buf) {
		report_error("no memory for the output buffer", gg_opt.dump_dir, ENOMEM);
		goto out;
	}
	if (stack_bits)
		memset(stack_bits, 0, stack_bits_words * 8);
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
	rec_header(&o, trig, unix_ms, since_start);
	rec_config(&o);
	rec_devices(&o, req);
	gg_shared_foreach_use(rec_pod_one, &o);
	rec_deaths(&o);
	if (req && req->valid) {
		mark_stack(req->stack);
		rec_request(&o, req);
	}
	rec_host(&o);
	rec_meminfo(&o);
	rec_peaks(&o);
	gg_vmm_foreach(rec_vmm_one, &o);
	struct alloc_ctx c = {&o, since_start};
	if (gg_table)
		gg_table_foreach(gg_table, rec_alloc, &c);
	snapshot_done();
	snapped = 1;
	for (uint64_t i = 0; i < nev; i++)
		mark_stack(ev[i].stack);
	rec_stacks(&o);
	rec_history(&o, ev, nev);
	uint64_t before_end = o.records;
	OUT_LIT(&o, "{\"t\":\"end\",\"records\":");
	out_u64(&o, before_end);
	OUT_LIT(&o, ",\"suppressed\":");
	out_u64(&o, atomic_load_explicit(&n_suppressed, memory_order_relaxed));
	OUT_LIT(&o, ",\"write_errors\":");
	out_u64(&o, atomic_load_explicit(&n_errors, memory_order_relaxed));
	OUT_LIT(&o, ",\"signal_refused\":");
	/* relaxed: a statistic (signal.c) */
	out_u64(&o, atomic_load_explicit(&gg_sig_refusals, memory_order_relaxed));
	out_end_record(&o);
	out_flush(&o);
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
	       trigger_names[trig], (unsigned long long)o.records + 1, (unsigned long long)o.bytes,
	       (unsigned long long)(gg_mono_ms() - t0));
	gg_shared_count_dump(); /* for the pod's metrics */
	rc = 0;
out:
	if (!snapped)
		snapshot_done();
	pthread_mutex_unlock(&write_lock);
	return rc;
}
