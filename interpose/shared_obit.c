/* gpuguard: pod scope's obituaries: what a process the kernel kills leaves
 * behind in its slot, and the pod's ring of deaths the sweep moves it to. */
#define _GNU_SOURCE
#include "shared_obit.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* ---- obituaries -------------------------------------------------------- *
 *
 * Our slot carries what a post-mortem needs (region.h): refreshed at most
 * every GPUGUARD_OBIT_MS, from gg_shared_pod_changed (every charge change) and
 * refusals, so a process the kernel kills leaves its last GPU use, host
 * memory and refusals behind. The sweep that finds it dead moves them to
 * the pod's deaths ring. */

_Atomic uint64_t gg_shared_obit_last_ms;
/* The dump's host sample (gg_dump_host_sample_armed), handed down by
 * initialisation: dump.c reads the pod, so this file cannot call it by
 * name. relaxed: a code pointer set once, before initialisation publishes
 * itself (gg_init_once's release), and it points to code, not data. */
static _Atomic gg_host_sample_fn host_sample;

void gg_shared_set_host_sample(gg_host_sample_fn fn)
{
	atomic_store_explicit(&host_sample, fn, memory_order_relaxed);
}

/* obit_refresh once the rate limit has let it through: apart, so that the
 * check on every charge change inlines into gg_shared_pod_changed with no stack frame
 * (issue 12, step 7). */
__attribute__((noinline)) void gg_shared_obit_sample(uint64_t now, uint64_t last)
{
	/* relaxed: a rate limit; only the CAS winner samples. */
	if (!atomic_compare_exchange_strong_explicit(&gg_shared_obit_last_ms, &last, now ? now : 1,
	                                             memory_order_relaxed, memory_order_relaxed))
		return;
	int saved = errno; /* arming and the host sample's reads must not show in errno */
	struct gg_host_sample h;
	gg_host_sample_fn sample = atomic_load_explicit(&host_sample, memory_order_relaxed);
	if (!sample || sample(&h) != 0) {
		/* another thread is arming: its knobs are not ours to read yet;
		 * the next call tries again (relaxed: the rate limit's word) */
		atomic_store_explicit(&gg_shared_obit_last_ms, last, memory_order_relaxed);
		errno = saved;
		return;
	}
	uint64_t use = h.have_use ? h.use : 0;
	uint64_t inactive = h.have_use && h.have_inactive ? h.inactive_file : 0;
	uint32_t flags = (h.version == 1   ? GPUGUARD_OBIT_CGROUP_V1
	                  : h.version == 2 ? GPUGUARD_OBIT_CGROUP_V2
	                                   : 0) |
	                 (h.have_use && h.have_inactive ? GPUGUARD_OBIT_WS_KNOWN : 0);
	/* relaxed, all: a snapshot the sweeper reads once we are dead. */
	atomic_store_explicit(&gg_shared_me->host_usage, use, memory_order_relaxed);
	atomic_store_explicit(&gg_shared_me->host_ws, use > inactive ? use - inactive : 0, memory_order_relaxed);
	atomic_store_explicit(&gg_shared_me->host_limit, h.have_lim ? h.lim : 0, memory_order_relaxed);
	atomic_store_explicit(&gg_shared_me->host_flags, flags, memory_order_relaxed);
	atomic_store_explicit(&gg_shared_me->obit_ms, gg_realtime_ms(), memory_order_relaxed);
	errno = saved;
}

void gg_shared_note_refusal(void)
{
	/* acquire: pairs with the release in gg_shared_attached(), for reg and me. */
	if (atomic_load_explicit(&gg_shared_attach_state, memory_order_acquire) != ATTACH_OK || !gg_shared_me ||
	    gg_shared_region_lost())
		return;
	/* relaxed: statistics for our own obituary */
	atomic_fetch_add_explicit(&gg_shared_me->refused, 1, memory_order_relaxed);
	atomic_store_explicit(&gg_shared_me->refused_ms, gg_realtime_ms(), memory_order_relaxed);
	gg_shared_obit_refresh();
}

/* The deaths ring, written through a descriptor (pwrite) and read through
 * one (pread), so in-process readers (the dump writer) never race with the
 * sweeper on the mapping's bytes; the file's page cache is the mapping's. */
void gg_shared_obit_write(int fd, unsigned s, uint64_t now)
{
	struct gpuguard_region_proc *p = gpuguard_region_proc(gg_shared_reg, s);
	struct gpuguard_region_death d;
	memset(&d, 0, sizeof d);
	d.pid = p->pid;
	d.start_ms = p->start_ms;
	memcpy(d.comm, p->comm, sizeof d.comm);
	d.comm[sizeof d.comm - 1] = 0;
	/* relaxed, all: the owner is dead; its stores are all in memory. */
	d.refused = atomic_load_explicit(&p->refused, memory_order_relaxed);
	d.last_ms = atomic_load_explicit(&p->obit_ms, memory_order_relaxed);
	d.found_ms = now;
	d.host_ws = atomic_load_explicit(&p->host_ws, memory_order_relaxed);
	d.host_limit = atomic_load_explicit(&p->host_limit, memory_order_relaxed);
	d.host_flags = (uint16_t)atomic_load_explicit(&p->host_flags, memory_order_relaxed);
	uint64_t rms = atomic_load_explicit(&p->refused_ms, memory_order_relaxed);
	uint64_t ref = d.last_ms > rms ? d.last_ms : rms;
	d.refused_age_ms = !rms ? UINT32_MAX : ref - rms > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)(ref - rms);
	d.gpu_limit = UINT64_MAX;
	/* The entry where it held the largest share of the ceiling (bytes
	 * where no ceiling is set). */
	unsigned __int128 best = 0;
	for (unsigned i = 0; i < GPUGUARD_REGION_DEVICES; i++) {
		uint64_t u = atomic_load_explicit(&p->used[i], memory_order_relaxed);
		uint64_t lim = atomic_load_explicit(&gg_shared_entry(i)->limit, memory_order_relaxed);
		if (!u)
			continue;
		/* u / lim, compared as u * 2^64 / lim; no ceiling ranks below any */
		unsigned __int128 score = lim && lim != UINT64_MAX ? ((unsigned __int128)u << 64) / lim + 1 : u >> 32;
		if (score > best) {
			best = score;
			d.gpu_entry = (uint16_t)i;
			d.gpu_used = u;
			d.gpu_limit = lim ? lim : UINT64_MAX;
		}
	}
	struct gpuguard_region_header *h = gg_shared_reg;
	/* The same death swept twice (a sweeper killed between this and the
	 * slot's FREE): one obituary. */
	uint64_t head = atomic_load_explicit(&h->deaths_head, memory_order_relaxed);
	if (head) {
		struct gpuguard_region_death prev;
		off_t po = (off_t)GPUGUARD_REGION_DEATH_OFF + (off_t)((head - 1) % GPUGUARD_REGION_DEATHS) * 96;
		if (pread(fd, &prev, sizeof prev, po) == (ssize_t)sizeof prev && prev.pid == d.pid &&
		    prev.start_ms == d.start_ms)
			return;
	}
	/* relaxed: the position only has to be unique among sweepers (the RMW
	 * is atomic); the entry's seq says when its bytes are whole. */
	uint64_t n = atomic_fetch_add_explicit(&h->deaths_head, 1, memory_order_relaxed);
	off_t off = (off_t)GPUGUARD_REGION_DEATH_OFF + (off_t)(n % GPUGUARD_REGION_DEATHS) * 96;
	uint64_t zero = 0, seq = n + 1;
	/* seq 0, then the body, then seq: write(2)s to one file are ordered
	 * for any later read(2) of it. */
	if (pwrite(fd, &zero, 8, off) == 8 && pwrite(fd, (char *)&d + 8, sizeof d - 8, off + 8) == sizeof d - 8 &&
	    pwrite(fd, &seq, 8, off) == 8)
		return;
	/* A failed write leaves seq 0 (or a torn entry that readers skip):
	 * one obituary lost, nothing else. */
}

size_t gg_shared_deaths(struct gpuguard_region_death *out, size_t max)
{
	/* acquire: pairs with the release in gg_shared_attached(), for reg. */
	if (atomic_load_explicit(&gg_shared_attach_state, memory_order_acquire) != ATTACH_OK)
		return 0;
	int fd = gg_shared_open_again();
	if (fd < 0)
		return 0;
	size_t k = 0;
	for (unsigned i = 0; i < GPUGUARD_REGION_DEATHS && k < max; i++) {
		struct gpuguard_region_death d;
		off_t off = (off_t)GPUGUARD_REGION_DEATH_OFF + (off_t)i * 96;
		if (pread(fd, &d, sizeof d, off) != (ssize_t)sizeof d)
			break;
		uint64_t seq = d.seq, again;
		if (!seq || (seq - 1) % GPUGUARD_REGION_DEATHS != i || pread(fd, &again, 8, off) != 8 || again != seq)
			continue; /* empty, being written, or scribbled */
		d.comm[sizeof d.comm - 1] = 0;
		out[k++] = d;
	}
	close(fd);
	/* oldest first */
	for (size_t a = 1; a < k; a++)
		for (size_t b = a; b > 0 && out[b - 1].seq > out[b].seq; b--) {
			struct gpuguard_region_death t = out[b];
			out[b] = out[b - 1];
			out[b - 1] = t;
		}
	return k;
}