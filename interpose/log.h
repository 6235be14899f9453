/* gpuguard: the log (log.c): one rate-limited line to stderr, and the lines
 * initialisation holds back until the first GPU call. */
#ifndef GG_LOG_H
#define GG_LOG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

enum gg_log_level { GG_LOG_INFO, GG_LOG_WARN, GG_LOG_ERROR };
/* Formats into a stack buffer and write(2)s one line to fd 2, rate-limited. */
void gg_log(enum gg_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* While on (only initialisation turns it on, on its own thread), gg_log
 * keeps lines instead of writing them; gg_log_release writes what was kept,
 * once, at the process's first GPU call (issue 10, finding 14). */
void gg_log_hold(int on);
void gg_log_release(void);
/* Lines the rate limit dropped (for the dump's end record). */
uint64_t gg_log_dropped(void);
/* Formats a byte count as "20.0 GiB" into buf. Returns buf. */
const char *gg_log_bytes(char *buf, size_t len, uint64_t bytes);
/* The first GPU call (the first hook to enter, or the first real entry
 * point resolved or handed to the application) writes what initialisation
 * held back, once. relaxed: a once-set flag; the slow path acquires
 * initialisation before it reads the held lines. */
extern _Atomic int gg_gpu_called;
void gg_first_call_slow(void);
static inline void gg_first_call(void)
{
	if (GG_UNLIKELY(!atomic_load_explicit(&gg_gpu_called, memory_order_relaxed)))
		gg_first_call_slow();
}

#endif
