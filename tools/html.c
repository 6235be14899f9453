/* gpuguard command: the --html report: one self-contained page, inline SVG,
 * no scripts, no fonts, no network, laid out from the report model. Every string that came from the dump
 * goes through esc(): a hostile dump must not inject markup. */
#include <stdlib.h>
#include <string.h>

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

static void flame(FILE *f, const struct gg_model *m)
{
	struct fnode root = {"all", 0, NULL, NULL};
	int maxdepth = 0;
	static const char nostack[] = "[no stack]";
	for (size_t i = 0; i < m->nflame; i++) {
		const struct gg_mflame *s = &m->flame[i];
		const struct gg_stack *st = s->stack.s;
		struct fnode *n = &root;
		root.bytes += s->bytes;
		if (!st || !st->nframes) {
			n = fchild(n, nostack);
			if (n)
				n->bytes += s->bytes;
			continue;
		}
		int depth = 0;
		for (uint32_t k = st->nframes; k-- > 0 && n;) {
			char lab[1024];
			n = fchild(n, frame_label(&st->frames[k], lab, sizeof lab));
			if (n)
				n->bytes += s->bytes;
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
static void html_stack(FILE *f, const struct gg_mstack *ms, int frames)
{
	const struct gg_stack *st = ms->s;
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
		fputs(ms->id ? "(stack record missing)" : "(no stack)", f);
	fputs("</pre>", f);
}

/* The header's warnings, in the page's words; NULL: the page leaves it out. */
static const char *const html_warnings[] = {
    [GG_W_TRUNCATED] = "<br><b>Truncated dump</b>: figures cover the records read.",
    [GG_W_SUPPRESSED] = "<br>%llu later dumps suppressed, %llu write errors",
    [GG_W_SIGNAL_REFUSED] = "<br>%llu allocations refused inside signal handlers that interrupted a GPU call",
    [GG_W_HISTORY_DROPPED] = "<br>%llu history events lost: the timeline has gaps",
    [GG_W_CUT_SKEW] = NULL,
    [GG_W_OVER_BOOKS] = NULL,
    [GG_W_LOG_DROPPED] = "<br>%llu log lines dropped over the library's rate limit",
};

static void html_header(FILE *f, const struct gg_model *m)
{
	const struct gg_dump *d = m->d;
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
	for (int i = 0; i < m->nwarn; i++) {
		const char *fmt = html_warnings[m->warn[i].kind];
		if (fmt) /* the formats are the constants above */
			fprintf(f, fmt, (unsigned long long)m->warn[i].n, (unsigned long long)m->warn[i].n2);
	}
	fputs("</p>\n", f);
}

static void html_diagnoses(FILE *f, const struct gg_model *m)
{
	fputs("<h2>Diagnosis</h2>\n", f);
	for (int i = 0; i < m->ndiag; i++) {
		const struct gg_diag *g = &m->diag[i];
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
}

static void html_devices(FILE *f, const struct gg_model *m)
{
	char b1[32], b2[32], b3[32];
	fputs("<h2>Devices</h2>\n", f);
	fprintf(f, "<svg width=\"1100\" height=\"%zu\" font-size=\"12\" font-family=\"sans-serif\">\n",
	        m->ndev * 30 + 10);
	for (size_t i = 0; i < m->ndev; i++) {
		const struct gg_dump_device *v = m->dev[i].rec;
		uint64_t scale = m->dev[i].scale;
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
	if (!m->npod)
		return;
	/* pod scope: who held the shared budget (names are escaped) */
	fputs("<h2>Pod: processes sharing the budget</h2>\n<table><tr><th>device</th><th>slot</th><th>pid</th>"
	      "<th>name</th><th>used</th><th>state</th></tr>\n",
	      f);
	for (size_t i = 0; i < m->npod; i++) {
		const struct gg_dump_pod *u = &m->d->pod[i];
		fprintf(f, "<tr><td>%u</td><td>%u</td><td>%llu</td><td>", u->dev, u->slot, (unsigned long long)u->pid);
		esc(f, u->comm);
		fprintf(f, "</td><td>%s</td><td>%s</td></tr>\n", gg_bytes(u->used, b1),
		        u->self    ? "this process"
		        : u->alive ? "live"
		                   : "died");
	}
	fputs("</table>\n", f);
}

/* y of a level on the timeline chart (130 px for top), from base */
static double chart_y(double base, uint64_t v, uint64_t top)
{
	return base - 130.0 * (double)v / (double)top;
}

static void html_timeline(FILE *f, const struct gg_model *m)
{
	char b1[32], b2[32], b3[32];
	fputs("<h2>Usage timeline</h2>\n", f);
	if (!m->tl.has || !m->tl.peak_bytes) {
		fputs("<p>No history in this dump.</p>\n", f);
		return;
	}
	uint64_t top = m->tl.chart_top;
	const struct gg_dump_device *cd = m->tl.chart_dev;
	fputs("<svg width=\"1100\" height=\"175\" font-size=\"11\" font-family=\"sans-serif\">"
	      "<rect x=\"60\" y=\"5\" width=\"900\" height=\"130\" fill=\"#fafafa\" stroke=\"#ccc\"/><polyline "
	      "fill=\"none\" stroke=\"#3b82f6\" stroke-width=\"2\" points=\"",
	      f);
	for (int i = 0; i < GG_TIMELINE; i++)
		fprintf(f, "%.1f,%.1f ", 60 + 900.0 * (i + 0.5) / GG_TIMELINE, chart_y(135, m->tl.level[i], top));
	fputs("\"/>", f);
	if (m->tl.chart_ceiling)
		fprintf(f,
		        "<line x1=\"60\" x2=\"960\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#dc2626\" "
		        "stroke-dasharray=\"6 4\"/>"
		        "<text x=\"965\" y=\"%.1f\" fill=\"#dc2626\">ceiling %s</text>",
		        chart_y(135, cd->limit, top), chart_y(135, cd->limit, top), chart_y(139, cd->limit, top),
		        gg_bytes(cd->limit, b2));
	if (cd && cd->pod)
		fprintf(f,
		        "<line x1=\"60\" x2=\"960\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#9333ea\" "
		        "stroke-dasharray=\"2 3\"/>"
		        "<text x=\"965\" y=\"%.1f\" fill=\"#9333ea\">pod now %s</text>",
		        chart_y(135, cd->used, top), chart_y(135, cd->used, top), chart_y(151, cd->used, top),
		        gg_bytes(cd->used, b3));
	fprintf(f,
	        "<text x=\"0\" y=\"15\">%s</text><text x=\"0\" y=\"135\">0</text>"
	        "<text x=\"60\" y=\"150\">%.3f s</text><text x=\"900\" y=\"150\">%.3f s</text>"
	        "<text x=\"60\" y=\"165\">%s</text><text x=\"900\" y=\"165\">%s</text></svg>\n",
	        gg_bytes(top, b1), (double)m->tl.start_ms / 1000.0, (double)m->tl.end_ms / 1000.0, m->tl.wall_start,
	        m->tl.wall_end);
}

static void html_histogram(FILE *f, const struct gg_model *m)
{
	char b1[32], b2[32];
	fputs("<h2>Size histogram (live allocations)</h2>\n", f);
	fprintf(f, "<svg width=\"1000\" height=\"%d\" font-size=\"11\" font-family=\"sans-serif\">\n",
	        m->nhist * 18 + 4);
	for (int row = 0; row < m->nhist; row++) {
		const struct gg_mbucket *b = &m->hist[row];
		double w = 600.0 * (double)b->count / (double)m->hist_max;
		fprintf(f,
		        "<text x=\"0\" y=\"%d\">&gt;= %s</text><rect x=\"100\" y=\"%d\" width=\"%.1f\" height=\"14\" "
		        "fill=\"#10b981\"/>"
		        "<text x=\"%.1f\" y=\"%d\">%llu (%s)</text>\n",
		        row * 18 + 12, gg_bytes(b->min, b1), row * 18, 1.0 + w, 110 + w, row * 18 + 12,
		        (unsigned long long)b->count, gg_bytes(b->bytes, b2));
	}
	fputs("</svg>\n<h2>Flame graph of live bytes (root at top)</h2>\n", f);
	flame(f, m);
}

static void html_sites(FILE *f, const struct gg_model *m)
{
	char b1[32], b2[32], b3[32], b4[32];
	fputs("<h2>Top call sites by live "
	      "bytes</h2>\n<table><tr><th>#</th><th>live</th><th>allocs</th><th>stack</th></tr>\n",
	      f);
	for (size_t i = 0; i < m->shown; i++) {
		const struct gg_site *s = m->by_bytes[i].site;
		fprintf(f, "<tr><td>%zu</td><td>%s</td><td>%llu</td><td>", i + 1, gg_bytes(s->live_bytes, b1),
		        (unsigned long long)s->live_count);
		html_stack(f, &m->by_bytes[i].stack, m->o.frames);
		fputs("</td></tr>\n", f);
	}
	fprintf(f,
	        "</table>\n<h2>Fragmentation</h2>\n<p>internal waste %s (granted %s - requested %s); pool slack %s; "
	        "external n/a (no free-block map in format 1)</p>\n",
	        gg_bytes(m->frag.waste, b1), gg_bytes(m->frag.granted, b2), gg_bytes(m->frag.requested, b3),
	        gg_bytes(m->frag.pool_slack, b4));
	if (m->frag.nvmm)
		fprintf(f, "<p>VMM reservations: %zu, %s reserved, %s mapped, %llu hole%s, largest hole %s</p>\n",
		        m->frag.nvmm, gg_bytes(m->frag.vmm_reserved, b1), gg_bytes(m->frag.vmm_mapped, b2),
		        (unsigned long long)m->frag.vmm_holes, m->frag.vmm_holes == 1 ? "" : "s",
		        gg_bytes(m->frag.vmm_largest_hole, b3));
}

/* The sections the text report has beyond the charts (issue 11, 6): the
 * failing request, by count, the peak view. */
static void html_more(FILE *f, const struct gg_model *m)
{
	const struct gg_dump *d = m->d;
	char b1[32], b2[32];
	if (d->has_request) {
		fputs("<h2>Failing request</h2>\n<p>", f);
		esc(f, d->req_api);
		fprintf(f, " of %s on device %u, thread %llu, stack %llu: ", gg_bytes(d->req_size, b1), d->req_dev,
		        (unsigned long long)d->req_tid, (unsigned long long)d->req_stack);
		esc(f, d->req_outcome);
		fputs("</p>\n", f);
		html_stack(f, &m->req_stack, m->o.frames);
		fputc('\n', f);
	}
	fputs(
	    "<h2>Top call sites by count</h2>\n<table><tr><th>#</th><th>allocs</th><th>live</th><th>stack</th></tr>\n",
	    f);
	for (size_t i = 0; i < m->shown; i++) {
		const struct gg_site *s = m->by_count[i].site;
		fprintf(f, "<tr><td>%zu</td><td>%llu</td><td>%s</td><td>", i + 1, (unsigned long long)s->live_count,
		        gg_bytes(s->live_bytes, b1));
		html_stack(f, &m->by_count[i].stack, m->o.frames);
		fputs("</td></tr>\n", f);
	}
	fputs("</table>\n", f);
	fprintf(f, "<h2>At the GPU peak (device %u%s)</h2>\n", m->peak.dev,
	        m->peak.carried ? ", as the library saw it at its peak" : "");
	if (!m->peak.has) {
		fputs("<p>nothing recorded</p>\n", f);
		return;
	}
	fprintf(f, "<p>%s live at %.3f s after start", gg_bytes(m->peak.bytes, b1), (double)m->peak.ms / 1000.0);
	if (m->peak.record_bytes)
		fprintf(f, "; the process's peak %s at %.3f s%s", gg_bytes(m->peak.record_bytes, b2),
		        (double)m->peak.record_ms / 1000.0, m->peak.in_history ? "" : " (older than the history)");
	if (m->peak.show_suggest)
		fprintf(f, "; suggested GPUGUARD_LIMIT=%lluGi (the peak x1.2, rounded up to a GiB)",
		        (unsigned long long)m->peak.suggest_gib);
	fputs("</p>\n<table><tr><th>bytes</th><th>stack</th></tr>\n", f);
	for (int i = 0; i < m->peak.nsite && i < m->o.top; i++) {
		fprintf(f, "<tr><td>%s</td><td>", gg_bytes(m->peak.site[i].bytes, b1));
		html_stack(f, &m->peak.site[i].stack, m->o.frames);
		fputs("</td></tr>\n", f);
	}
	fputs("</table>\n", f);
}

static void html_host(FILE *f, const struct gg_model *m)
{
	const struct gg_dump *d = m->d;
	char b1[32], b2[32], b3[32];
	fputs("<h2>Host</h2>\n", f);
	if (!d->has_host) {
		fputs("<p>not recorded</p>\n", f);
		return;
	}
	fprintf(f, "<p>rss %s, pinned %s in %llu allocations", gg_bytes(d->rss, b1), gg_bytes(d->pinned_bytes, b2),
	        (unsigned long long)d->pinned_allocs);
	if (d->cg_version) {
		fprintf(f, "; cgroup v%llu usage %s, limit %s", (unsigned long long)d->cg_version,
		        d->has_cg_usage ? gg_bytes(d->cg_usage, b1) : "unknown",
		        d->has_cg_limit ? gg_bytes(d->cg_limit, b2) : "none");
		if (d->has_cg_oom)
			fprintf(f, ", oom_kill %llu", (unsigned long long)d->cg_oom_kill);
		if (m->host.has_ws)
			fprintf(f, "; working set %s (usage less %s inactive page cache)", gg_bytes(m->host.ws, b3),
			        gg_bytes(d->cg_inactive_file, b1));
	}
	fputs("</p>\n", f);
}

static void html_deaths(FILE *f, const struct gg_model *m)
{
	char b1[32], b2[32];
	if (!m->ndeath)
		return;
	fputs("<h2>Recent deaths in the pod</h2>\n<p>processes that died without exiting (SIGKILL, the OOM "
	      "killer, a crash), newest first</p>\n<table><tr><th>pid</th><th>comm</th><th>GPU used / "
	      "ceiling</th><th>refused</th><th>working set / limit</th><th>verdict</th></tr>\n",
	      f);
	for (size_t i = m->ndeath; i-- > 0;) {
		const struct gg_death *x = m->death[i].rec;
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
		esc(f, m->death[i].verdict);
		fputs("</td></tr>\n", f);
	}
	fputs("</table>\n", f);
}

static void html_config(FILE *f, const struct gg_model *m)
{
	const struct gg_dump *d = m->d;
	if (!d->nconfig)
		return;
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

/* The page: its sections in order, each laid out from the model. */
static void (*const html_sections[])(FILE *f, const struct gg_model *m) = {
    html_header, html_diagnoses, html_devices, html_timeline, html_histogram,
    html_sites,  html_more,      html_host,    html_deaths,   html_config,
};

int gg_report_html(FILE *f, const struct gg_model *m)
{
	for (size_t i = 0; i < sizeof html_sections / sizeof html_sections[0]; i++)
		html_sections[i](f, m);
	fputs("</body></html>\n", f);
	return 0;
}
