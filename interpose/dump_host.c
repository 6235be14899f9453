/* gpuguard: host probes for dumps and the pod's obituaries: the process's
 * resident memory (/proc/self/statm) and its memory cgroup's usage, limit,
 * OOM kills and inactive file pages (v2 or v1, as /proc/self/cgroup names
 * it). Plain reads of small files; nothing here takes a lock. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dump_host.h"
#include "shared.h"

/* Reads a small file into buf (NUL-terminated). Bytes read, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = 0;
	return r;
}

static int read_u64_file(const char *path, uint64_t *out)
{
	char b[64];
	if (read_small(path, b, sizeof b) <= 0 || b[0] < '0' || b[0] > '9')
		return -1;
	*out = strtoull(b, NULL, 10);
	return 0;
}

static int read_keyed(const char *path, const char *key, uint64_t *out)
{
	char b[8192]; /* memory.stat: v1's total_* lines come late */
	if (read_small(path, b, sizeof b) <= 0)
		return -1;
	size_t kl = strlen(key);
	for (char *p = b; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
			*out = strtoull(p + kl + 1, NULL, 10);
			return 0;
		}
	return -1;
}

/* GPUGUARD_TEST_CGROUP_DIR, read once on an application thread (arm or
 * exit), never by the writer while the application may setenv. */
static char test_cgroup_dir[1024];

void gg_dump_read_test_knobs(void)
{
	const char *e = secure_getenv("GPUGUARD_TEST_CGROUP_DIR");
	/* Written only when it changed: other threads' obituary refreshes
	 * (shared_obit.c) read it once arming is done, so the re-read at exit
	 * must not rewrite the same bytes under them. */
	if (strncmp(test_cgroup_dir, e ? e : "", sizeof test_cgroup_dir - 1) != 0)
		snprintf(test_cgroup_dir, sizeof test_cgroup_dir, "%s", e ? e : "");
}

/* One cgroup directory: v2 (memory.current) or v1 (memory.usage_in_bytes).
 * 1 if it is one. The working set the kubelet evicts and the OOM killer
 * weighs is usage minus inactive file pages (page cache the kernel drops
 * first), so those are read too: cgroup v2 memory.stat "inactive_file",
 * v1 "total_inactive_file". */
static int read_cgroup_dir(const char *dir, int want, struct gg_host_sample *h)
{
	char path[4200];
	if (want != 1) {
		snprintf(path, sizeof path, "%s/memory.current", dir);
		if (read_u64_file(path, &h->use) == 0) {
			h->version = 2, h->have_use = 1;
			snprintf(path, sizeof path, "%s/memory.max", dir);
			h->have_lim = read_u64_file(path, &h->lim) == 0; /* "max" = none */
			snprintf(path, sizeof path, "%s/memory.events", dir);
			h->have_oom = read_keyed(path, "oom_kill", &h->oom) == 0;
			snprintf(path, sizeof path, "%s/memory.stat", dir);
			h->have_inactive = read_keyed(path, "inactive_file", &h->inactive_file) == 0;
			return 1;
		}
	}
	if (want != 2) {
		snprintf(path, sizeof path, "%s/memory.usage_in_bytes", dir);
		if (read_u64_file(path, &h->use) == 0) {
			h->version = 1, h->have_use = 1;
			snprintf(path, sizeof path, "%s/memory.limit_in_bytes", dir);
			h->have_lim = read_u64_file(path, &h->lim) == 0 && h->lim < (1ull << 62);
			snprintf(path, sizeof path, "%s/memory.oom_control", dir);
			h->have_oom = read_keyed(path, "oom_kill", &h->oom) == 0;
			snprintf(path, sizeof path, "%s/memory.stat", dir);
			h->have_inactive = read_keyed(path, "total_inactive_file", &h->inactive_file) == 0;
			return 1;
		}
	}
	return 0;
}

void gg_dump_host_sample(struct gg_host_sample *h)
{
	char b[4096], path[4200];
	memset(h, 0, sizeof *h);
	if (read_small("/proc/self/statm", b, sizeof b) > 0) {
		char *sp = strchr(b, ' ');
		if (sp)
			h->rss = strtoull(sp + 1, NULL, 10) * (uint64_t)sysconf(_SC_PAGESIZE);
	}
	if (test_cgroup_dir[0]) {
		read_cgroup_dir(test_cgroup_dir, 0, h);
		return;
	}
	if (read_small("/proc/self/cgroup", b, sizeof b) <= 0)
		return;
	char *v2 = strstr(b, "0::");
	char *v1 = strstr(b, ":memory:");
	if (v2 && (v2 == b || v2[-1] == '\n')) {
		char *p = v2 + 3, *nl = strchr(p, '\n');
		if (nl)
			*nl = 0;
		/* The path as the host names it, then the container's root
		 * (a private cgroup namespace shows "/"). */
		const char *bases[2] = {p, ""};
		for (int i = 0; i < 2 && !h->version; i++) {
			snprintf(path, sizeof path, "/sys/fs/cgroup%s", bases[i]);
			read_cgroup_dir(path, 2, h);
		}
	}
	if (!h->version && v1) {
		char *p = v1 + 8, *nl = strchr(p, '\n');
		if (nl)
			*nl = 0;
		const char *bases[2] = {p, ""};
		for (int i = 0; i < 2 && !h->version; i++) {
			snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s", bases[i]);
			read_cgroup_dir(path, 1, h);
		}
	}
}
