/* gpuguard command: `gpuguard metrics`, the pod region in Prometheus text
 * format (0.0.4), printed once; http.c serves the same, discover.c merges
 * it over every pod of a node. */
#include <errno.h>
#include <string.h>

#include "live.h"

/* UUID="GPU-...", dcgm-exporter's label for the card (nvidia-smi's
 * spelling), the one join key: its series join ours with on(UUID) and no
 * label_replace. One label, for every kind (HIP-..., ordinal-N for a card
 * whose UUID was not known: it joins nothing, rightly). No `gpu`: dcgm's is
 * the host's index, which a container cannot know (its ordinals count only
 * the cards it was given), and a wrong one would join the wrong card. No
 * `device`: the entry's index in the region, which another pod numbers
 * otherwise; nobody should join on it. */
static void uuid_label(FILE *f, const struct gg_rdev *d)
{
	fputs("UUID=\"", f);
	prom_str(f, d->uuid);
	fputc('"', f);
}

/* The region is the pods' input: two entries with one UUID (a forged or
 * torn file) would make two series alike, and Prometheus drops the whole
 * scrape for that. The first one is shown. */
static int dev_repeats(const struct gg_region *r, unsigned i)
{
	for (unsigned j = 0; j < i; j++)
		if (!strcmp(r->dev[j].uuid, r->dev[i].uuid))
			return 1;
	return 0;
}

static void dev_sample(FILE *f, const char *name, const struct gg_rdev *d, uint64_t v)
{
	fprintf(f, "%s{kind=\"%s\",", name, d->kind);
	uuid_label(f, d);
	fprintf(f, "} %llu\n", (unsigned long long)v);
}

/* Nanoseconds as seconds, to the millisecond (integer arithmetic: exact). */
static void dev_sample_seconds(FILE *f, const char *name, const struct gg_rdev *d, uint64_t ns)
{
	fprintf(f, "%s{kind=\"%s\",", name, d->kind);
	uuid_label(f, d);
	fprintf(f, "} %llu.%03llu\n", (unsigned long long)(ns / 1000000000u),
	        (unsigned long long)(ns / 1000000u % 1000u));
}

static void proc_labels(FILE *f, const char *name, const struct gg_rproc *p)
{
	fprintf(f, "%s{slot=\"%u\",pid=\"%u\",comm=\"", name, p->slot, p->pid);
	prom_str(f, p->comm);
	fputc('"', f);
	if (p->container[0]) {
		fputs(",container=\"", f);
		prom_str(f, p->container);
		fputc('"', f);
	}
}

enum dev_field { F_LIMIT, F_FREE, F_USED, F_PEAK, F_PHYSICAL, F_WAITERS, F_REFUSED, F_RECLAIMED, F_WAIT, F_DRIVER_OOM };

static const struct {
	const char *name, *type, *help;
} dev_families[] = {
    [F_LIMIT] = {"gpuguard_device_limit_bytes", "gauge", "The pod's ceiling on this device (absent: no ceiling)."},
    [F_FREE] = {"gpuguard_device_free_bytes", "gauge",
                "Ceiling minus the pod's charge, never negative (absent: no ceiling)."},
    [F_USED] = {"gpuguard_device_used_bytes", "gauge", "Bytes charged to the pod on this device, all processes."},
    [F_PEAK] = {"gpuguard_device_peak_bytes", "gauge", "Highest charge seen on this device since the region began."},
    [F_PHYSICAL] = {"gpuguard_device_physical_bytes", "gauge", "The card's total memory, as its first user saw it."},
    [F_WAITERS] = {"gpuguard_device_waiters", "gauge", "Requests sleeping until memory is given back."},
    [F_REFUSED] = {"gpuguard_device_refused_total", "counter", "Requests refused at the ceiling, all processes."},
    [F_RECLAIMED] = {"gpuguard_device_reclaimed_bytes_total", "counter",
                     "Bytes returned to the pod from processes that exited without detaching."},
    [F_WAIT] = {"gpuguard_device_wait_seconds_total", "counter",
                "Seconds requests spent waiting for memory (GPUGUARD_ON_LIMIT=wait), all processes."},
    [F_DRIVER_OOM] = {"gpuguard_device_driver_oom_total", "counter",
                      "Requests the driver refused for lack of memory below the ceiling (the card was full), "
                      "all processes."},
};

static uint64_t dev_value(const struct gg_rdev *d, enum dev_field k)
{
	switch (k) {
	case F_LIMIT:
		return d->limit;
	case F_FREE:
		return d->limit > d->used ? d->limit - d->used : 0;
	case F_USED:
		return d->used;
	case F_PEAK:
		return d->peak;
	case F_PHYSICAL:
		return d->physical;
	case F_WAITERS:
		return d->waiters;
	case F_REFUSED:
		return d->refused;
	case F_RECLAIMED:
		return d->reclaimed;
	case F_WAIT:
		return d->wait_ns;
	case F_DRIVER_OOM:
		return d->driver_oom;
	}
	return 0;
}
static void deaths_metrics(FILE *f, const struct gg_region *r);

void gg_metrics_render(FILE *f, const struct gg_region *r)
{
	family(f, "gpuguard_up", "gauge", UP_HELP);
	fputs("gpuguard_up 1\n", f);
	family(f, "gpuguard_region_info", "gauge",
	       "The pod region read, and the GPUGUARD_LIMIT that set the pod's budget (\"\" = none).");
	fputs("gpuguard_region_info{path=\"", f);
	prom_str(f, r->path);
	fputs("\",limit=\"", f);
	prom_str(f, r->limit);
	fputs("\"} 1\n", f);
	family(f, "gpuguard_region_created_time_seconds", "gauge", "Unix time the pod region was created.");
	fprintf(f, "gpuguard_region_created_time_seconds %llu.%03llu\n", (unsigned long long)(r->created_ms / 1000),
	        (unsigned long long)(r->created_ms % 1000));
	family(f, "gpuguard_dumps_written_total", "counter", "Allocation dumps written by the pod's processes.");
	fprintf(f, "gpuguard_dumps_written_total %llu\n", (unsigned long long)r->dumps_written);
	for (size_t k = 0; k < sizeof dev_families / sizeof dev_families[0]; k++) {
		family(f, dev_families[k].name, dev_families[k].type, dev_families[k].help);
		for (unsigned i = 0; i < r->ndev; i++)
			if (dev_repeats(r, i))
				continue;
			else if (k == F_WAIT)
				dev_sample_seconds(f, dev_families[k].name, &r->dev[i], dev_value(&r->dev[i], k));
			else if (r->dev[i].has_limit || (k != F_LIMIT && k != F_FREE))
				dev_sample(f, dev_families[k].name, &r->dev[i], dev_value(&r->dev[i], k));
	}
	family(f, "gpuguard_processes", "gauge",
	       "Attached processes: live, exited without detaching, or unknown (no F_OFD_GETLK).");
	fprintf(f, "gpuguard_processes{state=\"live\"} %u\n", r->nlive);
	fprintf(f, "gpuguard_processes{state=\"exited\"} %u\n", r->nexited);
	fprintf(f, "gpuguard_processes{state=\"unknown\"} %u\n", r->nunknown);
	family(f, "gpuguard_process_info", "gauge", "One per attached process, with its state.");
	for (unsigned i = 0; i < r->nproc; i++) {
		proc_labels(f, "gpuguard_process_info", &r->proc[i]);
		fprintf(f, ",state=\"%s\"} 1\n", live_text(r->proc[i].live));
	}
	family(f, "gpuguard_process_start_time_seconds", "gauge", "Unix time the process attached to the region.");
	for (unsigned i = 0; i < r->nproc; i++) {
		proc_labels(f, "gpuguard_process_start_time_seconds", &r->proc[i]);
		fprintf(f, "} %llu.%03llu\n", (unsigned long long)(r->proc[i].start_ms / 1000),
		        (unsigned long long)(r->proc[i].start_ms % 1000));
	}
	family(f, "gpuguard_process_refused_total", "counter", "Requests of this process refused (ceiling or driver).");
	for (unsigned i = 0; i < r->nproc; i++) {
		proc_labels(f, "gpuguard_process_refused_total", &r->proc[i]);
		fprintf(f, "} %u\n", r->proc[i].refused);
	}
	family(f, "gpuguard_process_host_working_set_bytes", "gauge",
	       "The process's cgroup working set (usage less inactive file pages, as the kubelet counts it), "
	       "at its last sample (every 500 ms at most, on its GPU calls).");
	for (unsigned i = 0; i < r->nproc; i++)
		if (r->proc[i].has_host && r->proc[i].ws_known) {
			proc_labels(f, "gpuguard_process_host_working_set_bytes", &r->proc[i]);
			fprintf(f, "} %llu\n", (unsigned long long)r->proc[i].host_ws);
		}
	family(f, "gpuguard_process_host_usage_bytes", "gauge",
	       "The process's cgroup memory usage, page cache included, at its last sample.");
	for (unsigned i = 0; i < r->nproc; i++)
		if (r->proc[i].has_host) {
			proc_labels(f, "gpuguard_process_host_usage_bytes", &r->proc[i]);
			fprintf(f, "} %llu\n", (unsigned long long)r->proc[i].host_usage);
		}
	family(f, "gpuguard_process_host_limit_bytes", "gauge",
	       "The process's cgroup memory limit (absent: none known).");
	for (unsigned i = 0; i < r->nproc; i++)
		if (r->proc[i].has_host && r->proc[i].host_limit) {
			proc_labels(f, "gpuguard_process_host_limit_bytes", &r->proc[i]);
			fprintf(f, "} %llu\n", (unsigned long long)r->proc[i].host_limit);
		}
	family(f, "gpuguard_process_host_pinned_bytes", "gauge",
	       "Pinned host memory the process holds (cuMemHostAlloc, cuMemAllocHost, hipHostMalloc), never charged "
	       "to the GPU (absent: not known, a library older than this command).");
	for (unsigned i = 0; i < r->nproc; i++)
		if (r->proc[i].has_pinned) {
			proc_labels(f, "gpuguard_process_host_pinned_bytes", &r->proc[i]);
			fprintf(f, "} %llu\n", (unsigned long long)r->proc[i].host_pinned);
		}
	family(f, "gpuguard_process_used_bytes", "gauge", "Bytes this process holds on the device.");
	for (unsigned i = 0; i < r->nproc; i++) {
		for (unsigned d = 0; d < r->ndev; d++) {
			if (dev_repeats(r, d))
				continue;
			proc_labels(f, "gpuguard_process_used_bytes", &r->proc[i]);
			fputc(',', f);
			uuid_label(f, &r->dev[d]);
			fprintf(f, "} %llu\n", (unsigned long long)r->proc[i].used[r->dev[d].index]);
		}
	}
	deaths_metrics(f, r);
}

static void death_labels(FILE *f, const char *name, const struct gg_death *d)
{
	fprintf(f, "%s{n=\"%llu\",pid=\"%u\",comm=\"", name, (unsigned long long)d->n, d->pid);
	prom_str(f, d->comm);
	fputc('"', f);
}

/* The verdict is the closed set (host_oom, gpu_refusals, not_oom,
 * host_unknown). Its sentence (gpuguard top, report) carries figures, so it
 * is no label: every death would make a new series of it. */
static void deaths_metrics(FILE *f, const struct gg_region *r)
{
	family(f, "gpuguard_death_info", "gauge",
	       "One per recent death of a pod member without exit (SIGKILL, OOM killer, crash), with its verdict: "
	       "host_oom, gpu_refusals, not_oom or host_unknown.");
	for (unsigned i = 0; i < r->ndeath; i++) {
		death_labels(f, "gpuguard_death_info", &r->death[i]);
		fprintf(f, ",verdict=\"%s\"} 1\n", gg_death_code(&r->death[i]));
	}
	family(f, "gpuguard_death_time_seconds", "gauge", "Unix time the death was found (by the next sweep).");
	for (unsigned i = 0; i < r->ndeath; i++) {
		death_labels(f, "gpuguard_death_time_seconds", &r->death[i]);
		fprintf(f, "} %llu.%03llu\n", (unsigned long long)(r->death[i].found_ms / 1000),
		        (unsigned long long)(r->death[i].found_ms % 1000));
	}
	family(f, "gpuguard_death_gpu_used_bytes", "gauge",
	       "Device memory the process held at its last record, on the device where it held most of the ceiling.");
	for (unsigned i = 0; i < r->ndeath; i++) {
		death_labels(f, "gpuguard_death_gpu_used_bytes", &r->death[i]);
		fprintf(f, "} %llu\n", (unsigned long long)r->death[i].gpu_used);
	}
	family(f, "gpuguard_death_working_set_bytes", "gauge",
	       "The cgroup's working set (usage less inactive page cache) at the process's last record.");
	for (unsigned i = 0; i < r->ndeath; i++) {
		death_labels(f, "gpuguard_death_working_set_bytes", &r->death[i]);
		fprintf(f, "} %llu\n", (unsigned long long)r->death[i].working_set);
	}
	family(f, "gpuguard_death_refused_requests", "gauge", "Requests of the process refused before its death.");
	for (unsigned i = 0; i < r->ndeath; i++) {
		death_labels(f, "gpuguard_death_refused_requests", &r->death[i]);
		fprintf(f, "} %u\n", r->death[i].refused);
	}
}

int gg_metrics_print(const char *path)
{
	static struct gg_region r; /* 100 KiB: not on the stack */
	char err[GG_REGION_ERR];
	if (gg_region_read(&r, path, err, sizeof err)) {
		gg_error("%s", err);
		return GG_EXIT_BADINPUT;
	}
	gg_metrics_render(stdout, &r);
	if (fflush(stdout) || ferror(stdout)) {
		gg_error("writing the metrics: %s", strerror(errno));
		return GG_EXIT_BADINPUT;
	}
	return GG_EXIT_OK;
}
