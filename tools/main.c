/* gpuguard command: subcommand dispatch, help, and the small subcommands
 * (run, dump). `report` reads dumps with load.c and prints with output.c and
 * html.c; `top` and `metrics` read the pod region with region.c and show it
 * with top.c, metrics.c and http.c. Exit codes everywhere: 0 ok, 1 usage, 2
 * bad input or failure. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gpuguard.h>
#include <gpuguard/dump.h>
#include <gpuguard/options.h>
#include <gpuguard/parse.h>
#include <gpuguard/region.h>
#include <gpuguard/signals.h>

#include "tool.h"

static const char help_main[] =
    "usage: gpuguard COMMAND [ARGS...]\n"
    "\n"
    "Per-device GPU memory ceilings for CUDA and HIP programs, and the post-mortem\n"
    "of what filled the GPU.\n"
    "\n"
    "commands:\n"
    "  report DUMP...      analyze allocation dumps: diagnosis, call sites, sizes, timeline\n"
    "  run [OPTS] -- CMD   run CMD with libgpuguard preloaded\n"
    "  dump PID            ask a running process for a dump and print its path\n"
    "  top [OPTS]          live table of the pod's devices and processes (the pod region)\n"
    "  metrics [OPTS]      the pod region in Prometheus text format, printed or served over HTTP\n"
    "  check [PID]         exit 0 only if PID (default 1) runs with libgpuguard and a valid ceiling\n"
    "  help [COMMAND]      this text, or a command's manual\n"
    "  version             print the version\n"
    "\n"
    "`gpuguard help COMMAND` or `gpuguard COMMAND --help` shows each command's manual.\n"
    "\n"
    "exit status: 0 success, 1 usage error, 2 bad input or failure.\n";

static const char help_report[] =
    "NAME\n"
    "    gpuguard report - analyze gpuguard allocation dumps\n"
    "\n"
    "SYNOPSIS\n"
    "    gpuguard report [--json | --folded | --speedscope | --html FILE | --torch-snapshot FILE] [--top N]\n"
    "                    [--frames N] DUMP...\n"
    "    gpuguard report --diff [--json] OLD NEW\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads dumps written by libgpuguard (JSON Lines, format described in\n"
    "    <gpuguard/dump.h>) and prints, for each, a diagnosis first: what\n"
    "    happened, the evidence, and what to change. Diagnoses:\n"
    "      ceiling reached       a request did not fit GPUGUARD_LIMIT (or an exit\n"
    "                            dump counts refusals)\n"
    "      device full           the driver refused while under the ceiling\n"
    "      fragmentation         free memory was enough, yet the request failed\n"
    "      leak suspected        old live allocations from one site, growing\n"
    "      host memory pressure  the cgroup's working set (usage less inactive\n"
    "                            page cache) is near its limit, or OOM kills\n"
    "      sizing                no failure: a GPUGUARD_LIMIT from the peak, or\n"
    "                            the fraction for a program that sizes itself\n"
    "    A program that sizes itself from the total it is told (its memory-info\n"
    "    queries, then what it allocated) gets the fraction to leave, not a\n"
    "    higher ceiling: what it needed beyond the total (kept + what comes and\n"
    "    goes, held + the request, or the largest refusal in the history) x1.2,\n"
    "    in steps of 0.05, from the knob's value on its command line when it is\n"
    "    there. Each diagnosis names its evidence.\n"
    "    Then the views: devices against their ceilings, top call sites by live\n"
    "    bytes and by count with their stacks, a size histogram, fragmentation\n"
    "    figures, a usage timeline from the history, what was live at the GPU\n"
    "    peak (rebuilt from the history, or the library's snapshot at the peak\n"
    "    when the history is younger), the host, the configuration.\n"
    "\n"
    "    With several dumps, one report each, in order (--json: one JSON document\n"
    "    each). The first dump that cannot be read stops the run.\n"
    "\n"
    "    A dump cut short (no end trailer, or a partial last line) is read up to\n"
    "    its last whole record with a warning. A dump of a newer format than\n"
    "    this gpuguard reads is refused.\n"
    "\n"
    "    Strings from the dump are shown as they are, except control characters\n"
    "    (C0, DEL, C1: U+0080..U+009F) and bytes that are not UTF-8, which the\n"
    "    text, folded and HTML forms show as '?' (':' in folded) and --json\n"
    "    writes as \\u escapes (\\ufffd for a byte that is not UTF-8).\n"
    "\n"
    "OPTIONS\n"
    "    --json         machine-readable report (stable keys; \"gpuguard_report\": 1)\n"
    "    --folded       folded stacks of live bytes, root first, for flamegraph.pl\n"
    "                   or speedscope: \"frame;frame;frame BYTES\"\n"
    "    --speedscope   the same in speedscope's JSON file format (unit: bytes)\n"
    "    --html FILE    one self-contained HTML page with SVG charts (timeline, size\n"
    "                   histogram, devices, flame graph); no network access. Written\n"
    "                   under a hidden name beside FILE, then renamed over it (mode\n"
    "                   0666 less the umask); a FILE that is a symbolic link or not\n"
    "                   a regular file is refused and left as it is\n"
    "    --torch-snapshot FILE  one dump as the pickle torch.cuda.memory._dump_snapshot\n"
    "                   writes (segments, blocks, device_traces; frames as filename,\n"
    "                   line, name), for pytorch.org/memory_viz; written as --html is\n"
    "    --diff OLD NEW growth of live bytes by call site between two dumps\n"
    "                   (sites matched by their frames)\n"
    "    --top N        call sites shown (default 10)\n"
    "    --frames N     frames shown per stack in text (default 8)\n"
    "\n"
    "FRAGMENTATION FIGURES\n"
    "    internal waste  granted - requested, over live allocations; granted is what\n"
    "                    the library charges: requests over 1 MiB rounded up to 2 MiB,\n"
    "                    smaller ones to 512 B; VMM and stream-ordered sizes as is.\n"
    "    pool slack      reserved - used in stream-ordered pools: the pool's reserve\n"
    "                    (device record) minus the live stream-ordered allocations.\n"
    "    external        1 - largest free block / total free, as XLA's BFC allocator\n"
    "                    reports it; needs a free-block map, which format 1 dumps do\n"
    "                    not hold, so it is shown as n/a.\n"
    "    PyTorch         named only from its frames (libc10*, libtorch*, c10::)\n"
    "                    in the stacks; the segment-size count beside it counts\n"
    "                    live cuMemAlloc/hipMalloc sizes of 2 MiB, 20 MiB, or 2 MiB\n"
    "                    multiples over 10 MiB (the caching allocator's segments).\n"
    "    VMM holes       unmapped runs between mapped chunks of a reservation\n"
    "                    (cuMemAddressReserve; PyTorch expandable segments, vLLM sleep\n"
    "                    mode): count, and the largest. A request larger than the\n"
    "                    largest hole needs new address space or fails to map\n"
    "                    contiguously.\n"
    "\n"
    "EXIT STATUS\n"
    "    0 report written; 1 usage error; 2 a dump could not be read (the message\n"
    "    names FILE:LINE and what is wrong), or its format is newer, or FILE of\n"
    "    --html or --torch-snapshot cannot be written.\n";

static const char help_dump[] = "NAME\n"
                                "    gpuguard dump - ask a running process for an allocation dump\n"
                                "\n"
                                "SYNOPSIS\n"
                                "    gpuguard dump [--timeout SECONDS] PID\n"
                                "\n"
                                "DESCRIPTION\n"
                                "    Sends PID its dump signal (GPUGUARD_DUMP_SIGNAL from its environment,\n"
                                "    read as the library reads it; default SIGUSR2) and prints the path of\n"
                                "    the new dump once it appears in its GPUGUARD_DUMP_DIR (relative to its\n"
                                "    working directory; default its working directory). Waits at most\n"
                                "    --timeout seconds (default 10).\n"
                                "\n"
                                "    The signal's default action is to terminate, so it is sent only to a\n"
                                "    process that has libgpuguard mapped (/proc/PID/maps) and a handler for\n"
                                "    it (the library installs one at the first device allocation). Anything\n"
                                "    else is not signalled. Behind an init that forwards signals (tini,\n"
                                "    dumb-init, a shell as PID 1) the server is a child: a PID without the\n"
                                "    library is not signalled either, and the message names the processes\n"
                                "    under it that have the library, to run gpuguard dump on.\n"
                                "\n"
                                "    When the process caught the signal but no new dump appeared in time,\n"
                                "    the message says whether the library's rate limit explains it\n"
                                "    (GPUGUARD_DUMP_INTERVAL since its last dump here, or GPUGUARD_DUMP_MAX\n"
                                "    dumps written); a suppressed dump is counted in the next one's trailer.\n"
                                "\n"
                                "EXIT STATUS\n"
                                "    0 the path was printed; 1 usage error; 2 no such process, no permission,\n"
                                "    no library or no handler in it (not signalled), dumps disabled in it,\n"
                                "    or no dump appeared in time.\n";

static const char help_check[] = "NAME\n"
                                 "    gpuguard check - does a process really run under gpuguard's ceiling?\n"
                                 "\n"
                                 "SYNOPSIS\n"
                                 "    gpuguard check [PID]\n"
                                 "\n"
                                 "DESCRIPTION\n"
                                 "    For a container's startup probe, so that a pod whose GPU process does not\n"
                                 "    run with the library never becomes Ready (failing closed). Checks that\n"
                                 "    PID (default 1, the container's main process) has libgpuguard mapped\n"
                                 "    (/proc/PID/maps; behind an init such as tini or a shell, a process under\n"
                                 "    it that has the library counts) and that its GPUGUARD_LIMIT is set and\n"
                                 "    valid, read with the library's own parser. Prints one line either way:\n"
                                 "    what was found, or what is wrong (neither LD_PRELOAD nor the process's\n"
                                 "    /etc/ld.so.preload naming it, or either naming a file that does not\n"
                                 "    exist, which the loader ignores; the library not mapped; the limit\n"
                                 "    missing or invalid; in pod scope, its pod region there but not\n"
                                 "    usable, so that each process would keep a ceiling of its own).\n"
                                 "\n"
                                 "EXIT STATUS\n"
                                 "    0 the process runs with the library and a valid ceiling; 1 usage error;\n"
                                 "    2 it does not (the line says why), or it cannot be read.\n";

static const char help_top[] = "NAME\n"
                               "    gpuguard top - live view of a pod's GPU memory budget\n"
                               "\n"
                               "SYNOPSIS\n"
                               "    gpuguard top [--region PATH] [--interval DURATION] [--once]\n"
                               "    gpuguard top --discover DIR\n"
                               "\n"
                               "DESCRIPTION\n"
                               "    Reads the pod region, the file every process under libgpuguard in this pod\n"
                               "    shares its accounting through (<gpuguard/region.h>), and shows a table,\n"
                               "    redrawn every interval until Ctrl-C (SIGINT) or SIGTERM:\n"
                               "      devices    entry index, kind (CUDA, HIP, ordinal), UUID (first 12\n"
                               "                 characters), the pod's ceiling (\"none\": no ceiling), bytes\n"
                               "                 charged, peak, free (ceiling - charged, never negative),\n"
                               "                 requests waiting for memory, requests refused, bytes\n"
                               "                 reclaimed from processes that exited without detaching\n"
                               "      processes  slot, pid (in its own PID namespace), command name, time\n"
                               "                 since it attached, state, bytes held on each device\n"
                               "    State is \"live\" while the process holds its slot's lock, \"exited\" once\n"
                               "    the kernel has dropped it (the process died without detaching; its\n"
                               "    charges return to the pod at the next allocation that needs them), and\n"
                               "    \"unknown\" where the kernel cannot test the lock (no F_OFD_GETLK).\n"
                               "      recent deaths  the pod's last 16 processes that died without exiting\n"
                               "                 (SIGKILL, the OOM killer, a crash), newest first: pid, name,\n"
                               "                 when found dead, last GPU use against the ceiling, the\n"
                               "                 cgroup's working set against its limit, refusals, and a\n"
                               "                 verdict: likely OOMKilled (working set at 90% of the limit\n"
                               "                 or more), GPU refusals before death, or killed while within\n"
                               "                 GPU and host limits (not an OOM)\n"
                               "\n"
                               "    The file is read, never mapped, and checked before use; a symbolic link\n"
                               "    is refused. Every value in it is shown as found; strings are shown with\n"
                               "    non-printable bytes as \\xNN.\n"
                               "\n"
                               "OPTIONS\n"
                               "    --region PATH        the region file (default: $GPUGUARD_SHARED, else\n"
                               "                         " GPUGUARD_REGION_DEFAULT_PATH ")\n"
                               "    --interval DURATION  time between redraws: 500ms, 1.5s, 1m or plain seconds\n"
                               "                         (default 1s; 10ms to 1h)\n"
                               "    --once               print one table, without terminal control codes, and exit\n"
                               "    --discover DIR       the node's view, once: every pod region under the\n"
                               "                         kubelet's pods directory (as `gpuguard metrics\n"
                               "                         --discover`), one line per card: its memory (less what\n"
                               "                         the driver reserves, where known), the pods' ceilings\n"
                               "                         and footprints (books + runtime) summed, and whether\n"
                               "                         the ceilings overcommit it or the footprints pass it\n"
                               "\n"
                               "EXIT STATUS\n"
                               "    0 done; 1 usage error; 2 the region cannot be read: missing (no process in\n"
                               "    the pod has attached yet), a symbolic link, not a regular file, or not a\n"
                               "    valid region (truncated, another format or version). The message names the\n"
                               "    path and the reason. Once the table is up, a region that becomes\n"
                               "    unreadable is reported in place and read again at the next redraw.\n";

static const char help_metrics[] =
    "NAME\n"
    "    gpuguard metrics - the pod region in Prometheus text format\n"
    "\n"
    "SYNOPSIS\n"
    "    gpuguard metrics [--region PATH]\n"
    "    gpuguard metrics [--region PATH] --listen ADDR:PORT [--timeout DURATION]\n"
    "                     [--max-connections N]\n"
    "    gpuguard metrics --discover DIR [--listen ADDR:PORT ...]\n"
    "\n"
    "DESCRIPTION\n"
    "    Prints the pod region (see gpuguard help top) in the Prometheus text\n"
    "    exposition format, version 0.0.4. Device series carry the labels\n"
    "    kind (CUDA, HIP, ordinal) and UUID, dcgm-exporter's join key\n"
    "    (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx as nvidia-smi spells it,\n"
    "    HIP-... for HIP, ordinal-N where the device has no UUID); no gpu label\n"
    "    (a container cannot know the host's index). Process series\n"
    "    carry slot, pid and comm: the slot keeps them apart when two processes\n"
    "    in different PID namespaces share a pid.\n"
    "\n"
    "    gpuguard_region_info{path,limit}           1; limit is the GPUGUARD_LIMIT\n"
    "                                               that set the budget, \"\" = none\n"
    "    gpuguard_region_created_time_seconds       gauge\n"
    "    gpuguard_device_limit_bytes                gauge; absent for a device with\n"
    "                                               no ceiling\n"
    "    gpuguard_device_free_bytes                 gauge, ceiling - used, never\n"
    "                                               negative; absent with no ceiling\n"
    "    gpuguard_device_used_bytes                 gauge\n"
    "    gpuguard_device_peak_bytes                 gauge\n"
    "    gpuguard_device_physical_bytes             gauge\n"
    "    gpuguard_device_waiters                    gauge\n"
    "    gpuguard_device_refused_total              counter\n"
    "    gpuguard_device_reclaimed_bytes_total      counter\n"
    "    gpuguard_device_wait_seconds_total         counter, time requests spent\n"
    "                                               waiting (GPUGUARD_ON_LIMIT=wait)\n"
    "    gpuguard_processes{state}                  gauge; live, exited, unknown\n"
    "    gpuguard_process_info{slot,pid,comm,state} 1\n"
    "    gpuguard_process_start_time_seconds        gauge\n"
    "    gpuguard_process_used_bytes                gauge, per process and device\n"
    "                                               (labels slot,pid,comm,UUID)\n"
    "    gpuguard_death_info{n,pid,comm,verdict}    1 per recent death without\n"
    "                                               exit; verdict host_oom, gpu_refusals,\n"
    "                                               not_oom or host_unknown\n"
    "    gpuguard_death_time_seconds                gauge, when it was found dead\n"
    "    gpuguard_death_gpu_used_bytes              gauge, at its last record\n"
    "    gpuguard_death_working_set_bytes           gauge, at its last record\n"
    "    gpuguard_death_refused_requests            gauge\n"
    "\n"
    "    With --listen it serves the same over HTTP until SIGINT or SIGTERM, the\n"
    "    region read afresh for every request: GET or HEAD of /metrics (or /)\n"
    "    answers 200; other paths 404; other methods 405; a request head over\n"
    "    8 KiB 431; a malformed one 400; one not received within the timeout\n"
    "    408; a region that cannot be read (before any process of the pod\n"
    "    attached, say) 200 with gpuguard_up 0 and gpuguard_region_error{reason}\n"
    "    (missing, permission, symlink, not_regular, invalid, io or other; the\n"
    "    message on stderr), never 503, so the target is up from the start (the server\n"
    "    keeps running). No client is ever waited on: every socket is non-blocking,\n"
    "    every connection has the timeout as its deadline, and past\n"
    "    --max-connections open ones a new connection closes the oldest that\n"
    "    has not sent a whole request (idle or slow), so a scrape is answered\n"
    "    however many idle clients hold connections open.\n"
    "\n"
    "OPTIONS\n"
    "    --region PATH       the region file (default: $GPUGUARD_SHARED, else\n"
    "                        " GPUGUARD_REGION_DEFAULT_PATH ")\n"
    "    --listen ADDR:PORT  serve on exactly this address: an IPv4 address\n"
    "                        (0.0.0.0: all), [IPv6 address] or localhost (127.0.0.1).\n"
    "                        Port 0 picks a free port. The address is printed on\n"
    "                        stderr: \"gpuguard: serving metrics on http://ADDR:PORT/metrics\"\n"
    "    --timeout DURATION  per-connection deadline to receive a request, and\n"
    "                        again to send the answer (default 5s)\n"
    "    --max-connections N connections held open at once, 1 to 4096 (default\n"
    "                        1024; fewer if the descriptor limit is lower)\n"
    "    --discover DIR      one exporter per node: every region in the pods' emptyDir\n"
    "                        volumes under DIR, the kubelet's pods directory\n"
    "                        (/var/lib/kubelet/pods, mounted read-only), read afresh\n"
    "                        for every request. Each series gets pod_uid=\"UID\" (join\n"
    "                        kube-state-metrics' kube_pod_info on uid for namespace\n"
    "                        and pod); gpuguard_discovered_pods and\n"
    "                        gpuguard_discovered_regions count what was found,\n"
    "                        gpuguard_discovery_errors{path_kind,reason} what could\n"
    "                        not be read (each path named once on stderr).\n"
    "\n"
    "EXIT STATUS\n"
    "    0 printed, or served until stopped; 1 usage error (including a bad\n"
    "    --listen address); 2 the region cannot be read (printing only; see\n"
    "    gpuguard help top), or the address cannot be bound.\n";

static int usage_err(const char *msg, const char *help)
{
	gg_error("%s", msg);
	fputs(help, stderr);
	return GG_EXIT_USAGE;
}

static int parse_int(const char *s, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > 1000000)
		return -1;
	*out = (int)v;
	return 0;
}

/* "--name VALUE" or "--name=VALUE" at argv[*i]: the value, advancing *i
 * past it; NULL when argv[*i] is another option. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	if (strncmp(argv[*i], name, n))
		return NULL;
	if (argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (argv[*i][n] || *i + 1 >= argc)
		return NULL;
	return argv[++*i];
}

/* A duration in the library's syntax (gpuguard/parse.h), in
 * milliseconds in [min, max] into *out; -1 otherwise. */
static int parse_duration_ms(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t ms;
	if (gpuguard_parse_duration_ms(s, &ms) != 0 || ms < min || ms > max)
		return -1;
	*out = ms;
	return 0;
}

/* The text, JSON, HTML, folded (folded 1) or speedscope (folded 2) report
 * of one analysis, through the report model (f NULL: text on stdout, after
 * a blank line from the second dump on). */
static int report_model(const struct gg_analysis *a, const struct gg_opts *o, FILE *f, int json, int folded, int i)
{
	struct gg_model m;
	if (gg_model_build(&m, a, o)) {
		gg_error("out of memory");
		return -1;
	}
	if (folded == 2) {
		gg_report_speedscope(stdout, &m);
	} else if (folded) {
		gg_report_folded(stdout, &m);
	} else if (json) {
		gg_report_json(f, &m);
	} else if (f) {
		gg_report_html(f, &m);
	} else {
		if (i)
			fputc('\n', stdout);
		gg_report_text(stdout, &m);
	}
	gg_model_free(&m);
	return 0;
}

static int cmd_report(int argc, char **argv)
{
	struct gg_opts o = {10, 8};
	int json = 0, folded = 0, diff = 0;
	const char *html = NULL, *torch = NULL;
	char **files = calloc((size_t)argc + 1, sizeof *files);
	int nfiles = 0, only_files = 0;
	if (!files)
		return GG_EXIT_BADINPUT;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (only_files || a[0] != '-' || !a[1]) {
			files[nfiles++] = argv[i];
		} else if (!strcmp(a, "--")) {
			only_files = 1;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(help_report, stdout);
			free(files);
			return GG_EXIT_OK;
		} else if (!strcmp(a, "--json")) {
			json = 1;
		} else if (!strcmp(a, "--folded")) {
			folded = 1;
		} else if (!strcmp(a, "--speedscope")) {
			folded = 2;
		} else if (!strcmp(a, "--diff")) {
			diff = 1;
		} else if (!strcmp(a, "--html") && i + 1 < argc) {
			html = argv[++i];
		} else if (!strcmp(a, "--torch-snapshot") && i + 1 < argc) {
			torch = argv[++i];
		} else if ((!strcmp(a, "--top") || !strcmp(a, "--frames")) && i + 1 < argc) {
			if (parse_int(argv[i + 1], a[2] == 't' ? &o.top : &o.frames)) {
				free(files);
				return usage_err("--top and --frames take a number", help_report);
			}
			i++;
		} else {
			char m[128];
			snprintf(m, sizeof m, "report: unknown option '%.64s'", a);
			free(files);
			return usage_err(m, help_report);
		}
	}
	if (nfiles == 0 || (diff && nfiles != 2) || json + (folded != 0) + (html != NULL) + (torch != NULL) > 1 ||
	    (diff && (folded || html || torch)) || (torch && nfiles != 1)) {
		free(files);
		return usage_err(diff ? "report --diff takes two dumps, and only --json"
		                      : "report needs one or more dumps, and one output format",
		                 help_report);
	}
	struct gg_dump *d = calloc((size_t)nfiles, sizeof *d);
	struct gg_analysis *an = calloc((size_t)nfiles, sizeof *an);
	int rc = GG_EXIT_OK, loaded = 0;
	struct gg_outfile page = {0};
	FILE *hf = NULL;
	char oerr[2 * PATH_MAX];
	if (!d || !an) {
		rc = GG_EXIT_BADINPUT;
		goto out;
	}
	if (html || torch) {
		if (gg_outfile_open(&page, html ? html : torch, oerr, sizeof oerr)) {
			gg_error("%s", oerr);
			rc = GG_EXIT_BADINPUT;
			goto out;
		}
		hf = page.f;
	}
	for (int i = 0; i < nfiles; i++) {
		char err[GG_MAX_ERR + 64];
		if (gg_dump_load(&d[i], files[i], stderr, err, sizeof err)) {
			gg_error("%s", err);
			gg_dump_free(&d[i]);
			rc = GG_EXIT_BADINPUT;
			break;
		}
		loaded++;
		gg_analyze(&an[i], &d[i]);
		if (diff)
			continue;
		if (hf && torch) {
			gg_report_torch_snapshot(hf, &an[i]);
		} else if (report_model(&an[i], &o, json ? stdout : hf ? hf : NULL, json, folded, i)) {
			rc = GG_EXIT_BADINPUT;
			break;
		}
	}
	if (diff && rc == GG_EXIT_OK) {
		struct gg_model mo, mn;
		if (gg_model_build(&mo, &an[0], &o)) {
			gg_error("out of memory");
			rc = GG_EXIT_BADINPUT;
		} else if (gg_model_build(&mn, &an[1], &o)) {
			gg_error("out of memory");
			gg_model_free(&mo);
			rc = GG_EXIT_BADINPUT;
		} else {
			gg_report_diff(stdout, &mo, &mn, json);
			gg_model_free(&mo);
			gg_model_free(&mn);
		}
	}
	/* The page replaces FILE only when whole: a dump that could not be
	 * read leaves FILE as it was. */
	if (hf && rc == GG_EXIT_OK && gg_outfile_commit(&page, oerr, sizeof oerr)) {
		gg_error("%s", oerr);
		rc = GG_EXIT_BADINPUT;
	} else if (hf && rc != GG_EXIT_OK) {
		gg_outfile_abort(&page);
	}
	if (fflush(stdout)) {
		gg_error("writing the report: %s", strerror(errno));
		rc = GG_EXIT_BADINPUT;
	}
	for (int i = 0; i < loaded; i++) {
		gg_analysis_free(&an[i]);
		gg_dump_free(&d[i]);
	}
out:
	free(d);
	free(an);
	free(files);
	return rc;
}

/* ../lib/libgpuguard.so from the directory holding /proc/self/exe. */
static int find_lib(char *out, size_t n)
{
	const char *env = getenv("GPUGUARD_LIB");
	if (env && *env) {
		snprintf(out, n, "%s", env);
		return access(out, R_OK);
	}
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (len <= 0)
		return -1;
	exe[len] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	snprintf(out, n, "%s/../lib/libgpuguard.so", exe);
	char real[PATH_MAX];
	if (realpath(out, real))
		snprintf(out, n, "%s", real);
	return access(out, R_OK);
}

/* The library's options (gpuguard/options.h). The rows that name a flag
 * are `gpuguard run`'s options, each setting its variable for the library,
 * which checks the value. */
static const struct {
	const char *var, *metavar, *def, *syntax, *doc;
} opt_rows[] = {
#define RUN_ROW(id, field, type, def, lo, hi, choices, bad, flag, syntax, doc) \
	{"GPUGUARD_" #id, flag, def, syntax, doc},
    GPUGUARD_OPTIONS(RUN_ROW)
#undef RUN_ROW
};

/* The library's default for var, as its row gives it; "" if none. */
static const char *opt_default(const char *var)
{
	for (size_t i = 0; i < sizeof opt_rows / sizeof opt_rows[0]; i++)
		if (!strcmp(opt_rows[i].var, var))
			return opt_rows[i].def;
	return "";
}

/* "--dump-dir" for GPUGUARD_DUMP_DIR. */
static void run_flag(char *out, size_t n, const char *var)
{
	size_t k = snprintf(out, n, "--");
	for (const char *p = var + strlen("GPUGUARD_"); *p && k + 1 < n; p++)
		out[k++] = *p == '_' ? '-' : (char)(*p - 'A' + 'a');
	out[k] = '\0';
}

/* Writes words to f, wrapped before column 80 with every line but the
 * first (which starts at column *col) indented by indent; a word at column
 * indent starts a line. */
static void help_words(FILE *f, size_t *col, size_t indent, const char *words)
{
	for (const char *w = words; *w;) {
		size_t wl = strcspn(w, " ");
		if (*col != indent && *col + 1 + wl > 79) {
			fprintf(f, "\n%*s", (int)indent, "");
			*col = indent;
		} else if (*col != indent) {
			fputc(' ', f);
			++*col;
		}
		fprintf(f, "%.*s", (int)wl, w);
		*col += wl;
		w += wl;
		w += strspn(w, " ");
	}
}

/* The manual of `gpuguard run`, its synopsis and options from opt_rows;
 * "" when there is no memory for it. */
static const char *help_run(void)
{
	static char *text;
	size_t size, col;
	if (text)
		return text;
	FILE *f = open_memstream(&text, &size);
	if (!f)
		return "";
	char flag[64], item[512];
	fputs("NAME\n    gpuguard run - run a command under a GPU memory ceiling\n\nSYNOPSIS\n    gpuguard run", f);
	col = strlen("    gpuguard run");
	for (size_t i = 0; i < sizeof opt_rows / sizeof opt_rows[0]; i++) {
		if (!opt_rows[i].metavar)
			continue;
		run_flag(flag, sizeof flag, opt_rows[i].var);
		/* One word, so that the wrap never splits a bracket. */
		snprintf(item, sizeof item, "[%s\x01%s]", flag, opt_rows[i].metavar);
		help_words(f, &col, 17, item);
	}
	help_words(f, &col, 17, "[--] CMD [ARGS...]");
	fputs("\n\nDESCRIPTION\n"
	      "    Runs CMD with libgpuguard.so preloaded (put in front of any LD_PRELOAD\n"
	      "    already set). The library is found next to this program: ../lib/\n"
	      "    relative to its own location, as installed and in the build tree.\n"
	      "    GPUGUARD_LIB overrides the path.\n\nOPTIONS\n",
	      f);
	for (size_t i = 0; i < sizeof opt_rows / sizeof opt_rows[0]; i++) {
		if (!opt_rows[i].metavar)
			continue;
		run_flag(flag, sizeof flag, opt_rows[i].var);
		fprintf(f, "    %s %s\n        ", flag, opt_rows[i].metavar);
		col = 8;
		if (*opt_rows[i].def)
			snprintf(item, sizeof item, "sets %s (default %s): %s.", opt_rows[i].var, opt_rows[i].def,
			         opt_rows[i].doc);
		else
			snprintf(item, sizeof item, "sets %s: %s.", opt_rows[i].var, opt_rows[i].doc);
		help_words(f, &col, 8, item);
		snprintf(item, sizeof item, "Accepted: %s.", opt_rows[i].syntax);
		help_words(f, &col, 8, item);
		fputc('\n', f);
	}
	fputs("    Each also takes the form --name=VALUE. Values are checked by the\n"
	      "    library, which names a bad one on stderr.\n\n"
	      "EXIT STATUS\n"
	      "    CMD's own; 1 usage error; 2 the library or CMD could not be found.\n",
	      f);
	if (fclose(f) != 0) {
		free(text);
		text = NULL;
		return "";
	}
	/* The flag and its metavariable were kept together as one word. */
	for (char *p = text; (p = strchr(p, '\x01')); p++)
		*p = ' ';
	return text;
}

/* One of opt_rows at argv[*i] (either form opt_value takes): sets its
 * variable, 0; -1 when argv[*i] is none of them. */
static int run_option(int argc, char **argv, int *i)
{
	char flag[64];
	for (size_t k = 0; k < sizeof opt_rows / sizeof opt_rows[0]; k++) {
		if (!opt_rows[k].metavar)
			continue;
		run_flag(flag, sizeof flag, opt_rows[k].var);
		const char *v = opt_value(argc, argv, i, flag);
		if (v)
			return setenv(opt_rows[k].var, v, 1);
	}
	return -1;
}

static int cmd_run(int argc, char **argv)
{
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(help_run(), stdout);
			return GG_EXIT_OK;
		} else if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (run_option(argc, argv, &i) == 0) {
			continue;
		} else if (a[0] == '-') {
			char m[128];
			snprintf(m, sizeof m, "run: unknown option '%.64s'", a);
			return usage_err(m, help_run());
		} else {
			break;
		}
	}
	if (i >= argc)
		return usage_err("run needs a command", help_run());
	char lib[PATH_MAX + 32];
	if (find_lib(lib, sizeof lib)) {
		gg_error("cannot find libgpuguard.so (looked at %s); set GPUGUARD_LIB", lib);
		return GG_EXIT_BADINPUT;
	}
	const char *old = getenv("LD_PRELOAD");
	if (old && *old) {
		size_t n = strlen(lib) + strlen(old) + 2;
		char *pre = malloc(n);
		if (!pre)
			return GG_EXIT_BADINPUT;
		/* In front of everything but a sanitizer runtime, which must be
		 * the first object loaded. */
		size_t first = strcspn(old, ": ");
		const char *base = old;
		for (const char *q = old; q < old + first; q++)
			if (*q == '/')
				base = q + 1;
		int san = !strncmp(base, "libasan", 7) || !strncmp(base, "libtsan", 7) ||
		          !strncmp(base, "libubsan", 8) || !strncmp(base, "libclang_rt.", 12);
		if (san && old[first])
			snprintf(pre, n, "%.*s:%s:%s", (int)first, old, lib, old + first + 1);
		else if (san)
			snprintf(pre, n, "%s:%s", old, lib);
		else
			snprintf(pre, n, "%s:%s", lib, old);
		setenv("LD_PRELOAD", pre, 1);
		free(pre);
	} else {
		setenv("LD_PRELOAD", lib, 1);
	}
	execvp(argv[i], argv + i);
	int e = errno;
	gg_error("%s: %s", argv[i], strerror(e));
	return e == ENOENT ? 127 : 126;
}

/* ---- dump ---- */

/* Reads NAME=... from /proc/PID/environ into out; 0 when found. */
static int proc_env(long pid, const char *name, char *out, size_t n)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/environ", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t nl = strlen(name);
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = 1;
	while ((len = getdelim(&line, &cap, '\0', f)) > 0) {
		if ((size_t)len > nl && !strncmp(line, name, nl) && line[nl] == '=') {
			snprintf(out, n, "%s", line + nl + 1);
			rc = 0;
			break;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

/* /proc/PID/comm, for messages (escaped when printed); "?" when gone. */
static void proc_comm(long pid, char *out, size_t n)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/comm", pid);
	FILE *f = fopen(path, "re");
	if (!f || !fgets(out, (int)n, f))
		snprintf(out, n, "?");
	else
		out[strcspn(out, "\n")] = '\0';
	if (f)
		fclose(f);
}

/* 1 when PID maps a file named libgpuguard*.so* (the library, preloaded or
 * linked), 0 when not, -1 with errno when /proc/PID/maps cannot be read. */
static int has_library(long pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/maps", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char *line = NULL;
	size_t cap = 0;
	int found = 0;
	errno = 0;
	while (!found && getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = '\0';
		const char *name = strrchr(line, '/');
		found = name && !strncmp(name + 1, "libgpuguard", 11) && strstr(name, ".so");
	}
	int err = ferror(f) ? (errno ? errno : EIO) : 0;
	free(line);
	fclose(f);
	if (!found && err) {
		errno = err;
		return -1;
	}
	return found;
}

/* The processes under root (children, their children...) that map the
 * library, at most max of them into out; the number found. From each
 * /proc/N/stat's parent field: no CONFIG_PROC_CHILDREN needed. */
static size_t library_descendants(long root, long *out, size_t max)
{
	DIR *dp = opendir("/proc");
	if (!dp)
		return 0;
	struct pp {
		long pid, ppid;
	} *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(dp))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		char path[64], buf[512];
		snprintf(path, sizeof path, "/proc/%ld/stat", pid);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		size_t got = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[got] = '\0';
		/* "pid (comm) state ppid ...": comm may hold ')' and spaces. */
		char *rp = strrchr(buf, ')');
		long ppid;
		char state;
		if (!rp || sscanf(rp + 1, " %c %ld", &state, &ppid) != 2)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 256;
			struct pp *nv = realloc(v, nc * sizeof *v);
			if (!nv)
				break;
			v = nv;
			cap = nc;
		}
		v[n++] = (struct pp){pid, ppid};
	}
	closedir(dp);
	/* Breadth first from root; each process is queued once (marked by
	 * turning its parent to -1), so a cycle from pid reuse cannot loop. */
	long *queue = malloc((n + 1) * sizeof *queue);
	size_t head = 0, tail = 0, found = 0;
	if (queue) {
		queue[tail++] = root;
		while (head < tail) {
			long p = queue[head++];
			for (size_t i = 0; i < n; i++) {
				if (v[i].ppid != p || v[i].pid == root)
					continue;
				v[i].ppid = -1;
				queue[tail++] = v[i].pid;
				if (has_library(v[i].pid) == 1) {
					if (found < max)
						out[found] = v[i].pid;
					found++;
				}
			}
		}
	}
	free(queue);
	free(v);
	return found;
}

/* "; processes under it with libgpuguard: 7 (python3), 9 (worker): run
 * gpuguard dump on one of them", or "" when there are none. */
static void descendants_hint(long pid, char *out, size_t n)
{
	long kids[8];
	size_t k = library_descendants(pid, kids, 8);
	out[0] = '\0';
	if (!k)
		return;
	size_t o = (size_t)snprintf(out, n, "; processes under it with libgpuguard: ");
	for (size_t i = 0; i < k && i < 8 && o < n; i++) {
		char comm[64];
		proc_comm(kids[i], comm, sizeof comm);
		o += (size_t)snprintf(out + o, n - o, "%s%ld (%s)", i ? ", " : "", kids[i], comm);
	}
	if (o < n && k > 8)
		o += (size_t)snprintf(out + o, n - o, " and %zu more", k - 8);
	if (o < n)
		snprintf(out + o, n - o, ": run gpuguard dump on %s", k == 1 ? "that one" : "one of them");
}

/* Every character printable (gg_text_next): a path safe to print as is. */
static int text_safe(const char *s)
{
	const char *end = s + strlen(s);
	while (s < end) {
		int safe;
		s += gg_text_next(s, end, &safe);
		if (!safe)
			return 0;
	}
	return 1;
}

/* The dumps of pid in dir (named gpuguard-HOST-PID-....jsonl, not a
 * temporary, printable): how many, and the newest modified at or after
 * `since` into out (0 when there is one, 1 when none). */
static int scan_dumps(const char *dir, long pid, time_t since, char *out, size_t n, unsigned *count,
                      struct timespec *newest)
{
	DIR *dp = opendir(dir);
	if (count)
		*count = 0;
	if (!dp)
		return -1;
	char pidstr[32];
	snprintf(pidstr, sizeof pidstr, "-%ld-", pid);
	struct dirent *e;
	struct timespec best = {0, 0};
	int found = 0;
	while ((e = readdir(dp))) {
		const char *nm = e->d_name;
		size_t l = strlen(nm);
		if (strncmp(nm, "gpuguard-", 9) || !strstr(nm, pidstr) || l < 6 || strcmp(nm + l - 6, ".jsonl") ||
		    !text_safe(nm))
			continue;
		char path[PATH_MAX];
		if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, nm) >= sizeof path)
			continue;
		struct stat st;
		if (stat(path, &st) || !S_ISREG(st.st_mode))
			continue;
		if (count)
			(*count)++;
		if (st.st_mtime < since)
			continue;
		if (!found || st.st_mtim.tv_sec > best.tv_sec ||
		    (st.st_mtim.tv_sec == best.tv_sec && st.st_mtim.tv_nsec > best.tv_nsec)) {
			best = st.st_mtim;
			snprintf(out, n, "%s", path);
			found = 1;
		}
	}
	closedir(dp);
	if (newest)
		*newest = best;
	return found ? 0 : 1;
}

/* 1 when PID has a handler for sig (SigCgt in /proc/PID/status), 0 when it
 * has none, -1 when that cannot be read. */
static int signal_caught(long pid, int sig)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	int rc = -1;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "SigCgt:", 7))
			continue;
		unsigned long long mask = strtoull(line + 7, NULL, 16);
		rc = sig >= 1 && sig <= 64 && (mask >> (sig - 1)) & 1;
		break;
	}
	fclose(f);
	return rc;
}

/* The library caught the signal and no dump came: say whether its rate
 * limit explains that, from the dumps of pid already in dir. */
static void explain_no_dump(long pid, const char *comm, const char *dir, int timeout, int sig)
{
	char maxv[64], ivv[64], newest_path[PATH_MAX] = "";
	snprintf(maxv, sizeof maxv, "%s", opt_default("GPUGUARD_DUMP_MAX"));
	snprintf(ivv, sizeof ivv, "%s", opt_default("GPUGUARD_DUMP_INTERVAL"));
	proc_env(pid, "GPUGUARD_DUMP_MAX", maxv, sizeof maxv);
	proc_env(pid, "GPUGUARD_DUMP_INTERVAL", ivv, sizeof ivv);
	unsigned count = 0;
	struct timespec newest;
	scan_dumps(dir, pid, 0, newest_path, sizeof newest_path, &count, &newest);
	char *end;
	unsigned long long max = strtoull(maxv, &end, 10);
	int max_ok = maxv[0] >= '0' && maxv[0] <= '9' && !*end;
	/* Read as the library reads it; past a day it explains nothing. */
	uint64_t iv;
	int64_t interval = gpuguard_parse_duration_ms(ivv, &iv) == 0 && iv <= 86400000 ? (int64_t)iv : -1;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t age_ms = (int64_t)(now.tv_sec - newest.tv_sec) * 1000 + (now.tv_nsec - newest.tv_nsec) / 1000000;
	char what[PATH_MAX + 256];
	if (max_ok && count >= max && max > 0)
		snprintf(
		    what, sizeof what,
		    "rate-limited: it has written %u dumps here and GPUGUARD_DUMP_MAX is %s (the suppressed dump is "
		    "counted in the trailer of the next one written)",
		    count, maxv);
	else if (count && interval >= 0 && age_ms >= 0 && age_ms < interval + (int64_t)timeout * 1000)
		snprintf(
		    what, sizeof what,
		    "rate-limited: its last dump here, %s, is %.1f s old and GPUGUARD_DUMP_INTERVAL is %s (ask again "
		    "later; the suppressed dump is counted in the next one's trailer)",
		    newest_path, (double)age_ms / 1000.0, ivv);
	else
		snprintf(what, sizeof what,
		         "not its rate limit as far as the dumps here show (GPUGUARD_DUMP_MAX=%s, "
		         "GPUGUARD_DUMP_INTERVAL=%s): "
		         "the library names a failed write on the process's stderr (is the directory writable?)",
		         maxv, ivv);
	gg_error(
	    "process %ld (%s) has libgpuguard loaded and caught signal %d, but wrote no new dump in %s within %d s: "
	    "%s",
	    pid, comm, sig, dir, timeout, what);
}

static int cmd_dump(int argc, char **argv)
{
	int timeout = 10;
	const char *pidarg = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(help_dump, stdout);
			return GG_EXIT_OK;
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			if (parse_int(argv[++i], &timeout))
				return usage_err("--timeout takes seconds", help_dump);
		} else if (!pidarg && argv[i][0] != '-') {
			pidarg = argv[i];
		} else {
			return usage_err("dump takes one PID", help_dump);
		}
	}
	char *end = NULL;
	errno = 0;
	long pid = pidarg ? strtol(pidarg, &end, 10) : 0;
	if (!pidarg || errno || *end || pid <= 0 || pid > INT_MAX)
		return usage_err("dump needs a PID", help_dump);
	char val[PATH_MAX], dir[PATH_MAX * 2], cwd[PATH_MAX], link[64], comm[64], hint[1024];
	snprintf(link, sizeof link, "/proc/%ld/cwd", pid);
	ssize_t cl = readlink(link, cwd, sizeof cwd - 1);
	if (cl < 0) {
		gg_error("process %ld: %s", pid, strerror(errno));
		return GG_EXIT_BADINPUT;
	}
	cwd[cl] = '\0';
	proc_comm(pid, comm, sizeof comm);
	/* The default action of the dump signal is to terminate: only a process
	 * with the library in it is ever sent it. An init that forwards signals
	 * (tini, dumb-init, a shell) would pass it to a child that may not
	 * have the library armed, so it is not signalled either; its children
	 * with the library are named instead, for the caller to choose. */
	int lib = has_library(pid);
	if (lib < 0) {
		gg_error(
		    "process %ld (%s): cannot read /proc/%ld/maps to check for libgpuguard (%s); not signalling it",
		    pid, comm, pid, strerror(errno));
		return GG_EXIT_BADINPUT;
	}
	if (lib == 0) {
		descendants_hint(pid, hint, sizeof hint);
		gg_error("process %ld (%s) does not have libgpuguard loaded; not signalling it (the signal would "
		         "terminate it, or be forwarded to a child that may not catch it)%s",
		         pid, comm, hint[0] ? hint : ", and no process under it has the library");
		return GG_EXIT_BADINPUT;
	}
	int sig = SIGUSR2;
	if (!proc_env(pid, "GPUGUARD_DUMP_SIGNAL", val, sizeof val)) {
		if (gpuguard_dump_signal_parse(val, &sig, NULL)) {
			/* The library says so on its stderr and falls back, as here. */
			gg_warning("process %ld has GPUGUARD_DUMP_SIGNAL=%s, which the library does not accept; it "
			           "listens on SIGUSR2 instead",
			           pid, val);
			sig = SIGUSR2;
		} else if (sig == 0) {
			gg_error("process %ld has dumps on signal disabled (GPUGUARD_DUMP_SIGNAL=%s)", pid, val);
			return GG_EXIT_BADINPUT;
		}
	}
	if (!proc_env(pid, "GPUGUARD_DUMP_DIR", val, sizeof val) && val[0]) {
		if (val[0] == '/')
			snprintf(dir, sizeof dir, "%s", val);
		else
			snprintf(dir, sizeof dir, "%s/%s", cwd, val);
	} else {
		snprintf(dir, sizeof dir, "%s", cwd);
	}
	if (!text_safe(dir)) {
		/* The path is printed for scripts to use: never a changed one. */
		gg_error("process %ld: its dump directory '%s' has control characters or bytes that are not UTF-8; not "
		         "asking for a dump",
		         pid, dir);
		return GG_EXIT_BADINPUT;
	}
	int caught = signal_caught(pid, sig);
	if (caught <= 0) {
		descendants_hint(pid, hint, sizeof hint);
		if (caught == 0)
			gg_error(
			    "process %ld (%s) has libgpuguard loaded but no handler for signal %d yet (the library "
			    "installs it at the first device allocation); not signalling it: it would be killed%s",
			    pid, comm, sig, hint);
		else
			gg_error("process %ld (%s): cannot read /proc/%ld/status to see its signal handlers; not "
			         "signalling it",
			         pid, comm, pid);
		return GG_EXIT_BADINPUT;
	}
	time_t since = time(NULL) - 1;
	char before[PATH_MAX] = "";
	scan_dumps(dir, pid, since, before, sizeof before, NULL, NULL);
	if (kill((pid_t)pid, sig)) {
		gg_error("signalling process %ld: %s", pid, strerror(errno));
		return GG_EXIT_BADINPUT;
	}
	struct timespec step = {0, 50 * 1000 * 1000};
	for (long waited = 0; waited <= (long)timeout * 1000; waited += 50) {
		char path[PATH_MAX];
		if (scan_dumps(dir, pid, since, path, sizeof path, NULL, NULL) == 0 && strcmp(path, before)) {
			puts(path);
			return GG_EXIT_OK;
		}
		nanosleep(&step, NULL);
	}
	explain_no_dump(pid, comm, dir, timeout, sig);
	return GG_EXIT_BADINPUT;
}

/* ---- check ---- */

/* The libgpuguard entry of PID's /etc/ld.so.preload, seen through its own
 * root (/proc/PID/root: a container's, where the policy mounts the file
 * from the pod's gpuguard-bin volume; issue 23), into out: 1 when one is
 * named, 0 when none (or the file is absent or unreadable). The loader
 * splits the file at spaces, tabs, newlines and colons. */
static int preload_file_entry(long pid, char *out, size_t n)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%ld/root/etc/ld.so.preload", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t len = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[len] = '\0';
	for (char *save = NULL, *t = strtok_r(buf, " \t\n:", &save); t; t = strtok_r(NULL, " \t\n:", &save)) {
		const char *base = strrchr(t, '/');
		if (!strncmp(base ? base + 1 : t, "libgpuguard", 11)) {
			snprintf(out, n, "%s", t);
			return 1;
		}
	}
	return 0;
}

/* Why PID has no library: LD_PRELOAD unset, naming a missing file, or
 * naming no libgpuguard; or /etc/ld.so.preload naming one the loader did not
 * map. Into out. */
static void why_not_loaded(long pid, char *out, size_t n)
{
	char pre[4096], file[4096];
	if (preload_file_entry(pid, file, sizeof file)) {
		char at[sizeof file + 64];
		snprintf(at, sizeof at, "/proc/%ld/root%s", pid, file);
		if (file[0] == '/' && access(at, R_OK) != 0)
			snprintf(out, n, "/etc/ld.so.preload names %.256s, which %s, so the loader ignored it", file,
			         errno == ENOENT ? "does not exist" : "cannot be read");
		else
			snprintf(out, n,
			         "/etc/ld.so.preload names %.256s, but it is not mapped (the process started before "
			         "the file was there, or the loader refused it: see the process's stderr)",
			         file);
		return;
	}
	if (proc_env(pid, "LD_PRELOAD", pre, sizeof pre) != 0) {
		snprintf(out, n,
		         "LD_PRELOAD is not set in it, and its /etc/ld.so.preload names no libgpuguard (the "
		         "policy mounts that file from the pod's gpuguard-bin volume)");
		return;
	}
	/* LD_PRELOAD is a list separated by spaces or colons */
	for (char *save = NULL, *t = strtok_r(pre, " :", &save); t; t = strtok_r(NULL, " :", &save)) {
		const char *base = strrchr(t, '/');
		base = base ? base + 1 : t;
		if (strncmp(base, "libgpuguard", 11) != 0)
			continue;
		if (t[0] == '/' && access(t, R_OK) != 0) {
			snprintf(out, n, "LD_PRELOAD names %.256s, which %s, so the loader ignored it", t,
			         errno == ENOENT ? "does not exist" : "cannot be read");
			return;
		}
		snprintf(out, n,
		         "LD_PRELOAD names %.256s, but it is not mapped (a setuid program, or the loader "
		         "refused it: see the process's stderr)",
		         t);
		return;
	}
	snprintf(out, n, "LD_PRELOAD names no libgpuguard");
}

/* Pod scope (the default): the region the process names, read as the
 * process sees it (/proc/PID/root: a probe in another mount namespace sees
 * the container's /dev/shm). Not there yet is fine: no process has made
 * its first GPU call. Any other failure means each process will fall back
 * to a ceiling of its own (docs/dumps.md), which the probe reports. */
static int check_region(long pid, const char *comm)
{
	char scope[64], path[4096], at[4200];
	if (proc_env(pid, "GPUGUARD_SCOPE", scope, sizeof scope) == 0 && !strcmp(scope, "process"))
		return 0;
	if (proc_env(pid, "GPUGUARD_SHARED", path, sizeof path) != 0 || !path[0])
		snprintf(path, sizeof path, "%s", GPUGUARD_REGION_DEFAULT_PATH);
	if (path[0] != '/')
		return 0; /* the library refuses a relative path itself, and says so */
	snprintf(at, sizeof at, "/proc/%ld/root%s", pid, path);
	static struct gg_region r; /* 100 KiB: not on the stack */
	char err[1024];
	enum gg_read_why why;
	if (gg_region_read_why(&r, at, err, sizeof err, &why) == 0 || why == GG_READ_MISSING)
		return 0;
	gg_error("check: process %ld (%s): its pod region is not usable (%s), so each process of the pod "
	         "falls back to a ceiling of its own and the pod may hold its limit once per process; remove "
	         "the file or fix GPUGUARD_SHARED",
	         pid, text_safe(comm) ? comm : "?", err);
	return -1;
}

static int cmd_check(int argc, char **argv)
{
	const char *pidarg = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(help_check, stdout);
			return GG_EXIT_OK;
		}
		if (pidarg || argv[i][0] == '-')
			return usage_err("check: one PID at most", help_check);
		pidarg = argv[i];
	}
	char *end = NULL;
	errno = 0;
	long pid = pidarg ? strtol(pidarg, &end, 10) : 1;
	if (pidarg && (errno || *end || pid <= 0 || pid > INT_MAX))
		return usage_err("check: PID must be a process id", help_check);
	char comm[64];
	proc_comm(pid, comm, sizeof comm);
	int has = has_library(pid);
	if (has < 0) {
		gg_error("check: process %ld: %s", pid, strerror(errno));
		return GG_EXIT_BADINPUT;
	}
	long target = pid;
	if (!has) {
		long kids[1];
		if (library_descendants(pid, kids, 1) == 0) {
			char why[512];
			why_not_loaded(pid, why, sizeof why);
			gg_error("check: process %ld (%s) does not run with libgpuguard: %s; no ceiling is enforced",
			         pid, text_safe(comm) ? comm : "?", why);
			return GG_EXIT_BADINPUT;
		}
		target = kids[0];
		proc_comm(target, comm, sizeof comm);
	}
	char limit[4096];
	if (proc_env(target, "GPUGUARD_LIMIT", limit, sizeof limit) != 0) {
		gg_error("check: process %ld (%s) runs with libgpuguard but GPUGUARD_LIMIT is not set in it: no "
		         "ceiling is enforced",
		         target, text_safe(comm) ? comm : "?");
		return GG_EXIT_BADINPUT;
	}
	struct gpuguard_limits l;
	if (gpuguard_parse_limit(limit, &l) != 0) {
		gg_error("check: process %ld (%s): GPUGUARD_LIMIT=\"%.128s\" is not valid (accepted: a quantity such "
		         "as 20Gi, a percentage such as 90%%, or a list such as 0=20Gi,1=8Gi,*=4Gi); the library "
		         "refuses every allocation",
		         target, text_safe(comm) ? comm : "?", text_safe(limit) ? limit : "(unprintable)");
		return GG_EXIT_BADINPUT;
	}
	if (check_region(target, comm) != 0)
		return GG_EXIT_BADINPUT;
	printf("gpuguard check: process %ld (%s) runs with libgpuguard, GPUGUARD_LIMIT=%s\n", target,
	       text_safe(comm) ? comm : "?", text_safe(limit) ? limit : "(unprintable)");
	return GG_EXIT_OK;
}

static int cmd_top(int argc, char **argv)
{
	const char *region = NULL, *discover = NULL, *v;
	uint64_t interval = 1000;
	int once = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(help_top, stdout);
			return GG_EXIT_OK;
		} else if (!strcmp(argv[i], "--once")) {
			once = 1;
		} else if ((v = opt_value(argc, argv, &i, "--discover"))) {
			discover = v;
		} else if ((v = opt_value(argc, argv, &i, "--region"))) {
			region = v;
		} else if ((v = opt_value(argc, argv, &i, "--interval"))) {
			if (parse_duration_ms(v, 10, 3600000, &interval))
				return usage_err("top: --interval takes a duration from 10ms to 1h (500ms, 1.5s, 1m)",
				                 help_top);
		} else {
			char m[128];
			snprintf(m, sizeof m, "top: unknown option or missing value '%.64s'", argv[i]);
			return usage_err(m, help_top);
		}
	}
	if (discover && region)
		return usage_err("top: --discover and --region exclude each other", help_top);
	if (discover) {
		/* The node's cards, from the same walk as the node exporter's. */
		char err[GG_REGION_ERR];
		enum gg_read_why why;
		FILE *sink = fopen("/dev/null", "w");
		int rc = sink ? gg_metrics_discover(sink, discover, err, sizeof err, &why) : -1;
		if (sink)
			fclose(sink);
		else
			snprintf(err, sizeof err, "/dev/null: %s", strerror(errno));
		if (rc) {
			gg_error("%s", err);
			return GG_EXIT_BADINPUT;
		}
		gg_cards_render_text(stdout);
		return GG_EXIT_OK;
	}
	return gg_top_run(gg_region_path(region), interval, once);
}

static int cmd_metrics(int argc, char **argv)
{
	const char *region = NULL, *listen = NULL, *discover = NULL, *v;
	uint64_t timeout = 5000;
	int max_conns = GG_HTTP_MAX_CONNS;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(help_metrics, stdout);
			return GG_EXIT_OK;
		} else if ((v = opt_value(argc, argv, &i, "--region"))) {
			region = v;
		} else if ((v = opt_value(argc, argv, &i, "--listen"))) {
			listen = v;
		} else if ((v = opt_value(argc, argv, &i, "--discover"))) {
			discover = v;
		} else if ((v = opt_value(argc, argv, &i, "--timeout"))) {
			if (parse_duration_ms(v, 10, 3600000, &timeout))
				return usage_err("metrics: --timeout takes a duration from 10ms to 1h (500ms, 5s)",
				                 help_metrics);
		} else if ((v = opt_value(argc, argv, &i, "--max-connections"))) {
			if (parse_int(v, &max_conns) || max_conns < 1 || max_conns > GG_HTTP_CONNS_LIMIT)
				return usage_err("metrics: --max-connections takes a number from 1 to 4096",
				                 help_metrics);
		} else {
			char m[128];
			snprintf(m, sizeof m, "metrics: unknown option or missing value '%.64s'", argv[i]);
			return usage_err(m, help_metrics);
		}
	}
	if (discover && region)
		return usage_err("metrics: --discover and --region exclude each other", help_metrics);
	gg_metrics_discover_root = discover;
	if (listen)
		return gg_metrics_serve(gg_region_path(region), listen, timeout, max_conns);
	if (discover) {
		char err[GG_REGION_ERR];
		enum gg_read_why why;
		if (gg_metrics_discover(stdout, discover, err, sizeof err, &why)) {
			gg_error("metrics: %s", err);
			return GG_EXIT_BADINPUT;
		}
		return fflush(stdout) || ferror(stdout) ? GG_EXIT_BADINPUT : GG_EXIT_OK;
	}
	return gg_metrics_print(gg_region_path(region));
}

static const char *help_for(const char *cmd)
{
	if (!strcmp(cmd, "top"))
		return help_top;
	if (!strcmp(cmd, "metrics"))
		return help_metrics;
	if (!strcmp(cmd, "report"))
		return help_report;
	if (!strcmp(cmd, "run"))
		return help_run();
	if (!strcmp(cmd, "dump"))
		return help_dump;
	if (!strcmp(cmd, "check"))
		return help_check;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage_err("no command given", help_main);
	const char *cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		fputs(help_main, stdout);
		return GG_EXIT_OK;
	}
	if (!strcmp(cmd, "help")) {
		if (argc < 3) {
			fputs(help_main, stdout);
			return GG_EXIT_OK;
		}
		const char *h = help_for(argv[2]);
		if (!h)
			return usage_err("help: no such command", help_main);
		fputs(h, stdout);
		return GG_EXIT_OK;
	}
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("gpuguard %s (dump format %d)\n", GPUGUARD_VERSION, GPUGUARD_DUMP_FORMAT);
		return GG_EXIT_OK;
	}
	if (!strcmp(cmd, "report"))
		return cmd_report(argc - 1, argv + 1);
	if (!strcmp(cmd, "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(cmd, "dump"))
		return cmd_dump(argc - 1, argv + 1);
	if (!strcmp(cmd, "top"))
		return cmd_top(argc - 1, argv + 1);
	if (!strcmp(cmd, "check"))
		return cmd_check(argc - 1, argv + 1);
	if (!strcmp(cmd, "metrics"))
		return cmd_metrics(argc - 1, argv + 1);
	char m[128];
	snprintf(m, sizeof m, "unknown command '%.64s'", cmd);
	return usage_err(m, help_main);
}
