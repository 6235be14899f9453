/* gpuguard tests: the kill soak of pod scope (issue 9; tests/scripts/
 * soak.sh). One program, three parts:
 *
 *   podsoak run STATS REGION CEILING SECONDS KILLS
 *	the controller (not preloaded): starts PODSOAK_WORKERS workers, then
 *	until SECONDS are up samples them (SIGSTOP all, wait until each has
 *	stopped, sum what their stats slots say they hold, compare, SIGCONT)
 *	and, KILLS times over the run at random moments, SIGKILLs a random
 *	worker and starts a new one in its place. Then it parks them all and
 *	runs PODSOAK_FINAL (a shell command) with PODSOAK_LIVE set to the
 *	simulated bytes the parked workers hold, while they hold it.
 *   podsoak worker
 *	PODSOAK_THREADS threads allocating and freeing mixed sizes at the
 *	ceiling, under LD_PRELOAD of gpuguard and libpodsoak_shim.so, which
 *	keeps the worker's stats slot (podsoak.h).
 *   podsoak probe ROOM
 *	under gpuguard alone: ROOM bytes are granted, and then nothing more.
 *
 * The controller and the killer are one thread, so a sample never sees a
 * worker half killed: a killed worker is reaped (its simulated memory is
 * gone with it) and its stats slot zeroed before anything is read again.
 * The pod region's slots are left as the dead worker left them: that is
 * gpuguard's part to repair. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuguard/cuda_abi.h"
#include "gpuguard/region.h"
#include "podsoak.h"

int simgpu_cuda_debug_used(int dev, unsigned long long *pages_bytes, unsigned long long *peak_pages_bytes,
                           unsigned long long *live_allocs);

#define MIB (1024ull * 1024)

static uint64_t rnd_next(uint64_t *s)
{
	/* xorshift64* */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct podsoak_stats *map_stats(const char *path, int create)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0), 0600);
	if (fd < 0 || (create && ftruncate(fd, sizeof(struct podsoak_stats)) != 0)) {
		perror(path);
		exit(2);
	}
	struct podsoak_stats *st = mmap(NULL, sizeof *st, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (st == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return st;
}

/* ---- the worker ---------------------------------------------------------- */

/* Over 1 MiB each (whole pages in the simulator, as gpuguard charges them),
 * not page multiples, so the rounding is exercised on both sides. */
static const uint64_t sizes[] = {MIB + 1,      2 * MIB,  3 * MIB + 512, 6 * MIB,
                                 10 * MIB - 1, 16 * MIB, 24 * MIB + 7,  48 * MIB};
#define HOLD_MAX 8

static struct podsoak_stats *stats;
static struct podsoak_slot *mine;
static gg_CUcontext ctx;

static void *worker_thread(void *arg)
{
	uint64_t seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)arg ^ now_ns();
	gg_CUdeviceptr ptr[HOLD_MAX];
	uint64_t len[HOLD_MAX];
	int n = 0;
	if (cuCtxSetCurrent(ctx) != GG_CUDA_SUCCESS) {
		atomic_fetch_add_explicit(&mine->errors, 1, memory_order_relaxed); /* statistic */
		return NULL;
	}
	/* relaxed: a flag polled until set; what it asks for orders nothing */
	while (!atomic_load_explicit(&stats->stop, memory_order_relaxed)) {
		uint64_t r = rnd_next(&seed);
		if (n < HOLD_MAX && (n == 0 || r % 3 != 0)) {
			uint64_t size = sizes[(r >> 8) % (sizeof sizes / sizeof sizes[0])];
			gg_CUdeviceptr p;
			gg_CUresult rc = cuMemAlloc_v2(&p, size);
			/* relaxed, here and below: statistics, read once parked */
			if (rc == GG_CUDA_SUCCESS) {
				ptr[n] = p;
				len[n++] = size;
				atomic_fetch_add_explicit(&mine->allocs, 1, memory_order_relaxed);
			} else if (rc == GG_CUDA_ERROR_OUT_OF_MEMORY) {
				atomic_fetch_add_explicit(&mine->refusals, 1, memory_order_relaxed);
			} else {
				atomic_fetch_add_explicit(&mine->errors, 1, memory_order_relaxed);
			}
		} else {
			int i = (int)((r >> 8) % (uint64_t)n);
			if (cuMemFree_v2(ptr[i]) != GG_CUDA_SUCCESS)
				atomic_fetch_add_explicit(&mine->errors, 1, memory_order_relaxed);
			ptr[i] = ptr[--n];
			len[i] = len[n];
		}
	}
	/* Parking: give back the largest block, so the pod has room for the
	 * final probe, and keep the rest. */
	int big = -1;
	for (int i = 0; i < n; i++)
		if (big < 0 || len[i] > len[big])
			big = i;
	if (big >= 0 && cuMemFree_v2(ptr[big]) != GG_CUDA_SUCCESS)
		atomic_fetch_add_explicit(&mine->errors, 1, memory_order_relaxed);
	return NULL;
}

static int worker(void)
{
	const char *path = getenv("PODSOAK_STATS"), *s = getenv("PODSOAK_SLOT");
	if (!path || !s)
		return 2;
	stats = map_stats(path, 0);
	mine = &stats->slot[atoi(s) % PODSOAK_WORKERS];
	gg_CUdevice d;
	if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d)) {
		fprintf(stderr, "podsoak worker: the simulated driver did not start\n");
		return 2;
	}
	pthread_t t[PODSOAK_THREADS];
	for (int i = 0; i < PODSOAK_THREADS; i++)
		pthread_create(&t[i], NULL, worker_thread, (void *)(uintptr_t)i);
	for (int i = 0; i < PODSOAK_THREADS; i++)
		pthread_join(t[i], NULL);
	unsigned long long u = 0;
	simgpu_cuda_debug_used(0, &u, NULL, NULL);
	/* relaxed: published by the release store of parked below */
	atomic_store_explicit(&mine->sim_used, u, memory_order_relaxed);
	/* release: sim_used and the final counters before parked, which the
	 * controller acquires */
	atomic_store_explicit(&mine->parked, 1, memory_order_release);
	for (;;)
		pause(); /* holding what we hold until the controller kills us */
}

/* ---- the probe ------------------------------------------------------------- */

static int probe_failed;

static void expect(const char *what, gg_CUresult got, gg_CUresult want)
{
	printf("check probe-%s %s (answer %d, want %d)\n", what, got == want ? "ok" : "FAIL", (int)got, (int)want);
	probe_failed |= got != want;
}

static int probe(uint64_t room)
{
	gg_CUdevice d;
	gg_CUdeviceptr p, q;
	if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx)) {
		printf("check probe-start FAIL (the simulated driver did not start)\n");
		return 1;
	}
	expect("exact-fit-granted", cuMemAlloc_v2(&p, room), GG_CUDA_SUCCESS);
	size_t fr = 1, tot = 0;
	cuMemGetInfo_v2(&fr, &tot);
	printf("check probe-full %s (cuMemGetInfo free %zu after the exact fit, want 0)\n", fr == 0 ? "ok" : "FAIL",
	       fr);
	probe_failed |= fr != 0;
	expect("full-one-byte-refused", cuMemAlloc_v2(&q, 1), GG_CUDA_ERROR_OUT_OF_MEMORY);
	expect("full-one-granule-refused", cuMemAlloc_v2(&q, PODSOAK_PAGE), GG_CUDA_ERROR_OUT_OF_MEMORY);
	expect("free", cuMemFree_v2(p), GG_CUDA_SUCCESS);
	/* room + 1 is charged as room + one 2 MiB granule (gpuguard/charge.h) */
	expect("fit-plus-one-byte-refused", cuMemAlloc_v2(&q, room + 1), GG_CUDA_ERROR_OUT_OF_MEMORY);
	expect("fit-plus-one-granule-refused", cuMemAlloc_v2(&q, room + PODSOAK_PAGE), GG_CUDA_ERROR_OUT_OF_MEMORY);
	expect("exact-fit-granted-again", cuMemAlloc_v2(&p, room), GG_CUDA_SUCCESS);
	return probe_failed;
}

/* ---- the controller ------------------------------------------------------------ */

static pid_t pids[PODSOAK_WORKERS];
static char self_exe[4096];
static int failures;

static void fail(const char *fmt, const char *name, long long a, long long b)
{
	printf("check %s FAIL (", name);
	printf(fmt, a, b);
	printf(")\n");
	fflush(stdout);
	failures++;
}

static pid_t spawn(int i)
{
	char slot[16];
	snprintf(slot, sizeof slot, "%d", i);
	fflush(stdout);
	pid_t parent = getpid();
	pid_t p = fork();
	if (p < 0) {
		perror("podsoak: fork");
		exit(2); /* the workers die with us (PR_SET_PDEATHSIG) */
	}
	if (p == 0) {
		/* A controller killed from outside (a test's time limit) takes
		 * its workers along instead of leaving them spinning. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
			_exit(127);
		const char *pre = getenv("PODSOAK_PRELOAD");
		if (pre)
			setenv("LD_PRELOAD", pre, 1);
		setenv("PODSOAK_SLOT", slot, 1);
		/* Below the controller: on a busy machine its samples and kills
		 * still come on time. */
		if (nice(10) == -1 && errno)
			_exit(127);
		execl(self_exe, self_exe, "worker", (char *)NULL);
		_exit(127);
	}
	return p;
}

/* The pod region, mapped read-only once the first worker made it. */
static void *region;
static const char *region_path;

static uint64_t region_used(void)
{
	if (!region) {
		int fd = open(region_path, O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0)
			return 0;
		if (fstat(fd, &st) == 0 && (uint64_t)st.st_size == GPUGUARD_REGION_SIZE) {
			void *m = mmap(NULL, GPUGUARD_REGION_SIZE, PROT_READ, MAP_SHARED, fd, 0);
			if (m != MAP_FAILED)
				region = m;
		}
		close(fd);
		if (!region)
			return 0;
	}
	/* acquire: pairs with the release store of magic in the library */
	if (atomic_load_explicit((_Atomic uint64_t *)region, memory_order_acquire) != GPUGUARD_REGION_MAGIC)
		return 0;
	uint64_t sum = 0;
	for (unsigned d = 0; d < GPUGUARD_REGION_DEVICES; d++)
		/* acquire: the entry's fields before READY (claim_entry) */
		if (atomic_load_explicit(&gpuguard_region_dev(region, d)->state, memory_order_acquire) ==
		    GPUGUARD_RDEV_READY)
			sum += gpuguard_region_used(region, d); /* every occupied slot, dead or alive */
	return sum;
}

/* kill() of worker i, never of a pid <= 0 (0 and -1 would signal our
 * process group or every process we may signal). */
static void signal_worker(int i, int sig)
{
	if (pids[i] > 0)
		kill(pids[i], sig);
}

/* Whether every thread of pid is in the stopped state ('T' in
 * /proc/PID/task/TID/stat): the stop is complete, none will run again
 * before SIGCONT. */
static int all_threads_stopped(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int all = 1, any = 0;
	struct dirent *e;
	while (all && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char f[320], buf[512];
		snprintf(f, sizeof f, "/proc/%d/task/%s/stat", (int)pid, e->d_name);
		int fd = open(f, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n <= 0)
			continue; /* a thread that just exited */
		buf[n] = 0;
		const char *rp = strrchr(buf, ')'); /* the name may hold spaces */
		all = rp && rp[1] == ' ' && rp[2] == 'T';
		any = 1;
	}
	closedir(d);
	return all && any;
}

/* SIGSTOPs every worker and returns how many are stopped, every thread of
 * each; a worker that died instead is failed and its pid cleared. The
 * stop is checked in /proc rather than by one blocking waitpid(WUNTRACED):
 * now and then (4 times in a 300 s run, and under ThreadSanitizer) a worker
 * was seen running on with no signal pending while its stop was awaited,
 * which hung the soak; so a stop not done in 100 ms is sent again (counted
 * in *resends and printed). */
static int stop_all(long *resends)
{
	int done[PODSOAK_WORKERS] = {0}, stopped = 0;
	for (int i = 0; i < PODSOAK_WORKERS; i++)
		signal_worker(i, SIGSTOP);
	uint64_t resend_at = now_ns() + 100000000ull, give_up = now_ns() + 30000000000ull;
	while (stopped + failures < PODSOAK_WORKERS) {
		for (int i = 0; i < PODSOAK_WORKERS; i++) {
			if (done[i] || pids[i] <= 0)
				continue;
			int st;
			/* consumes the stop notification; reports a death */
			if (waitpid(pids[i], &st, WNOHANG | WUNTRACED) == pids[i] && !WIFSTOPPED(st)) {
				fail("status %lld, worker %lld", "worker-died-by-itself", st, i);
				pids[i] = -1;
				continue;
			}
			if (all_threads_stopped(pids[i])) {
				done[i] = 1;
				stopped++;
			}
		}
		if (stopped + failures >= PODSOAK_WORKERS)
			break;
		if (now_ns() > give_up) {
			fail("%lld of %lld workers stopped in 30 s", "workers-stop", stopped, PODSOAK_WORKERS);
			break;
		}
		if (now_ns() > resend_at) {
			for (int i = 0; i < PODSOAK_WORKERS; i++)
				if (!done[i] && pids[i] > 0) {
					signal_worker(i, SIGSTOP);
					++*resends;
				}
			resend_at = now_ns() + 100000000ull;
		}
		sched_yield();
	}
	return stopped;
}

static int controller(char **argv)
{
	const char *stats_path = argv[0];
	region_path = argv[1];
	uint64_t ceiling = strtoull(argv[2], NULL, 0);
	double seconds = strtod(argv[3], NULL);
	long kills_wanted = strtol(argv[4], NULL, 0);
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
	if (n <= 0 || ceiling == 0 || seconds <= 0 || kills_wanted <= 0) {
		fprintf(stderr, "usage: podsoak run STATS REGION CEILING SECONDS KILLS\n");
		return 2;
	}
	self_exe[n] = 0;
	const char *seed_env = getenv("SOAK_SEED");
	uint64_t seed = seed_env && *seed_env ? strtoull(seed_env, NULL, 0) : now_ns() ^ (uint64_t)getpid();
	if (!seed)
		seed = 1;
	printf("soak: seed %llu, %d workers x %d threads, ceiling %llu, %.0f s, %ld kills wanted\n",
	       (unsigned long long)seed, PODSOAK_WORKERS, PODSOAK_THREADS, (unsigned long long)ceiling, seconds,
	       kills_wanted);
	stats = map_stats(stats_path, 1);
	setenv("PODSOAK_STATS", stats_path, 1);
	for (int i = 0; i < PODSOAK_WORKERS; i++)
		pids[i] = spawn(i);

	uint64_t start = now_ns(), end = start + (uint64_t)(seconds * 1e9);
	uint64_t gap = (end - start) / (uint64_t)kills_wanted; /* mean time between kills */
	uint64_t next_kill = start + rnd_next(&seed) % (2 * gap);
	long kills = 0, running_kills = 0, samples = 0, region_samples = 0, stop_resends = 0;
	int running_kill = 0;
	uint64_t kill_ns = 0, sample_ns = 0; /* time spent in each, for the figures */
	uint64_t worst_over = 0, worst_books_over = 0, worst_under = 0, max_held = 0;
	/* A loaded machine kills slower (each start is a fork, an exec and a
	 * preload): past the planned end the soak goes on, up to three times
	 * its length, until it has done the half of the kills that
	 * soak-did-enough asks for, so a slow run is longer, not vacuous. */
	uint64_t hard_end = end + 2 * (end - start);
	while (!failures && (now_ns() < end || (kills < kills_wanted / 2 && now_ns() < hard_end))) {
		/* the monitor: one consistent cut of all workers */
		uint64_t t0 = now_ns();
		int st, stopped = stop_all(&stop_resends);
		if (stopped == PODSOAK_WORKERS) {
			uint64_t held = 0;
			/* relaxed: every worker is stopped; the kernel's stop is a
			 * full barrier between their stores and these loads */
			for (int i = 0; i < PODSOAK_WORKERS; i++)
				held += atomic_load_explicit(&stats->slot[i].held, memory_order_relaxed);
			uint64_t books = region_used();
			samples++;
			if (held > max_held)
				max_held = held;
			if (held > ceiling && held - ceiling > worst_over)
				worst_over = held - ceiling;
			if (region) {
				region_samples++;
				if (books > ceiling && books - ceiling > worst_books_over)
					worst_books_over = books - ceiling;
				if (held > books && held - books > worst_under)
					worst_under = held - books;
			}
		}
		sample_ns += now_ns() - t0;
		int victim = -1;
		if (stopped == PODSOAK_WORKERS && now_ns() >= next_kill) {
			/* the killer: a random worker. Three times in four it dies
			 * stopped, where the monitor's cut left it: the instruction
			 * it stopped at is the one it dies at, as under any SIGKILL,
			 * and it dies fast while the others stay stopped (a new one
			 * starts before they go on). The fourth time it is killed
			 * running, among the running others. */
			victim = (int)(rnd_next(&seed) % PODSOAK_WORKERS);
			running_kill = rnd_next(&seed) % 4 == 0;
		}
		t0 = now_ns();
		if (victim >= 0 && running_kill)
			for (int i = 0; i < PODSOAK_WORKERS; i++)
				signal_worker(i, SIGCONT);
		if (victim >= 0) {
			signal_worker(victim, SIGKILL);
			waitpid(pids[victim], &st, 0); /* dead: its simulated memory went with it */
			if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
				fail("status %lld, worker %lld", "worker-died-by-itself", st, victim);
				pids[victim] = -1;
			} else {
				/* relaxed: the worker is dead and the next one not yet
				 * started (fork orders this store before it runs) */
				atomic_store_explicit(&stats->slot[victim].held, 0, memory_order_relaxed);
				pids[victim] = spawn(victim);
				kills++;
				running_kills += running_kill;
			}
			kill_ns += now_ns() - t0;
			/* from the last due time, not from now: a late kill does not
			 * make the run's kills fewer */
			next_kill += rnd_next(&seed) % (2 * gap);
		}
		if (victim < 0 || !running_kill)
			for (int i = 0; i < PODSOAK_WORKERS; i++)
				if (pids[i] > 0)
					signal_worker(i, SIGCONT);
		if (stopped != PODSOAK_WORKERS)
			break;
		nanosleep(&(struct timespec){0, (long)(rnd_next(&seed) % 3000000)}, NULL); /* 0-3 ms running */
	}

	/* Park: the threads finish their call, give one block back, stop. */
	atomic_store_explicit(&stats->stop, 1, memory_order_relaxed); /* a flag; see worker_thread */
	uint64_t deadline = now_ns() + 120ull * 1000000000ull;
	int parked = 0;
	while (!failures && parked < PODSOAK_WORKERS && now_ns() < deadline) {
		parked = 0;
		for (int i = 0; i < PODSOAK_WORKERS; i++) {
			int st;
			if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
				fail("status %lld, worker %lld", "worker-died-by-itself", st, i);
				pids[i] = -1;
			}
			/* acquire: pairs with the worker's release of parked */
			parked += pids[i] > 0 && atomic_load_explicit(&stats->slot[i].parked, memory_order_acquire);
		}
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	uint64_t live = 0, allocs = 0, refusals = 0;
	if (parked == PODSOAK_WORKERS) {
		for (int i = 0; i < PODSOAK_WORKERS; i++) {
			struct podsoak_slot *s = &stats->slot[i];
			/* relaxed: after the acquire of parked above */
			uint64_t h = atomic_load_explicit(&s->held, memory_order_relaxed);
			uint64_t u = atomic_load_explicit(&s->sim_used, memory_order_relaxed);
			uint64_t e = atomic_load_explicit(&s->errors, memory_order_relaxed);
			uint64_t m = atomic_load_explicit(&s->shim_misses, memory_order_relaxed);
			if (h != u)
				fail("stats say %lld, the simulator %lld", "shim-matches-simulator", (long long)h,
				     (long long)u);
			if (e || m)
				fail("%lld driver errors, %lld unsized frees", "worker-errors", (long long)e,
				     (long long)m);
			live += u;
		}
		/* every worker's counters, killed ones' included: a slot's
		 * counters are never zeroed */
		for (int i = 0; i < PODSOAK_WORKERS; i++) {
			allocs += atomic_load_explicit(&stats->slot[i].allocs, memory_order_relaxed);
			refusals += atomic_load_explicit(&stats->slot[i].refusals, memory_order_relaxed);
		}
	} else if (!failures) {
		fail("%lld of %lld workers parked in 120 s", "workers-park", parked, PODSOAK_WORKERS);
	}
	printf("soak: %.1f s, kills %ld (%ld of them running), samples %ld (%ld with the region), highest simulated "
	       "total %llu of %llu\n",
	       (now_ns() - start) / 1e9, kills, running_kills, samples, region_samples, (unsigned long long)max_held,
	       (unsigned long long)ceiling);
	printf("soak: a kill and restart took %.2f ms, a sample %.2f ms, on average; %ld stops sent again\n",
	       kills ? kill_ns / 1e6 / (double)kills : 0.0, samples ? sample_ns / 1e6 / (double)samples : 0.0,
	       stop_resends);
	printf("soak: the workers made %llu allocations and met %llu refusals; the parked ones hold %llu bytes\n",
	       (unsigned long long)allocs, (unsigned long long)refusals, (unsigned long long)live);
	printf("soak: worst over-ceiling seen %llu (simulated memory), %llu (pod books); books under the simulated "
	       "memory by at most %llu\n",
	       (unsigned long long)worst_over, (unsigned long long)worst_books_over, (unsigned long long)worst_under);
	if (worst_over)
		fail("%lld bytes over, %lld ceiling", "never-over-ceiling", (long long)worst_over, (long long)ceiling);
	else
		printf("check never-over-ceiling ok\n");
	if (worst_books_over)
		fail("%lld bytes over, %lld ceiling", "books-never-over-ceiling", (long long)worst_books_over,
		     (long long)ceiling);
	else
		printf("check books-never-over-ceiling ok\n");
	if (worst_under)
		fail("%lld bytes under, %lld", "books-never-under-simulated", (long long)worst_under, 0);
	else
		printf("check books-never-under-simulated ok\n");
	if (kills < kills_wanted / 2 || samples < 100)
		fail("%lld kills, %lld samples", "soak-did-enough", kills, samples);
	else
		printf("check soak-did-enough ok\n");
	const char *final = getenv("PODSOAK_FINAL");
	if (parked == PODSOAK_WORKERS && final) { /* also after a failure: its figures */
		char v[32];
		snprintf(v, sizeof v, "%llu", (unsigned long long)live);
		setenv("PODSOAK_LIVE", v, 1);
		fflush(stdout);
		int rc = system(final);
		if (rc != 0)
			failures++;
	}
	for (int i = 0; i < PODSOAK_WORKERS; i++)
		if (pids[i] > 0) {
			signal_worker(i, SIGKILL);
			waitpid(pids[i], NULL, 0);
		}
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "worker"))
		return worker();
	if (argc == 3 && !strcmp(argv[1], "probe"))
		return probe(strtoull(argv[2], NULL, 0));
	if (argc == 7 && !strcmp(argv[1], "run"))
		return controller(argv + 2);
	fprintf(stderr, "usage: podsoak run STATS REGION CEILING SECONDS KILLS | worker | probe ROOM\n");
	return 2;
}
