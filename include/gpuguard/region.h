/* gpuguard: the pod region, version 5. One small file (default
 * /dev/shm/gpuguard-pod) that every process of a pod maps, so that
 * GPUGUARD_LIMIT is one budget for all of them (README "Pod scope").
 *
 * Layout: a header, GPUGUARD_REGION_DEVICES device entries,
 * GPUGUARD_REGION_PROCS process slots, GPUGUARD_REGION_DEATHS obituaries (a
 * ring of the pod's recent deaths), then (version 4) each slot's runtime
 * charge per device entry, at the offsets the header gives, then (version
 * 5) each slot's credit per device entry.
 * Everything is little-endian, as the machines that run it are.
 * A new layout takes a new version, which the library refuses to attach to;
 * a field that comes from reserved bytes (or unused bits) keeps it, and is
 * written so that zero, what an older library leaves there, means "not
 * known". Version 4 only appends a table to version 3 (every offset
 * before it is the same), so gpuguard's tools read both: a version 3 file
 * is the version 4 one without the table (gpuguard_region_runtime() then
 * answers from the device entry's own word, as version 3 kept it).
 * Version 5 appends the credit table likewise; the tools never read it
 * (a credit is reserved, not used), so they read all three alike. A
 * library attaches to its own version only: a version 4 library counts no
 * credit in its sums, so the two in one pod could pass the ceiling.
 *
 * Liveness (DESIGN.md §4): a process owns slot i while it holds an OFD write
 * lock (fcntl F_OFD_SETLK) on the one byte at gpuguard_region_slot_lock(i).
 * The kernel drops it when the process dies, in any PID namespace; whoever
 * then takes that lock returns the slot's charges to the device entries.
 * The byte at offset 0 is the setup lock, held while the header is written
 * and while a device entry is claimed. Nobody ever waits on either lock
 * without a deadline.
 *
 * The file is hostile input: any process with write access can scribble on
 * it. gpuguard_region_check() validates what a reader relies on before the
 * first use; after that, every value read from it is treated as untrusted
 * (states other than those below are ignored, sums saturate), and no index
 * is ever read from it. */
#ifndef GPUGUARD_REGION_H
#define GPUGUARD_REGION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define GPUGUARD_REGION_MAGIC 0x31444f5044524747ull /* "GGRDPOD1" */
#define GPUGUARD_REGION_VERSION 5u                  /* 3: obituaries; 4: runtime per slot; 5: credit */
#define GPUGUARD_REGION_VERSION_OLDEST 3u           /* the oldest the tools read */
#define GPUGUARD_REGION_DEVICES 16
#define GPUGUARD_REGION_PROCS 256
#define GPUGUARD_REGION_LIMIT_TEXT 128
#define GPUGUARD_REGION_DEATHS 16
#define GPUGUARD_REGION_NAME 64        /* a Kubernetes name and its NUL (header identity) */
#define GPUGUARD_REGION_CONTAINERS 112 /* the header's container names, NULs included */
#define GPUGUARD_REGION_DEFAULT_PATH "/dev/shm/gpuguard-pod"

/* device entry states */
#define GPUGUARD_RDEV_EMPTY 0u
#define GPUGUARD_RDEV_CLAIMING 1u /* being filled in under the setup lock */
#define GPUGUARD_RDEV_READY 2u
/* device identity kinds: the runtime that named the entry's UUID. Entries
 * match by UUID alone (one card named by CUDA and by HIP is one entry);
 * an ORDINAL entry matches only another ORDINAL one. */
#define GPUGUARD_RDEV_CUDA 1u
#define GPUGUARD_RDEV_HIP 2u
#define GPUGUARD_RDEV_ORDINAL 3u /* no UUID: bytes 0..3 hold the ordinal */

/* process slot states */
#define GPUGUARD_RPROC_FREE 0u
#define GPUGUARD_RPROC_LIVE 1u

struct gpuguard_region_header {
	uint64_t magic; /* written last, with release, once the rest is valid */
	uint32_t version;
	uint32_t header_size; /* sizeof(struct gpuguard_region_header) */
	uint64_t size;        /* the file's size */
	uint32_t ndevices, device_off, device_size;
	uint32_t nprocs, proc_off, proc_size;
	uint64_t created_ms; /* CLOCK_REALTIME */
	/* GPUGUARD_LIMIT of the process that set the budget ("" = none); the
	 * region's value wins over a later process's own. NUL-terminated. */
	char limit_text[GPUGUARD_REGION_LIMIT_TEXT];
	_Atomic uint64_t limit_gen; /* bumped when limit_text is replaced */
	/* bit s: slot s may hold charges (set at attach step A3, cleared by
	 * the sweep's S4); a reservation sums the slots these name */
	_Atomic uint64_t occupied[GPUGUARD_REGION_PROCS / 64];
	uint32_t ndeaths, death_off, death_size;
	/* version 4: the runtime table's offset (GPUGUARD_REGION_RUNTIME_OFF);
	 * 0 in version 3, whose header had padding here */
	uint32_t runtime_off;
	/* obituaries written so far: the next goes to entry deaths_head %
	 * GPUGUARD_REGION_DEATHS. Carried over when the region is written
	 * afresh, so the ring lasts for the pod's life. */
	_Atomic uint64_t deaths_head;
	/* allocation dumps written by the pod's processes (a statistic for
	 * metrics, relaxed); from reserved bytes */
	_Atomic uint64_t dumps_written;
	/* The pod's identity, for the labels of its metrics: GPUGUARD_POD_NAMESPACE
	 * and GPUGUARD_POD_NAME (the downward API's metadata.namespace and
	 * metadata.name), written under the setup lock by the first process
	 * that attaches with both, then `ident` (release). From reserved
	 * bytes: all zero in a region an older library wrote, whose series
	 * then go without these labels. NUL-terminated by the writer;
	 * untrusted, as everything here: any member of the pod can write it. */
	char pod_namespace[GPUGUARD_REGION_NAME]; /* a namespace is at most 63 characters */
	char pod_name[GPUGUARD_REGION_NAME];      /* so is a pod a controller names; longer ones are left out */
	/* The pod's container names (GPUGUARD_CONTAINER_NAME), each followed
	 * by a NUL, in the order their first process attached; a slot's
	 * `container` is 1 + the index of its own. Appended under the setup
	 * lock; a name that does not fit is left out. */
	char containers[GPUGUARD_REGION_CONTAINERS];
	_Atomic uint32_t ident;       /* 1: pod_namespace and pod_name are written (release) */
	_Atomic uint32_t ncontainers; /* names in containers (release, after the name) */
	uint8_t reserved[512 - 8 - 4 - 4 - 8 - 24 - 8 - GPUGUARD_REGION_LIMIT_TEXT - 8 - GPUGUARD_REGION_PROCS / 8 -
	                 16 - 8 - 8 - 2 * GPUGUARD_REGION_NAME - GPUGUARD_REGION_CONTAINERS - 4 - 4];
};

struct gpuguard_region_device {
	_Atomic uint32_t state; /* GPUGUARD_RDEV_* */
	uint32_t kind;          /* GPUGUARD_RDEV_CUDA / _HIP / _ORDINAL */
	uint8_t uuid[16];
	_Atomic uint64_t limit; /* bytes; UINT64_MAX = no ceiling */
	/* the pod's charge as last published (by whoever reserved, the sum
	 * it saw; the exact sum at each sweep; frees do not publish, so it
	 * can read high until the next reservation or sweep): a snapshot for
	 * readers of the file, which racing members can leave off by a step
	 * until the next one. The books themselves are the slots' `used`
	 * words; gpuguard_region_used() sums them, as gpuguard's own tools
	 * do. */
	_Atomic uint64_t used;
	_Atomic uint64_t peak;
	_Atomic uint64_t refused;   /* requests refused at the ceiling, all processes */
	_Atomic uint64_t reclaimed; /* bytes returned from processes that died */
	_Atomic uint32_t waiters;   /* requests sleeping for memory (ON_LIMIT=wait) */
	_Atomic uint32_t wake;      /* futex word: bumped when memory is given back */
	uint64_t physical;          /* the card's total, as its first user saw it */
	/* nanoseconds requests of all processes spent waiting for memory
	 * (ON_LIMIT=wait), added when each wait ends; from reserved bytes */
	_Atomic uint64_t wait_ns;
	/* bumped when a waiter found that nobody could free (every holder
	 * asleep): every request waiting then gives up; from reserved bytes */
	_Atomic uint32_t stalemate;
	uint32_t pad;
	/* requests the driver itself refused for lack of memory (below the
	 * ceiling: the card was full), all processes; from reserved bytes */
	_Atomic uint64_t driver_oom;
	/* the runtime category (issue 22): what the driver holds for the
	 * members beyond their allocation calls (contexts, modules, local
	 * memory), already part of the slots' used (the ceiling holds books +
	 * runtime). Version 4: a snapshot of the sum of the slots' runtime
	 * words (the runtime table), published after each change and each
	 * sweep, as `used` is of theirs; readers sum the table
	 * (gpuguard_region_runtime). Version 3 kept it by deltas, so a member
	 * killed with a runtime charge left it here (issue 22's soak). */
	_Atomic uint64_t runtime;
	/* what NVML reports the driver and firmware reserve on the card (v2
	 * `reserved`), as the first member that read it saw it; 0 = not known.
	 * The card holds physical less this (gpuguard metrics); a card that
	 * reserves nothing is written as 1 byte, so that 0 stays "not known" */
	_Atomic uint64_t card_reserved;
	uint8_t reserved[128 - 4 - 4 - 16 - 8 * 5 - 4 - 4 - 8 - 8 - 4 - 4 - 8 - 8 - 8];
};

struct gpuguard_region_proc {
	_Atomic uint32_t state; /* GPUGUARD_RPROC_* */
	uint32_t pid;           /* in the process's own PID namespace */
	uint64_t start_ms;      /* CLOCK_REALTIME when it attached */
	char comm[16];          /* NUL-terminated */
	/* bytes this process holds on each device entry (context reserve
	 * included): the pod's books (tests/model/pod.pml, steps R4 and L1) */
	_Atomic uint64_t used[GPUGUARD_REGION_DEVICES];
	_Atomic uint32_t ctx_charged; /* bit d: context reserve charged on entry d */
	/* threads of this process that made a governed allocation, free or
	 * memory query (never decremented): with `waiting`, whether every
	 * thread of it that could free is asleep (interpose/ceiling.c,
	 * gg_ceiling_nobody_frees); in what was padding */
	_Atomic uint32_t threads;
	/* pinned host memory this process holds (cuMemHostAlloc, hipHostMalloc
	 * and the like), valid where has_pinned says so: an older library kept
	 * its GPUGUARD_CONTEXT_RESERVE here, which nothing read. relaxed: a
	 * statistic for metrics (interpose/shared_pinned.c, pinned_publish). */
	_Atomic uint64_t host_pinned;
	/* requests of this process sleeping on each entry, counted before the
	 * entry's `waiters` and uncounted after, so a process killed while
	 * waiting leaves no phantom waiter once its slot is reclaimed */
	_Atomic uint16_t waiting[GPUGUARD_REGION_DEVICES];
	/* reservations of this process in flight on each entry (step R1 adds,
	 * R3 or R5 takes away): counted by every other reservation's sum */
	_Atomic uint64_t claim[GPUGUARD_REGION_DEVICES];
	/* The obituary in waiting: refreshed by the owner at most every
	 * GPUGUARD_OBIT_MS on paths it already takes (a charge published, a
	 * refusal), read by whoever sweeps the slot after a death without
	 * exit, who moves it to the deaths ring. relaxed everywhere: a
	 * snapshot; the sweeper reads it after the owner is dead. */
	_Atomic uint64_t obit_ms;    /* CLOCK_REALTIME of the last refresh; 0 = never */
	_Atomic uint64_t host_ws;    /* cgroup working set: usage less inactive_file */
	_Atomic uint64_t host_usage; /* cgroup usage, page cache included */
	_Atomic uint64_t host_limit; /* cgroup limit; 0 = none or not known */
	_Atomic uint64_t refused_ms; /* CLOCK_REALTIME of this process's last refusal */
	_Atomic uint32_t refused;    /* this process's refused requests */
	_Atomic uint16_t host_flags; /* GPUGUARD_OBIT_* */
	/* What was the upper half of a 32-bit host_flags, which an older
	 * library writes as 0 (readers that load the word mask the flags):
	 * both are written before the slot turns LIVE. */
	uint8_t container;  /* 1 + the index of its container's name in the header; 0 = none */
	uint8_t has_pinned; /* 1: host_pinned is kept */
};

#define GPUGUARD_OBIT_MS 500u          /* refresh interval of a slot's obituary */
#define GPUGUARD_OBIT_CGROUP_V1 1u     /* host figures from cgroup v1 */
#define GPUGUARD_OBIT_CGROUP_V2 2u     /* host figures from cgroup v2 */
#define GPUGUARD_OBIT_WS_KNOWN 4u      /* inactive_file was read: host_ws is the working set */
#define GPUGUARD_OBIT_RECENT_MS 60000u /* a refusal this close to the last refresh was "just before" */

/* One death: a slot whose owner died holding its lock, without exiting
 * (SIGKILL, the OOM killer, a crash). Written by the sweeper: seq set to 0,
 * the body, then seq = position in the ring + 1 (readers copy the entry and
 * skip seq 0 or a seq that names another position). */
struct gpuguard_region_death {
	_Atomic uint64_t seq;
	uint32_t pid;
	uint32_t refused;        /* its refused requests, all of its life */
	uint64_t start_ms;       /* when it attached */
	uint64_t last_ms;        /* its last refresh: the figures below are from then */
	uint64_t found_ms;       /* when the sweep found it dead */
	char comm[16];           /* NUL-terminated by the writer; untrusted */
	uint64_t gpu_used;       /* on the entry where it held the most of the ceiling */
	uint64_t gpu_limit;      /* that entry's ceiling; UINT64_MAX = none */
	uint64_t host_ws;        /* working set (or usage, without GPUGUARD_OBIT_WS_KNOWN) */
	uint64_t host_limit;     /* 0 = none or not known */
	uint32_t refused_age_ms; /* last_ms - its last refusal; UINT32_MAX = none */
	uint16_t gpu_entry;
	uint16_t host_flags; /* GPUGUARD_OBIT_* */
};

/* What an obituary says killed its process, from its figures alone. */
enum gpuguard_verdict {
	GPUGUARD_VERDICT_HOST_OOM, /* working set at 90 % of the cgroup limit or more */
	GPUGUARD_VERDICT_GPU,      /* GPU refusals just before its death */
	GPUGUARD_VERDICT_NOT_OOM,  /* within both limits */
	GPUGUARD_VERDICT_NO_HOST,  /* within the GPU limit; host memory not known */
};

static inline enum gpuguard_verdict gpuguard_region_verdict(const struct gpuguard_region_death *d)
{
	if (d->host_limit && d->host_ws >= d->host_limit / 10 * 9)
		return GPUGUARD_VERDICT_HOST_OOM;
	if (d->refused && d->refused_age_ms <= GPUGUARD_OBIT_RECENT_MS)
		return GPUGUARD_VERDICT_GPU;
	return d->host_flags & (GPUGUARD_OBIT_CGROUP_V1 | GPUGUARD_OBIT_CGROUP_V2) ? GPUGUARD_VERDICT_NOT_OOM
	                                                                           : GPUGUARD_VERDICT_NO_HOST;
}

_Static_assert(sizeof(struct gpuguard_region_header) == 512, "region header layout");
_Static_assert(sizeof(struct gpuguard_region_device) == 128, "region device layout");
_Static_assert(sizeof(struct gpuguard_region_proc) == 384, "region proc layout");
_Static_assert(sizeof(struct gpuguard_region_death) == 96, "region death layout");

#define GPUGUARD_REGION_DEVICE_OFF 512u
#define GPUGUARD_REGION_PROC_OFF (GPUGUARD_REGION_DEVICE_OFF + GPUGUARD_REGION_DEVICES * 128u)
#define GPUGUARD_REGION_DEATH_OFF (GPUGUARD_REGION_PROC_OFF + GPUGUARD_REGION_PROCS * 384u)
/* version 3's size, rounded up to whole pages (the deaths fill what
 * version 2 left spare): where version 4's runtime table starts */
#define GPUGUARD_REGION_V3_SIZE \
	((((uint64_t)GPUGUARD_REGION_DEATH_OFF + GPUGUARD_REGION_DEATHS * 96u) + 4095u) / 4096u * 4096u)
/* The runtime table (version 4): slot s's runtime charge on device entry d
 * is the word at RUNTIME_OFF + (s * DEVICES + d) * 8. Bytes, part of the
 * slot's used[d]: its owner raises used[d] before the word and lowers the
 * word before used[d], so a slot's runtime never exceeds its used; the sweep
 * (interpose/shared_sweep.c, S3) zeroes it with the slot's used, so a member
 * killed at any instruction leaves none behind (tests/model/pod.pml). */
#define GPUGUARD_REGION_RUNTIME_OFF ((uint32_t)GPUGUARD_REGION_V3_SIZE)
#define GPUGUARD_REGION_RUNTIME_SIZE ((uint64_t)GPUGUARD_REGION_PROCS * GPUGUARD_REGION_DEVICES * 8u)
#define GPUGUARD_REGION_V4_SIZE ((uint64_t)GPUGUARD_REGION_RUNTIME_OFF + GPUGUARD_REGION_RUNTIME_SIZE)
/* The credit table (version 5): slot s's credit on device entry d is the
 * word at CREDIT_OFF + (s * DEVICES + d) * 8. Bytes its owner reserved from
 * the pod and has not handed out (interpose/ceiling.c, tests/model/pod.pml
 * steps R4b, F1-F3, R3b): counted by every reservation's sum with the
 * slot's claim and used, zeroed by the sweep before used (S2b) and by any
 * refuser before it refuses (R3b). Not part of used: readers that report
 * what the pod uses leave it out. */
#define GPUGUARD_REGION_CREDIT_OFF ((uint32_t)GPUGUARD_REGION_V4_SIZE)
#define GPUGUARD_REGION_SIZE ((uint64_t)GPUGUARD_REGION_CREDIT_OFF + GPUGUARD_REGION_RUNTIME_SIZE)

static inline uint64_t gpuguard_region_slot_lock(unsigned slot)
{
	return (uint64_t)GPUGUARD_REGION_PROC_OFF + (uint64_t)slot * 384u;
}

static inline struct gpuguard_region_device *gpuguard_region_dev(void *base, unsigned i)
{
	return (struct gpuguard_region_device *)((char *)base + GPUGUARD_REGION_DEVICE_OFF) + i;
}

static inline struct gpuguard_region_proc *gpuguard_region_proc(void *base, unsigned i)
{
	return (struct gpuguard_region_proc *)((char *)base + GPUGUARD_REGION_PROC_OFF) + i;
}

static inline struct gpuguard_region_death *gpuguard_region_death(void *base, unsigned i)
{
	return (struct gpuguard_region_death *)((char *)base + GPUGUARD_REGION_DEATH_OFF) + i % GPUGUARD_REGION_DEATHS;
}

/* Slot s's credit word on device entry d (version 5 regions only). */
static inline _Atomic uint64_t *gpuguard_region_credit_word(void *base, unsigned s, unsigned d)
{
	return (_Atomic uint64_t *)((char *)base + GPUGUARD_REGION_CREDIT_OFF) +
	       ((size_t)s * GPUGUARD_REGION_DEVICES + d);
}

/* The size of a region of version v that the tools read; 0 for others. */
static inline uint64_t gpuguard_region_size_of(uint32_t v)
{
	return v == GPUGUARD_REGION_VERSION ? GPUGUARD_REGION_SIZE
	       : v == 4u                    ? GPUGUARD_REGION_V4_SIZE
	       : v == 3u                    ? GPUGUARD_REGION_V3_SIZE
	                                    : 0;
}

/* Slot s's runtime word on device entry d (version 4 regions and later). */
static inline _Atomic uint64_t *gpuguard_region_runtime_word(void *base, unsigned s, unsigned d)
{
	return (_Atomic uint64_t *)((char *)base + GPUGUARD_REGION_RUNTIME_OFF) +
	       ((size_t)s * GPUGUARD_REGION_DEVICES + d);
}

/* The pod's charge on device entry d: the sum of `used` over the occupied
 * slots (saturating). Exact once dead slots are swept; a live process's
 * operations in flight make a reader's sum momentarily stale, never wrong
 * for long. relaxed: a reading for reports; reservations use their own
 * seq_cst sum (interpose/shared.c). */
static inline uint64_t gpuguard_region_used(void *base, unsigned d)
{
	const struct gpuguard_region_header *h = (const struct gpuguard_region_header *)base;
	uint64_t sum = 0;
	for (unsigned w = 0; w < GPUGUARD_REGION_PROCS / 64; w++) {
		uint64_t bits = atomic_load_explicit((_Atomic uint64_t *)&h->occupied[w], memory_order_relaxed);
		while (bits) {
			unsigned s = w * 64 + (unsigned)__builtin_ctzll(bits);
			bits &= bits - 1;
			uint64_t u =
			    atomic_load_explicit(&gpuguard_region_proc(base, s)->used[d], memory_order_relaxed);
			sum = sum + u < sum ? UINT64_MAX : sum + u;
		}
	}
	return sum;
}

/* The pod's runtime on device entry d: the sum of the occupied slots'
 * runtime words (saturating), so a swept member's is gone with its slot;
 * in a version 3 region, the entry's own word. relaxed: a reading for
 * reports, as gpuguard_region_used. */
static inline uint64_t gpuguard_region_runtime(void *base, unsigned d)
{
	const struct gpuguard_region_header *h = (const struct gpuguard_region_header *)base;
	if (h->version < 4)
		return atomic_load_explicit(&gpuguard_region_dev(base, d)->runtime, memory_order_relaxed);
	uint64_t sum = 0;
	for (unsigned w = 0; w < GPUGUARD_REGION_PROCS / 64; w++) {
		uint64_t bits = atomic_load_explicit((_Atomic uint64_t *)&h->occupied[w], memory_order_relaxed);
		while (bits) {
			unsigned s = w * 64 + (unsigned)__builtin_ctzll(bits);
			bits &= bits - 1;
			uint64_t u =
			    atomic_load_explicit(gpuguard_region_runtime_word(base, s, d), memory_order_relaxed);
			sum = sum + u < sum ? UINT64_MAX : sum + u;
		}
	}
	return sum;
}

/* Fills in a new region's header: every layout field, the creation time and
 * the limit text (cut to fit), everything but the magic, which the writer
 * stores last (with release where others may be reading). */
static inline void gpuguard_region_layout(struct gpuguard_region_header *h, uint64_t created_ms, const char *limit_text)
{
	h->version = GPUGUARD_REGION_VERSION;
	h->header_size = sizeof(*h);
	h->size = GPUGUARD_REGION_SIZE;
	h->ndevices = GPUGUARD_REGION_DEVICES;
	h->device_off = GPUGUARD_REGION_DEVICE_OFF;
	h->device_size = sizeof(struct gpuguard_region_device);
	h->nprocs = GPUGUARD_REGION_PROCS;
	h->proc_off = GPUGUARD_REGION_PROC_OFF;
	h->proc_size = sizeof(struct gpuguard_region_proc);
	h->ndeaths = GPUGUARD_REGION_DEATHS;
	h->death_off = GPUGUARD_REGION_DEATH_OFF;
	h->death_size = sizeof(struct gpuguard_region_death);
	h->runtime_off = GPUGUARD_REGION_RUNTIME_OFF;
	h->created_ms = created_ms;
	size_t n = strlen(limit_text);
	if (n >= sizeof(h->limit_text))
		n = sizeof(h->limit_text) - 1;
	memcpy(h->limit_text, limit_text, n);
	h->limit_text[n] = 0;
}

/* Validates a region image of len bytes (a mapping or a copy read from the
 * file): magic, version, size and every layout field. 0 if usable; else -1
 * with a one-line reason in why. Never reads outside [buf, buf + len).
 * A version 3 or 4 image (no runtime table, no credit table) passes too,
 * for the tools; the library maps GPUGUARD_REGION_SIZE bytes
 * and so takes only the current version. */
static inline int gpuguard_region_check(const void *buf, uint64_t len, char *why, size_t whylen)
{
	const struct gpuguard_region_header *h = (const struct gpuguard_region_header *)buf;
	const char *r = NULL;
	if (len < sizeof(*h))
		r = "shorter than its header (truncated)";
	else if (h->magic != GPUGUARD_REGION_MAGIC)
		r = "bad magic (not a gpuguard region, or corrupted)";
	else if (!gpuguard_region_size_of(h->version))
		r = "unsupported version (written by another gpuguard release)";
	else if (h->header_size != sizeof(*h) || h->size != gpuguard_region_size_of(h->version))
		r = "header or file size field is wrong";
	else if (len != h->size)
		r = "file size does not match the region size (truncated or extended)";
	else if (h->ndevices != GPUGUARD_REGION_DEVICES || h->device_off != GPUGUARD_REGION_DEVICE_OFF ||
	         h->device_size != sizeof(struct gpuguard_region_device))
		r = "device table layout is wrong";
	else if (h->nprocs != GPUGUARD_REGION_PROCS || h->proc_off != GPUGUARD_REGION_PROC_OFF ||
	         h->proc_size != sizeof(struct gpuguard_region_proc))
		r = "process table layout is wrong";
	else if (h->ndeaths != GPUGUARD_REGION_DEATHS || h->death_off != GPUGUARD_REGION_DEATH_OFF ||
	         h->death_size != sizeof(struct gpuguard_region_death))
		r = "deaths table layout is wrong";
	else if (h->runtime_off != (h->version >= 4u ? GPUGUARD_REGION_RUNTIME_OFF : 0))
		r = "runtime table layout is wrong";
	else if (!memchr(h->limit_text, 0, sizeof(h->limit_text)))
		r = "limit text is not terminated";
	if (!r)
		return 0;
	if (why && whylen) {
		size_t n = strlen(r);
		if (n >= whylen)
			n = whylen - 1;
		memcpy(why, r, n);
		why[n] = 0;
	}
	return -1;
}

#endif
