/* gpuguard command: aggregates a dump (call sites, devices, sizes, timeline)
 * and diagnoses it. Every figure a diagnosis quotes comes from the dump, so
 * the report is deterministic: the same file gives the same words. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <gpuguard.h>
#include <gpuguard/charge.h>

#include "tool.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)
#define GiB (1024ull * 1024 * 1024)

const char *gg_bytes(uint64_t v, char buf[32])
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (v < 1024) {
		snprintf(buf, 32, "%llu B", (unsigned long long)v);
		return buf;
	}
	double x = (double)v / 1024.0;
	int u = 0;
	while (x >= 1024.0 && u < 5) {
		x /= 1024.0;
		u++;
	}
	snprintf(buf, 32, "%.2f %s", x, units[u]);
	return buf;
}

static int is_async(uint32_t api);

uint64_t gg_granted(uint32_t api, uint64_t size)
{
	/* What the library charged: one rule for both (gpuguard/charge.h).
	 * A stream-ordered block is charged through its pool's reserve, so
	 * it is shown as granted what it asked for. */
	return is_async(api) ? size : gpuguard_charge_size(api, size);
}

static int is_async(uint32_t api)
{
	return api == GPUGUARD_API_CU_MEM_ALLOC_ASYNC || api == GPUGUARD_API_CU_MEM_ALLOC_FROM_POOL ||
	       api == GPUGUARD_API_HIP_MALLOC_ASYNC || api == GPUGUARD_API_HIP_MALLOC_FROM_POOL;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Round up to whole GiB of v * 1.2: the headroom a recommended ceiling gets. */
static uint64_t headroom_gib(uint64_t v)
{
	if (v > UINT64_MAX / 6)
		return UINT64_MAX / GiB;
	uint64_t x = v / 5 * 6 + (v % 5) * 6 / 5;
	return (x + GiB - 1) / GiB;
}

static struct gg_site *site_get(struct gg_analysis *a, uint64_t st)
{
	struct gg_site *s = NULL;
	HASH_FIND(hh, a->sites, &st, sizeof st, s);
	if (s)
		return s;
	s = calloc(1, sizeof *s);
	if (!s) {
		gg_error("out of memory");
		exit(GG_EXIT_BADINPUT);
	}
	s->st = st;
	HASH_ADD(hh, a->sites, st, sizeof s->st, s);
	a->nsites++;
	return s;
}

static int cmp_bytes(const void *x, const void *y)
{
	const struct gg_site *a = *(struct gg_site *const *)x, *b = *(struct gg_site *const *)y;
	if (a->live_bytes != b->live_bytes)
		return a->live_bytes < b->live_bytes ? 1 : -1;
	if (a->live_count != b->live_count)
		return a->live_count < b->live_count ? 1 : -1;
	return a->st < b->st ? -1 : a->st > b->st;
}

static int cmp_count(const void *x, const void *y)
{
	const struct gg_site *a = *(struct gg_site *const *)x, *b = *(struct gg_site *const *)y;
	if (a->live_count != b->live_count)
		return a->live_count < b->live_count ? 1 : -1;
	if (a->live_bytes != b->live_bytes)
		return a->live_bytes < b->live_bytes ? 1 : -1;
	return a->st < b->st ? -1 : a->st > b->st;
}

static struct gg_diag *diag_new(struct gg_analysis *a, enum gg_diag_kind k, const char *title)
{
	struct gg_diag *g = &a->diags[a->ndiags++];
	memset(g, 0, sizeof *g);
	g->kind = k;
	snprintf(g->title, sizeof g->title, "%s", title);
	return g;
}

static void evidence(struct gg_diag *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void evidence(struct gg_diag *g, const char *fmt, ...)
{
	if (g->nevidence >= 8)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g->evidence[g->nevidence++], sizeof g->evidence[0], fmt, ap);
	va_end(ap);
}

static void change(struct gg_diag *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void change(struct gg_diag *g, const char *fmt, ...)
{
	if (g->nchange >= 4)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g->change[g->nchange++], sizeof g->change[0], fmt, ap);
	va_end(ap);
}

void gg_stack_label(const struct gg_dump *d, uint64_t st, char *out, size_t outlen)
{
	/* The innermost frame outside the CUDA/HIP runtimes names the site. */
	struct gg_stack *s = st ? gg_dump_stack(d, st) : NULL;
	if (!st) {
		snprintf(out, outlen, "(no stack)");
		return;
	}
	if (!s || !s->nframes) {
		snprintf(out, outlen, "stack %llu (frames missing)", (unsigned long long)st);
		return;
	}
	const struct gg_frame *f = &s->frames[0];
	for (uint32_t i = 0; i < s->nframes; i++) {
		const char *m = s->frames[i].m;
		if (strstr(m, "libcuda") || strstr(m, "libcudart") || strstr(m, "libamdhip") ||
		    strstr(m, "libgpuguard"))
			continue;
		f = &s->frames[i];
		break;
	}
	if (f->s)
		snprintf(out, outlen, "%.160s (%.80s)", f->s, f->m);
	else
		snprintf(out, outlen, "%.80s+0x%.20s", f->m, f->o);
}

static const struct gg_device *find_dev(const struct gg_dump *d, uint32_t dev)
{
	for (size_t i = 0; i < d->ndevices; i++)
		if (d->devices[i].dev == dev)
			return &d->devices[i];
	return NULL;
}

static void timeline(struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	for (size_t i = 0; i < d->nhist; i++) {
		const struct gg_hist *h = &d->hist[i];
		if (h->op == 'a') {
			a->h_allocs++;
			a->h_alloc_bytes = sat_add(a->h_alloc_bytes, h->size);
			if (h->size > a->h_max_alloc)
				a->h_max_alloc = h->size;
		} else if (h->op == 'f') {
			a->h_frees++;
			a->h_free_bytes = sat_add(a->h_free_bytes, h->size);
		} else {
			a->h_refusals++;
		}
	}
	if (d->nhist == 0)
		return;
	a->has_timeline = 1;
	/* Usage before the first recorded event: what is live now, minus what the
	 * history added. Sizes are clamped so a hostile file cannot overflow. */
	uint64_t base = sat_add(a->live_bytes, a->h_free_bytes);
	base = base > a->h_alloc_bytes ? base - a->h_alloc_bytes : 0;
	a->baseline = base;
	a->t_start = d->hist[0].ms;
	a->t_end = d->hist[d->nhist - 1].ms;
	uint64_t span = a->t_end >= a->t_start ? a->t_end - a->t_start : 0;
	uint64_t cur = base, prev_ms = a->t_start;
	a->t_peak = base;
	for (size_t i = 0; i < d->nhist; i++) {
		const struct gg_hist *h = &d->hist[i];
		if (h->op == 'a')
			cur = sat_add(cur, h->size);
		else if (h->op == 'f')
			cur = cur > h->size ? cur - h->size : 0;
		uint64_t ms = h->ms < prev_ms ? prev_ms : h->ms; /* out-of-order stamps: keep moving forward */
		prev_ms = ms;
		uint64_t off = ms - a->t_start;
		if (off > span)
			off = span;
		int b = span ? (int)((unsigned __int128)off * GG_TIMELINE / (span + 1)) : 0;
		if (b >= GG_TIMELINE)
			b = GG_TIMELINE - 1;
		if (!a->t_has[b] || cur > a->t_max[b])
			a->t_max[b] = cur;
		a->t_has[b] = 1;
		if (cur > a->t_peak)
			a->t_peak = cur;
	}
	a->t_final = cur;
}

/* Steady growth: the bucket maxima rise most of the way, with no single
 * allocation accounting for the rise. Jump: one allocation is most of it. */
static void growth_shape(const struct gg_analysis *a, int *steady, int *jump, uint64_t *growth)
{
	*steady = *jump = 0;
	*growth = 0;
	if (!a->has_timeline)
		return;
	int first = -1, last = -1, rises = 0, falls = 0;
	uint64_t prev = 0;
	for (int i = 0; i < GG_TIMELINE; i++) {
		if (!a->t_has[i])
			continue;
		if (first < 0)
			first = i;
		else if (a->t_max[i] > prev)
			rises++;
		else if (a->t_max[i] < prev)
			falls++;
		prev = a->t_max[i];
		last = i;
	}
	if (first < 0)
		return;
	uint64_t lo = a->t_max[first], hi = a->t_max[last];
	*growth = hi > lo ? hi - lo : 0;
	if (*growth && a->h_max_alloc >= *growth / 2)
		*jump = 1;
	else if (*growth && *growth >= hi / 4 && rises >= 4 && rises >= 3 * falls)
		*steady = 1;
}

/* The live size spectrum: the three fullest power-of-two buckets. */
static void spectrum(const struct gg_analysis *a, struct gg_diag *g)
{
	int top[3] = {-1, -1, -1};
	for (int i = 0; i < GG_HIST_BUCKETS; i++) {
		if (!a->hist_count[i])
			continue;
		for (int k = 0; k < 3; k++) {
			if (top[k] < 0 || a->hist_count[i] > a->hist_count[top[k]]) {
				for (int m = 2; m > k; m--)
					top[m] = top[m - 1];
				top[k] = i;
				break;
			}
		}
	}
	if (top[0] < 0)
		return;
	char line[300], b1[32];
	size_t n = (size_t)snprintf(line, sizeof line, "live size spectrum:");
	for (int k = 0; k < 3 && top[k] >= 0 && n < sizeof line; k++)
		n += (size_t)snprintf(line + n, sizeof line - n, "%s %llu of >= %s", k ? "," : "",
		                      (unsigned long long)a->hist_count[top[k]], gg_bytes(1ull << top[k], b1));
	evidence(g, "%s (%llu allocations in all)", line, (unsigned long long)a->live_count);
}

/* A process name from a dump, printable (it is untrusted input). */
static const char *clean_comm(const char *s, char out[17])
{
	size_t n = 0;
	for (; s && s[n] && n < 16; n++)
		out[n] = s[n] > 0x20 && s[n] < 0x7f ? s[n] : '?';
	out[n] = 0;
	return n ? out : "?";
}

/* Pod scope: the ceiling is the pod's budget. How much of it this process
 * held, and who held the rest (the dump's "pod" records), largest first. */
static void pod_evidence(struct gg_diag *g, const struct gg_dump *d, uint32_t dv, uint64_t mine, uint64_t used)
{
	char b1[32], b2[32], b3[32], name[17];
	evidence(g,
	         "the ceiling is the pod's budget (GPUGUARD_SCOPE=pod): this process held %s of the %s charged, the "
	         "pod's other processes %s",
	         gg_bytes(mine, b1), gg_bytes(used, b2), gg_bytes(used - mine, b3));
	const struct gg_pod_use *top[3] = {NULL, NULL, NULL};
	for (size_t i = 0; i < d->npod; i++) {
		const struct gg_pod_use *u = &d->pod[i];
		if (u->self || u->dev != dv)
			continue;
		for (int k = 0; k < 3; k++)
			if (!top[k] || u->used > top[k]->used) {
				memmove(&top[k + 1], &top[k], (size_t)(2 - k) * sizeof top[0]);
				top[k] = u;
				break;
			}
	}
	for (int k = 0; k < 3 && top[k]; k++)
		evidence(g, "pid %llu (%s, slot %u) held %s on device %u%s", (unsigned long long)top[k]->pid,
		         clean_comm(top[k]->comm, name), top[k]->slot, gg_bytes(top[k]->used, b1), dv,
		         top[k]->alive ? "" : ", but had died: its charge goes back at the next sweep");
	if (top[0])
		change(g,
		       "the largest other holder is pid %llu (%s) with %s: shrink its share (batch size, "
		       "gpu_memory_utilization) or raise the pod's GPUGUARD_LIMIT",
		       (unsigned long long)top[0]->pid, clean_comm(top[0]->comm, name), gg_bytes(top[0]->used, b1));
	else
		change(g, "see which processes of the pod hold the other %s: gpuguard top --once (same GPUGUARD_SHARED)",
		       gg_bytes(used - mine, b1));
}

static void diagnose(struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	char b1[32], b2[32], b3[32], b4[32], lab[320];
	int steady, jump;
	uint64_t growth;
	growth_shape(a, &steady, &jump, &growth);
	const char *outcome = d->has_request ? d->req_outcome : NULL;
	int ceiling = (outcome && !strcmp(outcome, "refused_ceiling")) ||
	              (!outcome && d->trigger && !strcmp(d->trigger, "ceiling"));
	int driver = (outcome && !strcmp(outcome, "driver_oom")) ||
	             (!outcome && d->trigger && !strcmp(d->trigger, "driver_oom"));
	uint32_t dv = d->has_request ? d->req_dev : 0;
	if (!d->has_request)
		for (size_t i = 0; i < d->ndevices; i++)
			if (d->devices[i].refused_ceiling || d->devices[i].refused_driver) {
				dv = d->devices[i].dev;
				break;
			}
	const struct gg_device *dev = find_dev(d, dv);
	uint64_t req = d->has_request ? d->req_size : 0;
	uint64_t pool_slack = 0;
	if (dev && dev->pool_reserved > a->dev[dv].async_live)
		pool_slack = dev->pool_reserved - a->dev[dv].async_live;
	uint64_t dev_waste =
	    a->dev[dv].granted > a->dev[dv].live_bytes ? a->dev[dv].granted - a->dev[dv].live_bytes : 0;
	/* A ceiling refusal is always reported as such (the books are exact);
	 * pool slack that could have held the request is reported beside it.
	 * A driver refusal with enough free memory is fragmentation, not a
	 * full device. */
	int frag = 0;
	if ((ceiling || driver) && req) {
		if (pool_slack >= req)
			frag = 1;
		if (driver && dev && dev->has_driver_free && dev->driver_free >= req)
			frag = 1;
	}

	if (ceiling) {
		struct gg_diag *g = diag_new(a, GG_D_CEILING, "ceiling reached");
		uint64_t limit = dev && dev->has_limit ? dev->limit : 0, used = dev ? dev->used : 0;
		uint64_t peak = dev ? dev->peak : 0;
		if (d->has_request)
			evidence(
			    g, "%s of %s on device %u was refused: device %u has %s charged of its %s ceiling, %s left",
			    d->req_api, gg_bytes(req, b1), dv, dv, gg_bytes(used, b2), gg_bytes(limit, b3),
			    gg_bytes(limit > used ? limit - used : 0, b4));
		else if (dev)
			evidence(g, "device %u refused %llu requests at its %s ceiling (peak %s)", dv,
			         (unsigned long long)dev->refused_ceiling, gg_bytes(limit, b1), gg_bytes(peak, b2));
		if (dev && dev->pod && dev->process_used < used)
			pod_evidence(g, d, dv, dev->process_used, used);
		for (size_t i = 0; i < a->nsites && i < 2; i++) {
			const struct gg_site *s = a->by_bytes[i];
			gg_stack_label(d, s->st, lab, sizeof lab);
			evidence(g, "call site #%zu (stack %llu) holds %s in %llu allocations (%llu%% of live): %s",
			         i + 1, (unsigned long long)s->st, gg_bytes(s->live_bytes, b1),
			         (unsigned long long)s->live_count,
			         (unsigned long long)(a->live_bytes ? s->live_bytes * 100 / a->live_bytes : 0), lab);
		}
		uint64_t need = peak > sat_add(used, req) ? peak : sat_add(used, req);
		uint64_t rec = headroom_gib(need);
		if (jump || (limit && req >= limit / 4)) {
			evidence(g, "usage jumped: one request of %s is %llu%% of the ceiling",
			         gg_bytes(req ? req : a->h_max_alloc, b1),
			         (unsigned long long)(limit ? (req ? req : a->h_max_alloc) * 100 / limit : 0));
			change(g, "lower the batch size, concurrency or max tokens that sized the %s request",
			       gg_bytes(req ? req : a->h_max_alloc, b1));
			change(g, "or raise GPUGUARD_LIMIT to %lluGi (used + request = %s, x1.2, rounded up to a GiB)",
			       (unsigned long long)rec, gg_bytes(need, b2));
		} else if (steady) {
			evidence(
			    g,
			    "usage grew steadily by %s over the last %.1f s of history, with no single large request",
			    gg_bytes(growth, b1), (double)(a->t_end - a->t_start) / 1000.0);
			change(
			    g,
			    "a leak or an unbounded cache: a higher ceiling only delays the failure; bound the cache "
			    "(max tokens, cache size) or free what the top call site keeps");
			change(g,
			       "if the growth is a warm-up that levels off, GPUGUARD_LIMIT=%lluGi covers the peak (%s "
			       "x1.2)",
			       (unsigned long long)rec, gg_bytes(need, b1));
		} else {
			change(g,
			       "raise GPUGUARD_LIMIT to %lluGi: the observed need %s (peak, or used + request) x1.2, "
			       "rounded up to a GiB",
			       (unsigned long long)rec, gg_bytes(need, b1));
			change(g, "or lower the batch size or concurrency so the working set fits %s",
			       gg_bytes(limit, b2));
		}
		if (dev && dev->has_driver_total && rec * GiB > dev->driver_total)
			change(g, "note: %lluGi is more than the card's %s: lowering the batch size is the only way",
			       (unsigned long long)rec, gg_bytes(dev->driver_total, b1));
	}
	/* A pool reserve that could hold the request several times over is the
	 * real story: fragmentation first. */
	if (ceiling && frag && a->ndiags == 1 && dev && pool_slack * 4 >= dev->used)
		a->frag_first = 1;
	if (driver && !frag) {
		struct gg_diag *g = diag_new(a, GG_D_DEVICE_FULL, "device full");
		uint64_t used = dev ? dev->process_used : 0; /* this process's, also in pod scope */
		evidence(g, "the driver refused %s%s%s on device %u while this process had %s charged%s%s",
		         d->has_request ? d->req_api : "a request", d->has_request ? " of " : "",
		         d->has_request ? gg_bytes(req, b1) : "", dv, gg_bytes(used, b2),
		         dev && dev->has_limit ? " under its ceiling of " : " (no ceiling)",
		         dev && dev->has_limit ? gg_bytes(dev->limit, b3) : "");
		if (dev && dev->has_driver_free && dev->has_driver_total) {
			uint64_t taken =
			    dev->driver_total > dev->driver_free ? dev->driver_total - dev->driver_free : 0;
			uint64_t others = taken > used ? taken - used : 0;
			evidence(g, "driver: %s free of %s; this process %s; other tenants and context memory %s",
			         gg_bytes(dev->driver_free, b1), gg_bytes(dev->driver_total, b2), gg_bytes(used, b3),
			         gg_bytes(others, b4));
			if (dev->has_limit && dev->limit > used && dev->limit - used > dev->driver_free)
				evidence(g, "the ceiling promised %s more, but the card had only %s free",
				         gg_bytes(dev->limit - used, b1), gg_bytes(dev->driver_free, b2));
			change(
			    g,
			    "the ceilings of all tenants on this card must sum to less than its %s minus each "
			    "process's "
			    "context memory (about 300-600 MiB per process): lower them or place fewer tenants per GPU",
			    gg_bytes(dev->driver_total, b1));
		} else {
			evidence(g, "the driver's free and total memory were not recorded");
			change(g, "check the card's other tenants (nvidia-smi) and lower ceilings so they sum to less "
			          "than the card");
		}
		if (dev && dev->has_driver_free && sat_add(used, dev->driver_free) >= GiB)
			change(g,
			       "set this process's GPUGUARD_LIMIT to what it can really get, at most %lluGi (charged + "
			       "driver free, rounded down), so it fails at its own ceiling with a dump",
			       (unsigned long long)(sat_add(used, dev->driver_free) / GiB));
		else
			change(g, "set this process's GPUGUARD_LIMIT to what it can really get, so it fails at its own "
			          "ceiling with a dump");
	}
	if (frag) {
		struct gg_diag *g = diag_new(a, GG_D_FRAGMENTATION, "fragmentation");
		evidence(g, "%s of %s on device %u failed (%s) although free memory was enough:",
		         d->req_api ? d->req_api : "a request", gg_bytes(req, b1), dv, outcome ? outcome : "");
		if (dev && dev->has_driver_free && driver)
			evidence(g, "driver free %s >= request %s: no contiguous block of that size",
			         gg_bytes(dev->driver_free, b1), gg_bytes(req, b2));
		if (dev && dev->pool_reserved)
			evidence(g, "pool reserve %s vs in use %s: slack %s", gg_bytes(dev->pool_reserved, b1),
			         gg_bytes(a->dev[dv].async_live, b2), gg_bytes(pool_slack, b3));
		if (d->nvmm) {
			evidence(g, "VMM: %zu reservation%s, %s reserved, %s mapped, %llu hole%s, largest %s", d->nvmm,
			         d->nvmm == 1 ? "" : "s", gg_bytes(a->vmm_reserved, b1), gg_bytes(a->vmm_mapped, b2),
			         (unsigned long long)a->vmm_holes, a->vmm_holes == 1 ? "" : "s",
			         gg_bytes(a->vmm_largest_hole, b3));
			/* Supporting evidence only: holes are address space, not
			 * memory, so they never decide the diagnosis on their own. */
			if (a->vmm_holes && req > a->vmm_largest_hole)
				evidence(
				    g,
				    "request %s > largest VMM hole %s: no hole between mapped chunks can take it; it "
				    "needs new address space or fails to map contiguously",
				    gg_bytes(req, b1), gg_bytes(a->vmm_largest_hole, b2));
		}
		evidence(g, "granted %s vs requested %s: internal waste %s", gg_bytes(a->dev[dv].granted, b1),
		         gg_bytes(a->dev[dv].live_bytes, b2), gg_bytes(dev_waste, b3));
		spectrum(a, g);
		if (a->torch_pattern) {
			evidence(g,
			         "%llu of %llu live allocations have PyTorch caching-allocator segment sizes (2 MiB, "
			         "20 MiB, 2 MiB multiples over 10 MiB)%s",
			         (unsigned long long)a->torch_segments, (unsigned long long)a->live_count,
			         a->torch_frames ? "; the stacks show PyTorch's CUDACachingAllocator" : "");
			change(g,
			       "%sPYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow in place instead of "
			       "leaving holes)",
			       a->torch_frames ? "" : "if this is PyTorch: ");
		}
		if (pool_slack >= req && req)
			change(g, "trim the stream-ordered pool before large requests (cuMemPoolTrimTo / "
			          "hipMemPoolTrimTo) or lower its release threshold");
		change(g, "allocate the largest long-lived buffers first, and reuse buffers of one size class");
		if (a->frag_first) {
			struct gg_diag t = a->diags[0];
			a->diags[0] = a->diags[1];
			a->diags[1] = t;
		}
	} else if (a->torch_pattern && (ceiling || driver)) {
		struct gg_diag *g = &a->diags[0];
		change(g, "the live segments look like PyTorch's caching allocator: if its OOM message shows much "
		          "\"reserved but unallocated\" memory, set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
	}

	/* Leak: the oldest-holding site that also only grew in the history. */
	uint64_t uptime = d->unix_ms > d->start_unix_ms ? d->unix_ms - d->start_unix_ms : 0;
	for (size_t i = 0; i < a->nsites && i < 16; i++) {
		const struct gg_site *s = a->by_bytes[i];
		if (!s->st || s->live_count < 4 || s->h_alloc_count < 4)
			continue;
		if (s->h_free_count * 4 > s->h_alloc_count)
			continue;
		if ((uptime && s->oldest_age * 2 < uptime) || s->oldest_age < 10000)
			continue; /* young allocations are a working set, not a leak */
		/* Growing through the history, not allocated once at start-up. */
		if (a->t_end > a->t_start && (s->h_last_ms - s->h_first_ms) * 2 < a->t_end - a->t_start)
			continue;
		struct gg_diag *g = diag_new(a, GG_D_LEAK, "leak suspected");
		gg_stack_label(d, s->st, lab, sizeof lab);
		evidence(g,
		         "call site stack %llu keeps %llu live allocations (%s), the oldest %.1f s old (process up "
		         "%.1f s): %s",
		         (unsigned long long)s->st, (unsigned long long)s->live_count, gg_bytes(s->live_bytes, b1),
		         (double)s->oldest_age / 1000.0, (double)uptime / 1000.0, lab);
		evidence(g, "in the history it allocated %llu times (%s) and freed %llu times (%s)",
		         (unsigned long long)s->h_alloc_count, gg_bytes(s->h_alloc_bytes, b1),
		         (unsigned long long)s->h_free_count, gg_bytes(s->h_free_bytes, b2));
		change(g, "find what keeps these buffers (the stack under TOP CALL SITES): free them, or bound the "
		          "cache that holds them");
		break;
	}

	if (d->has_host &&
	    ((d->has_cg_oom && d->cg_oom_kill > 0) ||
	     (d->has_cg_limit && d->has_cg_usage && d->cg_limit && d->cg_usage >= d->cg_limit / 10 * 9))) {
		struct gg_diag *g = diag_new(a, GG_D_HOST, "host memory pressure");
		if (d->has_cg_limit && d->has_cg_usage)
			evidence(
			    g, "cgroup v%llu memory: %s used of a %s limit (%llu%%)", (unsigned long long)d->cg_version,
			    gg_bytes(d->cg_usage, b1), gg_bytes(d->cg_limit, b2),
			    (unsigned long long)(d->cg_limit ? d->cg_usage / (d->cg_limit / 100 ? d->cg_limit / 100 : 1)
			                                     : 0));
		if (d->has_cg_oom && d->cg_oom_kill)
			evidence(g, "the kernel has already OOM-killed in this cgroup: oom_kill = %llu",
			         (unsigned long long)d->cg_oom_kill);
		evidence(g, "process RSS %s; pinned host memory %s in %llu allocations", gg_bytes(d->rss, b1),
		         gg_bytes(d->pinned_bytes, b2), (unsigned long long)d->pinned_allocs);
		change(g, "the pod risks being OOMKilled (exit 137), which no GPU ceiling prevents");
		if (d->has_cg_usage)
			change(g,
			       "raise the container memory limit (resources.limits.memory) to at least %lluGi (usage "
			       "x1.2), "
			       "or use less host memory: fewer DataLoader workers, smaller pinned buffers",
			       (unsigned long long)headroom_gib(d->cg_usage));
	}
	if (a->ndiags == 0) {
		struct gg_diag *g = diag_new(a, GG_D_NONE, "no failure recorded");
		evidence(g, "dump written on \"%s\": %llu live allocations, %s", d->trigger ? d->trigger : "?",
		         (unsigned long long)a->live_count, gg_bytes(a->live_bytes, b1));
		change(g, "nothing to change; the views below show where the memory is");
	}
}

void gg_analyze(struct gg_analysis *a, const struct gg_dump *d)
{
	memset(a, 0, sizeof *a);
	a->d = d;
	struct gg_site *last = NULL;
	for (size_t i = 0; i < d->nallocs; i++) {
		const struct gg_alloc *x = &d->allocs[i];
		struct gg_site *s = last && last->st == x->st ? last : site_get(a, x->st);
		last = s;
		s->live_bytes = sat_add(s->live_bytes, x->size);
		s->live_count++;
		if (x->age > s->oldest_age)
			s->oldest_age = x->age;
		a->live_bytes = sat_add(a->live_bytes, x->size);
		a->live_count++;
		uint64_t gr = gg_granted(x->api, x->size);
		a->granted = sat_add(a->granted, gr);
		struct gg_devstat *ds = &a->dev[x->dev];
		ds->live_bytes = sat_add(ds->live_bytes, x->size);
		ds->live_count++;
		ds->granted = sat_add(ds->granted, gr);
		if (is_async(x->api))
			ds->async_live = sat_add(ds->async_live, x->size);
		int bkt = x->size ? 63 - __builtin_clzll(x->size) : 0;
		if (bkt >= GG_HIST_BUCKETS)
			bkt = GG_HIST_BUCKETS - 1;
		a->hist_count[bkt]++;
		a->hist_bytes[bkt] = sat_add(a->hist_bytes[bkt], x->size);
		if ((x->api == GPUGUARD_API_CU_MEM_ALLOC || x->api == GPUGUARD_API_HIP_MALLOC) &&
		    (x->size == 2 * MiB || x->size == 20 * MiB || (x->size > 10 * MiB && x->size % (2 * MiB) == 0)))
			a->torch_segments++;
		if (x->size == 2 * MiB || x->size == 20 * MiB)
			a->torch_exact++;
	}
	/* PyTorch's frames, where the stacks have symbols; else the segment
	 * sizes, with enough exact 2/20 MiB ones that plain 2 MiB-rounded
	 * buffers do not pass for it. */
	for (struct gg_stack *st = d->stacks; st && !a->torch_frames; st = st->hh.next)
		for (uint32_t k = 0; k < st->nframes; k++)
			if (strstr(st->frames[k].m, "libc10") ||
			    (st->frames[k].s && strstr(st->frames[k].s, "CUDACachingAllocator"))) {
				a->torch_frames = 1;
				break;
			}
	a->torch_pattern = a->torch_frames || (a->live_count >= 4 && a->torch_segments * 10 >= a->live_count * 8 &&
	                                       a->torch_exact * 4 >= a->live_count);
	for (size_t i = 0; i < d->nhist; i++) {
		const struct gg_hist *h = &d->hist[i];
		if (!h->st || h->op == 'r')
			continue;
		struct gg_site *s = NULL;
		HASH_FIND(hh, a->sites, &h->st, sizeof h->st, s);
		if (!s)
			continue; /* a site with nothing live: not in the views */
		if (h->op == 'a') {
			if (!s->h_alloc_count)
				s->h_first_ms = h->ms;
			s->h_last_ms = h->ms;
			s->h_alloc_count++;
			s->h_alloc_bytes = sat_add(s->h_alloc_bytes, h->size);
		} else {
			s->h_free_count++;
			s->h_free_bytes = sat_add(s->h_free_bytes, h->size);
		}
	}
	a->internal_waste = a->granted > a->live_bytes ? a->granted - a->live_bytes : 0;
	for (size_t i = 0; i < d->nvmm; i++) {
		const struct gg_vmm *v = &d->vmm[i];
		a->vmm_reserved = sat_add(a->vmm_reserved, v->size);
		a->vmm_mapped = sat_add(a->vmm_mapped, v->mapped);
		a->vmm_holes = sat_add(a->vmm_holes, v->holes);
		if (v->largest_hole > a->vmm_largest_hole)
			a->vmm_largest_hole = v->largest_hole;
	}
	for (size_t i = 0; i < d->ndevices; i++) {
		a->pool_reserved = sat_add(a->pool_reserved, d->devices[i].pool_reserved);
		a->pool_used = sat_add(a->pool_used, a->dev[d->devices[i].dev].async_live);
	}
	a->by_bytes = calloc(a->nsites + 1, sizeof *a->by_bytes);
	a->by_count = calloc(a->nsites + 1, sizeof *a->by_count);
	if (!a->by_bytes || !a->by_count) {
		gg_error("out of memory");
		exit(GG_EXIT_BADINPUT);
	}
	size_t n = 0;
	for (struct gg_site *s = a->sites; s; s = s->hh.next)
		a->by_bytes[n] = a->by_count[n] = s, n++;
	qsort(a->by_bytes, n, sizeof *a->by_bytes, cmp_bytes);
	qsort(a->by_count, n, sizeof *a->by_count, cmp_count);
	timeline(a);
	diagnose(a);
}

void gg_analysis_free(struct gg_analysis *a)
{
	struct gg_site *s, *tmp;
	HASH_ITER(hh, a->sites, s, tmp)
	{
		HASH_DEL(a->sites, s);
		free(s);
	}
	free(a->by_bytes);
	free(a->by_count);
	memset(a, 0, sizeof *a);
}
