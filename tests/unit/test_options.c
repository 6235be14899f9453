/* gpuguard: unit tests for options.c: loading from the environment
 * (failing closed, one clear line per bad value), and README.md's options
 * table against gg_option_rows. The value syntaxes are test_parse.c's. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <signal.h>

#include "../harness.h"
#include "base.h"
#include "ceiling.h"
#include "options.h"

#define KI 1024ull
#define MI (1024ull * KI)
#define GI (1024ull * MI)

static void clear_env(void)
{
	for (size_t i = 0; i < gg_option_nall; i++)
		unsetenv(gg_option_rows[i].name);
	/* Reserves here test this process's books, never a pod region. */
	setenv("GPUGUARD_SCOPE", "process", 1);
}

static int row_of(const char *name)
{
	for (size_t i = 0; i < gg_option_nall; i++)
		if (strcmp(gg_option_rows[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* ---- stderr capture: a pipe on fd 2 ---- */
static int cap_saved = -1, cap_pipe[2];
static char cap_buf[65536];

static void capture_begin(void)
{
	fflush(stderr);
	if (pipe(cap_pipe) != 0) {
		perror("pipe");
		exit(2);
	}
	cap_saved = dup(2);
	dup2(cap_pipe[1], 2);
	close(cap_pipe[1]);
}

static const char *capture_end(void)
{
	dup2(cap_saved, 2); /* closes the pipe's last write end */
	close(cap_saved);
	size_t n = 0;
	ssize_t r;
	while (n < sizeof(cap_buf) - 1 && (r = read(cap_pipe[0], cap_buf + n, sizeof(cap_buf) - 1 - n)) > 0)
		n += (size_t)r;
	cap_buf[n] = 0;
	close(cap_pipe[0]);
	return cap_buf;
}

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Loads the options with NAME=VALUE and returns what went to stderr. */
static const char *load_with(const char *name, const char *value)
{
	clear_env();
	if (name)
		setenv(name, value, 1);
	capture_begin();
	gg_options_load();
	return capture_end();
}

/* A bad value prints exactly one line naming the variable, the value and
 * the accepted syntax. */
static void check_one_clear_line(const char *name, const char *value)
{
	const char *out = load_with(name, value);
	int row = row_of(name);
	char quoted[128];
	snprintf(quoted, sizeof quoted, "%s=\"%s\"", name, value);
	CHECK_EQ_INT(count_lines(out), 1);
	CHECK(out[0] && out[strlen(out) - 1] == '\n');
	CHECK(strncmp(out, "gpuguard: error: ", 17) == 0);
	CHECK(strstr(out, quoted) != NULL);
	CHECK(row >= 0 && strstr(out, gg_option_rows[row].syntax) != NULL);
	if (harness_cur_failed)
		fprintf(stderr, "  (for %s=%s the output was: %s)\n", name, value, out);
}

TEST(bad_values_print_one_clear_line)
{
	check_one_clear_line("GPUGUARD_LIMIT", "20GB");
	check_one_clear_line("GPUGUARD_TABLE_SLOTS", "lots");
	check_one_clear_line("GPUGUARD_VERBOSE", "yes");
	check_one_clear_line("GPUGUARD_CHARGE_MANAGED", "2");
	check_one_clear_line("GPUGUARD_SCOPE", "cluster");
	check_one_clear_line("GPUGUARD_SHARED_MODE", "0777");
	check_one_clear_line("GPUGUARD_CONTEXT_RESERVE", "lots");
	check_one_clear_line("GPUGUARD_ON_LIMIT", "retry");
	/* Good values and defaults print nothing. */
	CHECK_EQ_INT((int)strlen(load_with(NULL, NULL)), 0);
	CHECK_EQ_INT((int)strlen(load_with("GPUGUARD_LIMIT", "0=20Gi,*=90%")), 0);
	CHECK_EQ_INT((int)strlen(load_with("GPUGUARD_TABLE_SLOTS", "64Ki")), 0);
	clear_env();
}

TEST(load_bad_limit_fails_closed)
{
	gg_ceiling_reset();
	clear_env();
	setenv("GPUGUARD_LIMIT", "20 Gi", 1);
	capture_begin();
	gg_options_load();
	gg_ceiling_configure();
	capture_end();
	CHECK_EQ_INT(gg_opt.limit_set, 1);
	CHECK_EQ_INT(gg_opt.limit_bad, 1);
	/* The reservation itself says why (issue 24): no caller reads the
	 * configuration to tell. */
	CHECK_EQ_INT(gg_ceiling_try_reserve(0, 1), GG_VERDICT_CONFIG);
	CHECK_EQ_INT(gg_ceiling_try_reserve(0, 0), GG_VERDICT_CONFIG);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 1), -1);
	CHECK_EQ_INT(gg_ceiling_reserve(5, 0), -1);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].refused[GPUGUARD_REFUSED_CONFIG]), 1);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].refused[GPUGUARD_REFUSED_CEILING]), 0);
	CHECK_EQ_U64(atomic_load(&gg_devices[5].refused[GPUGUARD_REFUSED_CONFIG]), 1);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].used), 0);

	/* Fixed: a good limit loads and reserves again. */
	setenv("GPUGUARD_LIMIT", "0=1Mi,*=90%", 1);
	gg_options_load();
	gg_ceiling_configure();
	CHECK_EQ_INT(gg_opt.limit_bad, 0);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].limit), MI);
	CHECK(gg_ceiling_unresolved(1));
	CHECK_EQ_INT(gg_ceiling_reserve(0, MI), 0);
	CHECK_EQ_INT(gg_ceiling_try_reserve(0, 1), GG_VERDICT_CEILING);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 1), -1);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].refused[GPUGUARD_REFUSED_CEILING]), 1);
	gg_ceiling_release(0, MI);

	/* Unset: accounting only. */
	clear_env();
	gg_options_load();
	gg_ceiling_configure();
	CHECK_EQ_INT(gg_opt.limit_set, 0);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].limit), GG_UNLIMITED);
	gg_ceiling_reset();
}

TEST(load_table_slots)
{
	clear_env();
	gg_options_load();
	CHECK_EQ_U64(gg_opt.table_slots, 1ull << 20);
	const char *bad[] = {"lots", "32", "0", "2Ti", "-1", "1.5.5"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		load_with("GPUGUARD_TABLE_SLOTS", bad[i]);
		CHECK_EQ_U64(gg_opt.table_slots, 1ull << 20);
	}
	load_with("GPUGUARD_TABLE_SLOTS", "4096");
	CHECK_EQ_U64(gg_opt.table_slots, 4096);
	load_with("GPUGUARD_TABLE_SLOTS", "64Ki");
	CHECK_EQ_U64(gg_opt.table_slots, 65536);
	load_with("GPUGUARD_TABLE_SLOTS", "64");
	CHECK_EQ_U64(gg_opt.table_slots, 64);

	/* Booleans: bad values fall back to the default. */
	load_with("GPUGUARD_CHARGE_MANAGED", "0");
	CHECK_EQ_INT(gg_opt.charge_managed, 0);
	load_with("GPUGUARD_CHARGE_MANAGED", "on");
	CHECK_EQ_INT(gg_opt.charge_managed, 1);
	load_with("GPUGUARD_VERBOSE", "true");
	CHECK_EQ_INT(gg_opt.verbose, 0);
	clear_env();
	gg_options_load();
}

/* ---- README.md's options table ---- */

/* Copies markdown cell `idx` (0-based) of a "| a | b | ..." row, trimmed,
 * with backticks dropped. 0 if the row has no such cell. */
static int md_cell(const char *line, int idx, char *out, size_t len)
{
	const char *p = line;
	if (*p != '|')
		return 0;
	p++;
	for (int c = 0;; c++) {
		const char *start = p;
		while (*p && *p != '\n' && !(*p == '|' && p[-1] != '\\'))
			p++;
		if (*p != '|')
			return 0;
		if (c == idx) {
			size_t n = 0;
			for (const char *q2 = start; q2 < p && n + 1 < len; q2++)
				if (*q2 != '`')
					out[n++] = *q2;
			out[n] = 0;
			char *b = out;
			while (*b == ' ' || *b == '\t')
				b++;
			memmove(out, b, strlen(b) + 1);
			n = strlen(out);
			while (n && (out[n - 1] == ' ' || out[n - 1] == '\t'))
				out[--n] = 0;
			return 1;
		}
		p++;
	}
}

static int empty_default(const char *d)
{
	return !*d || strcmp(d, "unset") == 0 || strcmp(d, "(unset)") == 0 || strcmp(d, "-") == 0 ||
	       strcmp(d, "\u2014") == 0 || strcmp(d, "none") == 0 || strcmp(d, "(none)") == 0;
}

TEST(readme_options_table_matches_code)
{
	FILE *f = fopen("README.md", "r");
	if (!f) {
		fprintf(stderr, "  README.md not found (run from the repo root). It needs an options table "
		                "with one row per option: | `GPUGUARD_NAME` | `default` | syntax | doc |\n");
		CHECK(!"README.md has an options table");
		return;
	}
	int found[64] = {0};
	int rows = 0;
	char line[4096], name[256], def[256];
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "| `GPUGUARD_", 12) != 0)
			continue;
		rows++;
		if (!md_cell(line, 0, name, sizeof name) || !md_cell(line, 1, def, sizeof def)) {
			fprintf(stderr, "  README.md: malformed options row: %s", line);
			CHECK(!"README options row has name and default cells");
			continue;
		}
		int r = row_of(name);
		if (r < 0 || (size_t)r >= gg_option_nrows) {
			fprintf(stderr, "  README.md lists %s, which gg_option_rows does not have\n", name);
			CHECK(!"README option exists in the code");
			continue;
		}
		if (found[r]++) {
			fprintf(stderr, "  README.md lists %s twice\n", name);
			CHECK(!"README option listed once");
		}
		const char *want = gg_option_rows[r].def;
		if (*want ? strcmp(def, want) != 0 : !empty_default(def)) {
			fprintf(stderr, "  README.md: %s default is \"%s\", the code says \"%s\"%s\n", name, def, want,
			        *want ? "" : " (write it empty or \"unset\")");
			CHECK(!"README default matches the code");
		}
	}
	fclose(f);
	if (rows == 0) {
		fprintf(stderr, "  README.md has no options table rows (lines starting \"| `GPUGUARD_\"); "
		                "expected one per option: | `GPUGUARD_NAME` | `default` | syntax | doc |\n");
		CHECK(!"README.md has an options table");
		return;
	}
	for (size_t i = 0; i < gg_option_nrows; i++)
		if (!found[i]) {
			fprintf(stderr, "  README.md's options table lacks %s\n", gg_option_rows[i].name);
			CHECK(!"every option is in README.md");
		}
}

TEST(option_rows_well_formed)
{
	CHECK(gg_option_nrows >= 4 && gg_option_nall < 64);
	for (size_t i = 0; i < gg_option_nall; i++) {
		const struct gg_option_row *r = &gg_option_rows[i];
		CHECK(r->name && strncmp(r->name, "GPUGUARD_", 9) == 0);
		CHECK(r->def && r->syntax && *r->syntax && r->doc && *r->doc);
		for (size_t j = 0; j < i; j++)
			CHECK(strcmp(gg_option_rows[j].name, r->name) != 0);
	}
	/* Each documented default parses to what the code uses. */
	clear_env();
	gg_options_load();
	uint64_t slots = 0;
	CHECK_EQ_INT(gpuguard_parse_quantity(gg_option_rows[row_of("GPUGUARD_TABLE_SLOTS")].def, &slots), 0);
	CHECK_EQ_U64(slots, gg_opt.table_slots);
	CHECK_EQ_INT(atoi(gg_option_rows[row_of("GPUGUARD_VERBOSE")].def), gg_opt.verbose);
	CHECK_EQ_INT(atoi(gg_option_rows[row_of("GPUGUARD_CHARGE_MANAGED")].def), gg_opt.charge_managed);
}

/* The default is written once, in the row: the loader falls back to it by
 * parsing it, so each must parse, in range, with nothing said, and give
 * what an unset variable gives. */
TEST(option_defaults_parse_as_unset)
{
	clear_env();
	unsetenv("GPUGUARD_SCOPE");
	gg_options_load();
	struct gg_options unset = gg_opt;
	for (size_t i = 0; i < gg_option_nall; i++) {
		const struct gg_option_row *r = &gg_option_rows[i];
		if (!*r->def)
			continue;
		clear_env();
		unsetenv("GPUGUARD_SCOPE");
		setenv(r->name, r->def, 1);
		capture_begin();
		gg_options_load();
		const char *out = capture_end();
		/* Where the value came from, not only stderr: the log's rate
		 * limit may have no room left for a line. */
		const char *src;
		gg_options_value(i, &src);
		if (*out || strcmp(src, "environment") != 0 || memcmp(&unset, &gg_opt, sizeof unset) != 0) {
			fprintf(stderr, "  %s=\"%s\" (its default) %s\n", r->name, r->def,
			        *out || strcmp(src, "environment") != 0 ? "was refused" : "loads otherwise than unset");
			CHECK(!"a row's default parses as the unset variable does");
		}
	}
	clear_env();
	gg_options_load();
}

/* GPUGUARD_TEST_UNWINDER is a row too (issue 12 step 4): read with the
 * others, named when bad, and kept out of README.md, VERBOSE and dumps. */
TEST(test_unwinder_row)
{
	int r = row_of("GPUGUARD_TEST_UNWINDER");
	CHECK(r >= 0 && (size_t)r >= gg_option_nrows);
	CHECK_EQ_INT((int)strlen(load_with("GPUGUARD_TEST_UNWINDER", "frame-pointer")), 0);
	CHECK_EQ_INT(gg_opt.unwinder_fp, 1);
	/* The log's rate limit has no room left for its line here (see main),
	 * but where the value came from says it was refused. */
	load_with("GPUGUARD_TEST_UNWINDER", "fp");
	CHECK_EQ_INT(gg_opt.unwinder_fp, 0);
	const char *src;
	CHECK(strcmp(gg_options_value((size_t)r, &src), "fp") == 0 && strcmp(src, "environment (invalid)") == 0);
	load_with(NULL, NULL);
	CHECK_EQ_INT(gg_opt.unwinder_fp, 0);
	clear_env();
	gg_options_load();
}

TEST(pod_options_parse)
{
	clear_env();
	unsetenv("GPUGUARD_SCOPE");
	gg_options_load();
	CHECK_EQ_INT(gg_opt.scope_process, 0); /* pod is the default */
	CHECK(strcmp(gg_opt.shared_path, "/dev/shm/gpuguard-pod") == 0);
	CHECK_EQ_INT((int)gg_opt.shared_mode, 0600);
	CHECK_EQ_U64(gg_opt.context_reserve, 0);
	CHECK_EQ_U64(gg_opt.wait_ms, 0);
	setenv("GPUGUARD_SCOPE", "process", 1);
	setenv("GPUGUARD_SHARED", "/gpuguard/pod", 1);
	setenv("GPUGUARD_SHARED_MODE", "0660", 1);
	setenv("GPUGUARD_CONTEXT_RESERVE", "500Mi", 1);
	setenv("GPUGUARD_ON_LIMIT", "wait:2s", 1);
	gg_options_load();
	CHECK_EQ_INT(gg_opt.scope_process, 1);
	CHECK(strcmp(gg_opt.shared_path, "/gpuguard/pod") == 0);
	CHECK_EQ_INT((int)gg_opt.shared_mode, 0660);
	CHECK_EQ_U64(gg_opt.context_reserve, 500 * MI);
	CHECK_EQ_U64(gg_opt.wait_ms, 2000);
	uint64_t ms = 1;
	CHECK_EQ_INT(gg_parse_on_limit("fail", &ms), 0);
	CHECK_EQ_U64(ms, 0);
	CHECK_EQ_INT(gg_parse_on_limit("wait:500ms", &ms), 0);
	CHECK_EQ_U64(ms, 500);
	CHECK_EQ_INT(gg_parse_on_limit("wait:2d", &ms), -1);
	CHECK_EQ_INT(gg_parse_on_limit("wait:25h", &ms), -1); /* over a day: a typo */
	CHECK_EQ_INT(gg_parse_on_limit("Wait:2s", &ms), -1);
	CHECK_EQ_INT(gg_parse_on_limit("wait", &ms), -1);
	CHECK_EQ_INT(gg_parse_on_limit("wait:0", &ms), -1); /* that is "fail" */
	clear_env();
}

TEST(dump_options_parse)
{
	clear_env();
	setenv("GPUGUARD_DUMP_SIGNAL", "bogus", 1);
	setenv("GPUGUARD_DUMP_INTERVAL", "soon", 1);
	setenv("GPUGUARD_STACK_DEPTH", "65", 1);
	setenv("GPUGUARD_HISTORY", "0", 1);
	capture_begin();
	gg_options_load();
	const char *err = capture_end();
	CHECK_EQ_INT(count_lines(err), 3);
	CHECK_EQ_INT(gg_opt.dump_signal, SIGUSR2);
	CHECK_EQ_U64(gg_opt.dump_interval_ms, 10000);
	CHECK_EQ_INT(gg_opt.stack_depth, 16);
	CHECK_EQ_U64(gg_opt.history, 0);
	CHECK_EQ_U64(gg_opt.dump_max, 10);
	CHECK(strcmp(gg_opt.dump_dir, ".") == 0);
	clear_env();
	gg_options_load();
}

int main(void)
{
	/* First, while the log's rate limit (20 lines a second) has room. */
	RUN(bad_values_print_one_clear_line);
	RUN(load_bad_limit_fails_closed);
	RUN(load_table_slots);
	RUN(option_rows_well_formed);
	RUN(option_defaults_parse_as_unset);
	RUN(readme_options_table_matches_code);
	RUN(dump_options_parse);
	RUN(pod_options_parse);
	RUN(test_unwinder_row);
	return harness_done();
}
