/* gpuguard simulated GPU: one card shared by every process that names it
 * (SIMGPU_SHARED=<name>), as a real driver's card is. The card's books live in
 * a POSIX shared memory object made by the first process; a process-shared
 * robust mutex guards them, and each process has an entry keyed by pid and
 * start time that is swept once the process is gone, so a death (kill -9
 * included) gives its memory back, as the kernel driver does at exit. A
 * process's cgroup v2 may carry a hard limit the driver enforces itself
 * (MPS v3 memory partitioning: SIMGPU_DMEM_MAX), over all device memory of
 * the cgroup's processes. */
#define _GNU_SOURCE
#include "simcore.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CARD_MAGIC 0x31445241434d4953ull /* "SIMCARD1" */
#define CARD_VERSION 2u
#define CARD_PROCS 64     /* processes on one card at a time */
#define CARD_WAIT_MS 5000 /* how long a joiner waits for the creator */
#define CARD_NAME_MAX 100
#define CARD_CGROUPS 32      /* cgroups with processes on the card, ever */
#define CARD_CGROUP_PATH 256 /* "/sys/fs/cgroup/..." */
#define CGROUP_ROOT "/sys/fs/cgroup"

struct card_proc {
	int32_t pid;       /* as /proc names it; 0: a free entry */
	uint32_t nvml_pid; /* what NVML reports */
	uint64_t start;    /* its start time (proc_stat): a reused pid is another process */
	int32_t cg;        /* its cgroup: an index into card.cg, -1 none */
	uint64_t use[SIM_MAX_DEVICES][SIM_USE_N];
};

/* A cgroup v2 that a process on the card is in, by its sysfs path, with
 * the limits SIMGPU_DMEM_MAX / _MIN set on it (on every device of the
 * card; 0 = none). Entries stay for the card's life. */
struct card_cgroup {
	char path[CARD_CGROUP_PATH];
	uint64_t hard, soft;
};

struct card {
	uint64_t magic;
	uint32_t version, size;
	/* 0 until the creator has written everything below; store-release by
	 * the creator, load-acquire by joiners, so they read a whole card */
	_Atomic uint32_t ready;
	pthread_mutex_t mu; /* process-shared, robust; guards everything below */
	int32_t ndev;
	uint64_t total, reserved, uuid_seed;
	uint64_t used[SIM_MAX_DEVICES]; /* sum of the live entries' use */
	struct card_proc proc[CARD_PROCS];
	int32_t ncg, limited; /* cgroups in cg; 1 once any has a hard limit */
	struct card_cgroup cg[CARD_CGROUPS];
};

static struct card *g_card; /* NULL: this library's cards are its own */
/* this process's entry, under the card's lock; g_slot_pid is getpid() when
 * it was taken, so a forked child takes one of its own; the entry's pid and
 * start time, to see it was swept (a process that could not read our /proc
 * took us for dead) */
static int g_slot = -1;
static pid_t g_slot_pid;
static int32_t g_slot_pp;
static uint64_t g_slot_start;
static pthread_once_t g_pid_once = PTHREAD_ONCE_INIT;
static int32_t g_pid_offset; /* SIMGPU_NVML_PID_OFFSET */

int sim_card_shared(void)
{
	sim_init();
	return g_card != NULL;
}

/* ------------------------------------------------------- processes, pids */

static void pid_env(void)
{
	const char *e = getenv("SIMGPU_NVML_PID_OFFSET");
	if (e && *e) {
		char *end;
		long v = strtol(e, &end, 10);
		if (*end || v < -1000000000L || v > 1000000000L)
			fprintf(stderr,
			        "simgpu: ignoring invalid SIMGPU_NVML_PID_OFFSET=%s (expected a decimal integer, "
			        "-1000000000..1000000000)\n",
			        e);
		else
			g_pid_offset = (int32_t)v;
	}
}

/* a small file read whole into buf (NUL-terminated); -1 if it does not
 * exist, -2 on any other failure */
static int read_small(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? -1 : -2;
	ssize_t k = read(fd, buf, n - 1);
	int err = errno;
	close(fd);
	if (k < 0)
		return err == ESRCH ? -1 : -2;
	buf[k] = 0;
	return 0;
}

/* The pid /proc gives this process: NSpid's first field, which is the host's
 * pid when /proc is the host's (a process in a PID namespace of its own sees
 * 1 from getpid()), else getpid(). */
static int32_t proc_pid_self(void)
{
	char buf[4096];
	if (!read_small("/proc/self/status", buf, sizeof(buf))) {
		const char *p = strstr(buf, "\nNSpid:");
		if (p) {
			long v = strtol(p + 7, NULL, 10);
			if (v > 0)
				return (int32_t)v;
		}
	}
	return (int32_t)getpid();
}

uint32_t sim_nvml_pid_self(void)
{
	pthread_once(&g_pid_once, pid_env);
	return (uint32_t)(proc_pid_self() + g_pid_offset);
}

/* State and starttime (fields 3 and 22) of the process's main thread,
 * /proc/<pid>/task/<pid>/stat, whose start is the process's: the same file
 * for the process itself and for others (qemu-user answers a process's own
 * /proc/<pid>/stat itself, with a start time of its own making). -1 if
 * gone, -2 if it cannot be read or understood. */
static int proc_stat(int32_t pid, char *state, uint64_t *start)
{
	char path[80], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)pid);
	int rc = read_small(path, buf, sizeof(buf));
	if (rc)
		return rc;
	const char *p = strrchr(buf, ')'); /* the command may hold spaces and ')' */
	if (!p || p[1] != ' ')
		return -2;
	*state = p[2];
	p += 2;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -2;
		p++;
	}
	*start = strtoull(p, NULL, 10);
	return 0;
}

/* A dead process, a zombie (its files, and so its GPU memory, are gone before
 * it is reaped) and a pid reused by another process are all gone. One whose
 * /proc entry cannot be read (hidepid) is taken to live. */
static int proc_alive(const struct card_proc *e)
{
	char st = 0;
	uint64_t start = 0;
	int rc = proc_stat(e->pid, &st, &start);
	if (rc)
		return rc == -2;
	return st != 'Z' && st != 'X' && start == e->start;
}

/* ------------------------------------------------------------ the lock */

static void card_recount_unlocked(void)
{
	for (int d = 0; d < SIM_MAX_DEVICES; d++) {
		uint64_t sum = 0;
		for (int i = 0; i < CARD_PROCS; i++)
			if (g_card->proc[i].pid)
				for (int u = 0; u < SIM_USE_N; u++)
					sum += g_card->proc[i].use[d][u];
		g_card->used[d] = sum;
	}
}

/* A holder that died inside the lock may have left an entry and the sums
 * half-updated: the sums are recounted from the entries, and the dead
 * holder's own entry goes at the next sweep. */
static void card_lock(void)
{
	int rc = pthread_mutex_lock(&g_card->mu);
	if (rc == EOWNERDEAD) {
		card_recount_unlocked();
		pthread_mutex_consistent(&g_card->mu);
	}
}

static void card_unlock(void)
{
	pthread_mutex_unlock(&g_card->mu);
}

static void card_sweep_unlocked(void)
{
	pid_t me = getpid();
	for (int i = 0; i < CARD_PROCS; i++) {
		struct card_proc *e = &g_card->proc[i];
		if (!e->pid || (i == g_slot && g_slot_pid == me && e->pid == g_slot_pp) || proc_alive(e))
			continue;
		for (int d = 0; d < SIM_MAX_DEVICES; d++)
			for (int u = 0; u < SIM_USE_N; u++)
				g_card->used[d] -= e->use[d][u];
		memset(e, 0, sizeof(*e));
	}
}

/* ------------------------------------------------------------ cgroups */

/* This process's cgroup v2 as the driver finds it: the "0::" line of
 * /proc/self/cgroup, under /sys/fs/cgroup; SIMGPU_CGROUP (a path such as
 * /pods/a) stands for that line, so that tests put processes in cgroups of
 * their own without root. "" if neither says. */
static void cgroup_self(char out[CARD_CGROUP_PATH])
{
	char buf[4096];
	const char *rel = getenv("SIMGPU_CGROUP");
	out[0] = 0;
	if (!rel || !*rel) {
		if (read_small("/proc/self/cgroup", buf, sizeof(buf)))
			return;
		char *p = strstr(buf, "0::");
		if (!p || (p != buf && p[-1] != '\n'))
			return;
		rel = p + 3;
		p[3 + strcspn(p + 3, "\n")] = 0;
	}
	if (rel[0] != '/') {
		fprintf(stderr, "simgpu: ignoring SIMGPU_CGROUP=%s (expected an absolute cgroup path: /pods/a)\n", rel);
		return;
	}
	size_t n = strlen(rel);
	while (n > 1 && rel[n - 1] == '/')
		n--;
	if (n == 1) /* the root */
		n = 0;
	if (sizeof(CGROUP_ROOT) + n > CARD_CGROUP_PATH) {
		fprintf(stderr, "simgpu: the cgroup path %s is too long for the shared card; no cgroup limit\n", rel);
		return;
	}
	memcpy(out, CGROUP_ROOT, sizeof(CGROUP_ROOT) - 1);
	memcpy(out + sizeof(CGROUP_ROOT) - 1, rel, n);
	out[sizeof(CGROUP_ROOT) - 1 + n] = 0;
}

/* SIMGPU_DMEM_MAX or _MIN as a quantity; 0 unset (or invalid, said). */
static uint64_t dmem_env(const char *name)
{
	const char *e = getenv(name);
	uint64_t v = 0;
	if (e && *e && sim_parse_quantity(e, &v)) {
		fprintf(stderr, "simgpu: ignoring invalid %s=%s (expected a quantity: 2Gi, 512Mi)\n", name, e);
		v = 0;
	}
	return v;
}

/* The card's entry for this process's cgroup, made if new; the limits in
 * SIMGPU_DMEM_MAX / _MIN, where given, are set on it (the last process to
 * join with them sets them, as an administrator's write to dmem.max). */
static int32_t cgroup_join_unlocked(void)
{
	char path[CARD_CGROUP_PATH];
	cgroup_self(path);
	if (!path[0])
		return -1;
	int32_t i = 0;
	while (i < g_card->ncg && strcmp(g_card->cg[i].path, path))
		i++;
	if (i == g_card->ncg) {
		if (i == CARD_CGROUPS) {
			fprintf(stderr, "simgpu: the shared card knows %d cgroups already; %s gets no limit\n",
			        CARD_CGROUPS, path);
			return -1;
		}
		memset(&g_card->cg[i], 0, sizeof(g_card->cg[i]));
		memcpy(g_card->cg[i].path, path, sizeof(path));
		g_card->ncg++;
	}
	uint64_t hard = dmem_env("SIMGPU_DMEM_MAX"), soft = dmem_env("SIMGPU_DMEM_MIN");
	if (hard) {
		g_card->cg[i].hard = hard;
		g_card->limited = 1;
	}
	if (soft)
		g_card->cg[i].soft = soft;
	return i;
}

/* path is a, or a cgroup below a. */
static int cgroup_within(const char *path, const char *a)
{
	size_t n = strlen(a);
	return !strncmp(path, a, n) && (path[n] == 0 || path[n] == '/');
}

/* What the cgroup at path and those below it use on dev (live entries). */
static uint64_t cgroup_used_unlocked(const char *path, int dev)
{
	uint64_t sum = 0;
	for (int i = 0; i < CARD_PROCS; i++) {
		const struct card_proc *e = &g_card->proc[i];
		if (!e->pid || e->cg < 0 || !cgroup_within(g_card->cg[e->cg].path, path))
			continue;
		for (int u = 0; u < SIM_USE_N; u++)
			sum += e->use[dev][u];
	}
	return sum;
}

/* Whether bytes more on dev for the process in entry s stays within the
 * hard limit of its cgroup and of every cgroup above it, as dmem.max
 * binds a cgroup's whole subtree. */
static int cgroup_fits_unlocked(int s, int dev, uint64_t bytes)
{
	int32_t mine = g_card->proc[s].cg;
	if (!g_card->limited || mine < 0)
		return 1;
	for (int32_t i = 0; i < g_card->ncg; i++) {
		const struct card_cgroup *c = &g_card->cg[i];
		if (!c->hard || !cgroup_within(g_card->cg[mine].path, c->path))
			continue;
		uint64_t u = cgroup_used_unlocked(c->path, dev);
		if (u > c->hard || bytes > c->hard - u)
			return 0;
	}
	return 1;
}

int sim_card_dmem(int dev, const char *path, uint64_t *soft, uint64_t *hard, uint64_t *used)
{
	int known = 0;
	card_lock();
	card_sweep_unlocked();
	*soft = 0;
	*hard = 0;
	/* a cgroup is known when a process on the card was in it or below it */
	for (int32_t i = 0; i < g_card->ncg; i++) {
		if (!strcmp(g_card->cg[i].path, path)) {
			*soft = g_card->cg[i].soft;
			*hard = g_card->cg[i].hard;
		}
		known |= cgroup_within(g_card->cg[i].path, path);
	}
	*used = known ? cgroup_used_unlocked(path, dev) : 0;
	card_unlock();
	return known ? 0 : -1;
}

/* this process's entry, taken on its first charge; -1 if the card has
 * CARD_PROCS live processes already */
static int card_slot_unlocked(void)
{
	pid_t me = getpid();
	if (g_slot >= 0 && g_slot_pid == me && g_card->proc[g_slot].pid == g_slot_pp &&
	    g_card->proc[g_slot].start == g_slot_start)
		return g_slot;
	g_slot = -1;
	int32_t pp = proc_pid_self();
	char st;
	uint64_t start = 0;
	if (proc_stat(pp, &st, &start))
		start = 0;
	for (int pass = 0; pass < 2 && g_slot < 0; pass++) {
		if (pass)
			card_sweep_unlocked();
		for (int i = 0; i < CARD_PROCS; i++) {
			if (!g_card->proc[i].pid) {
				struct card_proc *e = &g_card->proc[i];
				memset(e, 0, sizeof(*e));
				e->pid = pp;
				e->nvml_pid = sim_nvml_pid_self();
				e->start = start;
				e->cg = cgroup_join_unlocked();
				g_slot = i;
				g_slot_pid = me;
				g_slot_pp = pp;
				g_slot_start = start;
				break;
			}
		}
	}
	if (g_slot < 0)
		fprintf(stderr, "simgpu: the shared card has %d processes already; this one gets no memory\n",
		        CARD_PROCS);
	return g_slot;
}

/* ------------------------------------------------------------- charges */

int sim_card_take(int dev, int use, uint64_t bytes)
{
	int rc = SIM_ENOMEM;
	card_lock();
	int s = card_slot_unlocked();
	for (int pass = 0; s >= 0 && pass < 2; pass++) {
		/* a card that looks full may hold the dead: sweep, then look again */
		if (pass)
			card_sweep_unlocked();
		uint64_t held = g_card->used[dev] + g_card->reserved;
		if (held <= g_card->total && bytes <= g_card->total - held && cgroup_fits_unlocked(s, dev, bytes)) {
			g_card->used[dev] += bytes;
			g_card->proc[s].use[dev][use] += bytes;
			rc = SIM_OK;
			break;
		}
	}
	card_unlock();
	return rc;
}

/* Never below 0: a forked child frees memory its parent's entry holds. */
void sim_card_give(int dev, int use, uint64_t bytes)
{
	card_lock();
	if (g_slot >= 0 && g_slot_pid == getpid() && g_card->proc[g_slot].pid == g_slot_pp &&
	    g_card->proc[g_slot].start == g_slot_start) {
		uint64_t *u = &g_card->proc[g_slot].use[dev][use];
		if (bytes > *u)
			bytes = *u;
		*u -= bytes;
		g_card->used[dev] -= bytes;
	}
	card_unlock();
}

uint64_t sim_card_used(int dev)
{
	card_lock();
	card_sweep_unlocked();
	uint64_t u = g_card->used[dev];
	card_unlock();
	return u;
}

uint64_t sim_card_reserved(int dev)
{
	(void)dev;
	return g_card->reserved; /* written before ready, never after */
}

int sim_card_procs(int dev, struct sim_card_proc *out, int max)
{
	int n = 0;
	card_lock();
	card_sweep_unlocked();
	for (int i = 0; i < CARD_PROCS; i++) {
		const struct card_proc *e = &g_card->proc[i];
		uint64_t sum = 0;
		for (int u = 0; u < SIM_USE_N; u++)
			sum += e->use[dev][u];
		if (!e->pid || !sum)
			continue;
		if (n < max) {
			out[n].nvml_pid = e->nvml_pid;
			memcpy(out[n].use, e->use[dev], sizeof(out[n].use));
		}
		n++;
	}
	card_unlock();
	return n;
}

void sim_card_debug_hold_lock(void)
{
	if (sim_card_shared())
		card_lock();
}

/* ---------------------------------------------------------- make or join */

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int name_ok(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > CARD_NAME_MAX)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
		      *s == '_' || *s == '-'))
			return 0;
	return 1;
}

static int card_init(struct card *c, int ndev, uint64_t total, uint64_t seed)
{
	pthread_mutexattr_t a;
	if (pthread_mutexattr_init(&a) || pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) ||
	    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST) || pthread_mutex_init(&c->mu, &a))
		return -1;
	pthread_mutexattr_destroy(&a);
	uint64_t reserved = 0;
	const char *e = getenv("SIMGPU_NVML_RESERVED");
	if (e && *e && sim_parse_quantity(e, &reserved)) {
		fprintf(stderr, "simgpu: ignoring invalid SIMGPU_NVML_RESERVED=%s\n", e);
		reserved = 0;
	}
	c->ndev = ndev;
	c->total = total;
	c->reserved = reserved > total ? total : reserved;
	c->uuid_seed = seed;
	c->magic = CARD_MAGIC;
	c->version = CARD_VERSION;
	c->size = (uint32_t)sizeof(*c);
	/* release: a joiner that sees ready sees the card above */
	atomic_store_explicit(&c->ready, 1, memory_order_release);
	return 0;
}

/* Makes the card or joins it. The creator wins O_CREAT|O_EXCL and fills the
 * card before it sets ready; a joiner waits (boundedly) for the size and
 * then for ready. A joiner takes the card's devices, size and UUID seed. */
int sim_card_open(const char *name, int *ndev, uint64_t *total, uint64_t *uuid_seed)
{
	if (!name_ok(name)) {
		fprintf(stderr,
		        "simgpu: error: invalid SIMGPU_SHARED=%s (expected a name of 1 to %d letters, digits, '.', '_' "
		        "or '-'); this process's cards are its own\n",
		        name, CARD_NAME_MAX);
		return -1;
	}
	char path[CARD_NAME_MAX + 32];
	snprintf(path, sizeof(path), "/simgpu-%s-%s", SIM_LIB_ID ? "hip" : "cuda", name);
	size_t sz = sizeof(struct card);
	for (int attempt = 0; attempt < 50; attempt++) {
		int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			struct card *c = MAP_FAILED;
			if (ftruncate(fd, (off_t)sz) == 0)
				c = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			close(fd);
			if (c == MAP_FAILED || card_init(c, *ndev, *total, *uuid_seed)) {
				fprintf(stderr, "simgpu: error: cannot make the shared card /dev/shm%s: %s\n", path,
				        strerror(errno));
				if (c != MAP_FAILED)
					munmap(c, sz);
				shm_unlink(path);
				return -1;
			}
			g_card = c;
			return 0;
		}
		if (errno != EEXIST)
			break;
		fd = shm_open(path, O_RDWR | O_CLOEXEC, 0);
		if (fd < 0) {
			if (errno == ENOENT)
				continue; /* unlinked between the two opens: make it */
			break;
		}
		/* lseek, not fstat: the container build binds the stat family
		 * to the library's wrappers (tests/container/old_glibc.h) */
		off_t size;
		int waited = 0;
		while ((size = lseek(fd, 0, SEEK_END)) >= 0 && (size_t)size < sz && waited < CARD_WAIT_MS) {
			sleep_ms(1);
			waited++;
		}
		struct card *c = MAP_FAILED;
		if (size >= 0 && (size_t)size >= sz)
			c = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (c == MAP_FAILED) {
			fprintf(stderr, "simgpu: error: the shared card /dev/shm%s was never sized; remove it\n", path);
			return -1;
		}
		/* acquire: pairs with card_init's release */
		while (!atomic_load_explicit(&c->ready, memory_order_acquire) && waited < CARD_WAIT_MS) {
			sleep_ms(1);
			waited++;
		}
		if (!atomic_load_explicit(&c->ready, memory_order_acquire) || c->magic != CARD_MAGIC ||
		    c->version != CARD_VERSION || c->size != sz) {
			fprintf(stderr,
			        "simgpu: error: /dev/shm%s is not a ready shared card of this version (its maker died, "
			        "or another build made it); remove it\n",
			        path);
			munmap(c, sz);
			return -1;
		}
		*ndev = c->ndev;
		*total = c->total;
		*uuid_seed = c->uuid_seed;
		g_card = c;
		return 0;
	}
	fprintf(stderr, "simgpu: error: cannot open the shared card /dev/shm%s: %s\n", path, strerror(errno));
	return -1;
}
