/* gpuguard: helpers shared by the programs tests/run.sh runs under
 * LD_PRELOAD against the simulated GPU. */
#ifndef GPUGUARD_TEST_PRELOAD_COMMON_H
#define GPUGUARD_TEST_PRELOAD_COMMON_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness.h"
#include "gpuguard.h"

#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)

/* gpuguard's books for dev, through the public API found at run time (the
 * program does not link the library; it is preloaded). */
static inline struct gpuguard_device_stats gg_stats(int dev)
{
	struct gpuguard_device_stats s;
	memset(&s, 0xff, sizeof(s));
	int (*f)(int, struct gpuguard_device_stats *) =
		(int (*)(int, struct gpuguard_device_stats *))dlsym(RTLD_DEFAULT, "gpuguard_device_stats");
	if (!f || f(dev, &s) != 0) {
		fprintf(stderr, "gpuguard_device_stats not found: is libgpuguard preloaded?\n");
		exit(2);
	}
	return s;
}

/* The runtime category's charge on dev (gpuguard_device_runtime): the part
 * of gg_stats(dev).used that is not the books. */
static inline uint64_t gg_runtime(int dev)
{
	uint64_t v = 0;
	int (*f)(int, uint64_t *) = (int (*)(int, uint64_t *))dlsym(RTLD_DEFAULT, "gpuguard_device_runtime");
	if (!f || f(dev, &v) != 0) {
		fprintf(stderr, "gpuguard_device_runtime not found: is libgpuguard preloaded?\n");
		exit(2);
	}
	return v;
}

/* Name of the object that defines fn ("libgpuguard.so", "libcuda.so.1"...). */
static inline const char *object_of(void *fn)
{
	Dl_info info;
	if (!fn || !dladdr(fn, &info) || !info.dli_fname)
		return "?";
	const char *slash = strrchr(info.dli_fname, '/');
	return slash ? slash + 1 : info.dli_fname;
}

static inline const char *symbol_of(void *fn)
{
	Dl_info info;
	if (!fn || !dladdr(fn, &info) || !info.dli_sname)
		return "?";
	return info.dli_sname;
}

/* Runs this program again as `argv0 mode` with extra environment entries
 * (NULL-terminated "NAME=value" list; "NAME=" unsets nothing, use
 * "-NAME" to unset). Captures up to n-1 bytes of its stderr in err.
 * Returns its exit status, or -1. */
static inline int spawn_self(const char *mode, const char *const *extra_env, char *err, size_t n)
{
	int fds[2];
	if (pipe(fds) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		for (const char *const *e = extra_env; e && *e; e++) {
			if ((*e)[0] == '-')
				unsetenv(*e + 1);
			else
				putenv((char *)*e);
		}
		char self[4096];
		ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (len <= 0)
			_exit(127);
		self[len] = 0;
		execl(self, self, mode, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	size_t got = 0;
	ssize_t r;
	char sink[512];
	while ((r = read(fds[0], got + 1 < n ? err + got : sink, got + 1 < n ? n - 1 - got : sizeof(sink))) > 0)
		if (got + 1 < n)
			got += (size_t)r;
	close(fds[0]);
	if (n)
		err[got < n ? got : n - 1] = 0;
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* What the simulated card of api ("cuda", "hip") holds on dev, in bytes
 * of pages, asked through the simulator's simgpu_<api>_debug_used;
 * UINT64_MAX where it cannot say. */
static inline unsigned long long sim_held_by(const char *api, int dev)
{
	char name[64];
	snprintf(name, sizeof name, "simgpu_%s_debug_used", api);
	int (*f)(int, unsigned long long *, unsigned long long *, unsigned long long *) =
	    (int (*)(int, unsigned long long *, unsigned long long *, unsigned long long *))dlsym(RTLD_DEFAULT, name);
	unsigned long long pages = UINT64_MAX;
	if (!f || f(dev, &pages, NULL, NULL) != 0)
		return UINT64_MAX;
	return pages;
}

/* In main(argc, argv): `PROGRAM NAME` runs test NAME alone (each must fail
 * on its own without its fix, not only after another's leftovers); with no
 * argument, every RUN_ONE runs. */
#define RUN_ONE(name)                                        \
	do {                                                 \
		if (argc < 2 || strcmp(argv[1], #name) == 0) \
			RUN(name);                           \
	} while (0)

static inline int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

#endif
