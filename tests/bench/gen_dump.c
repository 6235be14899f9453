/* gpuguard benchmark: writes a synthetic dump (include/gpuguard/dump.h) of
 * N live allocations and N history events over 1000 stacks, to stdout, for
 * tests/bench/report_bench.sh. Usage: gen_dump [N]. Deterministic. Record
 * types and keys come from the writer's list (gpuguard/schema.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <gpuguard/schema.h>

/* {"t":"name" and ,"key": as the library writes them. */
#define REC(t) fputs(gpuguard_dump_records[GPUGUARD_DR_##t].open, stdout)
#define KEY(t, k) fputs(gpuguard_dump_keys[GPUGUARD_DK_##t##_##k].json, stdout)
#define END() fputs("}\n", stdout)

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void frame(const char *m, const char *o, const char *s)
{
	/* The first key opens the object: its text without the comma. */
	printf("{%s\"%s\"", gpuguard_dump_keys[GPUGUARD_DK_frame_m].json + 1, m);
	KEY(frame, o);
	printf("\"%s\"", o);
	if (s) {
		KEY(frame, s);
		printf("\"%s\"", s);
	}
	fputs("}", stdout);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	const int nstacks = 1000;
	uint64_t records = 0;
	static char buf[1 << 20];
	setvbuf(stdout, buf, _IOFBF, sizeof buf);
	REC(header);
	KEY(header, format), fputs("1", stdout);
	KEY(header, lib), fputs("\"0.1.0\"", stdout);
	KEY(header, time), fputs("\"2026-12-02T10:30:00Z\"", stdout);
	KEY(header, unix_ms), fputs("1796200200000", stdout);
	KEY(header, start_unix_ms), fputs("1796196600000", stdout);
	KEY(header, host), fputs("\"bench\"", stdout);
	KEY(header, pid), fputs("1", stdout);
	KEY(header, cmdline), fputs("[\"bench\"]", stdout);
	KEY(header, trigger), fputs("\"ceiling\"", stdout);
	KEY(header, unwinder), fputs("\"libunwind\"", stdout);
	KEY(header, stack_depth), fputs("16", stdout);
	KEY(header, history_capacity), printf("%ld", n);
	END();
	REC(config);
	KEY(config, name), fputs("\"GPUGUARD_LIMIT\"", stdout);
	KEY(config, value), fputs("\"80Gi\"", stdout);
	KEY(config, source), fputs("\"environment\"", stdout);
	END();
	REC(device);
	KEY(device, dev), fputs("0", stdout);
	KEY(device, limit), fputs("85899345920", stdout);
	KEY(device, used), fputs("85000000000", stdout);
	KEY(device, peak), fputs("85899345920", stdout);
	KEY(device, pool_reserved), fputs("0", stdout);
	KEY(device, live_bytes), fputs("85000000000", stdout);
	KEY(device, allocs), printf("%ld", 2 * n);
	KEY(device, frees), fputs("0", stdout);
	KEY(device, untracked_frees), fputs("0", stdout);
	KEY(device, refused_ceiling), fputs("1", stdout);
	KEY(device, refused_config), fputs("0", stdout);
	KEY(device, refused_driver), fputs("0", stdout);
	KEY(device, pool_overshoot), fputs("0", stdout);
	KEY(device, driver_free), fputs("1000000000", stdout);
	KEY(device, driver_total), fputs("85899345920", stdout);
	END();
	REC(request);
	KEY(request, api), fputs("\"cuMemAlloc_v2\"", stdout);
	KEY(request, size), fputs("1073741824", stdout);
	KEY(request, dev), fputs("0", stdout);
	KEY(request, tid), fputs("2", stdout);
	KEY(request, stack), fputs("1", stdout);
	KEY(request, outcome), fputs("\"refused_ceiling\"", stdout);
	END();
	REC(host);
	KEY(host, rss), fputs("1000000000", stdout);
	KEY(host, cgroup_version), fputs("2", stdout);
	KEY(host, cgroup_limit), fputs("null", stdout);
	KEY(host, cgroup_usage), fputs("2000000000", stdout);
	KEY(host, cgroup_oom_kill), fputs("0", stdout);
	KEY(host, pinned_bytes), fputs("0", stdout);
	KEY(host, pinned_allocs), fputs("0", stdout);
	END();
	records = 5;
	for (long i = 0; i < n; i++) {
		uint64_t r = next();
		REC(a);
		KEY(a, p), printf("\"%llx\"", 0x7f0000000000ull + (unsigned long long)i * 512);
		KEY(a, s), printf("%llu", (unsigned long long)(512 + (r & 0xfffff)));
		KEY(a, d), fputs("0", stdout);
		KEY(a, api), fputs("1", stdout);
		KEY(a, age), printf("%llu", (unsigned long long)(r >> 40) % 3600000);
		KEY(a, tid), printf("%llu", 100 + (unsigned long long)(r >> 20) % 8);
		KEY(a, st), printf("%llu", 1 + (unsigned long long)(r >> 8) % nstacks);
		END();
	}
	records += (uint64_t)n;
	for (int s = 1; s <= nstacks; s++) {
		char off[16], site[32], layer[32];
		snprintf(off, sizeof off, "%x", 0x1000 + s * 16);
		snprintf(site, sizeof site, "site_%d", s);
		snprintf(layer, sizeof layer, "layer_%d", s % 17);
		REC(stack);
		KEY(stack, id), printf("%d", s);
		KEY(stack, frames), fputs("[", stdout);
		frame("libcuda.so.1", "2a1f0", "cuMemAlloc_v2");
		fputs(",", stdout);
		frame("libapp.so", off, site);
		fputs(",", stdout);
		frame("libapp.so", "1000", layer);
		fputs(",", stdout);
		frame("python3", "9f00", NULL);
		fputs("]", stdout);
		END();
	}
	records += (uint64_t)nstacks;
	for (long i = 0; i < n; i++) {
		uint64_t r = next();
		REC(h);
		KEY(h, ms), printf("%ld", i * 3);
		KEY(h, op), fputs((r & 3) ? "\"a\"" : "\"f\"", stdout);
		KEY(h, p), printf("\"%llx\"", 0x7e0000000000ull + (unsigned long long)i * 512);
		KEY(h, s), printf("%llu", (unsigned long long)(512 + ((r >> 4) & 0xfffff)));
		KEY(h, d), fputs("0", stdout);
		KEY(h, api), fputs("1", stdout);
		KEY(h, st), printf("%llu", 1 + (unsigned long long)(r >> 8) % nstacks);
		END();
	}
	records += (uint64_t)n;
	REC(end);
	KEY(end, records), printf("%llu", (unsigned long long)records);
	KEY(end, suppressed), fputs("0", stdout);
	KEY(end, write_errors), fputs("0", stdout);
	END();
	return 0;
}
