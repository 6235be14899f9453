/* gpuguard command: aggregates a dump (call sites, devices, sizes, timeline)
 * and diagnoses it. Every figure a diagnosis quotes comes from the dump, so
 * the report is deterministic: the same file gives the same words. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <gpuguard.h>
#include <gpuguard/charge.h>

#include "tool.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)
#define GiB (1024ull * 1024 * 1024)

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
	return gpuguard_api_kind(api) == GPUGUARD_KIND_POOL;
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
	if (g->nevidence >= (int)(sizeof g->evidence / sizeof g->evidence[0]))
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g->evidence[g->nevidence++], sizeof g->evidence[0], fmt, ap);
	va_end(ap);
}

static void change(struct gg_diag *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void change(struct gg_diag *g, const char *fmt, ...)
{
	if (g->nchange >= (int)(sizeof g->change / sizeof g->change[0]))
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
	/* A Python program's site is its innermost Python line (issue 27). */
	for (uint32_t i = 0; i < s->nframes; i++)
		if (gg_frame_py(&s->frames[i], out, outlen))
			return;
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

static const struct gg_dump_device *find_dev(const struct gg_dump *d, uint32_t dev)
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

/* ---- what the history says per call site: transient vs kept, and what
 * was live at the peak (issue 11, findings 1 and 4) ---- */

struct hsite {
	uint64_t st;
	__int128 cur; /* bytes live from this site as the walk goes */
	uint64_t h_a, h_f, n_a;
	int transient;
	__int128 start;   /* bytes live before the history's first event */
	__int128 at_last; /* ... at the last event at the peak */
	__int128 at_peak;
	UT_hash_handle hh;
};

static struct hsite *hsite_get(struct hsite **tab, uint64_t st)
{
	struct hsite *h = NULL;
	HASH_FIND(hh, *tab, &st, sizeof st, h);
	if (h)
		return h;
	h = calloc(1, sizeof *h);
	if (!h) {
		gg_error("out of memory");
		exit(GG_EXIT_BADINPUT);
	}
	h->st = st;
	HASH_ADD(hh, *tab, st, sizeof h->st, h);
	return h;
}

static uint64_t clamp128(__int128 v)
{
	return v <= 0 ? 0 : v >= (__int128)UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

static int cmp_pv(const void *x, const void *y)
{
	const uint64_t *a = x, *b = y; /* {st, bytes} */
	if (a[1] != b[1])
		return a[1] < b[1] ? 1 : -1;
	return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* The walk of the history per call site: its table, and where the walk
 * found the peak. */
struct replay {
	struct hsite *tab;
	__int128 total, trans, best, tmax, rmax;
	size_t best_i, last_best_i; /* first and last event at the peak */
	uint64_t best_ms;
};

/* Transient: a site that gave back at least half of what it took in the
 * history, several times over (scratch, activations). */
static int hs_transient(const struct hsite *h)
{
	return h->n_a >= 4 && h->h_f * 2 >= h->h_a && h->st;
}

/* Start from what is live now, per site; undo the history to get each
 * site's bytes before its first event. */
static void hs_rewind(struct replay *r, const struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	struct hsite *h, *tmp;
	for (struct gg_site *s = a->sites; s; s = s->hh.next)
		hsite_get(&r->tab, s->st)->cur = s->live_bytes;
	for (size_t i = 0; i < d->nhist; i++) {
		const struct gg_hist *e = &d->hist[i];
		if (e->op == 'r')
			continue;
		h = hsite_get(&r->tab, e->st);
		if (e->op == 'a') {
			h->cur -= e->size;
			h->h_a = sat_add(h->h_a, e->size);
			h->n_a++;
		} else {
			h->cur += e->size;
			h->h_f = sat_add(h->h_f, e->size);
		}
	}
	HASH_ITER(hh, r->tab, h, tmp)
	{
		h->transient = hs_transient(h);
		if (h->cur < 0)
			h->cur = 0; /* the live table and the history disagree (a hostile file) */
	}
	HASH_ITER(hh, r->tab, h, tmp)
	{
		h->start = h->cur;
		r->total += h->cur;
		if (h->transient)
			r->trans += h->cur;
	}
}

/* Replay the history forwards: its highest point, the most the transient
 * sites held at once, and the largest refused demand. */
static void hs_replay(struct replay *r, const struct gg_dump *d)
{
	struct hsite *h;
	r->best = d->nhist == 0 ? r->total : -1;
	r->best_i = r->last_best_i = SIZE_MAX;
	for (size_t i = 0; i < d->nhist; i++) {
		const struct gg_hist *e = &d->hist[i];
		if (e->op == 'r') {
			/* What a refused request asked for on top of what was
			 * live then: demand the history never saw granted. */
			if (r->total + (__int128)e->size > r->rmax)
				r->rmax = r->total + (__int128)e->size;
			continue;
		}
		HASH_FIND(hh, r->tab, &e->st, sizeof e->st, h);
		__int128 dlt = e->op == 'a' ? (__int128)e->size : -(__int128)e->size;
		h->cur += dlt;
		r->total += dlt;
		if (h->transient) {
			r->trans += dlt;
			if (r->trans > r->tmax)
				r->tmax = r->trans;
		}
		if (r->total > r->best) {
			r->best = r->total;
			r->best_i = i;
			r->best_ms = e->ms;
		}
		if (r->total == r->best)
			r->last_best_i = i;
	}
}

/* Each live site's first allocation in the history: how much the process
 * held just before it (a pool made after a query comes after what the
 * query saw held). */
static void hs_first_before(const struct replay *r, struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	struct hsite *h, *tmp;
	__int128 run = 0;
	HASH_ITER(hh, r->tab, h, tmp)
	run += h->cur;
	for (size_t i = d->nhist; i-- > 0;) {
		const struct gg_hist *e = &d->hist[i];
		if (e->op != 'r')
			run += e->op == 'a' ? -(__int128)e->size : (__int128)e->size;
	}
	for (size_t i = 0; i < d->nhist; i++) {
		const struct gg_hist *e = &d->hist[i];
		if (e->op == 'r')
			continue;
		if (e->op == 'a') {
			struct gg_site *s = NULL;
			HASH_FIND(hh, a->sites, &e->st, sizeof e->st, s);
			if (s && !s->h_seen) {
				s->h_seen = 1;
				s->h_first_before = clamp128(run);
			}
		}
		run += e->op == 'a' ? (__int128)e->size : -(__int128)e->size;
	}
}

/* Each site's bytes at the peak: cur is the state at the end, so step back
 * from the end to the peak (the forward walk moved past it). */
static void hs_at_peak(const struct replay *r, const struct gg_dump *d)
{
	struct hsite *h, *tmp;
	HASH_ITER(hh, r->tab, h, tmp)
	h->at_peak = h->cur;
	if (r->best_i == SIZE_MAX)
		return;
	for (size_t i = d->nhist; i-- > r->best_i + 1;) {
		const struct gg_hist *e = &d->hist[i];
		if (e->op == 'r')
			continue;
		HASH_FIND(hh, r->tab, &e->st, sizeof e->st, h);
		h->at_peak += e->op == 'a' ? -(__int128)e->size : (__int128)e->size;
	}
}

/* An exit dump's history ends in the teardown, which frees it all: judged
 * over the whole of it every site comes and goes and nothing is kept
 * ("keeps 0 B, 4.00 GiB comes and goes"). With the peak inside the history,
 * judge the sites over the events up to it, and count what is kept as of
 * the peak (issue 11, finding 4). 1 when it did. */
static int hs_judge_at_peak(struct replay *r, struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	struct hsite *h, *tmp;
	if (r->last_best_i == SIZE_MAX || r->last_best_i + 1 >= d->nhist)
		return 0;
	HASH_ITER(hh, r->tab, h, tmp)
	h->h_a = h->h_f = h->n_a = 0, h->at_last = h->start;
	for (size_t i = 0; i <= r->last_best_i; i++) {
		const struct gg_hist *e = &d->hist[i];
		if (e->op == 'r')
			continue;
		HASH_FIND(hh, r->tab, &e->st, sizeof e->st, h);
		if (e->op == 'a')
			h->h_a = sat_add(h->h_a, e->size), h->n_a++, h->at_last += e->size;
		else
			h->h_f = sat_add(h->h_f, e->size), h->at_last -= e->size;
	}
	r->trans = r->tmax = 0;
	HASH_ITER(hh, r->tab, h, tmp)
	{
		h->transient = hs_transient(h);
		if (h->transient)
			r->trans += h->start;
	}
	for (size_t i = 0; i < d->nhist; i++) {
		const struct gg_hist *e = &d->hist[i];
		if (e->op == 'r')
			continue;
		HASH_FIND(hh, r->tab, &e->st, sizeof e->st, h);
		if (h->transient) {
			r->trans += e->op == 'a' ? (__int128)e->size : -(__int128)e->size;
			if (r->trans > r->tmax)
				r->tmax = r->trans;
		}
	}
	a->sz_transient = clamp128(r->tmax);
	return 1;
}

/* What comes and goes (its largest site) and what is kept: live now, or at
 * the peak, from sites that are not transient. */
static void hs_keep(const struct replay *r, struct gg_analysis *a, int kept_at_peak)
{
	struct hsite *h, *tmp;
	uint64_t tbest = 0;
	HASH_ITER(hh, r->tab, h, tmp)
	if (h->transient && h->h_a > tbest)
		tbest = h->h_a, a->sz_transient_st = h->st;
	if (kept_at_peak) {
		HASH_ITER(hh, r->tab, h, tmp)
		if (!h->transient)
			a->sz_keep = sat_add(a->sz_keep, clamp128(h->at_last));
	} else {
		for (struct gg_site *s = a->sites; s; s = s->hh.next) {
			HASH_FIND(hh, r->tab, &s->st, sizeof s->st, h);
			if (!h || !h->transient)
				a->sz_keep = sat_add(a->sz_keep, s->live_bytes);
		}
	}
}

/* The peak view: the history's highest point, or now when it is, largest
 * sites first. Frees the table. */
static void hs_peak_view(struct replay *r, struct gg_analysis *a)
{
	struct hsite *h, *tmp;
	size_t n = HASH_COUNT(r->tab), k = 0;
	uint64_t(*v)[2] = calloc(n + 1, sizeof *v);
	if (!v) {
		gg_error("out of memory");
		exit(GG_EXIT_BADINPUT);
	}
	HASH_ITER(hh, r->tab, h, tmp)
	{
		uint64_t b = clamp128(h->at_peak);
		if (b) {
			v[k][0] = h->st;
			v[k][1] = b;
			k++;
		}
		HASH_DEL(r->tab, h);
		free(h);
	}
	qsort(v, k, sizeof *v, cmp_pv);
	a->has_peak_view = k > 0;
	a->pv_bytes = clamp128(r->best);
	a->pv_ms = r->best_i != SIZE_MAX ? r->best_ms : 0;
	a->npv_sites = 0;
	for (size_t i = 0; i < k && a->npv_sites < 16; i++) {
		a->pv_sites[a->npv_sites].st = v[i][0];
		a->pv_sites[a->npv_sites].bytes = v[i][1];
		a->npv_sites++;
	}
	free(v);
}

/* The process's own peak record: is the view that moment? When the
 * history does not reach back to it, the library's own snapshot at the
 * peak, where the dump carries one (issue 11, finding 4), is the view
 * instead of the history's highest point. */
static void peak_record(struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	uint32_t dv = d->has_request ? d->req_dev : (d->ndevices ? d->devices[0].dev : 0);
	a->pv_dev = dv;
	a->peak_in_history = 1;
	for (size_t i = 0; i < d->npeaks; i++)
		if (d->peaks[i].dev == dv) {
			a->pv_record_bytes = d->peaks[i].bytes;
			a->pv_record_ms = d->peaks[i].ms;
			/* The history covers the peak when it rebuilt at least
			 * as much (sizes are the same requested bytes). */
			a->peak_in_history = a->pv_bytes >= d->peaks[i].bytes;
		}
	if (a->peak_in_history)
		return;
	int m = 0;
	for (size_t i = 0; i < d->npeak_sites && m < 16; i++) {
		const struct gg_peak_site *p = &d->peak_sites[i];
		if (p->dev != dv || (!m && p->at <= a->pv_bytes))
			continue;
		if (!m)
			a->pv_bytes = p->at, a->pv_ms = p->ms;
		a->pv_sites[m].st = p->st;
		a->pv_sites[m].bytes = p->bytes;
		m++;
	}
	if (m) {
		a->npv_sites = m;
		a->pv_carried = 1;
		a->has_peak_view = 1;
	}
}

static void history_sites(struct gg_analysis *a)
{
	struct replay r;
	memset(&r, 0, sizeof r);
	hs_rewind(&r, a);
	hs_replay(&r, a->d);
	a->sz_transient = clamp128(r.tmax);
	a->sz_refused_demand = clamp128(r.rmax);
	hs_first_before(&r, a);
	hs_at_peak(&r, a->d);
	int kept_at_peak = hs_judge_at_peak(&r, a);
	hs_keep(&r, a, kept_at_peak);
	hs_peak_view(&r, a);
	peak_record(a);
}

/* A round fraction: v in thousandths, nearest multiple of 50 when within
 * 10 of it (0.75, 0.90), else v itself. */
static unsigned round_pm(unsigned v)
{
	unsigned r = (v + 25) / 50 * 50;
	return (r > v ? r - v : v - r) <= 10 ? r : v;
}

static int grid_dist(unsigned v)
{
	unsigned r = (v + 25) / 50 * 50;
	return (int)(r > v ? r - v : v - r);
}

static int mentions(const struct gg_dump *d, const char *const *words)
{
	for (const char *const *w = words; *w; w++) {
		if (d->cmdline && strcasestr(d->cmdline, *w))
			return 1;
		for (struct gg_stack *st = d->stacks; st; st = st->hh.next)
			for (uint32_t k = 0; k < st->nframes; k++)
				if (strcasestr(st->frames[k].m, *w) ||
				    (st->frames[k].s && strcasestr(st->frames[k].s, *w)))
					return 1;
	}
	return 0;
}

/* The fraction a flag sets on the command line ("--flag 0.9" or
 * "--flag=0.9"), in thousandths; 0 when absent or not a fraction. */
static unsigned cmdline_fraction(const struct gg_dump *d, const char *flag)
{
	const char *c = d->cmdline;
	size_t n = strlen(flag);
	while (c && (c = strstr(c, flag))) {
		const char *v = c + n;
		c = v;
		if (*v != ' ' && *v != '=')
			continue;
		v++;
		unsigned pm = 0, scale = 1000;
		if (*v == '0' || *v == '1') {
			pm = (unsigned)(*v - '0') * 1000;
			v++;
		}
		if (*v == '.')
			for (v++; *v >= '0' && *v <= '9'; v++)
				if (scale > 1)
					scale /= 10, pm += (unsigned)(*v - '0') * scale;
		if ((*v == ' ' || !*v) && pm > 0 && pm <= 1000)
			return pm;
	}
	return 0;
}

/* Did the process size itself from a memory-info answer? */
/* The timeline and the peak view are rebuilt from the live table and the
 * history; where those were copied at different moments (a dump from a
 * library before the cut, or one whose cut is not exact) they can climb
 * past anything the process held (issue 25, finding 7: a timeline at 704
 * MiB from a loop that never held 448). The books' own peak bounds them:
 * the peak records' sum (requested bytes, as the records; every dump
 * since format 1's peak records has them). Capped, and the difference
 * said. */
static void cap_to_books(struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	uint64_t books = 0;
	for (size_t i = 0; i < d->npeaks; i++)
		books = sat_add(books, d->peaks[i].bytes);
	if (!books)
		return;
	uint64_t over = 0;
	if (a->has_timeline && a->t_peak > books) {
		over = a->t_peak - books;
		a->t_peak = books;
		for (int b = 0; b < GG_TIMELINE; b++)
			if (a->t_max[b] > books)
				a->t_max[b] = books;
		if (a->baseline > books)
			a->baseline = books;
		if (a->t_final > books)
			a->t_final = books;
	}
	if (a->pv_bytes > books) {
		if (a->pv_bytes - books > over)
			over = a->pv_bytes - books;
		a->pv_bytes = books;
	}
	a->over_books = over;
}

/* Mode 1's pool: right after one of the queries (the latest that fits),
 * one call site allocated a pool in few allocations and keeps it: a
 * preallocation (JAX, vLLM's KV tensors, TensorRT-LLM's KV cache). */
struct sz_pool {
	const struct gg_meminfo *q;
	const struct gg_site *site;
	uint64_t bytes, n;
};

static void sizing_pool(const struct gg_analysis *a, const struct gg_meminfo *const *cand, int ncand, struct sz_pool *p)
{
	const struct gg_dump *d = a->d;
	uint32_t dv = a->pv_dev;
	uint64_t uptime = d->unix_ms > d->start_unix_ms ? d->unix_ms - d->start_unix_ms : 0;
	for (int c = ncand - 1; c >= 0 && !p->site; c--) {
		const struct gg_meminfo *m = cand[c];
		for (struct gg_site *s = a->sites; s; s = s->hh.next) {
			uint64_t b = 0, n = 0;
			int all_after = 1;
			for (size_t i = 0; i < d->nallocs; i++) {
				const struct gg_alloc *x = &d->allocs[i];
				if (x->st != s->st || x->dev != dv)
					continue;
				uint64_t t = uptime > x->age ? uptime - x->age : 0;
				if (t + 1 < m->ms || t > m->ms + 2000)
					all_after = 0;
				b = sat_add(b, x->size);
				n++;
			}
			/* after the query in event order too: when its first
			 * allocation came, the process held what the query saw */
			int ordered = s->h_seen ? s->h_first_before >= m->used : m->used == 0;
			unsigned f_tot = (unsigned)((unsigned __int128)sat_add(m->used, b) * 1000 / m->total);
			unsigned f_free = m->free ? (unsigned)((unsigned __int128)b * 1000 / m->free) : 0;
			int round = (f_tot >= 600 && f_tot <= 1000 && grid_dist(f_tot) <= 10) ||
			            (f_free >= 600 && f_free <= 1000 && grid_dist(f_free) <= 10);
			if (all_after && ordered && round && n && n <= 128 && b > p->bytes && s->h_free_count == 0)
				p->site = s, p->bytes = b, p->n = n, p->q = m;
		}
	}
}

/* Which framework sized itself, by the stacks or the command, and its knob. */
static void sizing_framework(struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	static const char *const vllm[] = {"vllm", NULL}, *const jax[] = {"jax", "xla", NULL},
	                         *const trt[] = {"tensorrt_llm", "trtllm", NULL};
	if (mentions(d, trt))
		a->sz_framework = "TensorRT-LLM", a->sz_knob = "kv_cache_free_gpu_mem_fraction",
		a->sz_knob_default_pm = 900, a->sz_cmd_pm = cmdline_fraction(d, "--kv_cache_free_gpu_memory_fraction");
	else if (mentions(d, vllm))
		a->sz_framework = "vLLM", a->sz_knob = "gpu_memory_utilization", a->sz_knob_default_pm = 900,
		a->sz_cmd_pm = cmdline_fraction(d, "--gpu-memory-utilization");
	else if (mentions(d, jax))
		a->sz_framework = "JAX", a->sz_knob = "XLA_PYTHON_CLIENT_MEM_FRACTION", a->sz_knob_default_pm = 750;
	/* What it measured as taken (the evidence) and what the advice starts
	 * from: the knob's value on its command line where it is there, of
	 * the base that knob is of (vLLM's is of the total, TensorRT-LLM's of
	 * the free memory). vLLM takes its fraction less the weights and the
	 * profiled peak, which looks like some other fraction of either. */
	a->sz_meas_pm = a->sz_cur_pm;
	a->sz_meas_of_free = a->sz_of_free;
	if (a->sz_cmd_pm && a->sizing == 1) {
		a->sz_cur_pm = a->sz_cmd_pm;
		a->sz_of_free = a->sz_framework && !strcmp(a->sz_framework, "TensorRT-LLM");
	}
}

/* How much to lower the fraction by. */
static void sizing_delta(struct gg_analysis *a, const struct gg_dump_device *dev, uint64_t held)
{
	const struct gg_dump *d = a->d;
	const struct gg_meminfo *q = a->sz_q;
	uint64_t T = q->total;
	/* What it needed beyond the total, with headroom: the refusal's demand,
	 * or what it keeps plus the most that came and went. Not both plus the
	 * request: what was held at the refusal already counts what came and
	 * went then, and a refused scratch buffer is one of those that come
	 * and go (a JAX-like workspace was told 0.40 for 0.70). */
	uint64_t req = d->has_request ? d->req_size : 0;
	uint64_t demand = sat_add(held, req);
	uint64_t d2 = sat_add(a->sz_keep, a->sz_transient);
	if (d2 > demand)
		demand = d2;
	/* The largest refused demand in the history: an earlier refusal may
	 * have asked for more than the last one (issue 11: a TensorRT-LLM-like
	 * runtime told 0.85 still had 12 of 150 steps refused). */
	if (a->sz_refused_demand > demand)
		demand = a->sz_refused_demand;
	uint64_t over = demand > T ? demand - T : 0;
	a->sz_over = over;
	/* x1.2, in thousandths of what the fraction is of (the total, or the
	 * free memory it was told), up to a step of 0.05; at least one step
	 * when the process was refused (it did not fit as it is). */
	uint64_t base = a->sizing == 1 && a->sz_of_free && q->free ? q->free : T;
	unsigned delta = (unsigned)(((unsigned __int128)over * 1200 / base + 49) / 50 * 50);
	int refused = dev && (dev->refused_ceiling || dev->refused_driver);
	if (delta < 50 && (refused || over))
		delta = 50;
	a->sz_delta_pm = delta;
	if (a->sizing == 1)
		a->sz_new_pm = a->sz_cur_pm > delta + 50 ? a->sz_cur_pm - delta : 50;
}

static void self_sizing(struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	uint32_t dv = a->pv_dev;
	const struct gg_dump_device *dev = NULL;
	for (size_t i = 0; i < d->ndevices; i++)
		if (d->devices[i].dev == dv)
			dev = &d->devices[i];
	uint64_t held = a->dev[dv].live_bytes;
	if (dev && dev->process_used > held)
		held = dev->process_used; /* charged: granularity included */
	/* The first queries: a server asks before it sizes itself, while it
	 * still holds little of what it was told. */
	const struct gg_meminfo *cand[8];
	int ncand = 0;
	for (size_t i = 0; i < d->nmeminfo && ncand < 8; i++) {
		const struct gg_meminfo *m = &d->meminfo[i];
		if (m->dev == dv && m->total && m->n < 8 &&
		    (unsigned __int128)m->used * 10 <= (unsigned __int128)m->total * 6)
			cand[ncand++] = m;
	}
	if (!ncand)
		return;
	struct sz_pool p = {NULL, NULL, 0, 0};
	sizing_pool(a, cand, ncand, &p);
	const struct gg_meminfo *q = p.q;
	if (p.site) {
		uint64_t T = q->total;
		unsigned of_total = (unsigned)((unsigned __int128)sat_add(q->used, p.bytes) * 1000 / T);
		unsigned of_free = q->free ? (unsigned)((unsigned __int128)p.bytes * 1000 / q->free) : 0;
		a->sizing = 1;
		a->sz_pool = p.bytes;
		a->sz_pool_count = p.n;
		a->sz_pool_st = p.site->st;
		a->sz_of_free = q->used && of_free && of_free <= 1000 && grid_dist(of_free) + 2 < grid_dist(of_total);
		a->sz_cur_pm = round_pm(a->sz_of_free ? of_free : of_total);
	} else {
		/* Mode 2: it asked, then grew to the total it was told. */
		q = cand[0];
		uint64_t T = q->total;
		if ((unsigned __int128)sat_add(held, d->has_request ? d->req_size : 0) * 100 >=
		        (unsigned __int128)T * 90 ||
		    (dev && !dev->pod && (unsigned __int128)dev->peak * 100 >= (unsigned __int128)T * 90) ||
		    (unsigned __int128)a->pv_record_bytes * 100 >= (unsigned __int128)T * 90) {
			a->sizing = 2;
			a->sz_cur_pm = (unsigned)((unsigned __int128)a->sz_keep * 1000 / T);
		} else {
			return;
		}
	}
	a->sz_q = q;
	sizing_framework(a);
	sizing_delta(a, dev, held);
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
	const struct gg_dump_pod *top[3] = {NULL, NULL, NULL};
	for (size_t i = 0; i < d->npod; i++) {
		const struct gg_dump_pod *u = &d->pod[i];
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
		change(g,
		       "see which processes of the pod hold the other %s: gpuguard top --once (same GPUGUARD_SHARED)",
		       gg_bytes(used - mine, b1));
}

/* GPUGUARD_LIMIT from the peak: the larger of the process's own peak (the
 * peak record) and, in process scope, the device's charged peak, x1.2 to
 * a GiB. */
static void peak_suggestion(struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	uint64_t p = a->pv_record_bytes > a->pv_bytes ? a->pv_record_bytes : a->pv_bytes;
	const struct gg_dump_device *dev = find_dev(d, a->pv_dev);
	if (dev && !dev->pod && dev->peak > p)
		p = dev->peak;
	a->pv_suggest_gib = p ? headroom_gib(p) : 0;
}

/* The advice for a process that sizes itself from the total it is told:
 * the fraction it takes, not the ceiling (issue 11, finding 1). */
static void sizing_advice(struct gg_analysis *a, struct gg_diag *g, int refused)
{
	const struct gg_dump *d = a->d;
	const struct gg_meminfo *q = a->sz_q;
	char b1[32], b2[32], b3[32], f1[16], f2[16], f3[16], lab[320];
	evidence(g,
	         "it sizes itself from the memory info: of %llu queries, #%llu%s at %.1f s told it total %s, free %s, "
	         "while it held %s",
	         (unsigned long long)d->meminfo_count, (unsigned long long)q->n + 1, q->nvml ? " (NVML)" : "",
	         (double)q->ms / 1000.0, gg_bytes(q->total, b1), gg_bytes(q->free, b2), gg_bytes(q->used, b3));
	if (a->sizing == 1) {
		gg_stack_label(d, a->sz_pool_st, lab, sizeof lab);
		evidence(
		    g, "right after it, stack %llu allocated %s in %llu allocation%s and keeps it: %s of the %s%s: %s",
		    (unsigned long long)a->sz_pool_st, gg_bytes(a->sz_pool, b1), (unsigned long long)a->sz_pool_count,
		    a->sz_pool_count == 1 ? "" : "s", gg_fraction(a->sz_meas_pm, f1),
		    a->sz_meas_of_free ? "free" : "total",
		    a->sz_meas_of_free || !q->used ? "" : " with what it held before", lab);
	} else {
		evidence(g,
		         "then it grew into that total: it keeps %s (%s of the total) in call sites that do not free, "
		         "and up to %s more comes and goes%s",
		         gg_bytes(a->sz_keep, b1), gg_fraction(a->sz_cur_pm, f1), gg_bytes(a->sz_transient, b2),
		         a->sz_transient_st ? "" : " (none seen)");
		if (a->sz_transient_st) {
			gg_stack_label(d, a->sz_transient_st, lab, sizeof lab);
			evidence(g, "what comes and goes is mostly stack %llu: %s",
			         (unsigned long long)a->sz_transient_st, lab);
		}
	}
	if (a->sz_framework)
		evidence(g, "the stacks or the command name %s, which sizes itself with %s", a->sz_framework,
		         a->sz_knob);
	if (a->sz_cmd_pm)
		evidence(g, "its command line sets %s to %s", a->sz_knob, gg_fraction(a->sz_cmd_pm, f1));
	const char *knob = a->sz_knob ? a->sz_knob : "the fraction of the total it sizes itself to";
	const char *what = a->sz_of_free ? "free memory" : "the total";
	if (a->sizing == 1) {
		change(g,
		       "lower %s from %s to %s: it leaves %s of %s for what it allocates outside its pool (%s over, "
		       "x1.2, in steps of 0.05)",
		       knob, gg_fraction(a->sz_cur_pm, f1), gg_fraction(a->sz_new_pm, f2),
		       gg_bytes((uint64_t)((unsigned __int128)(a->sz_of_free ? q->free : q->total) *
		                           (1000 - a->sz_new_pm) / 1000),
		                b1),
		       what, gg_bytes(a->sz_over, b2));
	} else {
		/* The value on its command line when it is there; else the
		 * framework's default, as an example. */
		unsigned dflt = a->sz_cmd_pm ? a->sz_cmd_pm : a->sz_knob_default_pm ? a->sz_knob_default_pm : 900;
		change(g,
		       "lower %s by %s (%s %s -> %s): %s more of %s for what comes and goes (%s over at the peak "
		       "demand, x1.2, in steps of 0.05)",
		       knob, gg_fraction(a->sz_delta_pm, f1), a->sz_cmd_pm ? "its command line's" : "e.g.",
		       gg_fraction(dflt, f2), gg_fraction(dflt > a->sz_delta_pm + 50 ? dflt - a->sz_delta_pm : 50, f3),
		       gg_bytes((uint64_t)((unsigned __int128)q->total * a->sz_delta_pm / 1000), b1), what,
		       gg_bytes(a->sz_over, b2));
	}
	if (refused)
		change(g,
		       "a higher GPUGUARD_LIMIT does not help: it reports a larger total, and the process grows into "
		       "it");
	else
		change(g, "GPUGUARD_LIMIT sets the total it sizes itself to: set it to what it may have, and tune the "
		          "fraction, not the ceiling");
	if (d->has_request)
		change(g, "this dump is the first refusal's: later requests may ask for more; an exit dump "
		          "(GPUGUARD_DUMP_AT_EXIT=1) sees every refusal of the run and sizes from the largest");
}

/* What the diagnoses read, worked out once before the table runs: the kind
 * of failure, its device and request, and the figures more than one of them
 * quotes. */
struct dctx {
	const struct gg_dump *d;
	const char *outcome;              /* the failing request's, or NULL */
	int ceiling, driver;              /* refused at the ceiling / by the driver */
	int frag;                         /* free memory could have held the request */
	int frag_first;                   /* fragmentation is the real story: shown first */
	uint32_t dv;                      /* the device the failure is about */
	const struct gg_dump_device *dev; /* its record, or NULL */
	uint64_t req, pool_slack, dev_waste;
	int steady, jump; /* growth_shape */
	uint64_t growth;
	uint64_t uptime;            /* the process's, in ms (0 = not known) */
	const struct gg_site *leak; /* the leaking call site, or NULL */
	uint64_t ws;                /* the cgroup's working set */
	int host;                   /* host memory pressure */
};

/* The failing request's outcome is as_outcome; without a request, the
 * dump's trigger is as_trigger. */
static int failed_as(const struct gg_dump *d, const char *outcome, const char *as_outcome, const char *as_trigger)
{
	return outcome ? !strcmp(outcome, as_outcome) : d->trigger && !strcmp(d->trigger, as_trigger);
}

/* Leak: the oldest-holding site that also only grew in the history. */
static const struct gg_site *leak_site(const struct gg_analysis *a, uint64_t uptime)
{
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
		return s;
	}
	return NULL;
}

static void dctx_init(struct dctx *c, const struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	memset(c, 0, sizeof *c);
	c->d = d;
	growth_shape(a, &c->steady, &c->jump, &c->growth);
	c->outcome = d->has_request ? d->req_outcome : NULL;
	c->ceiling = failed_as(d, c->outcome, "refused_ceiling", "ceiling");
	c->driver = failed_as(d, c->outcome, "driver_oom", "driver_oom");
	c->dv = d->has_request ? d->req_dev : 0;
	if (!d->has_request)
		for (size_t i = 0; i < d->ndevices; i++)
			if (d->devices[i].refused_ceiling || d->devices[i].refused_driver) {
				c->dv = d->devices[i].dev;
				break;
			}
	c->dev = find_dev(d, c->dv);
	/* An exit or on-demand dump of a process that was refused along the
	 * way: the ceiling was reached, though no request is in the dump. */
	if (!c->outcome && !c->driver && c->dev && c->dev->refused_ceiling)
		c->ceiling = 1;
	c->req = d->has_request ? d->req_size : 0;
	const struct gg_devstat *ds = &a->dev[c->dv];
	if (c->dev && c->dev->pool_reserved > ds->async_live)
		c->pool_slack = c->dev->pool_reserved - ds->async_live;
	c->dev_waste = ds->granted > ds->live_bytes ? ds->granted - ds->live_bytes : 0;
	/* A ceiling refusal is always reported as such (the books are exact);
	 * pool slack that could have held the request is reported beside it.
	 * A driver refusal with enough free memory is fragmentation, not a
	 * full device. */
	if ((c->ceiling || c->driver) && c->req) {
		if (c->pool_slack >= c->req)
			c->frag = 1;
		if (c->driver && c->dev && c->dev->has_driver_free && c->dev->driver_free >= c->req)
			c->frag = 1;
	}
	/* A pool reserve that could hold the request several times over is the
	 * real story: fragmentation first, before the ceiling. */
	c->frag_first = c->ceiling && c->frag && c->dev && c->pool_slack * 4 >= c->dev->used;
	c->uptime = d->unix_ms > d->start_unix_ms ? d->unix_ms - d->start_unix_ms : 0;
	c->leak = leak_site(a, c->uptime);
	/* The working set the kubelet evicts on and the OOM killer weighs:
	 * usage less inactive page cache, which the kernel reclaims first. Raw
	 * usage counts weights read through the page cache (issue 11, 3). */
	c->ws = d->has_cg_usage && d->has_cg_inactive
	            ? (d->cg_usage > d->cg_inactive_file ? d->cg_usage - d->cg_inactive_file : 0)
	            : d->cg_usage;
	c->host = d->has_host && ((d->has_cg_oom && d->cg_oom_kill > 0) ||
	                          (d->has_cg_limit && d->has_cg_usage && d->cg_limit && c->ws >= d->cg_limit / 10 * 9));
}

/* The ceiling's advice once the evidence is in: what to set, or what to
 * lower, by the shape of the growth. */
static void ceiling_advice(struct gg_analysis *a, const struct dctx *c, struct gg_diag *g, uint64_t limit,
                           uint64_t used, uint64_t peak)
{
	char b1[32], b2[32];
	uint64_t req = c->req;
	uint64_t need = peak > sat_add(used, req) ? peak : sat_add(used, req);
	/* An exit or on-demand dump holds every refusal of its history:
	 * the largest of them, on top of what was live then, is a
	 * demand the process really made. */
	const char *why = "peak, or used + request";
	if (a->sz_refused_demand > need) {
		need = a->sz_refused_demand;
		why = "live + request at the largest refusal in the history";
		evidence(g, "the largest refused demand in the history: %s (what was live then + the request)",
		         gg_bytes(need, b1));
	}
	uint64_t rec = headroom_gib(need);
	if (a->sizing) {
		sizing_advice(a, g, 1);
	} else if (c->jump || (limit && req >= limit / 4)) {
		evidence(g, "usage jumped: one request of %s is %llu%% of the ceiling",
		         gg_bytes(req ? req : a->h_max_alloc, b1),
		         (unsigned long long)(limit ? (req ? req : a->h_max_alloc) * 100 / limit : 0));
		change(g, "lower the batch size, concurrency or max tokens that sized the %s request",
		       gg_bytes(req ? req : a->h_max_alloc, b1));
		change(g, "or raise GPUGUARD_LIMIT to %lluGi (%s = %s, x1.2, rounded up to a GiB)",
		       (unsigned long long)rec, why[0] == 'p' ? "used + request" : why, gg_bytes(need, b2));
	} else if (c->steady) {
		evidence(g, "usage grew steadily by %s over the last %.1f s of history, with no single large request",
		         gg_bytes(c->growth, b1), (double)(a->t_end - a->t_start) / 1000.0);
		change(g, "a leak or an unbounded cache: a higher ceiling only delays the failure; bound the cache "
		          "(max tokens, cache size) or free what the top call site keeps");
		change(g,
		       "if the growth is a warm-up that levels off, GPUGUARD_LIMIT=%lluGi covers the peak (%s "
		       "x1.2)",
		       (unsigned long long)rec, gg_bytes(need, b1));
	} else {
		change(g, "raise GPUGUARD_LIMIT to %lluGi: the observed need %s (%s) x1.2, rounded up to a GiB",
		       (unsigned long long)rec, gg_bytes(need, b1), why);
		change(g, "or lower the batch size or concurrency so the working set fits %s", gg_bytes(limit, b2));
	}
	if (!a->sizing && c->dev && c->dev->has_driver_total && rec * GiB > c->dev->driver_total)
		change(g, "note: %lluGi is more than the card's %s: lowering the batch size is the only way",
		       (unsigned long long)rec, gg_bytes(c->dev->driver_total, b1));
	/* issue 22: under a driver's limit that binds, ours alone cannot grow */
	if (c->dev && c->dev->has_driver_limit && limit && (!c->dev->has_own_limit || limit < c->dev->own_limit))
		change(g,
		       "note: a higher GPUGUARD_LIMIT alone changes nothing here: the driver's limit on the "
		       "cgroup (%s) sets the ceiling; raise that as well",
		       gg_bytes(c->dev->driver_limit, b1));
}

static void diag_ceiling(struct gg_analysis *a, const struct dctx *c, struct gg_diag *g)
{
	const struct gg_dump *d = a->d;
	const struct gg_dump_device *dev = c->dev;
	char b1[32], b2[32], b3[32], b4[32], lab[320];
	uint32_t dv = c->dv;
	uint64_t limit = dev && dev->has_limit ? dev->limit : 0, used = dev ? dev->used : 0;
	uint64_t peak = dev ? dev->peak : 0, req = c->req;
	if (d->has_request)
		evidence(g, "%s of %s on device %u was refused: device %u has %s charged of its %s ceiling, %s left",
		         d->req_api, gg_bytes(req, b1), dv, dv, gg_bytes(used, b2), gg_bytes(limit, b3),
		         gg_bytes(limit > used ? limit - used : 0, b4));
	else if (dev)
		evidence(g, "device %u refused %llu requests at its %s ceiling (peak %s)", dv,
		         (unsigned long long)dev->refused_ceiling, gg_bytes(limit, b1), gg_bytes(peak, b2));
	if (dev && dev->pod && dev->process_used < used)
		pod_evidence(g, d, dv, dev->process_used, used);
	/* issue 22: the ceiling was the driver's own limit (MPS memory
	 * partitioning), less what others in the cgroup use */
	if (dev && dev->has_driver_limit && limit && (!dev->has_own_limit || limit < dev->own_limit)) {
		evidence(g,
		         "the ceiling of %s is the driver's limit: the cgroup's hard limit (MPS memory partitioning, "
		         "dmem.max) is %s, of which its processes used %s at the last reading; gpuguard's own "
		         "ceiling is %s, and it refused before the driver would",
		         gg_bytes(limit, b1), gg_bytes(dev->driver_limit, b2), gg_bytes(dev->driver_limit_used, b3),
		         dev->has_own_limit ? gg_bytes(dev->own_limit, b4) : "none");
		change(g, "raise the cgroup's device memory limit (nvidia-smi memory-limits, dmem.max), or lower "
		          "what the other processes in the cgroup use");
	}
	/* issue 22: the books alone would have fit; what the driver
	 * holds beyond them (context, modules, local memory) did not */
	if (dev && dev->has_runtime && dev->runtime && d->has_request && limit &&
	    used - (used > dev->runtime ? dev->runtime : used) + req <= limit) {
		evidence(g,
		         "refused because of the runtime: %s of the %s charged is what the driver holds for this "
		         "process beyond its allocations (context, modules, local memory; the driver's figure "
		         "for it: %s); the allocations alone would have fit",
		         gg_bytes(dev->runtime, b1), gg_bytes(used, b2),
		         dev->has_runtime_driver ? gg_bytes(dev->runtime_driver, b3) : "not read");
		change(g, "raise the ceiling by the runtime, or lower what the process loads (lazy module "
		          "loading, CUDA_MODULE_LOADING=LAZY; a smaller cuCtxSetLimit stack)");
	}
	for (size_t i = 0; i < a->nsites && i < 2; i++) {
		const struct gg_site *s = a->by_bytes[i];
		gg_stack_label(d, s->st, lab, sizeof lab);
		evidence(g, "call site #%zu (stack %llu) holds %s in %llu allocations (%llu%% of live): %s", i + 1,
		         (unsigned long long)s->st, gg_bytes(s->live_bytes, b1), (unsigned long long)s->live_count,
		         (unsigned long long)(a->live_bytes ? s->live_bytes * 100 / a->live_bytes : 0), lab);
	}
	ceiling_advice(a, c, g, limit, used, peak);
}

static void diag_device_full(struct gg_analysis *a, const struct dctx *c, struct gg_diag *g)
{
	const struct gg_dump *d = a->d;
	const struct gg_dump_device *dev = c->dev;
	char b1[32], b2[32], b3[32], b4[32];
	uint64_t used = dev ? dev->process_used : 0; /* this process's, also in pod scope */
	evidence(g, "the driver refused %s%s%s on device %u while this process had %s charged%s%s",
	         d->has_request ? d->req_api : "a request", d->has_request ? " of " : "",
	         d->has_request ? gg_bytes(c->req, b1) : "", c->dv, gg_bytes(used, b2),
	         dev && dev->has_limit ? " under its ceiling of " : " (no ceiling)",
	         dev && dev->has_limit ? gg_bytes(dev->limit, b3) : "");
	if (dev && dev->has_driver_free && dev->has_driver_total) {
		uint64_t taken = dev->driver_total > dev->driver_free ? dev->driver_total - dev->driver_free : 0;
		uint64_t others = taken > used ? taken - used : 0;
		evidence(g, "driver: %s free of %s; this process %s; other tenants and context memory %s",
		         gg_bytes(dev->driver_free, b1), gg_bytes(dev->driver_total, b2), gg_bytes(used, b3),
		         gg_bytes(others, b4));
		if (dev->has_limit && dev->limit > used && dev->limit - used > dev->driver_free)
			evidence(g, "the ceiling promised %s more, but the card had only %s free",
			         gg_bytes(dev->limit - used, b1), gg_bytes(dev->driver_free, b2));
		change(g,
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

static void diag_fragmentation(struct gg_analysis *a, const struct dctx *c, struct gg_diag *g)
{
	const struct gg_dump *d = a->d;
	const struct gg_dump_device *dev = c->dev;
	char b1[32], b2[32], b3[32];
	uint64_t req = c->req;
	evidence(g, "%s of %s on device %u failed (%s) although free memory was enough:",
	         d->req_api ? d->req_api : "a request", gg_bytes(req, b1), c->dv, c->outcome ? c->outcome : "");
	if (dev && dev->has_driver_free && c->driver)
		evidence(g, "driver free %s >= request %s: no contiguous block of that size",
		         gg_bytes(dev->driver_free, b1), gg_bytes(req, b2));
	if (dev && dev->pool_reserved)
		evidence(g, "pool reserve %s vs in use %s: slack %s", gg_bytes(dev->pool_reserved, b1),
		         gg_bytes(a->dev[c->dv].async_live, b2), gg_bytes(c->pool_slack, b3));
	if (d->nvmm) {
		evidence(g, "VMM: %zu reservation%s, %s reserved, %s mapped, %llu hole%s, largest %s", d->nvmm,
		         d->nvmm == 1 ? "" : "s", gg_bytes(a->vmm_reserved, b1), gg_bytes(a->vmm_mapped, b2),
		         (unsigned long long)a->vmm_holes, a->vmm_holes == 1 ? "" : "s",
		         gg_bytes(a->vmm_largest_hole, b3));
		/* Supporting evidence only: holes are address space, not
		 * memory, so they never decide the diagnosis on their own. */
		if (a->vmm_holes && req > a->vmm_largest_hole)
			evidence(g,
			         "request %s > largest VMM hole %s: no hole between mapped chunks can take it; it "
			         "needs new address space or fails to map contiguously",
			         gg_bytes(req, b1), gg_bytes(a->vmm_largest_hole, b2));
	}
	evidence(g, "granted %s vs requested %s: internal waste %s", gg_bytes(a->dev[c->dv].granted, b1),
	         gg_bytes(a->dev[c->dv].live_bytes, b2), gg_bytes(c->dev_waste, b3));
	spectrum(a, g);
	if (a->torch_pattern) {
		evidence(g,
		         "PyTorch's caching allocator holds these segments: %s; %llu of %llu live "
		         "allocations have its segment sizes",
		         a->torch_evidence, (unsigned long long)a->torch_segments, (unsigned long long)a->live_count);
		change(g, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow in place instead of "
		          "leaving holes)");
	}
	if (c->pool_slack >= req && req)
		change(g, "trim the stream-ordered pool before large requests (cuMemPoolTrimTo / "
		          "hipMemPoolTrimTo) or lower its release threshold");
	change(g, "allocate the largest long-lived buffers first, and reuse buffers of one size class");
}

/* Not a diagnosis of its own: a note on the first one when PyTorch's
 * allocator holds the memory and fragmentation was not found. */
static void diag_torch_note(struct gg_analysis *a, const struct dctx *c, struct gg_diag *g)
{
	(void)c;
	evidence(g, "the memory is PyTorch's caching allocator's: %s", a->torch_evidence);
	change(g, "if PyTorch's OOM message shows much \"reserved but unallocated\" memory, set "
	          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
}

static void diag_leak(struct gg_analysis *a, const struct dctx *c, struct gg_diag *g)
{
	const struct gg_site *s = c->leak;
	char b1[32], b2[32], lab[320];
	gg_stack_label(a->d, s->st, lab, sizeof lab);
	evidence(g,
	         "call site stack %llu keeps %llu live allocations (%s), the oldest %.1f s old (process up "
	         "%.1f s): %s",
	         (unsigned long long)s->st, (unsigned long long)s->live_count, gg_bytes(s->live_bytes, b1),
	         (double)s->oldest_age / 1000.0, (double)c->uptime / 1000.0, lab);
	evidence(g, "in the history it allocated %llu times (%s) and freed %llu times (%s)",
	         (unsigned long long)s->h_alloc_count, gg_bytes(s->h_alloc_bytes, b1),
	         (unsigned long long)s->h_free_count, gg_bytes(s->h_free_bytes, b2));
	change(g, "find what keeps these buffers (the stack under TOP CALL SITES): free them, or bound the "
	          "cache that holds them");
}

static void diag_host(struct gg_analysis *a, const struct dctx *c, struct gg_diag *g)
{
	const struct gg_dump *d = a->d;
	char b1[32], b2[32], b3[32], b4[32];
	uint64_t ws = c->ws;
	if (d->has_cg_limit && d->has_cg_usage) {
		uint64_t pc = d->cg_limit / 100 ? d->cg_limit / 100 : 1;
		if (d->has_cg_inactive)
			evidence(g,
			         "cgroup v%llu memory: working set %s of a %s limit (%llu%%): usage %s less %s "
			         "inactive page cache",
			         (unsigned long long)d->cg_version, gg_bytes(ws, b1), gg_bytes(d->cg_limit, b2),
			         (unsigned long long)(ws / pc), gg_bytes(d->cg_usage, b3),
			         gg_bytes(d->cg_inactive_file, b4));
		else
			evidence(g, "cgroup v%llu memory: %s used of a %s limit (%llu%%; page cache not known)",
			         (unsigned long long)d->cg_version, gg_bytes(d->cg_usage, b1),
			         gg_bytes(d->cg_limit, b2), (unsigned long long)(d->cg_usage / pc));
	}
	if (d->has_cg_oom && d->cg_oom_kill)
		evidence(g, "the kernel has already OOM-killed in this cgroup: oom_kill = %llu",
		         (unsigned long long)d->cg_oom_kill);
	evidence(g, "process RSS %s; pinned host memory %s in %llu allocations", gg_bytes(d->rss, b1),
	         gg_bytes(d->pinned_bytes, b2), (unsigned long long)d->pinned_allocs);
	change(g, "the pod risks being OOMKilled (exit 137), which no GPU ceiling prevents");
	if (d->has_cg_usage)
		change(g,
		       "raise the container memory limit (resources.limits.memory) to at least %lluGi (working "
		       "set x1.2), or use less host memory: fewer DataLoader workers, smaller pinned buffers",
		       (unsigned long long)headroom_gib(ws));
}

static void diag_self_sizing(struct gg_analysis *a, const struct dctx *c, struct gg_diag *g)
{
	(void)c;
	sizing_advice(a, g, 0);
}

static void diag_peak_sizing(struct gg_analysis *a, const struct dctx *c, struct gg_diag *g)
{
	const struct gg_dump *d = a->d;
	char b1[32], b2[32], lab[320];
	(void)c;
	const struct gg_dump_device *pd = find_dev(d, a->pv_dev);
	uint64_t p = a->pv_record_bytes > a->pv_bytes ? a->pv_record_bytes : a->pv_bytes;
	if (pd && !pd->pod && pd->peak > p)
		p = pd->peak;
	evidence(g, "dump written on \"%s\": %llu live allocations, %s; the peak was %s", d->trigger ? d->trigger : "?",
	         (unsigned long long)a->live_count, gg_bytes(a->live_bytes, b1), gg_bytes(p, b2));
	if (a->has_peak_view && a->npv_sites) {
		gg_stack_label(d, a->pv_sites[0].st, lab, sizeof lab);
		evidence(g, "at the peak, stack %llu held the most: %s (%s)", (unsigned long long)a->pv_sites[0].st,
		         gg_bytes(a->pv_sites[0].bytes, b1), lab);
	}
	if (!a->peak_in_history && a->pv_carried)
		evidence(g,
		         "the peak (%s at %.1f s) is older than the history: the peak view is the library's own "
		         "snapshot at %s, at %.1f s",
		         gg_bytes(a->pv_record_bytes, b1), (double)a->pv_record_ms / 1000.0, gg_bytes(a->pv_bytes, b2),
		         (double)a->pv_ms / 1000.0);
	else if (!a->peak_in_history)
		evidence(g,
		         "the peak (%s at %.1f s) is older than the history: the peak view shows its highest point, "
		         "%s",
		         gg_bytes(a->pv_record_bytes, b1), (double)a->pv_record_ms / 1000.0, gg_bytes(a->pv_bytes, b2));
	change(g, "GPUGUARD_LIMIT=%lluGi: the peak %s x1.2, rounded up to a GiB", (unsigned long long)a->pv_suggest_gib,
	       gg_bytes(p, b1));
}

static void diag_none(struct gg_analysis *a, const struct dctx *c, struct gg_diag *g)
{
	const struct gg_dump *d = a->d;
	char b1[32];
	(void)c;
	evidence(g, "dump written on \"%s\": %llu live allocations, %s", d->trigger ? d->trigger : "?",
	         (unsigned long long)a->live_count, gg_bytes(a->live_bytes, b1));
	change(g, "nothing to change; the views below show where the memory is");
}

static int when_ceiling(const struct gg_analysis *a, const struct dctx *c)
{
	(void)a;
	return c->ceiling;
}
static int when_device_full(const struct gg_analysis *a, const struct dctx *c)
{
	(void)a;
	return c->driver && !c->frag;
}
static int when_fragmentation(const struct gg_analysis *a, const struct dctx *c)
{
	(void)a;
	return c->frag;
}
static int when_torch_note(const struct gg_analysis *a, const struct dctx *c)
{
	return !c->frag && a->torch_pattern && (c->ceiling || c->driver);
}
static int when_leak(const struct gg_analysis *a, const struct dctx *c)
{
	(void)a;
	return c->leak != NULL;
}
static int when_host(const struct gg_analysis *a, const struct dctx *c)
{
	(void)a;
	return c->host;
}
static int when_self_sizing(const struct gg_analysis *a, const struct dctx *c)
{
	(void)c;
	return a->ndiags == 0 && a->sizing;
}
static int when_peak_sizing(const struct gg_analysis *a, const struct dctx *c)
{
	(void)c;
	return a->ndiags == 0 && a->pv_suggest_gib;
}
static int when_nothing(const struct gg_analysis *a, const struct dctx *c)
{
	(void)c;
	return a->ndiags == 0;
}

/* The diagnoses, in the order the report gives them: each row's test on
 * the dctx, then its writer. A row with no title amends the first diagnosis
 * instead of adding one; the last three are the fallbacks when nothing
 * failed. A new diagnosis is one writer and one row (docs/report.md). */
static const struct diagnosis {
	enum gg_diag_kind kind;
	const char *title;
	int (*when)(const struct gg_analysis *a, const struct dctx *c);
	void (*write)(struct gg_analysis *a, const struct dctx *c, struct gg_diag *g);
} diagnoses[] = {
    {GG_D_CEILING, "ceiling reached", when_ceiling, diag_ceiling},
    {GG_D_DEVICE_FULL, "device full", when_device_full, diag_device_full},
    {GG_D_FRAGMENTATION, "fragmentation", when_fragmentation, diag_fragmentation},
    {GG_D_NONE, NULL, when_torch_note, diag_torch_note},
    {GG_D_LEAK, "leak suspected", when_leak, diag_leak},
    {GG_D_HOST, "host memory pressure", when_host, diag_host},
    {GG_D_SIZING, "no failure; sizes itself from the total", when_self_sizing, diag_self_sizing},
    {GG_D_SIZING, "no failure; sizing a ceiling", when_peak_sizing, diag_peak_sizing},
    {GG_D_NONE, "no failure recorded", when_nothing, diag_none},
};

static void diagnose(struct gg_analysis *a)
{
	struct dctx c;
	dctx_init(&c, a);
	for (size_t i = 0; i < sizeof diagnoses / sizeof diagnoses[0]; i++) {
		const struct diagnosis *r = &diagnoses[i];
		if (!r->when(a, &c))
			continue;
		if (!r->title && a->ndiags) {
			r->write(a, &c, &a->diags[0]);
		} else if (r->title && a->ndiags < (int)(sizeof a->diags / sizeof a->diags[0])) {
			r->write(a, &c, diag_new(a, r->kind, r->title));
		}
		/* fragmentation shown before the ceiling it caused */
		if (r->kind == GG_D_FRAGMENTATION && c.frag_first && a->ndiags >= 2) {
			struct gg_diag t = a->diags[0];
			a->diags[0] = a->diags[1];
			a->diags[1] = t;
		}
	}
	a->frag_first = c.frag_first;
}

/* The live table, by call site, by device and by size bucket. */
static void live_table(struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
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
}

/* PyTorch's allocator from evidence only: its frames (libc10*, libtorch*,
 * c10:: / CUDACachingAllocator symbols) in a stack that holds live memory.
 * Block sizes prove nothing: any program may allocate 2 MiB blocks (issue
 * 11, finding 1). The lowest stack id names the evidence, so the words do
 * not depend on hash order. */
static void torch_frames(struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	uint64_t torch_id = 0;
	for (struct gg_stack *st = d->stacks; st; st = st->hh.next)
		for (uint32_t k = 0; k < st->nframes; k++) {
			const struct gg_frame *f = &st->frames[k];
			if (strstr(f->m, "libc10") || strstr(f->m, "libtorch") ||
			    (f->s && (strstr(f->s, "CUDACachingAllocator") || strstr(f->s, "c10::") ||
			              strstr(f->s, "_ZN3c10")))) {
				if (!a->torch_frames || st->id < torch_id) {
					torch_id = st->id;
					char sym[200];
					gg_text_copy(sym, sizeof sym, f->s ? f->s : f->o);
					snprintf(a->torch_evidence, sizeof a->torch_evidence,
					         "stack %llu frame #%u %.200s (%.80s)", (unsigned long long)st->id, k,
					         sym, f->m);
				}
				a->torch_frames = 1;
				break;
			}
		}
	a->torch_pattern = a->torch_frames;
}

/* Each live site's allocations and frees in the history. */
static void site_history(struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
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
}

/* Waste, VMM and pool sums, and the sites in both orders. */
static void sums_and_orders(struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
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
}

void gg_analyze(struct gg_analysis *a, const struct gg_dump *d)
{
	memset(a, 0, sizeof *a);
	a->d = d;
	live_table(a);
	torch_frames(a);
	site_history(a);
	sums_and_orders(a);
	timeline(a);
	history_sites(a);
	cap_to_books(a);
	self_sizing(a);
	peak_suggestion(a);
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
