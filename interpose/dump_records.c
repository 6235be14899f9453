/* gpuguard: the dump's records (include/gpuguard/dump.h), each written
 * from the library's books by the writer thread: header, config, devices,
 * the pod, the failing request, host, memory-info queries, peaks, VMM
 * reservations, live allocations, stacks, history, and the trailer. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "dump_records.h"
#include "base.h"
#include "ceiling.h"
#include "dump_host.h"
#include "dump_json.h"
#include "footprint.h"
#include "gpuguard/dump.h"
#include "gpuguard/region.h"
#include "gpuguard/schema.h"
#include "history.h"
#include "log.h"
#include "meminfo.h"
#include "options.h"
#include "pystack.h"
#include "shared.h"
#include "signal.h"
#include "stack.h"
#include "table.h"
#include "vmm.h"

static const char *const trigger_names[] = {GPUGUARD_DUMP_TRIGGERS};
static const char *const api_names[] = {GPUGUARD_API_NAMES};

const char *gg_dump_trigger_name(enum gg_dump_trigger trig)
{
	return trigger_names[trig];
}

/* since_start is the clock reading every age in the dump is taken from, so
 * that start_unix_ms + (since_start - age) is when a record was made: an
 * age read later (after the host files, slow under load) would place an
 * allocation before the query that sized it. */
void gg_dump_rec_header(struct gg_out *o, enum gg_dump_trigger trig, uint64_t unix_ms, uint64_t since_start,
                        const char *host)
{
	time_t secs = (time_t)(unix_ms / 1000);
	struct tm tm;
	char iso[32];
	gmtime_r(&secs, &tm);
	strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
	GG_OUT_REC(o, header);
	GG_OUT_U64(o, header, format, GPUGUARD_DUMP_FORMAT);
	GG_OUT_KEY(o, header, lib);
	gg_out_json(o, GPUGUARD_VERSION);
	GG_OUT_KEY(o, header, time);
	gg_out_json(o, iso);
	GG_OUT_U64(o, header, unix_ms, unix_ms);
	GG_OUT_U64(o, header, start_unix_ms, unix_ms > since_start ? unix_ms - since_start : 0);
	GG_OUT_KEY(o, header, host);
	gg_out_json(o, host);
	GG_OUT_U64(o, header, pid, (uint64_t)getpid());
	GG_OUT_KEY(o, header, cmdline);
	GG_OUT_LIT(o, "[");
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		static char cmd[65536];
		ssize_t n = read(fd, cmd, sizeof cmd);
		close(fd);
		size_t start = 0;
		int first = 1;
		for (ssize_t i = 0; i < n; i++) {
			if (cmd[i] != 0 && i + 1 < n)
				continue;
			size_t end = cmd[i] == 0 ? (size_t)i : (size_t)i + 1;
			if (!first)
				GG_OUT_LIT(o, ",");
			first = 0;
			gg_out_json_n(o, cmd + start, end - start);
			start = (size_t)i + 1;
		}
	}
	GG_OUT_LIT(o, "]");
	GG_OUT_KEY(o, header, trigger);
	gg_out_json(o, gg_dump_trigger_name(trig));
	GG_OUT_KEY(o, header, unwinder);
	gg_out_json(o, gg_stack_unwinder());
	GG_OUT_U64(o, header, stack_depth, (uint64_t)gg_stack_depth());
	GG_OUT_U64(o, header, history_capacity, gg_history_capacity());
	gg_out_end_record(o);
}

void gg_dump_rec_config(struct gg_out *o)
{
	for (size_t i = 0; i < gg_option_nrows; i++) {
		const char *src;
		const char *v = gg_options_value(i, &src);
		GG_OUT_REC(o, config);
		GG_OUT_KEY(o, config, name);
		gg_out_json(o, gg_option_rows[i].name);
		GG_OUT_KEY(o, config, value);
		gg_out_json(o, v);
		GG_OUT_KEY(o, config, source);
		gg_out_json(o, src);
		gg_out_end_record(o);
	}
}

void gg_dump_rec_devices(struct gg_out *o, const struct gg_dump_req *req, const struct gg_dump_cut *c)
{
	for (int d = 0; d < GG_MAX_DEVICES; d++) {
		struct gpuguard_device_stats s = c->dev[d];
		if (!s.allocs && !s.frees && !s.used && !s.peak && !s.untracked_frees && !s.pool_reserved &&
		    !s.refused[0] && !s.refused[1] && !s.refused[2])
			continue;
		GG_OUT_REC(o, device);
		GG_OUT_U64(o, device, dev, (uint64_t)d);
		GG_OUT_KEY(o, device, limit);
		gg_out_u64_or_null(o, s.limit != GG_UNLIMITED, s.limit);
		GG_OUT_U64(o, device, used, s.used);
		GG_OUT_U64(o, device, peak, s.peak);
		GG_OUT_U64(o, device, pool_reserved, s.pool_reserved);
		GG_OUT_U64(o, device, live_bytes, s.live_bytes);
		GG_OUT_U64(o, device, allocs, s.allocs);
		GG_OUT_U64(o, device, frees, s.frees);
		GG_OUT_U64(o, device, untracked_frees, s.untracked_frees);
		GG_OUT_U64(o, device, refused_ceiling, s.refused[GPUGUARD_REFUSED_CEILING]);
		GG_OUT_U64(o, device, refused_config, s.refused[GPUGUARD_REFUSED_CONFIG]);
		GG_OUT_U64(o, device, refused_driver, s.refused[GPUGUARD_REFUSED_DRIVER]);
		GG_OUT_U64(o, device, pool_overshoot, s.pool_overshoot);
		/* Known for the failing request's device only: the writer
		 * thread has no context to ask the driver with. */
		int mi = req && req->valid && req->have_meminfo && req->dev == d;
		GG_OUT_KEY(o, device, driver_free);
		gg_out_u64_or_null(o, mi, mi ? req->driver_free : 0);
		GG_OUT_KEY(o, device, driver_total);
		gg_out_u64_or_null(o, mi, mi ? req->driver_total : 0);
		GG_OUT_KEY(o, device, scope);
		if (s.pod)
			GG_OUT_LIT(o, "\"pod\"");
		else
			GG_OUT_LIT(o, "\"process\"");
		GG_OUT_U64(o, device, process_used, s.process_used);
		GG_OUT_U64(o, device, wait_ms, gg_ceiling_wait_ns(d) / 1000000u);
		struct gg_footprint_stats fs;
		gg_footprint_read(d, &fs);
		GG_OUT_U64(o, device, runtime, fs.charged);
		GG_OUT_KEY(o, device, runtime_driver);
		gg_out_u64_or_null(o, fs.driver != 0, fs.driver);
		struct gg_footprint_dmem dl;
		if (gg_footprint_driver_limit(d, &dl)) {
			GG_OUT_U64(o, device, driver_limit, dl.hard);
			GG_OUT_U64(o, device, driver_limit_used, dl.used);
			GG_OUT_KEY(o, device, own_limit);
			gg_out_u64_or_null(o, dl.own < GG_LIMIT_UNRESOLVED, dl.own);
		}
		gg_out_end_record(o);
	}
}

const char *gg_dump_api_name(unsigned api)
{
	return api < sizeof(api_names) / sizeof(api_names[0]) ? api_names[api] : "none";
}

void gg_dump_rec_vmm_one(const struct gg_vmm_info *v, void *arg)
{
	struct gg_out *o = arg;
	GG_OUT_REC(o, vmm);
	GG_OUT_KEY(o, vmm, base);
	gg_out_hex_str(o, v->base);
	GG_OUT_U64(o, vmm, size, v->size);
	GG_OUT_U64(o, vmm, mapped, v->mapped);
	GG_OUT_U64(o, vmm, holes, v->holes);
	GG_OUT_U64(o, vmm, largest_hole, v->largest_hole);
	gg_out_end_record(o);
}

void gg_dump_rec_pod_one(const struct gg_pod_use *u, void *arg)
{
	struct gg_out *o = arg;
	GG_OUT_REC(o, pod);
	GG_OUT_U64(o, pod, slot, u->slot);
	GG_OUT_U64(o, pod, pid, u->pid);
	GG_OUT_KEY(o, pod, comm);
	gg_out_json(o, u->comm);
	GG_OUT_U64(o, pod, self, (uint64_t)u->self);
	GG_OUT_U64(o, pod, alive, (uint64_t)u->alive);
	GG_OUT_U64(o, pod, dev, (uint64_t)u->dev);
	GG_OUT_U64(o, pod, used, u->used);
	gg_out_end_record(o);
}

/* The pod's recent deaths (region.h): what each process that died without
 * exiting last showed; the report gives the verdict. */
void gg_dump_rec_deaths(struct gg_out *o)
{
	struct gpuguard_region_death d[GPUGUARD_REGION_DEATHS];
	size_t n = gg_shared_deaths(d, GPUGUARD_REGION_DEATHS);
	for (size_t i = 0; i < n; i++) {
		GG_OUT_REC(o, death);
		GG_OUT_U64(o, death, n, d[i].seq);
		GG_OUT_U64(o, death, pid, d[i].pid);
		GG_OUT_KEY(o, death, comm);
		gg_out_json(o, d[i].comm);
		GG_OUT_U64(o, death, start_ms, d[i].start_ms);
		GG_OUT_U64(o, death, last_ms, d[i].last_ms);
		GG_OUT_U64(o, death, found_ms, d[i].found_ms);
		GG_OUT_U64(o, death, gpu_entry, d[i].gpu_entry);
		GG_OUT_U64(o, death, gpu_used, d[i].gpu_used);
		GG_OUT_KEY(o, death, gpu_limit);
		gg_out_u64_or_null(o, d[i].gpu_limit < GG_LIMIT_UNRESOLVED, d[i].gpu_limit);
		GG_OUT_U64(o, death, refused, d[i].refused);
		GG_OUT_KEY(o, death, refused_age_ms);
		gg_out_u64_or_null(o, d[i].refused_age_ms != UINT32_MAX, d[i].refused_age_ms);
		GG_OUT_U64(o, death, cgroup_version,
		           d[i].host_flags & GPUGUARD_OBIT_CGROUP_V2   ? 2
		           : d[i].host_flags & GPUGUARD_OBIT_CGROUP_V1 ? 1
		                                                       : 0);
		GG_OUT_U64(o, death, working_set, d[i].host_ws);
		GG_OUT_U64(o, death, working_set_known, (d[i].host_flags & GPUGUARD_OBIT_WS_KNOWN) != 0);
		GG_OUT_KEY(o, death, host_limit);
		gg_out_u64_or_null(o, d[i].host_limit != 0, d[i].host_limit);
		gg_out_end_record(o);
	}
}

void gg_dump_rec_request(struct gg_out *o, const struct gg_dump_req *r)
{
	GG_OUT_REC(o, request);
	GG_OUT_KEY(o, request, api);
	gg_out_json(o, gg_dump_api_name(r->api));
	GG_OUT_U64(o, request, size, r->size);
	GG_OUT_KEY(o, request, dev);
	gg_out_i64(o, r->dev);
	GG_OUT_U64(o, request, tid, r->tid);
	GG_OUT_U64(o, request, stack, r->stack);
	GG_OUT_KEY(o, request, outcome);
	gg_out_json(o, r->driver_oom ? "driver_oom" : "refused_ceiling");
	gg_out_end_record(o);
}

void gg_dump_rec_host(struct gg_out *o, _Atomic int64_t *pinned_bytes, _Atomic int64_t *pinned_count)
{
	struct gg_host_sample h;
	gg_dump_host_sample(&h);
	int64_t pb = atomic_load_explicit(pinned_bytes, memory_order_relaxed);
	int64_t pc = atomic_load_explicit(pinned_count, memory_order_relaxed);
	GG_OUT_REC(o, host);
	GG_OUT_U64(o, host, rss, h.rss);
	GG_OUT_U64(o, host, cgroup_version, (uint64_t)h.version);
	GG_OUT_KEY(o, host, cgroup_limit);
	gg_out_u64_or_null(o, h.have_lim, h.lim);
	GG_OUT_KEY(o, host, cgroup_usage);
	gg_out_u64_or_null(o, h.have_use, h.use);
	GG_OUT_KEY(o, host, cgroup_oom_kill);
	gg_out_u64_or_null(o, h.have_oom, h.oom);
	GG_OUT_KEY(o, host, cgroup_inactive_file);
	gg_out_u64_or_null(o, h.have_use && h.have_inactive, h.inactive_file);
	GG_OUT_U64(o, host, pinned_bytes, pb > 0 ? (uint64_t)pb : 0);
	GG_OUT_U64(o, host, pinned_allocs, pc > 0 ? (uint64_t)pc : 0);
	gg_out_end_record(o);
}

void gg_dump_rec_meminfo(struct gg_out *o)
{
	struct gg_meminfo_q q[GG_MI_FIRST + GG_MI_LAST];
	uint64_t count;
	size_t n = gg_dump_meminfo_snapshot(q, GG_MI_FIRST + GG_MI_LAST, &count);
	for (size_t i = 0; i < n; i++) {
		GG_OUT_REC(o, meminfo);
		GG_OUT_U64(o, meminfo, n, q[i].n);
		GG_OUT_U64(o, meminfo, of, count);
		GG_OUT_U64(o, meminfo, ms, q[i].ms);
		GG_OUT_U64(o, meminfo, dev, (uint64_t)(q[i].dev < 0 ? 0 : q[i].dev));
		GG_OUT_U64(o, meminfo, free, q[i].free);
		GG_OUT_U64(o, meminfo, total, q[i].total);
		GG_OUT_U64(o, meminfo, used, q[i].used);
		if (q[i].nvml) {
			GG_OUT_KEY(o, meminfo, via);
			GG_OUT_LIT(o, "\"nvml\"");
		}
		gg_out_end_record(o);
	}
}

/* Stack ids referenced by this dump, one bit each. */
static uint64_t *stack_bits;
static size_t stack_bits_words;

void gg_dump_stacks_reset(void)
{
	static void *bits;
	size_t words = (size_t)(1u << 15) / 64 + 1;
	stack_bits = gg_dump_map_once(&bits, words * 8);
	/* No set, no stacks: the stack records are left out. */
	stack_bits_words = stack_bits ? words : 0;
	if (stack_bits)
		memset(stack_bits, 0, stack_bits_words * 8);
}

void gg_dump_mark_stack(uint32_t id)
{
	if (id && stack_bits && id / 64 < stack_bits_words)
		stack_bits[id / 64] |= 1ull << (id % 64);
}

void gg_dump_rec_peaks(struct gg_out *o, const struct gg_dump_cut *c)
{
	for (int d = 0; d < GG_MAX_DEVICES; d++) {
		uint64_t bytes = c->peak[d], ms = c->peak_ms[d];
		if (!bytes)
			continue;
		GG_OUT_REC(o, peak);
		GG_OUT_U64(o, peak, dev, (uint64_t)d);
		GG_OUT_U64(o, peak, bytes, bytes);
		GG_OUT_U64(o, peak, ms, ms);
		GG_OUT_U64(o, peak, live, c->live[d]);
		gg_out_end_record(o);
		struct gg_peak_sites ps;
		if (gg_history_peak_sites(d, &ps) != 0)
			continue;
		for (unsigned k = 0; k < ps.n; k++) {
			GG_OUT_REC(o, peak_site);
			GG_OUT_U64(o, peak_site, dev, (uint64_t)d);
			GG_OUT_U64(o, peak_site, st, ps.st[k]);
			GG_OUT_U64(o, peak_site, bytes, ps.b[k]);
			GG_OUT_U64(o, peak_site, at, ps.bytes);
			GG_OUT_U64(o, peak_site, ms, ps.ms);
			gg_out_end_record(o);
			gg_dump_mark_stack(ps.st[k]);
		}
	}
}

struct alloc_ctx {
	struct gg_out *o;
	uint64_t now;
};

static uint64_t ns_bits(unsigned api)
{
	enum gg_key_ns ns = GG_NS_PTR;
	switch (gpuguard_api_kind(api)) {
	case GPUGUARD_KIND_VMM:
		ns = GG_NS_VMM;
		break;
	case GPUGUARD_KIND_ARRAY:
		ns = GG_NS_ARRAY;
		break;
	case GPUGUARD_KIND_MIPMAP:
		ns = GG_NS_MIPMAP;
		break;
	case GPUGUARD_KIND_PTR:
	case GPUGUARD_KIND_POOL:
		break;
	}
	return (uint64_t)ns << 62;
}

static uint64_t raw_of(const struct gg_record *r)
{
	return r->key ^ ns_bits(r->api);
}

uint64_t gg_dump_event_key(uint64_t p, unsigned api)
{
	return p ^ ns_bits(api);
}

static void rec_alloc(const struct gg_record *r, void *arg)
{
	struct alloc_ctx *c = arg;
	struct gg_out *o = c->o;
	if (r->flags & GG_REC_HOST)
		return; /* pinned host memory: summed in the host record */
	gg_dump_mark_stack(r->stack);
	gg_out_need(o, 160);
	GG_OUT_REC(o, a);
	GG_OUT_KEY(o, a, p);
	gg_out_hex_str(o, raw_of(r));
	GG_OUT_U64(o, a, s, r->size);
	GG_OUT_U64(o, a, d, r->dev);
	GG_OUT_U64(o, a, api, r->api);
	GG_OUT_U64(o, a, age, c->now > gg_record_t_ms(r) ? c->now - gg_record_t_ms(r) : 0);
	GG_OUT_U64(o, a, tid, gg_record_tid(r));
	GG_OUT_U64(o, a, st, r->stack);
	gg_out_end_record(o);
}

void gg_dump_rec_allocs(struct gg_out *o, uint64_t now, const struct gg_dump_cut *cut)
{
	struct alloc_ctx c = {o, now};
	if (cut->stream && gg_table)
		gg_table_foreach(gg_table, rec_alloc, &c);
	for (size_t i = 0; !cut->stream && i < cut->nrecs; i++)
		rec_alloc(&cut->recs[i], &c);
}

void gg_dump_rec_stacks(struct gg_out *o)
{
	for (size_t w = 0; w < stack_bits_words; w++) {
		for (uint64_t bits = stack_bits[w]; bits; bits &= bits - 1) {
			uint32_t id = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
			const uintptr_t *fr;
			int n = gg_stack_frames(id, &fr);
			if (n <= 0)
				continue;
			GG_OUT_REC(o, stack);
			GG_OUT_U64(o, stack, id, id);
			GG_OUT_KEY(o, stack, frames);
			GG_OUT_LIT(o, "[");
			for (int i = 0; i < n; i++) {
				Dl_info info;
				/* A return address points after the call: look up
				 * the byte before it, so the frame names the caller. */
				uintptr_t pc = fr[i] - 1;
				const char *pyfile, *pyfunc;
				uint32_t pyline;
				if (i)
					GG_OUT_LIT(o, ",");
				if (gg_pystack_frame(fr[i], &pyfile, &pyfunc, &pyline)) {
					/* A Python frame (issue 27): m, o and s as an
					 * older reader can show them (file, line in
					 * hex, function), py and l for the newer. */
					const char *base = strrchr(pyfile, '/');
					base = base && base[1] ? base + 1 : pyfile;
					GG_OUT_LIT(o, "{");
					GG_OUT_KEY_FIRST(o, frame, m);
					gg_out_json(o, *base ? base : "?");
					GG_OUT_KEY(o, frame, o);
					gg_out_hex_str(o, pyline);
					GG_OUT_KEY(o, frame, s);
					gg_out_json(o, *pyfunc ? pyfunc : "?");
					GG_OUT_KEY(o, frame, py);
					gg_out_json(o, *pyfile ? pyfile : "?");
					GG_OUT_U64(o, frame, l, pyline);
					GG_OUT_LIT(o, "}");
				} else if (dladdr((void *)pc, &info) && info.dli_fname) {
					const char *base = strrchr(info.dli_fname, '/');
					base = base ? base + 1 : info.dli_fname;
					GG_OUT_LIT(o, "{");
					GG_OUT_KEY_FIRST(o, frame, m);
					gg_out_json(o, *base ? base : "?");
					GG_OUT_KEY(o, frame, o);
					gg_out_hex_str(o, fr[i] - (uintptr_t)info.dli_fbase);
					if (info.dli_sname) {
						GG_OUT_KEY(o, frame, s);
						gg_out_json(o, info.dli_sname);
					}
					GG_OUT_LIT(o, "}");
				} else {
					GG_OUT_LIT(o, "{");
					GG_OUT_KEY_FIRST(o, frame, m);
					GG_OUT_LIT(o, "\"?\"");
					GG_OUT_KEY(o, frame, o);
					gg_out_hex_str(o, fr[i]);
					GG_OUT_LIT(o, "}");
				}
			}
			GG_OUT_LIT(o, "]");
			gg_out_end_record(o);
		}
	}
}

void gg_dump_rec_history(struct gg_out *o, const struct gg_hist_event *ev, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		const struct gg_hist_event *e = &ev[i];
		gg_out_need(o, 160);
		GG_OUT_REC(o, h);
		GG_OUT_U64(o, h, ms, e->ms);
		GG_OUT_KEY(o, h, op);
		char op[3] = {'"', (char)e->op, '"'};
		gg_out_mem(o, op, 3);
		GG_OUT_KEY(o, h, p);
		gg_out_hex_str(o, e->p);
		GG_OUT_U64(o, h, s, e->s);
		GG_OUT_U64(o, h, d, e->dev);
		GG_OUT_U64(o, h, api, e->api);
		GG_OUT_U64(o, h, st, e->stack);
		gg_out_end_record(o);
	}
}

void gg_dump_rec_end(struct gg_out *o, uint64_t suppressed, uint64_t write_errors, const struct gg_dump_cut *c)
{
	uint64_t before_end = o->records;
	GG_OUT_REC(o, end);
	GG_OUT_U64(o, end, records, before_end);
	GG_OUT_U64(o, end, suppressed, suppressed);
	GG_OUT_U64(o, end, write_errors, write_errors);
	/* What the dump and the log could not hold: allocations refused in a
	 * handler that interrupted a hook (signal.c), history events
	 * overwritten before they were read, log lines over the rate limit.
	 * relaxed: statistics. */
	GG_OUT_U64(o, end, signal_refused, atomic_load_explicit(&gg_sig_refusals, memory_order_relaxed));
	GG_OUT_U64(o, end, history_dropped, gg_history_dropped());
	GG_OUT_U64(o, end, log_dropped, gg_log_dropped());
	if (c) {
		/* The cut (issue 25, finding 7): 1 when the live table was put
		 * back to the dump's moment event by event, and how many events
		 * the copy overlapped. */
		GG_OUT_U64(o, end, cut_exact, (uint64_t)(c->exact != 0));
		GG_OUT_U64(o, end, cut_skew, c->skew);
	}
	gg_out_end_record(o);
}
