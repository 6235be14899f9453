/* gpuguard command: the text, JSON, folded-stack and diff reports. Each is a
 * pure function of the analysis, so golden files can pin them down. */
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

static void text_frames(FILE *f, const struct gg_dump *d, uint64_t st, int max)
{
	char buf[1024];
	struct gg_stack *s = st ? gg_dump_stack(d, st) : NULL;
	if (!s) {
		fprintf(f, "        %s\n", st ? "(stack record missing)" : "(no stack captured)");
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

static const char *bucket_name(int i, char buf[32])
{
	return gg_bytes(1ull << i, buf);
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

/* Pod records by device, then largest use first. */
static int pod_cmp(const void *x, const void *y)
{
	const struct gg_dump_pod *a = *(const struct gg_dump_pod *const *)x, *b = *(const struct gg_dump_pod *const *)y;
	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	return a->used > b->used ? -1 : a->used < b->used;
}

/* Pod scope: who held the shared budget when the dump was written. */
static void text_pod(FILE *f, const struct gg_dump *d)
{
	if (!d->npod)
		return;
	const struct gg_dump_pod **v = malloc(d->npod * sizeof *v);
	if (!v)
		return;
	for (size_t i = 0; i < d->npod; i++)
		v[i] = &d->pod[i];
	qsort(v, d->npod, sizeof *v, pod_cmp);
	char b1[32];
	fprintf(f, "\nPOD (processes sharing the budget, pids in their own namespaces)\n");
	fprintf(f, "  %-4s %-5s %-10s %-16s %-12s %s\n", "dev", "slot", "pid", "name", "used", "state");
	for (size_t i = 0; i < d->npod; i++) {
		fprintf(f, "  %-4u %-5u %-10llu ", v[i]->dev, v[i]->slot, (unsigned long long)v[i]->pid);
		put_safe(f, v[i]->comm);
		fprintf(f, "%*s %-12s %s\n", 16 - (int)(strlen(v[i]->comm) < 16 ? strlen(v[i]->comm) : 16), "",
		        gg_bytes(v[i]->used, b1),
		        v[i]->self    ? "this process"
		        : v[i]->alive ? "live"
		                      : "died");
	}
	free(v);
}

void gg_report_text(FILE *f, const struct gg_analysis *a, const struct gg_opts *o)
{
	const struct gg_dump *d = a->d;
	char b1[32], b2[32], b3[32], b4[32], b5[32], lab[320];
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
	if (d->truncated)
		fprintf(f, "  TRUNCATED: the dump has no end trailer; figures cover the records read\n");
	if (d->has_end && (d->suppressed || d->write_errors))
		fprintf(f, "  %llu later dumps suppressed, %llu write errors\n", (unsigned long long)d->suppressed,
		        (unsigned long long)d->write_errors);
	if (d->signal_refused)
		fprintf(f,
		        "  %llu allocations refused inside signal handlers that interrupted a GPU call (README "
		        "\"What is charged\")\n",
		        (unsigned long long)d->signal_refused);
	if (d->history_dropped)
		fprintf(f, "  %llu history events lost to writers a lap behind: the timeline has gaps\n",
		        (unsigned long long)d->history_dropped);
	if (d->has_cut && !d->cut_exact)
		fprintf(f,
		        "  the live table was copied while %llu events happened and could not be put back to one "
		        "moment: live figures may be off by those events\n",
		        (unsigned long long)d->cut_skew);
	if (a->over_books)
		fprintf(f,
		        "  the live table and the history disagree: rebuilt, they climb %s past the books' own peak; "
		        "the timeline and peak view are capped at it\n",
		        gg_bytes(a->over_books, b1));
	if (d->log_dropped)
		fprintf(f, "  %llu log lines dropped over the library's rate limit (see the process's stderr)\n",
		        (unsigned long long)d->log_dropped);

	fprintf(f, "\nDIAGNOSIS\n");
	for (int i = 0; i < a->ndiags; i++) {
		const struct gg_diag *g = &a->diags[i];
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

	fprintf(f, "\nDEVICES\n");
	fprintf(f, "  %-4s %-12s %-12s %-12s %-12s %-12s %-25s %s\n", "dev", "ceiling", "charged", "peak", "live",
	        "pool", "driver free / total", "refused ceil/cfg/drv");
	for (size_t i = 0; i < d->ndevices; i++) {
		const struct gg_dump_device *v = &d->devices[i];
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
		if (v->has_limit && v->limit) {
			int w = (int)(v->used >= v->limit ? 40 : (unsigned __int128)v->used * 40 / v->limit);
			fprintf(f, "       [%.*s%*s] %llu%% of ceiling\n", w,
			        "########################################", 40 - w, "",
			        (unsigned long long)((unsigned __int128)v->used * 100 / v->limit));
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
			text_frames(f, d, d->req_stack, o->frames);
	}

	text_pod(f, d);

	fprintf(f, "\nTOP CALL SITES BY LIVE BYTES (%zu sites, %s live in %llu allocations)\n", a->nsites,
	        gg_bytes(a->live_bytes, b1), (unsigned long long)a->live_count);
	for (size_t i = 0; i < a->nsites && (int)i < o->top; i++) {
		const struct gg_site *s = a->by_bytes[i];
		fprintf(f, "  #%-2zu %-12s %8llu allocs  oldest %.1f s  stack %llu\n", i + 1,
		        gg_bytes(s->live_bytes, b1), (unsigned long long)s->live_count, (double)s->oldest_age / 1000.0,
		        (unsigned long long)s->st);
		text_frames(f, d, s->st, o->frames);
	}
	fprintf(f, "\nTOP CALL SITES BY COUNT\n");
	for (size_t i = 0; i < a->nsites && (int)i < o->top; i++) {
		const struct gg_site *s = a->by_count[i];
		gg_stack_label(d, s->st, lab, sizeof lab);
		fprintf(f, "  #%-2zu %8llu allocs  %-12s stack %-6llu ", i + 1, (unsigned long long)s->live_count,
		        gg_bytes(s->live_bytes, b1), (unsigned long long)s->st);
		put_safe(f, lab);
		fputc('\n', f);
	}

	fprintf(f, "\nSIZE HISTOGRAM (live allocations by requested size)\n");
	uint64_t maxc = 1;
	for (int i = 0; i < GG_HIST_BUCKETS; i++)
		if (a->hist_count[i] > maxc)
			maxc = a->hist_count[i];
	for (int i = 0; i < GG_HIST_BUCKETS; i++) {
		if (!a->hist_count[i])
			continue;
		int w = (int)((unsigned __int128)a->hist_count[i] * 30 / maxc);
		if (w == 0)
			w = 1;
		fprintf(f, "  >= %-11s %9llu  %-12s %.*s\n", bucket_name(i, b1), (unsigned long long)a->hist_count[i],
		        gg_bytes(a->hist_bytes[i], b2), w, "##############################");
	}

	fprintf(f, "\nFRAGMENTATION (definitions: gpuguard help report)\n");
	fprintf(f, "  internal waste: %s (granted %s - requested %s)\n", gg_bytes(a->internal_waste, b1),
	        gg_bytes(a->granted, b2), gg_bytes(a->live_bytes, b3));
	fprintf(f, "  pool slack:     %s (reserved %s - used %s)\n",
	        gg_bytes(a->pool_reserved > a->pool_used ? a->pool_reserved - a->pool_used : 0, b1),
	        gg_bytes(a->pool_reserved, b2), gg_bytes(a->pool_used, b3));
	fprintf(f, "  external:       n/a (a format 1 dump holds no free-block map)\n");
	if (a->torch_frames) {
		fprintf(f, "  PyTorch's caching allocator (");
		put_safe(f, a->torch_evidence);
		fprintf(f, "): %llu of %llu live allocations have its segment sizes\n",
		        (unsigned long long)a->torch_segments, (unsigned long long)a->live_count);
	} else {
		fprintf(
		    f,
		    "  segment sizes of 2 MiB, 20 MiB or 2 MiB multiples over 10 MiB: %llu of %llu live allocations "
		    "(no PyTorch frames in the stacks)\n",
		    (unsigned long long)a->torch_segments, (unsigned long long)a->live_count);
	}
	if (d->nvmm)
		fprintf(f, "  VMM reservations: %zu, %s reserved, %s mapped, %llu hole%s, largest hole %s\n", d->nvmm,
		        gg_bytes(a->vmm_reserved, b1), gg_bytes(a->vmm_mapped, b2), (unsigned long long)a->vmm_holes,
		        a->vmm_holes == 1 ? "" : "s", gg_bytes(a->vmm_largest_hole, b3));

	fprintf(f, "\nUSAGE TIMELINE (live requested bytes, from the history)\n");
	if (!a->has_timeline) {
		fprintf(f, "  no history in this dump\n");
	} else {
		char w1[32], w2[32];
		fprintf(f, "  %llu allocs, %llu frees, %llu refusals from %.3f s to %.3f s after start (%s to %s)\n",
		        (unsigned long long)a->h_allocs, (unsigned long long)a->h_frees,
		        (unsigned long long)a->h_refusals, (double)a->t_start / 1000.0, (double)a->t_end / 1000.0,
		        gg_wall_ms(d->start_unix_ms, a->t_start, w1), gg_wall_ms(d->start_unix_ms, a->t_end, w2));
		fprintf(f, "  |");
		uint64_t prev = a->baseline;
		for (int i = 0; i < GG_TIMELINE; i++) {
			uint64_t v = a->t_has[i] ? a->t_max[i] : prev;
			prev = v;
			int k = a->t_peak ? (int)((unsigned __int128)v * 8 / a->t_peak) : 0;
			fputs(spark[k > 8 ? 8 : k], f);
		}
		fprintf(f, "|  start %s, peak %s, end %s\n", gg_bytes(a->baseline, b1), gg_bytes(a->t_peak, b2),
		        gg_bytes(a->t_final, b3));
	}

	fprintf(f, "\nAT THE GPU PEAK (device %u, %s)\n", a->pv_dev,
	        a->pv_carried ? "as the library saw it at its peak; the history is younger"
	                      : "rebuilt from the live allocations and the history");
	if (!a->has_peak_view) {
		fprintf(f, "  nothing recorded\n");
	} else {
		if (d->nhist || a->pv_carried)
			fprintf(f, "  %s live at %.3f s after start", gg_bytes(a->pv_bytes, b1),
			        (double)a->pv_ms / 1000.0);
		else
			fprintf(f, "  %s live at the dump (no history to go back in)", gg_bytes(a->pv_bytes, b1));
		if (a->pv_record_bytes)
			fprintf(f, "; the process's peak: %s at %.3f s%s", gg_bytes(a->pv_record_bytes, b2),
			        (double)a->pv_record_ms / 1000.0,
			        a->peak_in_history ? "" : " (older than the history)");
		fputc('\n', f);
		if (a->pv_carried)
			fprintf(f, "  (the library's snapshot, within 1%% (at least 1 MiB) of the peak)\n");
		for (int i = 0; i < a->npv_sites && i < o->top; i++) {
			gg_stack_label(d, a->pv_sites[i].st, lab, sizeof lab);
			fprintf(f, "  %-14s stack %-5llu ", gg_bytes(a->pv_sites[i].bytes, b1),
			        (unsigned long long)a->pv_sites[i].st);
			put_safe(f, lab);
			fputc('\n', f);
		}
		if (a->pv_suggest_gib && !a->sizing)
			fprintf(f, "  suggested GPUGUARD_LIMIT=%lluGi (the peak x1.2, rounded up to a GiB)\n",
			        (unsigned long long)a->pv_suggest_gib);
	}

	fprintf(f, "\nHOST\n");
	if (!d->has_host) {
		fprintf(f, "  not recorded\n");
	} else {
		fprintf(f, "  rss %s, pinned %s in %llu allocations\n", gg_bytes(d->rss, b1),
		        gg_bytes(d->pinned_bytes, b2), (unsigned long long)d->pinned_allocs);
		if (d->cg_version)
			fprintf(
			    f, "  cgroup v%llu: usage %s, limit %s, oom_kill %s\n", (unsigned long long)d->cg_version,
			    d->has_cg_usage ? gg_bytes(d->cg_usage, b1) : "unknown",
			    d->has_cg_limit ? gg_bytes(d->cg_limit, b2) : "none",
			    d->has_cg_oom ? (snprintf(b3, sizeof b3, "%llu", (unsigned long long)d->cg_oom_kill), b3)
			                  : "unknown");
		if (d->cg_version && d->has_cg_usage && d->has_cg_inactive)
			fprintf(f,
			        "  working set %s (usage less %s of inactive page cache, as the kubelet counts it)\n",
			        gg_bytes(d->cg_usage > d->cg_inactive_file ? d->cg_usage - d->cg_inactive_file : 0, b1),
			        gg_bytes(d->cg_inactive_file, b2));
		if (!d->cg_version)
			fprintf(f, "  no cgroup memory controller found\n");
	}
	if (d->ndeaths) {
		fprintf(f,
		        "\nRECENT DEATHS IN THE POD (processes that died without exiting: SIGKILL, the OOM killer, a "
		        "crash)\n");
		for (size_t i = d->ndeaths; i-- > 0;) {
			const struct gg_death *x = &d->deaths[i];
			char v[160], when[32];
			time_t t = (time_t)(x->found_ms / 1000);
			struct tm tm;
			if (!gmtime_r(&t, &tm) || !strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm))
				snprintf(when, sizeof when, "at an unknown time");
			fprintf(f, "  pid %u (%s), found dead %s: %s\n", x->pid, x->comm, when,
			        gg_death_verdict(x, v, sizeof v));
			fprintf(f, "    GPU: %s of %s on entry %u; %u refused", gg_bytes(x->gpu_used, b1),
			        x->gpu_limit == UINT64_MAX ? "no ceiling" : gg_bytes(x->gpu_limit, b2), x->gpu_entry,
			        x->refused);
			if (x->refused && x->refused_age_ms != UINT32_MAX)
				fprintf(f, ", the last %.1f s before its last record",
				        (double)x->refused_age_ms / 1000.0);
			fputc('\n', f);
			if (x->cg_version)
				fprintf(f, "    host: %s %s of %s (cgroup v%u)\n",
				        x->ws_known ? "working set" : "usage", gg_bytes(x->working_set, b1),
				        x->host_limit ? gg_bytes(x->host_limit, b2) : "no limit", x->cg_version);
			else
				fprintf(f, "    host: no cgroup memory controller found\n");
			if (x->last_ms && x->found_ms >= x->last_ms)
				fprintf(f, "    last record %.1f s before it was found dead\n",
				        (double)(x->found_ms - x->last_ms) / 1000.0);
		}
	}
	if (d->nconfig) {
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

static void json_frames(FILE *f, const struct gg_dump *d, uint64_t st)
{
	struct gg_stack *s = st ? gg_dump_stack(d, st) : NULL;
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

static const char *const diag_keys[] = {"ceiling_reached",      "device_full", "fragmentation", "leak_suspected",
                                        "host_memory_pressure", "sizing",      "none"};

void gg_report_json(FILE *f, const struct gg_analysis *a, const struct gg_opts *o)
{
	const struct gg_dump *d = a->d;
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
	for (int i = 0; i < a->ndiags; i++) {
		const struct gg_diag *g = &a->diags[i];
		fprintf(f, "%s{\"kind\":\"%s\",\"title\":", i ? "," : "", diag_keys[g->kind]);
		gg_json_str(f, g->title);
		fputs(",\"evidence\":[", f);
		for (int k = 0; k < g->nevidence; k++) {
			if (k)
				fputc(',', f);
			gg_json_str(f, g->evidence[k]);
		}
		fputs("],\"change\":[", f);
		for (int k = 0; k < g->nchange; k++) {
			if (k)
				fputc(',', f);
			gg_json_str(f, g->change[k]);
		}
		fputs("]}", f);
	}
	fputs("],\n\"devices\":[", f);
	for (size_t i = 0; i < d->ndevices; i++) {
		const struct gg_dump_device *v = &d->devices[i];
		fprintf(f, "%s{\"dev\":%u,", i ? "," : "", v->dev);
		json_opt_u(f, "limit", v->has_limit, v->limit);
		json_kv_u(f, "used", v->used, 1);
		json_kv_u(f, "peak", v->peak, 1);
		json_kv_u(f, "pool_reserved", v->pool_reserved, 1);
		json_kv_u(f, "live_bytes", v->live_bytes, 1);
		json_kv_u(f, "live_bytes_in_dump", a->dev[v->dev].live_bytes, 1);
		json_kv_u(f, "granted_in_dump", a->dev[v->dev].granted, 1);
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
		json_opt_u(f, "driver_free", v->has_driver_free, v->driver_free);
		fprintf(f, "\"driver_total\":");
		if (v->has_driver_total)
			fprintf(f, "%llu}", (unsigned long long)v->driver_total);
		else
			fputs("null}", f);
	}
	fputs("],\n\"pod\":[", f);
	for (size_t i = 0; i < d->npod; i++) {
		const struct gg_dump_pod *u = &d->pod[i];
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
	if (d->ndeaths) {
		char v[160];
		fputs("\"deaths\":[", f);
		for (size_t i = 0; i < d->ndeaths; i++) {
			const struct gg_death *x = &d->deaths[i];
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
			json_kv_s(f, "verdict", gg_death_code(x), 1);
			json_kv_s(f, "reason", gg_death_verdict(x, v, sizeof v), 0);
			fputc('}', f);
		}
		fputs("],\n", f);
	}
	fputs("\"request\":", f);
	if (d->has_request) {
		fputc('{', f);
		json_kv_s(f, "api", d->req_api, 1);
		json_kv_u(f, "size", d->req_size, 1);
		json_kv_u(f, "dev", d->req_dev, 1);
		json_kv_u(f, "tid", d->req_tid, 1);
		json_kv_u(f, "stack", d->req_stack, 1);
		json_kv_s(f, "outcome", d->req_outcome, 1);
		fputs("\"frames\":", f);
		json_frames(f, d, d->req_stack);
		fputc('}', f);
	} else {
		fputs("null", f);
	}
	fprintf(f, ",\n\"live\":{\"bytes\":%llu,\"count\":%llu,\"sites\":%zu},\n\"sites_by_bytes\":[",
	        (unsigned long long)a->live_bytes, (unsigned long long)a->live_count, a->nsites);
	for (size_t i = 0; i < a->nsites && (int)i < o->top; i++) {
		const struct gg_site *s = a->by_bytes[i];
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
		json_frames(f, d, s->st);
		fputc('}', f);
	}
	fputs("],\n\"sites_by_count\":[", f);
	for (size_t i = 0; i < a->nsites && (int)i < o->top; i++) {
		const struct gg_site *s = a->by_count[i];
		fprintf(f, "%s{\"stack\":%llu,\"live_count\":%llu,\"live_bytes\":%llu}", i ? "," : "",
		        (unsigned long long)s->st, (unsigned long long)s->live_count,
		        (unsigned long long)s->live_bytes);
	}
	fputs("],\n\"size_histogram\":[", f);
	int first = 1;
	for (int i = 0; i < GG_HIST_BUCKETS; i++) {
		if (!a->hist_count[i])
			continue;
		fprintf(f, "%s{\"min\":%llu,\"count\":%llu,\"bytes\":%llu}", first ? "" : ",", 1ull << i,
		        (unsigned long long)a->hist_count[i], (unsigned long long)a->hist_bytes[i]);
		first = 0;
	}
	fprintf(f,
	        "],\n\"fragmentation\":{\"requested\":%llu,\"granted\":%llu,\"internal_waste\":%llu,"
	        "\"pool_reserved\":%llu,\"pool_used\":%llu,\"pool_slack\":%llu,\"external\":null,"
	        "\"torch_segments\":%llu,\"torch_pattern\":%s",
	        (unsigned long long)a->live_bytes, (unsigned long long)a->granted,
	        (unsigned long long)a->internal_waste, (unsigned long long)a->pool_reserved,
	        (unsigned long long)a->pool_used,
	        (unsigned long long)(a->pool_reserved > a->pool_used ? a->pool_reserved - a->pool_used : 0),
	        (unsigned long long)a->torch_segments, a->torch_pattern ? "true" : "false");
	if (d->nvmm) /* only when the dump has vmm records */
		fprintf(f,
		        ",\"vmm\":{\"reservations\":%zu,\"reserved\":%llu,\"mapped\":%llu,\"holes\":%llu,"
		        "\"largest_hole\":%llu}",
		        d->nvmm, (unsigned long long)a->vmm_reserved, (unsigned long long)a->vmm_mapped,
		        (unsigned long long)a->vmm_holes, (unsigned long long)a->vmm_largest_hole);
	fputs("},\n", f);
	fputs("\"timeline\":", f);
	if (a->has_timeline) {
		fprintf(f,
		        "{\"start_ms\":%llu,\"end_ms\":%llu,\"allocs\":%llu,\"frees\":%llu,\"refusals\":%llu,"
		        "\"start_bytes\":%llu,\"peak_bytes\":%llu,\"end_bytes\":%llu,\"bucket_max\":[",
		        (unsigned long long)a->t_start, (unsigned long long)a->t_end, (unsigned long long)a->h_allocs,
		        (unsigned long long)a->h_frees, (unsigned long long)a->h_refusals,
		        (unsigned long long)a->baseline, (unsigned long long)a->t_peak, (unsigned long long)a->t_final);
		for (int i = 0; i < GG_TIMELINE; i++) {
			if (i)
				fputc(',', f);
			if (a->t_has[i])
				fprintf(f, "%llu", (unsigned long long)a->t_max[i]);
			else
				fputs("null", f);
		}
		fputs("]}", f);
	} else {
		fputs("null", f);
	}
	fprintf(f,
	        ",\n\"peak\":{\"dev\":%u,\"bytes\":%llu,\"ms\":%llu,\"process_peak\":%llu,\"process_peak_ms\":%llu,"
	        "\"in_history\":%s,\"from\":\"%s\",\"suggested_limit_gib\":",
	        a->pv_dev, (unsigned long long)a->pv_bytes, (unsigned long long)a->pv_ms,
	        (unsigned long long)a->pv_record_bytes, (unsigned long long)a->pv_record_ms,
	        a->peak_in_history ? "true" : "false", a->pv_carried ? "snapshot" : "history");
	if (a->pv_suggest_gib)
		fprintf(f, "%llu", (unsigned long long)a->pv_suggest_gib);
	else
		fputs("null", f);
	fputs(",\"sites\":[", f);
	for (int i = 0; i < a->npv_sites; i++)
		fprintf(f, "%s{\"stack\":%llu,\"bytes\":%llu}", i ? "," : "", (unsigned long long)a->pv_sites[i].st,
		        (unsigned long long)a->pv_sites[i].bytes);
	fputs("]},\n\"sizing\":", f);
	if (a->sizing) {
		fprintf(f,
		        "{\"mode\":\"%s\",\"query\":%llu,\"total\":%llu,\"free\":%llu,\"held\":%llu,\"of\":\"%s\","
		        "\"fraction_now\":%u.%03u,\"lower_by\":%u.%03u,",
		        a->sizing == 1 ? "preallocates" : "grows_into_total", (unsigned long long)a->sz_q->n,
		        (unsigned long long)a->sz_q->total, (unsigned long long)a->sz_q->free,
		        (unsigned long long)a->sz_q->used, a->sz_of_free ? "free" : "total", a->sz_cur_pm / 1000,
		        a->sz_cur_pm % 1000, a->sz_delta_pm / 1000, a->sz_delta_pm % 1000);
		if (a->sizing == 1)
			fprintf(f, "\"fraction_advised\":%u.%03u,\"fraction_measured\":%u.%03u,\"measured_of\":\"%s\",",
			        a->sz_new_pm / 1000, a->sz_new_pm % 1000, a->sz_meas_pm / 1000, a->sz_meas_pm % 1000,
			        a->sz_meas_of_free ? "free" : "total");
		if (a->sz_cmd_pm)
			fprintf(f, "\"fraction_cmdline\":%u.%03u,", a->sz_cmd_pm / 1000, a->sz_cmd_pm % 1000);
		json_kv_s(f, "framework", a->sz_framework, 1);
		json_kv_s(f, "knob", a->sz_knob, 0);
		fputc('}', f);
	} else {
		fputs("null", f);
	}
	fputs(",\n\"config\":[", f);
	for (size_t i = 0; i < d->nconfig; i++) {
		fputs(i ? ",{" : "{", f);
		json_kv_s(f, "name", d->config[i].name, 1);
		json_kv_s(f, "value", d->config[i].value, 1);
		json_kv_s(f, "source", d->config[i].source, 0);
		fputc('}', f);
	}
	fputs("],\n\"host\":", f);
	if (d->has_host) {
		fputc('{', f);
		json_kv_u(f, "rss", d->rss, 1);
		json_kv_u(f, "cgroup_version", d->cg_version, 1);
		json_opt_u(f, "cgroup_limit", d->has_cg_limit, d->cg_limit);
		json_opt_u(f, "cgroup_usage", d->has_cg_usage, d->cg_usage);
		json_opt_u(f, "cgroup_oom_kill", d->has_cg_oom, d->cg_oom_kill);
		json_opt_u(f, "cgroup_inactive_file", d->has_cg_inactive, d->cg_inactive_file);
		json_opt_u(f, "working_set", d->has_cg_usage && d->has_cg_inactive,
		           d->cg_usage > d->cg_inactive_file ? d->cg_usage - d->cg_inactive_file : 0);
		json_kv_u(f, "pinned_bytes", d->pinned_bytes, 1);
		json_kv_u(f, "pinned_allocs", d->pinned_allocs, 0);
		fputc('}', f);
	} else {
		fputs("null", f);
	}
	fputs("}\n", f);
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

static void folded_stack(FILE *f, const struct gg_dump *d, uint64_t st)
{
	struct gg_stack *s = st ? gg_dump_stack(d, st) : NULL;
	if (!st) {
		fputs("[no stack]", f);
		return;
	}
	if (!s || !s->nframes) {
		fprintf(f, "[stack %llu]", (unsigned long long)st);
		return;
	}
	for (uint32_t i = s->nframes; i-- > 0;) {
		folded_frame(f, &s->frames[i]);
		if (i)
			fputc(';', f);
	}
}

void gg_report_folded(FILE *f, const struct gg_analysis *a)
{
	for (size_t i = 0; i < a->nsites; i++) {
		const struct gg_site *s = a->by_bytes[i];
		if (!s->live_bytes)
			continue;
		folded_stack(f, a->d, s->st);
		fprintf(f, " %llu\n", (unsigned long long)s->live_bytes);
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

void gg_report_speedscope(FILE *f, const struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	struct ss_frame *tab = NULL, *e, *tmp;
	size_t nf = 0;
	struct gg_frame nostack = {"[no stack]", "0", NULL, NULL, 0};
	/* frames first (indexes), in order of first use */
	for (size_t i = 0; i < a->nsites; i++) {
		const struct gg_site *s = a->by_bytes[i];
		struct gg_stack *st = s->st ? gg_dump_stack(d, s->st) : NULL;
		if (!s->live_bytes)
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
	        (unsigned long long)a->live_bytes);
	int first = 1;
	for (size_t i = 0; i < a->nsites; i++) {
		const struct gg_site *s = a->by_bytes[i];
		if (!s->live_bytes)
			continue;
		struct gg_stack *st = s->st ? gg_dump_stack(d, s->st) : NULL;
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
	for (size_t i = 0; i < a->nsites; i++) {
		const struct gg_site *s = a->by_bytes[i];
		if (!s->live_bytes)
			continue;
		fprintf(f, "%s%llu", first ? "" : ",", (unsigned long long)s->live_bytes);
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

static char *stack_key(const struct gg_dump *d, uint64_t st)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return NULL;
	folded_stack(m, d, st);
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

static void diff_add(struct diff_row **rows, const struct gg_analysis *a, int is_new)
{
	for (size_t i = 0; i < a->nsites; i++) {
		const struct gg_site *s = a->by_bytes[i];
		char *k = stack_key(a->d, s->st);
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
			r->st_new = s->st;
			r->b_new += s->live_bytes;
			r->c_new += s->live_count;
		} else {
			r->st_old = s->st;
			r->b_old += s->live_bytes;
			r->c_old += s->live_count;
		}
	}
}

/* The process's peak as the report knows it: its peak record, else the
 * history's highest point. */
static uint64_t diff_peak(const struct gg_analysis *a)
{
	return a->pv_record_bytes > a->pv_bytes ? a->pv_record_bytes : a->pv_bytes;
}

void gg_report_diff(FILE *f, const struct gg_analysis *old, const struct gg_analysis *new_, const struct gg_opts *o,
                    int json)
{
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
		if (old->npv_sites && new_->npv_sites) {
			char l1[320], l2[320];
			gg_stack_label(old->d, old->pv_sites[0].st, l1, sizeof l1);
			gg_stack_label(new_->d, new_->pv_sites[0].st, l2, sizeof l2);
			fprintf(f, "; largest at the peak: %s ", gg_bytes(old->pv_sites[0].bytes, b1));
			put_safe(f, l1);
			fprintf(f, " -> %s ", gg_bytes(new_->pv_sites[0].bytes, b2));
			put_safe(f, l2);
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
