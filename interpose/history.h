/* gpuguard: the history ring (history.c) and the peaks it keeps. */
#ifndef GG_HISTORY_H
#define GG_HISTORY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* The last GPUGUARD_HISTORY events (dump.h record "h"). Lock-free: any
 * number of writers, readers skip slots being rewritten. */
enum gg_hist_op { GG_HIST_ALLOC = 'a', GG_HIST_FREE = 'f', GG_HIST_REFUSE = 'r' };
struct gg_hist_event {
	uint64_t i; /* the event's place in the ring's order (gg_history_head) */
	uint64_t ms, p, s;
	uint32_t stack;
	uint16_t api;
	uint8_t op, dev;
};
/* Maps the ring once (capacity rounded up to a power of two). 0 or -1. */
int gg_history_init(uint64_t capacity);
uint64_t gg_history_capacity(void);
void gg_history_after_fork_child(void);
void gg_history_add(enum gg_hist_op op, int dev, enum gpuguard_api api, uint64_t p, uint64_t s, uint32_t stack);

/* The words every event moves, also with the ring off (history.c): read
 * and moved by the inline fast path below, so that an event that sets no
 * new peak while the ring is off calls nothing (issue 24: the two calls
 * per pair, with their frames, cost half of what the tracking did). */
#define GG_HIST_SITE_IDS (1u << 15) /* stack ids 1 .. 2^15 (stack.c), by id - 1 */
struct gg_history_words {
	/* site_live, ring and site_ids are set once by gg_history_init,
	 * before any event; never again while the process has other threads. */
	_Atomic int64_t *site_live; /* [dev][stack id - 1]: live bytes; NULL when unmapped */
	void *ring;                 /* the ring, NULL when GPUGUARD_HISTORY=0 */
	/* GG_HIST_SITE_IDS once site_live is mapped, else 0: the event's
	 * check of its stack id (1 .. this) is also the check of the map. */
	uint32_t site_ids;
	/* The process's live bytes by device as the events tell them, and
	 * their highest point (issue 11, finding 4). */
	_Atomic int64_t live[GG_MAX_DEVICES];
	_Atomic uint64_t peak[GG_MAX_DEVICES];
};
extern struct gg_history_words gg_history_words;
/* A time the caller does not have: the event reads the clock itself,
 * only when the ring records it. */
#define GG_HIST_NOW UINT64_MAX
/* An allocation's live bytes passed dev's peak: the peak, its time and
 * (1% past the last) the sites live at it. */
void gg_history_peak_slow(int dev, uint64_t live);
/* The ring's slot for one event; meta as gg_history_meta packs it. Four
 * arguments and no call inside, so that it needs no stack frame. */
void gg_history_ring_add(uint64_t meta, uint64_t p, uint64_t s, uint64_t ms);
/* The same at the time now (the clock read there, not in the caller: a
 * call in the inline path would cost its caller registers when the ring
 * is off). */
void gg_history_ring_add_now(uint64_t meta, uint64_t p, uint64_t s);
static inline uint64_t gg_history_meta(enum gg_hist_op op, int dev, enum gpuguard_api api, uint32_t stack)
{
	return (uint64_t)stack << 32 | (uint64_t)op << 24 | (uint64_t)(api & 0xffff) << 8 | (uint64_t)(dev & 0xff);
}

/* Moves the live counts by one event; returns the device's new live bytes
 * when they pass its peak (the slow path's business), else 0. dev is
 * below GG_MAX_DEVICES for an allocation or a free: the inline callers
 * pass a record's device, or the hook's, which the statistics stripes
 * have indexed already (issue 24: no check per event); gg_history_add
 * checks what other callers pass. */
static inline __attribute__((always_inline)) uint64_t gg_history_track(enum gg_hist_op op, int dev, uint64_t s,
                                                                       uint32_t stack)
{
	struct gg_history_words *w = &gg_history_words;
	if (op == GG_HIST_REFUSE)
		return 0;
	int64_t d = op == GG_HIST_FREE ? -(int64_t)s : (int64_t)s;
	/* Stack id 0 (no stack: every event with stacks off) has no row of
	 * its own: its bytes are the device's live bytes less the other rows,
	 * which the peak's snapshot works out (history.c, snap_peak). So with
	 * stacks off an event moves one word, not two (issue 24). relaxed: a
	 * sum of independent deltas; no other memory hangs on it. */
	uint32_t k = stack - 1; /* id 0: past any row */
	if (GG_LIKELY(k < w->site_ids))
		atomic_fetch_add_explicit(&w->site_live[(size_t)dev * GG_HIST_SITE_IDS + k], d, memory_order_relaxed);
	/* relaxed: as above. */
	int64_t now = atomic_fetch_add_explicit(&w->live[dev], d, memory_order_relaxed) + d;
	if (op == GG_HIST_FREE || now <= 0)
		return 0;
	/* relaxed: compared only; the slow path's CAS settles races. */
	uint64_t pk = atomic_load_explicit(&w->peak[dev], memory_order_relaxed);
	return (uint64_t)now > pk ? (uint64_t)now : 0;
}

/* An event, inline (dev as gg_history_track's): ms is its time (gg_now_ms's clock), or GG_HIST_NOW
 * for the ring to read the clock only if it records the event. An
 * allocation's caller read the clock for its record already and hands the
 * reading on (one clock read per event, issue 24). */
static inline __attribute__((always_inline)) void gg_history_event(enum gg_hist_op op, int dev, enum gpuguard_api api,
                                                                   uint64_t p, uint64_t s, uint32_t stack, uint64_t ms)
{
	uint64_t live = gg_history_track(op, dev, s, stack);
	if (GG_UNLIKELY(live != 0))
		gg_history_peak_slow(dev, live); /* the peak first, then the event */
	if (!gg_history_words.ring)
		return;
	if (ms == GG_HIST_NOW) /* a constant at every call site: the test folds */
		gg_history_ring_add_now(gg_history_meta(op, dev, api, stack), p, s);
	else
		gg_history_ring_add(gg_history_meta(op, dev, api, stack), p, s, ms);
}

/* Copies up to max whole events, oldest first. Returns how many. */
uint64_t gg_history_snapshot(struct gg_hist_event *out, uint64_t max);
/* Events claimed so far: a dump's cut is the moment this was read. An
 * allocation's event is claimed before its record enters the table. */
uint64_t gg_history_head(void);
uint64_t gg_history_dropped(void);
/* Bytes live by the events recorded (requested sizes, allocations minus
 * frees) on dev, and their highest point with when (ms since start): kept
 * even when the ring is off, for the dump's "peak" record (issue 11, 4). */
uint64_t gg_history_live(int dev);
void gg_history_peak(int dev, uint64_t *bytes, uint64_t *ms);
/* What was live at (within 1%, at least 1 MiB, of) dev's peak, by stack:
 * the largest GG_PEAK_SITES, as the growing thread copied them. -1 when
 * none was taken. Signal-safe (no locks, no allocation). */
#define GG_PEAK_SITES 16
struct gg_peak_sites {
	uint64_t bytes, ms; /* the live bytes and time of the snapshot */
	unsigned n;
	uint32_t st[GG_PEAK_SITES];
	uint64_t b[GG_PEAK_SITES];
};
int gg_history_peak_sites(int dev, struct gg_peak_sites *out);

#endif
