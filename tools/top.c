/* gpuguard command: `gpuguard top`, the live table of the pod region's
 * devices and processes, redrawn until SIGINT/SIGTERM (or once, with no
 * ANSI). The region is re-read for every table. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "live.h"

static const char *age_text(uint64_t start_ms, uint64_t now_ms, char buf[32])
{
	if (!start_ms || start_ms > now_ms)
		return "-";
	unsigned long long s = (now_ms - start_ms) / 1000u;
	if (s < 60)
		snprintf(buf, 32, "%llus", s);
	else if (s < 3600)
		snprintf(buf, 32, "%llum%02llus", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, 32, "%lluh%02llum", s / 3600, s / 60 % 60);
	else
		snprintf(buf, 32, "%llud%02lluh", s / 86400, s / 3600 % 24);
	return buf;
}

/* The pod's recent deaths, newest first: processes that died without
 * exiting (SIGKILL, the OOM killer, a crash), with what they last showed. */
static void deaths_render(FILE *f, const struct gg_region *r, uint64_t now_ms)
{
	if (!r->ndeath && !r->npending)
		return;
	char b1[32], b2[32], b3[32], b4[32], v[160];
	fputs("\nRECENT DEATHS (pod members that died without exiting: SIGKILL, the OOM killer, a crash)\n", f);
	fprintf(f, "  %-10s %-16s %-8s %-23s %-23s %-8s %s\n", "pid", "comm", "ago", "gpu used / ceiling",
	        "working set / limit", "refused", "verdict");
	/* exited slots not yet swept first, then the ring, newest first */
	for (unsigned j = 0; j < r->npending + r->ndeath; j++) {
		const struct gg_death *d =
		    j < r->npending ? &r->pending[j] : &r->death[r->ndeath - 1 - (j - r->npending)];
		char gpu[64], host[64];
		snprintf(gpu, sizeof gpu, "%s / %s", gg_bytes(d->gpu_used, b1),
		         d->gpu_limit == UINT64_MAX ? "none" : gg_bytes(d->gpu_limit, b2));
		if (d->cg_version)
			snprintf(host, sizeof host, "%s / %s", gg_bytes(d->working_set, b3),
			         d->host_limit ? gg_bytes(d->host_limit, b4) : "none");
		else
			snprintf(host, sizeof host, "-");
		fprintf(f, "  %-10u %-16s %-8s %-23s %-23s %-8u %s\n", d->pid, d->comm,
		        d->pending ? "exited" : age_text(d->found_ms, now_ms, b1), gpu, host, d->refused,
		        gg_death_verdict(d, v, sizeof v));
	}
}

void gg_top_render(FILE *f, const struct gg_region *r, uint64_t now_ms)
{
	char b1[32], b2[32], b3[32], b4[32], b5[32];
	fprintf(f, "gpuguard top: %s\n", r->path);
	const char *age = age_text(r->created_ms, now_ms, b1);
	fprintf(f, "  pod budget %s%s, created %s%s; processes: %u live, %u exited",
	        r->limit[0] ? "GPUGUARD_LIMIT=" : "", r->limit[0] ? r->limit : "none",
	        strcmp(age, "-") ? age : "at an unknown time", strcmp(age, "-") ? " ago" : "", r->nlive, r->nexited);
	if (r->nunknown)
		fprintf(f, ", %u unknown", r->nunknown);
	fputs("\n\nDEVICES\n", f);
	if (!r->ndev)
		fputs("  (no device entry yet)\n", f);
	else
		fprintf(f, "  %-4s %-8s %-13s %-11s %-11s %-11s %-11s %8s %8s  %s\n", "dev", "kind", "uuid", "limit",
		        "used", "peak", "free", "waiters", "refused", "reclaimed");
	for (unsigned i = 0; i < r->ndev; i++) {
		const struct gg_rdev *d = &r->dev[i];
		char shortid[16];
		snprintf(shortid, sizeof shortid, "%.12s", d->uuid);
		fprintf(f, "  %-4u %-8s %-13s %-11s %-11s %-11s %-11s %8u %8llu  %s\n", d->index, d->kind, shortid,
		        d->has_limit ? gg_bytes(d->limit, b1) : "none", gg_bytes(d->used, b2), gg_bytes(d->peak, b3),
		        d->has_limit ? gg_bytes(d->limit > d->used ? d->limit - d->used : 0, b4) : "-", d->waiters,
		        (unsigned long long)d->refused, gg_bytes(d->reclaimed, b5));
	}
	/* issue 22: the part of used that is the runtime, and what the card
	 * can hold, where a library that keeps them wrote them */
	for (unsigned i = 0; i < r->ndev; i++) {
		const struct gg_rdev *d = &r->dev[i];
		if (!d->runtime && !d->card_reserved)
			continue;
		fprintf(f, "  dev %u: runtime %s of used (what the driver holds beyond the allocations)", d->index,
		        gg_bytes(d->runtime, b1));
		if (d->card_reserved && d->physical > d->card_reserved) {
			uint64_t room = d->physical - d->card_reserved;
			fprintf(f, "; the card holds %s%s", gg_bytes(room, b2),
			        d->has_limit && d->limit > room ? ", less than the ceiling" : "");
		}
		fputc('\n', f);
	}
	fputs("\nPROCESSES\n", f);
	if (!r->nproc) {
		fputs("  (no process attached)\n", f);
		deaths_render(f, r, now_ms);
		return;
	}
	const char *statefmt = r->ndev ? " %-8s" : " %s"; /* no trailing blanks */
	/* The container column only where a member names one (the pod
	 * snippets inject GPUGUARD_CONTAINER_NAME; README "In Kubernetes"). */
	int containers = 0;
	for (unsigned i = 0; i < r->nproc; i++)
		containers |= r->proc[i].container[0] != 0;
	fprintf(f, "  %-5s %-10s %-16s", "slot", "pid", "comm");
	if (containers)
		fprintf(f, " %-16s", "container");
	fprintf(f, " %-8s", "age");
	fprintf(f, statefmt, "state");
	/* Per-device columns; the last one unpadded: no trailing blanks. */
	for (unsigned i = 0; i < r->ndev; i++) {
		snprintf(b1, sizeof b1, "dev %u", r->dev[i].index);
		fprintf(f, i + 1 < r->ndev ? " %-11s" : " %s", b1);
	}
	fputc('\n', f);
	for (unsigned i = 0; i < r->nproc; i++) {
		const struct gg_rproc *p = &r->proc[i];
		fprintf(f, "  %-5u %-10u %-16s", p->slot, p->pid, p->comm);
		if (containers)
			fprintf(f, " %-16s", p->container[0] ? p->container : "-");
		fprintf(f, " %-8s", age_text(p->start_ms, now_ms, b1));
		fprintf(f, statefmt, live_text(p->live));
		for (unsigned d = 0; d < r->ndev; d++)
			fprintf(f, d + 1 < r->ndev ? " %-11s" : " %s", gg_bytes(p->used[r->dev[d].index], b2));
		fputc('\n', f);
	}
	if (r->nexited)
		fputs("\n  exited: gone without detaching; its charges return to the pod at the next allocation\n"
		      "  that needs them\n",
		      f);
	if (r->nunknown)
		fputs("\n  unknown: this kernel cannot test the liveness lock (F_OFD_GETLK)\n", f);
	deaths_render(f, r, now_ms);
}

/* One table into memory, then one write: the screen never shows half. */
static int top_draw(const char *path, int once, uint64_t interval_ms, int first)
{
	static struct gg_region r;
	char err[GG_REGION_ERR];
	int rc = gg_region_read(&r, path, err, sizeof err);
	if (rc && (once || first)) {
		gg_error("%s", err);
		return GG_EXIT_BADINPUT;
	}
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	if (!m) {
		gg_error("%s", strerror(errno));
		return GG_EXIT_BADINPUT;
	}
	if (!once)
		fputs("\033[H\033[2J", m);
	if (rc)
		fprintf(m, "gpuguard top: %s\n  (retrying every %llu ms; Ctrl-C quits)\n", err,
		        (unsigned long long)interval_ms);
	else
		gg_top_render(m, &r, clock_ms(CLOCK_REALTIME));
	if (fclose(m)) {
		free(text);
		gg_error("%s", strerror(errno));
		return GG_EXIT_BADINPUT;
	}
	size_t n = fwrite(text, 1, len, stdout);
	free(text);
	if (n != len || fflush(stdout)) {
		gg_error("writing the table: %s", strerror(errno));
		return GG_EXIT_BADINPUT;
	}
	return GG_EXIT_OK;
}

int gg_top_run(const char *path, uint64_t interval_ms, int once)
{
	if (once)
		return top_draw(path, 1, interval_ms, 1);
	/* SIGINT and SIGTERM are blocked and taken by sigtimedwait between
	 * frames: no handler, no race between a check and a sleep. */
	sigset_t stop, old;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &stop, &old)) {
		gg_error("sigprocmask: %s", strerror(errno));
		return GG_EXIT_BADINPUT;
	}
	int rc = GG_EXIT_OK;
	for (int first = 1;; first = 0) {
		rc = top_draw(path, 0, interval_ms, first);
		if (rc)
			break;
		struct timespec ts = {(time_t)(interval_ms / 1000), (long)(interval_ms % 1000) * 1000000L};
		int sig;
		do
			sig = sigtimedwait(&stop, NULL, &ts);
		while (sig < 0 && errno == EINTR);
		if (sig > 0)
			break;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}
