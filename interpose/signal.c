/* gpuguard: the application's signal handlers, run through one of ours
 * (issue 10, finding 9). A hook marks its thread (gg_hook_active) so that a
 * runtime calling its own entry points from inside our real call passes
 * straight through. A signal handler that runs on that thread meanwhile is
 * no such call: an allocation it makes would pass uncharged. So every
 * handler the application installs is installed as our dispatcher, which
 * looks at the interrupted thread: outside a hook it calls the handler with
 * nothing changed; inside one it marks the thread for the handler's
 * duration, and an allocating hook then refuses (gg_sig_refused) without
 * calling the driver, since the interrupted hook may hold our locks or be
 * inside the driver itself.
 *
 * What the application sees of its signals stays what it set: the kernel
 * gets exactly its mask and flags (SA_SIGINFO added, for the three
 * arguments), and every answer (oldact, a query, signal()'s return) is the
 * kernel's own with the application's handler and SA_SIGINFO bit put back
 * where the kernel holds our dispatcher. Everything else therefore stays
 * the kernel's: a delivery with SA_RESETHAND resets the kernel's entry to
 * SIG_DFL, so the next query answers SIG_DFL; siginterrupt and system(),
 * which change a disposition through glibc's internal sigaction, keep our
 * dispatcher and are seen as they changed it.
 *
 * The fatal paths (issue 25, finding 6): SIGABRT, SIGSEGV and SIGBUS (left
 * at their default, the dispatcher takes them too, answering SIG_DFL), and
 * _exit/_Exit, first let a dump in flight finish (gg_sig_watch_fatal). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "signal.h"
#include "base.h"
#include "resolve.h"

/* A sanitizer runtime preloaded ahead of us installs its handlers through
 * us while it initialises, before its shadow memory exists: that path is
 * not instrumented (as in hook_dlsym.c). */
#define GG_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef int (*siginterrupt_fn)(int, int);
typedef void (*handler3_fn)(int, siginfo_t *, void *);
typedef void (*handler1_fn)(int);

/* glibc exports these without declaring them (bsd_signal only for old
 * standards). */
int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
sighandler_t bsd_signal(int sig, sighandler_t handler);

#define NSIGS 65 /* 1 .. 64: Linux's signals on x86-64 and aarch64 */

/* The application's handler for each signal whose kernel entry may hold our
 * dispatcher. Written (under the install lock) before the kernel is given
 * the dispatcher, and never cleared: a delivery already under way when the
 * application changes its handler runs one or the other, as it would
 * without us. The dispatcher calls every handler with all three
 * arguments, whichever kind it is: the calling conventions of both
 * architectures make that harmless for a one-argument handler (the kernel
 * itself does it on x86-64), and it leaves no pointer-and-kind pair that a
 * concurrent install could tear. The kind (siginfo) serves the answers. */
static struct {
	void *_Atomic fn;
	_Atomic int siginfo;
	/* Our last install of this signal gave the kernel a SA_SIGINFO the
	 * application did not ask for: after a SA_RESETHAND delivery the
	 * kernel's SIG_DFL entry still carries it (the kernel resets the
	 * handler, not the flags). Under the install lock only. */
	int added_info;
} slots[NSIGS];

/* glibc's _sigintr as siginterrupt leaves it, which signal() reads for
 * SA_RESTART: ours is a copy kept by our siginterrupt. */
static _Atomic uint64_t intr_mask; /* bit sig - 1 */

_Atomic uint64_t gg_sig_refusals;

static void *_Atomic real_sigaction_ptr, *_Atomic real_siginterrupt_ptr, *_Atomic real_exit_ptr;

/* The fatal paths' first step (dump.c's bounded wait), once armed. */
static void (*_Atomic fatal_fn)(int);

static int is_fatal(int sig)
{
	return sig == SIGABRT || sig == SIGSEGV || sig == SIGBUS;
}

/* The kernel holds our dispatcher for a fatal signal the application left
 * at its default (bit sig - 1): the dispatcher then ends the process as
 * the default would, and answers say SIG_DFL. */
static _Atomic uint64_t fatal_default;

/* The next definition after ours, resolved at first use: a sanitizer
 * runtime preloaded ahead of us can install handlers before our constructor
 * runs. dlvsym is not ours (dlsym is), and the versions are each
 * architecture's first, which every glibc since 2.17 has. The constructor
 * below resolves both, so that a first call from a signal handler finds
 * them ready. */
GG_NO_SANITIZE static void *next_fn(void *_Atomic *slot, const char *name)
{
	/* acquire: pairs with the release below; the pointer is plain data
	 * (every resolver stores the same value). */
	void *p = atomic_load_explicit(slot, memory_order_acquire);
	if (GG_UNLIKELY(!p)) {
		static const char *const versions[] = {"GLIBC_2.2.5", "GLIBC_2.17"};
		for (unsigned i = 0; i < sizeof versions / sizeof versions[0] && !p; i++)
			p = dlvsym(RTLD_NEXT, name, versions[i]);
		atomic_store_explicit(slot, p, memory_order_release);
	}
	return p;
}

GG_NO_SANITIZE int gg_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	sigaction_fn f = (sigaction_fn)next_fn(&real_sigaction_ptr, "sigaction");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(sig, act, old);
}

/* A fork child has only the forking thread, which held no install lock. */
static void after_fork_child(void);

__attribute__((constructor)) static void resolve_early(void)
{
	next_fn(&real_sigaction_ptr, "sigaction");
	next_fn(&real_siginterrupt_ptr, "siginterrupt");
	next_fn(&real_exit_ptr, "_exit"); /* ready before a vfork child needs it */
	pthread_atfork(NULL, NULL, after_fork_child);
}

int gg_sig_refused(int oom)
{
	/* relaxed: a statistic; the handler may have interrupted anything of
	 * ours, so an atomic add is all it may do here. */
	atomic_fetch_add_explicit(&gg_sig_refusals, 1, memory_order_relaxed);
	return oom;
}

/* Not instrumented either: under ThreadSanitizer the kernel calls this
 * before the runtime's own handler, at any instruction of the runtime. */
GG_NO_SANITIZE static void dispatch(int sig, siginfo_t *info, void *uc)
{
	if (sig <= 0 || sig >= NSIGS)
		return;
	if (is_fatal(sig)) {
		/* acquire: pairs with the release store in gg_sig_watch_fatal. */
		void (*f)(int) = atomic_load_explicit(&fatal_fn, memory_order_acquire);
		if (f)
			f(sig);
		/* acquire: pairs with the release in watch_one/install; a bit set
		 * means the application's disposition is the default. */
		if (atomic_load_explicit(&fatal_default, memory_order_acquire) >> (sig - 1) & 1) {
			/* The default action, as without us: the kernel's entry back
			 * to SIG_DFL, then a fault returns to its instruction and
			 * faults again, and a sent signal (abort, kill) is sent again,
			 * pending until this handler returns (it is blocked here). */
			struct sigaction dfl;
			memset(&dfl, 0, sizeof dfl);
			dfl.sa_handler = SIG_DFL;
			gg_real_sigaction(sig, &dfl, NULL);
			if (!info || info->si_code <= 0)
				raise(sig);
			return;
		}
	}
	/* acquire: pairs with the release store in install(), so a handler
	 * the kernel got us for is seen. */
	handler3_fn fn = (handler3_fn)atomic_load_explicit(&slots[sig].fn, memory_order_acquire);
	if (!fn)
		return; /* unreachable: the slot is filled before the kernel points here */
	if (!gg_hook_active) {
		/* Not inside a hook (a hook asleep for room counts as outside,
		 * gg_hook_sleep): the handler's calls are governed as any. */
		fn(sig, info, uc);
		return;
	}
	/* Inside a hook. The re-entry flag stays set, so the handler's other
	 * GPU calls pass through as they did, before they touch any other
	 * per-thread state of the hook (its context id, its noted request);
	 * its allocations are refused (gg_sig_nested). The flags are put back
	 * afterwards, in case the handler's calls changed them. */
	int nested = gg_sig_nested;
	uint8_t runtime = gg_cur_runtime;
	gg_sig_nested = 1;
	/* signal fences: the handler (this thread only) sees the mark before
	 * it runs, and the state below is put back after it returns. */
	atomic_signal_fence(memory_order_seq_cst);
	fn(sig, info, uc);
	atomic_signal_fence(memory_order_seq_cst);
	gg_hook_active = 1;
	gg_cur_runtime = runtime;
	gg_sig_nested = nested;
}

/* One installer at a time, so that an answer's old handler and the slot
 * stay paired. Taken with every signal blocked (restored at unlock), so a
 * handler on this thread can never find it held by the code it
 * interrupted; a handler on another thread waits for a short section. */
static _Atomic int install_lock;

static void after_fork_child(void)
{
	/* relaxed: one thread is left */
	atomic_store_explicit(&install_lock, 0, memory_order_relaxed);
}

GG_NO_SANITIZE static void lock(sigset_t *saved)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, saved);
	/* acquire: pairs with the release in unlock; the slots and the kernel
	 * entry the last holder wrote are seen. */
	while (atomic_exchange_explicit(&install_lock, 1, memory_order_acquire))
		sched_yield();
}

GG_NO_SANITIZE static void unlock(const sigset_t *saved)
{
	/* release: our slot writes before the next holder's reads. */
	atomic_store_explicit(&install_lock, 0, memory_order_release);
	pthread_sigmask(SIG_SETMASK, saved, NULL);
}

GG_NO_SANITIZE static int is_handler(const struct sigaction *a)
{
	return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

/* The kernel's answer k, as the application would have had it without us:
 * where k names our dispatcher, the application's handler (prev_fn,
 * prev_info: the slot as it was before this call) and SA_SIGINFO bit. */
GG_NO_SANITIZE static void answer(struct sigaction *k, void *prev_fn, int prev_info, int prev_added, int prev_dfl)
{
	if (!(k->sa_flags & SA_SIGINFO))
		return;
	if (k->sa_sigaction == dispatch && prev_dfl) {
		/* ours alone, for a fatal signal left at its default */
		memset(k, 0, sizeof *k);
		k->sa_handler = SIG_DFL;
		return;
	}
	if (k->sa_handler == SIG_DFL && (k->sa_flags & SA_RESETHAND) && prev_added) {
		k->sa_flags &= ~SA_SIGINFO; /* reset at a delivery: the flag was ours */
		return;
	}
	if (k->sa_sigaction != dispatch)
		return;
	if (prev_info) {
		k->sa_sigaction = (handler3_fn)prev_fn;
	} else {
		k->sa_flags &= ~SA_SIGINFO;
		k->sa_handler = (handler1_fn)prev_fn;
	}
}

/* sigaction as the application's handlers see it through us. */
GG_NO_SANITIZE static int install(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (sig <= 0 || sig >= NSIGS ||
	    (!old && (!act || !is_handler(act)) &&
	     /* relaxed: a fatal signal we hold for its default goes the locked way */
	     !(atomic_load_explicit(&fatal_default, memory_order_relaxed) >> (sig - 1) & 1)))
		return gg_real_sigaction(sig, act, old); /* glibc's own checks; nothing of ours involved */
	sigset_t saved;
	lock(&saved);
	/* relaxed: under the lock, which ordered the last writer's stores */
	void *prev_fn = atomic_load_explicit(&slots[sig].fn, memory_order_relaxed);
	int prev_info = atomic_load_explicit(&slots[sig].siginfo, memory_order_relaxed);
	int prev_added = slots[sig].added_info;
	/* relaxed: under the lock, as the slot */
	int prev_dfl = (int)(atomic_load_explicit(&fatal_default, memory_order_relaxed) >> (sig - 1) & 1);
	struct sigaction k, mine;
	const struct sigaction *give = act;
	if (act && is_handler(act)) {
		/* The slot first, then the kernel: a delivery that finds the
		 * dispatcher finds this handler (or the one it replaces).
		 * relaxed: the kind is read under the lock only. */
		atomic_store_explicit(&slots[sig].siginfo, (act->sa_flags & SA_SIGINFO) != 0, memory_order_relaxed);
		/* release: pairs with the acquire in dispatch, for whatever the
		 * handler's code reads that the installer wrote before. */
		atomic_store_explicit(
		    &slots[sig].fn, (act->sa_flags & SA_SIGINFO) ? (void *)act->sa_sigaction : (void *)act->sa_handler,
		    memory_order_release);
		mine = *act;
		mine.sa_flags |= SA_SIGINFO;
		mine.sa_sigaction = dispatch;
		give = &mine;
	}
	int rc = gg_real_sigaction(sig, give, &k);
	int err = errno;
	if (rc == 0 && act)
		slots[sig].added_info = give == &mine && !(act->sa_flags & SA_SIGINFO);
	if (rc == 0 && act && prev_dfl) /* the application's own disposition from now on; relaxed: under the lock */
		atomic_fetch_and_explicit(&fatal_default, ~(1ull << (sig - 1)), memory_order_relaxed);
	if (rc != 0 && give == &mine) {
		/* The kernel kept its entry: so does the slot. */
		atomic_store_explicit(&slots[sig].siginfo, prev_info, memory_order_relaxed);
		atomic_store_explicit(&slots[sig].fn, prev_fn, memory_order_release); /* release: as above */
	}
	unlock(&saved);
	if (rc == 0 && old) {
		answer(&k, prev_fn, prev_info, prev_added, prev_dfl);
		*old = k;
	}
	errno = err;
	return rc;
}

/* Our sigaction, called directly by the installers below as glibc's call
 * its internal one: an interposer ahead of us (a sanitizer runtime) sees
 * them no more than it would without us. */
GG_NO_SANITIZE static int ours(int sig, const struct sigaction *act, struct sigaction *old)
{
	/* relaxed: a once-set flag (see gg_in_hook). An inert copy changes
	 * nothing: the governing copy dispatches. */
	if (atomic_load_explicit(&gg_inert, memory_order_relaxed))
		return gg_real_sigaction(sig, act, old);
	return install(sig, act, old);
}

GG_NO_SANITIZE GG_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return ours(sig, act, old);
}

GG_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return ours(sig, act, old);
}

/* What signal() and sysv_signal() share: handler for sig with flags, the
 * signal itself blocked in its handler where block_self, through our
 * sigaction; the old handler, or SIG_ERR. */
static sighandler_t simple(int sig, sighandler_t handler, int flags, int block_self)
{
	if (handler == SIG_ERR || sig < 1 || sig >= NSIGS) {
		errno = EINVAL;
		return SIG_ERR;
	}
	struct sigaction act, old;
	memset(&act, 0, sizeof act);
	act.sa_handler = handler;
	sigemptyset(&act.sa_mask);
	if (block_self)
		sigaddset(&act.sa_mask, sig);
	act.sa_flags = flags;
	if (ours(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* glibc's signal(), bsd_signal() and ssignal() (one function there): the
 * signal itself blocked in its handler, SA_RESTART unless siginterrupt
 * said otherwise. */
static sighandler_t bsd(int sig, sighandler_t handler)
{
	/* relaxed: siginterrupt's copy, ordered by the caller's own program */
	int intr = sig >= 1 && sig < NSIGS && (atomic_load_explicit(&intr_mask, memory_order_relaxed) >> (sig - 1)) & 1;
	return simple(sig, handler, intr ? 0 : SA_RESTART, 1);
}

GG_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	return bsd(sig, handler);
}

GG_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return bsd(sig, handler);
}

GG_EXPORT sighandler_t ssignal(int sig, sighandler_t handler)
{
	return bsd(sig, handler);
}

/* glibc's sysv_signal: reset to the default at delivery, not blocked in its
 * own handler, system calls interrupted. SA_INTERRUPT (no meaning to Linux,
 * which clears it on x86-64 but not under every emulator) as glibc sets it,
 * so that the answers read back as they would without us. */
static sighandler_t sysv(int sig, sighandler_t handler)
{
	return simple(sig, handler, SA_RESETHAND | SA_NODEFER | SA_INTERRUPT, 0);
}

GG_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	return sysv(sig, handler);
}

GG_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
	return sysv(sig, handler);
}

/* glibc's sigset, step by step: SIG_HOLD blocks, anything else installs
 * with an empty mask and no flags and unblocks; the answer is SIG_HOLD
 * where the signal was blocked before. */
GG_EXPORT sighandler_t sigset(int sig, sighandler_t disp)
{
	if (sig < 1 || sig >= NSIGS) {
		errno = EINVAL;
		return SIG_ERR;
	}
	sigset_t set, oset;
	sigemptyset(&set);
	sigaddset(&set, sig);
	struct sigaction act, old;
	if (disp == SIG_HOLD) {
		if (sigprocmask(SIG_BLOCK, &set, &oset) < 0)
			return SIG_ERR;
		if (sigismember(&oset, sig))
			return SIG_HOLD;
		if (ours(sig, NULL, &old) < 0)
			return SIG_ERR;
		return old.sa_handler;
	}
	memset(&act, 0, sizeof act);
	act.sa_handler = disp;
	sigemptyset(&act.sa_mask);
	if (ours(sig, &act, &old) < 0)
		return SIG_ERR;
	if (sigprocmask(SIG_UNBLOCK, &set, &oset) < 0)
		return SIG_ERR;
	return sigismember(&oset, sig) ? SIG_HOLD : old.sa_handler;
}

/* glibc's siginterrupt changes the kernel's flags through its internal
 * sigaction (keeping our dispatcher), and records the choice for signal():
 * we keep the same record for ours. */
GG_EXPORT int siginterrupt(int sig, int flag)
{
	siginterrupt_fn f = (siginterrupt_fn)next_fn(&real_siginterrupt_ptr, "siginterrupt");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	int rc = f(sig, flag);
	if (rc == 0 && sig > 0 && sig < NSIGS) {
		/* relaxed: read by signal() on the caller's own order */
		if (flag)
			atomic_fetch_or_explicit(&intr_mask, 1ull << (sig - 1), memory_order_relaxed);
		else
			atomic_fetch_and_explicit(&intr_mask, ~(1ull << (sig - 1)), memory_order_relaxed);
	}
	return rc;
}

/* ---- the fatal paths ---- */

/* Takes the kernel's entry for a fatal signal left at its default. Under
 * the install lock, so an application's sigaction racing it wins or comes
 * after, never half. */
static void watch_one(int sig)
{
	sigset_t saved;
	lock(&saved);
	struct sigaction cur;
	if (gg_real_sigaction(sig, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL) {
		struct sigaction mine;
		memset(&mine, 0, sizeof mine);
		mine.sa_sigaction = dispatch;
		/* SA_ONSTACK: a stack overflow's SIGSEGV runs on the thread's
		 * alternate stack where it has one (without, the kernel kills as
		 * the default would). The mask is empty, as the default's. */
		mine.sa_flags = SA_SIGINFO | SA_ONSTACK;
		sigemptyset(&mine.sa_mask);
		/* release: the bit before the kernel points at us (dispatch's
		 * acquire); relaxed would do under the lock for install(). */
		atomic_fetch_or_explicit(&fatal_default, 1ull << (sig - 1), memory_order_release);
		if (gg_real_sigaction(sig, &mine, NULL) != 0)
			atomic_fetch_and_explicit(&fatal_default, ~(1ull << (sig - 1)), memory_order_relaxed);
	}
	unlock(&saved);
}

void gg_sig_watch_fatal(void (*fn)(int sig))
{
	/* release: dispatch and _exit see the function whole. */
	atomic_store_explicit(&fatal_fn, fn, memory_order_release);
	watch_one(SIGABRT);
	watch_one(SIGSEGV);
	watch_one(SIGBUS);
}

typedef void (*exit_fn)(int);

/* _exit and _Exit (the same in glibc), called by the application: a
 * CUDA_CHECK that ends in _exit, or a fork child. The dump in flight
 * first, then the real one. */
static __attribute__((noreturn)) void exit_now(int status)
{
	/* acquire: as in dispatch */
	void (*f)(int) = atomic_load_explicit(&fatal_fn, memory_order_acquire);
	if (f)
		f(0);
	/* acquire: resolved by the constructor; plain data after. */
	exit_fn real = (exit_fn)atomic_load_explicit(&real_exit_ptr, memory_order_acquire);
	if (real)
		real(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

GG_EXPORT void _exit(int status)
{
	exit_now(status);
}

GG_EXPORT void _Exit(int status)
{
	exit_now(status);
}
