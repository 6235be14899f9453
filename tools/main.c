/* gpuguard command: subcommand dispatch, help, and the small subcommands
 * (run, dump). `report` reads dumps with load.c and prints with output.c and
 * html.c; `top` and `metrics` read the pod region with region.c and show it
 * with live.c. Exit codes everywhere: 0 ok, 1 usage, 2 bad input or failure. */
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
#include <gpuguard/region.h>

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
    "    gpuguard report [--json | --folded | --html FILE] [--top N] [--frames N] DUMP...\n"
    "    gpuguard report --diff [--json] OLD NEW\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads dumps written by libgpuguard (JSON Lines, format described in\n"
    "    <gpuguard/dump.h>) and prints, for each, a diagnosis first: what\n"
    "    happened, the evidence, and what to change. Diagnoses:\n"
    "      ceiling reached       a request did not fit GPUGUARD_LIMIT\n"
    "      device full           the driver refused while under the ceiling\n"
    "      fragmentation         free memory was enough, yet the request failed\n"
    "      leak suspected        old live allocations from one site, growing\n"
    "      host memory pressure  the cgroup is near its limit or has OOM kills\n"
    "    Then the views: devices against their ceilings, top call sites by live\n"
    "    bytes and by count with their stacks, a size histogram, fragmentation\n"
    "    figures, a usage timeline from the history, the host, the configuration.\n"
    "\n"
    "    With several dumps, one report each, in order (--json: one JSON document\n"
    "    each). The first dump that cannot be read stops the run.\n"
    "\n"
    "    A dump cut short (no end trailer, or a partial last line) is read up to\n"
    "    its last whole record with a warning. A dump of a newer format than\n"
    "    this gpuguard reads is refused.\n"
    "\n"
    "OPTIONS\n"
    "    --json         machine-readable report (stable keys; \"gpuguard_report\": 1)\n"
    "    --folded       folded stacks of live bytes, root first, for flamegraph.pl\n"
    "                   or speedscope: \"frame;frame;frame BYTES\"\n"
    "    --html FILE    one self-contained HTML page with SVG charts (timeline, size\n"
    "                   histogram, devices, flame graph); no network access\n"
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
    "    PyTorch pattern live cuMemAlloc/hipMalloc sizes of 2 MiB, 20 MiB, or 2 MiB\n"
    "                    multiples over 10 MiB (the caching allocator's segments) in\n"
    "                    at least 80% of live allocations.\n"
    "    VMM holes       unmapped runs between mapped chunks of a reservation\n"
    "                    (cuMemAddressReserve; PyTorch expandable segments, vLLM sleep\n"
    "                    mode): count, and the largest. A request larger than the\n"
    "                    largest hole needs new address space or fails to map\n"
    "                    contiguously.\n"
    "\n"
    "EXIT STATUS\n"
    "    0 report written; 1 usage error; 2 a dump could not be read (the message\n"
    "    names FILE:LINE and what is wrong), or its format is newer.\n";

static const char help_run[] = "NAME\n"
                               "    gpuguard run - run a command under a GPU memory ceiling\n"
                               "\n"
                               "SYNOPSIS\n"
                               "    gpuguard run [--limit Q] [--dump-dir D] [--scope S] [--shared PATH]\n"
                               "                 [--on-limit L] [--context-reserve Q] [--] CMD [ARGS...]\n"
                               "\n"
                               "DESCRIPTION\n"
                               "    Runs CMD with libgpuguard.so preloaded (put in front of any LD_PRELOAD\n"
                               "    already set). The library is found next to this program: ../lib/\n"
                               "    relative to its own location, as installed and in the build tree.\n"
                               "    GPUGUARD_LIB overrides the path.\n"
                               "\n"
                               "OPTIONS\n"
                               "    --limit Q      sets GPUGUARD_LIMIT (e.g. 4Gi, 80%, 0=4Gi,1=8Gi)\n"
                               "    --dump-dir D   sets GPUGUARD_DUMP_DIR, where dumps are written\n"
                               "    --scope S      sets GPUGUARD_SCOPE: pod (one budget for every process\n"
                               "                   sharing the region file) or process\n"
                               "    --shared PATH  sets GPUGUARD_SHARED, the pod region file\n"
                               "    --on-limit L   sets GPUGUARD_ON_LIMIT: fail, or wait:2s to wait for memory\n"
                               "    --context-reserve Q\n"
                               "                   sets GPUGUARD_CONTEXT_RESERVE, charged per CUDA context\n"
                               "    Each also takes the form --name=VALUE. Values are checked by the\n"
                               "    library, which names a bad one on stderr.\n"
                               "\n"
                               "EXIT STATUS\n"
                               "    CMD's own; 1 usage error; 2 the library or CMD could not be found.\n";

static const char help_dump[] = "NAME\n"
                                "    gpuguard dump - ask a running process for an allocation dump\n"
                                "\n"
                                "SYNOPSIS\n"
                                "    gpuguard dump [--timeout SECONDS] PID\n"
                                "\n"
                                "DESCRIPTION\n"
                                "    Sends PID its dump signal (GPUGUARD_DUMP_SIGNAL from its environment,\n"
                                "    default SIGUSR2) and prints the path of the new dump once it appears in\n"
                                "    its GPUGUARD_DUMP_DIR (relative to its working directory; default its\n"
                                "    working directory). Waits at most --timeout seconds (default 10).\n"
                                "    A process that does not catch that signal (no library, or one that has\n"
                                "    not touched the GPU yet) is not sent it: it would be killed.\n"
                                "\n"
                                "EXIT STATUS\n"
                                "    0 the path was printed; 1 usage error; 2 no such process, no permission,\n"
                                "    dumps disabled in it, or no dump appeared in time.\n";

static const char help_top[] = "NAME\n"
                               "    gpuguard top - live view of a pod's GPU memory budget\n"
                               "\n"
                               "SYNOPSIS\n"
                               "    gpuguard top [--region PATH] [--interval DURATION] [--once]\n"
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
                               "\n"
                               "    The file is read, never mapped, and checked before use; a symbolic link\n"
                               "    is refused. Every value in it is shown as found; strings are shown with\n"
                               "    non-printable bytes as \\xNN.\n"
                               "\n"
                               "OPTIONS\n"
                               "    --region PATH        the region file (default: $GPUGUARD_SHARED, else\n"
                               "                         " GPUGUARD_REGION_DEFAULT_PATH ")\n"
                               "    --interval DURATION  time between redraws: 500ms, 2s, 1m or plain seconds\n"
                               "                         (default 1s; 10ms to 1h)\n"
                               "    --once               print one table, without terminal control codes, and exit\n"
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
    "\n"
    "DESCRIPTION\n"
    "    Prints the pod region (see gpuguard help top) in the Prometheus text\n"
    "    exposition format, version 0.0.4. Device series carry the labels\n"
    "    device (the region's entry index), kind (CUDA, HIP, ordinal) and uuid\n"
    "    (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx as nvidia-smi spells it,\n"
    "    HIP-... for HIP, ordinal-N where the device has no UUID). Process series\n"
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
    "    gpuguard_processes{state}                  gauge; live, exited, unknown\n"
    "    gpuguard_process_info{slot,pid,comm,state} 1\n"
    "    gpuguard_process_start_time_seconds        gauge\n"
    "    gpuguard_process_used_bytes                gauge, per process and device\n"
    "                                               (labels slot,pid,comm,device,uuid)\n"
    "\n"
    "    With --listen it serves the same over HTTP until SIGINT or SIGTERM, the\n"
    "    region read afresh for every request: GET or HEAD of /metrics (or /)\n"
    "    answers 200; other paths 404; other methods 405; a request head over\n"
    "    8 KiB 431; a malformed one 400; one not received within the timeout\n"
    "    408; a region that cannot be read 503 with the reason (the server keeps\n"
    "    running). One connection at a time is never waited on: up to 32 are\n"
    "    served together, each closed after the timeout.\n"
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
    "\n"
    "EXIT STATUS\n"
    "    0 printed, or served until stopped; 1 usage error (including a bad\n"
    "    --listen address); 2 the region cannot be read (printing only; see\n"
    "    gpuguard help top), or the address cannot be bound.\n";

static int usage_err(const char *msg, const char *help)
{
	fprintf(stderr, "gpuguard: error: %s\n", msg);
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

/* A duration as GPUGUARD_DUMP_INTERVAL takes it: 500ms, 10s, 2m, 1.5s or
 * plain seconds. Milliseconds in [min, max] into *out; -1 otherwise. */
static int parse_duration_ms(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !(v >= 0) || *s == '-' || *s == '+')
		return -1;
	double scale = 1000;
	if (!strcmp(end, "ms"))
		scale = 1;
	else if (!strcmp(end, "m"))
		scale = 60000;
	else if (*end && strcmp(end, "s"))
		return -1;
	double ms = v * scale;
	if (!(ms >= (double)min && ms <= (double)max))
		return -1;
	*out = (uint64_t)ms;
	return 0;
}

static int cmd_report(int argc, char **argv)
{
	struct gg_opts o = {10, 8};
	int json = 0, folded = 0, diff = 0;
	const char *html = NULL;
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
		} else if (!strcmp(a, "--diff")) {
			diff = 1;
		} else if (!strcmp(a, "--html") && i + 1 < argc) {
			html = argv[++i];
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
	if (nfiles == 0 || (diff && nfiles != 2) || json + folded + (html != NULL) > 1 || (diff && (folded || html))) {
		free(files);
		return usage_err(diff ? "report --diff takes two dumps, and only --json"
		                      : "report needs one or more dumps, and one output format",
		                 help_report);
	}
	struct gg_dump *d = calloc((size_t)nfiles, sizeof *d);
	struct gg_analysis *an = calloc((size_t)nfiles, sizeof *an);
	int rc = GG_EXIT_OK, loaded = 0;
	FILE *hf = NULL;
	if (!d || !an) {
		rc = GG_EXIT_BADINPUT;
		goto out;
	}
	if (html) {
		hf = fopen(html, "w");
		if (!hf) {
			fprintf(stderr, "gpuguard: error: %s: %s\n", html, strerror(errno));
			rc = GG_EXIT_BADINPUT;
			goto out;
		}
	}
	for (int i = 0; i < nfiles; i++) {
		char err[GG_MAX_ERR + 64];
		if (gg_dump_load(&d[i], files[i], stderr, err, sizeof err)) {
			fprintf(stderr, "gpuguard: error: %s\n", err);
			gg_dump_free(&d[i]);
			rc = GG_EXIT_BADINPUT;
			break;
		}
		loaded++;
		gg_analyze(&an[i], &d[i]);
		if (diff)
			continue;
		if (json)
			gg_report_json(stdout, &an[i], &o);
		else if (folded)
			gg_report_folded(stdout, &an[i]);
		else if (hf)
			gg_report_html(hf, &an[i], &o);
		else {
			if (i)
				fputc('\n', stdout);
			gg_report_text(stdout, &an[i], &o);
		}
	}
	if (diff && rc == GG_EXIT_OK)
		gg_report_diff(stdout, &an[0], &an[1], &o, json);
	if (hf && fclose(hf)) {
		fprintf(stderr, "gpuguard: error: %s: %s\n", html, strerror(errno));
		rc = GG_EXIT_BADINPUT;
	}
	if (fflush(stdout)) {
		fprintf(stderr, "gpuguard: error: writing the report: %s\n", strerror(errno));
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

/* `gpuguard run`'s options: each sets one variable for the library. */
static const struct {
	const char *opt, *var;
} run_opts[] = {
    {"--limit", "GPUGUARD_LIMIT"},       {"--dump-dir", "GPUGUARD_DUMP_DIR"},
    {"--scope", "GPUGUARD_SCOPE"},       {"--shared", "GPUGUARD_SHARED"},
    {"--on-limit", "GPUGUARD_ON_LIMIT"}, {"--context-reserve", "GPUGUARD_CONTEXT_RESERVE"},
};

/* One of run_opts at argv[*i] (either form opt_value takes): sets its
 * variable, 0; -1 when argv[*i] is none of them. */
static int run_option(int argc, char **argv, int *i)
{
	for (size_t k = 0; k < sizeof run_opts / sizeof run_opts[0]; k++) {
		const char *v = opt_value(argc, argv, i, run_opts[k].opt);
		if (v)
			return setenv(run_opts[k].var, v, 1);
	}
	return -1;
}

static int cmd_run(int argc, char **argv)
{
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(help_run, stdout);
			return GG_EXIT_OK;
		} else if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (run_option(argc, argv, &i) == 0) {
			continue;
		} else if (a[0] == '-') {
			char m[128];
			snprintf(m, sizeof m, "run: unknown option '%.64s'", a);
			return usage_err(m, help_run);
		} else {
			break;
		}
	}
	if (i >= argc)
		return usage_err("run needs a command", help_run);
	char lib[PATH_MAX + 32];
	if (find_lib(lib, sizeof lib)) {
		fprintf(stderr, "gpuguard: error: cannot find libgpuguard.so (looked at %s); set GPUGUARD_LIB\n", lib);
		return GG_EXIT_BADINPUT;
	}
	const char *old = getenv("LD_PRELOAD");
	if (old && *old) {
		size_t n = strlen(lib) + strlen(old) + 2;
		char *pre = malloc(n);
		if (!pre)
			return GG_EXIT_BADINPUT;
		snprintf(pre, n, "%s:%s", lib, old);
		setenv("LD_PRELOAD", pre, 1);
		free(pre);
	} else {
		setenv("LD_PRELOAD", lib, 1);
	}
	execvp(argv[i], argv + i);
	fprintf(stderr, "gpuguard: error: %s: %s\n", argv[i], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

/* Reads NAME=... from /proc/PID/environ into out; 0 when found. */
static int proc_env(long pid, const char *name, char *out, size_t n)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/environ", pid);
	FILE *f = fopen(path, "r");
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

static const struct {
	const char *name;
	int sig;
} signames[] = {{"SIGUSR1", SIGUSR1},   {"SIGUSR2", SIGUSR2}, {"SIGHUP", SIGHUP},   {"SIGQUIT", SIGQUIT},
                {"SIGWINCH", SIGWINCH}, {"SIGURG", SIGURG},   {"SIGPROF", SIGPROF}, {"SIGTTIN", SIGTTIN}};

static int parse_signal(const char *s)
{
	int v;
	if (!parse_int(s, &v))
		return v < NSIG ? v : -1;
	for (size_t i = 0; i < sizeof signames / sizeof signames[0]; i++)
		if (!strcmp(s, signames[i].name) || !strcmp(s, signames[i].name + 3))
			return signames[i].sig;
	if (!strncmp(s, "SIGRTMIN+", 9) && !parse_int(s + 9, &v) && SIGRTMIN + v <= SIGRTMAX)
		return SIGRTMIN + v;
	return -1;
}

/* The newest regular file in dir whose name mentions the pid and is not a
 * temporary, modified at or after `since`. */
static int newest_dump(const char *dir, long pid, time_t since, char *out, size_t n)
{
	DIR *dp = opendir(dir);
	if (!dp)
		return -1;
	char pidstr[32];
	snprintf(pidstr, sizeof pidstr, "-%ld-", pid); /* gpuguard-HOST-PID-....jsonl */
	struct dirent *e;
	struct timespec best = {0, 0};
	int found = 0;
	while ((e = readdir(dp))) {
		const char *nm = e->d_name;
		size_t l = strlen(nm);
		if (nm[0] == '.' || !strstr(nm, pidstr) || l < 6 || strcmp(nm + l - 6, ".jsonl"))
			continue;
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/%s", dir, nm);
		struct stat st;
		if (stat(path, &st) || !S_ISREG(st.st_mode) || st.st_mtime < since)
			continue;
		if (!found || st.st_mtim.tv_sec > best.tv_sec ||
		    (st.st_mtim.tv_sec == best.tv_sec && st.st_mtim.tv_nsec > best.tv_nsec)) {
			best = st.st_mtim;
			snprintf(out, n, "%s", path);
			found = 1;
		}
	}
	closedir(dp);
	return found ? 0 : 1;
}

/* 1 when PID has a handler for sig (SigCgt in /proc/PID/status), 0 when it
 * has none, -1 when that cannot be read. */
static int signal_caught(long pid, int sig)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	FILE *f = fopen(path, "r");
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
	char val[PATH_MAX], dir[PATH_MAX * 2], cwd[PATH_MAX], link[64];
	snprintf(link, sizeof link, "/proc/%ld/cwd", pid);
	ssize_t cl = readlink(link, cwd, sizeof cwd - 1);
	if (cl < 0) {
		fprintf(stderr, "gpuguard: error: process %ld: %s\n", pid, strerror(errno));
		return GG_EXIT_BADINPUT;
	}
	cwd[cl] = '\0';
	int sig = SIGUSR2;
	if (!proc_env(pid, "GPUGUARD_DUMP_SIGNAL", val, sizeof val)) {
		sig = parse_signal(val);
		if (sig == 0) {
			fprintf(stderr,
			        "gpuguard: error: process %ld has dumps on signal disabled (GPUGUARD_DUMP_SIGNAL=0)\n",
			        pid);
			return GG_EXIT_BADINPUT;
		}
		if (sig < 0) {
			fprintf(stderr, "gpuguard: error: process %ld: cannot read GPUGUARD_DUMP_SIGNAL=%s\n", pid,
			        val);
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
	/* The default action of SIGUSR2 is to terminate: never send it to a
	 * process that has no handler for it (no library, or not armed yet). */
	int caught = signal_caught(pid, sig);
	if (caught == 0) {
		fprintf(stderr,
		        "gpuguard: error: process %ld does not catch signal %d, so it would be killed: not sending it "
		        "(is libgpuguard preloaded, and has the process touched the GPU yet?)\n",
		        pid, sig);
		return GG_EXIT_BADINPUT;
	}
	time_t since = time(NULL) - 1;
	char before[PATH_MAX] = "";
	newest_dump(dir, pid, since, before, sizeof before);
	if (kill((pid_t)pid, sig)) {
		fprintf(stderr, "gpuguard: error: signalling process %ld: %s\n", pid, strerror(errno));
		return GG_EXIT_BADINPUT;
	}
	struct timespec step = {0, 50 * 1000 * 1000};
	for (long waited = 0; waited <= (long)timeout * 1000; waited += 50) {
		char path[PATH_MAX];
		if (newest_dump(dir, pid, since, path, sizeof path) == 0 && strcmp(path, before)) {
			puts(path);
			return GG_EXIT_OK;
		}
		nanosleep(&step, NULL);
	}
	fprintf(stderr,
	        "gpuguard: error: no new dump from process %ld in %s after %d s (signal %d); is libgpuguard preloaded "
	        "in it?\n",
	        pid, dir, timeout, sig);
	return GG_EXIT_BADINPUT;
}

static int cmd_top(int argc, char **argv)
{
	const char *region = NULL, *v;
	uint64_t interval = 1000;
	int once = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(help_top, stdout);
			return GG_EXIT_OK;
		} else if (!strcmp(argv[i], "--once")) {
			once = 1;
		} else if ((v = opt_value(argc, argv, &i, "--region"))) {
			region = v;
		} else if ((v = opt_value(argc, argv, &i, "--interval"))) {
			if (parse_duration_ms(v, 10, 3600000, &interval))
				return usage_err("top: --interval takes a duration from 10ms to 1h (500ms, 2s, 1m)",
				                 help_top);
		} else {
			char m[128];
			snprintf(m, sizeof m, "top: unknown option or missing value '%.64s'", argv[i]);
			return usage_err(m, help_top);
		}
	}
	return gg_top_run(gg_region_path(region), interval, once);
}

static int cmd_metrics(int argc, char **argv)
{
	const char *region = NULL, *listen = NULL, *v;
	uint64_t timeout = 5000;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(help_metrics, stdout);
			return GG_EXIT_OK;
		} else if ((v = opt_value(argc, argv, &i, "--region"))) {
			region = v;
		} else if ((v = opt_value(argc, argv, &i, "--listen"))) {
			listen = v;
		} else if ((v = opt_value(argc, argv, &i, "--timeout"))) {
			if (parse_duration_ms(v, 10, 3600000, &timeout))
				return usage_err("metrics: --timeout takes a duration from 10ms to 1h (500ms, 5s)",
				                 help_metrics);
		} else {
			char m[128];
			snprintf(m, sizeof m, "metrics: unknown option or missing value '%.64s'", argv[i]);
			return usage_err(m, help_metrics);
		}
	}
	if (listen)
		return gg_metrics_serve(gg_region_path(region), listen, timeout);
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
		return help_run;
	if (!strcmp(cmd, "dump"))
		return help_dump;
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
	if (!strcmp(cmd, "metrics"))
		return cmd_metrics(argc - 1, argv + 1);
	char m[128];
	snprintf(m, sizeof m, "unknown command '%.64s'", cmd);
	return usage_err(m, help_main);
}
