/* gpuguard metrics --discover: one exporter per node (issue 13). The
 * kubelet keeps each pod's emptyDir volumes at
 *   ROOT/<pod uid>/volumes/kubernetes.io~empty-dir/<volume>/
 * (ROOT is /var/lib/kubelet/pods), so a DaemonSet that mounts ROOT read-only
 * finds every pod's region there: any regular file at the top of an
 * emptyDir that reads as a region. Each region is rendered as `gpuguard
 * metrics` renders one, its series labelled pod_uid="<uid>", namespace and
 * pod (where the pod's processes wrote them), Hostname, and the families
 * merged so that each appears once, as the text format requires.
 *
 * Everything under ROOT is the pods' (hostile) input: names are checked
 * before use, nothing is followed through a symlink (gg_region_read opens
 * with O_NOFOLLOW), and the counts are bounded.
 *
 * Never a silent 0 (issue 23): the kubelet's directories are 0750 root:root
 * and the regions belong to the pods' users, so an exporter without
 * CAP_DAC_READ_SEARCH reads nothing. Each path it cannot read counts in
 * gpuguard_discovery_errors{path_kind,reason} (bounded labels) and is named
 * once on stderr. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "live.h"

/* What could not be read, by where it sits in the kubelet's tree: the
 * labels' only values (path_kind x reason), each series always present. */
enum path_kind { PK_POD, PK_EMPTY_DIR, PK_FILE, PK_N };
static const char *const path_kind_label[PK_N] = {
    [PK_POD] = "pod",             /* ROOT/<uid>/volumes/kubernetes.io~empty-dir */
    [PK_EMPTY_DIR] = "empty_dir", /* one emptyDir volume */
    [PK_FILE] = "file",           /* a file at the top of one */
};
enum err_kind { EK_PERMISSION, EK_IO, EK_OTHER, EK_N };
static const char *const err_kind_label[EK_N] = {"permission", "io", "other"};

#define MAX_PODS 1024       /* pod directories looked at */
#define MAX_REGIONS 256     /* regions rendered */
#define MAX_FILES_PER_VOL 8 /* files tried at the top of one volume */
/* pod_uid, namespace, pod and Hostname, each escaped twice at worst */
#define GG_POD_LABELS (64 + 4 * GG_REGION_NAME_TEXT + 2 * (4 * 255 + 1) + 64)

struct family {
	char *name;
	char *head; /* the # HELP and # TYPE lines */
	char *samples;
	size_t nsamples, cap;
};

struct merge {
	struct family *f;
	size_t n, cap;
	int oom;
	unsigned errors[PK_N][EK_N]; /* paths not read, this pass */
};

/* Each unreadable path is named once per process, not at every scrape: a
 * set of the paths' hashes (FNV-1a, 64 bits). The server calls discovery
 * from its one thread, so no lock. Full, the rest go unnamed (said once);
 * they still count in the metric. */
#define LOGGED_MAX 1024
static uint64_t logged[LOGGED_MAX];
static unsigned nlogged;
static int logged_full;

/* path could not be read: counted by kind and why, and named with msg (the
 * reason, without the path) the first time. */
static void unreadable(struct merge *m, enum path_kind pk, enum gg_read_why why, const char *path, const char *msg)
{
	enum err_kind ek = why == GG_READ_PERMISSION ? EK_PERMISSION : why == GG_READ_IO ? EK_IO : EK_OTHER;
	m->errors[pk][ek]++;
	uint64_t h = 1469598103934665603u;
	for (const char *p = path; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211u;
	for (unsigned i = 0; i < nlogged; i++)
		if (logged[i] == h)
			return;
	if (nlogged == LOGGED_MAX) {
		if (!logged_full)
			gg_warning("metrics --discover: more unreadable paths than can be named; "
			           "gpuguard_discovery_errors counts them all");
		logged_full = 1;
		return;
	}
	logged[nlogged++] = h;
	char shown[4 * GG_REGION_PATH + 1];
	gg_escape_bytes(shown, path, GG_REGION_PATH);
	gg_warning(
	    "metrics --discover: cannot read %s: %s (gpuguard_discovery_errors{path_kind=\"%s\",reason=\"%s\"}%s)",
	    shown, msg, path_kind_label[pk], err_kind_label[ek],
	    ek == EK_PERMISSION ? "; the exporter needs CAP_DAC_READ_SEARCH: deploy/node/exporter.yaml" : "");
}

/* A pod uid as the kubelet names its directory: hex digits and dashes. */
static int uid_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == '-' || (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

static int name_ok(const char *s)
{
	return s[0] != '.' && strlen(s) < 256 && !strchr(s, '/');
}

static struct family *family_of(struct merge *m, const char *name, size_t len)
{
	for (size_t i = 0; i < m->n; i++)
		if (strlen(m->f[i].name) == len && !strncmp(m->f[i].name, name, len))
			return &m->f[i];
	if (m->n == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 64;
		struct family *nf = realloc(m->f, nc * sizeof *nf);
		if (!nf) {
			m->oom = 1;
			return NULL;
		}
		m->f = nf;
		m->cap = nc;
	}
	struct family *f = &m->f[m->n];
	memset(f, 0, sizeof *f);
	f->name = strndup(name, len);
	if (!f->name) {
		m->oom = 1;
		return NULL;
	}
	m->n++;
	return f;
}

static void append(struct merge *m, char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t nc = (*cap ? *cap * 2 : 256);
		while (nc < *len + n + 1)
			nc *= 2;
		char *nb = realloc(*buf, nc);
		if (!nb) {
			m->oom = 1;
			return;
		}
		*buf = nb;
		*cap = nc;
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
}

/* Appends ,key="value" (the comma only after another label) to the label
 * text at out, Prometheus-escaped, if it fits in cap bytes in all. */
static void add_label(char *out, size_t cap, const char *key, const char *value)
{
	size_t n = strlen(out), need = strlen(key) + 4;
	for (const char *v = value; *v; v++)
		need += *v == '\\' || *v == '"' || *v == '\n' ? 2 : 1;
	if (n + need >= cap)
		return;
	char *o = out + n;
	if (n)
		*o++ = ',';
	o += sprintf(o, "%s=\"", key);
	for (const char *v = value; *v; v++) {
		if (*v == '\\' || *v == '"')
			*o++ = '\\';
		if (*v == '\n') {
			*o++ = '\\';
			*o++ = 'n';
		} else {
			*o++ = *v;
		}
	}
	*o++ = '"';
	*o = 0;
}

/* Adds one region's text: its families' heads (first seen), its samples
 * with the pod's labels (lab: pod_uid="..." and the rest) inserted first. */
static void merge_text(struct merge *m, const char *text, const char *pod_labels)
{
	struct family *cur = NULL;
	for (const char *p = text; *p && !m->oom;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
		if (!strncmp(p, "# HELP ", 7) || !strncmp(p, "# TYPE ", 7)) {
			const char *name = p + 7;
			size_t nlen = strcspn(name, " \n");
			cur = family_of(m, name, nlen);
			if (cur && !cur->head) {
				/* keep both lines together: the TYPE line follows */
				size_t hl = 0, hc = 0;
				const char *q = p;
				for (int k = 0; k < 2 && *q; k++) {
					const char *e = strchr(q, '\n');
					size_t ln = e ? (size_t)(e - q) + 1 : strlen(q);
					if (strncmp(q, "# ", 2))
						break;
					append(m, &cur->head, &hl, &hc, q, ln);
					q += ln;
				}
			}
			/* skip the TYPE line that goes with a HELP */
		} else if (cur && n > 1) {
			size_t nlen = strcspn(p, "{ ");
			size_t len = cur->nsamples, *cap = &cur->cap;
			char lab[GG_POD_LABELS + 4];
			int has_labels = p[nlen] == '{';
			int ll = snprintf(lab, sizeof lab, "%s%s%s", has_labels ? "" : "{", pod_labels,
			                  has_labels ? (p[nlen + 1] == '}' ? "" : ",") : "}");
			append(m, &cur->samples, &len, cap, p, nlen + (size_t)has_labels);
			append(m, &cur->samples, &len, cap, lab, (size_t)ll);
			append(m, &cur->samples, &len, cap, p + nlen + (size_t)has_labels,
			       n - nlen - (size_t)has_labels);
			cur->nsamples = len;
		}
		p += n;
	}
}

/* ---- per card (issue 22): every pod's entry for one card, summed ----------
 * A card is named by its UUID; pods that share it (time-slicing, MPS)
 * each have an entry for it in their own region. Ordinal and unknown
 * entries name no card across pods and are left out. */
#define MAX_CARDS 64

static struct card {
	char uuid[48];
	uint64_t ceilings, footprint, runtime, physical, usable;
	unsigned pods, unlimited;
} cards[MAX_CARDS];
static unsigned ncards;

static void cards_add(const struct gg_region *r)
{
	for (unsigned i = 0; i < r->ndev; i++) {
		const struct gg_rdev *d = &r->dev[i];
		if (strcmp(d->kind, "CUDA") && strcmp(d->kind, "HIP"))
			continue;
		unsigned c = 0;
		while (c < ncards && strcmp(cards[c].uuid, d->uuid))
			c++;
		if (c == ncards) {
			if (ncards == MAX_CARDS)
				continue;
			memset(&cards[c], 0, sizeof cards[c]);
			snprintf(cards[c].uuid, sizeof cards[c].uuid, "%s", d->uuid);
			ncards++;
		}
		struct card *k = &cards[c];
		k->pods++;
		/* saturating: the regions are hostile input */
		if (!d->has_limit)
			k->unlimited++;
		else if (__builtin_add_overflow(k->ceilings, d->limit, &k->ceilings))
			k->ceilings = UINT64_MAX;
		if (__builtin_add_overflow(k->footprint, d->used, &k->footprint))
			k->footprint = UINT64_MAX;
		if (__builtin_add_overflow(k->runtime, d->runtime, &k->runtime))
			k->runtime = UINT64_MAX;
		if (d->physical > k->physical)
			k->physical = d->physical;
		if (d->card_reserved && d->physical > d->card_reserved && d->physical - d->card_reserved > k->usable)
			k->usable = d->physical - d->card_reserved;
	}
}

static void card_family(FILE *out, const char *name, const char *help, const char *host, int which)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
	for (unsigned c = 0; c < ncards; c++) {
		const struct card *k = &cards[c];
		uint64_t v = which == 0   ? k->physical
		             : which == 1 ? k->usable
		             : which == 2 ? k->ceilings
		             : which == 3 ? k->footprint
		             : which == 4 ? k->runtime
		             : which == 5 ? k->pods
		                          : k->unlimited;
		if (which == 1 && !v)
			continue; /* not known */
		fputs(name, out);
		fputs("{UUID=\"", out);
		prom_str(out, k->uuid);
		fputc('"', out);
		if (host[0])
			fprintf(out, ",Hostname=\"%s\"", host);
		fprintf(out, "} %llu\n", (unsigned long long)v);
	}
}

/* The per-card families, after the pods' own. */
static void cards_render(FILE *out, const char *host)
{
	card_family(out, "gpuguard_card_memory_bytes", "The card's total memory, as the pods' processes saw it.", host,
	            0);
	card_family(out, "gpuguard_card_usable_bytes",
	            "The card's memory less what its driver and firmware reserve (NVML; absent: not known).", host, 1);
	card_family(out, "gpuguard_card_ceilings_bytes",
	            "The pods' ceilings on this card, summed (pods without one are counted apart).", host, 2);
	card_family(out, "gpuguard_card_footprint_bytes",
	            "What the pods hold on this card, summed: their books and their runtime, as the card shows it.",
	            host, 3);
	card_family(out, "gpuguard_card_runtime_bytes",
	            "Part of the footprint that is the runtime (contexts, modules, local memory), summed.", host, 4);
	card_family(out, "gpuguard_card_pods", "Pods with an entry for this card.", host, 5);
	card_family(out, "gpuguard_card_unlimited_pods", "Of those, pods without a ceiling on it.", host, 6);
}

/* The node's cards as text, for `gpuguard top --discover`: one line each. */
void gg_cards_render_text(FILE *f)
{
	char b1[32], b2[32], b3[32], b4[32];
	fputs("CARDS (every pod's entry for the card, summed)\n", f);
	if (!ncards) {
		fputs("  (no card named by a UUID)\n", f);
		return;
	}
	fprintf(f, "  %-44s %5s %-11s %-11s %-11s %-11s %s\n", "uuid", "pods", "memory", "ceilings", "footprint",
	        "runtime", "state");
	for (unsigned c = 0; c < ncards; c++) {
		const struct card *k = &cards[c];
		uint64_t room = k->usable ? k->usable : k->physical;
		const char *state = k->footprint > room  ? "FOOTPRINT OVER THE CARD"
		                    : k->unlimited       ? "overcommitted (a pod has no ceiling)"
		                    : k->ceilings > room ? "OVERCOMMITTED"
		                                         : "ok";
		fprintf(f, "  %-44s %5u %-11s %-11s %-11s %-11s %s\n", k->uuid, k->pods, gg_bytes(room, b1),
		        gg_bytes(k->ceilings, b2), gg_bytes(k->footprint, b3), gg_bytes(k->runtime, b4), state);
	}
}

/* 1 when path was a region and is merged, 0 when it is not a region. Its
 * series are labelled pod_uid (the kubelet's directory: the pod's real
 * identity), namespace and pod where the pod's processes wrote them into
 * the region (their own word: GPUGUARD_POD_NAMESPACE, GPUGUARD_POD_NAME),
 * and Hostname, dcgm-exporter's label for the node. */
static int merge_region(struct merge *m, const char *path, const char *uid, const char *host)
{
	static struct gg_region r; /* 100 KiB: not on the stack */
	char err[GG_REGION_ERR];
	enum gg_read_why why;
	if (gg_region_read_why(&r, path, err, sizeof err, &why)) {
		/* not a region (a dump), gone since readdir, or replaced by a
		 * symlink or a FIFO: nothing to show. What we may not read is
		 * an error, never a silent 0. */
		if (why == GG_READ_PERMISSION || why == GG_READ_IO || why == GG_READ_OTHER) {
			/* err is "PATH: why" (PATH escaped): the why alone */
			char shown[4 * GG_REGION_PATH + 1];
			gg_escape_bytes(shown, path, GG_REGION_PATH);
			size_t n = strlen(shown);
			unreadable(m, PK_FILE, why, path,
			           !strncmp(err, shown, n) && !strncmp(err + n, ": ", 2) ? err + n + 2 : err);
		}
		return 0;
	}
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f) {
		m->oom = 1;
		return 0;
	}
	gg_metrics_render(f, &r);
	cards_add(&r);
	char labels[GG_POD_LABELS] = "";
	add_label(labels, sizeof labels, "pod_uid", uid);
	if (r.pod_namespace[0] && r.pod_name[0]) {
		add_label(labels, sizeof labels, "namespace", r.pod_namespace);
		add_label(labels, sizeof labels, "pod", r.pod_name);
	}
	if (host[0])
		add_label(labels, sizeof labels, "Hostname", host);
	if (fclose(f) == 0 && text)
		merge_text(m, text, labels);
	else
		m->oom = 1;
	free(text);
	return 1;
}

int gg_metrics_discover(FILE *out, const char *root, char *err, size_t errlen, enum gg_read_why *why)
{
	DIR *pods = opendir(root);
	if (!pods) {
		int e = errno;
		*why = gg_read_why_errno(e);
		snprintf(err, errlen, "%s: %s (the kubelet's pod directory, mounted read-only%s)", root, strerror(e),
		         e == EACCES ? "; the exporter needs CAP_DAC_READ_SEARCH: deploy/node/exporter.yaml" : "");
		return -1;
	}
	*why = GG_READ_OK;
	struct merge m = {0};
	unsigned npods = 0, nregions = 0;
	ncards = 0; /* each scrape sums afresh */
	/* The node's name for the Hostname label: NODE_NAME, which the
	 * DaemonSet sets from spec.nodeName as dcgm-exporter's does. Not the
	 * host name: in a pod that is the pod's own name, not the node's. */
	char host[4 * 255 + 1] = "";
	const char *node = getenv("NODE_NAME");
	if (node)
		gg_escape_bytes(host, node, 255);
	struct dirent *pe;
	while ((pe = readdir(pods)) && npods < MAX_PODS && nregions < MAX_REGIONS && !m.oom) {
		if (!uid_ok(pe->d_name))
			continue;
		npods++;
		char vols[4096];
		snprintf(vols, sizeof vols, "%s/%s/volumes/kubernetes.io~empty-dir", root, pe->d_name);
		DIR *vd = opendir(vols);
		if (!vd) {
			/* ENOENT: a pod without emptyDir volumes */
			if (errno != ENOENT)
				unreadable(&m, PK_POD, gg_read_why_errno(errno), vols, strerror(errno));
			continue;
		}
		struct dirent *ve;
		while ((ve = readdir(vd)) && nregions < MAX_REGIONS && !m.oom) {
			if (!name_ok(ve->d_name))
				continue;
			char vol[4096 + 256 + 2];
			snprintf(vol, sizeof vol, "%s/%s", vols, ve->d_name);
			struct stat st;
			if (lstat(vol, &st)) {
				if (errno != ENOENT) /* gone since readdir: not an error */
					unreadable(&m, PK_EMPTY_DIR, gg_read_why_errno(errno), vol, strerror(errno));
				continue;
			}
			if (!S_ISDIR(st.st_mode))
				continue;
			DIR *fd = opendir(vol);
			if (!fd) {
				if (errno != ENOENT)
					unreadable(&m, PK_EMPTY_DIR, gg_read_why_errno(errno), vol, strerror(errno));
				continue;
			}
			struct dirent *fe;
			unsigned tried = 0;
			while ((fe = readdir(fd)) && tried < MAX_FILES_PER_VOL && nregions < MAX_REGIONS && !m.oom) {
				if (!name_ok(fe->d_name))
					continue;
				char file[sizeof vol + 256 + 2];
				snprintf(file, sizeof file, "%s/%s", vol, fe->d_name);
				if (lstat(file, &st)) {
					if (errno != ENOENT)
						unreadable(&m, PK_FILE, gg_read_why_errno(errno), file,
						           strerror(errno));
					continue;
				}
				if (!S_ISREG(st.st_mode))
					continue;
				tried++;
				nregions += (unsigned)merge_region(&m, file, pe->d_name, host);
			}
			closedir(fd);
		}
		closedir(vd);
	}
	closedir(pods);
	int rc = 0;
	if (m.oom) {
		*why = GG_READ_OTHER;
		snprintf(err, errlen, "out of memory");
		rc = -1;
	} else {
		fputs("# HELP gpuguard_discovered_pods Pod directories under the kubelet's pods directory looked at.\n"
		      "# TYPE gpuguard_discovered_pods gauge\n",
		      out);
		/* the node's own series carry Hostname too, for its alert */
		char hl[16 + 2 * sizeof host] = "", hb[sizeof hl + 2] = "";
		if (host[0]) {
			add_label(hl, sizeof hl, "Hostname", host);
			snprintf(hb, sizeof hb, "{%s}", hl);
			strcat(hl, ",");
		}
		fprintf(out, "gpuguard_discovered_pods%s %u\n", hb, npods);
		fputs("# HELP gpuguard_discovered_regions Pod regions found and read in those pods' emptyDir volumes.\n"
		      "# TYPE gpuguard_discovered_regions gauge\n",
		      out);
		fprintf(out, "gpuguard_discovered_regions%s %u\n", hb, nregions);
		fputs("# HELP gpuguard_discovery_errors Paths under the kubelet's pods directory this pass could not "
		      "read, "
		      "by kind of path and reason (each named once on stderr); over 0, regions may be missing.\n"
		      "# TYPE gpuguard_discovery_errors gauge\n",
		      out);
		for (int pk = 0; pk < PK_N; pk++)
			for (int ek = 0; ek < EK_N; ek++)
				fprintf(out, "gpuguard_discovery_errors{%spath_kind=\"%s\",reason=\"%s\"} %u\n", hl,
				        path_kind_label[pk], err_kind_label[ek], m.errors[pk][ek]);
		for (size_t i = 0; i < m.n; i++) {
			if (!m.f[i].head || !m.f[i].samples)
				continue;
			fputs(m.f[i].head, out);
			fputs(m.f[i].samples, out);
		}
		cards_render(out, host);
	}
	for (size_t i = 0; i < m.n; i++) {
		free(m.f[i].name);
		free(m.f[i].head);
		free(m.f[i].samples);
	}
	free(m.f);
	return rc;
}
