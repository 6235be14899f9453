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
/* An allocation's event at ms (gg_now_ms's clock): the caller read the clock
 * for its record already and hands the reading on, so the event reads none
 * (one clock read per event, issue 24). Six arguments, as gg_history_add,
 * so that neither needs a stack frame on the way through. */
void gg_history_alloc_at(int dev, enum gpuguard_api api, uint64_t p, uint64_t s, uint32_t stack, uint64_t ms);
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
