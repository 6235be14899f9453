/* gpuguard: unit tests for what the dump writer records beside the live
 * table (dump.c, history.c; issue 11): the memory-info ring (first and last
 * queries, in order), the process's peak by device, and host memory read
 * from fixture cgroup files, inactive page cache included. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../harness.h"
#include "dump_host.h"
#include "history.h"
#include "meminfo.h"
#include "shared.h"
#include "stack.h"

TEST(meminfo_ring_keeps_the_first_and_the_last_queries)
{
	struct gg_meminfo_q q[GG_MI_FIRST + GG_MI_LAST + 4];
	uint64_t count = 99;
	CHECK_EQ_U64(gg_dump_meminfo_snapshot(q, 32, &count), 0);
	CHECK_EQ_U64(count, 0);
	for (uint64_t i = 0; i < 30; i++)
		gg_dump_note_meminfo(2, 1000 - i, 4000 + i);
	size_t n = gg_dump_meminfo_snapshot(q, 32, &count);
	CHECK_EQ_U64(count, 30);
	CHECK_EQ_U64(n, GG_MI_FIRST + GG_MI_LAST);
	for (size_t i = 0; i < n; i++) {
		uint64_t want = i < GG_MI_FIRST ? i : 30 - GG_MI_LAST + (i - GG_MI_FIRST);
		CHECK_EQ_U64(q[i].n, want);
		CHECK_EQ_U64(q[i].free, 1000 - want);
		CHECK_EQ_U64(q[i].total, 4000 + want);
		CHECK_EQ_INT(q[i].dev, 2);
	}
	/* max bounds the copy */
	CHECK_EQ_U64(gg_dump_meminfo_snapshot(q, 3, &count), 3);
}

TEST(peak_follows_allocations_and_frees)
{
	CHECK_EQ_INT(gg_history_init(16), 0);
	uint64_t b, ms;
	gg_history_add(GG_HIST_ALLOC, 5, GPUGUARD_API_CU_MEM_ALLOC, 0x1000, 300, 1);
	gg_history_add(GG_HIST_ALLOC, 5, GPUGUARD_API_CU_MEM_ALLOC, 0x2000, 200, 1);
	gg_history_add(GG_HIST_FREE, 5, GPUGUARD_API_CU_MEM_ALLOC, 0x1000, 300, 1);
	gg_history_add(GG_HIST_REFUSE, 5, GPUGUARD_API_CU_MEM_ALLOC, 0, 1u << 30, 1);
	gg_history_add(GG_HIST_ALLOC, 5, GPUGUARD_API_CU_MEM_ALLOC, 0x3000, 100, 1);
	gg_history_peak(5, &b, &ms);
	CHECK_EQ_U64(b, 500);
	CHECK_EQ_U64(gg_history_live(5), 300);
	/* the live bytes a query sees come from the same count */
	gg_dump_note_meminfo(5, 1, 2);
	struct gg_meminfo_q q[GG_MI_FIRST + GG_MI_LAST];
	uint64_t count;
	size_t n = gg_dump_meminfo_snapshot(q, GG_MI_FIRST + GG_MI_LAST, &count);
	CHECK(n > 0);
	CHECK_EQ_U64(q[n - 1].used, 300);
	CHECK_EQ_INT(q[n - 1].nvml, 0);
	/* a query through NVML is one too, marked as such */
	gg_dump_note_meminfo_nvml(5, 3, 4);
	n = gg_dump_meminfo_snapshot(q, GG_MI_FIRST + GG_MI_LAST, &count);
	CHECK_EQ_U64(q[n - 1].total, 4);
	CHECK_EQ_INT(q[n - 1].nvml, 1);
	CHECK_EQ_U64(q[n - 1].used, 300);
	gg_history_peak(6, &b, &ms);
	CHECK_EQ_U64(b, 0);
}

/* What was live at the peak, by stack, survives the history: a ring of 16
 * events long overwritten still leaves the snapshot the growing thread
 * took (issue 11, finding 4). */
TEST(peak_sites_outlive_the_history)
{
	if (!gg_stack_depth())
		gg_stack_init(16);
	CHECK_EQ_INT(gg_history_init(16), 0);
	uintptr_t fa[2] = {0x501000, 0x502000}, fb[2] = {0x501000, 0x503000};
	uint32_t sa = gg_stack_intern(fa, 2), sb = gg_stack_intern(fb, 2);
	CHECK(sa && sb && sa != sb);
	const uint64_t M = 1u << 20;
	/* device 7: 64 MiB from a, then 200 x 1 MiB from b (the peak, 264 MiB),
	 * then b frees all of it and a small tail of events follows */
	gg_history_add(GG_HIST_ALLOC, 7, GPUGUARD_API_CU_MEM_ALLOC, 0x10, 64 * M, sa);
	for (uint64_t i = 0; i < 200; i++)
		gg_history_add(GG_HIST_ALLOC, 7, GPUGUARD_API_CU_MEM_ALLOC, 0x1000 + i, M, sb);
	for (uint64_t i = 0; i < 200; i++)
		gg_history_add(GG_HIST_FREE, 7, GPUGUARD_API_CU_MEM_ALLOC, 0x1000 + i, M, sb);
	for (int i = 0; i < 40; i++) {
		gg_history_add(GG_HIST_ALLOC, 7, GPUGUARD_API_CU_MEM_ALLOC, 0x9000, 4096, sa);
		gg_history_add(GG_HIST_FREE, 7, GPUGUARD_API_CU_MEM_ALLOC, 0x9000, 4096, sa);
	}
	struct gg_peak_sites ps;
	CHECK_EQ_INT(gg_history_peak_sites(7, &ps), 0);
	uint64_t b, ms;
	gg_history_peak(7, &b, &ms);
	CHECK_EQ_U64(b, 264 * M);
	/* within 1%, at least 1 MiB, of the peak */
	CHECK(ps.bytes <= b && ps.bytes + M >= b);
	CHECK_EQ_INT(ps.n, 2);
	CHECK_EQ_INT(ps.st[0], sb);
	CHECK(ps.b[0] + M >= 200 * M);
	CHECK_EQ_INT(ps.st[1], sa);
	CHECK_EQ_U64(ps.b[1], 64 * M);
	/* a device without events has none */
	CHECK_EQ_INT(gg_history_peak_sites(8, &ps), -1);
	CHECK_EQ_INT(gg_history_peak_sites(-1, &ps), -1);
}

static void *grow_and_shrink(void *arg)
{
	uint32_t st = (uint32_t)(uintptr_t)arg;
	for (int r = 0; r < 200; r++) {
		for (int i = 0; i < 16; i++)
			gg_history_add(GG_HIST_ALLOC, 9, GPUGUARD_API_CU_MEM_ALLOC, 0x100 + (uint64_t)i, 3u << 20, st);
		for (int i = 0; i < 16; i++)
			gg_history_add(GG_HIST_FREE, 9, GPUGUARD_API_CU_MEM_ALLOC, 0x100 + (uint64_t)i, 3u << 20, st);
	}
	return NULL;
}

/* Four threads raising the peak at once, a reader copying meanwhile: the
 * copy is whole (never more bytes in a site than in its snapshot). */
TEST(peak_sites_under_concurrent_growth)
{
	uintptr_t f[4][1] = {{0x601000}, {0x602000}, {0x603000}, {0x604000}};
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		CHECK_EQ_INT(pthread_create(&t[i], NULL, grow_and_shrink, (void *)(uintptr_t)gg_stack_intern(f[i], 1)),
		             0);
	struct gg_peak_sites ps;
	for (int k = 0; k < 2000; k++)
		if (gg_history_peak_sites(9, &ps) == 0) {
			uint64_t sum = 0;
			for (unsigned j = 0; j < ps.n; j++)
				sum += ps.b[j];
			CHECK(ps.n <= 4 && sum <= ps.bytes + (48u << 20));
		}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ_INT(gg_history_peak_sites(9, &ps), 0);
	CHECK(ps.n >= 1);
}

static void put(const char *dir, const char *name, const char *text)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

TEST(host_reads_the_working_set_from_cgroup_files)
{
	char v2[] = "/tmp/gg-cg2-XXXXXX", v1[] = "/tmp/gg-cg1-XXXXXX";
	CHECK(mkdtemp(v2) != NULL);
	CHECK(mkdtemp(v1) != NULL);
	put(v2, "memory.current", "16106127360\n");
	put(v2, "memory.max", "17179869184\n");
	put(v2, "memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n");
	put(v2, "memory.stat",
	    "anon 22020096\nfile 15032385536\nactive_anon 1\ninactive_anon 2\n"
	    "active_file 1000\ninactive_file 15032385536\n");
	put(v1, "memory.usage_in_bytes", "8589934592\n");
	put(v1, "memory.limit_in_bytes", "9223372036854771712\n");
	put(v1, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
	put(v1, "memory.stat", "cache 1\nrss 2\ninactive_file 5\ntotal_cache 7\ntotal_inactive_file 4294967296\n");
	struct gg_host_sample h;
	setenv("GPUGUARD_TEST_CGROUP_DIR", v2, 1);
	gg_dump_read_test_knobs();
	gg_dump_host_sample(&h);
	CHECK_EQ_INT(h.version, 2);
	CHECK(h.have_use && h.have_lim && h.have_oom && h.have_inactive);
	CHECK_EQ_U64(h.use, 16106127360ull);
	CHECK_EQ_U64(h.lim, 17179869184ull);
	CHECK_EQ_U64(h.oom, 1);
	CHECK_EQ_U64(h.inactive_file, 15032385536ull);
	CHECK(h.rss > 0);
	setenv("GPUGUARD_TEST_CGROUP_DIR", v1, 1);
	gg_dump_read_test_knobs();
	gg_dump_host_sample(&h);
	CHECK_EQ_INT(h.version, 1);
	CHECK(h.have_use && !h.have_lim && h.have_oom && h.have_inactive);
	CHECK_EQ_U64(h.use, 8589934592ull);
	CHECK_EQ_U64(h.inactive_file, 4294967296ull); /* total_, not the local inactive_file */
	unsetenv("GPUGUARD_TEST_CGROUP_DIR");
	gg_dump_read_test_knobs();
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s %s", v2, v1);
	CHECK_EQ_INT(system(cmd), 0);
}

int main(void)
{
	RUN(meminfo_ring_keeps_the_first_and_the_last_queries);
	RUN(peak_follows_allocations_and_frees);
	RUN(peak_sites_outlive_the_history);
	RUN(peak_sites_under_concurrent_growth);
	RUN(host_reads_the_working_set_from_cgroup_files);
	return harness_done();
}
