/* gpuguard: the one file that reads the environment. Every option is a row
 * of gpuguard/options.h; from the rows come the loader below (one parser
 * per type), its messages, GPUGUARD_VERBOSE's listing and the dump's config
 * records, and tests/unit/test_options.c checks README.md's table against
 * them. Options are read with secure_getenv, so a setuid or file-capability
 * program run under the preload ignores them as glibc ignores its own
 * variables there (issue 10, finding 15; tests/scripts/exports.sh checks
 * getenv is not imported). */
#define _GNU_SOURCE
#define GG_OPTIONS_WRITER /* the one file that writes the options (options.h) */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "base.h"
#include "gpuguard/options.h"
#include "gpuguard/region.h"
#include "gpuguard/signals.h"
#include "log.h"

struct gg_options gg_options_store;

#define GG_OPTION_ROW(id, field, type, def, lo, hi, choices, bad, flag, syntax, doc) \
	{"GPUGUARD_" #id,                                                            \
	 def,                                                                        \
	 syntax,                                                                     \
	 doc,                                                                        \
	 GG_OPT_##type,                                                              \
	 (lo),                                                                       \
	 (hi),                                                                       \
	 choices,                                                                    \
	 bad,                                                                        \
	 offsetof(struct gg_options, field),                                         \
	 sizeof(((struct gg_options *)0)->field)},
const struct gg_option_row gg_option_rows[] = {GPUGUARD_OPTIONS(GG_OPTION_ROW) GPUGUARD_TEST_OPTIONS(GG_OPTION_ROW)};
#define GG_OPTION_ONE(...) +1
const size_t gg_option_nrows = 0 GPUGUARD_OPTIONS(GG_OPTION_ONE);
const size_t gg_option_nall = sizeof(gg_option_rows) / sizeof(gg_option_rows[0]);

static const char *opt_source[sizeof(gg_option_rows) / sizeof(gg_option_rows[0])];
static const char *opt_value[sizeof(gg_option_rows) / sizeof(gg_option_rows[0])];

/* The copies PATH values are kept in, one slot of hi + 1 bytes per row in
 * row order: the application may setenv() later and free the string. */
#define GG_OPTION_IS_TEXT(type) (GG_OPT_##type == GG_OPT_PATH || GG_OPT_##type == GG_OPT_NAME)
#define GG_OPTION_PATH_BYTES(id, field, type, def, lo, hi, ...) +(GG_OPTION_IS_TEXT(type) ? (hi) + 1 : 0)
static char path_store[0 GPUGUARD_OPTIONS(GG_OPTION_PATH_BYTES) GPUGUARD_TEST_OPTIONS(GG_OPTION_PATH_BYTES)];

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

/* ---- one parser per type ----
 * Each reads v for row r and, only when it is good, stores into the field
 * (of `size` bytes) and returns 0; -1 otherwise, with *why set when there
 * is more to say than the syntax. */

/* Numbers go into int, unsigned and uint64_t fields alike. */
#define GG_OPTION_NUMBER_FIELD(id, field, type, ...)                                      \
	_Static_assert(GG_OPTION_IS_TEXT(type) || GG_OPT_##type == GG_OPT_LIMIT ||        \
	                   sizeof(((struct gg_options *)0)->field) == sizeof(unsigned) || \
	                   sizeof(((struct gg_options *)0)->field) == sizeof(uint64_t),   \
	               "GPUGUARD_" #id ": gg_opt." #field " is not a 4- or 8-byte number");
GPUGUARD_OPTIONS(GG_OPTION_NUMBER_FIELD)
GPUGUARD_TEST_OPTIONS(GG_OPTION_NUMBER_FIELD)
static void store_number(void *field, size_t size, uint64_t n)
{
	if (size == sizeof(uint64_t))
		*(uint64_t *)field = n;
	else
		*(unsigned *)field = (unsigned)n;
}

/* The index of v among choices ("a|b|c"), or -1. */
static int choice_index(const char *v, const char *choices)
{
	size_t len = strlen(v);
	int i = 0;
	for (const char *p = choices;; i++) {
		const char *bar = strchr(p, '|');
		size_t n = bar ? (size_t)(bar - p) : strlen(p);
		if (len && n == len && strncmp(p, v, n) == 0)
			return i;
		if (!bar)
			return -1;
		p = bar + 1;
	}
}

static int parse_bool(const struct gg_option_row *r, const char *v, void *field, const char **why)
{
	(void)why;
	int i = choice_index(v, "0|1");
	if (i < 0)
		return -1;
	store_number(field, r->size, (uint64_t)i);
	return 0;
}

static int parse_count(const struct gg_option_row *r, const char *v, void *field, const char **why)
{
	(void)why;
	uint64_t n;
	if (gpuguard_parse_quantity(v, &n) != 0 || n < r->lo || n > r->hi)
		return -1;
	store_number(field, r->size, n);
	return 0;
}

static int parse_duration(const struct gg_option_row *r, const char *v, void *field, const char **why)
{
	(void)why;
	uint64_t ms;
	if (gpuguard_parse_duration_ms(v, &ms) != 0 || ms < r->lo || ms > r->hi)
		return -1;
	store_number(field, r->size, ms);
	return 0;
}

static int parse_signal(const struct gg_option_row *r, const char *v, void *field, const char **why)
{
	int sig;
	if (gpuguard_dump_signal_parse(v, &sig, why) != 0)
		return -1;
	store_number(field, r->size, (uint64_t)sig);
	return 0;
}

static int parse_path(const struct gg_option_row *r, const char *v, void *field, const char **why)
{
	(void)why;
	size_t len = strlen(v);
	if (len < r->lo || len > r->hi)
		return -1;
	/* This row's slot: the slots of the PATH rows before it come first. */
	char *slot = path_store;
	for (const struct gg_option_row *p = gg_option_rows; p < r; p++)
		if (p->type == GG_OPT_PATH || p->type == GG_OPT_NAME)
			slot += p->hi + 1;
	memcpy(slot, v, len + 1);
	*(const char **)field = slot;
	return 0;
}

/* A name as Kubernetes gives it: lower-case letters, digits, '-' and '.',
 * within the row's length (what fits the region's fields). Labels only. */
static int parse_name(const struct gg_option_row *r, const char *v, void *field, const char **why)
{
	for (const char *c = v; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '.'))
			return -1;
	return parse_path(r, v, field, why);
}

static int parse_choice(const struct gg_option_row *r, const char *v, void *field, const char **why)
{
	(void)why;
	int i = choice_index(v, r->choices);
	if (i < 0)
		return -1;
	store_number(field, r->size, (uint64_t)i);
	return 0;
}

static int parse_mode(const struct gg_option_row *r, const char *v, void *field, const char **why)
{
	(void)why;
	if (choice_index(v, r->choices) < 0)
		return -1;
	store_number(field, r->size, strtoul(v, NULL, 8));
	return 0;
}

/* GPUGUARD_LIMIT also records that it was given, as given, and fails
 * closed: a typo in the ceiling must not silently mean "no ceiling" on a
 * shared GPU (gg_opt.limit_bad refuses every device allocation). */
static int parse_limit(const struct gg_option_row *r, const char *v, void *field, const char **why)
{
	(void)r;
	(void)why;
	static char limit_text[GPUGUARD_REGION_LIMIT_TEXT];
	gg_opt.limit_set = 1;
	snprintf(limit_text, sizeof limit_text, "%s", v);
	gg_opt.limit_text = limit_text;
	gg_opt.limit_len = strlen(v); /* shared_attach.c refuses to share a cut copy */
	if (gpuguard_parse_limit(v, field) != 0) {
		gg_opt.limit_bad = 1;
		return -1;
	}
	return 0;
}

static int parse_on_limit(const struct gg_option_row *r, const char *v, void *field, const char **why)
{
	(void)why;
	uint64_t ms;
	if (gg_parse_on_limit(v, &ms) != 0)
		return -1;
	store_number(field, r->size, ms);
	return 0;
}

typedef int (*gg_option_parser)(const struct gg_option_row *, const char *, void *, const char **);
static const gg_option_parser parsers[] = {
    [GG_OPT_BOOL] = parse_bool,     [GG_OPT_COUNT] = parse_count, [GG_OPT_DURATION] = parse_duration,
    [GG_OPT_SIGNAL] = parse_signal, [GG_OPT_PATH] = parse_path,   [GG_OPT_CHOICE] = parse_choice,
    [GG_OPT_MODE] = parse_mode,     [GG_OPT_LIMIT] = parse_limit, [GG_OPT_ON_LIMIT] = parse_on_limit,
    [GG_OPT_NAME] = parse_name,
};

/* One clear line (the house rule): the variable, the value, the accepted
 * syntax, and what happens instead. */
static void bad_value(size_t row, const char *v, const char *why)
{
	const struct gg_option_row *r = &gg_option_rows[row];
	gg_log(GG_LOG_ERROR, "%s=\"%s\" is not valid; accepted: %s; %s%s%s%s", r->name, v, r->syntax, why ? why : "",
	       why ? "; " : "", r->bad ? r->bad : "using ", r->bad ? "" : r->def);
	opt_source[row] = "environment (invalid)";
}

void gg_options_load(void)
{
	memset(&gg_opt, 0, sizeof(gg_opt));
	for (size_t i = 0; i < gg_option_nall; i++) {
		const struct gg_option_row *r = &gg_option_rows[i];
		void *field = (char *)&gg_opt + r->off;
		const char *v = secure_getenv(r->name);
		opt_source[i] = v ? "environment" : "default";
		opt_value[i] = v ? v : r->def;
		/* An empty default (GPUGUARD_LIMIT's) leaves the field zero. */
		if (!v && !*r->def)
			continue;
		const char *why = NULL;
		if (parsers[r->type](r, opt_value[i], field, &why) == 0)
			continue;
		bad_value(i, opt_value[i], why);
		/* Then the default, or, where the row says what a bad value
		 * means instead, nothing; a default that does not parse is a
		 * bug test_options.c catches, and leaves the field zero. */
		if (!r->bad && *r->def)
			parsers[r->type](r, r->def, field, &why);
		else if (r->type == GG_OPT_PATH || r->type == GG_OPT_NAME)
			*(const char **)field = "";
	}
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
