/* gpuguard command: the report model (tool.h, docs/report.md). Built once
 * from the analysis; the text, JSON and HTML renderers lay it out and decide
 * nothing: every figure, choice of rows and derived value is made here, so
 * the three reports cannot disagree. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool.h"

static const char *const diag_keys[] = {
    [GG_D_CEILING] = "ceiling_reached",
    [GG_D_DEVICE_FULL] = "device_full",
    [GG_D_FRAGMENTATION] = "fragmentation",
    [GG_D_LEAK] = "leak_suspected",
    [GG_D_HOST] = "host_memory_pressure",
    [GG_D_SIZING] = "sizing",
    [GG_D_NONE] = "none",
};

const char *gg_diag_key(enum gg_diag_kind kind)
{
	return (unsigned)kind < sizeof diag_keys / sizeof diag_keys[0] ? diag_keys[kind] : "none";
}

static struct gg_mstack mstack(const struct gg_dump *d, uint64_t id)
{
	struct gg_mstack s = {id, id ? gg_dump_stack(d, id) : NULL};
	return s;
}

static void warn(struct gg_model *m, int when, enum gg_warn_kind kind, uint64_t n, uint64_t n2)
{
	if (!when || m->nwarn >= (int)(sizeof m->warn / sizeof m->warn[0]))
		return;
	m->warn[m->nwarn].kind = kind;
	m->warn[m->nwarn].n = n;
	m->warn[m->nwarn].n2 = n2;
	m->nwarn++;
}

static void header(struct gg_model *m, const struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	warn(m, d->truncated, GG_W_TRUNCATED, 0, 0);
	/* the trailer's counters: a dump without one has none */
	warn(m, d->has_end && (d->suppressed || d->write_errors), GG_W_SUPPRESSED, d->suppressed, d->write_errors);
	warn(m, d->signal_refused != 0, GG_W_SIGNAL_REFUSED, d->signal_refused, 0);
	warn(m, d->history_dropped != 0, GG_W_HISTORY_DROPPED, d->history_dropped, 0);
	warn(m, d->has_cut && !d->cut_exact, GG_W_CUT_SKEW, d->cut_skew, 0);
	warn(m, a->over_books != 0, GG_W_OVER_BOOKS, a->over_books, 0);
	warn(m, d->log_dropped != 0, GG_W_LOG_DROPPED, d->log_dropped, 0);
	m->diag = a->diags;
	m->ndiag = a->ndiags;
}

static int devices(struct gg_model *m, const struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	m->ndev = d->ndevices;
	m->dev = calloc(d->ndevices + 1, sizeof *m->dev);
	if (!m->dev)
		return -1;
	for (size_t i = 0; i < d->ndevices; i++) {
		const struct gg_dump_device *v = &d->devices[i];
		struct gg_mdev *r = &m->dev[i];
		r->rec = v;
		r->live_in_dump = a->dev[v->dev].live_bytes;
		r->granted_in_dump = a->dev[v->dev].granted;
		if (v->has_limit && v->limit) {
			r->has_fill = 1;
			r->fill_bar = (unsigned)(v->used >= v->limit ? 40 : (unsigned __int128)v->used * 40 / v->limit);
			r->fill_pct = gg_percent(v->used, v->limit);
		}
		r->scale = v->has_limit && v->limit ? v->limit : (v->peak ? v->peak : 1);
		if (v->has_driver_total && !v->has_limit && v->driver_total)
			r->scale = v->driver_total;
	}
	if (d->has_request)
		m->req_stack = mstack(d, d->req_stack);
	return 0;
}

/* Pod records by device, then largest use first. */
static int pod_cmp(const void *x, const void *y)
{
	const struct gg_dump_pod *a = *(const struct gg_dump_pod *const *)x, *b = *(const struct gg_dump_pod *const *)y;
	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	return a->used > b->used ? -1 : a->used < b->used;
}

static int pod(struct gg_model *m, const struct gg_dump *d)
{
	m->npod = d->npod;
	if (!d->npod)
		return 0;
	m->pod_sorted = malloc(d->npod * sizeof *m->pod_sorted);
	if (!m->pod_sorted)
		return -1;
	for (size_t i = 0; i < d->npod; i++)
		m->pod_sorted[i] = &d->pod[i];
	qsort(m->pod_sorted, d->npod, sizeof *m->pod_sorted, pod_cmp);
	return 0;
}

static void site_row(struct gg_msite *r, const struct gg_dump *d, const struct gg_site *s)
{
	r->site = s;
	r->stack = mstack(d, s->st);
	gg_stack_label(d, s->st, r->label, sizeof r->label);
}

static int sites(struct gg_model *m, const struct gg_analysis *a)
{
	m->nsites = a->nsites;
	m->live_bytes = a->live_bytes;
	m->live_count = a->live_count;
	m->shown = m->o.top > 0 ? (a->nsites < (size_t)m->o.top ? a->nsites : (size_t)m->o.top) : 0;
	m->by_bytes = calloc(m->shown + 1, sizeof *m->by_bytes);
	m->by_count = calloc(m->shown + 1, sizeof *m->by_count);
	if (!m->by_bytes || !m->by_count)
		return -1;
	for (size_t i = 0; i < m->shown; i++) {
		site_row(&m->by_bytes[i], a->d, a->by_bytes[i]);
		site_row(&m->by_count[i], a->d, a->by_count[i]);
	}
	m->nflame = a->nsites < 500 ? a->nsites : 500;
	m->flame = calloc(m->nflame + 1, sizeof *m->flame);
	if (!m->flame)
		return -1;
	for (size_t i = 0; i < m->nflame; i++) {
		m->flame[i].bytes = a->by_bytes[i]->live_bytes;
		m->flame[i].stack = mstack(a->d, a->by_bytes[i]->st);
	}
	m->nlive = a->nsites;
	m->live = calloc(m->nlive + 1, sizeof *m->live);
	if (!m->live)
		return -1;
	for (size_t i = 0; i < m->nlive; i++) {
		m->live[i].bytes = a->by_bytes[i]->live_bytes;
		m->live[i].count = a->by_bytes[i]->live_count;
		m->live[i].stack = mstack(a->d, a->by_bytes[i]->st);
	}
	m->hist_max = 1;
	for (int i = 0; i < GG_HIST_BUCKETS; i++) {
		if (!a->hist_count[i])
			continue;
		struct gg_mbucket *b = &m->hist[m->nhist++];
		b->min = 1ull << i;
		b->count = a->hist_count[i];
		b->bytes = a->hist_bytes[i];
		if (b->count > m->hist_max)
			m->hist_max = b->count;
	}
	return 0;
}

static void fragmentation(struct gg_model *m, const struct gg_analysis *a)
{
	m->frag.requested = a->live_bytes;
	m->frag.granted = a->granted;
	m->frag.waste = a->internal_waste;
	m->frag.pool_reserved = a->pool_reserved;
	m->frag.pool_used = a->pool_used;
	m->frag.pool_slack = a->pool_reserved > a->pool_used ? a->pool_reserved - a->pool_used : 0;
	m->frag.torch_frames = a->torch_frames;
	m->frag.torch_pattern = a->torch_pattern;
	m->frag.torch_segments = a->torch_segments;
	m->frag.torch_evidence = a->torch_evidence;
	m->frag.nvmm = a->d->nvmm;
	m->frag.vmm_reserved = a->vmm_reserved;
	m->frag.vmm_mapped = a->vmm_mapped;
	m->frag.vmm_holes = a->vmm_holes;
	m->frag.vmm_largest_hole = a->vmm_largest_hole;
}

static const struct gg_dump_device *find_dev(const struct gg_dump *d, uint32_t dev)
{
	for (size_t i = 0; i < d->ndevices; i++)
		if (d->devices[i].dev == dev)
			return &d->devices[i];
	return NULL;
}

static void timeline(struct gg_model *m, const struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	m->tl.has = a->has_timeline;
	if (!a->has_timeline)
		return;
	m->tl.start_ms = a->t_start;
	m->tl.end_ms = a->t_end;
	m->tl.allocs = a->h_allocs;
	m->tl.frees = a->h_frees;
	m->tl.refusals = a->h_refusals;
	m->tl.start_bytes = a->baseline;
	m->tl.peak_bytes = a->t_peak;
	m->tl.end_bytes = a->t_final;
	gg_wall_ms(d->start_unix_ms, a->t_start, m->tl.wall_start);
	gg_wall_ms(d->start_unix_ms, a->t_end, m->tl.wall_end);
	uint64_t prev = a->baseline;
	for (int i = 0; i < GG_TIMELINE; i++) {
		m->tl.bucket_has[i] = a->t_has[i];
		m->tl.bucket_max[i] = a->t_max[i];
		m->tl.level[i] = prev = a->t_has[i] ? a->t_max[i] : prev;
	}
	/* The ceiling and, in pod scope, the pod's total on the same scale:
	 * a refusal under a budget with room to spare reads as what it is
	 * (issue 11, finding 6). */
	const struct gg_dump_device *cd = find_dev(d, a->pv_dev);
	uint64_t top = a->t_peak;
	if (cd && cd->has_limit && cd->limit > top && cd->limit / 4 < top * 2)
		top = cd->limit;
	if (cd && cd->pod && cd->used > top)
		top = cd->used;
	m->tl.chart_top = top;
	m->tl.chart_dev = cd;
	m->tl.chart_ceiling = cd && cd->has_limit && cd->limit <= top;
}

static void peak(struct gg_model *m, const struct gg_analysis *a)
{
	m->peak.has = a->has_peak_view;
	m->peak.carried = a->pv_carried;
	m->peak.in_history = a->peak_in_history;
	m->peak.at_dump = !a->d->nhist && !a->pv_carried;
	m->peak.dev = a->pv_dev;
	m->peak.bytes = a->pv_bytes;
	m->peak.ms = a->pv_ms;
	m->peak.record_bytes = a->pv_record_bytes;
	m->peak.record_ms = a->pv_record_ms;
	m->peak.suggest_gib = a->pv_suggest_gib;
	m->peak.show_suggest = a->pv_suggest_gib && !a->sizing;
	for (int i = 0; i < a->npv_sites && i < (int)(sizeof m->peak.site / sizeof m->peak.site[0]); i++) {
		struct gg_mpv *r = &m->peak.site[m->peak.nsite++];
		r->bytes = a->pv_sites[i].bytes;
		r->stack = mstack(a->d, a->pv_sites[i].st);
		gg_stack_label(a->d, a->pv_sites[i].st, r->label, sizeof r->label);
	}
}

static void sizing(struct gg_model *m, const struct gg_analysis *a)
{
	m->sizing.mode = a->sizing;
	m->sizing.q = a->sz_q;
	m->sizing.of_free = a->sz_of_free;
	m->sizing.measured_of_free = a->sz_meas_of_free;
	m->sizing.now_pm = a->sz_cur_pm;
	m->sizing.lower_by_pm = a->sz_delta_pm;
	m->sizing.advised_pm = a->sz_new_pm;
	m->sizing.measured_pm = a->sz_meas_pm;
	m->sizing.cmdline_pm = a->sz_cmd_pm;
	m->sizing.framework = a->sz_framework;
	m->sizing.knob = a->sz_knob;
}

static int host(struct gg_model *m, const struct gg_dump *d)
{
	m->host.has_ws = d->has_cg_usage && d->has_cg_inactive;
	m->host.ws = d->cg_usage > d->cg_inactive_file ? d->cg_usage - d->cg_inactive_file : 0;
	m->ndeath = d->ndeaths;
	m->death = calloc(d->ndeaths + 1, sizeof *m->death);
	if (!m->death)
		return -1;
	for (size_t i = 0; i < d->ndeaths; i++) {
		struct gg_mdeath *r = &m->death[i];
		r->rec = &d->deaths[i];
		gg_death_verdict(r->rec, r->verdict, sizeof r->verdict);
		r->code = gg_death_code(r->rec);
		time_t t = (time_t)(r->rec->found_ms / 1000);
		struct tm tm;
		if (!gmtime_r(&t, &tm) || !strftime(r->found, sizeof r->found, "%Y-%m-%dT%H:%M:%SZ", &tm))
			snprintf(r->found, sizeof r->found, "at an unknown time");
	}
	return 0;
}

int gg_model_build(struct gg_model *m, const struct gg_analysis *a, const struct gg_opts *o)
{
	memset(m, 0, sizeof *m);
	m->d = a->d;
	m->o = *o;
	header(m, a);
	fragmentation(m, a);
	timeline(m, a);
	peak(m, a);
	sizing(m, a);
	if (devices(m, a) || pod(m, a->d) || sites(m, a) || host(m, a->d)) {
		gg_model_free(m);
		return -1;
	}
	return 0;
}

void gg_model_free(struct gg_model *m)
{
	free(m->dev);
	free(m->pod_sorted);
	free(m->by_bytes);
	free(m->by_count);
	free(m->flame);
	free(m->live);
	free(m->death);
	memset(m, 0, sizeof *m);
}
