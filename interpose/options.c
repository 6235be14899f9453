/* gpuguard: the one file that reads the environment. Every option is a row in
 * gg_option_rows with its default, syntax and one line of doc; README.md's
 * table is checked against it by tests/unit/test_options.c. Options are read
 * with secure_getenv, so a setuid or file-capability program run under the
 * preload ignores them as glibc ignores its own variables there (issue 10,
 * finding 15; tests/scripts/exports.sh checks getenv is not imported). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuguard/region.h"
#include "gpuguard/signals.h"
#include "internal.h"

struct gg_options gg_opt;

const struct gg_option_row gg_option_rows[] = {
    {"GPUGUARD_LIMIT", "", "20Gi | 20G | 21474836480 | 90% | 0=20Gi,1=8Gi,*=4Gi",
     "per-device ceiling; unset = no ceiling (accounting only)"},
    {"GPUGUARD_VERBOSE", "0", "0 | 1", "print the effective configuration once, at the process's first GPU call"},
    {"GPUGUARD_TABLE_SLOTS", "1Mi", "a count, quantity suffixes allowed (64 .. 1Ti)",
     "slots in the live-allocation table; more live allocations spill to a slower area"},
    {"GPUGUARD_CHARGE_MANAGED", "1", "0 | 1", "charge managed (unified) memory to the ceiling"},
    {"GPUGUARD_DUMP_DIR", ".", "a directory path", "where allocation dumps are written"},
    {"GPUGUARD_DUMP_SIGNAL", "SIGUSR2",
     "a signal name or number (SIGUSR2, SIGRTMIN+3); 0 = off; not one that crashes or stops the process",
     "signal that asks for a dump, where the application does not handle it itself"},
    {"GPUGUARD_DUMP_MAX", "10", "a count; 0 = no dumps",
     "dumps written per process at most; later ones are counted as suppressed"},
    {"GPUGUARD_DUMP_INTERVAL", "10s", GPUGUARD_DURATION_SYNTAX,
     "minimum time between two dumps; dumps asked for sooner are counted as suppressed"},
    {"GPUGUARD_DUMP_AT_EXIT", "0", "0 | 1",
     "write a dump at exit (a leak report), from processes that reached a GPU only"},
    {"GPUGUARD_HISTORY", "65536", "a count, quantity suffixes allowed (0 .. 64Mi); 0 = off",
     "recent allocate/free/refusal events kept for dumps"},
    {"GPUGUARD_STACK_DEPTH", "16", "0 .. 64; 0 = off", "frames captured per governed allocation for dumps"},
    {"GPUGUARD_SCOPE", "pod", "pod | process",
     "pod: GPUGUARD_LIMIT is one budget for every process sharing the region file; process: each its own"},
    {"GPUGUARD_SHARED", GPUGUARD_REGION_DEFAULT_PATH, "a file path (never a symlink)",
     "the pod region file (pod scope); every process of the pod must name the same one"},
    {"GPUGUARD_SHARED_MODE", "0600", "an octal mode: 0600, 0660 or 0666",
     "permissions the region file is created with; 0660 for containers running as different users in one group"},
    {"GPUGUARD_CONTEXT_RESERVE", "0", "a quantity: 300Mi, 0.5Gi, 0",
     "device memory charged per process per device for its CUDA context, which no allocation call shows"},
    {"GPUGUARD_ON_LIMIT", "fail", "fail | wait:<duration> (wait:2s, wait:500ms)",
     "past the ceiling: fail at once, or wait up to the duration for memory freed anywhere in the budget"},
    {"GPUGUARD_TERMINATION_LOG", "/dev/termination-log", "a file path; empty = off",
     "the first refusal appends one line here (Kubernetes' termination message) if the file exists and is writable"},
};
const size_t gg_option_nrows = sizeof(gg_option_rows) / sizeof(gg_option_rows[0]);

enum {
	OPT_LIMIT,
	OPT_VERBOSE,
	OPT_TABLE_SLOTS,
	OPT_CHARGE_MANAGED,
	OPT_DUMP_DIR,
	OPT_DUMP_SIGNAL,
	OPT_DUMP_MAX,
	OPT_DUMP_INTERVAL,
	OPT_DUMP_AT_EXIT,
	OPT_HISTORY,
	OPT_STACK_DEPTH,
	OPT_SCOPE,
	OPT_SHARED,
	OPT_SHARED_MODE,
	OPT_CONTEXT_RESERVE,
	OPT_ON_LIMIT,
	OPT_TERMINATION_LOG,
};
static const char *opt_source[sizeof(gg_option_rows) / sizeof(gg_option_rows[0])];
static const char *opt_value[sizeof(gg_option_rows) / sizeof(gg_option_rows[0])];

static const char *env_value(int row)
{
	const char *v = secure_getenv(gg_option_rows[row].name);
	opt_source[row] = v ? "environment" : "default";
	opt_value[row] = v ? v : gg_option_rows[row].def;
	return opt_value[row];
}

static void bad_value(int row, const char *v, const char *consequence)
{
	gg_log(GG_LOG_ERROR, "%s=\"%s\" is not valid; accepted: %s; %s", gg_option_rows[row].name, v,
	       gg_option_rows[row].syntax, consequence);
	opt_source[row] = "environment (invalid)";
}

static int parse_bool(int row, int def)
{
	const char *v = env_value(row);
	if (strcmp(v, "1") == 0)
		return 1;
	if (strcmp(v, "0") == 0)
		return 0;
	bad_value(row, v, def ? "using 1" : "using 0");
	return def;
}

int gg_parse_on_limit(const char *s, uint64_t *wait_ms)
{
	if (strcmp(s, "fail") == 0) {
		*wait_ms = 0;
		return 0;
	}
	/* wait:0 would be "fail" spelt differently; a day is surely a typo */
	if (strncmp(s, "wait:", 5) != 0 || gpuguard_parse_duration_ms(s + 5, wait_ms) != 0 || *wait_ms == 0 ||
	    *wait_ms > 86400000)
		return -1;
	return 0;
}

static void load_pod_options(void)
{
	const char *v = env_value(OPT_SCOPE);
	if (strcmp(v, "pod") == 0 || strcmp(v, "process") == 0) {
		gg_opt.scope_process = v[1] == 'r';
	} else {
		bad_value(OPT_SCOPE, v, "using pod");
		gg_opt.scope_process = 0;
	}
	static char shared[4096];
	v = env_value(OPT_SHARED);
	if (!*v || strlen(v) >= sizeof(shared)) {
		bad_value(OPT_SHARED, v, "using " GPUGUARD_REGION_DEFAULT_PATH);
		v = GPUGUARD_REGION_DEFAULT_PATH;
	}
	snprintf(shared, sizeof shared, "%s", v);
	gg_opt.shared_path = shared;
	v = env_value(OPT_SHARED_MODE);
	if (strcmp(v, "0600") == 0 || strcmp(v, "0660") == 0 || strcmp(v, "0666") == 0) {
		gg_opt.shared_mode = (unsigned)strtoul(v, NULL, 8);
	} else {
		bad_value(OPT_SHARED_MODE, v, "using 0600");
		gg_opt.shared_mode = 0600;
	}
	v = env_value(OPT_CONTEXT_RESERVE);
	if (gpuguard_parse_quantity(v, &gg_opt.context_reserve) != 0 || gg_opt.context_reserve > (1ull << 40)) {
		bad_value(OPT_CONTEXT_RESERVE, v, "using 0");
		gg_opt.context_reserve = 0;
	}
	v = env_value(OPT_ON_LIMIT);
	if (gg_parse_on_limit(v, &gg_opt.wait_ms) != 0) {
		bad_value(OPT_ON_LIMIT, v, "using fail");
		gg_opt.wait_ms = 0;
	}
}

void gg_options_load(void)
{
	memset(&gg_opt, 0, sizeof(gg_opt));
	const char *v = env_value(OPT_LIMIT);
	if (secure_getenv(gg_option_rows[OPT_LIMIT].name)) {
		gg_opt.limit_set = 1;
		static char limit_text[GPUGUARD_REGION_LIMIT_TEXT];
		snprintf(limit_text, sizeof limit_text, "%s", v);
		gg_opt.limit_text = limit_text;
		gg_opt.limit_len = strlen(v); /* shared.c refuses to share a cut copy */
		if (gpuguard_parse_limit(v, &gg_opt.limits) != 0) {
			/* Fail closed: a typo in the ceiling must not silently mean
			 * "no ceiling" on a shared GPU. */
			gg_opt.limit_bad = 1;
			bad_value(OPT_LIMIT, v, "refusing all device allocations until it is fixed");
		}
	}
	gg_opt.verbose = parse_bool(OPT_VERBOSE, 0);
	gg_opt.charge_managed = parse_bool(OPT_CHARGE_MANAGED, 1);
	v = env_value(OPT_TABLE_SLOTS);
	if (gpuguard_parse_quantity(v, &gg_opt.table_slots) != 0 || gg_opt.table_slots < 64 ||
	    gg_opt.table_slots > (1ull << 40)) {
		bad_value(OPT_TABLE_SLOTS, v, "using 1Mi");
		gg_opt.table_slots = 1ull << 20;
	}
	/* A copy: the application may setenv() later and free the string. */
	static char dump_dir[4096];
	v = env_value(OPT_DUMP_DIR);
	if (!*v || strlen(v) >= sizeof(dump_dir) - 128) {
		bad_value(OPT_DUMP_DIR, v, "using .");
		v = ".";
	}
	snprintf(dump_dir, sizeof dump_dir, "%s", v);
	gg_opt.dump_dir = dump_dir;
	v = env_value(OPT_DUMP_SIGNAL);
	const char *why = NULL;
	if (gpuguard_dump_signal_parse(v, &gg_opt.dump_signal, &why) != 0) {
		char consequence[160];
		snprintf(consequence, sizeof consequence, "%s%susing SIGUSR2", why ? why : "", why ? "; " : "");
		bad_value(OPT_DUMP_SIGNAL, v, consequence);
		gg_opt.dump_signal = SIGUSR2;
	}
	uint64_t n;
	v = env_value(OPT_DUMP_MAX);
	if (gpuguard_parse_quantity(v, &n) != 0 || n > 1000000) {
		bad_value(OPT_DUMP_MAX, v, "using 10");
		n = 10;
	}
	gg_opt.dump_max = n;
	v = env_value(OPT_DUMP_INTERVAL);
	if (gpuguard_parse_duration_ms(v, &gg_opt.dump_interval_ms) != 0) {
		bad_value(OPT_DUMP_INTERVAL, v, "using 10s");
		gg_opt.dump_interval_ms = 10000;
	}
	gg_opt.dump_at_exit = parse_bool(OPT_DUMP_AT_EXIT, 0);
	v = env_value(OPT_HISTORY);
	if (gpuguard_parse_quantity(v, &gg_opt.history) != 0 || gg_opt.history > (64ull << 20)) {
		bad_value(OPT_HISTORY, v, "using 65536");
		gg_opt.history = 65536;
	}
	v = env_value(OPT_STACK_DEPTH);
	if (gpuguard_parse_quantity(v, &n) != 0 || n > GG_STACK_MAX_DEPTH) {
		bad_value(OPT_STACK_DEPTH, v, "using 16");
		n = 16;
	}
	gg_opt.stack_depth = (int)n;
	/* A copy, as for the dump directory; never created, only appended to. */
	static char termination_log[4096];
	v = env_value(OPT_TERMINATION_LOG);
	if (strlen(v) >= sizeof termination_log) {
		bad_value(OPT_TERMINATION_LOG, v, "writing no termination message");
		v = "";
	}
	snprintf(termination_log, sizeof termination_log, "%s", v);
	gg_opt.termination_log = termination_log;
	load_pod_options();
}

const char *gg_options_value(size_t row, const char **source)
{
	if (source)
		*source = opt_source[row] ? opt_source[row] : "default";
	return opt_value[row] ? opt_value[row] : gg_option_rows[row].def;
}

void gg_options_print(void)
{
	gg_log(GG_LOG_INFO, "version %s, effective configuration:", GPUGUARD_VERSION);
	for (size_t i = 0; i < gg_option_nrows; i++)
		gg_log(GG_LOG_INFO, "  %s=%s (%s)", gg_option_rows[i].name,
		       opt_value[i] && *opt_value[i] ? opt_value[i] : "(unset)",
		       opt_source[i] ? opt_source[i] : "default");
	if (gg_opt.limit_bad) {
		gg_log(GG_LOG_INFO, "  ceiling: invalid, failing closed");
		return;
	}
	if (!gg_opt.limit_set) {
		gg_log(GG_LOG_INFO, "  ceiling: none (accounting only)");
		return;
	}
	/* One line when every device has the same ceiling, else one per device
	 * that differs from the last one (the "*=" default or none). */
	const struct gpuguard_limit *dflt = &gg_opt.limits.dev[GG_MAX_DEVICES - 1];
	int uniform = 1;
	for (int d = 0; d < GG_MAX_DEVICES; d++)
		uniform &= gg_opt.limits.dev[d].kind == dflt->kind && gg_opt.limits.dev[d].value == dflt->value;
	for (int d = 0; d < GG_MAX_DEVICES; d++) {
		const struct gpuguard_limit *sp = &gg_opt.limits.dev[d];
		if (d < GG_MAX_DEVICES - 1 && (uniform || (sp->kind == dflt->kind && sp->value == dflt->value)))
			continue;
		char who[32], what[64];
		if (d == GG_MAX_DEVICES - 1)
			snprintf(who, sizeof who, uniform ? "every device" : "other devices");
		else
			snprintf(who, sizeof who, "device %d", d);
		if (sp->kind == GPUGUARD_LIMIT_BYTES)
			snprintf(what, sizeof what, "ceiling %s", gg_log_bytes((char[32]){0}, 32, sp->value));
		else if (sp->kind == GPUGUARD_LIMIT_PERCENT)
			snprintf(what, sizeof what, "ceiling %llu.%02llu%% of physical memory",
			         (unsigned long long)(sp->value / 100), (unsigned long long)(sp->value % 100));
		else
			snprintf(what, sizeof what, "no ceiling");
		gg_log(GG_LOG_INFO, "  %s: %s", who, what);
	}
}
