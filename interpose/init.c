/* gpuguard: start-up and the public API. Initialisation runs from our
 * constructor and, in case a CUDA call comes first (another library's
 * constructor), lazily from every hook. It reads the environment, maps the
 * table and the history ring, nothing more: no CUDA, no NVML, no locks a
 * driver could hold, no library loaded (libunwind comes at the first stack
 * capture, stack.c) and nothing printed (held until the first GPU call,
 * log.c). */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

struct gg_table *gg_table;
uint64_t gg_start_ms;
GG_TLS int gg_hook_active;
_Atomic int gg_inert;
GG_TLS uint8_t gg_cur_runtime;

static _Atomic int init_state; /* 0 = not started, 1 = running, 2 = done */
static GG_TLS uint32_t cached_tid;

static uint64_t mono_ms(void)
{
	/* COARSE: a few ns from the vDSO instead of ~20; a record's age only
	 * needs milliseconds, and the coarse clock ticks every 1-4 ms. */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t gg_now_ms(void)
{
	return mono_ms() - gg_start_ms;
}

uint32_t gg_gettid(void)
{
	if (GG_UNLIKELY(cached_tid == 0))
		cached_tid = (uint32_t)syscall(SYS_gettid);
	return cached_tid;
}

static void after_fork_child(void)
{
	/* The child starts with its own zero books: it holds no device memory
	 * (CUDA contexts do not survive fork) and shares no table with us. */
	cached_tid = 0;
	gg_ceiling_reset();
	gg_pool_reset();
	if (gg_table)
		gg_table_clear_unlocked(gg_table);
	gg_dump_after_fork_child();
	gg_vmm_reset();
	gg_shared_after_fork_child();
}

/* Our own gpuguard_version, not whichever the loader binds the name to. */
extern const char *gg_version_self(void) __attribute__((alias("gpuguard_version"), visibility("hidden")));

/* Another copy of the library governs this process when the process-wide
 * lookup of gpuguard_version finds one that is not ours: an earlier
 * preload, or the preload when a plugin brought its own copy (in any
 * RTLD_ mode: RTLD_DEFAULT is the global scope). Two copies that are both
 * loaded RTLD_LOCAL, and neither preloaded, cannot see each other this way
 * (README). Called once, from initialisation: under the loader's lock when
 * we are being loaded, as dlsym takes it. */
static char inert_msg[1024];

static int another_copy_governs(void)
{
	void *first = dlsym(RTLD_DEFAULT, "gpuguard_version"); /* RTLD_DEFAULT: not caller-relative */
	if (!first || first == (void *)gg_version_self)
		return 0;
	Dl_info them, us;
	int a = dladdr(first, &them), b = dladdr((void *)gg_version_self, &us);
	snprintf(inert_msg, sizeof inert_msg,
	         "two copies of libgpuguard are loaded: %s governs this process; this copy (%s) passes every call "
	         "through and installs nothing",
	         a && them.dli_fname ? them.dli_fname : "another", b && us.dli_fname ? us.dli_fname : "?");
	return 1;
}

/* The inert copy says so when a call first passes through it, not at
 * start-up: a process that never reaches a GPU prints nothing (issue 10,
 * finding 14), and one that does is told once. Returns 1 (pass through). */
int gg_inert_note(void)
{
	static _Atomic int said;
	/* relaxed: a once-only flag guarding a message */
	if (!atomic_exchange_explicit(&said, 1, memory_order_relaxed))
		gg_log(GG_LOG_WARN, "%s", inert_msg);
	return 1;
}

static void init_body(void)
{
	gg_start_ms = mono_ms();
	if (another_copy_governs()) {
		/* relaxed: read by every hook's re-entry check (gg_in_hook);
		 * nothing else of ours is set up to be published. */
		atomic_store_explicit(&gg_inert, 1, memory_order_relaxed);
		gg_ceiling_configure(); /* empty books, no ceiling: safe to read */
		return;
	}
	/* What this says (a bad value, the verbose configuration) is held
	 * until the first GPU call: a process that makes none prints nothing
	 * (issue 10, finding 14). A bad GPUGUARD_LIMIT still fails closed
	 * from here on (gg_opt.limit_bad). */
	gg_log_hold(1);
	gg_options_load();
	gg_ceiling_configure();
	gg_table = gg_table_create(gg_opt.table_slots);
	if (!gg_table)
		gg_log(GG_LOG_WARN,
		       "could not map the allocation table (%llu slots); "
		       "the ceiling still holds but frees cannot be refunded",
		       (unsigned long long)gg_opt.table_slots);
	if (gg_history_init(gg_opt.history) != 0)
		gg_log(GG_LOG_WARN, "could not map the history ring (%llu events); dumps will have no history",
		       (unsigned long long)gg_opt.history);
	gg_stack_init(gg_opt.stack_depth);
	pthread_atfork(NULL, NULL, after_fork_child);
	if (gg_opt.verbose)
		gg_options_print();
	gg_log_hold(0);
}

_Atomic int gg_gpu_called;

void gg_first_call_slow(void)
{
	/* A GPU entry resolved before initialisation finished (another
	 * library's constructor) waits for a later call: the lines are not
	 * held yet. acquire: pairs with init's release store, so the held
	 * lines are seen whole. */
	if (atomic_load_explicit(&init_state, memory_order_acquire) != 2)
		return;
	/* relaxed: the exchange only elects the one caller that releases the
	 * held lines; they were published by the acquire above. */
	if (!atomic_exchange_explicit(&gg_gpu_called, 1, memory_order_relaxed))
		gg_log_release();
}

int gg_hook_sleep(int dev, uint32_t seen, uint64_t deadline_ns)
{
	/* Asleep for room (ON_LIMIT=wait), a hook runs no driver code and
	 * holds no lock of ours: a signal handler that allocates now is not
	 * the driver re-entering us, so it must be governed, not passed
	 * through (issue 10, finding 9). The hook's per-thread state is put
	 * back afterwards: the handler's own hook sets and clears it. */
	int active = gg_hook_active;
	uint8_t runtime = gg_cur_runtime;
	uint16_t ctx = gg_cur_ctx;
	enum gpuguard_api req_api;
	uint64_t req_size;
	gg_dump_noted_request(&req_api, &req_size);
	gg_hook_active = 0;
	/* signal fences: a handler on this thread sees the stores above
	 * before the sleep begins, and ours below happen after it ends (no
	 * other thread reads these thread-local words). */
	atomic_signal_fence(memory_order_seq_cst);
	int rc = gg_ceiling_wait_sleep(dev, seen, deadline_ns);
	atomic_signal_fence(memory_order_seq_cst);
	gg_hook_active = active;
	gg_cur_runtime = runtime;
	gg_cur_ctx = ctx;
	gg_dump_note_request(req_api, req_size);
	return rc;
}

void gg_init_once(void)
{
	/* acquire: pairs with the release below, so whoever sees 2 sees the
	 * options, limits and table that init_body wrote. */
	if (GG_LIKELY(atomic_load_explicit(&init_state, memory_order_acquire) == 2))
		return;
	int expect = 0;
	/* acquire: one thread wins the right to initialise; the others spin. */
	if (atomic_compare_exchange_strong_explicit(&init_state, &expect, 1, memory_order_acquire,
	                                            memory_order_acquire)) {
		init_body();
		atomic_store_explicit(&init_state, 2, memory_order_release);
		return;
	}
	/* Another thread is initialising: it only parses the environment and
	 * maps memory, so this wait is short and cannot depend on us. */
	while (atomic_load_explicit(&init_state, memory_order_acquire) != 2)
		sched_yield();
}

__attribute__((constructor)) static void gg_constructor(void)
{
	gg_init_once();
}

GG_EXPORT const char *gpuguard_version(void)
{
	return GPUGUARD_VERSION;
}

GG_EXPORT int gpuguard_device_stats(int dev, struct gpuguard_device_stats *out)
{
	if (dev < 0 || dev >= GG_MAX_DEVICES || !out)
		return -1;
	gg_init_once();
	gg_ceiling_read(dev, out);
	return 0;
}

GG_EXPORT int gpuguard_table_stats(uint64_t *live, uint64_t *spilled)
{
	gg_init_once();
	if (!gg_table)
		return -1;
	if (live)
		*live = gg_table_live(gg_table);
	if (spilled)
		*spilled = gg_table_spilled(gg_table);
	return 0;
}
