/* gpuguard: allocation dumps (include/gpuguard/dump.h) from each trigger, on
 * the simulated GPU. Each case runs this program again as a child with its
 * own GPUGUARD_DUMP_DIR, then reads back what it left there: whole files
 * under final names, mode 0600, no temporary files, one message on errors. */
#include "dumps.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>

#include "cuda_start.h"
#include "gpuguard/cuda_abi.h"
#include "gpuguard/hip_abi.h"

static gg_CUcontext ctx0;

static void setup(void)
{
	cuda_start(&ctx0, NULL);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* ---- children: each mode is one process ---- */

static int child_ceiling(void)
{
	setup();
	gg_CUdeviceptr a, b, c;
	if (cuMemAlloc_v2(&a, 600 * MIB) || cuMemAlloc_v2(&b, 400 * MIB))
		return 3;
	if (cuMemAlloc_v2(&c, 30 * MIB) != GG_CUDA_ERROR_OUT_OF_MEMORY) /* 1 GiB ceiling */
		return 4;
	/* Like PyTorch on out-of-memory: free the cache at once. The dump must
	 * still show both allocations, as they were at the refusal. */
	if (cuMemFree_v2(a) || cuMemFree_v2(b))
		return 5;
	return 0; /* exit waits for the dump in flight */
}

static int child_oom(void)
{
	setup();
	gg_CUdeviceptr a, c;
	if (cuMemAlloc_v2(&a, 800 * MIB)) /* no ceiling; a 1 GiB simulated card */
		return 3;
	if (cuMemAlloc_v2(&c, 400 * MIB) != GG_CUDA_ERROR_OUT_OF_MEMORY)
		return 4;
	return 0;
}

static _Atomic int app_handler_ran;
static void app_handler(int sig)
{
	(void)sig;
	atomic_fetch_add(&app_handler_ran, 1);
}

static int pipe_fds[2];
static _Atomic int read_errno = -1;

static void *blocked_reader(void *arg)
{
	(void)arg;
	char c;
	ssize_t n = read(pipe_fds[0], &c, 1);
	atomic_store(&read_errno, n < 0 ? errno : 0);
	return NULL;
}

static int child_signal(void)
{
	/* The application's own handler, installed before the library arms
	 * (at the first allocation), without SA_RESTART, on its own stack, with
	 * its own mask: the signal is the application's (issue 10, finding 2). */
	static char altstack[64 * 1024];
	stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
	if (sigaltstack(&ss, NULL) != 0)
		return 2;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = app_handler;
	sa.sa_flags = SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR1);
	if (sigaction(SIGUSR2, &sa, NULL) != 0)
		return 2;
	setup();
	gg_CUdeviceptr a;
	if (cuMemAlloc_v2(&a, 5 * MIB))
		return 3;
	/* exactly the flags, mask and stack it asked for */
	struct sigaction now;
	if (sigaction(SIGUSR2, NULL, &now) != 0 || now.sa_handler != app_handler)
		return 4;
	if ((now.sa_flags & (SA_RESTART | SA_ONSTACK | SA_SIGINFO)) != SA_ONSTACK)
		return 5;
	if (!sigismember(&now.sa_mask, SIGUSR1) || sigismember(&now.sa_mask, SIGTERM))
		return 6;
	raise(SIGUSR2);
	for (int i = 0; i < 200 && !atomic_load(&app_handler_ran); i++)
		sleep_ms(5);
	if (atomic_load(&app_handler_ran) != 1)
		return 7;
	/* without SA_RESTART a blocked read() is interrupted (EINTR), as the
	 * application asked; an added SA_RESTART would leave it blocked */
	pthread_t t;
	if (pipe(pipe_fds) != 0 || pthread_create(&t, NULL, blocked_reader, NULL) != 0)
		return 2;
	sleep_ms(50);
	pthread_kill(t, SIGUSR2);
	for (int i = 0; i < 200 && atomic_load(&read_errno) < 0; i++)
		sleep_ms(5);
	if (atomic_load(&read_errno) != EINTR) {
		if (write(pipe_fds[1], "x", 1) != 1)
			return 2;
		pthread_join(t, NULL);
		return 8;
	}
	pthread_join(t, NULL);
	return 0;
}

static int child_vmm(void)
{
	/* A 64 MiB reservation with 2 MiB at 0, 4 MiB at 8 MiB and 2 MiB at
	 * 20 MiB mapped: two holes (6 MiB and 8 MiB) between mapped parts. */
	setup();
	gg_CUmemAllocationProp prop = {.type = GG_CU_MEM_ALLOCATION_TYPE_PINNED,
	                               .location = {.type = GG_CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
	gg_CUdeviceptr va;
	gg_CUmemGenericAllocationHandle h[3];
	static const uint64_t off[3] = {0, 8 * MIB, 20 * MIB}, len[3] = {2 * MIB, 4 * MIB, 2 * MIB};
	if (cuMemAddressReserve(&va, 64 * MIB, 0, 0, 0))
		return 3;
	for (int i = 0; i < 3; i++)
		if (cuMemCreate(&h[i], len[i], &prop, 0) || cuMemMap(va + off[i], len[i], 0, h[i], 0))
			return 4;
	/* a second reservation, mapped then unmapped again: no holes, nothing mapped */
	gg_CUdeviceptr va2;
	if (cuMemAddressReserve(&va2, 8 * MIB, 0, 0, 0) || cuMemMap(va2, 2 * MIB, 0, h[0], 0) ||
	    cuMemUnmap(va2, 2 * MIB))
		return 5;
	return 0; /* the exit dump describes both reservations */
}

/* cudart's teardown: from its destructor, after exit() has begun, it
 * releases the primary context it retained, the last reference, and the
 * driver frees everything (hook_cuda.c's primary_release). The exit dump
 * still lists what the application left. The main program's destructors
 * run before libgpuguard's (the exit dump's). */
static int release_at_exit;
__attribute__((destructor)) static void cudart_teardown(void)
{
	if (release_at_exit)
		cuDevicePrimaryCtxRelease_v2(0);
}

static int child_exit(void)
{
	setup();
	release_at_exit = 1;
	gg_CUdeviceptr a;
	for (int i = 0; i < 3; i++)
		if (cuMemAlloc_v2(&a, (uint64_t)(i + 1) * MIB))
			return 3;
	void *h1, *h2;
	if (cuMemAllocHost_v2(&h1, 1 * MIB) || cuMemHostAlloc(&h2, 2 * MIB, 0))
		return 6;
	void *h3;
	if (cuMemAllocHost_v2(&h3, 4 * MIB) || cuMemFreeHost(h3))
		return 7;
	void *h4, *h5;
	if (hipHostMalloc(&h4, 8 * MIB, 0) || hipHostMalloc(&h5, 16 * MIB, 0) || hipHostFree(h5))
		return 10;
	if (gg_stats(0).used != 1 * MIB + 2 * MIB + 4 * MIB) /* pinned memory is never charged */
		return 8;
	return 0; /* leaks: the exit dump lists them */
}

/* A fork child's books start empty (init.c), its history with them: its
 * exit dump's peak, live figure and events are its own, not the parent's
 * 512 MiB. The parent leaves by _exit, so the child's is the only dump. */
static int child_forkpeak(void)
{
	setup();
	gg_CUdeviceptr a;
	if (cuMemAlloc_v2(&a, 512 * MIB))
		return 3;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		setup();
		if (cuMemAlloc_v2(&a, 1 * MIB))
			_exit(4);
		exit(0); /* the exit dump */
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		_exit(5);
	_exit(WEXITSTATUS(st));
}

/* A refusal in a fork child is dumped: the child re-arms dumps (its own
 * writer thread), although the forking thread had seen them armed in the
 * parent (issue 24: that thread's note of it, gg_self.dump_armed, is
 * cleared in the child). The parent leaves by _exit: the child's refusal
 * dump is the only file. */
static int child_forkrefuse(void)
{
	setup();
	gg_CUdeviceptr a, c;
	if (cuMemAlloc_v2(&a, 512 * MIB)) /* arms dumps in the parent */
		return 3;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		setup();
		if (cuMemAlloc_v2(&c, 2048 * MIB) != GG_CUDA_ERROR_OUT_OF_MEMORY) /* 1 GiB ceiling */
			_exit(4);
		exit(0); /* waits for the dump in flight */
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		_exit(5);
	_exit(WEXITSTATUS(st));
}

static int child_rate(void)
{
	setup();
	gg_CUdeviceptr a, c;
	if (cuMemAlloc_v2(&a, 1000 * MIB))
		return 3;
	/* A retry loop: one dump, the rest suppressed (interval 1h). */
	for (int i = 0; i < 5; i++) {
		if (cuMemAlloc_v2(&c, 100 * MIB) != GG_CUDA_ERROR_OUT_OF_MEMORY)
			return 4;
		sleep_ms(20);
	}
	return 0;
}

static int child_many(void)
{
	/* Many live allocations so that a dump takes a while; then a signal,
	 * and "ready" on stdout. The parent kills us with SIGKILL. */
	setup();
	int n = atoi(getenv("GG_TEST_ALLOCS") ? getenv("GG_TEST_ALLOCS") : "100000");
	gg_CUdeviceptr a;
	for (int i = 0; i < n; i++)
		if (cuMemAlloc_v2(&a, 512))
			return 3;
	if (getenv("GG_TEST_RAISE"))
		raise(SIGUSR2);
	if (write(1, "ready\n", 6) != 6)
		return 4;
	for (;;)
		sleep_ms(100);
}

static int child_fsize(void)
{
	/* Our choice as the application: ignore SIGXFSZ, so that a write past
	 * RLIMIT_FSIZE fails with EFBIG instead of killing us. */
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit rl = {16 * 1024, 16 * 1024};
	if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
		return 9;
	setup();
	gg_CUdeviceptr a, c;
	for (int i = 0; i < 2000; i++)
		if (cuMemAlloc_v2(&a, 512))
			return 3;
	for (int i = 0; i < 3; i++)
		if (cuMemAlloc_v2(&c, 2 * GIB) != GG_CUDA_ERROR_OUT_OF_MEMORY)
			return 4;
	sleep_ms(300);
	/* the process carries on */
	if (cuMemAlloc_v2(&a, 1 * MIB))
		return 5;
	return 0;
}

static _Atomic int storm_stop;
static void *storm_worker(void *arg)
{
	(void)arg;
	cuCtxSetCurrent(ctx0);
	gg_CUdeviceptr p[16];
	while (!atomic_load(&storm_stop)) {
		for (int i = 0; i < 16; i++)
			if (cuMemAlloc_v2(&p[i], 4096))
				p[i] = 0;
		for (int i = 0; i < 16; i++)
			if (p[i])
				cuMemFree_v2(p[i]);
	}
	return NULL;
}

static int child_storm(void)
{
	setup();
	gg_CUdeviceptr a;
	if (cuMemAlloc_v2(&a, 5 * MIB))
		return 3;
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, storm_worker, NULL);
	for (int i = 0; i < 500; i++)
		kill(getpid(), SIGUSR2);
	sleep_ms(50);
	for (int i = 0; i < 500; i++)
		raise(SIGUSR2);
	atomic_store(&storm_stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/* ---- the parent's side ---- */

/* A whole dump: header first, every line an object, the trailer last with
 * the right record count. Returns the text (caller frees) or NULL. */
static char *check_whole(const char *path, const char *trigger)
{
	struct stat st;
	CHECK(stat(path, &st) == 0);
	CHECK_EQ_INT(st.st_mode & 0777, 0600);
	char *b = slurp(path);
	CHECK(b != NULL);
	if (!b)
		return NULL;
	CHECK(strncmp(b, "{\"t\":\"header\",\"format\":1,", 25) == 0);
	char want[64];
	snprintf(want, sizeof want, "\"trigger\":\"%s\"", trigger);
	char *nl = strchr(b, '\n');
	CHECK(nl && memmem(b, (size_t)(nl - b), want, strlen(want)));
	int lines = count_lines(b);
	char *last = b + strlen(b) - 1;
	CHECK(*last == '\n');
	while (last > b && last[-1] != '\n')
		last--;
	char end[64];
	snprintf(end, sizeof end, "{\"t\":\"end\",\"records\":%d,", lines - 1);
	CHECK(strncmp(last, end, strlen(end)) == 0);
	for (char *p = b; *p; p = strchr(p, '\n') + 1)
		if (*p != '{') {
			CHECK(!"every line is an object");
			break;
		}
	return b;
}

static int count_str(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static char err[65536];

TEST(dump_on_ceiling_refusal)
{
	const char *dir = new_dir("ceiling");
	const char *env[] = {"GPUGUARD_LIMIT=1Gi", "GPUGUARD_RUNTIME=1", NULL};
	CHECK_EQ_INT(run_child("ceiling", dir, env, err, sizeof err), 0);
	struct listing l = list_dir(dir);
	CHECK_EQ_INT(l.finals, 1);
	CHECK_EQ_INT(l.temps, 0);
	char *b = l.finals ? check_whole(l.first, "ceiling") : NULL;
	if (!b)
		return;
	CHECK(strstr(b, "{\"t\":\"request\",\"api\":\"cuMemAlloc_v2\",\"size\":31457280,\"dev\":0,"));
	CHECK(strstr(b, "\"outcome\":\"refused_ceiling\"}"));
	CHECK(strstr(b, ",\"s\":629145600,\"d\":0,\"api\":1,"));
	CHECK(strstr(b, ",\"s\":419430400,\"d\":0,\"api\":1,"));
	CHECK_EQ_INT(count_str(b, "{\"t\":\"a\","), 2);
	CHECK(strstr(b, "{\"t\":\"device\",\"dev\":0,\"limit\":1073741824,\"used\":1048576000,"));
	CHECK(strstr(b, "\"refused_ceiling\":1,"));
	/* the driver's view, asked on the failing thread: the whole 8 GiB card */
	CHECK(strstr(b, "\"driver_total\":8589934592,\"scope\":\"pod\",\"process_used\":"));
	CHECK(strstr(b, ",\"wait_ms\":0,")); /* no GPUGUARD_ON_LIMIT=wait: no time slept for memory */
	/* issue 22: nothing beyond the allocations on this card, and the
	 * driver's figure read at the refusal is exactly them */
	CHECK(strstr(b, ",\"runtime\":0,\"runtime_driver\":1048576000}"));
	CHECK(strstr(b, "{\"t\":\"host\",\"rss\":"));
	CHECK(strstr(b, "{\"t\":\"config\",\"name\":\"GPUGUARD_LIMIT\",\"value\":\"1Gi\",\"source\":\"environment\"}"));
	/* stacks: captured, interned, resolved to this program */
	CHECK(strstr(b, "{\"t\":\"stack\",\"id\":1,\"frames\":[{\"m\":\"t_dump_lcuda_lhip\""));
	CHECK(!strstr(b, "\"st\":0}"));
	/* history: two allocations and the refusal, oldest first */
	char *h1 = strstr(b, "{\"t\":\"h\",");
	CHECK(h1 && strstr(h1, "\"op\":\"a\"") && strstr(b, "\"op\":\"r\",\"p\":\"0\",\"s\":31457280,"));
	CHECK(strstr(err, "wrote allocation dump"));
	free(b);
}

TEST(dump_on_driver_out_of_memory)
{
	const char *dir = new_dir("oom");
	const char *env[] = {"-GPUGUARD_LIMIT", "SIMGPU_MEMORY=1Gi", NULL};
	CHECK_EQ_INT(run_child("oom", dir, env, err, sizeof err), 0);
	struct listing l = list_dir(dir);
	CHECK_EQ_INT(l.finals, 1);
	char *b = l.finals ? check_whole(l.first, "driver_oom") : NULL;
	if (!b)
		return;
	/* the refused request, not the 800 MiB one before it: a plain
	 * allocation notes its request only when refused (shape.c) */
	CHECK(strstr(b, "{\"t\":\"request\",\"api\":\"cuMemAlloc_v2\",\"size\":419430400,\"dev\":0,"));
	CHECK(strstr(b, "\"outcome\":\"driver_oom\"}"));
	CHECK(strstr(b, "\"limit\":null,"));
	CHECK(strstr(b, "\"refused_driver\":1,"));
	/* the card is full: the driver's own free is under the request */
	CHECK(strstr(b, "\"driver_free\":234881024,\"driver_total\":1073741824,\"scope\":\"pod\",\"process_used\":"));
	free(b);
}

TEST(a_signal_the_application_handles_stays_its_own)
{
	const char *dir = new_dir("signal");
	CHECK_EQ_INT(run_child("signal", dir, NULL, err, sizeof err), 0);
	/* its own SIGUSR2 traffic wrote no dump, and it was told once why */
	struct listing l = list_dir(dir);
	CHECK_EQ_INT(l.finals, 0);
	CHECK_EQ_INT(count_str(err, "is the application's own: no dumps on it"), 1);
	CHECK(strstr(err, "GPUGUARD_DUMP_SIGNAL"));
}

TEST(dump_describes_vmm_reservations_and_their_holes)
{
	const char *dir = new_dir("vmm");
	const char *env[] = {"GPUGUARD_DUMP_AT_EXIT=1", NULL};
	CHECK_EQ_INT(run_child("vmm", dir, env, err, sizeof err), 0);
	struct listing l = list_dir(dir);
	CHECK_EQ_INT(l.finals, 1);
	char *b = l.finals ? check_whole(l.first, "exit") : NULL;
	if (!b)
		return;
	CHECK_EQ_INT(count_str(b, "{\"t\":\"vmm\","), 2);
	CHECK(strstr(b, "\"size\":67108864,\"mapped\":8388608,\"holes\":2,\"largest_hole\":8388608}"));
	CHECK(strstr(b, "\"size\":8388608,\"mapped\":0,\"holes\":0,\"largest_hole\":0}"));
	free(b);
}

/* TSAN_OPTIONS for a child whose forked child dumps: the dump starts a
 * writer thread in a child of a threaded parent, which ThreadSanitizer
 * refuses unless told. Written into buf, which it returns. */
static const char *tsan_fork_env(char *buf, size_t n)
{
	const char *t = getenv("TSAN_OPTIONS");
	snprintf(buf, n, "TSAN_OPTIONS=%s%sdie_after_fork=0", t ? t : "", t && *t ? ":" : "");
	return buf;
}

TEST(fork_child_dump_holds_its_own_peak_and_history)
{
	const char *dir = new_dir("forkpeak");
	char tsan[512];
	const char *env[] = {"GPUGUARD_DUMP_AT_EXIT=1", tsan_fork_env(tsan, sizeof tsan), NULL};
	CHECK_EQ_INT(run_child("forkpeak", dir, env, err, sizeof err), 0);
	struct listing l = list_dir(dir);
	CHECK_EQ_INT(l.finals, 1);
	char *b = l.finals ? check_whole(l.first, "exit") : NULL;
	if (!b)
		return;
	CHECK(strstr(b, "{\"t\":\"peak\",\"dev\":0,\"bytes\":1048576,"));
	CHECK(strstr(b, ",\"live\":1048576}"));
	CHECK(!strstr(b, "\"s\":536870912,")); /* no event of the parent's */
	CHECK_EQ_INT(count_str(b, "{\"t\":\"h\","), 1);
	free(b);
}

TEST(dump_at_exit_lists_leaks_and_pinned_memory)
{
	const char *dir = new_dir("exit");
	const char *env[] = {"GPUGUARD_DUMP_AT_EXIT=1", NULL};
	/* an argument with a quote, a backslash, a newline, a byte that is not
	 * UTF-8 and a euro sign (valid UTF-8, kept as is) */
	CHECK_EQ_INT(run_child("exit\"\\\n\xff\xe2\x82\xac", dir, env, err, sizeof err), 0);
	struct listing l = list_dir(dir);
	CHECK_EQ_INT(l.finals, 1);
	char *b = l.finals ? check_whole(l.first, "exit") : NULL;
	if (!b)
		return;
	CHECK_EQ_INT(count_str(b, "{\"t\":\"a\","), 3);
	CHECK(strstr(b, ",\"exit\\\"\\\\\\u000a\\u00ff\xe2\x82\xac\"],\"trigger\":\"exit\","));
	CHECK(strstr(b, "\"pinned_bytes\":11534336,\"pinned_allocs\":3}")); /* 1 + 2 + 8 MiB */
	CHECK(
	    strstr(b, "\"driver_free\":null,\"driver_total\":null,\"scope\":\"pod\",")); /* not a failure: not asked */
	CHECK(strstr(b, "\"used\":7340032,"));                                           /* never charged */
	free(b);
}

TEST(fork_child_refusal_is_dumped)
{
	const char *dir = new_dir("forkrefuse");
	char tsan[512];
	const char *env[] = {"GPUGUARD_LIMIT=1Gi", tsan_fork_env(tsan, sizeof tsan), NULL};
	CHECK_EQ_INT(run_child("forkrefuse", dir, env, err, sizeof err), 0);
	struct listing l = list_dir(dir);
	CHECK_EQ_INT(l.finals, 1);
	char *b = l.finals ? check_whole(l.first, "ceiling") : NULL;
	if (!b)
		return;
	CHECK(strstr(b, "{\"t\":\"request\",\"api\":\"cuMemAlloc_v2\",\"size\":2147483648,\"dev\":0,"));
	free(b);
}

TEST(rate_limit_suppresses_and_counts)
{
	const char *dir = new_dir("rate");
	const char *env[] = {"GPUGUARD_LIMIT=1Gi", "GPUGUARD_DUMP_INTERVAL=1h", "GPUGUARD_DUMP_AT_EXIT=1", NULL};
	CHECK_EQ_INT(run_child("rate", dir, env, err, sizeof err), 0);
	struct listing l = list_dir(dir);
	CHECK_EQ_INT(l.finals, 2); /* the first refusal's, and the exit one */
	CHECK_EQ_INT(l.temps, 0);
	DIR *d = opendir(dir);
	struct dirent *e;
	int exit_seen = 0;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char p[8192];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		char *b = slurp(p);
		if (b && strstr(b, "\"trigger\":\"exit\"")) {
			exit_seen = 1;
			CHECK(strstr(b, "\"suppressed\":4,"));
			CHECK_EQ_INT(count_str(b, "\"op\":\"r\""), 5);
		}
		free(b);
	}
	if (d)
		closedir(d);
	CHECK(exit_seen);
	/* GPUGUARD_DUMP_MAX=0: none at all */
	const char *dir0 = new_dir("rate0");
	const char *env0[] = {"GPUGUARD_LIMIT=1Gi", "GPUGUARD_DUMP_MAX=0", NULL};
	CHECK_EQ_INT(run_child("rate", dir0, env0, err, sizeof err), 0);
	CHECK_EQ_INT(list_dir(dir0).finals, 0);
}

TEST(kill_9_while_writing_leaves_no_partial_final_file)
{
	const char *dir = new_dir("kill9");
	for (int round = 0; round < 6; round++) {
		int out[2];
		if (pipe(out) != 0)
			return;
		pid_t pid = fork();
		if (pid == 0) {
			dup2(out[1], 1);
			close(out[0]);
			close(out[1]);
			char dd[4200];
			snprintf(dd, sizeof dd, "GPUGUARD_DUMP_DIR=%s", dir);
			putenv(dd);
			putenv("GG_TEST_RAISE=1");
			putenv("GG_TEST_ALLOCS=100000");
			char self[4096];
			ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
			if (len <= 0)
				_exit(127);
			self[len] = 0;
			execl(self, self, "many", (char *)NULL);
			_exit(127);
		}
		close(out[1]);
		char buf[16];
		ssize_t r = read(out[0], buf, sizeof buf);
		close(out[0]);
		CHECK(r > 0);
		sleep_ms(round * 3);
		kill(pid, SIGKILL);
		int st;
		waitpid(pid, &st, 0);
	}
	/* Whatever got renamed is whole; anything else is a hidden temp file,
	 * or a dead round's temp file that a later round's set-up swept into a
	 * visible *.partial.jsonl (issue 25: t_postmortem checks those). */
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (strncmp(e->d_name, "gpuguard-", 9) != 0 ||
		    (n > 14 && strcmp(e->d_name + n - 14, ".partial.jsonl") == 0))
			continue;
		char p[8192];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		free(check_whole(p, "signal"));
	}
	if (d)
		closedir(d);
}

TEST(full_disk_gives_one_message_and_no_file)
{
	const char *dir = new_dir("fsize");
	const char *env[] = {"GPUGUARD_LIMIT=1Gi", "GPUGUARD_DUMP_INTERVAL=0", NULL};
	CHECK_EQ_INT(run_child("fsize", dir, env, err, sizeof err), 0);
	struct listing l = list_dir(dir);
	CHECK_EQ_INT(l.finals, 0);
	CHECK_EQ_INT(l.temps, 0);
	CHECK_EQ_INT(count_str(err, "could not write allocation dump"), 1);
	CHECK(strstr(err, "File too large"));
}

TEST(missing_directory_gives_one_message)
{
	const char *env[] = {"GPUGUARD_LIMIT=1Gi", "GPUGUARD_DUMP_INTERVAL=0", NULL};
	char missing[4200];
	snprintf(missing, sizeof missing, "%s/no/such/dir", base_dir);
	CHECK_EQ_INT(run_child("rate", missing, env, err, sizeof err), 0);
	CHECK_EQ_INT(count_str(err, "could not write allocation dump"), 1);
	CHECK(strstr(err, "No such file or directory"));
}

TEST(signal_storm_no_crash_bounded_dumps)
{
	const char *dir = new_dir("storm");
	const char *env[] = {"GPUGUARD_DUMP_INTERVAL=0", "GPUGUARD_DUMP_MAX=3", NULL};
	CHECK_EQ_INT(run_child("storm", dir, env, err, sizeof err), 0);
	struct listing l = list_dir(dir);
	CHECK(l.finals >= 1 && l.finals <= 3);
	CHECK_EQ_INT(l.temps, 0);
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		if (strcmp(argv[1], "ceiling") == 0)
			return child_ceiling();
		if (strcmp(argv[1], "oom") == 0)
			return child_oom();
		if (strcmp(argv[1], "signal") == 0)
			return child_signal();
		if (strncmp(argv[1], "exit", 4) == 0) /* the rest tests JSON escaping */
			return child_exit();
		if (strcmp(argv[1], "rate") == 0)
			return child_rate();
		if (strcmp(argv[1], "forkpeak") == 0)
			return child_forkpeak();
		if (strcmp(argv[1], "forkrefuse") == 0)
			return child_forkrefuse();
		if (strcmp(argv[1], "many") == 0)
			return child_many();
		if (strcmp(argv[1], "fsize") == 0)
			return child_fsize();
		if (strcmp(argv[1], "storm") == 0)
			return child_storm();
		if (strcmp(argv[1], "vmm") == 0)
			return child_vmm();
		return 99;
	}
	if (dumps_init("t_dump") != 0)
		return 2;
	RUN(dump_on_ceiling_refusal);
	RUN(dump_on_driver_out_of_memory);
	RUN(a_signal_the_application_handles_stays_its_own);
	RUN(dump_at_exit_lists_leaks_and_pinned_memory);
	RUN(fork_child_dump_holds_its_own_peak_and_history);
	RUN(fork_child_refusal_is_dumped);
	RUN(rate_limit_suppresses_and_counts);
	RUN(kill_9_while_writing_leaves_no_partial_final_file);
	RUN(full_disk_gives_one_message_and_no_file);
	RUN(missing_directory_gives_one_message);
	RUN(signal_storm_no_crash_bounded_dumps);
	RUN(dump_describes_vmm_reservations_and_their_holes);
	return harness_done();
}
