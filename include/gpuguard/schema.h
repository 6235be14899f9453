/* gpuguard: the dump's record types and keys (dump.h describes them), as
 * one list that the library's writer (interpose/dump_records.c), the
 * command's loader (tools/load.c) and the benchmark's generator
 * (tests/bench/gen_dump.c) all read, so that no key is typed twice. A key
 * names its record and itself: GPUGUARD_DK_device_limit exists only if
 * "limit" is a key of "device", so a misspelt key does not compile.
 * tests/unit/test_dump.c checks the writer's records against the list.
 * Header-only, like region.h. */
#ifndef GPUGUARD_SCHEMA_H
#define GPUGUARD_SCHEMA_H

#include <string.h>

/* clang-format off */
/* The record types, in the order they appear in a dump (peak and
 * peak_site alternate, one peak then its sites, per device). */
#define GPUGUARD_DUMP_RECORDS(R)                                                                                   \
	R(header) R(config) R(device) R(pod) R(death) R(request) R(host) R(meminfo) R(peak) R(peak_site) R(vmm) R(a) \
	    R(stack) R(h) R(end)

/* Each key: its record, its name, and 1 when every record of that type
 * has it, 0 when some lack it (written only in some cases, or added after
 * format 1 was first written: readers take it as absent). In the order
 * the writer writes them. "frame" is not a record but an element of a
 * stack's "frames" array. */
#define GPUGUARD_DUMP_KEYS(K)                                                                                         \
	K(header, format, 1) K(header, lib, 1) K(header, time, 1) K(header, unix_ms, 1) K(header, start_unix_ms, 1)   \
	K(header, host, 1) K(header, pid, 1) K(header, cmdline, 1) K(header, trigger, 1) K(header, unwinder, 1)       \
	K(header, stack_depth, 1) K(header, history_capacity, 1)                                                      \
	K(config, name, 1) K(config, value, 1) K(config, source, 1)                                                   \
	K(device, dev, 1) K(device, limit, 1) K(device, used, 1) K(device, peak, 1) K(device, pool_reserved, 1)       \
	K(device, live_bytes, 1) K(device, allocs, 1) K(device, frees, 1) K(device, untracked_frees, 1)               \
	K(device, refused_ceiling, 1) K(device, refused_config, 1) K(device, refused_driver, 1)                       \
	K(device, pool_overshoot, 1) K(device, driver_free, 1) K(device, driver_total, 1) K(device, scope, 0)         \
	K(device, process_used, 0) K(device, wait_ms, 0) K(device, runtime, 0) K(device, runtime_driver, 0)            \
	K(device, driver_limit, 0) K(device, driver_limit_used, 0) K(device, own_limit, 0)                            \
	K(pod, slot, 1) K(pod, pid, 1) K(pod, comm, 1) K(pod, self, 1) K(pod, alive, 1) K(pod, dev, 1)                \
	K(pod, used, 1)                                                                                               \
	K(death, n, 1) K(death, pid, 1) K(death, comm, 1) K(death, start_ms, 1) K(death, last_ms, 1)                  \
	K(death, found_ms, 1) K(death, gpu_entry, 1) K(death, gpu_used, 1) K(death, gpu_limit, 1)                    \
	K(death, refused, 1) K(death, refused_age_ms, 1) K(death, cgroup_version, 1) K(death, working_set, 1)         \
	K(death, working_set_known, 1) K(death, host_limit, 1)                                                        \
	K(request, api, 1) K(request, size, 1) K(request, dev, 1) K(request, tid, 1) K(request, stack, 1)             \
	K(request, outcome, 1)                                                                                        \
	K(host, rss, 1) K(host, cgroup_version, 1) K(host, cgroup_limit, 1) K(host, cgroup_usage, 1)                  \
	K(host, cgroup_oom_kill, 1) K(host, cgroup_inactive_file, 0) K(host, pinned_bytes, 1)                         \
	K(host, pinned_allocs, 1)                                                                                     \
	K(meminfo, n, 1) K(meminfo, of, 1) K(meminfo, ms, 1) K(meminfo, dev, 1) K(meminfo, free, 1)                   \
	K(meminfo, total, 1) K(meminfo, used, 1) K(meminfo, via, 0)                                                   \
	K(peak, dev, 1) K(peak, bytes, 1) K(peak, ms, 1) K(peak, live, 1)                                             \
	K(peak_site, dev, 1) K(peak_site, st, 1) K(peak_site, bytes, 1) K(peak_site, at, 1) K(peak_site, ms, 1)       \
	K(vmm, base, 1) K(vmm, size, 1) K(vmm, mapped, 1) K(vmm, holes, 1) K(vmm, largest_hole, 1)                    \
	K(a, p, 1) K(a, s, 1) K(a, d, 1) K(a, api, 1) K(a, age, 1) K(a, tid, 1) K(a, st, 1)                           \
	K(stack, id, 1) K(stack, frames, 1)                                                                           \
	K(frame, m, 1) K(frame, o, 1) K(frame, s, 0) K(frame, py, 0) K(frame, l, 0)                                  \
	K(h, ms, 1) K(h, op, 1) K(h, p, 1) K(h, s, 1) K(h, d, 1) K(h, api, 1) K(h, st, 1)                             \
	K(end, records, 1) K(end, suppressed, 1) K(end, write_errors, 1) K(end, signal_refused, 0) K(end, history_dropped, 0) K(end, log_dropped, 0) \
	K(end, cut_exact, 0) K(end, cut_skew, 0)

/* clang-format on */

#define GPUGUARD_DR_ENUM_(t) GPUGUARD_DR_##t,
enum gpuguard_dump_record { GPUGUARD_DUMP_RECORDS(GPUGUARD_DR_ENUM_) GPUGUARD_DR_COUNT, GPUGUARD_DR_frame };
#undef GPUGUARD_DR_ENUM_

#define GPUGUARD_DK_ENUM_(t, k, always) GPUGUARD_DK_##t##_##k,
enum gpuguard_dump_key { GPUGUARD_DUMP_KEYS(GPUGUARD_DK_ENUM_) GPUGUARD_DK_COUNT };
#undef GPUGUARD_DK_ENUM_

struct gpuguard_dump_record_row {
	const char *name; /* the "t" value */
	const char *open; /* {"t":"name" */
	unsigned char open_len;
};

struct gpuguard_dump_key_row {
	const char *name;
	const char *json; /* ,"name": as the writer puts it after the value before */
	unsigned char json_len;
	unsigned char rec; /* enum gpuguard_dump_record */
	unsigned char always;
};

#define GPUGUARD_DR_ROW_(t) {#t, "{\"t\":\"" #t "\"", sizeof("{\"t\":\"" #t "\"") - 1},
static const struct gpuguard_dump_record_row gpuguard_dump_records[] = {GPUGUARD_DUMP_RECORDS(GPUGUARD_DR_ROW_)};
#undef GPUGUARD_DR_ROW_

#define GPUGUARD_DK_ROW_(t, k, a) {#k, ",\"" #k "\":", sizeof(",\"" #k "\":") - 1, GPUGUARD_DR_##t, a},
static const struct gpuguard_dump_key_row gpuguard_dump_keys[] = {GPUGUARD_DUMP_KEYS(GPUGUARD_DK_ROW_)};
#undef GPUGUARD_DK_ROW_

/* The name of key k of record t ("limit" for GPUGUARD_KEY(device, limit)),
 * for readers. */
#define GPUGUARD_KEY(t, k) (gpuguard_dump_keys[GPUGUARD_DK_##t##_##k].name)

/* The record type named t, or GPUGUARD_DR_COUNT for none (a newer
 * writer's record, which readers skip). */
static inline enum gpuguard_dump_record gpuguard_dump_record_of(const char *t)
{
	/* From the end: the records a dump has millions of (a, h, stack)
	 * are found in four comparisons or fewer. */
	for (int i = GPUGUARD_DR_COUNT - 1; i >= 0; i--)
		if (strcmp(t, gpuguard_dump_records[i].name) == 0)
			return (enum gpuguard_dump_record)i;
	return GPUGUARD_DR_COUNT;
}

#endif
