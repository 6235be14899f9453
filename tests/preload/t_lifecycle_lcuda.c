/* gpuguard: configuration, start-up and process life: a bad GPUGUARD_LIMIT
 * fails closed with one message, GPUGUARD_VERBOSE prints once, a fork child
 * starts with zero books, percentages and per-device lists resolve, and a
 * call made from inside our own hook passes straight through. Each case
 * runs this program again with its own environment (spawn_self). */
#include "common.h"

#include <signal.h>
#include "gpuguard/cuda_abi.h"

static void cuda_up(void)
{
	gg_CUdevice d;
	gg_CUcontext ctx;
	if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx))
		exit(3);
}

/* Child modes: each exits 0 when the behaviour holds, else a distinct code. */
static int child(const char *mode)
{
	/* A marker before the first GPU call: initialisation's messages come
	 * after it, at that call, not at start-up (issue 10, finding 14). */
	if (write(2, "child-start\n", 12) != 12)
		return 98;
	cuda_up();
	gg_CUdeviceptr p;
	if (strcmp(mode, "bad-limit") == 0) {
		/* fail closed: refused with the API's own code, process carries on */
		if (cuMemAlloc_v2(&p, 4096) != GG_CUDA_ERROR_OUT_OF_MEMORY)
			return 10;
		if (gg_stats(0).refused[GPUGUARD_REFUSED_CONFIG] != 1)
			return 11;
		size_t f, t;
		if (cuMemGetInfo_v2(&f, &t) != 0 || f != 0)
			return 12;
		return 0;
	}
	if (strcmp(mode, "verbose") == 0)
		return cuMemAlloc_v2(&p, 4096) == 0 && cuMemFree_v2(p) == 0 ? 0 : 20;
	if (strcmp(mode, "percent") == 0) {
		/* 50% of the 8 GiB card, learned from the driver on first use */
		size_t f, t;
		if (cuMemGetInfo_v2(&f, &t) != 0 || t != 4 * GIB)
			return 30;
		if (cuMemAlloc_v2(&p, 4 * GIB + 2 * MIB) != GG_CUDA_ERROR_OUT_OF_MEMORY)
			return 31;
		return cuMemAlloc_v2(&p, 4 * GIB) == 0 ? 0 : 32;
	}
	if (strcmp(mode, "list") == 0) {
		/* "1=2Gi": device 0 unlimited, device 1 capped */
		if (gg_stats(0).limit != UINT64_MAX || gg_stats(1).limit != 2 * GIB)
			return 40;
		return cuMemAlloc_v2(&p, 6 * GIB) == 0 ? 0 : 41;
	}
	if (strcmp(mode, "fork") == 0) {
		if (cuMemAlloc_v2(&p, 512 * MIB) != 0)
			return 50;
		pid_t pid = fork();
		if (pid == 0) {
			struct gpuguard_device_stats s = gg_stats(0);
			_exit(s.used == 0 && s.allocs == 0 && s.peak == 0 ? 0 : 51);
		}
		int st;
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 52;
		return gg_stats(0).used == 512 * MIB ? 0 : 53;
	}
	if (strcmp(mode, "reentry") == 0) {
		/* SIMGPU_REENTER makes the simulated cuMemAllocManaged call
		 * cuMemAlloc_v2 by symbol from inside the driver, i.e. from inside
		 * our hook: that inner call must pass straight through, so the
		 * managed allocation is charged once. */
		if (cuMemAllocManaged(&p, 64 * MIB, GG_CU_MEM_ATTACH_GLOBAL) != 0)
			return 60;
		struct gpuguard_device_stats s = gg_stats(0);
		return s.used == 64 * MIB && s.allocs == 1 ? 0 : 61;
	}
	if (strcmp(mode, "crash-signal") == 0) {
		/* a refused dump signal: nothing is installed on it, so a crash
		 * stays a crash (whatever handled SIGSEGV before, a sanitizer's
		 * or the default, still does); dumps fall back to SIGUSR2 */
		struct sigaction before, sa;
		if (sigaction(SIGSEGV, NULL, &before) != 0)
			return 71;
		if (cuMemAlloc_v2(&p, 4096) != 0)
			return 70;
		if (sigaction(SIGSEGV, NULL, &sa) != 0 || sa.sa_handler != before.sa_handler)
			return 71;
		if (sigaction(SIGUSR2, NULL, &sa) != 0 || sa.sa_handler == SIG_DFL)
			return 72;
		return 0;
	}
	return 99;
}

static const char *const base_env[] = {"SIMGPU_MEMORY=8Gi", "SIMGPU_DEVICES=2", "-GPUGUARD_LIMIT", "-GPUGUARD_VERBOSE",
                                       NULL};

static int spawn(const char *mode, const char *const *env, char *err, size_t n)
{
	const char *all[16];
	int k = 0;
	for (const char *const *e = base_env; *e; e++)
		all[k++] = *e;
	for (const char *const *e = env; *e && k < 15; e++)
		all[k++] = *e;
	all[k] = NULL;
	return spawn_self(mode, all, err, n);
}

TEST(bad_limit_fails_closed_with_one_clear_message)
{
	char err[4096];
	const char *env[] = {"GPUGUARD_LIMIT=20GB", NULL};
	CHECK_EQ_INT(spawn("bad-limit", env, err, sizeof err), 0);
	/* reported at the first GPU call, after what the program said first */
	CHECK(strncmp(err, "child-start\n", 12) == 0);
	CHECK_EQ_INT(count_lines(err), 2);
	CHECK(strstr(err, "GPUGUARD_LIMIT") != NULL);
	CHECK(strstr(err, "20GB") != NULL);
	CHECK(strstr(err, "20Gi") != NULL); /* an example of the syntax */
	const char *env2[] = {"GPUGUARD_LIMIT=0=1Gi,0=2Gi", NULL};
	CHECK_EQ_INT(spawn("bad-limit", env2, err, sizeof err), 0);
	CHECK(strncmp(err, "child-start\n", 12) == 0);
	CHECK_EQ_INT(count_lines(err), 2);
}

/* Issue 10, finding 3: GPUGUARD_DUMP_SIGNAL=11 turned a segfault into a
 * hang with no core; such a signal is refused with one line naming the
 * variable, the value and why. */
TEST(a_dump_signal_that_changes_a_crash_is_refused)
{
	char err[4096];
	const char *env[] = {"GPUGUARD_DUMP_SIGNAL=11", NULL};
	CHECK_EQ_INT(spawn("crash-signal", env, err, sizeof err), 0);
	CHECK(strncmp(err, "child-start\n", 12) == 0);
	CHECK_EQ_INT(count_lines(err), 2);
	CHECK(strstr(err, "GPUGUARD_DUMP_SIGNAL=\"11\"") != NULL);
	CHECK(strstr(err, "crash signal") != NULL);
	CHECK(strstr(err, "using SIGUSR2") != NULL);
	const char *term[] = {"GPUGUARD_DUMP_SIGNAL=SIGTERM", NULL};
	CHECK_EQ_INT(spawn("crash-signal", term, err, sizeof err), 0);
	CHECK(strstr(err, "stop request") != NULL);
	const char *slot[] = {"GPUGUARD_DUMP_SIGNAL=33", NULL};
	CHECK_EQ_INT(spawn("crash-signal", slot, err, sizeof err), 0);
	CHECK(strstr(err, "no handler slot") != NULL);
}

TEST(verbose_prints_the_configuration_once)
{
	char err[8192];
	const char *env[] = {"GPUGUARD_LIMIT=0=2Gi,1=3Gi", "GPUGUARD_VERBOSE=1", NULL};
	CHECK_EQ_INT(spawn("verbose", env, err, sizeof err), 0);
	CHECK(strstr(err, "GPUGUARD_LIMIT=0=2Gi,1=3Gi (environment)") != NULL);
	CHECK(strstr(err, "GPUGUARD_TABLE_SLOTS=1Mi (default)") != NULL);
	CHECK(strstr(err, "device 1: ceiling 3.0 GiB") != NULL);
	const char *p = strstr(err, "effective configuration");
	CHECK(p != NULL && strstr(p + 1, "effective configuration") == NULL);
	CHECK(strncmp(err, "child-start\n", 12) == 0); /* at the first GPU call */
	/* and silence without it */
	const char *quiet[] = {"GPUGUARD_LIMIT=2Gi", NULL};
	CHECK_EQ_INT(spawn("verbose", quiet, err, sizeof err), 0);
	CHECK_EQ_INT(strcmp(err, "child-start\n"), 0);
}

TEST(percent_limit_resolves_from_the_device)
{
	char err[1024];
	const char *env[] = {"GPUGUARD_LIMIT=50%", NULL};
	CHECK_EQ_INT(spawn("percent", env, err, sizeof err), 0);
}

TEST(per_device_list_leaves_others_unlimited)
{
	char err[1024];
	const char *env[] = {"GPUGUARD_LIMIT=1=2Gi", NULL};
	CHECK_EQ_INT(spawn("list", env, err, sizeof err), 0);
}

TEST(fork_child_starts_with_zero_books)
{
	char err[1024];
	const char *env[] = {"GPUGUARD_LIMIT=1Gi", NULL};
	CHECK_EQ_INT(spawn("fork", env, err, sizeof err), 0);
}

TEST(call_from_inside_a_hook_passes_through)
{
	char err[1024];
	const char *env[] = {"GPUGUARD_LIMIT=1Gi", "SIMGPU_REENTER=1", NULL};
	CHECK_EQ_INT(spawn("reentry", env, err, sizeof err), 0);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return child(argv[1]);
	RUN(bad_limit_fails_closed_with_one_clear_message);
	RUN(a_dump_signal_that_changes_a_crash_is_refused);
	RUN(verbose_prints_the_configuration_once);
	RUN(percent_limit_resolves_from_the_device);
	RUN(per_device_list_leaves_others_unlimited);
	RUN(fork_child_starts_with_zero_books);
	RUN(call_from_inside_a_hook_passes_through);
	return harness_done();
}
