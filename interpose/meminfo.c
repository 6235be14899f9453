/* gpuguard: the memory-info queries the process made (cuMemGetInfo,
 * hipMemGetInfo, NVML), kept for dumps: how a server sized itself. A leaf
 * below the dump's records, which read them (dump_records.c), and the
 * hooks, which note them. */
#include <stdatomic.h>

#include "meminfo.h"
#include "base.h"
#include "history.h"

/* ---- memory-info queries: how the process sized itself ---- */

/* The first GG_MI_FIRST queries (a server sizes itself at start-up) and the
 * last GG_MI_LAST (what it saw lately), one seqlock per slot as in the
 * history ring: 2n+1 while query n is written, 2n+2 once whole. */
struct mi_slot {
	_Atomic uint64_t seq;
	_Atomic uint64_t ms, free, total, used;
	_Atomic int dev, nvml;
};
static struct mi_slot mi_slots[GG_MI_FIRST + GG_MI_LAST];
static _Atomic uint64_t mi_count;

static void note_meminfo(int dev, uint64_t free_bytes, uint64_t total_bytes, int nvml)
{
	/* relaxed: the index only has to be unique; the slot's seq orders. */
	uint64_t n = atomic_fetch_add_explicit(&mi_count, 1, memory_order_relaxed);
	struct mi_slot *sl = &mi_slots[n < GG_MI_FIRST ? n : GG_MI_FIRST + (n - GG_MI_FIRST) % GG_MI_LAST];
	uint64_t cur = atomic_load_explicit(&sl->seq, memory_order_relaxed);
	/* A writer a lap behind, or racing one on the same slot, gives up: the
	 * slot keeps a whole query either way. relaxed CAS + release fence =
	 * the seqlock's writer side (odd seq before any payload store). */
	if ((cur & 1) || cur >= 2 * n + 1 ||
	    !atomic_compare_exchange_strong_explicit(&sl->seq, &cur, 2 * n + 1, memory_order_relaxed,
	                                             memory_order_relaxed))
		return;
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&sl->ms, gg_now_ms(), memory_order_relaxed);
	atomic_store_explicit(&sl->free, free_bytes, memory_order_relaxed);
	atomic_store_explicit(&sl->total, total_bytes, memory_order_relaxed);
	atomic_store_explicit(&sl->used, gg_history_live(dev), memory_order_relaxed);
	atomic_store_explicit(&sl->dev, dev, memory_order_relaxed);
	atomic_store_explicit(&sl->nvml, nvml, memory_order_relaxed);
	/* release: pairs with the reader's acquire load; 2n+2 = payload whole. */
	atomic_store_explicit(&sl->seq, 2 * n + 2, memory_order_release);
}

void gg_dump_note_meminfo(int dev, uint64_t free_bytes, uint64_t total_bytes)
{
	note_meminfo(dev, free_bytes, total_bytes, 0);
}

void gg_dump_note_meminfo_nvml(int dev, uint64_t free_bytes, uint64_t total_bytes)
{
	note_meminfo(dev, free_bytes, total_bytes, 1);
}

size_t gg_dump_meminfo_snapshot(struct gg_meminfo_q *out, size_t max, uint64_t *count)
{
	size_t k = 0;
	*count = atomic_load_explicit(&mi_count, memory_order_relaxed);
	for (size_t i = 0; i < GG_MI_FIRST + GG_MI_LAST && k < max; i++) {
		struct mi_slot *sl = &mi_slots[i];
		/* acquire: pairs with the writer's release store of 2n+2. */
		uint64_t s1 = atomic_load_explicit(&sl->seq, memory_order_acquire);
		if (!s1 || (s1 & 1))
			continue;
		struct gg_meminfo_q q = {
		    .n = s1 / 2 - 1,
		    .ms = atomic_load_explicit(&sl->ms, memory_order_relaxed),
		    .free = atomic_load_explicit(&sl->free, memory_order_relaxed),
		    .total = atomic_load_explicit(&sl->total, memory_order_relaxed),
		    .used = atomic_load_explicit(&sl->used, memory_order_relaxed),
		    .dev = atomic_load_explicit(&sl->dev, memory_order_relaxed),
		    .nvml = atomic_load_explicit(&sl->nvml, memory_order_relaxed),
		};
		/* acquire fence: payload loads before the re-check of seq. */
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&sl->seq, memory_order_relaxed) != s1)
			continue; /* rewritten meanwhile: skip */
		/* insertion by n: the last slots wrap, the output is in order */
		size_t j = k++;
		while (j > 0 && out[j - 1].n > q.n) {
			out[j] = out[j - 1];
			j--;
		}
		out[j] = q;
	}
	return k;
}
