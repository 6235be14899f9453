/* gpuguard: the application's signal handlers run through our dispatcher
 * (interpose/signal.c, issue 10, finding 9).
 *  - A handler that interrupts a hook (here: inside the real cuMemAlloc, see
 *    SIMGPU_ALLOC_SIGNAL in .env) has its allocations refused, of every
 *    shape, without reaching the driver: before, they passed uncharged.
 *  - A handler that interrupts no hook is governed as any caller.
 *  - What the program sees of sigaction, signal, bsd_signal, ssignal,
 *    sysv_signal, sigset and siginterrupt is what it sees without the
 *    preload (the same steps run in a child without LD_PRELOAD), and the
 *    kernel holds exactly the flags and mask asked for.
 *  - SA_ONSTACK runs the handler on its alternate stack; SA_RESTART is
 *    there only when asked (read() returns EINTR otherwise); the handler's
 *    ucontext is the kernel's own (a change to its signal mask holds). */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include "gpuguard/cuda_abi.h"

/* The old interfaces are the point here: programs still install handlers
 * through them. glibc exports bsd_signal without declaring it. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
sighandler_t bsd_signal(int sig, sighandler_t handler);

/* ---- allocations from a handler ---------------------------------------- */

/* What the simulated card holds in pages on dev. */
static unsigned long long sim_held(int dev)
{
	return sim_held_by("cuda", dev);
}

enum { H_ALLOC, H_PITCH, H_MANAGED, H_ASYNC, H_ARRAY, H_N };
static volatile int h_rc[H_N], h_runs;
static gg_CUdeviceptr h_ptr[H_N];
static gg_CUarray h_array;
static volatile int h_all_shapes;

static void on_usr1(int sig)
{
	(void)sig;
	h_runs++;
	h_rc[H_ALLOC] = cuMemAlloc_v2(&h_ptr[H_ALLOC], 32 * MIB);
	if (!h_all_shapes)
		return;
	size_t pitch;
	h_rc[H_PITCH] = cuMemAllocPitch_v2(&h_ptr[H_PITCH], &pitch, 4096, 1024, 4);
	h_rc[H_MANAGED] = cuMemAllocManaged(&h_ptr[H_MANAGED], 16 * MIB, GG_CU_MEM_ATTACH_GLOBAL);
	h_rc[H_ASYNC] = cuMemAllocAsync(&h_ptr[H_ASYNC], 8 * MIB, NULL);
	gg_CUDA_ARRAY_DESCRIPTOR d = {.Width = 1024, .Height = 1024, .Format = GG_CU_AD_FORMAT_FLOAT, .NumChannels = 4};
	h_rc[H_ARRAY] = cuArrayCreate_v2(&h_array, &d);
}

static void install_usr1(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	h_runs = 0;
	for (int i = 0; i < H_N; i++)
		h_rc[i] = -1, h_ptr[i] = 0;
}

TEST(a_handler_inside_the_driver_call_is_refused_every_shape)
{
	install_usr1();
	h_all_shapes = 1;
	gg_CUdeviceptr big = 0;
	/* 256 MiB: the simulated driver raises SIGUSR1 inside this call */
	CHECK_EQ_INT(cuMemAlloc_v2(&big, 256 * MIB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(h_runs, 1);
	for (int i = 0; i < H_N; i++)
		CHECK_EQ_INT(h_rc[i], GG_CUDA_ERROR_OUT_OF_MEMORY);
	/* Nothing the handler asked for reached the card: what it holds is
	 * what gpuguard charged. */
	CHECK_EQ_U64(sim_held(0), 256 * MIB);
	CHECK_EQ_U64(gg_stats(0).used, 256 * MIB);
	for (int i = 0; i < H_N; i++)
		if (h_rc[i] == GG_CUDA_SUCCESS && i != H_ARRAY)
			i == H_ASYNC ? cuMemFreeAsync(h_ptr[i], NULL) : cuMemFree_v2(h_ptr[i]);
	if (h_rc[H_ARRAY] == GG_CUDA_SUCCESS)
		cuArrayDestroy(h_array);
	CHECK_EQ_INT(cuMemFree_v2(big), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, 0);
}

/* The trailer of this process's first dump, once it is written (a dump
 * appears under its final name only when whole). */
static int dump_trailer(char *out, size_t n)
{
	const char *dir = getenv("GPUGUARD_DUMP_DIR");
	char pat[64];
	snprintf(pat, sizeof pat, "-%d-", (int)getpid());
	for (int tries = 0; dir && tries < 3000; tries++) {
		DIR *d = opendir(dir);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (strncmp(e->d_name, "gpuguard-", 9) != 0 || !strstr(e->d_name, pat) ||
			    strcmp(e->d_name + strlen(e->d_name) - 6, ".jsonl") != 0)
				continue;
			char path[4096];
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
			FILE *f = fopen(path, "r");
			char line[4096];
			int found = 0;
			while (f && fgets(line, sizeof line, f))
				if (strstr(line, "{\"t\":\"end\",") == line) {
					snprintf(out, n, "%s", line);
					found = 1;
				}
			if (f)
				fclose(f);
			if (found) {
				closedir(d);
				return 0;
			}
		}
		if (d)
			closedir(d);
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return -1;
}

TEST(the_refusals_are_counted_in_dumps)
{
	/* A refusal at the ceiling writes a dump; its trailer counts the five
	 * handler refusals above. */
	gg_CUdeviceptr p;
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 2 * GIB), GG_CUDA_ERROR_OUT_OF_MEMORY);
	char end[4096] = "";
	CHECK_EQ_INT(dump_trailer(end, sizeof end), 0);
	if (!strstr(end, "\"signal_refused\":5,")) {
		fprintf(stderr, "trailer: %s\n", end);
		CHECK(0);
	}
}

TEST(a_handler_outside_any_hook_is_charged)
{
	install_usr1();
	h_all_shapes = 0;
	raise(SIGUSR1); /* from the program itself: no hook runs */
	CHECK_EQ_INT(h_runs, 1);
	CHECK_EQ_INT(h_rc[H_ALLOC], GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, 32 * MIB);
	CHECK_EQ_U64(sim_held(0), 32 * MIB);
	CHECK_EQ_INT(cuMemFree_v2(h_ptr[H_ALLOC]), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, 0);
	CHECK_EQ_U64(gg_stats(0).untracked_frees, 0);
}

/* ---- what the program sees of its dispositions -------------------------- */

static volatile int h3_runs;
static void h1(int s)
{
	(void)s;
}
static void h2(int s)
{
	(void)s;
}
static void h3(int s, siginfo_t *i, void *u)
{
	(void)s, (void)i, (void)u;
	h3_runs++;
}

static const char *name(void *p)
{
	if (p == (void *)SIG_DFL)
		return "DFL";
	if (p == (void *)SIG_IGN)
		return "IGN";
	if (p == (void *)SIG_HOLD)
		return "HOLD";
	if (p == (void *)SIG_ERR)
		return "ERR";
	if (p == (void *)h1)
		return "h1";
	if (p == (void *)h2)
		return "h2";
	if (p == (void *)h3)
		return "h3";
	return "other";
}

struct buf {
	char s[8192];
	size_t n;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(b->s + b->n, sizeof b->s - b->n, fmt, ap);
	va_end(ap);
	if (w > 0 && (size_t)w < sizeof b->s - b->n)
		b->n += (size_t)w;
}

static void put_act(struct buf *b, const char *label, int rc, const struct sigaction *a)
{
	void *h = (a->sa_flags & SA_SIGINFO) ? (void *)a->sa_sigaction : (void *)a->sa_handler;
	put(b, "%s rc=%d handler=%s flags=%#x mask=", label, rc, name(h), (unsigned)a->sa_flags);
	for (int s = 1; s < 65; s++)
		if (sigismember(&a->sa_mask, s) == 1)
			put(b, "%d,", s);
	put(b, "\n");
}

/* The probe's signal: not SIGUSR2, gpuguard's dump signal by default,
 * which the preloaded process has a handler of ours for. */
#define PS SIGPROF

static void query(struct buf *b, const char *label)
{
	struct sigaction q;
	memset(&q, 0x5a, sizeof q);
	int rc = sigaction(PS, NULL, &q);
	put_act(b, label, rc, &q);
}

static int blocked(void)
{
	sigset_t m;
	sigprocmask(SIG_BLOCK, NULL, &m);
	return sigismember(&m, PS);
}

/* The same steps, in this process and in a child without the preload. */
static void probe(struct buf *b)
{
	struct sigaction a, o;
	int rc;
	query(b, "q0");
	memset(&a, 0, sizeof a);
	a.sa_handler = h1;
	sigemptyset(&a.sa_mask);
	sigaddset(&a.sa_mask, SIGINT);
	sigaddset(&a.sa_mask, SIGTERM);
	a.sa_flags = SA_ONSTACK | SA_RESTART | SA_NODEFER;
	rc = sigaction(PS, &a, &o);
	put_act(b, "o1", rc, &o);
	query(b, "q1");
	memset(&a, 0, sizeof a);
	a.sa_sigaction = h3;
	sigemptyset(&a.sa_mask);
	sigaddset(&a.sa_mask, SIGHUP);
	a.sa_flags = SA_SIGINFO | SA_RESETHAND;
	rc = sigaction(PS, &a, &o);
	put_act(b, "o2", rc, &o);
	query(b, "q2");
	h3_runs = 0;
	raise(PS);
	put(b, "h3 ran %d\n", h3_runs);
	query(b, "q3"); /* SA_RESETHAND: the default again */
	memset(&a, 0, sizeof a);
	a.sa_handler = SIG_IGN;
	rc = sigaction(PS, &a, &o);
	put_act(b, "o4", rc, &o);
	query(b, "q4");
	put(b, "r5 %s\n", name((void *)signal(PS, h1)));
	query(b, "q5");
	put(b, "i6 %d\n", siginterrupt(PS, 1));
	put(b, "r6 %s\n", name((void *)signal(PS, h2)));
	query(b, "q6");
	siginterrupt(PS, 0);
	put(b, "r7 %s\n", name((void *)bsd_signal(PS, h1)));
	query(b, "q7");
	put(b, "r8 %s\n", name((void *)ssignal(PS, h2)));
	query(b, "q8");
	put(b, "r9 %s\n", name((void *)sysv_signal(PS, h2)));
	query(b, "q9");
	raise(PS);
	query(b, "q10");
	put(b, "r11 %s\n", name((void *)sigset(PS, h1)));
	query(b, "q11");
	put(b, "r12 %s blocked=%d\n", name((void *)sigset(PS, SIG_HOLD)), blocked());
	put(b, "r13 %s blocked=%d\n", name((void *)sigset(PS, h2)), blocked());
	query(b, "q13");
	put(b, "r14 %s\n", name((void *)sigset(PS, SIG_DFL)));
	query(b, "q14");
	errno = 0;
	void *bad = (void *)signal(0, h1);
	put(b, "bad %s errno=%d\n", name(bad), errno);
}

/* The kernel's entry, as the rt_sigaction system call has it (the same
 * layout on x86-64 and aarch64). */
struct kact {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

TEST(dispositions_read_as_without_the_preload)
{
	static struct buf here;
	here.n = 0;
	probe(&here);
	char child[8192];
	const char *const env[] = {"-LD_PRELOAD", NULL};
	int st = spawn_self("probe", env, child, sizeof child);
	CHECK_EQ_INT(st, 0);
	here.s[here.n] = 0;
	if (strcmp(here.s, child) != 0) {
		fprintf(stderr, "under the preload:\n%s\nwithout:\n%s\n", here.s, child);
		CHECK(0);
	}
}

TEST(the_kernel_gets_the_flags_and_mask_asked_for)
{
#if defined(__SANITIZE_THREAD__)
	SKIP("ThreadSanitizer installs its own wrapper with a full mask, whatever we pass");
#endif
	struct sigaction a;
	memset(&a, 0, sizeof a);
	a.sa_handler = h1;
	sigemptyset(&a.sa_mask);
	sigaddset(&a.sa_mask, SIGINT);
	sigaddset(&a.sa_mask, SIGCHLD);
	a.sa_flags = SA_ONSTACK | SA_NODEFER | SA_RESETHAND;
	CHECK_EQ_INT(sigaction(SIGUSR2, &a, NULL), 0);
	struct kact k;
	CHECK_EQ_INT((int)syscall(SYS_rt_sigaction, SIGUSR2, NULL, &k, sizeof k.mask), 0);
	/* ours adds SA_SIGINFO (three arguments); glibc adds SA_RESTORER. The
	 * low 32 bits: glibc widens the int flags with their sign, which the
	 * kernel clears again and qemu-user keeps (aarch64 in CI). */
	CHECK_EQ_U64((unsigned)k.flags & ~(unsigned)(SA_SIGINFO | 0x04000000), (unsigned)a.sa_flags);
	CHECK_EQ_U64(k.mask, (1ull << (SIGINT - 1)) | (1ull << (SIGCHLD - 1)));
	signal(SIGUSR2, SIG_DFL);
}

/* ---- the handler's stack, restarts and context --------------------------- */

static char alt[1 << 16];
static volatile int on_alt;
static void h_where(int s)
{
	(void)s;
	char here;
	on_alt = &here >= alt && &here < alt + sizeof alt;
}

TEST(sa_onstack_runs_on_the_alternate_stack)
{
	stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
	CHECK_EQ_INT(sigaltstack(&ss, NULL), 0);
	struct sigaction a;
	memset(&a, 0, sizeof a);
	a.sa_handler = h_where;
	sigemptyset(&a.sa_mask);
	a.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR2, &a, NULL);
	on_alt = -1;
	raise(SIGUSR2);
	CHECK_EQ_INT(on_alt, 1);
	a.sa_flags = 0;
	sigaction(SIGUSR2, &a, NULL);
	on_alt = -1;
	raise(SIGUSR2);
	CHECK_EQ_INT(on_alt, 0);
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	signal(SIGUSR2, SIG_DFL);
}

static int pipefd[2];
static volatile int read_done;
static pthread_t reader;

static void *kicker(void *arg)
{
	int rounds = *(int *)arg;
	/* Signals until the reader's read() returns; if it never does (the
	 * read restarted each time), a byte ends it. A signal that lands
	 * before read() starts only runs the handler: the next one counts. */
	for (int i = 0; i < rounds && !__atomic_load_n(&read_done, __ATOMIC_ACQUIRE); i++) {
		pthread_kill(reader, SIGUSR2);
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (write(pipefd[1], "x", 1) != 1)
		perror("write");
	return NULL;
}

/* read()'s result when SIGUSR2 (with flags) keeps arriving. */
static ssize_t read_under_signals(int flags, int rounds, int *err)
{
	struct sigaction a;
	memset(&a, 0, sizeof a);
	a.sa_handler = h1;
	sigemptyset(&a.sa_mask);
	a.sa_flags = flags;
	sigaction(SIGUSR2, &a, NULL);
	if (pipe(pipefd) != 0)
		return -2;
	read_done = 0;
	reader = pthread_self();
	pthread_t t;
	pthread_create(&t, NULL, kicker, &rounds);
	char c;
	ssize_t r = read(pipefd[0], &c, 1);
	*err = errno;
	__atomic_store_n(&read_done, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	close(pipefd[0]);
	close(pipefd[1]);
	signal(SIGUSR2, SIG_DFL);
	return r;
}

TEST(sa_restart_only_where_asked)
{
	int err = 0;
	ssize_t r = read_under_signals(0, 500, &err);
	CHECK_EQ_INT((int)r, -1);
	CHECK_EQ_INT(err, EINTR);
	r = read_under_signals(SA_RESTART, 30, &err);
	CHECK_EQ_INT((int)r, 1); /* restarted through every signal, then the byte */
}

static volatile int uc_ok;
static void h_uc(int s, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	uc_ok = si && si->si_signo == s && si->si_pid == getpid() && uc && sigismember(&uc->uc_sigmask, SIGWINCH) == 1;
	/* The kernel restores the mask from this context at return. */
	if (uc)
		sigdelset(&uc->uc_sigmask, SIGWINCH);
}

TEST(the_handler_gets_the_kernels_context)
{
	struct sigaction a;
	memset(&a, 0, sizeof a);
	a.sa_sigaction = h_uc;
	sigemptyset(&a.sa_mask);
	a.sa_flags = SA_SIGINFO;
	sigaction(SIGUSR2, &a, NULL);
	sigset_t w, m;
	sigemptyset(&w);
	sigaddset(&w, SIGWINCH);
	sigprocmask(SIG_BLOCK, &w, NULL);
	uc_ok = 0;
	raise(SIGUSR2);
	CHECK_EQ_INT(uc_ok, 1);
	sigprocmask(SIG_BLOCK, NULL, &m);
	CHECK_EQ_INT(sigismember(&m, SIGWINCH), 0); /* the handler's change held */
	sigprocmask(SIG_UNBLOCK, &w, NULL);
	signal(SIGUSR2, SIG_DFL);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "probe") == 0) {
		static struct buf b;
		probe(&b);
		fwrite(b.s, 1, b.n, stderr);
		return 0;
	}
	gg_CUdevice d;
	gg_CUcontext ctx;
	if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx))
		return 2;
	RUN(a_handler_inside_the_driver_call_is_refused_every_shape);
	RUN(the_refusals_are_counted_in_dumps);
	RUN(a_handler_outside_any_hook_is_charged);
	RUN(dispositions_read_as_without_the_preload);
	RUN(the_kernel_gets_the_flags_and_mask_asked_for);
	RUN(sa_onstack_runs_on_the_alternate_stack);
	RUN(sa_restart_only_where_asked);
	RUN(the_handler_gets_the_kernels_context);
	return harness_done();
}
