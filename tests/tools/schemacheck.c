/* gpuguard tests: checks dumps against the one list of record types and
 * keys (include/gpuguard/schema.h): every record a known type, the types
 * in file order, and each record's keys (and each stack frame's) exactly
 * the list's, in its order, a key that some records lack being the only
 * kind that may be missing (-u: in any order). Reads with the command's own JSON reader
 * (tools/jsonl.c). Prints "FILE: N records" per good file, or the first
 * disagreement as FILE:LINE, and exits 1. tests/scripts/schema.sh runs it
 * on the library's dumps, the golden dumps and the benchmark's generator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpuguard/schema.h>

#include "tool.h"

static const char *file;
static unsigned long lineno;

static int bad(const char *what, const char *name)
{
	printf("%s:%lu: %s%s%s\n", file, lineno, what, name ? " " : "", name ? name : "");
	return -1;
}

/* Keys of record rec, in the list's order: [*lo, *hi). */
static void key_range(int rec, int *lo, int *hi)
{
	for (*lo = 0; *lo < GPUGUARD_DK_COUNT && gpuguard_dump_keys[*lo].rec != rec; ++*lo)
		;
	for (*hi = *lo; *hi < GPUGUARD_DK_COUNT && gpuguard_dump_keys[*hi].rec == rec; ++*hi)
		;
}

/* Hand-written dumps (tests/golden/) may order keys as they like, since
 * readers look keys up by name: -u checks only which keys there are. */
static int unordered;

/* The members of an object against the keys of record rec, from member
 * first on. */
static int check_keys(const struct gg_json *j, uint32_t first, int rec)
{
	int lo, hi, k;
	key_range(rec, &lo, &hi);
	if (unordered) {
		for (k = lo; k < hi; k++) {
			int found = 0;
			for (uint32_t i = first; i && !found; i = j->v[i].next)
				found = strcmp(j->v[i].key, gpuguard_dump_keys[k].name) == 0;
			if (!found && gpuguard_dump_keys[k].always)
				return bad("lacks key", gpuguard_dump_keys[k].name);
		}
		for (uint32_t i = first; i; i = j->v[i].next) {
			for (k = lo; k < hi && strcmp(j->v[i].key, gpuguard_dump_keys[k].name) != 0; k++)
				;
			if (k == hi)
				return bad("has a key the list does not have there:", j->v[i].key);
		}
		return 0;
	}
	k = lo;
	for (uint32_t i = first; i; i = j->v[i].next) {
		const struct gg_jval *m = &j->v[i];
		for (; k < hi && strcmp(gpuguard_dump_keys[k].name, m->key) != 0; k++)
			if (gpuguard_dump_keys[k].always)
				return bad("lacks key (or has it out of order)", gpuguard_dump_keys[k].name);
		if (k == hi)
			return bad("has a key the list does not have there (or out of order):", m->key);
		k++;
	}
	for (; k < hi; k++)
		if (gpuguard_dump_keys[k].always)
			return bad("lacks key", gpuguard_dump_keys[k].name);
	return 0;
}

static int check_line(struct gg_json *j, const char *line, size_t len, int *rank)
{
	char err[300];
	uint32_t root = gg_json_parse(j, line, len, err, sizeof err);
	if (!root)
		return bad("not JSON:", err);
	const struct gg_jval *o = gg_json_at(j, root);
	uint32_t first = o->child;
	if (!first || strcmp(j->v[first].key, "t") != 0 || j->v[first].type != GG_J_STR)
		return bad("does not open with \"t\"", NULL);
	int rec = gpuguard_dump_record_of(j->v[first].s);
	if (rec == GPUGUARD_DR_COUNT)
		return bad("has a type the list does not have:", j->v[first].s);
	/* A device's peak_site records follow its peak: one rank for both. */
	int r = rec == GPUGUARD_DR_peak_site ? GPUGUARD_DR_peak : rec;
	if (r < *rank)
		return bad("is out of order:", j->v[first].s);
	*rank = r;
	if (check_keys(j, j->v[first].next, rec))
		return -1;
	if (rec == GPUGUARD_DR_stack) {
		const struct gg_jval *fr = gg_json_get(j, o, "frames");
		for (uint32_t i = fr && fr->type == GG_J_ARR ? fr->child : 0; i; i = j->v[i].next)
			if (check_keys(j, j->v[i].child, GPUGUARD_DR_frame))
				return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 0;
	static char line[GG_MAX_LINE + 2];
	int a = 1;
	if (a < argc && strcmp(argv[a], "-u") == 0)
		unordered = 1, a++;
	for (; a < argc; a++) {
		FILE *f = fopen(argv[a], "r");
		file = argv[a];
		lineno = 0;
		if (!f) {
			printf("%s: cannot open\n", file);
			rc = 1;
			continue;
		}
		struct gg_json j;
		gg_json_init(&j);
		int rank = 0, failed = 0;
		while (!failed && fgets(line, sizeof line, f)) {
			lineno++;
			size_t len = strlen(line);
			if (len && line[len - 1] == '\n')
				len--;
			failed = check_line(&j, line, len, &rank) != 0;
		}
		if (!failed && rank != GPUGUARD_DR_end)
			failed = bad("has no trailer", NULL) != 0;
		if (!failed)
			printf("%s: %lu records\n", file, lineno);
		rc |= failed;
		gg_json_free(&j);
		fclose(f);
	}
	return rc;
}
