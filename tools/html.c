/* gpuguard command: the --html report: one self-contained page, inline SVG,
 * no scripts, no fonts, no network. Every string that came from the dump
 * goes through esc(): a hostile dump must not inject markup. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool.h"

static void esc(FILE *f, const char *s)
{
	const char *p = s ? s : "", *end = p + strlen(p);
	for (size_t n; p < end; p += n) {
		int safe;
		n = gg_text_next(p, end, &safe);
		if (!safe) { /* C0, DEL, C1, or not UTF-8 in a page declared UTF-8 */
			fputc('?', f);
			continue;
		}
		switch (*p) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&#39;", f);
			break;
		default:
			fwrite(p, 1, n, f);
		}
	}
}

/* The flame graph's tree: children in a singly linked list (few per node). */
struct fnode {
	const char *name;
	uint64_t bytes;
	struct fnode *child, *next;
};

static struct fnode *fchild(struct fnode *n, const char *name)
{
	for (struct fnode *c = n->child; c; c = c->next)
		if (!strcmp(c->name, name))
			return c;
	size_t len = strlen(name) + 1;
	struct fnode *c = calloc(1, sizeof *c + len); /* the name is kept with it */
	if (!c)
		return NULL;
	c->name = memcpy((char *)(c + 1), name, len);
	c->next = n->child;
	n->child = c;
	return c;
}

static void ffree(struct fnode *n)
{
	while (n) {
		struct fnode *next = n->next;
		ffree(n->child);
		free(n);
		n = next;
	}
}

static const char *frame_label(const struct gg_frame *fr, char *buf, size_t n)
{
	if (gg_frame_py(fr, buf, n))
		return buf;
	return fr->s ? fr->s : fr->m;
}

static void fdraw(FILE *f, const struct fnode *n, double x, int depth, double scale, int *budget)
{
	char b[32];
	for (const struct fnode *c = n->child; c && *budget > 0; c = c->next) {
		double w = (double)c->bytes * scale;
		if (w >= 0.5) {
			(*budget)--;
			unsigned hue = 0;
			for (const char *p = c->name; *p; p++)
				hue = hue * 31 + (unsigned char)*p;
			fprintf(f, "<g><title>");
			esc(f, c->name);
			fprintf(f,
			        " (%s)</title><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"15\" "
			        "fill=\"hsl(%u,70%%,%u%%)\"/>",
			        gg_bytes(c->bytes, b), x, depth * 16, w, 10 + hue % 40, 55 + hue % 15);
			if (w > 60) {
				fprintf(f, "<text x=\"%.1f\" y=\"%d\" clip-path=\"none\">", x + 3, depth * 16 + 11);
				size_t maxc = (size_t)(w / 7);
				char buf[256];
				snprintf(buf, sizeof buf, "%s", c->name);
				if (strlen(buf) > maxc && maxc > 2)
					strcpy(buf + maxc - 2, "..");
				esc(f, buf);
				fputs("</text>", f);
			}
			fputs("</g>\n", f);
			if (depth < 60)
				fdraw(f, c, x, depth + 1, scale, budget);
		}
		x += w;
	}
}

static void flame(FILE *f, const struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	struct fnode root = {"all", 0, NULL, NULL};
	int maxdepth = 0;
	static const char nostack[] = "[no stack]";
	for (size_t i = 0; i < a->nsites && i < 500; i++) {
		const struct gg_site *s = a->by_bytes[i];
		struct gg_stack *st = s->st ? gg_dump_stack(d, s->st) : NULL;
		struct fnode *n = &root;
		root.bytes += s->live_bytes;
		if (!st || !st->nframes) {
			n = fchild(n, nostack);
			if (n)
				n->bytes += s->live_bytes;
			continue;
		}
		int depth = 0;
		for (uint32_t k = st->nframes; k-- > 0 && n;) {
			char lab[1024];
			n = fchild(n, frame_label(&st->frames[k], lab, sizeof lab));
			if (n)
				n->bytes += s->live_bytes;
			depth++;
		}
		if (depth > maxdepth)
			maxdepth = depth;
	}
	if (maxdepth > 60)
		maxdepth = 60;
	int budget = 4000;
	fprintf(f, "<svg width=\"1000\" height=\"%d\" font-size=\"11\" font-family=\"monospace\">\n",
	        (maxdepth + 1) * 16 + 4);
	if (root.bytes)
		fdraw(f, &root, 0, 0, 1000.0 / (double)root.bytes, &budget);
	fputs("</svg>\n", f);
	ffree(root.child);
}

/* One stack as preformatted text, innermost first. */
static void html_stack(FILE *f, const struct gg_dump *d, uint64_t id, int frames)
{
	struct gg_stack *st = id ? gg_dump_stack(d, id) : NULL;
	fputs("<pre>", f);
	for (uint32_t k = 0; st && k < st->nframes && (int)k < frames; k++) {
		char py[1024];
		if (gg_frame_py(&st->frames[k], py, sizeof py)) {
			esc(f, py);
			fputc('\n', f);
			continue;
		}
		esc(f, st->frames[k].s ? st->frames[k].s : "?");
		fputs("  ", f);
		esc(f, st->frames[k].m);
		fputs("+0x", f);
		esc(f, st->frames[k].o);
		fputc('\n', f);
	}
	if (!st)
		fputs(id ? "(stack record missing)" : "(no stack)", f);
	fputs("</pre>", f);
}

/* The sections the text report has beyond the charts (issue 11, 6): the
 * failing request, by count, the peak view, host and configuration. */
static void html_more(FILE *f, const struct gg_analysis *a, const struct gg_opts *o)
{
	const struct gg_dump *d = a->d;
	char b1[32], b2[32], b3[32];
	if (d->has_request) {
		fputs("<h2>Failing request</h2>\n<p>", f);
		esc(f, d->req_api);
		fprintf(f, " of %s on device %u, thread %llu, stack %llu: ", gg_bytes(d->req_size, b1), d->req_dev,
		        (unsigned long long)d->req_tid, (unsigned long long)d->req_stack);
		esc(f, d->req_outcome);
		fputs("</p>\n", f);
		html_stack(f, d, d->req_stack, o->frames);
		fputc('\n', f);
	}
	fputs(
	    "<h2>Top call sites by count</h2>\n<table><tr><th>#</th><th>allocs</th><th>live</th><th>stack</th></tr>\n",
	    f);
	for (size_t i = 0; i < a->nsites && (int)i < o->top; i++) {
		const struct gg_site *s = a->by_count[i];
		fprintf(f, "<tr><td>%zu</td><td>%llu</td><td>%s</td><td>", i + 1, (unsigned long long)s->live_count,
		        gg_bytes(s->live_bytes, b1));
		html_stack(f, d, s->st, o->frames);
		fputs("</td></tr>\n", f);
	}
	fputs("</table>\n", f);
	fprintf(f, "<h2>At the GPU peak (device %u%s)</h2>\n", a->pv_dev,
	        a->pv_carried ? ", as the library saw it at its peak" : "");
	if (!a->has_peak_view) {
		fputs("<p>nothing recorded</p>\n", f);
	} else {
		fprintf(f, "<p>%s live at %.3f s after start", gg_bytes(a->pv_bytes, b1), (double)a->pv_ms / 1000.0);
		if (a->pv_record_bytes)
			fprintf(f, "; the process's peak %s at %.3f s%s", gg_bytes(a->pv_record_bytes, b2),
			        (double)a->pv_record_ms / 1000.0,
			        a->peak_in_history ? "" : " (older than the history)");
		if (a->pv_suggest_gib && !a->sizing)
			fprintf(f, "; suggested GPUGUARD_LIMIT=%lluGi (the peak x1.2, rounded up to a GiB)",
			        (unsigned long long)a->pv_suggest_gib);
		fputs("</p>\n<table><tr><th>bytes</th><th>stack</th></tr>\n", f);
		for (int i = 0; i < a->npv_sites && i < o->top; i++) {
			fprintf(f, "<tr><td>%s</td><td>", gg_bytes(a->pv_sites[i].bytes, b1));
			html_stack(f, d, a->pv_sites[i].st, o->frames);
			fputs("</td></tr>\n", f);
		}
		fputs("</table>\n", f);
	}
	fputs("<h2>Host</h2>\n", f);
	if (!d->has_host) {
		fputs("<p>not recorded</p>\n", f);
	} else {
		fprintf(f, "<p>rss %s, pinned %s in %llu allocations", gg_bytes(d->rss, b1),
		        gg_bytes(d->pinned_bytes, b2), (unsigned long long)d->pinned_allocs);
		if (d->cg_version) {
			fprintf(f, "; cgroup v%llu usage %s, limit %s", (unsigned long long)d->cg_version,
			        d->has_cg_usage ? gg_bytes(d->cg_usage, b1) : "unknown",
			        d->has_cg_limit ? gg_bytes(d->cg_limit, b2) : "none");
			if (d->has_cg_oom)
				fprintf(f, ", oom_kill %llu", (unsigned long long)d->cg_oom_kill);
			if (d->has_cg_usage && d->has_cg_inactive)
				fprintf(
				    f, "; working set %s (usage less %s inactive page cache)",
				    gg_bytes(d->cg_usage > d->cg_inactive_file ? d->cg_usage - d->cg_inactive_file : 0,
				             b3),
				    gg_bytes(d->cg_inactive_file, b1));
		}
		fputs("</p>\n", f);
	}
	if (d->ndeaths) {
		fputs("<h2>Recent deaths in the pod</h2>\n<p>processes that died without exiting (SIGKILL, the OOM "
		      "killer, a crash), newest first</p>\n<table><tr><th>pid</th><th>comm</th><th>GPU used / "
		      "ceiling</th><th>refused</th><th>working set / limit</th><th>verdict</th></tr>\n",
		      f);
		for (size_t i = d->ndeaths; i-- > 0;) {
			const struct gg_death *x = &d->deaths[i];
			char v[160];
			fprintf(f, "<tr><td>%u</td><td>", x->pid);
			esc(f, x->comm);
			fprintf(f, "</td><td>%s / %s</td><td>%u</td><td>", gg_bytes(x->gpu_used, b1),
			        x->gpu_limit == UINT64_MAX ? "none" : gg_bytes(x->gpu_limit, b2), x->refused);
			if (x->cg_version)
				fprintf(f, "%s / %s", gg_bytes(x->working_set, b1),
				        x->host_limit ? gg_bytes(x->host_limit, b2) : "none");
			else
				fputs("-", f);
			fputs("</td><td>", f);
			esc(f, gg_death_verdict(x, v, sizeof v));
			fputs("</td></tr>\n", f);
		}
		fputs("</table>\n", f);
	}
	if (d->nconfig) {
		fputs("<h2>Configuration</h2>\n<table><tr><th>option</th><th>value</th><th>source</th></tr>\n", f);
		for (size_t i = 0; i < d->nconfig; i++) {
			fputs("<tr><td>", f);
			esc(f, d->config[i].name);
			fputs("</td><td>", f);
			esc(f, d->config[i].value);
			fputs("</td><td>", f);
			esc(f, d->config[i].source);
			fputs("</td></tr>\n", f);
		}
		fputs("</table>\n", f);
	}
}

int gg_report_html(FILE *f, const struct gg_analysis *a, const struct gg_opts *o)
{
	const struct gg_dump *d = a->d;
	char b1[32], b2[32], b3[32], b4[32];
	fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n"
	      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
	      "'unsafe-inline'\">\n<title>gpuguard report: ",
	      f);
	esc(f, d->path);
	fputs("</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1150px}"
	      "h2{border-bottom:1px solid #ccc}table{border-collapse:collapse}td,th{padding:2px 8px;text-align:left}"
	      ".d{background:#fff4e5;padding:.5em 1em;margin:.5em 0;border-left:4px solid #e67e22}"
	      "pre{font-size:12px;background:#f6f6f6;padding:4px}</style></head><body>\n<h1>gpuguard report</h1>\n<p>",
	      f);
	esc(f, d->path);
	fprintf(f, ": dump format %llu from libgpuguard ", (unsigned long long)d->format);
	esc(f, d->lib);
	fputs(", written ", f);
	esc(f, d->time);
	fputs(" on ", f);
	esc(f, d->host);
	fprintf(f, ", pid %llu, trigger <b>", (unsigned long long)d->pid);
	esc(f, d->trigger);
	fputs("</b><br>command: <code>", f);
	esc(f, d->cmdline);
	fputs("</code>", f);
	if (d->truncated)
		fputs("<br><b>Truncated dump</b>: figures cover the records read.", f);
	/* the trailer's counters, as the text report's header gives them */
	if (d->suppressed || d->write_errors)
		fprintf(f, "<br>%llu later dumps suppressed, %llu write errors", (unsigned long long)d->suppressed,
		        (unsigned long long)d->write_errors);
	if (d->signal_refused)
		fprintf(f, "<br>%llu allocations refused inside signal handlers that interrupted a GPU call",
		        (unsigned long long)d->signal_refused);
	if (d->history_dropped)
		fprintf(f, "<br>%llu history events lost: the timeline has gaps",
		        (unsigned long long)d->history_dropped);
	if (d->log_dropped)
		fprintf(f, "<br>%llu log lines dropped over the library's rate limit",
		        (unsigned long long)d->log_dropped);
	fputs("</p>\n<h2>Diagnosis</h2>\n", f);
	for (int i = 0; i < a->ndiags; i++) {
		const struct gg_diag *g = &a->diags[i];
		fputs("<div class=\"d\"><h3>", f);
		esc(f, g->title);
		fputs("</h3><ul>", f);
		for (int k = 0; k < g->nevidence; k++) {
			fputs("<li>", f);
			esc(f, g->evidence[k]);
			fputs("</li>", f);
		}
		fputs("</ul><p><b>What to change</b></p><ul>", f);
		for (int k = 0; k < g->nchange; k++) {
			fputs("<li>", f);
			esc(f, g->change[k]);
			fputs("</li>", f);
		}
		fputs("</ul></div>\n", f);
	}

	fputs("<h2>Devices</h2>\n", f);
	fprintf(f, "<svg width=\"1100\" height=\"%zu\" font-size=\"12\" font-family=\"sans-serif\">\n",
	        d->ndevices * 30 + 10);
	for (size_t i = 0; i < d->ndevices; i++) {
		const struct gg_dump_device *v = &d->devices[i];
		uint64_t scale = v->has_limit && v->limit ? v->limit : (v->peak ? v->peak : 1);
		if (v->has_driver_total && !v->has_limit && v->driver_total)
			scale = v->driver_total;
		double wu = v->used >= scale ? 700.0 : 700.0 * (double)v->used / (double)scale;
		double wp = v->peak >= scale ? 700.0 : 700.0 * (double)v->peak / (double)scale;
		int y = (int)i * 30 + 5;
		fprintf(f,
		        "<text x=\"0\" y=\"%d\">device %u</text><rect x=\"80\" y=\"%d\" width=\"700\" height=\"20\" "
		        "fill=\"#eee\"/>"
		        "<rect x=\"80\" y=\"%d\" width=\"%.1f\" height=\"20\" fill=\"#3b82f6\"/>"
		        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#c00\" stroke-width=\"2\"/>"
		        "<text x=\"790\" y=\"%d\">%s / %s%s (peak %s)</text>\n",
		        y + 15, v->dev, y, y, wu, 80 + wp, 80 + wp, y, y + 20, y + 15, gg_bytes(v->used, b1),
		        v->has_limit ? gg_bytes(v->limit, b2) : "no ceiling", v->has_limit ? "" : "",
		        gg_bytes(v->peak, b3));
	}
	fputs("</svg>\n", f);
	if (d->npod) {
		/* pod scope: who held the shared budget (names are escaped) */
		fputs("<h2>Pod: processes sharing the budget</h2>\n<table><tr><th>device</th><th>slot</th><th>pid</th>"
		      "<th>name</th><th>used</th><th>state</th></tr>\n",
		      f);
		for (size_t i = 0; i < d->npod; i++) {
			const struct gg_dump_pod *u = &d->pod[i];
			fprintf(f, "<tr><td>%u</td><td>%u</td><td>%llu</td><td>", u->dev, u->slot,
			        (unsigned long long)u->pid);
			esc(f, u->comm);
			fprintf(f, "</td><td>%s</td><td>%s</td></tr>\n", gg_bytes(u->used, b1),
			        u->self    ? "this process"
			        : u->alive ? "live"
			                   : "died");
		}
		fputs("</table>\n", f);
	}

	fputs("<h2>Usage timeline</h2>\n", f);
	if (a->has_timeline && a->t_peak) {
		/* The ceiling and, in pod scope, the pod's total on the same
		 * scale: a refusal under a budget with room to spare reads as
		 * what it is (issue 11, finding 6). */
		const struct gg_dump_device *cd = NULL;
		for (size_t i = 0; i < d->ndevices; i++)
			if (d->devices[i].dev == a->pv_dev)
				cd = &d->devices[i];
		uint64_t top = a->t_peak;
		if (cd && cd->has_limit && cd->limit > top && cd->limit / 4 < top * 2)
			top = cd->limit;
		if (cd && cd->pod && cd->used > top)
			top = cd->used;
		fputs("<svg width=\"1100\" height=\"175\" font-size=\"11\" font-family=\"sans-serif\">"
		      "<rect x=\"60\" y=\"5\" width=\"900\" height=\"130\" fill=\"#fafafa\" stroke=\"#ccc\"/><polyline "
		      "fill=\"none\" stroke=\"#3b82f6\" stroke-width=\"2\" points=\"",
		      f);
		uint64_t prev = a->baseline;
		for (int i = 0; i < GG_TIMELINE; i++) {
			uint64_t v = a->t_has[i] ? a->t_max[i] : prev;
			prev = v;
			fprintf(f, "%.1f,%.1f ", 60 + 900.0 * (i + 0.5) / GG_TIMELINE,
			        135 - 130.0 * (double)v / (double)top);
		}
		fputs("\"/>", f);
		if (cd && cd->has_limit && cd->limit <= top)
			fprintf(f,
			        "<line x1=\"60\" x2=\"960\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#dc2626\" "
			        "stroke-dasharray=\"6 4\"/>"
			        "<text x=\"965\" y=\"%.1f\" fill=\"#dc2626\">ceiling %s</text>",
			        135 - 130.0 * (double)cd->limit / (double)top,
			        135 - 130.0 * (double)cd->limit / (double)top,
			        139 - 130.0 * (double)cd->limit / (double)top, gg_bytes(cd->limit, b2));
		if (cd && cd->pod)
			fprintf(f,
			        "<line x1=\"60\" x2=\"960\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#9333ea\" "
			        "stroke-dasharray=\"2 3\"/>"
			        "<text x=\"965\" y=\"%.1f\" fill=\"#9333ea\">pod now %s</text>",
			        135 - 130.0 * (double)cd->used / (double)top,
			        135 - 130.0 * (double)cd->used / (double)top,
			        151 - 130.0 * (double)cd->used / (double)top, gg_bytes(cd->used, b3));
		char w1[32], w2[32];
		gg_wall_ms(d->start_unix_ms, a->t_start, w1);
		gg_wall_ms(d->start_unix_ms, a->t_end, w2);
		fprintf(f,
		        "<text x=\"0\" y=\"15\">%s</text><text x=\"0\" y=\"135\">0</text>"
		        "<text x=\"60\" y=\"150\">%.3f s</text><text x=\"900\" y=\"150\">%.3f s</text>"
		        "<text x=\"60\" y=\"165\">%s</text><text x=\"900\" y=\"165\">%s</text></svg>\n",
		        gg_bytes(top, b1), (double)a->t_start / 1000.0, (double)a->t_end / 1000.0, w1, w2);
	} else {
		fputs("<p>No history in this dump.</p>\n", f);
	}

	fputs("<h2>Size histogram (live allocations)</h2>\n", f);
	uint64_t maxc = 1;
	int nb = 0;
	for (int i = 0; i < GG_HIST_BUCKETS; i++) {
		if (a->hist_count[i] > maxc)
			maxc = a->hist_count[i];
		nb += a->hist_count[i] != 0;
	}
	fprintf(f, "<svg width=\"1000\" height=\"%d\" font-size=\"11\" font-family=\"sans-serif\">\n", nb * 18 + 4);
	int row = 0;
	for (int i = 0; i < GG_HIST_BUCKETS; i++) {
		if (!a->hist_count[i])
			continue;
		fprintf(f,
		        "<text x=\"0\" y=\"%d\">&gt;= %s</text><rect x=\"100\" y=\"%d\" width=\"%.1f\" height=\"14\" "
		        "fill=\"#10b981\"/>"
		        "<text x=\"%.1f\" y=\"%d\">%llu (%s)</text>\n",
		        row * 18 + 12, gg_bytes(1ull << i, b1), row * 18,
		        1.0 + 600.0 * (double)a->hist_count[i] / (double)maxc,
		        110 + 600.0 * (double)a->hist_count[i] / (double)maxc, row * 18 + 12,
		        (unsigned long long)a->hist_count[i], gg_bytes(a->hist_bytes[i], b2));
		row++;
	}
	fputs("</svg>\n<h2>Flame graph of live bytes (root at top)</h2>\n", f);
	flame(f, a);

	fputs("<h2>Top call sites by live "
	      "bytes</h2>\n<table><tr><th>#</th><th>live</th><th>allocs</th><th>stack</th></tr>\n",
	      f);
	for (size_t i = 0; i < a->nsites && (int)i < o->top; i++) {
		const struct gg_site *s = a->by_bytes[i];
		fprintf(f, "<tr><td>%zu</td><td>%s</td><td>%llu</td><td><pre>", i + 1, gg_bytes(s->live_bytes, b1),
		        (unsigned long long)s->live_count);
		struct gg_stack *st = s->st ? gg_dump_stack(d, s->st) : NULL;
		for (uint32_t k = 0; st && k < st->nframes && (int)k < o->frames; k++) {
			char py[1024];
			if (gg_frame_py(&st->frames[k], py, sizeof py)) {
				esc(f, py);
				fputc('\n', f);
				continue;
			}
			esc(f, st->frames[k].s ? st->frames[k].s : "?");
			fputs("  ", f);
			esc(f, st->frames[k].m);
			fputs("+0x", f);
			esc(f, st->frames[k].o);
			fputc('\n', f);
		}
		if (!st)
			fputs(s->st ? "(stack record missing)" : "(no stack)", f);
		fputs("</pre></td></tr>\n", f);
	}
	fprintf(f,
	        "</table>\n<h2>Fragmentation</h2>\n<p>internal waste %s (granted %s - requested %s); pool slack %s; "
	        "external n/a (no free-block map in format 1)</p>\n",
	        gg_bytes(a->internal_waste, b1), gg_bytes(a->granted, b2), gg_bytes(a->live_bytes, b3),
	        gg_bytes(a->pool_reserved > a->pool_used ? a->pool_reserved - a->pool_used : 0, b4));
	if (d->nvmm)
		fprintf(f, "<p>VMM reservations: %zu, %s reserved, %s mapped, %llu hole%s, largest hole %s</p>\n",
		        d->nvmm, gg_bytes(a->vmm_reserved, b1), gg_bytes(a->vmm_mapped, b2),
		        (unsigned long long)a->vmm_holes, a->vmm_holes == 1 ? "" : "s",
		        gg_bytes(a->vmm_largest_hole, b3));
	html_more(f, a, o);
	fputs("</body></html>\n", f);
	return 0;
}
