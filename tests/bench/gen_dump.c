/* gpuguard benchmark: writes a synthetic dump (include/gpuguard/dump.h) of
 * N live allocations and N history events over 1000 stacks, to stdout, for
 * tests/bench/report_bench.sh. Usage: gen_dump [N]. Deterministic. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	const int nstacks = 1000;
	uint64_t records = 0;
	static char buf[1 << 20];
	setvbuf(stdout, buf, _IOFBF, sizeof buf);
	printf("{\"t\":\"header\",\"format\":1,\"lib\":\"0.1.0\",\"time\":\"2026-12-02T10:30:00Z\",\"unix_ms\":"
	       "1796200200000,"
	       "\"start_unix_ms\":1796196600000,\"host\":\"bench\",\"pid\":1,\"cmdline\":[\"bench\"],\"trigger\":"
	       "\"ceiling\","
	       "\"unwinder\":\"libunwind\",\"stack_depth\":16,\"history_capacity\":%ld}\n",
	       n);
	printf("{\"t\":\"config\",\"name\":\"GPUGUARD_LIMIT\",\"value\":\"80Gi\",\"source\":\"environment\"}\n");
	printf("{\"t\":\"device\",\"dev\":0,\"limit\":85899345920,\"used\":85000000000,\"peak\":85899345920,\"pool_"
	       "reserved\":0,"
	       "\"live_bytes\":85000000000,\"allocs\":%ld,\"frees\":0,\"untracked_frees\":0,\"refused_ceiling\":1,"
	       "\"refused_config\":0,\"refused_driver\":0,\"pool_overshoot\":0,\"driver_free\":1000000000,"
	       "\"driver_total\":85899345920}\n",
	       2 * n);
	printf("{\"t\":\"request\",\"api\":\"cuMemAlloc_v2\",\"size\":1073741824,\"dev\":0,\"tid\":2,\"stack\":1,"
	       "\"outcome\":\"refused_ceiling\"}\n");
	printf(
	    "{\"t\":\"host\",\"rss\":1000000000,\"cgroup_version\":2,\"cgroup_limit\":null,\"cgroup_usage\":2000000000,"
	    "\"cgroup_oom_kill\":0,\"pinned_bytes\":0,\"pinned_allocs\":0}\n");
	records = 5;
	for (long i = 0; i < n; i++) {
		uint64_t r = next();
		printf(
		    "{\"t\":\"a\",\"p\":\"%llx\",\"s\":%llu,\"d\":0,\"api\":1,\"age\":%llu,\"tid\":%llu,\"st\":%llu}\n",
		    0x7f0000000000ull + (unsigned long long)i * 512, (unsigned long long)(512 + (r & 0xfffff)),
		    (unsigned long long)(r >> 40) % 3600000, 100 + (unsigned long long)(r >> 20) % 8,
		    1 + (unsigned long long)(r >> 8) % nstacks);
	}
	records += (uint64_t)n;
	for (int s = 1; s <= nstacks; s++) {
		printf("{\"t\":\"stack\",\"id\":%d,\"frames\":[{\"m\":\"libcuda.so.1\",\"o\":\"2a1f0\",\"s\":"
		       "\"cuMemAlloc_v2\"},"
		       "{\"m\":\"libapp.so\",\"o\":\"%x\",\"s\":\"site_%d\"},{\"m\":\"libapp.so\",\"o\":\"1000\",\"s\":"
		       "\"layer_%d\"},"
		       "{\"m\":\"python3\",\"o\":\"9f00\"}]}\n",
		       s, 0x1000 + s * 16, s, s % 17);
	}
	records += (uint64_t)nstacks;
	for (long i = 0; i < n; i++) {
		uint64_t r = next();
		printf(
		    "{\"t\":\"h\",\"ms\":%ld,\"op\":\"%s\",\"p\":\"%llx\",\"s\":%llu,\"d\":0,\"api\":1,\"st\":%llu}\n",
		    i * 3, (r & 3) ? "a" : "f", 0x7e0000000000ull + (unsigned long long)i * 512,
		    (unsigned long long)(512 + ((r >> 4) & 0xfffff)), 1 + (unsigned long long)(r >> 8) % nstacks);
	}
	records += (uint64_t)n;
	printf("{\"t\":\"end\",\"records\":%llu,\"suppressed\":0,\"write_errors\":0}\n", (unsigned long long)records);
	return 0;
}
