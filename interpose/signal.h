/* gpuguard: the application's signal handlers, through our dispatcher
 * (signal.c). */
#ifndef GG_SIGNAL_H
#define GG_SIGNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* glibc's sigaction, bypassing ours: for our own handlers (dump signal,
 * SIGBUS guard), which keep the kernel's view and chain as before. */
struct sigaction;
int gg_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/* Set while a signal handler runs that interrupted a hook on this thread
 * (gg_hook_active was set): the interrupted hook may hold our locks or be
 * inside the driver, so an allocation the handler makes is refused, never
 * passed through uncharged (issue 10, finding 9). */
#define gg_sig_nested (gg_self.sig_nested) /* base.h */
/* Such refusals, process-wide. */
extern _Atomic uint64_t gg_sig_refusals;
/* Counts one refusal (an atomic add only) and returns oom. */
int gg_sig_refused(int oom);
/* The fatal paths a dump in flight must outlive (issue 25, finding 6):
 * SIGABRT, SIGSEGV and SIGBUS, and _exit/_Exit. From then on each of them
 * calls fn first (async-signal-safe, bounded: dump.c's wait), then goes on
 * as it would have: the application's handler, the default action (the
 * signal raised again), or the real _exit. Where the application left such
 * a signal at its default, our dispatcher takes the kernel's entry and
 * every answer still says SIG_DFL. */
void gg_sig_watch_fatal(void (*fn)(int sig));
/* First thing in every allocating hook, before the re-entry check: in a
 * handler that interrupted a hook, answer the API's out-of-memory code
 * without calling the driver. */
#define GG_SIG_REFUSE(oom)                          \
	do {                                        \
		if (GG_UNLIKELY(gg_sig_nested))     \
			return gg_sig_refused(oom); \
	} while (0)

#endif
