/* gpuguard: the recent-events ring a dump draws its timeline from. Fixed
 * capacity, mapped once at init, no locks: a writer claims an index with one
 * fetch_add and publishes its slot with a per-slot sequence (a seqlock per
 * slot), so a dump reading concurrently skips slots being rewritten. */
#include <string.h>
#include <sys/mman.h>

#include "history.h"
#include "base.h"
#include "stack.h"

struct gg_hist_slot {
	/* 2i+1 while event i is written, 2i+2 once it is whole; 0 = never. */
	_Atomic uint64_t seq;
	/* The payload is atomics only so that the race the seqlock resolves is
	 * not a data race in C11 terms (and TSan agrees); all are relaxed. */
	_Atomic uint64_t ms;
	_Atomic uint64_t p;
	_Atomic uint64_t s;
	_Atomic uint64_t meta; /* stack << 32 | op << 24 | api << 8 | dev */
};

struct gg_history_words gg_history_words;

/* The ring, typed (gg_history_words.ring). */
static inline struct gg_hist_slot *ring_slots(void)
{
	return gg_history_words.ring;
}
static uint64_t ring_mask;
static _Atomic uint64_t ring_head; /* next index to claim */
static _Atomic uint64_t ring_dropped;

/* The process's live bytes by device as the events tell them, and their
 * highest point (gg_history_words, history.h), with its time: what was
 * live at the GPU peak is reconstructed from these and the ring (issue 11,
 * finding 4). */
static _Atomic uint64_t peak_ms_by_dev[GG_MAX_DEVICES];

/* Live bytes by device and stack id, so that a dump carries what was live
 * at the peak even when the history has long wrapped (issue 11, finding
 * 4): one more relaxed add per event. Mapped once, untouched pages cost
 * nothing. At each new peak that is 1% (at least 1 MiB) above the last
 * snapshot, the growing thread copies the largest GG_PEAK_SITES of its
 * device: at most some hundreds of scans in a process's life. */
#define SITE_IDS GG_HIST_SITE_IDS
static struct peak_snap {
	_Atomic uint64_t seq; /* odd while being written; the writer holds it */
	_Atomic uint64_t bytes, ms, n;
	_Atomic uint64_t st[GG_PEAK_SITES], b[GG_PEAK_SITES];
} psnap[GG_MAX_DEVICES];

__attribute__((noinline)) static void snap_peak(int dev, uint64_t v)
{
	struct peak_snap *ps = &psnap[dev];
	uint64_t last = atomic_load_explicit(&ps->bytes, memory_order_relaxed);
	uint64_t step = last / 100 > (1u << 20) ? last / 100 : (1u << 20);
	if (v < last + step && last)
		return;
	uint64_t seq = atomic_load_explicit(&ps->seq, memory_order_relaxed);
	/* relaxed CAS to odd: one writer at a time; a thread that loses skips
	 * this snapshot (the next growth takes one). The release fence orders
	 * the odd seq before the payload stores, as in the history ring. */
	if ((seq & 1) || !atomic_compare_exchange_strong_explicit(&ps->seq, &seq, seq + 1, memory_order_relaxed,
	                                                          memory_order_relaxed))
		return;
	atomic_thread_fence(memory_order_release);
	uint64_t top_st[GG_PEAK_SITES], top_b[GG_PEAK_SITES];
	unsigned n = 0;
	uint32_t ids = gg_stack_ids();
	const _Atomic int64_t *row = gg_history_words.site_live + (size_t)dev * SITE_IDS;
	/* Stack id 0 has no row (gg_history_track): its bytes are v less the
	 * other rows. */
	int64_t rest = (int64_t)v;
	for (uint32_t id = 1; id <= ids && id <= SITE_IDS; id++)
		/* relaxed: other threads move these meanwhile; the snapshot is
		 * a blend of nearby moments, which the report says. */
		rest -= atomic_load_explicit(&row[id - 1], memory_order_relaxed);
	for (uint32_t id = 0; id <= ids && id <= SITE_IDS; id++) {
		/* relaxed: as above */
		int64_t b = id ? atomic_load_explicit(&row[id - 1], memory_order_relaxed) : rest;
		if (b <= 0 || (n == GG_PEAK_SITES && (uint64_t)b <= top_b[n - 1]))
			continue;
		unsigned j = n < GG_PEAK_SITES ? n++ : n - 1;
		while (j > 0 && top_b[j - 1] < (uint64_t)b) {
			top_b[j] = top_b[j - 1], top_st[j] = top_st[j - 1];
			j--;
		}
		top_b[j] = (uint64_t)b, top_st[j] = id;
	}
	for (unsigned k = 0; k < n; k++) {
		atomic_store_explicit(&ps->st[k], top_st[k], memory_order_relaxed);
		atomic_store_explicit(&ps->b[k], top_b[k], memory_order_relaxed);
	}
	atomic_store_explicit(&ps->n, n, memory_order_relaxed);
	atomic_store_explicit(&ps->bytes, v, memory_order_relaxed);
	atomic_store_explicit(&ps->ms, gg_now_ms(), memory_order_relaxed);
	/* release: pairs with the reader's acquire load of an even seq. */
	atomic_store_explicit(&ps->seq, seq + 2, memory_order_release);
}

/* Off the hot path: a new peak happens while usage climbs, not at each pair. */
__attribute__((noinline)) static void raise_peak(int dev, uint64_t v, uint64_t pk)
{
	/* relaxed CAS: only the maximum matters. Its time is stored after the
	 * value, so a reader may pair a new peak with the previous peak's time
	 * for an instant; the report treats the time as approximate. */
	while (v > pk)
		if (atomic_compare_exchange_weak_explicit(&gg_history_words.peak[dev], &pk, v, memory_order_relaxed,
		                                          memory_order_relaxed)) {
			atomic_store_explicit(&peak_ms_by_dev[dev], gg_now_ms(), memory_order_relaxed);
			if (gg_history_words.site_live)
				snap_peak(dev, v);
			break;
		}
}

int gg_history_peak_sites(int dev, struct gg_peak_sites *out)
{
	out->n = 0;
	if (dev < 0 || dev >= GG_MAX_DEVICES)
		return -1;
	struct peak_snap *ps = &psnap[dev];
	for (int tries = 0; tries < 4; tries++) {
		/* acquire: pairs with the writer's release store of the even seq. */
		uint64_t s1 = atomic_load_explicit(&ps->seq, memory_order_acquire);
		if (s1 & 1)
			continue;
		out->bytes = atomic_load_explicit(&ps->bytes, memory_order_relaxed);
		out->ms = atomic_load_explicit(&ps->ms, memory_order_relaxed);
		uint64_t n = atomic_load_explicit(&ps->n, memory_order_relaxed);
		out->n = n > GG_PEAK_SITES ? GG_PEAK_SITES : (unsigned)n;
		for (unsigned k = 0; k < out->n; k++) {
			out->st[k] = (uint32_t)atomic_load_explicit(&ps->st[k], memory_order_relaxed);
			out->b[k] = atomic_load_explicit(&ps->b[k], memory_order_relaxed);
		}
		/* acquire fence: the payload loads above before the re-check. */
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&ps->seq, memory_order_relaxed) == s1)
			return out->n ? 0 : -1;
	}
	out->n = 0;
	return -1;
}

uint64_t gg_history_live(int dev)
{
	if (dev < 0 || dev >= GG_MAX_DEVICES)
		return 0;
	int64_t v = atomic_load_explicit(&gg_history_words.live[dev], memory_order_relaxed);
	return v > 0 ? (uint64_t)v : 0;
}

void gg_history_peak(int dev, uint64_t *bytes, uint64_t *ms)
{
	*bytes = *ms = 0;
	if (dev < 0 || dev >= GG_MAX_DEVICES)
		return;
	*bytes = atomic_load_explicit(&gg_history_words.peak[dev], memory_order_relaxed);
	*ms = atomic_load_explicit(&peak_ms_by_dev[dev], memory_order_relaxed);
}

/* Once at init; unit tests call it again while no writer runs (the old
 * ring is left mapped). */
int gg_history_init(uint64_t capacity)
{
	if (!gg_history_words.site_live) {
		void *s = mmap(NULL, (size_t)GG_MAX_DEVICES * SITE_IDS * sizeof(int64_t), PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (s != MAP_FAILED) {
			gg_history_words.site_live = s; /* before any event: init runs first */
			gg_history_words.site_ids = SITE_IDS;
		}
	}
	if (capacity == 0)
		return 0;
	uint64_t cap = 1;
	while (cap < capacity)
		cap <<= 1;
	void *m = mmap(NULL, cap * sizeof(struct gg_hist_slot), PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return -1;
	ring_mask = cap - 1;
	gg_history_words.ring = m;
	atomic_store_explicit(&ring_head, 0, memory_order_relaxed);
	return 0;
}

/* The fork child holds none of the parent's device memory (init.c), so
 * its history starts empty too: otherwise its live and peak figures, the
 * sites live at its peak and the events in its dumps would be the
 * parent's. Called from the atfork child handler, where the forking thread
 * is the only one: nothing writes meanwhile, so plain stores do. The
 * mappings are private and anonymous: MADV_DONTNEED gives them back as
 * zero pages, which is the state init leaves (seq 0 is "never written"). */
void gg_history_after_fork_child(void)
{
	for (int d = 0; d < GG_MAX_DEVICES; d++) {
		atomic_store_explicit(&gg_history_words.live[d], 0, memory_order_relaxed);
		atomic_store_explicit(&gg_history_words.peak[d], 0, memory_order_relaxed);
		atomic_store_explicit(&peak_ms_by_dev[d], 0, memory_order_relaxed);
		memset(&psnap[d], 0, sizeof psnap[d]);
	}
	if (gg_history_words.site_live)
		madvise(gg_history_words.site_live, (size_t)GG_MAX_DEVICES * SITE_IDS * sizeof(int64_t), MADV_DONTNEED);
	if (ring_slots())
		madvise(ring_slots(), (ring_mask + 1) * sizeof(struct gg_hist_slot), MADV_DONTNEED);
	atomic_store_explicit(&ring_head, 0, memory_order_relaxed);
	atomic_store_explicit(&ring_dropped, 0, memory_order_relaxed);
}

uint64_t gg_history_capacity(void)
{
	return ring_slots() ? ring_mask + 1 : 0;
}

/* Claims event i's slot for writing (seq 2i+1) and returns 1, or counts
 * the event dropped and returns 0. Always inline, except under
 * ThreadSanitizer: gcc refuses the release fence below there once it is
 * forced inline (-Wtsan), as in table.c's try_fill. */
#ifdef __SANITIZE_THREAD__
#define RING_CLAIM_INLINE static
#else
#define RING_CLAIM_INLINE static inline __attribute__((always_inline))
#endif
RING_CLAIM_INLINE int ring_claim(struct gg_hist_slot **sl_out, uint64_t *i_out)
{
	/* relaxed: the index only has to be unique; the slot's seq carries the
	 * ordering with readers. */
	uint64_t i = atomic_fetch_add_explicit(&ring_head, 1, memory_order_relaxed);
	struct gg_hist_slot *sl = &ring_slots()[i & ring_mask];
	uint64_t cur = atomic_load_explicit(&sl->seq, memory_order_relaxed);
	/* Only one writer per slot at a time: a writer a whole lap behind (or
	 * one still writing the previous lap) gives its event up rather than
	 * tear the slot. relaxed CAS + release fence below is the seqlock's
	 * writer side: the odd value is visible before any payload store. */
	if ((cur & 1) || cur >= 2 * i + 1 ||
	    !atomic_compare_exchange_strong_explicit(&sl->seq, &cur, 2 * i + 1, memory_order_relaxed,
	                                             memory_order_relaxed)) {
		atomic_fetch_add_explicit(&ring_dropped, 1, memory_order_relaxed);
		return 0;
	}
	/* release fence: orders the odd seq above before the payload stores, so
	 * a reader that sees new payload also sees seq changed (its re-check). */
	atomic_thread_fence(memory_order_release);
	*sl_out = sl;
	*i_out = i;
	return 1;
}

void gg_history_ring_add(uint64_t meta, uint64_t p, uint64_t s, uint64_t ms)
{
	uint64_t i;
	struct gg_hist_slot *sl;
	if (!ring_claim(&sl, &i))
		return;
	atomic_store_explicit(&sl->ms, ms, memory_order_relaxed);
	atomic_store_explicit(&sl->p, p, memory_order_relaxed);
	atomic_store_explicit(&sl->s, s, memory_order_relaxed);
	atomic_store_explicit(&sl->meta, meta, memory_order_relaxed);
	/* release: pairs with the reader's acquire load of seq, so whoever sees
	 * 2i+2 sees this event's whole payload. */
	atomic_store_explicit(&sl->seq, 2 * i + 2, memory_order_release);
}

/* The slot is claimed first and the clock read into it last: across the
 * clock's call only the slot and its index are kept, not the three
 * arguments, and there is no second call to make (issue 24). A dump
 * meanwhile skips the slot, as any being written. */
void gg_history_ring_add_now(uint64_t meta, uint64_t p, uint64_t s)
{
	uint64_t i;
	struct gg_hist_slot *sl;
	if (!ring_claim(&sl, &i))
		return;
	atomic_store_explicit(&sl->p, p, memory_order_relaxed);
	atomic_store_explicit(&sl->s, s, memory_order_relaxed);
	atomic_store_explicit(&sl->meta, meta, memory_order_relaxed);
	atomic_store_explicit(&sl->ms, gg_now_ms(), memory_order_relaxed);
	/* release: as in gg_history_ring_add */
	atomic_store_explicit(&sl->seq, 2 * i + 2, memory_order_release);
}

void gg_history_peak_slow(int dev, uint64_t live)
{
	/* relaxed: compared only, as in gg_history_track */
	raise_peak(dev, live, atomic_load_explicit(&gg_history_words.peak[dev], memory_order_relaxed));
}

void gg_history_add(enum gg_hist_op op, int dev, enum gpuguard_api api, uint64_t p, uint64_t s, uint32_t stack)
{
	if (GG_LIKELY((unsigned)dev < GG_MAX_DEVICES || op == GG_HIST_REFUSE)) {
		gg_history_event(op, dev, api, p, s, stack, GG_HIST_NOW);
		return;
	}
	/* A device out of range moves no live count, as before the inline
	 * event left its check to its callers; the ring still says it. */
	if (gg_history_words.ring)
		gg_history_ring_add_now(gg_history_meta(op, dev, api, stack), p, s);
}

uint64_t gg_history_snapshot(struct gg_hist_event *out, uint64_t max)
{
	if (!ring_slots() || max == 0)
		return 0;
	/* acquire: pairs with nothing in particular (slots carry their own
	 * ordering); it just bounds the range to events claimed so far. */
	uint64_t head = atomic_load_explicit(&ring_head, memory_order_acquire);
	uint64_t cap = ring_mask + 1;
	uint64_t start = head > cap ? head - cap : 0;
	if (head - start > max)
		start = head - max;
	uint64_t n = 0;
	for (uint64_t i = start; i < head; i++) {
		struct gg_hist_slot *sl = &ring_slots()[i & ring_mask];
		/* acquire: pairs with the writer's release store of 2i+2. */
		uint64_t s1 = atomic_load_explicit(&sl->seq, memory_order_acquire);
		if (s1 != 2 * i + 2)
			continue; /* not written yet, being written, or overwritten */
		struct gg_hist_event e;
		e.i = i;
		e.ms = atomic_load_explicit(&sl->ms, memory_order_relaxed);
		e.p = atomic_load_explicit(&sl->p, memory_order_relaxed);
		e.s = atomic_load_explicit(&sl->s, memory_order_relaxed);
		uint64_t meta = atomic_load_explicit(&sl->meta, memory_order_relaxed);
		/* acquire fence: orders the payload loads above before the re-check
		 * of seq; if a writer began rewriting meanwhile, seq has moved. */
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&sl->seq, memory_order_relaxed) != s1)
			continue; /* torn: skip */
		e.stack = (uint32_t)(meta >> 32);
		e.op = (uint8_t)(meta >> 24);
		e.api = (uint16_t)(meta >> 8);
		e.dev = (uint8_t)meta;
		out[n++] = e;
	}
	return n;
}

uint64_t gg_history_head(void)
{
	/* acquire: pairs with nothing in particular, as in the snapshot; the
	 * cut it marks is ordered by the caller's own later loads. */
	return atomic_load_explicit(&ring_head, memory_order_acquire);
}

uint64_t gg_history_dropped(void)
{
	return atomic_load_explicit(&ring_dropped, memory_order_relaxed);
}
