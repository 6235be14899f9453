/* gpuguard: the options (options.c): struct gg_options, filled by
 * initialisation, and the rows they are read by. */
#ifndef GG_OPTIONS_H
#define GG_OPTIONS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "gpuguard/parse.h"

/* The value syntaxes (quantities, durations, GPUGUARD_LIMIT) are
 * gpuguard/parse.h, signals gpuguard/signals.h: shared with the command.
 * The options themselves, one row each: gpuguard/options.h. */
struct gg_options {
	int limit_set; /* GPUGUARD_LIMIT was given */
	int limit_bad; /* ... and could not be parsed: fail closed */
	struct gpuguard_limits limits;
	int verbose;
	uint64_t table_slots;
	int charge_managed;
	const char *dump_dir;
	int dump_signal; /* 0 = no signal dumps */
	uint64_t dump_max;
	uint64_t dump_interval_ms;
	int dump_at_exit;
	uint64_t history;  /* events kept; 0 = off */
	int stack_depth;   /* 0 = off */
	int scope_process; /* GPUGUARD_SCOPE=process */
	const char *shared_path;
	unsigned shared_mode;
	uint64_t context_reserve;    /* bytes */
	int runtime;                 /* GPUGUARD_RUNTIME: charge the driver's per-process figure */
	uint64_t runtime_headroom;   /* bytes held for growth between reconciles */
	const char *cgroup;          /* GPUGUARD_CGROUP; "" = from /proc/self/cgroup */
	uint64_t wait_ms;            /* GPUGUARD_ON_LIMIT=wait:<ms>; 0 = fail */
	const char *termination_log; /* GPUGUARD_TERMINATION_LOG; "" = off */
	int unwinder_fp;             /* GPUGUARD_TEST_UNWINDER=frame-pointer */
	int pystack_off;             /* GPUGUARD_TEST_PYSTACK=off */
	/* GPUGUARD_POD_NAMESPACE, _POD_NAME, _CONTAINER_NAME: labels for the
	 * pod region's metrics; "" = not given (or not a Kubernetes name) */
	const char *pod_namespace, *pod_name, *container_name;
	/* GPUGUARD_LIMIT as given (NULL = unset), for the pod region; cut to
	 * the region's field, so limit_len says whether it fits */
	const char *limit_text;
	size_t limit_len; /* strlen of the whole value */
};
#define GG_STACK_MAX_DEPTH 64
/* The options, read-only once loaded: gg_options_load (options.c) alone
 * writes them, through gg_options_store; everyone else reads gg_opt, a
 * const view of it, so a write does not compile (what a pod region's budget
 * changes is pod scope's own: gg_ceiling_adopt_limits). A unit test that
 * sets options defines GG_OPTIONS_WRITER before its includes. */
extern struct gg_options gg_options_store;
#ifdef GG_OPTIONS_WRITER
#define gg_opt gg_options_store
#else
#define gg_opt (*(const struct gg_options *)&gg_options_store)
#endif
/* Reads every option from the environment into gg_opt; reports bad values. */
void gg_options_load(void);
/* The value row had (its default when unset) and where it came from. */
const char *gg_options_value(size_t row, const char **source);
/* Prints every option with its value and source (GPUGUARD_VERBOSE=1). */
void gg_options_print(void);
/* "fail" (0) or "wait:<duration>" (ms). 0 or -1. */
int gg_parse_on_limit(const char *s, uint64_t *wait_ms);
/* The parser a row's value goes through (gpuguard/options.h says each). */
enum gg_option_type {
	GG_OPT_BOOL,
	GG_OPT_COUNT,
	GG_OPT_DURATION,
	GG_OPT_SIGNAL,
	GG_OPT_PATH,
	GG_OPT_CHOICE,
	GG_OPT_MODE,
	GG_OPT_LIMIT,
	GG_OPT_ON_LIMIT,
	GG_OPT_NAME,
};
/* One row of gpuguard/options.h, with where its value goes in gg_opt. */
struct gg_option_row {
	const char *name;
	const char *def;
	const char *syntax;
	const char *doc;
	enum gg_option_type type;
	uint64_t lo, hi;     /* COUNT, DURATION: the range; PATH: the length */
	const char *choices; /* CHOICE, MODE: "a|b|c" */
	const char *bad;     /* what a bad value means, when not "using <def>" */
	size_t off, size;    /* the field in struct gg_options */
};
/* gg_option_nrows documented rows (README.md, VERBOSE, dumps), then the
 * test knobs, gg_option_nall in all. */
extern const struct gg_option_row gg_option_rows[];
extern const size_t gg_option_nrows, gg_option_nall;

#endif
