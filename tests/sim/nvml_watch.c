/* nvml_watch: reads NVML in a loop, as nvidia-smi or DCGM would, and records
 * every process's used memory and the card's used and free; at the end it
 * prints each process's largest figure. Runs without gpuguard, against the
 * simulated NVML (shared card) or a real one. Format in tests/sim/README.md. */
#define _GNU_SOURCE
#include "gpuguard/nvml_abi.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WATCH_FORMAT 1
#define MAX_DEVS 64
#define MAX_PROCS 256 /* per poll and device */
#define MAX_SEEN 1024 /* (device, pid) pairs remembered */

struct seen {
	unsigned dev, pid;
	unsigned long long max_used;
};

struct card {
	unsigned long long total, reserved, max_used, min_free;
	int sampled;
};

static volatile sig_atomic_t g_stop;
static struct seen g_seen[MAX_SEEN];
static int g_nseen, g_dropped;
static struct card g_card[MAX_DEVS];

static void on_signal(int sig)
{
	g_stop = sig;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: nvml_watch [-i interval_ms] [-t seconds] [-n polls] [-d device] [-o file] [-v]\n"
	           "  -i  time between polls, 1..60000 ms (default 100)\n"
	           "  -t  stop after this many seconds, 1..86400 (default 60)\n"
	           "  -n  stop after this many polls, 0 = no limit (default 0)\n"
	           "  -d  watch this device index only (default: all)\n"
	           "  -o  also write the summary to this file (written whole, then renamed into place)\n"
	           "  -v  print every poll's figures\n"
	           "Stops on SIGTERM, SIGINT or SIGHUP too, and prints the summary.\n");
}

/* a decimal integer in [lo, hi], else exit 2 naming the option */
static long num_arg(int opt, const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (!*s || *end || errno || v < lo || v > hi) {
		fprintf(stderr, "nvml_watch: error: -%c %s: expected an integer from %ld to %ld\n", opt, s, lo, hi);
		exit(2);
	}
	return v;
}

static long long now_ms(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)(t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static void note(unsigned dev, unsigned pid, unsigned long long used)
{
	for (int i = 0; i < g_nseen; i++) {
		if (g_seen[i].dev == dev && g_seen[i].pid == pid) {
			if (used > g_seen[i].max_used)
				g_seen[i].max_used = used;
			return;
		}
	}
	if (g_nseen == MAX_SEEN) {
		g_dropped++;
		return;
	}
	g_seen[g_nseen++] = (struct seen){dev, pid, used};
}

/* one device: its memory and its processes; 0, or the NVML error */
static int poll_device(unsigned dev, long long ms, int verbose)
{
	gg_nvmlDevice_t h;
	gg_nvmlMemory_v2_t m = {.version = GG_nvmlMemory_v2};
	gg_nvmlProcessInfo_t info[MAX_PROCS];
	int rc = nvmlDeviceGetHandleByIndex_v2(dev, &h);
	if (!rc)
		rc = nvmlDeviceGetMemoryInfo_v2(h, &m);
	if (rc)
		return rc;
	unsigned n = MAX_PROCS;
	rc = nvmlDeviceGetComputeRunningProcesses_v3(h, &n, info);
	if (rc == GG_NVML_ERROR_INSUFFICIENT_SIZE) { /* more than we keep: the first MAX_PROCS */
		g_dropped++;
		n = MAX_PROCS;
		rc = GG_NVML_SUCCESS;
	}
	if (rc)
		return rc;
	struct card *c = &g_card[dev];
	c->total = m.total;
	c->reserved = m.reserved;
	if (!c->sampled || m.used > c->max_used)
		c->max_used = m.used;
	if (!c->sampled || m.free < c->min_free)
		c->min_free = m.free;
	c->sampled = 1;
	if (verbose)
		printf("sample %lld %u total %llu reserved %llu used %llu free %llu\n", ms, dev, m.total, m.reserved,
		       m.used, m.free);
	for (unsigned i = 0; i < n; i++) {
		note(dev, info[i].pid, info[i].usedGpuMemory);
		if (verbose)
			printf("proc %lld %u %u %llu\n", ms, dev, info[i].pid, info[i].usedGpuMemory);
	}
	return 0;
}

static void summary(FILE *f, long polls, long errors, const char *why, unsigned ndev)
{
	fprintf(f, "nvml_watch %d\n", WATCH_FORMAT);
	for (int i = 0; i < g_nseen; i++)
		fprintf(f, "max %u %u %llu\n", g_seen[i].dev, g_seen[i].pid, g_seen[i].max_used);
	for (unsigned d = 0; d < ndev; d++)
		if (g_card[d].sampled)
			fprintf(f, "card %u total %llu reserved %llu max_used %llu min_free %llu\n", d, g_card[d].total,
			        g_card[d].reserved, g_card[d].max_used, g_card[d].min_free);
	fprintf(f, "polls %ld\nerrors %ld\ndropped %d\nend %s\n", polls, errors, g_dropped, why);
}

static int write_file(const char *path, long polls, long errors, const char *why, unsigned ndev)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -1;
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -1;
	summary(f, polls, errors, why, ndev);
	if (fclose(f) || rename(tmp, path)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long interval = 100, seconds = 60, max_polls = 0, only = -1;
	const char *out = NULL;
	int verbose = 0, opt;
	while ((opt = getopt(argc, argv, "i:t:n:d:o:vh")) != -1) {
		switch (opt) {
		case 'i':
			interval = num_arg(opt, optarg, 1, 60000);
			break;
		case 't':
			seconds = num_arg(opt, optarg, 1, 86400);
			break;
		case 'n':
			max_polls = num_arg(opt, optarg, 0, 1000000000L);
			break;
		case 'd':
			only = num_arg(opt, optarg, 0, MAX_DEVS - 1);
			break;
		case 'o':
			out = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "nvml_watch: error: unexpected argument %s\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: the sleep ends at once */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	int rc = nvmlInit_v2();
	unsigned ndev = 0;
	if (!rc)
		rc = nvmlDeviceGetCount_v2(&ndev);
	if (rc) {
		fprintf(stderr, "nvml_watch: error: NVML: %s (%d)\n", nvmlErrorString(rc), rc);
		return 1;
	}
	if (ndev > MAX_DEVS)
		ndev = MAX_DEVS;
	if (only >= (long)ndev) {
		fprintf(stderr, "nvml_watch: error: -d %ld: the machine has %u devices\n", only, ndev);
		return 2;
	}
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long polls = 0, errors = 0;
	const char *why = "time";
	for (;;) {
		long long ms = now_ms(&t0);
		for (unsigned d = 0; d < ndev; d++) {
			if (only >= 0 && d != (unsigned)only)
				continue;
			int e = poll_device(d, ms, verbose);
			if (e) {
				errors++;
				fprintf(stderr, "nvml_watch: warning: device %u: %s (%d)\n", d, nvmlErrorString(e), e);
			}
		}
		if (++polls == 1)
			printf("ready\n");
		if (g_stop) {
			why = "signal";
			break;
		}
		if (max_polls && polls >= max_polls) {
			why = "count";
			break;
		}
		if (now_ms(&t0) + interval > seconds * 1000LL)
			break;
		struct timespec ts = {interval / 1000, (interval % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		if (g_stop) {
			why = "signal";
			break;
		}
	}
	summary(stdout, polls, errors, why, ndev);
	nvmlShutdown();
	if (out && write_file(out, polls, errors, why, ndev)) {
		fprintf(stderr, "nvml_watch: error: cannot write %s: %s\n", out, strerror(errno));
		return 1;
	}
	return 0;
}
