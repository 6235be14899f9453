/* gpuguard: start-up and the public API. Initialisation runs from our
 * constructor and, in case a CUDA call comes first (another library's
 * constructor), lazily from every hook. It reads the environment, maps the
 * table and the history ring, nothing more: no CUDA, no NVML, no locks a
 * driver could hold, no library loaded (libunwind comes at the first stack
 * capture, stack.c) and nothing printed (held until the first GPU call,
 * log.c). It only orchestrates: the words every layer reads are base.c's,
 * and what a lower layer must call up (tests/layers.txt) is handed down
 * from here. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sched.h>

#include "init.h"
#include "account.h"
#include "base.h"
#include "ceiling.h"
#include "dump.h"
#include "footprint.h"
#include "history.h"
#include "log.h"
#include "options.h"
#include "pool.h"
#include "resolve.h"
#include "shared.h"
#include "stack.h"
#include "table.h"
#include "vmm.h"

static void after_fork_child(void)
{
	/* The child starts with its own zero books: it holds no device memory
	 * (CUDA contexts do not survive fork) and shares no table with us. */
	gg_base_after_fork_child();
	gg_ceiling_reset();
	gg_footprint_reset();
	gg_pool_reset();
	if (gg_table)
		gg_table_clear_unlocked(gg_table);
	gg_dump_after_fork_child();
	gg_vmm_reset();
	gg_history_after_fork_child();
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
	void *first = gg_real_dlsym(RTLD_DEFAULT, "gpuguard_version"); /* RTLD_DEFAULT: not caller-relative */
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
	gg_start_ms = gg_coarse_ms();
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
	/* The layers above hand down what the ones below call up: the pod's
	 * binder to the ceiling, the admission path to the pools, the host
	 * sample to the pod's obituaries. */
	gg_ceiling_set_binder(gg_shared_bind);
	gg_pool_set_admit(gg_account_begin);
	gg_shared_set_host_sample(gg_dump_host_sample_armed);
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

void gg_init_once(void)
{
	/* acquire: pairs with the release below, so whoever sees 2 sees the
	 * options, limits and table that init_body wrote. */
	if (GG_LIKELY(atomic_load_explicit(&gg_init_state, memory_order_acquire) == 2))
		return;
	int expect = 0;
	/* acquire: one thread wins the right to initialise; the others spin. */
	if (atomic_compare_exchange_strong_explicit(&gg_init_state, &expect, 1, memory_order_acquire,
	                                            memory_order_acquire)) {
		init_body();
		atomic_store_explicit(&gg_init_state, 2, memory_order_release);
		return;
	}
	/* Another thread is initialising: it only parses the environment and
	 * maps memory, so this wait is short and cannot depend on us. */
	while (atomic_load_explicit(&gg_init_state, memory_order_acquire) != 2)
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

GG_EXPORT int gpuguard_device_runtime(int dev, uint64_t *charged)
{
	if (dev < 0 || dev >= GG_MAX_DEVICES || !charged)
		return -1;
	gg_init_once();
	struct gg_footprint_stats fs;
	gg_footprint_read(dev, &fs);
	*charged = fs.charged;
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
