/* gpuguard: what the dump tests share (t_dump, t_postmortem). Each case is
 * a child process (the program again) with a GPUGUARD_DUMP_DIR of its own,
 * under base_dir; the parent then lists and reads what it left there. */
#ifndef GPUGUARD_TEST_PRELOAD_DUMPS_H
#define GPUGUARD_TEST_PRELOAD_DUMPS_H

#include "common.h"

#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>

/* The scratch directory of this run; main() makes it (dumps_init). */
static char base_dir[2048];

/* Makes base_dir, a fresh directory named after prog ("t_dump") under
 * $GPUGUARD_DUMP_DIR (or /tmp). 0, or -1 (perror said why). */
static inline int dumps_init(const char *prog)
{
	const char *root = getenv("GPUGUARD_DUMP_DIR");
	snprintf(base_dir, sizeof base_dir, "%s/%s.XXXXXX", root && *root ? root : "/tmp", prog);
	if (!mkdtemp(base_dir)) {
		perror("mkdtemp");
		return -1;
	}
	return 0;
}

/* A case's directory, base_dir/name (static storage: the next call
 * overwrites it). */
static inline const char *new_dir(const char *name)
{
	static char d[4096];
	snprintf(d, sizeof d, "%s/%s", base_dir, name);
	mkdir(d, 0700);
	return d;
}

/* What a dump directory holds: finals (gpuguard-*.jsonl, whole dumps; first
 * is the one that sorts first), partials (gpuguard-*.partial.jsonl, a dead
 * writer's file swept into view; partial is one of them) and temps (hidden
 * .*.tmp* files still being written or left behind). */
struct listing {
	int finals, partials, temps;
	char first[4096], partial[4096];
};

static inline struct listing list_dir(const char *dir)
{
	struct listing l;
	memset(&l, 0, sizeof l);
	DIR *d = opendir(dir);
	if (!d)
		return l;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (strncmp(e->d_name, "gpuguard-", 9) == 0 && n > 14 &&
		    !strcmp(e->d_name + n - 14, ".partial.jsonl")) {
			if (!l.partials++)
				snprintf(l.partial, sizeof l.partial, "%s/%s", dir, e->d_name);
		} else if (strncmp(e->d_name, "gpuguard-", 9) == 0 && n > 6 && !strcmp(e->d_name + n - 6, ".jsonl")) {
			if (!l.finals++ || strcmp(e->d_name, strrchr(l.first, '/') + 1) < 0)
				snprintf(l.first, sizeof l.first, "%s/%s", dir, e->d_name);
		} else if (e->d_name[0] == '.' && strstr(e->d_name, ".tmp")) {
			l.temps++;
		}
	}
	closedir(d);
	return l;
}

/* The whole file at path, NUL-terminated (caller frees), or NULL. */
static inline char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (!b) {
		fclose(f);
		return NULL;
	}
	size_t got = fread(b, 1, (size_t)n, f);
	b[got] = 0;
	fclose(f);
	return b;
}

/* A whole dump's text: it ends in a newline, and its last line is the
 * trailer, counting every line before it as a record. */
static inline int whole(const char *b)
{
	size_t n = strlen(b);
	if (n < 2 || b[n - 1] != '\n')
		return 0;
	const char *last = b + n - 1;
	while (last > b && last[-1] != '\n')
		last--;
	char want[64];
	snprintf(want, sizeof want, "{\"t\":\"end\",\"records\":%d,", count_lines(b) - 1);
	return strncmp(last, want, strlen(want)) == 0;
}

/* Runs this program again as `argv0 mode` with GPUGUARD_DUMP_DIR=dir and
 * up to 14 more "NAME=value" entries (spawn_self's syntax); its stderr lands
 * in err. Returns its exit status, or -1. */
static inline int run_child(const char *mode, const char *dir, const char *const *more, char *err, size_t n)
{
	char dd[4200];
	snprintf(dd, sizeof dd, "GPUGUARD_DUMP_DIR=%s", dir);
	const char *env[16] = {dd};
	int k = 1;
	for (; more && *more && k < 15; more++)
		env[k++] = *more;
	env[k] = NULL;
	return spawn_self(mode, env, err, n);
}

#endif
