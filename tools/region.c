/* gpuguard command: reads the pod region (include/gpuguard/region.h) for
 * `top` and `metrics`. The file is hostile input that other processes write
 * while we read: it is copied with read() (a mapping would SIGBUS when the
 * file shrinks), checked, and every field is then copied out as untrusted. */
#define _GNU_SOURCE /* F_OFD_GETLK */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpuguard/region.h>

#include "tool.h"

_Static_assert(GG_REGION_DEVICES == GPUGUARD_REGION_DEVICES, "device table size");
_Static_assert(GG_REGION_PROCS == GPUGUARD_REGION_PROCS, "process table size");
_Static_assert(GG_REGION_TEXT >= 4 * GPUGUARD_REGION_LIMIT_TEXT + 1, "escaped limit text");
_Static_assert(GG_MAX_DEATHS == GPUGUARD_REGION_DEATHS, "deaths ring size");
_Static_assert(GG_REGION_NAME_TEXT >= 4 * (GPUGUARD_REGION_NAME - 1) + 1, "escaped names");

/* Name k of the header's container list (1-based, as slots name it) into
 * out, escaped; "" when there is none such. The list is hostile input: read
 * within its bounds, never past the count its writer published. */
static void container_name(char *out, const struct gpuguard_region_header *h, uint32_t n, unsigned k)
{
	out[0] = 0;
	size_t off = 0;
	for (unsigned i = 1; i <= n && i <= k && off < sizeof h->containers; i++) {
		const char *name = h->containers + off;
		const char *end = memchr(name, 0, sizeof h->containers - off);
		if (!end)
			return;
		if (i == k) {
			size_t len = (size_t)(end - name);
			gg_escape_bytes(out, name, len < GPUGUARD_REGION_NAME - 1 ? len : GPUGUARD_REGION_NAME - 1);
			return;
		}
		off += (size_t)(end - name) + 1;
	}
}

static enum gpuguard_verdict verdict(const struct gg_death *d)
{
	struct gpuguard_region_death r;
	memset(&r, 0, sizeof r);
	r.host_limit = d->host_limit;
	r.host_ws = d->working_set;
	r.refused = d->refused;
	r.refused_age_ms = d->refused_age_ms;
	r.host_flags = (uint16_t)(d->cg_version == 1   ? GPUGUARD_OBIT_CGROUP_V1
	                          : d->cg_version == 2 ? GPUGUARD_OBIT_CGROUP_V2
	                                               : 0);
	return gpuguard_region_verdict(&r);
}

const char *gg_death_verdict(const struct gg_death *d, char *buf, size_t n)
{
	char b1[32], b2[32];
	switch (verdict(d)) {
	case GPUGUARD_VERDICT_HOST_OOM:
		snprintf(buf, n, "likely OOMKilled (%s %s of %s)", d->ws_known ? "working set" : "host memory",
		         gg_bytes(d->working_set, b1), gg_bytes(d->host_limit, b2));
		break;
	case GPUGUARD_VERDICT_GPU:
		snprintf(buf, n, "GPU refusals before death");
		break;
	case GPUGUARD_VERDICT_NOT_OOM:
		snprintf(buf, n, "killed while within GPU and host limits (not an OOM)");
		break;
	default:
		snprintf(buf, n, "killed while within GPU limits (host memory not known)");
		break;
	}
	return buf;
}

const char *gg_death_code(const struct gg_death *d)
{
	switch (verdict(d)) {
	case GPUGUARD_VERDICT_HOST_OOM:
		return "host_oom";
	case GPUGUARD_VERDICT_GPU:
		return "gpu_refusals";
	case GPUGUARD_VERDICT_NOT_OOM:
		return "not_oom";
	default:
		return "host_unknown";
	}
}

const char *gg_region_path(const char *opt)
{
	if (opt && *opt)
		return opt;
	const char *env = getenv("GPUGUARD_SHARED");
	return env && *env ? env : GPUGUARD_REGION_DEFAULT_PATH;
}

/* nvidia-smi's spelling for CUDA (GPU-8-4-4-4-12, lower-case hex), the same
 * shape for HIP, the ordinal for entries without a UUID. */
static void uuid_text(char out[48], uint32_t kind, const uint8_t u[16])
{
	const char *prefix = kind == GPUGUARD_RDEV_CUDA ? "GPU-" : kind == GPUGUARD_RDEV_HIP ? "HIP-" : "unknown-";
	if (kind == GPUGUARD_RDEV_ORDINAL) {
		uint32_t ord;
		memcpy(&ord, u, sizeof ord);
		snprintf(out, 48, "ordinal-%u", ord);
		return;
	}
	size_t n = (size_t)snprintf(out, 48, "%s", prefix);
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[n++] = '-';
		n += (size_t)snprintf(out + n, 48 - n, "%02x", u[i]);
	}
}

static const char *kind_name(uint32_t kind)
{
	switch (kind) {
	case GPUGUARD_RDEV_CUDA:
		return "CUDA";
	case GPUGUARD_RDEV_HIP:
		return "HIP";
	case GPUGUARD_RDEV_ORDINAL:
		return "ordinal";
	default:
		return "unknown";
	}
}

/* Whether the owner of slot still holds its OFD lock. F_OFD_GETLK reports a
 * conflicting lock of any other open file description, so a read-only fd can
 * ask about a write lock without taking one. */
static enum gg_liveness probe(int fd, unsigned slot)
{
	if (fd < 0)
		return GG_LIVE_UNKNOWN;
	struct flock fl;
	memset(&fl, 0, sizeof fl);
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	fl.l_start = (off_t)gpuguard_region_slot_lock(slot);
	fl.l_len = 1;
	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return GG_LIVE_UNKNOWN; /* EINVAL before Linux 3.15 */
	return fl.l_type == F_UNLCK ? GG_LIVE_EXITED : GG_LIVE_YES;
}

int gg_region_parse(struct gg_region *r, const char *path, void *buf, size_t len, int lock_fd, char *err, size_t errlen)
{
	memset(r, 0, sizeof *r);
	gg_escape_bytes(r->path, path, GG_REGION_PATH);
	char why[128];
	if (gpuguard_region_check(buf, len, why, sizeof why)) {
		snprintf(err, errlen, "%s: not a usable gpuguard pod region: %s", r->path, why);
		return -1;
	}
	const struct gpuguard_region_header *h = buf;
	r->created_ms = h->created_ms;
	r->dumps_written = atomic_load_explicit(&h->dumps_written, memory_order_relaxed);
	gg_escape_bytes(r->limit, h->limit_text, sizeof h->limit_text);
	/* Zero in a region an older library wrote: no identity. A copy of the
	 * file, so the writer's release order is what the bytes already show. */
	r->pod_namespace[0] = r->pod_name[0] = 0;
	if (atomic_load_explicit(&h->ident, memory_order_relaxed) == 1) {
		gg_escape_bytes(r->pod_namespace, h->pod_namespace, GPUGUARD_REGION_NAME - 1); /* may be unterminated */
		gg_escape_bytes(r->pod_name, h->pod_name, GPUGUARD_REGION_NAME - 1);
	}
	uint32_t ncontainers = atomic_load_explicit(&h->ncontainers, memory_order_relaxed);
	for (unsigned i = 0; i < GPUGUARD_REGION_DEVICES; i++) {
		struct gpuguard_region_device *e = gpuguard_region_dev(buf, i);
		if (atomic_load_explicit(&e->state, memory_order_relaxed) != GPUGUARD_RDEV_READY)
			continue;
		struct gg_rdev *d = &r->dev[r->ndev++];
		d->index = i;
		d->kind = kind_name(e->kind);
		uuid_text(d->uuid, e->kind, e->uuid);
		d->limit = atomic_load_explicit(&e->limit, memory_order_relaxed);
		d->has_limit = d->limit != UINT64_MAX;
		d->used = atomic_load_explicit(&e->used, memory_order_relaxed);
		d->peak = atomic_load_explicit(&e->peak, memory_order_relaxed);
		d->physical = e->physical;
		d->refused = atomic_load_explicit(&e->refused, memory_order_relaxed);
		d->reclaimed = atomic_load_explicit(&e->reclaimed, memory_order_relaxed);
		d->waiters = atomic_load_explicit(&e->waiters, memory_order_relaxed);
		d->wait_ns = atomic_load_explicit(&e->wait_ns, memory_order_relaxed);
		d->driver_oom = atomic_load_explicit(&e->driver_oom, memory_order_relaxed);
		d->runtime = atomic_load_explicit(&e->runtime, memory_order_relaxed);
		d->card_reserved = atomic_load_explicit(&e->card_reserved, memory_order_relaxed);
	}
	for (unsigned i = 0; i < GPUGUARD_REGION_PROCS; i++) {
		struct gpuguard_region_proc *e = gpuguard_region_proc(buf, i);
		if (atomic_load_explicit(&e->state, memory_order_relaxed) != GPUGUARD_RPROC_LIVE)
			continue;
		struct gg_rproc *p = &r->proc[r->nproc++];
		p->slot = i;
		p->pid = e->pid;
		p->start_ms = e->start_ms;
		gg_escape_bytes(p->comm, e->comm, 15); /* may be unterminated */
		for (unsigned d = 0; d < GPUGUARD_REGION_DEVICES; d++)
			p->used[d] = atomic_load_explicit(&e->used[d], memory_order_relaxed);
		p->live = probe(lock_fd, i);
		p->has_host = atomic_load_explicit(&e->obit_ms, memory_order_relaxed) != 0;
		p->ws_known =
		    (atomic_load_explicit(&e->host_flags, memory_order_relaxed) & GPUGUARD_OBIT_WS_KNOWN) != 0;
		p->host_ws = atomic_load_explicit(&e->host_ws, memory_order_relaxed);
		p->host_usage = atomic_load_explicit(&e->host_usage, memory_order_relaxed);
		p->host_limit = atomic_load_explicit(&e->host_limit, memory_order_relaxed);
		p->refused = atomic_load_explicit(&e->refused, memory_order_relaxed);
		container_name(p->container, h, ncontainers, e->container);
		p->has_pinned = e->has_pinned == 1;
		p->host_pinned = p->has_pinned ? atomic_load_explicit(&e->host_pinned, memory_order_relaxed) : 0;
		/* Died without exiting, not yet swept: its record, as the sweep
		 * will move it to the ring (interpose/shared_obit.c, gg_shared_obit_write). */
		uint64_t obit = atomic_load_explicit(&e->obit_ms, memory_order_relaxed);
		if (p->live == GG_LIVE_EXITED && obit && r->npending < GG_MAX_DEATHS) {
			struct gg_death *d = &r->pending[r->npending++];
			d->pending = 1;
			d->pid = e->pid;
			d->start_ms = e->start_ms;
			d->last_ms = obit;
			memcpy(d->comm, p->comm, sizeof d->comm);
			d->refused = atomic_load_explicit(&e->refused, memory_order_relaxed);
			uint64_t rms = atomic_load_explicit(&e->refused_ms, memory_order_relaxed);
			uint64_t ref = obit > rms ? obit : rms;
			d->refused_age_ms = !rms                         ? UINT32_MAX
			                    : ref - rms > UINT32_MAX - 1 ? UINT32_MAX - 1
			                                                 : (uint32_t)(ref - rms);
			uint32_t fl = atomic_load_explicit(&e->host_flags, memory_order_relaxed);
			d->cg_version = fl & GPUGUARD_OBIT_CGROUP_V2 ? 2 : fl & GPUGUARD_OBIT_CGROUP_V1 ? 1 : 0;
			d->ws_known = (fl & GPUGUARD_OBIT_WS_KNOWN) != 0;
			d->working_set = atomic_load_explicit(&e->host_ws, memory_order_relaxed);
			d->host_limit = atomic_load_explicit(&e->host_limit, memory_order_relaxed);
			d->gpu_limit = UINT64_MAX;
			/* the entry where it held the largest share of the ceiling */
			double best = -1;
			for (unsigned k = 0; k < GPUGUARD_REGION_DEVICES; k++) {
				uint64_t u = p->used[k];
				const struct gpuguard_region_device *de = gpuguard_region_dev(buf, k);
				uint64_t lim = atomic_load_explicit(&de->limit, memory_order_relaxed);
				if (!u)
					continue;
				double score = lim && lim != UINT64_MAX ? (double)u / (double)lim : (double)u / 1e30;
				if (score > best) {
					best = score;
					d->gpu_entry = k;
					d->gpu_used = u;
					d->gpu_limit = lim ? lim : UINT64_MAX;
				}
			}
		}
		r->nlive += p->live == GG_LIVE_YES;
		r->nexited += p->live == GG_LIVE_EXITED;
		r->nunknown += p->live == GG_LIVE_UNKNOWN;
	}
	/* The deaths ring: an entry counts once whole (seq names its place). */
	for (unsigned i = 0; i < GPUGUARD_REGION_DEATHS; i++) {
		struct gpuguard_region_death *e = gpuguard_region_death(buf, i);
		uint64_t seq = atomic_load_explicit(&e->seq, memory_order_relaxed);
		if (!seq || (seq - 1) % GPUGUARD_REGION_DEATHS != i)
			continue;
		struct gg_death *d = &r->death[r->ndeath++];
		d->n = seq;
		d->pid = e->pid;
		d->start_ms = e->start_ms;
		d->last_ms = e->last_ms;
		d->found_ms = e->found_ms;
		gg_escape_bytes(d->comm, e->comm, 15);
		d->gpu_entry = e->gpu_entry;
		d->gpu_used = e->gpu_used;
		d->gpu_limit = e->gpu_limit;
		d->refused = e->refused;
		d->refused_age_ms = e->refused_age_ms;
		d->cg_version = e->host_flags & GPUGUARD_OBIT_CGROUP_V2   ? 2
		                : e->host_flags & GPUGUARD_OBIT_CGROUP_V1 ? 1
		                                                          : 0;
		d->ws_known = (e->host_flags & GPUGUARD_OBIT_WS_KNOWN) != 0;
		d->working_set = e->host_ws;
		d->host_limit = e->host_limit;
		/* oldest first, by seq */
		for (unsigned j = r->ndeath - 1; j > 0 && r->death[j - 1].n > r->death[j].n; j--) {
			struct gg_death t = r->death[j];
			r->death[j] = r->death[j - 1];
			r->death[j - 1] = t;
		}
	}
	/* The slots are the books (region.h): the entry's `used` is only the
	 * snapshot its last writer published, and a process killed since still
	 * counts there until the next sweep. Sum the slots instead, leaving out
	 * those whose holder has exited, so a dead process's memory shows as
	 * free at once (issue 9, finding 4); one we cannot probe stays held. */
	for (unsigned k = 0; k < r->ndev; k++) {
		uint64_t sum = 0, rt = 0;
		for (unsigned j = 0; j < r->nproc; j++)
			if (r->proc[j].live != GG_LIVE_EXITED) {
				sum += r->proc[j].used[r->dev[k].index];
				/* version 4: the slot's runtime word; saturating,
				 * as the words are untrusted */
				uint64_t w = 0;
				if (h->version >= 4)
					w = atomic_load_explicit(
					    gpuguard_region_runtime_word(buf, r->proc[j].slot, r->dev[k].index),
					    memory_order_relaxed);
				rt = rt + w < rt ? UINT64_MAX : rt + w;
			}
		r->dev[k].used = sum;
		/* The runtime likewise, so a dead member's is gone at once; a
		 * version 3 region has only the entry's summed word. */
		if (h->version >= 4)
			r->dev[k].runtime = rt;
	}
	return 0;
}

const char *gg_read_why_label(enum gg_read_why why)
{
	switch (why) {
	case GG_READ_OK:
		return "ok";
	case GG_READ_MISSING:
		return "missing";
	case GG_READ_PERMISSION:
		return "permission";
	case GG_READ_SYMLINK:
		return "symlink";
	case GG_READ_NOT_REGULAR:
		return "not_regular";
	case GG_READ_INVALID:
		return "invalid";
	case GG_READ_IO:
		return "io";
	case GG_READ_OTHER:
		break;
	}
	return "other";
}

enum gg_read_why gg_read_why_errno(int e)
{
	switch (e) {
	case ENOENT:
	case ENOTDIR:
		return GG_READ_MISSING;
	case EACCES:
	case EPERM:
		return GG_READ_PERMISSION;
	case ELOOP:
		return GG_READ_SYMLINK;
	case EIO:
		return GG_READ_IO;
	default:
		return GG_READ_OTHER;
	}
}

int gg_region_read(struct gg_region *r, const char *path, char *err, size_t errlen)
{
	enum gg_read_why why;
	return gg_region_read_why(r, path, err, errlen, &why);
}

int gg_region_read_why(struct gg_region *r, const char *path, char *err, size_t errlen, enum gg_read_why *why)
{
	*why = GG_READ_OTHER;
	char shown[4 * GG_REGION_PATH + 1];
	gg_escape_bytes(shown, path, GG_REGION_PATH);
	int fd = gg_infile_open(path, shown, 1, err, errlen);
	if (fd < 0) {
		int e = errno;
		struct stat st;
		/* errno 0: opened, but not a regular file (gg_infile_open) */
		*why = e ? gg_read_why_errno(e) : GG_READ_NOT_REGULAR;
		if (e == ENOENT)
			snprintf(err, errlen,
			         "%s: no such file: no process in this pod has attached yet (or the region is "
			         "elsewhere: --region PATH, GPUGUARD_SHARED)",
			         shown);
		else if (e == ELOOP && !lstat(path, &st) && S_ISLNK(st.st_mode))
			snprintf(err, errlen, "%s: is a symbolic link; refusing to follow it", shown);
		return -1;
	}
	/* One byte more than a region: a longer file is told apart from a
	 * whole one without reading all of it. */
	size_t cap = GPUGUARD_REGION_SIZE + 1, have = 0;
	char *buf = malloc(cap);
	if (!buf) {
		snprintf(err, errlen, "%s: out of memory", shown);
		close(fd);
		return -1;
	}
	while (have < cap) {
		ssize_t got = read(fd, buf + have, cap - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			*why = gg_read_why_errno(errno);
			snprintf(err, errlen, "%s: %s", shown, strerror(errno));
			free(buf);
			close(fd);
			return -1;
		}
		if (got == 0)
			break;
		have += (size_t)got;
	}
	int rc = gg_region_parse(r, path, buf, have, fd, err, errlen);
	*why = rc ? GG_READ_INVALID : GG_READ_OK;
	free(buf);
	close(fd);
	return rc;
}
