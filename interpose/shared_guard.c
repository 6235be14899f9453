/* gpuguard: pod scope's SIGBUS guard: a region file truncated under us
 * costs this process the pod's budget, never its life. */
#define _GNU_SOURCE
#include "shared_guard.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ceiling.h"
#include "options.h"
#include "signal.h"

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
static _Atomic int guard_state;  /* 0 none, 1 installing, 2 installed */
void *_Atomic gg_shared_guarded; /* the mapping the handler answers for, or NULL */
_Atomic int gg_shared_lost;

static void say(const char *s)
{
	ssize_t w = write(2, s, strlen(s));
	(void)w; /* nowhere to report a failed report */
}

/* The region is gone for this process: its own books from now on. Safe in
 * the handler and in any thread; the first caller says so. */
void gg_shared_lose_region(void)
{
	/* seq_cst: elects the one caller that says so. The Dekker pair with a
	 * binder that publishes a pod budget, then reads whether the pod was
	 * lost, is gg_ceiling_lose_pod's (ceiling.c). */
	if (atomic_exchange_explicit(&gg_shared_lost, 1, memory_order_seq_cst))
		return;
	/* release: later hooks acquire the state (gg_shared_attached()) and bind new
	 * devices to their own books; nothing else is published. */
	atomic_store_explicit(&gg_shared_attach_state, ATTACH_FAILED, memory_order_release);
	gg_ceiling_lose_pod();
	say("gpuguard: error: pod region ");
	say(gg_opt.shared_path ? gg_opt.shared_path : "?");
	say(": truncated, shrunk or written afresh while in use; this process stops using it and keeps a "
	    "per-process ceiling, with what it holds (as GPUGUARD_SCOPE=process)\n");
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	/* acquire: pairs with the release after the mmap in attach_locked */
	char *base = atomic_load_explicit(&gg_shared_guarded, memory_order_acquire);
	char *a = si ? (char *)si->si_addr : NULL;
	if (base && si && si->si_code > 0 && a >= base && a < base + GPUGUARD_REGION_SIZE) {
		int saved = errno;
		void *m = mmap(base, GPUGUARD_REGION_SIZE, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (m == base) {
			gg_shared_lose_region();
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
int gg_shared_guard_install(void)
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