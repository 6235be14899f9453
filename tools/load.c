/* gpuguard command: reads a dump (include/gpuguard/dump.h) into memory.
 * Strict: every record is checked against the format, and a broken one is
 * an error naming FILE:LINE. Two cases are forgiven, as heaptrack does: a
 * dump cut short (the process died while writing) is read to its last whole
 * record with a warning, and unknown record types are skipped. */
#include <errno.h>
#include <fcntl.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpuguard.h>
#include <gpuguard/dump.h>
#include <gpuguard/schema.h>

#include "tool.h"

static const char *const api_names[] = {GPUGUARD_API_NAMES};

const char *gg_api_name(uint64_t api)
{
	if (api < sizeof api_names / sizeof api_names[0])
		return api_names[api];
	return "unknown";
}

struct gg_stack *gg_dump_stack(const struct gg_dump *d, uint64_t id)
{
	struct gg_stack *s = NULL;
	HASH_FIND(hh, d->stacks, &id, sizeof id, s);
	return s;
}

struct loader {
	struct gg_dump *d;
	struct gg_json j;
	FILE *warn;
	char *err;
	size_t errlen;
	uint64_t lineno;
	int seen_header, seen_end, warned_unknown;
};

static int lfail(struct loader *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int lfail(struct loader *l, const char *fmt, ...)
{
	char msg[GG_MAX_ERR];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(l->err, l->errlen, "%s:%llu: %s", l->d->path, (unsigned long long)l->lineno, msg);
	return -1;
}

/* Field readers: 0 ok, -1 after lfail. */
static int get_u64(struct loader *l, const struct gg_jval *o, const char *name, uint64_t *out, int *has)
{
	const struct gg_jval *v = gg_json_get(&l->j, o, name);
	if (has && v && v->type == GG_J_NULL) {
		*has = 0;
		*out = 0;
		return 0;
	}
	if (!v)
		return lfail(l, "missing field \"%s\"", name);
	if (v->type != GG_J_INT || v->neg)
		return lfail(l, "field \"%s\": expected a non-negative integer%s", name, has ? " or null" : "");
	*out = v->u;
	if (has)
		*has = 1;
	return 0;
}

/* A number a newer writer added: absent reads as 0, present must be one. */
static int get_u64_opt(struct loader *l, const struct gg_jval *o, const char *name, uint64_t *out)
{
	*out = 0;
	return gg_json_get(&l->j, o, name) ? get_u64(l, o, name, out, NULL) : 0;
}

static int get_small(struct loader *l, const struct gg_jval *o, const char *name, uint32_t *out, uint32_t max)
{
	uint64_t v = 0;
	if (get_u64(l, o, name, &v, NULL))
		return -1;
	if (v >= max)
		return lfail(l, "field \"%s\": %llu is out of range (under %u)", name, (unsigned long long)v, max);
	*out = (uint32_t)v;
	return 0;
}

static int get_str(struct loader *l, const struct gg_jval *o, const char *name, char **out, int optional)
{
	const struct gg_jval *v = gg_json_get(&l->j, o, name);
	if (!v && optional) {
		*out = NULL;
		return 0;
	}
	if (!v)
		return lfail(l, "missing field \"%s\"", name);
	if (v->type != GG_J_STR)
		return lfail(l, "field \"%s\": expected a string", name);
	free(*out);
	*out = strdup(v->s);
	if (!*out)
		return lfail(l, "out of memory");
	return 0;
}

static int rec_header(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	if (get_u64(l, o, GPUGUARD_KEY(header, format), &d->format, NULL))
		return -1;
	if (d->format > GPUGUARD_DUMP_FORMAT)
		return lfail(l,
		             "dump format %llu is newer than this gpuguard reads (format %d): use the gpuguard "
		             "that came with the library that wrote it",
		             (unsigned long long)d->format, GPUGUARD_DUMP_FORMAT);
	if (d->format == 0)
		return lfail(l, "dump format 0 does not exist");
	if (get_str(l, o, GPUGUARD_KEY(header, lib), &d->lib, 0) ||
	    get_str(l, o, GPUGUARD_KEY(header, time), &d->time, 0) ||
	    get_u64(l, o, GPUGUARD_KEY(header, unix_ms), &d->unix_ms, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(header, start_unix_ms), &d->start_unix_ms, NULL) ||
	    get_str(l, o, GPUGUARD_KEY(header, host), &d->host, 0) ||
	    get_u64(l, o, GPUGUARD_KEY(header, pid), &d->pid, NULL) ||
	    get_str(l, o, GPUGUARD_KEY(header, trigger), &d->trigger, 0) ||
	    get_str(l, o, GPUGUARD_KEY(header, unwinder), &d->unwinder, 0) ||
	    get_u64(l, o, GPUGUARD_KEY(header, stack_depth), &d->stack_depth, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(header, history_capacity), &d->history_capacity, NULL))
		return -1;
	const struct gg_jval *cl = gg_json_get(&l->j, o, GPUGUARD_KEY(header, cmdline));
	if (!cl || cl->type != GG_J_ARR)
		return lfail(l, "field \"cmdline\": expected an array of strings");
	size_t total = 1;
	for (uint32_t i = cl->child; i; i = l->j.v[i].next) {
		if (l->j.v[i].type != GG_J_STR)
			return lfail(l, "field \"cmdline\": expected an array of strings");
		total += l->j.v[i].len + 1;
	}
	d->cmdline = malloc(total);
	if (!d->cmdline)
		return lfail(l, "out of memory");
	char *p = d->cmdline;
	for (uint32_t i = cl->child; i; i = l->j.v[i].next) {
		if (p != d->cmdline)
			*p++ = ' ';
		memcpy(p, l->j.v[i].s, l->j.v[i].len);
		p += l->j.v[i].len;
	}
	*p = '\0';
	return 0;
}

static int rec_config(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	if (d->nconfig >= GG_MAX_CONFIG)
		return lfail(l, "more than %d config records", GG_MAX_CONFIG);
	if (!d->config && !(d->config = calloc(GG_MAX_CONFIG, sizeof *d->config)))
		return lfail(l, "out of memory");
	struct gg_config *c = &d->config[d->nconfig++];
	return get_str(l, o, GPUGUARD_KEY(config, name), &c->name, 0) ||
	               get_str(l, o, GPUGUARD_KEY(config, value), &c->value, 0) ||
	               get_str(l, o, GPUGUARD_KEY(config, source), &c->source, 0)
	           ? -1
	           : 0;
}

static int rec_device(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	struct gg_dump_device v;
	char *scope = NULL;
	memset(&v, 0, sizeof v);
	if (get_small(l, o, GPUGUARD_KEY(device, dev), &v.dev, GPUGUARD_MAX_DEVICES) ||
	    get_u64(l, o, GPUGUARD_KEY(device, limit), &v.limit, &v.has_limit) ||
	    get_u64(l, o, GPUGUARD_KEY(device, used), &v.used, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(device, peak), &v.peak, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(device, pool_reserved), &v.pool_reserved, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(device, live_bytes), &v.live_bytes, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(device, allocs), &v.allocs, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(device, frees), &v.frees, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(device, untracked_frees), &v.untracked_frees, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(device, refused_ceiling), &v.refused_ceiling, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(device, refused_config), &v.refused_config, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(device, refused_driver), &v.refused_driver, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(device, pool_overshoot), &v.pool_overshoot, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(device, driver_free), &v.driver_free, &v.has_driver_free) ||
	    get_u64(l, o, GPUGUARD_KEY(device, driver_total), &v.driver_total, &v.has_driver_total) ||
	    get_str(l, o, GPUGUARD_KEY(device, scope), &scope, 1))
		goto bad;
	/* both absent from dumps written before pod scope */
	int has_pu = gg_json_get(&l->j, o, GPUGUARD_KEY(device, process_used)) != NULL;
	if (has_pu && get_u64(l, o, GPUGUARD_KEY(device, process_used), &v.process_used, NULL))
		goto bad;
	v.has_wait_ms = gg_json_get(&l->j, o, GPUGUARD_KEY(device, wait_ms)) != NULL;
	if (v.has_wait_ms && get_u64(l, o, GPUGUARD_KEY(device, wait_ms), &v.wait_ms, NULL))
		goto bad;
	v.has_runtime = gg_json_get(&l->j, o, GPUGUARD_KEY(device, runtime)) != NULL;
	if (v.has_runtime &&
	    (get_u64(l, o, GPUGUARD_KEY(device, runtime), &v.runtime, NULL) ||
	     get_u64(l, o, GPUGUARD_KEY(device, runtime_driver), &v.runtime_driver, &v.has_runtime_driver)))
		goto bad;
	v.has_driver_limit = gg_json_get(&l->j, o, GPUGUARD_KEY(device, driver_limit)) != NULL;
	if (v.has_driver_limit && (get_u64(l, o, GPUGUARD_KEY(device, driver_limit), &v.driver_limit, NULL) ||
	                           get_u64(l, o, GPUGUARD_KEY(device, driver_limit_used), &v.driver_limit_used, NULL) ||
	                           get_u64(l, o, GPUGUARD_KEY(device, own_limit), &v.own_limit, &v.has_own_limit)))
		goto bad;
	if (scope && strcmp(scope, "pod") && strcmp(scope, "process")) {
		lfail(l, "field \"scope\": expected \"pod\" or \"process\"");
		goto bad;
	}
	v.pod = scope && !strcmp(scope, "pod");
	if (!has_pu)
		v.process_used = v.used;
	free(scope);
	for (size_t i = 0; i < d->ndevices; i++)
		if (d->devices[i].dev == v.dev)
			return lfail(l, "device %u listed twice", v.dev);
	if (!d->devices && !(d->devices = calloc(GPUGUARD_MAX_DEVICES, sizeof *d->devices)))
		return lfail(l, "out of memory");
	d->devices[d->ndevices++] = v;
	return 0;
bad:
	free(scope);
	return -1;
}

static int rec_request(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	if (d->has_request)
		return lfail(l, "a second request record");
	if (get_str(l, o, GPUGUARD_KEY(request, api), &d->req_api, 0) ||
	    get_u64(l, o, GPUGUARD_KEY(request, size), &d->req_size, NULL) ||
	    get_small(l, o, GPUGUARD_KEY(request, dev), &d->req_dev, GPUGUARD_MAX_DEVICES) ||
	    get_u64(l, o, GPUGUARD_KEY(request, tid), &d->req_tid, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(request, stack), &d->req_stack, NULL) ||
	    get_str(l, o, GPUGUARD_KEY(request, outcome), &d->req_outcome, 0))
		return -1;
	if (strcmp(d->req_outcome, "refused_ceiling") && strcmp(d->req_outcome, "driver_oom"))
		return lfail(l, "field \"outcome\": unknown value \"%.64s\"", d->req_outcome);
	d->has_request = 1;
	return 0;
}

static int rec_host(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	if (get_u64(l, o, GPUGUARD_KEY(host, rss), &d->rss, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(host, cgroup_version), &d->cg_version, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(host, cgroup_limit), &d->cg_limit, &d->has_cg_limit) ||
	    get_u64(l, o, GPUGUARD_KEY(host, cgroup_usage), &d->cg_usage, &d->has_cg_usage) ||
	    get_u64(l, o, GPUGUARD_KEY(host, cgroup_oom_kill), &d->cg_oom_kill, &d->has_cg_oom) ||
	    get_u64(l, o, GPUGUARD_KEY(host, pinned_bytes), &d->pinned_bytes, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(host, pinned_allocs), &d->pinned_allocs, NULL))
		return -1;
	if (gg_json_get(&l->j, o, GPUGUARD_KEY(host, cgroup_inactive_file)) &&
	    get_u64(l, o, GPUGUARD_KEY(host, cgroup_inactive_file), &d->cg_inactive_file, &d->has_cg_inactive))
		return -1;
	d->has_host = 1;
	return 0;
}

static int rec_meminfo(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	struct gg_meminfo m;
	uint64_t of;
	if (get_u64(l, o, GPUGUARD_KEY(meminfo, n), &m.n, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(meminfo, of), &of, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(meminfo, ms), &m.ms, NULL) ||
	    get_small(l, o, GPUGUARD_KEY(meminfo, dev), &m.dev, GPUGUARD_MAX_DEVICES) ||
	    get_u64(l, o, GPUGUARD_KEY(meminfo, free), &m.free, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(meminfo, total), &m.total, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(meminfo, used), &m.used, NULL))
		return -1;
	/* "via": absent for the runtime's own query; "nvml" (0.2 on). */
	const struct gg_jval *via = gg_json_get(&l->j, o, GPUGUARD_KEY(meminfo, via));
	if (via && (via->type != GG_J_STR || strcmp(via->s, "nvml")))
		return lfail(l, "field \"via\": expected \"nvml\"");
	m.nvml = via != NULL;
	if (m.n >= of)
		return lfail(l, "meminfo query %llu of %llu", (unsigned long long)m.n, (unsigned long long)of);
	if (d->nmeminfo >= GG_MAX_MEMINFO)
		return lfail(l, "more than %d meminfo records", GG_MAX_MEMINFO);
	if (d->nmeminfo && d->meminfo[d->nmeminfo - 1].n >= m.n)
		return lfail(l, "meminfo records out of order");
	if (of > d->meminfo_count)
		d->meminfo_count = of;
	d->meminfo[d->nmeminfo++] = m;
	return 0;
}

static int rec_peak(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	struct gg_peak p;
	if (get_small(l, o, GPUGUARD_KEY(peak, dev), &p.dev, GPUGUARD_MAX_DEVICES) ||
	    get_u64(l, o, GPUGUARD_KEY(peak, bytes), &p.bytes, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(peak, ms), &p.ms, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(peak, live), &p.live, NULL))
		return -1;
	for (size_t i = 0; i < d->npeaks; i++)
		if (d->peaks[i].dev == p.dev)
			return lfail(l, "peak of device %u listed twice", p.dev);
	d->peaks[d->npeaks++] = p;
	return 0;
}

static int rec_peak_site(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	struct gg_peak_site p;
	if (get_small(l, o, GPUGUARD_KEY(peak_site, dev), &p.dev, GPUGUARD_MAX_DEVICES) ||
	    get_u64(l, o, GPUGUARD_KEY(peak_site, st), &p.st, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(peak_site, bytes), &p.bytes, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(peak_site, at), &p.at, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(peak_site, ms), &p.ms, NULL))
		return -1;
	if (d->npeak_sites >= GG_MAX_PEAK_SITES)
		return lfail(l, "more than %d peak_site records", GG_MAX_PEAK_SITES);
	if (p.bytes > p.at)
		return lfail(l, "peak_site of %llu bytes in a snapshot of %llu", (unsigned long long)p.bytes,
		             (unsigned long long)p.at);
	d->peak_sites[d->npeak_sites++] = p;
	return 0;
}

static int hex_field(struct loader *l, const struct gg_jval *o, const char *name)
{
	const struct gg_jval *v = gg_json_get(&l->j, o, name);
	if (!v || v->type != GG_J_STR || v->len == 0 || v->len > 16)
		return lfail(l, "field \"%s\": expected a hex string", name);
	for (size_t i = 0; i < v->len; i++) {
		char ch = v->s[i];
		if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F')))
			return lfail(l, "field \"%s\": expected a hex string", name);
	}
	return 0;
}

static int rec_vmm(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	struct gg_vmm v;
	if (d->nvmm >= GG_MAX_VMM)
		return lfail(l, "more than %d vmm records", GG_MAX_VMM);
	if (hex_field(l, o, GPUGUARD_KEY(vmm, base)) || get_u64(l, o, GPUGUARD_KEY(vmm, size), &v.size, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(vmm, mapped), &v.mapped, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(vmm, holes), &v.holes, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(vmm, largest_hole), &v.largest_hole, NULL))
		return -1;
	v.base = strtoull(gg_json_get(&l->j, o, GPUGUARD_KEY(vmm, base))->s, NULL, 16); /* checked: 1-16 hex digits */
	if (v.mapped > v.size)
		return lfail(l, "vmm record: mapped %llu is more than the reserved size %llu",
		             (unsigned long long)v.mapped, (unsigned long long)v.size);
	if (!v.holes != !v.largest_hole)
		return lfail(l, "vmm record: holes %llu and largest_hole %llu disagree (both zero or neither)",
		             (unsigned long long)v.holes, (unsigned long long)v.largest_hole);
	/* Not checked against size - mapped: the writer counts holes in whole
	 * 2 MiB granules and mapped in bytes, which differ for smaller maps. */
	if (v.largest_hole && v.largest_hole >= v.size)
		return lfail(l, "vmm record: largest_hole %llu is not less than the reserved size %llu",
		             (unsigned long long)v.largest_hole, (unsigned long long)v.size);
	if (v.holes && !v.mapped)
		return lfail(l, "vmm record: holes %llu between mapped parts, but mapped is 0",
		             (unsigned long long)v.holes);
	if (d->nvmm == d->vmm_cap) {
		size_t ncap = d->vmm_cap ? d->vmm_cap * 2 : 64;
		struct gg_vmm *n = realloc(d->vmm, ncap * sizeof *n);
		if (!n)
			return lfail(l, "out of memory");
		d->vmm = n;
		d->vmm_cap = ncap;
	}
	d->vmm[d->nvmm++] = v;
	return 0;
}

static int rec_pod(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	struct gg_dump_pod u = {0};
	uint32_t self = 0, alive = 0;
	if (d->npod >= GG_MAX_POD)
		return lfail(l, "more than %d pod records", GG_MAX_POD);
	if (get_small(l, o, GPUGUARD_KEY(pod, slot), &u.slot, 1u << 16) ||
	    get_u64(l, o, GPUGUARD_KEY(pod, pid), &u.pid, NULL) || get_small(l, o, GPUGUARD_KEY(pod, self), &self, 2) ||
	    get_small(l, o, GPUGUARD_KEY(pod, alive), &alive, 2) ||
	    get_small(l, o, GPUGUARD_KEY(pod, dev), &u.dev, GPUGUARD_MAX_DEVICES) ||
	    get_u64(l, o, GPUGUARD_KEY(pod, used), &u.used, NULL) ||
	    get_str(l, o, GPUGUARD_KEY(pod, comm), &u.comm, 0)) {
		free(u.comm);
		return -1;
	}
	u.self = (int)self;
	u.alive = (int)alive;
	if (!d->pod && !(d->pod = calloc(GG_MAX_POD, sizeof *d->pod))) {
		free(u.comm);
		return lfail(l, "out of memory");
	}
	d->pod[d->npod++] = u;
	return 0;
}

static int rec_death(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	if (d->ndeaths >= GG_MAX_DEATHS)
		return lfail(l, "more than %d death records", GG_MAX_DEATHS);
	struct gg_death x;
	memset(&x, 0, sizeof x);
	char *comm = NULL;
	uint32_t known = 0;
	int has_glim = 0, has_hlim = 0, has_age = 0;
	uint64_t age = 0;
	if (get_u64(l, o, GPUGUARD_KEY(death, n), &x.n, NULL) ||
	    get_small(l, o, GPUGUARD_KEY(death, pid), &x.pid, UINT32_MAX) ||
	    get_str(l, o, GPUGUARD_KEY(death, comm), &comm, 0) ||
	    get_u64(l, o, GPUGUARD_KEY(death, start_ms), &x.start_ms, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(death, last_ms), &x.last_ms, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(death, found_ms), &x.found_ms, NULL) ||
	    get_small(l, o, GPUGUARD_KEY(death, gpu_entry), &x.gpu_entry, GG_REGION_DEVICES) ||
	    get_u64(l, o, GPUGUARD_KEY(death, gpu_used), &x.gpu_used, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(death, gpu_limit), &x.gpu_limit, &has_glim) ||
	    get_small(l, o, GPUGUARD_KEY(death, refused), &x.refused, UINT32_MAX) ||
	    get_u64(l, o, GPUGUARD_KEY(death, refused_age_ms), &age, &has_age) ||
	    get_small(l, o, GPUGUARD_KEY(death, cgroup_version), &x.cg_version, 3) ||
	    get_u64(l, o, GPUGUARD_KEY(death, working_set), &x.working_set, NULL) ||
	    get_small(l, o, GPUGUARD_KEY(death, working_set_known), &known, 2) ||
	    get_u64(l, o, GPUGUARD_KEY(death, host_limit), &x.host_limit, &has_hlim)) {
		free(comm);
		return -1;
	}
	gg_escape_bytes(x.comm, comm ? comm : "", 15);
	free(comm);
	if (!has_glim)
		x.gpu_limit = UINT64_MAX;
	if (!has_hlim)
		x.host_limit = 0;
	x.refused_age_ms = has_age ? (age < UINT32_MAX ? (uint32_t)age : UINT32_MAX - 1) : UINT32_MAX;
	x.ws_known = (int)known;
	d->deaths[d->ndeaths++] = x;
	return 0;
}

static int rec_alloc(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	struct gg_alloc a;
	if (hex_field(l, o, GPUGUARD_KEY(a, p)) || get_u64(l, o, GPUGUARD_KEY(a, s), &a.size, NULL) ||
	    get_small(l, o, GPUGUARD_KEY(a, d), &a.dev, GPUGUARD_MAX_DEVICES) ||
	    get_small(l, o, GPUGUARD_KEY(a, api), &a.api, 1u << 16) ||
	    get_u64(l, o, GPUGUARD_KEY(a, age), &a.age, NULL) || get_u64(l, o, GPUGUARD_KEY(a, tid), &a.tid, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(a, st), &a.st, NULL))
		return -1;
	a.addr = strtoull(gg_json_get(&l->j, o, GPUGUARD_KEY(a, p))->s, NULL, 16); /* checked: 1-16 hex digits */
	if (d->nallocs == d->allocs_cap) {
		size_t ncap = d->allocs_cap ? d->allocs_cap * 2 : 1024;
		struct gg_alloc *n = realloc(d->allocs, ncap * sizeof *n);
		if (!n)
			return lfail(l, "out of memory");
		d->allocs = n;
		d->allocs_cap = ncap;
	}
	d->allocs[d->nallocs++] = a;
	return 0;
}

static int rec_hist(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	struct gg_hist h;
	char *op = NULL;
	if (get_u64(l, o, GPUGUARD_KEY(h, ms), &h.ms, NULL) || get_str(l, o, GPUGUARD_KEY(h, op), &op, 0))
		return -1;
	if (strcmp(op, "a") && strcmp(op, "f") && strcmp(op, "r")) {
		free(op);
		return lfail(l, "field \"op\": expected \"a\", \"f\" or \"r\"");
	}
	h.op = op[0];
	free(op);
	if (hex_field(l, o, GPUGUARD_KEY(h, p)) || get_u64(l, o, GPUGUARD_KEY(h, s), &h.size, NULL) ||
	    get_small(l, o, GPUGUARD_KEY(h, d), &h.dev, GPUGUARD_MAX_DEVICES) ||
	    get_small(l, o, GPUGUARD_KEY(h, api), &h.api, 1u << 16) || get_u64(l, o, GPUGUARD_KEY(h, st), &h.st, NULL))
		return -1;
	h.addr = strtoull(gg_json_get(&l->j, o, GPUGUARD_KEY(h, p))->s, NULL, 16); /* checked: 1-16 hex digits */
	if (d->nhist == d->hist_cap) {
		size_t ncap = d->hist_cap ? d->hist_cap * 2 : 1024;
		struct gg_hist *n = realloc(d->hist, ncap * sizeof *n);
		if (!n)
			return lfail(l, "out of memory");
		d->hist = n;
		d->hist_cap = ncap;
	}
	d->hist[d->nhist++] = h;
	return 0;
}

static void free_stack(struct gg_stack *s)
{
	for (uint32_t i = 0; i < s->nframes; i++) {
		free(s->frames[i].m);
		free(s->frames[i].o);
		free(s->frames[i].s);
		free(s->frames[i].py);
	}
	free(s->frames);
	free(s);
}

/* C++ symbols as people read them: the C++ runtime's own demangler
 * (__cxa_demangle in libstdc++, the Itanium ABI's), opened with dlopen by
 * the command only, so the command has no C++ link dependency. Absent, the
 * mangled name stays. A hostile name costs at most the demangler's time on
 * a string of at most GG_MAX_LINE bytes. */
typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

static demangle_fn demangler(void)
{
	static int tried;
	static demangle_fn fn;
	if (!tried) {
		tried = 1;
		void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
		if (h)
			*(void **)&fn = dlsym(h, "__cxa_demangle");
	}
	return fn;
}

static void demangle_in_place(char **s)
{
	if (!*s || strncmp(*s, "_Z", 2) != 0 || strlen(*s) > 4096)
		return;
	demangle_fn fn = demangler();
	int status = -1;
	char *out = fn ? fn(*s, NULL, NULL, &status) : NULL;
	if (out && status == 0) {
		free(*s);
		*s = out; /* malloc'd by the demangler: freed with free() like ours */
	} else {
		free(out);
	}
}

int gg_frame_py(const struct gg_frame *fr, char *out, size_t n)
{
	if (!fr->py)
		return 0;
	const char *base = strrchr(fr->py, '/');
	base = base && base[1] ? base + 1 : fr->py;
	if (fr->line)
		snprintf(out, n, "%s:%llu in %s", base, (unsigned long long)fr->line, fr->s ? fr->s : "?");
	else
		snprintf(out, n, "%s in %s", base, fr->s ? fr->s : "?");
	return 1;
}

static int rec_stack(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	uint64_t id;
	if (get_u64(l, o, GPUGUARD_KEY(stack, id), &id, NULL))
		return -1;
	if (id == 0)
		return lfail(l, "stack id 0 is reserved for \"no stack\"");
	if (gg_dump_stack(d, id))
		return lfail(l, "stack %llu listed twice", (unsigned long long)id);
	const struct gg_jval *fr = gg_json_get(&l->j, o, GPUGUARD_KEY(stack, frames));
	if (!fr || fr->type != GG_J_ARR)
		return lfail(l, "field \"frames\": expected an array of frames");
	if (fr->len > GG_MAX_FRAMES)
		return lfail(l, "stack %llu has %zu frames (at most %d)", (unsigned long long)id, fr->len,
		             GG_MAX_FRAMES);
	struct gg_stack *s = calloc(1, sizeof *s);
	if (!s || (fr->len && !(s->frames = calloc(fr->len, sizeof *s->frames)))) {
		free(s);
		return lfail(l, "out of memory");
	}
	s->id = id;
	for (uint32_t i = fr->child; i; i = l->j.v[i].next) {
		const struct gg_jval *f = &l->j.v[i];
		struct gg_frame *g = &s->frames[s->nframes++];
		if (f->type != GG_J_OBJ) {
			uint32_t n = s->nframes;
			free_stack(s);
			return lfail(l, "frame %u: expected an object", n);
		}
		if (get_str(l, f, GPUGUARD_KEY(frame, m), &g->m, 0) ||
		    get_str(l, f, GPUGUARD_KEY(frame, o), &g->o, 0) ||
		    get_str(l, f, GPUGUARD_KEY(frame, s), &g->s, 1) ||
		    get_str(l, f, GPUGUARD_KEY(frame, py), &g->py, 1) ||
		    get_u64_opt(l, f, GPUGUARD_KEY(frame, l), &g->line)) {
			free_stack(s);
			return -1;
		}
		if (!g->py) /* a Python function's name is no C++ symbol */
			demangle_in_place(&g->s);
	}
	HASH_ADD(hh, d->stacks, id, sizeof s->id, s);
	d->nstacks++;
	return 0;
}

static int rec_end(struct loader *l, const struct gg_jval *o)
{
	struct gg_dump *d = l->d;
	if (get_u64(l, o, GPUGUARD_KEY(end, records), &d->end_records, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(end, suppressed), &d->suppressed, NULL) ||
	    get_u64(l, o, GPUGUARD_KEY(end, write_errors), &d->write_errors, NULL) ||
	    get_u64_opt(l, o, GPUGUARD_KEY(end, signal_refused), &d->signal_refused) ||
	    get_u64_opt(l, o, GPUGUARD_KEY(end, history_dropped), &d->history_dropped) ||
	    get_u64_opt(l, o, GPUGUARD_KEY(end, log_dropped), &d->log_dropped) ||
	    get_u64_opt(l, o, GPUGUARD_KEY(end, cut_exact), &d->cut_exact) ||
	    get_u64_opt(l, o, GPUGUARD_KEY(end, cut_skew), &d->cut_skew))
		return -1;
	d->has_cut = gg_json_get(&l->j, o, GPUGUARD_KEY(end, cut_exact)) != NULL;
	d->has_end = 1;
	return 0;
}

/* One line (without its newline). last_partial: the file ended without a
 * newline after it. Returns 0, 1 (a partial last line, ignored) or -1. */
static int feed_line(struct loader *l, const char *line, size_t len, int last_partial)
{
	char jerr[300];
	l->lineno++;
	if (len > GG_MAX_LINE) /* no writer makes one, cut short or not */
		return lfail(l, "record longer than %u bytes", GG_MAX_LINE);
	uint32_t root = gg_json_parse(&l->j, line, len, jerr, sizeof jerr);
	if (!root) {
		if (last_partial && l->seen_header)
			return 1;
		if (l->lineno == 1)
			return lfail(l, "not a gpuguard dump: %s", jerr);
		return lfail(l, "%s", jerr);
	}
	const struct gg_jval *o = gg_json_at(&l->j, root);
	const struct gg_jval *t = gg_json_get(&l->j, o, "t");
	if (!t || t->type != GG_J_STR)
		return lfail(l, "%srecord has no \"t\" string", l->lineno == 1 ? "not a gpuguard dump: " : "");
	if (!l->seen_header) {
		if (gpuguard_dump_record_of(t->s) != GPUGUARD_DR_header)
			return lfail(l, "not a gpuguard dump: the first record is \"%.32s\", not a header", t->s);
		l->seen_header = 1;
		l->d->lines++;
		return rec_header(l, o);
	}
	if (l->seen_end)
		return lfail(l, "record after the end trailer");
	int rc;
	switch (gpuguard_dump_record_of(t->s)) {
	case GPUGUARD_DR_a:
		rc = rec_alloc(l, o);
		break;
	case GPUGUARD_DR_h:
		rc = rec_hist(l, o);
		break;
	case GPUGUARD_DR_stack:
		rc = rec_stack(l, o);
		break;
	case GPUGUARD_DR_device:
		rc = rec_device(l, o);
		break;
	case GPUGUARD_DR_config:
		rc = rec_config(l, o);
		break;
	case GPUGUARD_DR_request:
		rc = rec_request(l, o);
		break;
	case GPUGUARD_DR_host:
		rc = rec_host(l, o);
		break;
	case GPUGUARD_DR_vmm:
		rc = rec_vmm(l, o);
		break;
	case GPUGUARD_DR_pod:
		rc = rec_pod(l, o);
		break;
	case GPUGUARD_DR_death:
		rc = rec_death(l, o);
		break;
	case GPUGUARD_DR_meminfo:
		rc = rec_meminfo(l, o);
		break;
	case GPUGUARD_DR_peak_site:
		rc = rec_peak_site(l, o);
		break;
	case GPUGUARD_DR_peak:
		rc = rec_peak(l, o);
		break;
	case GPUGUARD_DR_end:
		rc = rec_end(l, o);
		l->seen_end = 1;
		break;
	case GPUGUARD_DR_header:
		rc = lfail(l, "a second header");
		break;
	default: /* a newer writer's record */
		l->d->skipped_unknown++;
		rc = 0;
		break;
	}
	if (rc == 0)
		l->d->lines++;
	return rc;
}

static void warnf(struct loader *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnf(struct loader *l, const char *fmt, ...)
{
	if (!l->warn)
		return;
	char msg[GG_MAX_ERR];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* The path is the user's; the message may quote the dump: both pass
	 * the terminal filter. */
	fputs("gpuguard: warning: ", l->warn);
	gg_put_text(l->warn, l->d->path);
	fputs(": ", l->warn);
	gg_put_text(l->warn, msg);
	fputc('\n', l->warn);
}

static int finish(struct loader *l, int partial)
{
	struct gg_dump *d = l->d;
	if (!l->seen_header) {
		snprintf(l->err, l->errlen, "%s: empty file, not a gpuguard dump", d->path);
		return -1;
	}
	if (partial) {
		d->truncated = 1;
		warnf(l, "line %llu is cut short; read the %llu whole records before it", (unsigned long long)l->lineno,
		      (unsigned long long)d->lines);
	}
	if (!d->has_end) {
		d->truncated = 1;
		warnf(l,
		      "no end trailer: the dump was cut off (its process died while writing it, or is writing it "
		      "still); reporting the %llu records read",
		      (unsigned long long)d->lines);
	} else if (d->end_records != d->lines - 1) {
		warnf(l, "the trailer counts %llu records but %llu were read", (unsigned long long)d->end_records,
		      (unsigned long long)(d->lines - 1));
	}
	if (d->skipped_unknown)
		warnf(l, "skipped %llu records of unknown type", (unsigned long long)d->skipped_unknown);
	return 0;
}

static void loader_init(struct loader *l, struct gg_dump *d, const char *name, FILE *warn, char *err, size_t errlen)
{
	memset(d, 0, sizeof *d);
	memset(l, 0, sizeof *l);
	d->path = name;
	l->d = d;
	l->warn = warn;
	l->err = err;
	l->errlen = errlen;
	gg_json_init(&l->j);
}

int gg_dump_load_mem(struct gg_dump *d, const char *name, const char *buf, size_t len, FILE *warn, char *err,
                     size_t errlen)
{
	struct loader l;
	loader_init(&l, d, name, warn, err, errlen);
	const char *p = buf, *end = buf + len;
	int rc = 0, partial = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		rc = feed_line(&l, p, n, !nl);
		if (rc < 0)
			break;
		if (rc == 1)
			partial = 1;
		p = nl ? nl + 1 : end;
	}
	gg_json_free(&l.j);
	if (rc < 0)
		return -1;
	return finish(&l, partial);
}

int gg_dump_load(struct gg_dump *d, const char *path, FILE *warn, char *err, size_t errlen)
{
	struct loader l;
	loader_init(&l, d, path, warn, err, errlen);
	/* Never a FIFO, a device or a directory: `report` must not hang on
	 * one (issue 25, finding 8); a symlink to a dump is followed. */
	int fd = gg_infile_open(path, path, 0, err, errlen);
	if (fd < 0)
		return -1;
	/* A sliding window: memory stays at one chunk plus the longest line. */
	size_t cap = 4u << 20, have = 0;
	char *buf = malloc(cap);
	int rc = 0, partial = 0;
	if (!buf) {
		close(fd);
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	for (;;) {
		ssize_t got = read(fd, buf + have, cap - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			rc = -1;
			break;
		}
		have += (size_t)got;
		char *p = buf, *end = buf + have;
		char *nl;
		while (rc >= 0 && (nl = memchr(p, '\n', (size_t)(end - p)))) {
			rc = feed_line(&l, p, (size_t)(nl - p), 0);
			p = nl + 1;
		}
		if (rc < 0)
			break;
		have = (size_t)(end - p);
		memmove(buf, p, have);
		if (got == 0) {
			if (have) {
				rc = feed_line(&l, buf, have, 1);
				if (rc == 1)
					partial = 1;
			}
			break;
		}
		if (have > GG_MAX_LINE) {
			l.lineno++;
			rc = lfail(&l, "record longer than %u bytes", GG_MAX_LINE);
			break;
		}
	}
	free(buf);
	close(fd);
	gg_json_free(&l.j);
	if (rc < 0)
		return -1;
	return finish(&l, partial);
}

void gg_dump_free(struct gg_dump *d)
{
	struct gg_stack *s, *tmp;
	HASH_ITER(hh, d->stacks, s, tmp)
	{
		HASH_DEL(d->stacks, s);
		free_stack(s);
	}
	for (size_t i = 0; i < d->nconfig; i++) {
		free(d->config[i].name);
		free(d->config[i].value);
		free(d->config[i].source);
	}
	free(d->config);
	free(d->devices);
	free(d->vmm);
	for (size_t i = 0; i < d->npod; i++)
		free(d->pod[i].comm);
	free(d->pod);
	free(d->allocs);
	free(d->hist);
	free(d->lib);
	free(d->time);
	free(d->host);
	free(d->cmdline);
	free(d->trigger);
	free(d->unwinder);
	free(d->req_api);
	free(d->req_outcome);
	memset(d, 0, sizeof *d);
}
