/* gpuguard: pod scope's figure of this process's pinned host memory, kept
 * in our slot for the exporter. */
#include "shared_pinned.h"

#include "shared_guard.h"

/* ---- pinned host memory ----------------------------------------------- *
 *
 * Our slot's host_pinned follows pinned_total, this process's pinned host
 * bytes (account.c reports every change), so the exporter can show it per
 * process; a dead process's slot is swept, and its figure with it. Threads
 * change the total at once: each stores what it read and stores again
 * while the total has moved since, so the last store is of the latest
 * total (seq_cst throughout: one order of every add, load and store). */

static _Atomic uint64_t pinned_total;
_Atomic int gg_shared_pinned_live; /* our slot is attached: host_pinned follows pinned_total */

static void pinned_publish(uint64_t t)
{
	/* relaxed: detached and lost are best-effort skips, as in obit_refresh */
	if (atomic_load_explicit(&gg_shared_detached, memory_order_relaxed) || gg_shared_region_lost())
		return;
	for (;;) {
		atomic_store_explicit(&gg_shared_me->host_pinned, t, memory_order_seq_cst);
		uint64_t now = atomic_load_explicit(&pinned_total, memory_order_seq_cst);
		if (now == t)
			return;
		t = now;
	}
}

/* Once attached (me set): from now on every change publishes itself. An
 * add that read gg_shared_pinned_live as 0 comes before our store in the one order,
 * so the load below sees it. */
void gg_shared_pinned_start(void)
{
	atomic_store_explicit(&gg_shared_pinned_live, 1, memory_order_seq_cst);
	pinned_publish(atomic_load_explicit(&pinned_total, memory_order_seq_cst));
}

void gg_shared_note_pinned(int64_t bytes)
{
	/* seq_cst: ordered against pinned_start's store and load (see above) */
	uint64_t t = atomic_fetch_add_explicit(&pinned_total, (uint64_t)bytes, memory_order_seq_cst) + (uint64_t)bytes;
	/* seq_cst: pairs with pinned_start; seeing 1 also makes `me` visible
	 * (written before that store) */
	if (atomic_load_explicit(&gg_shared_pinned_live, memory_order_seq_cst))
		pinned_publish(t);
}