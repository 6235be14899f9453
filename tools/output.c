/* gpuguard command: the text and JSON reports, the folded-stack and
 * speedscope views and the diff of two dumps, all laid out from the report
 * model (model.c), never from the analysis. Each is a pure function of its
 * input, so golden files can pin them down. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool.h"

/* Text output shows dump strings as they are, minus control characters that
 * could move the terminal's cursor or change its colours (gg_put_text). */
static void put_safe(FILE *f, const char *s)
{
	gg_put_text(f, s ? s : "");
}

static void frame_name(const struct gg_frame *fr, char *out, size_t n)
{
	if (gg_frame_py(fr, out, n))
		return;
	if (fr->s)
		snprintf(out, n, "%s (%s+0x%s)", fr->s, fr->m, fr->o);
	else
		snprintf(out, n, "%s+0x%s", fr->m, fr->o);
}

static void text_frames(FILE *f, const struct gg_mstack *st, int max)
{
	char buf[1024];
	const struct gg_stack *s = st->s;
	if (!s) {
		fprintf(f, "        %s\n", st->id ? "(stack record missing)" : "(no stack captured)");
		return;
	}
	for (uint32_t i = 0; i < s->nframes && (int)i < max; i++) {
		frame_name(&s->frames[i], buf, sizeof buf);
		fprintf(f, "        #%-2u ", i);
		put_safe(f, buf);
		fputc('\n', f);
	}
	if ((int)s->nframes > max)
		fprintf(f, "        ... %u more frames\n", s->nframes - (uint32_t)max);
}

static const char *const spark[] = {"_",
                                    "\xe2\x96\x81",
                                    "\xe2\x96\x82",
                                    "\xe2\x96\x83",
                                    "\xe2\x96\x84",
                                    "\xe2\x96\x85",
                                    "\xe2\x96\x86",
                                    "\xe2\x96\x87",
                                    "\xe2\x96\x88"};

/* The header's warnings, in the text report's words. */
static void text_warning(FILE *f, const struct gg_mwarn *w, char b1[32])
{
	unsigned long long n = w->n;
	switch (w->kind) {
	case GG_W_TRUNCATED:
		fprintf(f, "  TRUNCATED: the dump has no end trailer; figures cover the records read\n");
		break;
	case GG_W_SUPPRESSED:
		fprintf(f, "  %llu later dumps suppressed, %llu write errors\n", n, (unsigned long long)w->n2);
		break;
	case GG_W_SIGNAL_REFUSED:
		fprintf(f,
		        "  %llu allocations refused inside signal handlers that interrupted a GPU call (README "
		        "\"What is charged\")\n",
		        n);
		break;
	case GG_W_HISTORY_DROPPED:
		fprintf(f, "  %llu history events lost to writers a lap behind: the timeline has gaps\n", n);
		break;
	case GG_W_CUT_SKEW:
		fprintf(f,
		        "  the live table was copied while %llu events happened and could not be put back to one "
		        "moment: live figures may be off by those events\n",
		        n);
		break;
	case GG_W_OVER_BOOKS:
		fprintf(f,
		        "  the live table and the history disagree: rebuilt, they climb %s past the books' own peak; "
		        "the timeline and peak view are capped at it\n",
		        gg_bytes(w->n, b1));
		break;
	case GG_W_LOG_DROPPED:
		fprintf(f, "  %llu log lines dropped over the library's rate limit (see the process's stderr)\n", n);
		break;
	}
}

static void text_header(FILE *f, const struct gg_model *m)
{
	const struct gg_dump *d = m->d;
	char b1[32];
	fprintf(f, "gpuguard report: ");
	put_safe(f, d->path);
	fprintf(f, "\n  dump format %llu from libgpuguard ", (unsigned long long)d->format);
	put_safe(f, d->lib);
	fprintf(f, ", written ");
	put_safe(f, d->time);
	fprintf(f, " on ");
	put_safe(f, d->host);
	fprintf(f, ", pid %llu, trigger: ", (unsigned long long)d->pid);
	put_safe(f, d->trigger);
	fprintf(f, "\n  command: ");
	put_safe(f, d->cmdline);
	fprintf(f, "\n  %llu records, unwinder ", (unsigned long long)d->lines);
	put_safe(f, d->unwinder);
	fprintf(f, " (depth %llu), %zu live allocations, %zu history events (capacity %llu)\n",
	        (unsigned long long)d->stack_depth, d->nallocs, d->nhist, (unsigned long long)d->history_capacity);
	for (int i = 0; i < m->nwarn; i++)
		text_warning(f, &m->warn[i], b1);
}

static void text_diagnoses(FILE *f, const struct gg_model *m)
{
	fprintf(f, "\nDIAGNOSIS\n");
	for (int i = 0; i < m->ndiag; i++) {
		const struct gg_diag *g = &m->diag[i];
		fprintf(f, "  %s\n", g->title);
		for (int k = 0; k < g->nevidence; k++) {
			fprintf(f, "    - ");
			put_safe(f, g->evidence[k]);
			fputc('\n', f);
		}
		for (int k = 0; k < g->nchange; k++) {
			fprintf(f, "    => ");
			put_safe(f, g->change[k]);
			fputc('\n', f);
		}
	}
}

static void text_devices(FILE *f, const struct gg_model *m)
{
	const struct gg_dump *d = m->d;
	char b1[32], b2[32], b3[32], b4[32], b5[32];
	fprintf(f, "\nDEVICES\n");
	fprintf(f, "  %-4s %-12s %-12s %-12s %-12s %-12s %-25s %s\n", "dev", "ceiling", "charged", "peak", "live",
	        "pool", "driver free / total", "refused ceil/cfg/drv");
	for (size_t i = 0; i < m->ndev; i++) {
		const struct gg_dump_device *v = m->dev[i].rec;
		char drv[64];
		if (v->has_driver_free && v->has_driver_total)
			snprintf(drv, sizeof drv, "%s / %s", gg_bytes(v->driver_free, b1),
			         gg_bytes(v->driver_total, b2));
		else
			snprintf(drv, sizeof drv, "unknown");
		fprintf(f, "  %-4u %-12s %-12s %-12s %-12s %-12s %-25s %llu/%llu/%llu\n", v->dev,
		        v->has_limit ? gg_bytes(v->limit, b3) : "none", gg_bytes(v->used, b4), gg_bytes(v->peak, b5),
		        gg_bytes(v->live_bytes, b1), gg_bytes(v->pool_reserved, b2), drv,
		        (unsigned long long)v->refused_ceiling, (unsigned long long)v->refused_config,
		        (unsigned long long)v->refused_driver);
		if (m->dev[i].has_fill) {
			int w = (int)m->dev[i].fill_bar;
			fprintf(f, "       [%.*s%*s] %llu%% of ceiling\n", w,
			        "########################################", 40 - w, "",
			        (unsigned long long)m->dev[i].fill_pct);
		}
	}
	if (d->has_request) {
		fprintf(f, "  failing request: ");
		put_safe(f, d->req_api);
		fprintf(f, " of %s on device %u, thread %llu, stack %llu: ", gg_bytes(d->req_size, b1), d->req_dev,
		        (unsigned long long)d->req_tid, (unsigned long long)d->req_stack);
		put_safe(f, d->req_outcome);
		fputc('\n', f);
		if (d->req_stack)
			text_frames(f, &m->req_stack, m->o.frames);
	}
}

/* Pod scope: who held the shared budget when the dump was written. */
static void text_pod(FILE *f, const struct gg_model *m)
{
	if (!m->pod_sorted)
		return;
	char b1[32];
	fprintf(f, "\nPOD (processes sharing the budget, pids in their own namespaces)\n");
	fprintf(f, "  %-4s %-5s %-10s %-16s %-12s %s\n", "dev", "slot", "pid", "name", "used", "state");
	for (size_t i = 0; i < m->npod; i++) {
		const struct gg_dump_pod *u = m->pod_sorted[i];
		fprintf(f, "  %-4u %-5u %-10llu ", u->dev, u->slot, (unsigned long long)u->pid);
		put_safe(f, u->comm);
		fprintf(f, "%*s %-12s %s\n", 16 - (int)(strlen(u->comm) < 16 ? strlen(u->comm) : 16), "",
		        gg_bytes(u->used, b1),
		        u->self    ? "this process"
		        : u->alive ? "live"
		                   : "died");
	}
}

static void text_sites(FILE *f, const struct gg_model *m)
{
	char b1[32], b2[32];
	fprintf(f, "\nTOP CALL SITES BY LIVE BYTES (%zu sites, %s live in %llu allocations)\n", m->nsites,
	        gg_bytes(m->live_bytes, b1), (unsigned long long)m->live_count);
	for (size_t i = 0; i < m->shown; i++) {
		const struct gg_site *s = m->by_bytes[i].site;
		fprintf(f, "  #%-2zu %-12s %8llu allocs  oldest %.1f s  stack %llu\n", i + 1,
		        gg_bytes(s->live_bytes, b1), (unsigned long long)s->live_count, (double)s->oldest_age / 1000.0,
		        (unsigned long long)s->st);
		text_frames(f, &m->by_bytes[i].stack, m->o.frames);
	}
	fprintf(f, "\nTOP CALL SITES BY COUNT\n");
	for (size_t i = 0; i < m->shown; i++) {
		const struct gg_site *s = m->by_count[i].site;
		fprintf(f, "  #%-2zu %8llu allocs  %-12s stack %-6llu ", i + 1, (unsigned long long)s->live_count,
		        gg_bytes(s->live_bytes, b1), (unsigned long long)s->st);
		put_safe(f, m->by_count[i].label);
		fputc('\n', f);
	}
	fprintf(f, "\nSIZE HISTOGRAM (live allocations by requested size)\n");
	for (int i = 0; i < m->nhist; i++) {
		const struct gg_mbucket *b = &m->hist[i];
		int w = (int)((unsigned __int128)b->count * 30 / m->hist_max);
		if (w == 0)
			w = 1;
		fprintf(f, "  >= %-11s %9llu  %-12s %.*s\n", gg_bytes(b->min, b1), (unsigned long long)b->count,
		        gg_bytes(b->bytes, b2), w, "##############################");
	}
}

static void text_fragmentation(FILE *f, const struct gg_model *m)
{
	char b1[32], b2[32], b3[32];
	fprintf(f, "\nFRAGMENTATION (definitions: gpuguard help report)\n");
	fprintf(f, "  internal waste: %s (granted %s - requested %s)\n", gg_bytes(m->frag.waste, b1),
	        gg_bytes(m->frag.granted, b2), gg_bytes(m->frag.requested, b3));
	fprintf(f, "  pool slack:     %s (reserved %s - used %s)\n", gg_bytes(m->frag.pool_slack, b1),
	        gg_bytes(m->frag.pool_reserved, b2), gg_bytes(m->frag.pool_used, b3));
	fprintf(f, "  external:       n/a (a format 1 dump holds no free-block map)\n");
	if (m->frag.torch_frames) {
		fprintf(f, "  PyTorch's caching allocator (");
		put_safe(f, m->frag.torch_evidence);
		fprintf(f, "): %llu of %llu live allocations have its segment sizes\n",
		        (unsigned long long)m->frag.torch_segments, (unsigned long long)m->live_count);
	} else {
		fprintf(
		    f,
		    "  segment sizes of 2 MiB, 20 MiB or 2 MiB multiples over 10 MiB: %llu of %llu live allocations "
		    "(no PyTorch frames in the stacks)\n",
		    (unsigned long long)m->frag.torch_segments, (unsigned long long)m->live_count);
	}
	if (m->frag.nvmm)
		fprintf(f, "  VMM reservations: %zu, %s reserved, %s mapped, %llu hole%s, largest hole %s\n",
		        m->frag.nvmm, gg_bytes(m->frag.vmm_reserved, b1), gg_bytes(m->frag.vmm_mapped, b2),
		        (unsigned long long)m->frag.vmm_holes, m->frag.vmm_holes == 1 ? "" : "s",
		        gg_bytes(m->frag.vmm_largest_hole, b3));
}

static void text_timeline(FILE *f, const struct gg_model *m)
{
	char b1[32], b2[32], b3[32];
	fprintf(f, "\nUSAGE TIMELINE (live requested bytes, from the history)\n");
	if (!m->tl.has) {
		fprintf(f, "  no history in this dump\n");
		return;
	}
	fprintf(f, "  %llu allocs, %llu frees, %llu refusals from %.3f s to %.3f s after start (%s to %s)\n",
	        (unsigned long long)m->tl.allocs, (unsigned long long)m->tl.frees, (unsigned long long)m->tl.refusals,
	        (double)m->tl.start_ms / 1000.0, (double)m->tl.end_ms / 1000.0, m->tl.wall_start, m->tl.wall_end);
	fprintf(f, "  |");
	for (int i = 0; i < GG_TIMELINE; i++) {
		int k = m->tl.peak_bytes ? (int)((unsigned __int128)m->tl.level[i] * 8 / m->tl.peak_bytes) : 0;
		fputs(spark[k > 8 ? 8 : k], f);
	}
	fprintf(f, "|  start %s, peak %s, end %s\n", gg_bytes(m->tl.start_bytes, b1), gg_bytes(m->tl.peak_bytes, b2),
	        gg_bytes(m->tl.end_bytes, b3));
}

static void text_peak(FILE *f, const struct gg_model *m)
{
	char b1[32], b2[32];
	fprintf(f, "\nAT THE GPU PEAK (device %u, %s)\n", m->peak.dev,
	        m->peak.carried ? "as the library saw it at its peak; the history is younger"
	                        : "rebuilt from the live allocations and the history");
	if (!m->peak.has) {
		fprintf(f, "  nothing recorded\n");
		return;
	}
	if (!m->peak.at_dump)
		fprintf(f, "  %s live at %.3f s after start", gg_bytes(m->peak.bytes, b1), (double)m->peak.ms / 1000.0);
	else
		fprintf(f, "  %s live at the dump (no history to go back in)", gg_bytes(m->peak.bytes, b1));
	if (m->peak.record_bytes)
		fprintf(f, "; the process's peak: %s at %.3f s%s", gg_bytes(m->peak.record_bytes, b2),
		        (double)m->peak.record_ms / 1000.0, m->peak.in_history ? "" : " (older than the history)");
	fputc('\n', f);
	if (m->peak.carried)
		fprintf(f, "  (the library's snapshot, within 1%% (at least 1 MiB) of the peak)\n");
	for (int i = 0; i < m->peak.nsite && i < m->o.top; i++) {
		fprintf(f, "  %-14s stack %-5llu ", gg_bytes(m->peak.site[i].bytes, b1),
		        (unsigned long long)m->peak.site[i].stack.id);
		put_safe(f, m->peak.site[i].label);
		fputc('\n', f);
	}
	if (m->peak.show_suggest)
		fprintf(f, "  suggested GPUGUARD_LIMIT=%lluGi (the peak x1.2, rounded up to a GiB)\n",
		        (unsigned long long)m->peak.suggest_gib);
}

static void text_host(FILE *f, const struct gg_model *m)
{
	const struct gg_dump *d = m->d;
	char b1[32], b2[32], b3[32];
	fprintf(f, "\nHOST\n");
	if (!d->has_host) {
		fprintf(f, "  not recorded\n");
		return;
	}
	fprintf(f, "  rss %s, pinned %s in %llu allocations\n", gg_bytes(d->rss, b1), gg_bytes(d->pinned_bytes, b2),
	        (unsigned long long)d->pinned_allocs);
	if (d->cg_version)
		fprintf(f, "  cgroup v%llu: usage %s, limit %s, oom_kill %s\n", (unsigned long long)d->cg_version,
		        d->has_cg_usage ? gg_bytes(d->cg_usage, b1) : "unknown",
		        d->has_cg_limit ? gg_bytes(d->cg_limit, b2) : "none",
		        d->has_cg_oom ? (snprintf(b3, sizeof b3, "%llu", (unsigned long long)d->cg_oom_kill), b3)
		                      : "unknown");
	if (d->cg_version && m->host.has_ws)
		fprintf(f, "  working set %s (usage less %s of inactive page cache, as the kubelet counts it)\n",
		        gg_bytes(m->host.ws, b1), gg_bytes(d->cg_inactive_file, b2));
	if (!d->cg_version)
		fprintf(f, "  no cgroup memory controller found\n");
}

static void text_deaths(FILE *f, const struct gg_model *m)
{
	char b1[32], b2[32];
	if (!m->ndeath)
		return;
	fprintf(f, "\nRECENT DEATHS IN THE POD (processes that died without exiting: SIGKILL, the OOM killer, a "
	           "crash)\n");
	for (size_t i = m->ndeath; i-- > 0;) {
		const struct gg_death *x = m->death[i].rec;
		fprintf(f, "  pid %u (%s), found dead %s: %s\n", x->pid, x->comm, m->death[i].found,
		        m->death[i].verdict);
		fprintf(f, "    GPU: %s of %s on entry %u; %u refused", gg_bytes(x->gpu_used, b1),
		        x->gpu_limit == UINT64_MAX ? "no ceiling" : gg_bytes(x->gpu_limit, b2), x->gpu_entry,
		        x->refused);
		if (x->refused && x->refused_age_ms != UINT32_MAX)
			fprintf(f, ", the last %.1f s before its last record", (double)x->refused_age_ms / 1000.0);
		fputc('\n', f);
		if (x->cg_version)
			fprintf(f, "    host: %s %s of %s (cgroup v%u)\n", x->ws_known ? "working set" : "usage",
			        gg_bytes(x->working_set, b1), x->host_limit ? gg_bytes(x->host_limit, b2) : "no limit",
			        x->cg_version);
		else
			fprintf(f, "    host: no cgroup memory controller found\n");
		if (x->last_ms && x->found_ms >= x->last_ms)
			fprintf(f, "    last record %.1f s before it was found dead\n",
			        (double)(x->found_ms - x->last_ms) / 1000.0);
	}
}

static void text_config(FILE *f, const struct gg_model *m)
{
	const struct gg_dump *d = m->d;
	if (!d->nconfig)
		return;
	fprintf(f, "\nCONFIGURATION\n");
	for (size_t i = 0; i < d->nconfig; i++) {
		fprintf(f, "  ");
		put_safe(f, d->config[i].name);
		fprintf(f, "=");
		put_safe(f, d->config[i].value);
		fprintf(f, " (");
		put_safe(f, d->config[i].source);
		fprintf(f, ")\n");
	}
}

/* The text report: its sections in order, each laid out from the model. */
static void (*const text_sections[])(FILE *f, const struct gg_model *m) = {
    text_header,   text_diagnoses, text_devices, text_pod,    text_sites,  text_fragmentation,
    text_timeline, text_peak,      text_host,    text_deaths, text_config,
};

void gg_report_text(FILE *f, const struct gg_model *m)
{
	for (size_t i = 0; i < sizeof text_sections / sizeof text_sections[0]; i++)
		text_sections[i](f, m);
}

static void json_kv_u(FILE *f, const char *k, uint64_t v, int comma)
{
	fprintf(f, "\"%s\":%llu%s", k, (unsigned long long)v, comma ? "," : "");
}

static void json_kv_s(FILE *f, const char *k, const char *v, int comma)
{
	fprintf(f, "\"%s\":", k);
	if (v)
		gg_json_str(f, v);
	else
		fputs("null", f);
	if (comma)
		fputc(',', f);
}

static void json_opt_u(FILE *f, const char *k, int has, uint64_t v)
{
	if (has)
		fprintf(f, "\"%s\":%llu,", k, (unsigned long long)v);
	else
		fprintf(f, "\"%s\":null,", k);
}

static void json_frames(FILE *f, const struct gg_mstack *st)
{
	const struct gg_stack *s = st->s;
	fputc('[', f);
	for (uint32_t i = 0; s && i < s->nframes; i++) {
		fputs(i ? ",{" : "{", f);
		json_kv_s(f, "m", s->frames[i].m, 1);
		json_kv_s(f, "o", s->frames[i].o, 1);
		json_kv_s(f, "s", s->frames[i].s, 0);
		if (s->frames[i].py) { /* a Python frame: its file and line */
			fputc(',', f);
			json_kv_s(f, "py", s->frames[i].py, 0);
			fprintf(f, ",\"l\":%llu", (unsigned long long)s->frames[i].line);
		}
		fputc('}', f);
	}
	fputc(']', f);
}

static void json_strings(FILE *f, const char *name, const char (*v)[320], int n)
{
	fprintf(f, ",\"%s\":[", name);
	for (int k = 0; k < n; k++) {
		if (k)
			fputc(',', f);
		gg_json_str(f, v[k]);
	}
	fputc(']', f);
}

static void json_header(FILE *f, const struct gg_model *m)
{
	const struct gg_dump *d = m->d;
	fputs("{\"gpuguard_report\":1,\"dump\":{", f);
	json_kv_s(f, "path", d->path, 1);
	json_kv_u(f, "format", d->format, 1);
	json_kv_s(f, "lib", d->lib, 1);
	json_kv_s(f, "time", d->time, 1);
	json_kv_u(f, "unix_ms", d->unix_ms, 1);
	json_kv_u(f, "start_unix_ms", d->start_unix_ms, 1);
	json_kv_s(f, "host", d->host, 1);
	json_kv_u(f, "pid", d->pid, 1);
	json_kv_s(f, "cmdline", d->cmdline, 1);
	json_kv_s(f, "trigger", d->trigger, 1);
	json_kv_s(f, "unwinder", d->unwinder, 1);
	json_kv_u(f, "records", d->lines, 1);
	fprintf(f, "\"truncated\":%s,", d->truncated ? "true" : "false");
	json_kv_u(f, "suppressed", d->suppressed, 1);
	json_kv_u(f, "write_errors", d->write_errors, 1);
	json_kv_u(f, "signal_refused", d->signal_refused, 1);
	json_kv_u(f, "history_dropped", d->history_dropped, 1);
	json_kv_u(f, "log_dropped", d->log_dropped, 0);
	fputs("},\n\"diagnoses\":[", f);
	for (int i = 0; i < m->ndiag; i++) {
		const struct gg_diag *g = &m->diag[i];
		fprintf(f, "%s{\"kind\":\"%s\",\"title\":", i ? "," : "", gg_diag_key(g->kind));
		gg_json_str(f, g->title);
		json_strings(f, "evidence", g->evidence, g->nevidence);
		json_strings(f, "change", g->change, g->nchange);
		fputc('}', f);
	}
	fputs("],\n", f);
}

static void json_devices(FILE *f, const struct gg_model *m)
{
	fputs("\"devices\":[", f);
	for (size_t i = 0; i < m->ndev; i++) {
		const struct gg_dump_device *v = m->dev[i].rec;
		fprintf(f, "%s{\"dev\":%u,", i ? "," : "", v->dev);
		json_opt_u(f, "limit", v->has_limit, v->limit);
		json_kv_u(f, "used", v->used, 1);
		json_kv_u(f, "peak", v->peak, 1);
		json_kv_u(f, "pool_reserved", v->pool_reserved, 1);
		json_kv_u(f, "live_bytes", v->live_bytes, 1);
		json_kv_u(f, "live_bytes_in_dump", m->dev[i].live_in_dump, 1);
		json_kv_u(f, "granted_in_dump", m->dev[i].granted_in_dump, 1);
		json_kv_u(f, "allocs", v->allocs, 1);
		json_kv_u(f, "frees", v->frees, 1);
		json_kv_u(f, "refused_ceiling", v->refused_ceiling, 1);
		json_kv_u(f, "refused_config", v->refused_config, 1);
		json_kv_u(f, "refused_driver", v->refused_driver, 1);
		json_kv_u(f, "pool_overshoot", v->pool_overshoot, 1);
		json_kv_s(f, "scope", v->pod ? "pod" : "process", 1);
		json_kv_u(f, "process_used", v->process_used, 1);
		if (v->has_wait_ms)
			json_kv_u(f, "wait_ms", v->wait_ms, 1);
		if (v->has_runtime) {
			json_kv_u(f, "runtime", v->runtime, 1);
			json_opt_u(f, "runtime_driver", v->has_runtime_driver, v->runtime_driver);
		}
		if (v->has_driver_limit) {
			json_kv_u(f, "driver_limit", v->driver_limit, 1);
			json_kv_u(f, "driver_limit_used", v->driver_limit_used, 1);
			json_opt_u(f, "own_limit", v->has_own_limit, v->own_limit);
		}
		json_opt_u(f, "driver_free", v->has_driver_free, v->driver_free);
		fprintf(f, "\"driver_total\":");
		if (v->has_driver_total)
			fprintf(f, "%llu}", (unsigned long long)v->driver_total);
		else
			fputs("null}", f);
	}
	fputs("],\n\"pod\":[", f);
	for (size_t i = 0; i < m->npod; i++) {
		const struct gg_dump_pod *u = &m->d->pod[i];
		fprintf(f, "%s{", i ? "," : "");
		json_kv_u(f, "dev", u->dev, 1);
		json_kv_u(f, "slot", u->slot, 1);
		json_kv_u(f, "pid", u->pid, 1);
		json_kv_s(f, "comm", u->comm, 1);
		json_kv_u(f, "self", (uint64_t)u->self, 1);
		json_kv_u(f, "alive", (uint64_t)u->alive, 1);
		json_kv_u(f, "used", u->used, 0);
		fputc('}', f);
	}
	fputs("],\n", f);
}

static void json_deaths(FILE *f, const struct gg_model *m)
{
	if (!m->ndeath)
		return;
	fputs("\"deaths\":[", f);
	for (size_t i = 0; i < m->ndeath; i++) {
		const struct gg_death *x = m->death[i].rec;
		fprintf(f, "%s{", i ? "," : "");
		json_kv_u(f, "n", x->n, 1);
		json_kv_u(f, "pid", x->pid, 1);
		json_kv_s(f, "comm", x->comm, 1);
		json_kv_u(f, "found_ms", x->found_ms, 1);
		json_kv_u(f, "last_ms", x->last_ms, 1);
		json_kv_u(f, "gpu_used", x->gpu_used, 1);
		json_opt_u(f, "gpu_limit", x->gpu_limit != UINT64_MAX, x->gpu_limit);
		json_kv_u(f, "refused", x->refused, 1);
		json_kv_u(f, "working_set", x->working_set, 1);
		json_opt_u(f, "host_limit", x->host_limit != 0, x->host_limit);
		json_kv_s(f, "verdict", m->death[i].code, 1);
		json_kv_s(f, "reason", m->death[i].verdict, 0);
		fputc('}', f);
	}
	fputs("],\n", f);
}

static void json_request(FILE *f, const struct gg_model *m)
{
	const struct gg_dump *d = m->d;
	fputs("\"request\":", f);
	if (!d->has_request) {
		fputs("null", f);
		return;
	}
	fputc('{', f);
	json_kv_s(f, "api", d->req_api, 1);
	json_kv_u(f, "size", d->req_size, 1);
	json_kv_u(f, "dev", d->req_dev, 1);
	json_kv_u(f, "tid", d->req_tid, 1);
	json_kv_u(f, "stack", d->req_stack, 1);
	json_kv_s(f, "outcome", d->req_outcome, 1);
	fputs("\"frames\":", f);
	json_frames(f, &m->req_stack);
	fputc('}', f);
}

static void json_sites(FILE *f, const struct gg_model *m)
{
	fprintf(f, ",\n\"live\":{\"bytes\":%llu,\"count\":%llu,\"sites\":%zu},\n\"sites_by_bytes\":[",
	        (unsigned long long)m->live_bytes, (unsigned long long)m->live_count, m->nsites);
	for (size_t i = 0; i < m->shown; i++) {
		const struct gg_site *s = m->by_bytes[i].site;
		fprintf(f, "%s\n{", i ? "," : "");
		json_kv_u(f, "stack", s->st, 1);
		json_kv_u(f, "live_bytes", s->live_bytes, 1);
		json_kv_u(f, "live_count", s->live_count, 1);
		json_kv_u(f, "oldest_age_ms", s->oldest_age, 1);
		json_kv_u(f, "history_allocs", s->h_alloc_count, 1);
		json_kv_u(f, "history_alloc_bytes", s->h_alloc_bytes, 1);
		json_kv_u(f, "history_frees", s->h_free_count, 1);
		json_kv_u(f, "history_free_bytes", s->h_free_bytes, 1);
		fputs("\"frames\":", f);
		json_frames(f, &m->by_bytes[i].stack);
		fputc('}', f);
	}
	fputs("],\n\"sites_by_count\":[", f);
	for (size_t i = 0; i < m->shown; i++) {
		const struct gg_site *s = m->by_count[i].site;
		fprintf(f, "%s{\"stack\":%llu,\"live_count\":%llu,\"live_bytes\":%llu}", i ? "," : "",
		        (unsigned long long)s->st, (unsigned long long)s->live_count,
		        (unsigned long long)s->live_bytes);
	}
	fputs("],\n\"size_histogram\":[", f);
	for (int i = 0; i < m->nhist; i++)
		fprintf(f, "%s{\"min\":%llu,\"count\":%llu,\"bytes\":%llu}", i ? "," : "",
		        (unsigned long long)m->hist[i].min, (unsigned long long)m->hist[i].count,
		        (unsigned long long)m->hist[i].bytes);
	fputs("],\n", f);
}

static void json_fragmentation(FILE *f, const struct gg_model *m)
{
	fprintf(f,
	        "\"fragmentation\":{\"requested\":%llu,\"granted\":%llu,\"internal_waste\":%llu,"
	        "\"pool_reserved\":%llu,\"pool_used\":%llu,\"pool_slack\":%llu,\"external\":null,"
	        "\"torch_segments\":%llu,\"torch_pattern\":%s",
	        (unsigned long long)m->frag.requested, (unsigned long long)m->frag.granted,
	        (unsigned long long)m->frag.waste, (unsigned long long)m->frag.pool_reserved,
	        (unsigned long long)m->frag.pool_used, (unsigned long long)m->frag.pool_slack,
	        (unsigned long long)m->frag.torch_segments, m->frag.torch_pattern ? "true" : "false");
	if (m->frag.nvmm) /* only when the dump has vmm records */
		fprintf(f,
		        ",\"vmm\":{\"reservations\":%zu,\"reserved\":%llu,\"mapped\":%llu,\"holes\":%llu,"
		        "\"largest_hole\":%llu}",
		        m->frag.nvmm, (unsigned long long)m->frag.vmm_reserved, (unsigned long long)m->frag.vmm_mapped,
		        (unsigned long long)m->frag.vmm_holes, (unsigned long long)m->frag.vmm_largest_hole);
	fputs("},\n", f);
}

static void json_timeline(FILE *f, const struct gg_model *m)
{
	fputs("\"timeline\":", f);
	if (!m->tl.has) {
		fputs("null", f);
		return;
	}
	fprintf(f,
	        "{\"start_ms\":%llu,\"end_ms\":%llu,\"allocs\":%llu,\"frees\":%llu,\"refusals\":%llu,"
	        "\"start_bytes\":%llu,\"peak_bytes\":%llu,\"end_bytes\":%llu,\"bucket_max\":[",
	        (unsigned long long)m->tl.start_ms, (unsigned long long)m->tl.end_ms, (unsigned long long)m->tl.allocs,
	        (unsigned long long)m->tl.frees, (unsigned long long)m->tl.refusals,
	        (unsigned long long)m->tl.start_bytes, (unsigned long long)m->tl.peak_bytes,
	        (unsigned long long)m->tl.end_bytes);
	for (int i = 0; i < GG_TIMELINE; i++) {
		if (i)
			fputc(',', f);
		if (m->tl.bucket_has[i])
			fprintf(f, "%llu", (unsigned long long)m->tl.bucket_max[i]);
		else
			fputs("null", f);
	}
	fputs("]}", f);
}

static void json_peak(FILE *f, const struct gg_model *m)
{
	fprintf(f,
	        ",\n\"peak\":{\"dev\":%u,\"bytes\":%llu,\"ms\":%llu,\"process_peak\":%llu,\"process_peak_ms\":%llu,"
	        "\"in_history\":%s,\"from\":\"%s\",\"suggested_limit_gib\":",
	        m->peak.dev, (unsigned long long)m->peak.bytes, (unsigned long long)m->peak.ms,
	        (unsigned long long)m->peak.record_bytes, (unsigned long long)m->peak.record_ms,
	        m->peak.in_history ? "true" : "false", m->peak.carried ? "snapshot" : "history");
	if (m->peak.suggest_gib)
		fprintf(f, "%llu", (unsigned long long)m->peak.suggest_gib);
	else
		fputs("null", f);
	fputs(",\"sites\":[", f);
	for (int i = 0; i < m->peak.nsite; i++)
		fprintf(f, "%s{\"stack\":%llu,\"bytes\":%llu}", i ? "," : "",
		        (unsigned long long)m->peak.site[i].stack.id, (unsigned long long)m->peak.site[i].bytes);
	fputs("]},\n", f);
}

/* thousandths as a JSON number, "0.850" */
static void json_pm(FILE *f, const char *k, unsigned pm)
{
	fprintf(f, "\"%s\":%u.%03u,", k, pm / 1000, pm % 1000);
}

static void json_sizing(FILE *f, const struct gg_model *m)
{
	fputs("\"sizing\":", f);
	if (!m->sizing.mode) {
		fputs("null", f);
		return;
	}
	const struct gg_meminfo *q = m->sizing.q;
	fprintf(f, "{\"mode\":\"%s\",\"query\":%llu,\"total\":%llu,\"free\":%llu,\"held\":%llu,\"of\":\"%s\",",
	        m->sizing.mode == 1 ? "preallocates" : "grows_into_total", (unsigned long long)q->n,
	        (unsigned long long)q->total, (unsigned long long)q->free, (unsigned long long)q->used,
	        m->sizing.of_free ? "free" : "total");
	json_pm(f, "fraction_now", m->sizing.now_pm);
	json_pm(f, "lower_by", m->sizing.lower_by_pm);
	if (m->sizing.mode == 1) {
		json_pm(f, "fraction_advised", m->sizing.advised_pm);
		json_pm(f, "fraction_measured", m->sizing.measured_pm);
		json_kv_s(f, "measured_of", m->sizing.measured_of_free ? "free" : "total", 1);
	}
	if (m->sizing.cmdline_pm)
		json_pm(f, "fraction_cmdline", m->sizing.cmdline_pm);
	json_kv_s(f, "framework", m->sizing.framework, 1);
	json_kv_s(f, "knob", m->sizing.knob, 0);
	fputc('}', f);
}

static void json_host(FILE *f, const struct gg_model *m)
{
	const struct gg_dump *d = m->d;
	fputs(",\n\"config\":[", f);
	for (size_t i = 0; i < d->nconfig; i++) {
		fputs(i ? ",{" : "{", f);
		json_kv_s(f, "name", d->config[i].name, 1);
		json_kv_s(f, "value", d->config[i].value, 1);
		json_kv_s(f, "source", d->config[i].source, 0);
		fputc('}', f);
	}
	fputs("],\n\"host\":", f);
	if (!d->has_host) {
		fputs("null}\n", f);
		return;
	}
	fputc('{', f);
	json_kv_u(f, "rss", d->rss, 1);
	json_kv_u(f, "cgroup_version", d->cg_version, 1);
	json_opt_u(f, "cgroup_limit", d->has_cg_limit, d->cg_limit);
	json_opt_u(f, "cgroup_usage", d->has_cg_usage, d->cg_usage);
	json_opt_u(f, "cgroup_oom_kill", d->has_cg_oom, d->cg_oom_kill);
	json_opt_u(f, "cgroup_inactive_file", d->has_cg_inactive, d->cg_inactive_file);
	json_opt_u(f, "working_set", m->host.has_ws, m->host.ws);
	json_kv_u(f, "pinned_bytes", d->pinned_bytes, 1);
	json_kv_u(f, "pinned_allocs", d->pinned_allocs, 0);
	fputs("}}\n", f);
}

/* The JSON report: its members in order, each laid out from the model. */
static void (*const json_sections[])(FILE *f, const struct gg_model *m) = {
    json_header,        json_devices,  json_deaths, json_request, json_sites,
    json_fragmentation, json_timeline, json_peak,   json_sizing,  json_host,
};

void gg_report_json(FILE *f, const struct gg_model *m)
{
	for (size_t i = 0; i < sizeof json_sections / sizeof json_sections[0]; i++)
		json_sections[i](f, m);
}

/* One frame as a folded-stack element: no ';' (the separator) and no
 * newline; flamegraph.pl takes the count after the last space. */
static void folded_frame(FILE *f, const struct gg_frame *fr)
{
	char buf[1024];
	if (gg_frame_py(fr, buf, sizeof buf))
		;
	else if (fr->s)
		snprintf(buf, sizeof buf, "%s", fr->s);
	else
		snprintf(buf, sizeof buf, "%s+0x%s", fr->m, fr->o);
	/* ';' separates frames; a control or a byte that is not UTF-8 is ':'
	 * (one per character), so a line is one stack and safe to print. */
	const char *p = buf, *end = buf + strlen(buf);
	while (p < end) {
		int safe;
		size_t n = gg_text_next(p, end, &safe);
		if (safe && *p != ';')
			fwrite(p, 1, n, f);
		else
			fputc(':', f);
		p += n;
	}
}

static void folded_stack(FILE *f, const struct gg_mstack *ms)
{
	const struct gg_stack *s = ms->s;
	if (!ms->id) {
		fputs("[no stack]", f);
		return;
	}
	if (!s || !s->nframes) {
		fprintf(f, "[stack %llu]", (unsigned long long)ms->id);
		return;
	}
	for (uint32_t i = s->nframes; i-- > 0;) {
		folded_frame(f, &s->frames[i]);
		if (i)
			fputc(';', f);
	}
}

void gg_report_folded(FILE *f, const struct gg_model *m)
{
	for (size_t i = 0; i < m->nlive; i++) {
		const struct gg_mlive *s = &m->live[i];
		if (!s->bytes)
			continue;
		folded_stack(f, &s->stack);
		fprintf(f, " %llu\n", (unsigned long long)s->bytes);
	}
}

/* --speedscope: speedscope's file format (its "sampled" profile), live
 * bytes per stack with unit "bytes", frames shared by name. The plain
 * folded form (--folded) stays for flamegraph.pl. */
struct ss_frame {
	char *name;
	size_t idx;
	UT_hash_handle hh;
};

static size_t ss_index(struct ss_frame **tab, size_t *n, const struct gg_frame *fr)
{
	char buf[1024];
	if (gg_frame_py(fr, buf, sizeof buf))
		;
	else if (fr->s)
		snprintf(buf, sizeof buf, "%s", fr->s);
	else
		snprintf(buf, sizeof buf, "%s+0x%s", fr->m, fr->o);
	struct ss_frame *e = NULL;
	HASH_FIND_STR(*tab, buf, e);
	if (e)
		return e->idx;
	e = calloc(1, sizeof *e);
	if (!e || !(e->name = strdup(buf))) {
		gg_error("out of memory");
		exit(GG_EXIT_BADINPUT);
	}
	e->idx = (*n)++;
	HASH_ADD_KEYPTR(hh, *tab, e->name, strlen(e->name), e);
	return e->idx;
}

void gg_report_speedscope(FILE *f, const struct gg_model *m)
{
	const struct gg_dump *d = m->d;
	struct ss_frame *tab = NULL, *e, *tmp;
	size_t nf = 0;
	struct gg_frame nostack = {"[no stack]", "0", NULL, NULL, 0};
	/* frames first (indexes), in order of first use */
	for (size_t i = 0; i < m->nlive; i++) {
		const struct gg_mlive *s = &m->live[i];
		const struct gg_stack *st = s->stack.s;
		if (!s->bytes)
			continue;
		if (!st || !st->nframes)
			ss_index(&tab, &nf, &nostack);
		for (uint32_t k = 0; st && k < st->nframes; k++)
			ss_index(&tab, &nf, &st->frames[k]);
	}
	const char **names = calloc(nf + 1, sizeof *names);
	if (!names) {
		gg_error("out of memory");
		exit(GG_EXIT_BADINPUT);
	}
	for (e = tab; e; e = e->hh.next)
		names[e->idx] = e->name;
	fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"gpuguard report\","
	      "\"name\":",
	      f);
	gg_json_str(f, d->path);
	fputs(",\"shared\":{\"frames\":[", f);
	for (size_t i = 0; i < nf; i++) {
		fputs(i ? ",{\"name\":" : "{\"name\":", f);
		gg_json_str(f, names[i]);
		fputc('}', f);
	}
	fprintf(f,
	        "]},\"profiles\":[{\"type\":\"sampled\",\"name\":\"live device memory\",\"unit\":\"bytes\","
	        "\"startValue\":0,\"endValue\":%llu,\"samples\":[",
	        (unsigned long long)m->live_bytes);
	int first = 1;
	for (size_t i = 0; i < m->nlive; i++) {
		const struct gg_mlive *s = &m->live[i];
		if (!s->bytes)
			continue;
		const struct gg_stack *st = s->stack.s;
		fputs(first ? "[" : ",[", f);
		first = 0;
		if (!st || !st->nframes)
			fprintf(f, "%zu", ss_index(&tab, &nf, &nostack));
		/* root first, as speedscope's samples are */
		for (uint32_t k = st ? st->nframes : 0; k-- > 0;)
			fprintf(f, "%zu%s", ss_index(&tab, &nf, &st->frames[k]), k ? "," : "");
		fputc(']', f);
	}
	fputs("],\"weights\":[", f);
	first = 1;
	for (size_t i = 0; i < m->nlive; i++) {
		const struct gg_mlive *s = &m->live[i];
		if (!s->bytes)
			continue;
		fprintf(f, "%s%llu", first ? "" : ",", (unsigned long long)s->bytes);
		first = 0;
	}
	fputs("]}]}\n", f);
	free(names);
	HASH_ITER(hh, tab, e, tmp)
	{
		HASH_DEL(tab, e);
		free(e->name);
		free(e);
	}
}

/* --diff: stack ids are per process, so sites are matched by their frames. */
struct diff_row {
	char *key;
	uint64_t st_old, st_new, b_old, b_new, c_old, c_new;
	UT_hash_handle hh;
};

static char *stack_key(const struct gg_mstack *st)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return NULL;
	folded_stack(m, st);
	fclose(m);
	return buf;
}

static int cmp_growth(const void *x, const void *y)
{
	const struct diff_row *a = *(struct diff_row *const *)x, *b = *(struct diff_row *const *)y;
	__int128 ga = (__int128)a->b_new - a->b_old, gb = (__int128)b->b_new - b->b_old;
	if (ga != gb)
		return ga < gb ? 1 : -1;
	return strcmp(a->key, b->key);
}

static void diff_add(struct diff_row **rows, const struct gg_model *m, int is_new)
{
	for (size_t i = 0; i < m->nlive; i++) {
		const struct gg_mlive *s = &m->live[i];
		char *k = stack_key(&s->stack);
		if (!k)
			continue;
		struct diff_row *r = NULL;
		HASH_FIND_STR(*rows, k, r);
		if (!r) {
			r = calloc(1, sizeof *r);
			if (!r) {
				free(k);
				continue;
			}
			r->key = k;
			HASH_ADD_KEYPTR(hh, *rows, r->key, strlen(r->key), r);
		} else {
			free(k);
		}
		if (is_new) {
			r->st_new = s->stack.id;
			r->b_new += s->bytes;
			r->c_new += s->count;
		} else {
			r->st_old = s->stack.id;
			r->b_old += s->bytes;
			r->c_old += s->count;
		}
	}
}

/* The process's peak as the report knows it: its peak record, else the
 * history's highest point. */
static uint64_t diff_peak(const struct gg_model *m)
{
	return m->peak.record_bytes > m->peak.bytes ? m->peak.record_bytes : m->peak.bytes;
}

/* The sites shown: o.top of the new dump's options (main.c builds both
 * models with the same). */
void gg_report_diff(FILE *f, const struct gg_model *old, const struct gg_model *new_, int json)
{
	const struct gg_opts *o = &new_->o;
	struct diff_row *rows = NULL, *r, *tmp;
	diff_add(&rows, old, 0);
	diff_add(&rows, new_, 1);
	size_t n = HASH_COUNT(rows), k = 0;
	struct diff_row **v = calloc(n + 1, sizeof *v);
	if (!v)
		return;
	for (r = rows; r; r = r->hh.next)
		v[k++] = r;
	qsort(v, n, sizeof *v, cmp_growth);
	char b1[32], b2[32], b3[32];
	__int128 total = (__int128)new_->live_bytes - old->live_bytes;
	if (json) {
		fputs("{\"gpuguard_diff\":1,\"old\":", f);
		gg_json_str(f, old->d->path);
		fputs(",\"new\":", f);
		gg_json_str(f, new_->d->path);
		fprintf(f, ",\"old_bytes\":%llu,\"new_bytes\":%llu,\"old_peak\":%llu,\"new_peak\":%llu,\"sites\":[",
		        (unsigned long long)old->live_bytes, (unsigned long long)new_->live_bytes,
		        (unsigned long long)diff_peak(old), (unsigned long long)diff_peak(new_));
		for (size_t i = 0; i < n && (int)i < o->top; i++) {
			fprintf(f,
			        "%s\n{\"old_bytes\":%llu,\"new_bytes\":%llu,\"old_count\":%llu,\"new_count\":%llu,"
			        "\"old_stack\":%llu,\"new_stack\":%llu,\"stack\":",
			        i ? "," : "", (unsigned long long)v[i]->b_old, (unsigned long long)v[i]->b_new,
			        (unsigned long long)v[i]->c_old, (unsigned long long)v[i]->c_new,
			        (unsigned long long)v[i]->st_old, (unsigned long long)v[i]->st_new);
			gg_json_str(f, v[i]->key);
			fputc('}', f);
		}
		fputs("]}\n", f);
	} else {
		fprintf(f, "gpuguard diff: ");
		put_safe(f, old->d->path);
		fprintf(f, " -> ");
		put_safe(f, new_->d->path);
		fprintf(f, "\n  live %s -> %s (%s%s)\n", gg_bytes(old->live_bytes, b1), gg_bytes(new_->live_bytes, b2),
		        total < 0 ? "-" : "+", gg_bytes((uint64_t)(total < 0 ? -total : total), b3));
		uint64_t po = diff_peak(old), pn = diff_peak(new_);
		fprintf(f, "  peak %s -> %s (%s%s)", gg_bytes(po, b1), gg_bytes(pn, b2), pn < po ? "-" : "+",
		        gg_bytes(pn < po ? po - pn : pn - po, b3));
		if (old->peak.nsite && new_->peak.nsite) {
			fprintf(f, "; largest at the peak: %s ", gg_bytes(old->peak.site[0].bytes, b1));
			put_safe(f, old->peak.site[0].label);
			fprintf(f, " -> %s ", gg_bytes(new_->peak.site[0].bytes, b2));
			put_safe(f, new_->peak.site[0].label);
		}
		fprintf(f, "\n\n");
		fprintf(f, "  %-13s %-12s %-12s %-15s %s\n", "growth", "old", "new", "allocs",
		        "call site (root first)");
		for (size_t i = 0; i < n && (int)i < o->top; i++) {
			__int128 g = (__int128)v[i]->b_new - v[i]->b_old;
			char cnt[48];
			snprintf(cnt, sizeof cnt, "%llu -> %llu", (unsigned long long)v[i]->c_old,
			         (unsigned long long)v[i]->c_new);
			fprintf(f, "  %s%-12s %-12s %-12s %-15s ", g < 0 ? "-" : "+",
			        gg_bytes((uint64_t)(g < 0 ? -g : g), b1), gg_bytes(v[i]->b_old, b2),
			        gg_bytes(v[i]->b_new, b3), cnt);
			put_safe(f, v[i]->key);
			fputc('\n', f);
		}
	}
	HASH_ITER(hh, rows, r, tmp)
	{
		HASH_DEL(rows, r);
		free(r->key);
		free(r);
	}
	free(v);
}
