/* gpuguard: the one place that prints. Messages are formatted into a stack
 * buffer (no malloc), written with one write(2) to fd 2, and rate-limited so
 * a retry loop in the host cannot flood its logs. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "base.h"

#define LOG_BURST 20 /* messages per second before we start dropping */

static _Atomic uint64_t log_window; /* second of the current window */
static _Atomic uint32_t log_count;  /* messages printed in that window */
static _Atomic uint64_t log_dropped;

/* Held lines (issue 10, finding 14): what initialisation has to say (a bad
 * option value, GPUGUARD_VERBOSE's configuration) waits here until the
 * process's first GPU call, so a shell or a probe in the same container
 * prints nothing. Only the initialising thread appends (while `holding` is
 * set on it), before init.c's release store that publishes initialisation;
 * gg_log_release runs after the matching acquire, so it reads the lines
 * whole without further ordering. */
static GG_TLS int holding;
static char held[8192];
static size_t held_len;
static _Atomic int released;

void gg_log_hold(int on)
{
	holding = on;
}

void gg_log_release(void)
{
	/* relaxed: the exchange only picks the one caller that writes; the
	 * lines themselves were published by initialisation (see above). */
	if (held_len == 0 || atomic_exchange_explicit(&released, 1, memory_order_relaxed))
		return;
	ssize_t w = write(2, held, held_len);
	(void)w; /* nowhere to report a failed report */
}

_Atomic int gg_gpu_called;

void gg_first_call_slow(void)
{
	/* A GPU entry resolved before initialisation finished (another
	 * library's constructor) waits for a later call: the lines are not
	 * held yet. acquire: pairs with init's release store, so the held
	 * lines are seen whole. */
	if (atomic_load_explicit(&gg_init_state, memory_order_acquire) != 2)
		return;
	/* relaxed: the exchange only elects the one caller that releases the
	 * held lines; they were published by the acquire above. */
	if (!atomic_exchange_explicit(&gg_gpu_called, 1, memory_order_relaxed))
		gg_log_release();
}

static int log_admit(void)
{
	uint64_t now = gg_coarse_ms() / 1000;
	uint64_t w = atomic_load_explicit(&log_window, memory_order_relaxed);
	/* relaxed throughout: this is a heuristic counter, no data is published
	 * through it; a race can only let a message or two more through. */
	if (w != now &&
	    atomic_compare_exchange_strong_explicit(&log_window, &w, now, memory_order_relaxed, memory_order_relaxed))
		atomic_store_explicit(&log_count, 0, memory_order_relaxed);
	if (atomic_fetch_add_explicit(&log_count, 1, memory_order_relaxed) < LOG_BURST)
		return 1;
	atomic_fetch_add_explicit(&log_dropped, 1, memory_order_relaxed);
	return 0;
}

uint64_t gg_log_dropped(void)
{
	return atomic_load_explicit(&log_dropped, memory_order_relaxed); /* a statistic */
}

void gg_log(enum gg_log_level level, const char *fmt, ...)
{
	if (!holding && !log_admit())
		return;
	char buf[1024];
	static const char *const prefix[] = {"gpuguard: ", "gpuguard: warning: ", "gpuguard: error: "};
	size_t n = strlen(prefix[level]);
	memcpy(buf, prefix[level], n);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += (size_t)m < sizeof(buf) - n - 1 ? (size_t)m : sizeof(buf) - n - 2;
	buf[n++] = '\n';
	if (holding) {
		if (held_len + n <= sizeof(held)) {
			memcpy(held + held_len, buf, n);
			held_len += n;
		}
		return;
	}
	ssize_t w = write(2, buf, n);
	(void)w; /* nowhere to report a failed report */
}

const char *gg_log_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (bytes == GG_UNLIMITED) {
		snprintf(buf, len, "unlimited");
		return buf;
	}
	int u = 0;
	double v = (double)bytes;
	while (v >= 1024.0 && u < 6) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	return buf;
}
