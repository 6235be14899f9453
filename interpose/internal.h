/* gpuguard: declarations that cross files inside the preload library.
 * Everything here is hidden; only GG_EXPORT symbols leave the library.
 * Grouped by the file that defines them. */
#ifndef GPUGUARD_INTERNAL_H
#define GPUGUARD_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "gpuguard.h"
#include "gpuguard/parse.h"

#define GG_EXPORT __attribute__((visibility("default")))
#define GG_MAX_DEVICES GPUGUARD_MAX_DEVICES
#define GG_UNLIMITED UINT64_MAX

#define GG_MIB (1024ull * 1024ull)
#define GG_PAGE (2 * GG_MIB) /* GPU page since Pascal (DESIGN.md §5) */

/* ---- log.c ---- */
enum gg_log_level { GG_LOG_INFO, GG_LOG_WARN, GG_LOG_ERROR };
/* Formats into a stack buffer and write(2)s one line to fd 2, rate-limited. */
void gg_log(enum gg_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* While on (only initialisation turns it on, on its own thread), gg_log
 * keeps lines instead of writing them; gg_log_release writes what was kept,
 * once, at the process's first GPU call (issue 10, finding 14). */
void gg_log_hold(int on);
void gg_log_release(void);
/* Lines the rate limit dropped (for the dump's end record). */
uint64_t gg_log_dropped(void);
/* Formats a byte count as "20.0 GiB" into buf. Returns buf. */
const char *gg_log_bytes(char *buf, size_t len, uint64_t bytes);
/* The first GPU call (the first hook to enter, or the first real entry
 * point resolved or handed to the application) writes what initialisation
 * held back, once. relaxed: a once-set flag; the slow path acquires
 * initialisation before it reads the held lines. */
extern _Atomic int gg_gpu_called;
void gg_first_call_slow(void);
static inline void gg_first_call(void)
{
	if (GG_UNLIKELY(!atomic_load_explicit(&gg_gpu_called, memory_order_relaxed)))
		gg_first_call_slow();
}

/* ---- options.c ---- */
/* The value syntaxes (quantities, durations, GPUGUARD_LIMIT) are
 * gpuguard/parse.h, signals gpuguard/signals.h: shared with the command.
 * The options themselves, one row each: gpuguard/options.h. */
struct gg_options {
	int limit_set; /* GPUGUARD_LIMIT was given */
	int limit_bad; /* ... and could not be parsed: fail closed */
	struct gpuguard_limits limits;
	int verbose;
	uint64_t table_slots;
	int charge_managed;
	const char *dump_dir;
	int dump_signal; /* 0 = no signal dumps */
	uint64_t dump_max;
	uint64_t dump_interval_ms;
	int dump_at_exit;
	uint64_t history;  /* events kept; 0 = off */
	int stack_depth;   /* 0 = off */
	int scope_process; /* GPUGUARD_SCOPE=process */
	const char *shared_path;
	unsigned shared_mode;
	uint64_t context_reserve;    /* bytes */
	int runtime;                 /* GPUGUARD_RUNTIME: charge the driver's per-process figure */
	uint64_t runtime_headroom;   /* bytes held for growth between reconciles */
	uint64_t wait_ms;            /* GPUGUARD_ON_LIMIT=wait:<ms>; 0 = fail */
	const char *termination_log; /* GPUGUARD_TERMINATION_LOG; "" = off */
	int unwinder_fp;             /* GPUGUARD_TEST_UNWINDER=frame-pointer */
	int pystack_off;             /* GPUGUARD_TEST_PYSTACK=off */
	/* GPUGUARD_POD_NAMESPACE, _POD_NAME, _CONTAINER_NAME: labels for the
	 * pod region's metrics; "" = not given (or not a Kubernetes name) */
	const char *pod_namespace, *pod_name, *container_name;
	/* GPUGUARD_LIMIT as given (NULL = unset), for the pod region; cut to
	 * the region's field, so limit_len says whether it fits */
	const char *limit_text;
	size_t limit_len; /* strlen of the whole value */
};
#define GG_STACK_MAX_DEPTH 64
extern struct gg_options gg_opt;
/* Reads every option from the environment into gg_opt; reports bad values. */
void gg_options_load(void);
/* The value row had (its default when unset) and where it came from. */
const char *gg_options_value(size_t row, const char **source);
/* Prints every option with its value and source (GPUGUARD_VERBOSE=1). */
void gg_options_print(void);
/* "fail" (0) or "wait:<duration>" (ms). 0 or -1. */
int gg_parse_on_limit(const char *s, uint64_t *wait_ms);
/* The parser a row's value goes through (gpuguard/options.h says each). */
enum gg_option_type {
	GG_OPT_BOOL,
	GG_OPT_COUNT,
	GG_OPT_DURATION,
	GG_OPT_SIGNAL,
	GG_OPT_PATH,
	GG_OPT_CHOICE,
	GG_OPT_MODE,
	GG_OPT_LIMIT,
	GG_OPT_ON_LIMIT,
	GG_OPT_NAME,
};
/* One row of gpuguard/options.h, with where its value goes in gg_opt. */
struct gg_option_row {
	const char *name;
	const char *def;
	const char *syntax;
	const char *doc;
	enum gg_option_type type;
	uint64_t lo, hi;     /* COUNT, DURATION: the range; PATH: the length */
	const char *choices; /* CHOICE, MODE: "a|b|c" */
	const char *bad;     /* what a bad value means, when not "using <def>" */
	size_t off, size;    /* the field in struct gg_options */
};
/* gg_option_nrows documented rows (README.md, VERBOSE, dumps), then the
 * test knobs, gg_option_nall in all. */
extern const struct gg_option_row gg_option_rows[];
extern const size_t gg_option_nrows, gg_option_nall;

/* ---- ceiling.c ---- */
/* Statistics every alloc and free touch are striped by thread, so that the
 * ceiling word `used` is the only cache line all threads fight over. A
 * stripe's live_bytes can go negative (freed on another thread than it was
 * allocated on); only the sum means anything, and it never is. */
#define GG_STRIPES 16
struct gg_stripe {
	_Atomic int64_t allocs;
	_Atomic int64_t frees;
	_Atomic int64_t live_bytes;
} __attribute__((aligned(64)));

/* The words a reservation races on, wherever they live: in this process's
 * gg_device (process scope) or in the pod region's device entry (pod scope,
 * shared.c). Set up once per device by the first governed call there. */
struct gg_budget {
	_Atomic uint64_t *used;
	_Atomic uint64_t *peak;
	_Atomic uint64_t *limit;
	_Atomic uint64_t *refused;      /* refusals at the ceiling, all processes */
	_Atomic uint32_t *waiters;      /* requests sleeping for room (ON_LIMIT=wait) */
	_Atomic uint32_t *wake;         /* futex word, bumped when room is given back */
	_Atomic uint64_t *mine;         /* this process's share (pod scope), else NULL */
	_Atomic uint16_t *mine_waiting; /* ... and its count of sleepers there */
	_Atomic uint64_t *claim;        /* pod scope: our slot's reservations in flight, else NULL */
	/* pod scope: this process's own `used` (gg_device), kept equal to
	 * *mine, so that losing the region (shared.c) or leaving it at exit
	 * falls back to books that already hold what we hold; else NULL */
	_Atomic uint64_t *shadow;
	unsigned entry; /* pod scope: the device entry in the region */
	/* pod scope: the region's mapping and our slot in it, for the sums
	 * over its slots (region.h), our slot's count of counted threads and
	 * the entry's count of driver refusals; NULL in process scope */
	void *region;
	unsigned slot;
	_Atomic uint32_t *threads;
	_Atomic uint64_t *driver_oom;
	/* pod scope: called after each change of our charge there (shared.c:
	 * our slot still counted, the obituary kept fresh). The ceiling's one
	 * call up, through the budget its binder filled in. */
	void (*changed)(void);
	int futex_private; /* 0 when the words are shared with other processes */
	/* nanoseconds spent waiting (pod scope: all processes'), and a count
	 * bumped when nobody could free, at which every waiter gives up */
	_Atomic uint64_t *wait_ns;
	_Atomic uint32_t *stalemate;
};

/* Per-device books. */
struct gg_device {
	_Atomic uint64_t used; /* the only word a reservation races on */
	_Atomic uint64_t peak;
	_Atomic uint64_t limit; /* resolved ceiling; GG_LIMIT_UNRESOLVED until known */
	_Atomic uint64_t pool_reserved;
	_Atomic uint64_t untracked_frees;
	_Atomic uint64_t refused[GPUGUARD_REFUSED_COUNT];
	_Atomic uint64_t pool_overshoot;
	_Atomic uint64_t refused_all; /* process scope's budget->refused */
	_Atomic uint32_t waiters, wake;
	/* this process's time spent waiting for room here; process scope's
	 * budget->stalemate */
	_Atomic uint64_t wait_ns;
	_Atomic uint32_t stalemate;
	/* NULL until the device's first governed call binds it (gg_ceiling_budget);
	 * then &local or &pod, changing only at exit (pod to local). */
	struct gg_budget *_Atomic budget;
	struct gg_budget local, pod;
	_Atomic int bind_state; /* 0 unbound, 1 binding, 2 bound */
	struct gg_stripe stripe[GG_STRIPES];
} __attribute__((aligned(64)));
#define GG_LIMIT_UNRESOLVED (UINT64_MAX - 1)
extern struct gg_device gg_devices[GG_MAX_DEVICES];

/* The budget of dev, binding it (pod region, context reserve) on first use.
 * Call only from a hook, where the driver can be asked who the device is. */
struct gg_budget *gg_ceiling_bind_slow(int dev);
/* What binds a device to the pod (shared.c's gg_shared_bind, which sits
 * above the ceiling): set by initialisation; none = process scope. */
typedef int (*gg_ceiling_binder_fn)(int dev, struct gg_budget *b);
void gg_ceiling_set_binder(gg_ceiling_binder_fn fn);
/* The pod region was lost (shared.c): every device back to this process's
 * books, and none bound to the pod from now on. */
void gg_ceiling_lose_pod(void);
static inline struct gg_budget *gg_ceiling_budget(int dev)
{
	/* acquire: pairs with the release in gg_ceiling_bind_slow, so the
	 * budget's pointers are seen filled in. */
	struct gg_budget *b = atomic_load_explicit(&gg_devices[dev].budget, memory_order_acquire);
	return GG_LIKELY(b != NULL) ? b : gg_ceiling_bind_slow(dev);
}
/* At exit, after our charges went back to the pod: later frees (other
 * destructors) settle against this process's own books, not the pod's. */
void gg_ceiling_unbind_pod(void);
/* The budget if bound, else this process's own books (no binding: for
 * readers outside a hook, which must not call the driver). */
static inline struct gg_budget *gg_ceiling_budget_peek(int dev)
{
	/* acquire: as in gg_ceiling_budget. */
	struct gg_budget *b = atomic_load_explicit(&gg_devices[dev].budget, memory_order_acquire);
	return b ? b : &gg_devices[dev].local;
}
/* Waiting for room (GPUGUARD_ON_LIMIT=wait), see ceiling.c: enter; loop {
 * seen = wake_seq; retry; sleep(seen) }; leave. sleep returns -1 once
 * deadline_ns (CLOCK_MONOTONIC) has passed, else 0 after a wake-up or a
 * slice of at most 100 ms. */
uint32_t gg_ceiling_wait_enter(int dev); /* returns the stalemate count, for give_up */
uint32_t gg_ceiling_wake_seq(int dev);
int gg_ceiling_wait_sleep(int dev, uint32_t seen, uint64_t deadline_ns);
void gg_ceiling_wait_leave(int dev);
/* Takes n sleepers off a waiters word, saturating at zero. */
void gg_ceiling_waiters_sub(_Atomic uint32_t *waiters, uint32_t n);
/* False when bytes exceed dev's ceiling outright: no amount of waiting helps. */
int gg_ceiling_could_fit(int dev, uint64_t bytes);
/* Counts the calling thread, once, among those that could free memory
 * (every governed allocation, free and memory query calls it). Inline: the
 * hot path asks twice per pair, and only a thread's first call counts. */
extern GG_TLS uint8_t gg_thread_counted;
void gg_ceiling_note_thread_slow(void);
static inline void gg_ceiling_note_thread(void)
{
	if (GG_UNLIKELY(!gg_thread_counted))
		gg_ceiling_note_thread_slow();
}
/* True when nobody is left to free memory on dev's budget: every counted
 * thread of ours is asleep waiting, and (pod scope) every other process
 * holding memory there is wholly asleep too. */
int gg_ceiling_nobody_frees(int dev);
/* After a failed retry: whether the waiter should give up now, because
 * nobody could free (and no room came back since `seen`), which it then
 * declares so that every other waiter gives up too, or because another
 * waiter declared that since `since` (wait_enter's value). */
int gg_ceiling_give_up(int dev, uint32_t seen, uint32_t since);
/* Adds ns of waiting on dev to this process's count and the budget's. */
void gg_ceiling_count_wait(int dev, uint64_t ns);
/* This process's nanoseconds spent waiting for room on dev. */
uint64_t gg_ceiling_wait_ns(int dev);
/* Sets every device's limit from gg_opt (percent limits stay unresolved). */
void gg_ceiling_configure(void);
/* True when dev's limit is a percentage not yet turned into bytes. Inline:
 * every allocation asks. relaxed: the limit is a plain number (see
 * gg_ceiling_resolve); the budget's acquire is gg_ceiling_budget_peek's. */
static inline int gg_ceiling_unresolved(int dev)
{
	return atomic_load_explicit(gg_ceiling_budget_peek(dev)->limit, memory_order_relaxed) == GG_LIMIT_UNRESOLVED;
}
/* Turns a percentage limit into bytes, given the device's physical total. */
void gg_ceiling_resolve(int dev, uint64_t physical_total);
/* Atomically adds `bytes` to dev's usage if it stays within the ceiling.
 * 0 on success; -1 refused (and counted under the reason). */
int gg_ceiling_reserve(int dev, uint64_t bytes);
/* Set by each grant of gg_ceiling_try_reserve on this thread: whether it
 * left less than GG_CEILING_NEAR of room (gg_account_begin then reads the
 * runtime charge fresh, footprint.c). */
#define GG_CEILING_NEAR GG_FOOTPRINT_STEP
extern GG_TLS uint8_t gg_ceiling_near;
/* The same, without counting a refusal (a first try before reconciling). */
int gg_ceiling_try_reserve(int dev, uint64_t bytes);
/* Gives back bytes reserved or charged earlier; saturates at 0. */
void gg_ceiling_release(int dev, uint64_t bytes);
/* Adds bytes with no ceiling check (pool growth the driver already made). */
void gg_ceiling_force(int dev, uint64_t bytes);
/* The same for growth nobody reserved (a pool's or the graph reserve's):
 * how far it takes the budget past its limit (pod scope: what the whole
 * pod uses against the pod's limit) is counted as pool overshoot. */
void gg_ceiling_force_over(int dev, uint64_t bytes);
/* The same two on a budget (binding and region reclaim use them). */
void gg_ceiling_force_budget(struct gg_budget *b, uint64_t bytes);
void gg_ceiling_release_budget(struct gg_budget *b, uint64_t bytes);
/* What a governed allocation of `size` bytes through `api` is charged. */
uint64_t gg_ceiling_charge_size(enum gpuguard_api api, uint64_t size);
/* Memory-info virtualisation (DESIGN.md §2). */
void gg_ceiling_meminfo(int dev, uint64_t real_free, uint64_t real_total, uint64_t *free_out, uint64_t *total_out);
/* Zero counters and unbind every device (fork child). Limits stay. */
void gg_ceiling_reset(void);
void gg_ceiling_count_refusal(int dev, enum gpuguard_refusal why);
/* Counts one allocation (+1, +size) or free (-1... as frees, -size). */
void gg_ceiling_count_alloc(int dev, uint64_t size);
void gg_ceiling_count_free(int dev, uint64_t size);
/* Copies dev's books, summing the stripes. */
void gg_ceiling_read(int dev, struct gpuguard_device_stats *out);

/* ---- footprint.c: the footprint the card shows (issue 22) ---- */
/* The "runtime" category: what the driver holds for this process beyond
 * its allocation calls (NVML's per-process used memory less the books),
 * charged to the same budget, so the ceiling holds books + runtime. */
typedef int (*gg_footprint_uuid_fn)(int dev, uint8_t uuid[16]);
/* Who device dev is (hook_cuda.c's driver UUID), for NVML. */
void gg_footprint_set_uuid(gg_footprint_uuid_fn fn);
/* Around this process's first context on dev: the card's PIDs before, so
 * the one that appears after is ours (NVML's PIDs are the host's). */
void gg_footprint_ctx_before(int dev);
/* Reads the driver's figure for us on dev and sets the runtime charge to
 * it less the books (plus headroom and what cuCtxSetLimit foresaw).
 * how: GG_FP_AFTER_CTX, a context was just made (the PID diff may run);
 * GG_FP_MAY_LOWER, the charge may go down (a refusal: this thread's request
 * is not in the books). Otherwise it only goes up: the books hold grants
 * whose driver call has not yet returned (this thread's tick, and other
 * threads' in flight), which the driver's figure does not show yet, so
 * the difference reads low. Another thread reconciling dev does this one's
 * work after (footprint.c). Slow: NVML calls. */
enum { GG_FP_AFTER_CTX = 1, GG_FP_MAY_LOWER = 2 };
void gg_footprint_reconcile(int dev, int how);
/* A module or library loaded since the device's last reconcile (bit d):
 * under CUDA_MODULE_LOADING=LAZY its code goes to the card at the first
 * use of a function, so the first lookup after a load reconciles (hooks
 * read the word first: one load when nothing is pending). */
extern _Atomic uint64_t gg_footprint_pending;
void gg_footprint_first_use(int dev);
/* The hot path's only cost: a per-thread countdown of bytes allocated;
 * below zero, the slow path reconciles (rate-limited per device). */
#define GG_FOOTPRINT_STEP ((int64_t)(64 * GG_MIB))
#define GG_FOOTPRINT_MIN_MS 100
extern GG_TLS int64_t gg_footprint_countdown;
void gg_footprint_tick_slow(int dev);
/* A grant that left less than GG_CEILING_NEAR of room: the runtime charge
 * is read fresh (at most every GG_FOOTPRINT_NEAR_MS) before it stands, so
 * growth the ticks missed (a library's lazy load) is charged before the
 * last bytes under the ceiling are given out. 0: the grant stands; -1: it
 * was given back and no longer fits (the caller's refusal path follows). */
#define GG_FOOTPRINT_NEAR_MS 1
int gg_footprint_near_slow(int dev, uint64_t charge);
static inline void gg_footprint_tick(int dev, uint64_t charge)
{
	if (GG_UNLIKELY((gg_footprint_countdown -= (int64_t)charge) < 0))
		gg_footprint_tick_slow(dev);
}
/* The target runtime charge, from the driver's figure, the books, the
 * foreseen heap/FIFO and the headroom (pure: unit-tested). */
uint64_t gg_footprint_target(uint64_t driver, uint64_t books, uint64_t foreseen, uint64_t headroom);
/* Local memory for a per-thread stack (pure): stack rounded up to
 * GG_FOOTPRINT_STACK_ALIGN × resident threads per SM × SMs. */
#define GG_FOOTPRINT_STACK_ALIGN 16u
uint64_t gg_footprint_local_bytes(uint64_t stack, uint64_t threads_per_sm, uint64_t sms);
/* cuCtxSetLimit's pre-charge: begin says how much the call will grow what
 * the driver holds (0: nothing, nothing held); when not 0, the device's
 * reconcile lock is held until end, and the caller admits `grow` with
 * gg_account_begin (refusing the call on failure: end(l, 0, 0)). end: ok
 * = the driver took the limit; charged = the growth was admitted. */
enum gg_fp_limit { GG_FP_STACK, GG_FP_FIFO, GG_FP_HEAP }; /* what a limit sizes (CUDA's CUlimit order) */
struct gg_footprint_limit {
	int dev, limit;
	uint64_t grow, local;
};
uint64_t gg_footprint_limit_begin(int dev, int limit, uint64_t value, uint64_t current, uint64_t threads_per_sm,
                                  uint64_t sms, struct gg_footprint_limit *out);
void gg_footprint_limit_end(struct gg_footprint_limit *l, int ok, int charged);
struct gg_footprint_stats {
	uint64_t charged;  /* the runtime charge now */
	uint64_t measured; /* the driver's figure less the books, last read */
	uint64_t driver;   /* the driver's per-process figure, last read; 0 = never */
	uint64_t foreseen; /* pre-charged heap/FIFO the driver does not show yet */
	uint64_t reconciles;
	uint64_t over; /* runtime the ceiling had no room for (the footprint passed it) */
};
void gg_footprint_read(int dev, struct gg_footprint_stats *out);
/* Whether a refusal of request bytes on dev is the runtime's doing: the
 * books alone would have fit under the ceiling. */
int gg_footprint_refusal_is_runtime(int dev, uint64_t request);
/* Fork child: figures and PID forgotten. */
void gg_footprint_reset(void);

/* ---- table.c ---- */
/* Key namespaces: device pointers, VMM handles and array handles could share
 * numeric values, so the top two bits of a key say which one it is. */
enum gg_key_ns { GG_NS_PTR = 0, GG_NS_VMM = 1, GG_NS_ARRAY = 2, GG_NS_MIPMAP = 3 };
static inline uint64_t gg_key(enum gg_key_ns ns, uint64_t raw)
{
	return raw ^ ((uint64_t)ns << 62);
}

#define GG_REC_CHARGED 0x1   /* the record's charge was added to its device's `used` */
#define GG_REC_HOST 0x2      /* pinned host memory: never charged, not a device allocation */
#define GG_REC_POOL_GONE 0x4 /* a block of a destroyed pool, which holds its memory till the last such free */
/* Pinned host pointers share the table under GG_NS_PTR with this bit set:
 * user-space addresses stay below 2^47, so it cannot meet a device pointer. */
#define GG_HOST_KEY_BIT (1ull << 61)

/* One live allocation, as handed to and from the table. */
struct gg_record {
	uint64_t key;
	uint64_t size;  /* requested bytes */
	uint64_t t_ms;  /* ms since library start (40 bits kept) */
	uint32_t tid;   /* kernel thread id */
	uint32_t stack; /* stack id, 0 = none (filled by the dump subsystem); below 2^16 */
	uint16_t ctx;   /* context id (ctx.c), 0 = none known */
	uint8_t dev;
	uint8_t api;   /* enum gpuguard_api */
	uint8_t flags; /* GG_REC_* */
};

struct gg_table;
/* Maps a table whose first generation has `slots` slots (rounded up to a
 * power of two); it grows by doubling generations as it fills (table.c).
 * NULL if mmap fails. Lock-free for any number of threads. */
struct gg_table *gg_table_create(uint64_t slots);
/* The same, growing to at most max_slots in its newest generation: past
 * that, records spill to the overflow area (tests). */
struct gg_table *gg_table_create_capped(uint64_t slots, uint64_t max_slots);
void gg_table_destroy(struct gg_table *t);
/* 0 = inserted in the main table, 1 = spilled to the overflow area,
 * -1 = not recorded (no memory for the overflow area). */
int gg_table_insert(struct gg_table *t, const struct gg_record *rec);
/* Removes key; copies the record to *out. 1 if found, 0 if not. */
int gg_table_remove(struct gg_table *t, uint64_t key, struct gg_record *out);
/* Calls fn on a consistent copy of each live record (weakly consistent
 * snapshot: records inserted or removed meanwhile may or may not be seen). */
void gg_table_foreach(struct gg_table *t, void (*fn)(const struct gg_record *, void *), void *arg);
uint64_t gg_table_live(struct gg_table *t);
uint64_t gg_table_spilled(struct gg_table *t);
uint64_t gg_table_capacity(struct gg_table *t); /* slots in all generations */
unsigned gg_table_generations(struct gg_table *t);
/* The farthest any live record sits from its home slot (tests). */
uint64_t gg_table_max_probe(struct gg_table *t);
/* Empties the table in a fork child, where no other thread exists. */
void gg_table_clear_unlocked(struct gg_table *t);
/* Appends r to an array grown with mmap (first entries, then doubling), for
 * lists a hook builds (pool destroy, context reset). 0, or -1 when full. */
int gg_records_push(struct gg_record **recs, size_t *n, size_t *cap, size_t first, const struct gg_record *r);

/* ---- pool.c ---- */
/* Stream-ordered pools are charged by what they reserve (DESIGN.md §2). */
/* Reads a pool's reserve and, when used is not NULL, what is in use. 0 or -1. */
typedef int (*gg_pool_reserved_fn)(void *pool, uint64_t *reserved, uint64_t *used);
struct gg_pool;
#define GG_POOL_REFUSED UINT64_MAX
/* Finds or registers pool handle on dev. NULL when the registry is full
 * (65536 pools) or out of memory. */
struct gg_pool *gg_pool_get(void *handle, int dev, gg_pool_reserved_fn query);
/* Call before asking the pool for `size` bytes. Returns GG_POOL_REFUSED past
 * the ceiling (counted and dumped); otherwise the bytes it reserved, with the pool's lock held
 * until gg_pool_end. 0 means the request goes to the pool's warm reserve,
 * unreserved: end it with gg_pool_end_warm (or, when the runtime's call
 * failed, gg_pool_end with 0). */
uint64_t gg_pool_begin(struct gg_pool *p, uint64_t size, uint64_t *reserve_before);
/* How gg_pool_begin admits a request past the ceiling: gg_account_begin,
 * which sits above this file; set by init.c. 0 = reserved. */
typedef int (*gg_pool_admit_fn)(int dev, uint64_t charge);
void gg_pool_set_admit(gg_pool_admit_fn fn);
int gg_pool_grew(struct gg_pool *p, uint64_t reserve_before);
/* By how much the pool's reserve grew past reserve_before (0: not, or the
 * driver cannot tell). */
uint64_t gg_pool_growth(struct gg_pool *p, uint64_t reserve_before);
/* After the driver call: re-reads the pool's reserve, charges the change, and
 * gives back the `reserved` bytes begin() took. Drops the lock. */
void gg_pool_end(struct gg_pool *p, uint64_t reserved);
/* After a warm request (begin returned 0) the runtime served: re-reads the
 * reserve once; a growth against reserve_before is charged if it fits. 0:
 * settled, lock dropped. -1: the growth (*grown) does not fit; the lock is
 * still held, and the caller undoes the growth, then calls gg_pool_end. */
int gg_pool_end_warm(struct gg_pool *p, uint64_t reserve_before, uint64_t *grown);
/* At a synchronisation point (cuStreamSynchronize, cuCtxSynchronize,
 * cuEventSynchronize, HIP's): pools give back reserve above their release
 * threshold there, so every pool holding a charge is re-read and the memory
 * credited at once, for every process of the pod (issue 9, finding 3). A
 * load and a return when no pool was ever seen. */
void gg_pool_sync_point(void);
/* Re-reads every pool of dev (before a refusal, and for memory info). */
void gg_pool_reconcile_device(int dev);
void gg_pool_reconcile(struct gg_pool *p);
/* After a reset or destroy on dev: pools that are gone are forgotten, the
 * others (a default pool, emptied) settle to what they reserve now. */
void gg_pool_after_reset(int dev);
/* The pool was destroyed: give back all it held. */
void gg_pool_forget(void *handle);
/* 1 when device pointer ptr was allocated from pool, 0 when not, -1 when
 * the driver cannot say. */
typedef int (*gg_pool_owner_fn)(uint64_t ptr, void *pool);
/* Trims pool to nothing (what destroying it releases); 0 or -1. */
typedef int (*gg_pool_trim_fn)(void *pool);
/* Around the driver's destroy of a pool: begin trims a pool with live
 * blocks and lists them (owner says which records are its own); end, when
 * the driver destroyed it (ok), keeps what the pool still holds charged
 * until the last listed block is freed, and refunds the rest. Without
 * owner, or out of memory for the list, what it holds stays charged. */
struct gg_pool_doom {
	struct gg_record *recs;
	size_t n, cap;
	uint64_t hold; /* what the pool holds with its blocks live */
	int live;      /* the pool had blocks live at begin */
	int lost;      /* some block could not be listed */
};
void gg_pool_destroy_begin(void *handle, gg_pool_owner_fn owner, gg_pool_trim_fn trim, struct gg_pool_doom *d);
void gg_pool_destroy_end(void *handle, struct gg_pool_doom *d, int ok);
/* A record with GG_REC_POOL_GONE was freed (account.c). */
void gg_pool_gone_block_freed(uint64_t key);
int gg_pool_device(void *handle);
void gg_pool_reset(void);

/* ---- history.c ---- */
/* The last GPUGUARD_HISTORY events (dump.h record "h"). Lock-free: any
 * number of writers, readers skip slots being rewritten. */
enum gg_hist_op { GG_HIST_ALLOC = 'a', GG_HIST_FREE = 'f', GG_HIST_REFUSE = 'r' };
struct gg_hist_event {
	uint64_t i; /* the event's place in the ring's order (gg_history_head) */
	uint64_t ms, p, s;
	uint32_t stack;
	uint16_t api;
	uint8_t op, dev;
};
/* Maps the ring once (capacity rounded up to a power of two). 0 or -1. */
int gg_history_init(uint64_t capacity);
uint64_t gg_history_capacity(void);
void gg_history_after_fork_child(void);
void gg_history_add(enum gg_hist_op op, int dev, enum gpuguard_api api, uint64_t p, uint64_t s, uint32_t stack);
/* Copies up to max whole events, oldest first. Returns how many. */
uint64_t gg_history_snapshot(struct gg_hist_event *out, uint64_t max);
/* Events claimed so far: a dump's cut is the moment this was read. An
 * allocation's event is claimed before its record enters the table. */
uint64_t gg_history_head(void);
uint64_t gg_history_dropped(void);
/* Bytes live by the events recorded (requested sizes, allocations minus
 * frees) on dev, and their highest point with when (ms since start): kept
 * even when the ring is off, for the dump's "peak" record (issue 11, 4). */
uint64_t gg_history_live(int dev);
void gg_history_peak(int dev, uint64_t *bytes, uint64_t *ms);
/* What was live at (within 1%, at least 1 MiB, of) dev's peak, by stack:
 * the largest GG_PEAK_SITES, as the growing thread copied them. -1 when
 * none was taken. Signal-safe (no locks, no allocation). */
#define GG_PEAK_SITES 16
struct gg_peak_sites {
	uint64_t bytes, ms; /* the live bytes and time of the snapshot */
	unsigned n;
	uint32_t st[GG_PEAK_SITES];
	uint64_t b[GG_PEAK_SITES];
};
int gg_history_peak_sites(int dev, struct gg_peak_sites *out);

/* ---- pystack.c ---- */
/* A stack word with this bit is a Python frame (a code-object id and a
 * line), not a return address: no user-space address has it. */
#define GG_PY_FRAME_BIT (1ull << 63)
/* 1 while captures should look for Python frames (relaxed; a hint). */
extern _Atomic int gg_py_live;
/* The calling thread's Python frames spliced into its native frames fr[0,n)
 * (innermost first, room for cap): returns the new count. */
int gg_pystack_splice(uintptr_t *fr, int n, int cap);
/* The link map grew: look for an interpreter again if none was found. */
void gg_pystack_recheck(void);
/* w's file, function and line if w is a Python frame (1), else 0. */
int gg_pystack_frame(uintptr_t w, const char **file, const char **func, uint32_t *line);
/* The line of byte offset addr in a 3.minor line table (0 = none). */
int gg_pystack_addr2line(int minor, const unsigned char *table, size_t n, int first, int addr);

/* ---- stack.c ---- */
/* Maps the intern table and opens libunwind (dlopen). depth 0 = off. */
void gg_stack_init(int depth);
/* "libunwind", "frame-pointer" or "none". */
const char *gg_stack_unwinder(void);
int gg_stack_depth(void);
/* The caller's stack (our own frames skipped), interned. 0 = none. */
uint32_t gg_stack_capture(void);
uint32_t gg_stack_intern(const uintptr_t *frames, int n);
/* The frames of id, innermost first; returns how many (0 = unknown id). */
int gg_stack_frames(uint32_t id, const uintptr_t **frames);
/* Ids handed out so far (ids are 1 .. this). */
uint32_t gg_stack_ids(void);

/* ---- dump.c ---- */
enum gg_dump_trigger { GG_DUMP_CEILING, GG_DUMP_DRIVER_OOM, GG_DUMP_SIGNAL, GG_DUMP_EXIT };
/* What the hook about to call gg_ceiling_count_refusal is asking for, so a
 * refusal can name the request (set by gg_bracket_begin and the pool paths). */
void gg_dump_note_request(enum gpuguard_api api, uint64_t size);
/* The request noted last on this thread (gg_hook_sleep keeps it across a
 * signal handler's own hook). */
void gg_dump_noted_request(enum gpuguard_api *api, uint64_t *size);
/* A refusal was counted on dev: history event + rate-limited dump. */
void gg_dump_on_refusal(int dev, enum gpuguard_refusal why);
/* Arms dumps on first device activity: starts the writer thread and
 * installs the signal handler. Cheap after the first call. */
void gg_dump_arm(void);
/* The driver's own free/total for the calling thread's current device,
 * asked on the failing thread (the writer has no context). One per runtime
 * (0 = CUDA, 1 = HIP), registered by the hook files. 0 or -1. */
typedef int (*gg_meminfo_fn)(uint64_t *free_bytes, uint64_t *total_bytes);
void gg_dump_set_meminfo(int runtime, gg_meminfo_fn fn);
/* A memory-info query (cuMemGetInfo, hipMemGetInfo) answered on dev with
 * these figures (what the process was told, ceilings applied): kept in a
 * small ring (the first GG_MI_FIRST and the last GG_MI_LAST) for the dump's
 * "meminfo" records, so the report can tell a process that sizes itself
 * from the total (issue 11, finding 1). Lock-free, no allocation; the hooks
 * call it after gg_account_meminfo. */
#define GG_MI_FIRST 8
#define GG_MI_LAST 8
void gg_dump_note_meminfo(int dev, uint64_t free_bytes, uint64_t total_bytes);
/* The same for nvmlDeviceGetMemoryInfo[_v2], dev being NVML's index: the
 * record says "via":"nvml" (a server may size itself from NVML, and a
 * monitoring thread polling it should be told apart). */
void gg_dump_note_meminfo_nvml(int dev, uint64_t free_bytes, uint64_t total_bytes);
struct gg_meminfo_q {
	uint64_t n;  /* 0-based index among all queries of the process */
	uint64_t ms; /* since start */
	uint64_t free, total;
	uint64_t used; /* this process's live bytes on dev then (gg_history_live) */
	int nvml;      /* asked through NVML, not the runtime */
	int dev;
};
/* Whole entries, by n; the number of queries in all goes to *count. */
size_t gg_dump_meminfo_snapshot(struct gg_meminfo_q *out, size_t max, uint64_t *count);
/* Host memory as the dump's host record shows it. The cgroup is found from
 * /proc/self/cgroup, or is the directory GPUGUARD_TEST_CGROUP_DIR names (a
 * test-only knob: fixture files instead of the real cgroup). */
struct gg_host_sample {
	uint64_t rss;
	int version; /* 2, 1, 0 = no cgroup found */
	int have_lim, have_use, have_oom, have_inactive;
	uint64_t lim, use, oom, inactive_file;
};
void gg_dump_host_sample(struct gg_host_sample *h);
/* Reads GPUGUARD_TEST_CGROUP_DIR; called on application threads only (at
 * arming and at exit), never by the writer. */
void gg_dump_read_test_knobs(void);
/* Arms dumps (gg_dump_arm) and, once that has finished (the knobs above
 * are read), takes the host sample: 0, or -1 while another thread arms. For
 * the pod obituary (shared.c), on application threads. */
int gg_dump_host_sample_armed(struct gg_host_sample *h);
/* Pinned host memory, tracked for the dump's host record only. */
void gg_dump_pinned(int64_t bytes, int64_t count);
/* Fork child: no writer thread here; start again from nothing. */
void gg_dump_after_fork_child(void);

/* ---- vmm.c ---- */
/* Virtual-address reservations and what is mapped in them (for dumps). */
struct gg_vmm_info {
	uint64_t base, size, mapped;
	uint64_t holes;        /* unmapped runs between mapped granules */
	uint64_t largest_hole; /* bytes */
};
void gg_vmm_reserved(uint64_t base, uint64_t size);
void gg_vmm_freed(uint64_t base);
void gg_vmm_mapped(uint64_t ptr, uint64_t size, int map);
void gg_vmm_foreach(void (*fn)(const struct gg_vmm_info *, void *), void *arg);
void gg_vmm_reset(void);

/* ---- handles.c: VMM physical-memory lifetime (DESIGN.md §2) ---- */
/* A handle's memory lives while it has a reference or a mapping; the hooks
 * tell handles.c each change, and it takes the record out of the table when
 * the last one goes, before the driver call (begin), settling after (end). */
#define GG_HANDLE_CHARGED 0x1  /* made by a governed create: it has a charged record */
#define GG_HANDLE_IMPORTED 0x2 /* imported from another process: never charged here */
#define GG_HANDLE_HOST 0x4     /* host memory (a HOST or HOST_NUMA location): never charged */
struct gg_vmm_item {
	uint64_t va, size, h;
	int dying, known, dropped;
	unsigned flags;
	struct gg_record rec;
};
struct gg_vmm_op {
	size_t n, cap, map_bytes;
	struct gg_vmm_item *items;
	struct gg_vmm_item inl[4];
};
/* After a successful create or import: one reference, no mapping. */
void gg_handle_created(uint64_t h, unsigned flags);
/* After a successful retain of h: one more reference (h unknown: nothing). */
void gg_handle_retained(uint64_t h);
/* Before the driver's release: 1 when handles.c knows h (then call end with
 * the driver's verdict), 0 when it does not (the caller falls back to the
 * plain free bracket). */
int gg_handle_release_begin(uint64_t h, struct gg_vmm_op *op);
void gg_handle_release_end(struct gg_vmm_op *op, int ok);
/* After a successful map of h at [va, va+size). */
void gg_handle_mapped(uint64_t va, uint64_t size, uint64_t h);
/* Around an unmap (or an address free) of [va, va+size). */
void gg_handle_unmap_begin(uint64_t va, uint64_t size, struct gg_vmm_op *op);
void gg_handle_unmap_end(struct gg_vmm_op *op, int ok);
/* h went with its context (reset, destroy): forget it and its mappings;
 * its record is the caller's to settle. */
void gg_handle_forget(uint64_t h);
/* For tests: h's references and mappings; 1 if known. */
int gg_handle_state(uint64_t h, uint32_t *refs, uint32_t *maps);
void gg_handle_reset(void);

/* ---- ctx.c: contexts, for reset and destroy (REAL-CUDA.md §5) ---- */
#define GG_CTX_MAX 4096 /* ids 1 .. GG_CTX_MAX-1; 0 = none */
/* Bumped whenever a context is forgotten: per-thread caches of "the current
 * context's id" compare it before trusting themselves. */
extern _Atomic uint32_t gg_ctx_epoch;
/* ctx's id and device if registered, else 0. Lock-free. */
uint16_t gg_ctx_find(const void *ctx, int *dev);
/* ctx's id, registering it on device dev on first sight (primary: it is
 * dev's primary context). 0 when the registry is full. HIP, which has no
 * contexts, uses one key per device (GG_CTX_HIP_KEY). */
uint16_t gg_ctx_id(const void *ctx, int dev, int primary);
#define GG_CTX_HIP_KEY(dev) ((const void *)(uintptr_t)(16 + (dev))) /* never a pointer */
/* ctx was destroyed: its id can be reused. */
void gg_ctx_forget(const void *ctx);
/* Around the driver's reset of dev's primary context (ctx NULL) or the
 * destroy of ctx: begin takes every record of it out of the table, end
 * settles them (refunds) or, when the driver failed, puts them back. A
 * record for which survived() says 1 after a successful call is put back
 * too: the driver kept that memory (CUDA's pools keep their blocks over a
 * reset). survived may be NULL: every record went. */
struct gg_ctx_drop {
	struct gg_record *recs;
	size_t n, cap;
};
void gg_ctx_drop_begin(struct gg_ctx_drop *d, int dev, const void *ctx);
void gg_ctx_drop_end(struct gg_ctx_drop *d, int ok, int (*survived)(const struct gg_record *));
void gg_ctx_reset(void);

/* ---- graph.c: graph memory (allocation nodes) ---- */
/* The graph gained allocation nodes of `bytes` on dev (cuGraphAddMemAllocNode,
 * or a cuMemAllocAsync captured into it). */
void gg_graph_add_bytes(const void *graph, int dev, uint64_t bytes);
/* va was handed out for a graph allocation; and whether one was. */
void gg_graph_va_add(uint64_t va);
int gg_graph_va_known(uint64_t va);
/* exec was instantiated from graph: it inherits graph's bytes. */
void gg_graph_instantiated(const void *exec, const void *graph);
void gg_graph_forget(const void *key, int exec);
/* An executable graph's allocation-node bytes and device; -1 if unknown. */
int gg_graph_exec_bytes(const void *exec, int *dev, uint64_t *bytes);
/* Brings dev's graph-memory charge to the driver's reserve `reserved`;
 * `credit` bytes the caller reserved for this growth are folded in. */
void gg_graph_settle(int dev, uint64_t reserved, uint64_t credit);
void gg_graph_reset(void);

/* ---- shared.c: pod scope (include/gpuguard/region.h) ---- */
/* Points b at dev's entry in the pod region, attaching to the region on
 * first use; charges GPUGUARD_CONTEXT_RESERVE to this process's slot there.
 * 0, or -1 when dev stays in process scope (scope=process, region refused,
 * region full). Called once per device, by gg_ceiling_bind_slow (init.c
 * hands it to the ceiling: gg_ceiling_set_binder). */
int gg_shared_bind(int dev, struct gg_budget *b);
/* Returns the charges of pod processes that died to their devices (at most
 * every 10 ms; before a refusal and while waiting). */
void gg_shared_reclaim(void);
/* A dump written, for the pod's metrics. No-op outside pod scope. */
void gg_shared_count_dump(void);
/* Memory info's rate-limited sweep of dead members (at most every 250 ms). */
void gg_shared_probe(void);
/* A refusal of ours, counted in our slot for our obituary (which it
 * refreshes, rate-limited). */
void gg_shared_note_refusal(void);
/* This process's pinned host memory changed by bytes (account.c): kept in
 * our slot for the metrics. */
void gg_shared_note_pinned(int64_t bytes);
/* The pod's recent deaths (region.h's ring), oldest first; at most max. */
struct gpuguard_region_death;
size_t gg_shared_deaths(struct gpuguard_region_death *out, size_t max);
/* Who device dev is, asked of the runtime that owns it: 16 UUID bytes and
 * the physical total. One per runtime (GG_RT_CUDA, GG_RT_HIP): 0, -1 when
 * the runtime cannot say, 1 when it is not loaded in this process. */
typedef int (*gg_identity_fn)(int dev, uint8_t uuid[16], uint64_t *physical);
void gg_shared_set_identity(int runtime, gg_identity_fn fn);
/* Runtime `runtime` is using ordinal dev for the first time (once per
 * ordinal, or per context): if dev is already bound in the pod to another
 * card (the other runtime's dev), say once that this process keeps one
 * budget for both. The books are per ordinal within a process. */
void gg_shared_check_card(int dev, int runtime);
/* Fork child: the parent's slot is not ours; attach afresh on first use. */
void gg_shared_after_fork_child(void);
/* How the obituary samples host memory: dump.c's gg_dump_host_sample_armed,
 * which sits above this file; set by init.c (none: no host figures). */
typedef int (*gg_host_sample_fn)(struct gg_host_sample *h);
void gg_shared_set_host_sample(gg_host_sample_fn fn);
/* For dumps: each process of the pod holding memory on a device this
 * process also uses (this process included). dev is the local ordinal. */
struct gg_pod_use {
	unsigned slot;
	uint32_t pid;
	char comm[16];
	int self, alive, dev;
	uint64_t used;
};
void gg_shared_foreach_use(void (*fn)(const struct gg_pod_use *, void *), void *arg);
/* NVML's view of one device, in place: the physical free/total become the
 * budget's, consistent with cuMemGetInfo. uuid: the 16 bytes of NVML's
 * "GPU-..." UUID, or NULL when unknown; index: NVML's index, used as the
 * ordinal when the UUID names no device this process or the pod knows. */
void gg_nvml_meminfo(const uint8_t *uuid, unsigned index, uint64_t *free_bytes, uint64_t *total_bytes);

/* ---- init.c ---- */
/* Runs initialisation once; safe from any hook, constructor or thread. */
void gg_init_once(void);
/* gg_init_once's common case inline: once initialisation is done, one
 * acquire load (the same that gg_init_once makes, pairing with its
 * release) and no call. */
static inline void gg_init_done(void)
{
	if (GG_UNLIKELY(atomic_load_explicit(&gg_init_state, memory_order_acquire) != 2))
		gg_init_once();
}
/* relaxed: gg_inert is a once-set flag that orders nothing; a hook that
 * reads 0 before this copy's initialisation ran governs that one call. An
 * inert copy says so at the first call that passes through it
 * (gg_inert_note, always 1). */
int gg_inert_note(void);
#define gg_in_hook \
	(gg_hook_active || (GG_UNLIKELY(atomic_load_explicit(&gg_inert, memory_order_relaxed)) && gg_inert_note()))
#ifndef GG_HOOK_RUNTIME
#define GG_HOOK_RUNTIME GG_RT_CUDA /* hook_hip.c defines GG_RT_HIP first */
#endif

/* ---- signal.c: the application's handlers, through our dispatcher ---- */
/* glibc's sigaction, bypassing ours: for our own handlers (dump signal,
 * SIGBUS guard), which keep the kernel's view and chain as before. */
struct sigaction;
int gg_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/* Set while a signal handler runs that interrupted a hook on this thread
 * (gg_hook_active was set): the interrupted hook may hold our locks or be
 * inside the driver, so an allocation the handler makes is refused, never
 * passed through uncharged (issue 10, finding 9). */
extern GG_TLS int gg_sig_nested;
/* Such refusals, process-wide. */
extern _Atomic uint64_t gg_sig_refusals;
/* Counts one refusal (an atomic add only) and returns oom. */
int gg_sig_refused(int oom);
/* The fatal paths a dump in flight must outlive (issue 25, finding 6):
 * SIGABRT, SIGSEGV and SIGBUS, and _exit/_Exit. From then on each of them
 * calls fn first (async-signal-safe, bounded: dump.c's wait), then goes on
 * as it would have: the application's handler, the default action (the
 * signal raised again), or the real _exit. Where the application left such
 * a signal at its default, our dispatcher takes the kernel's entry and
 * every answer still says SIG_DFL. */
void gg_sig_watch_fatal(void (*fn)(int sig));
/* First thing in every allocating hook, before the re-entry check: in a
 * handler that interrupted a hook, answer the API's out-of-memory code
 * without calling the driver. */
#define GG_SIG_REFUSE(oom)                          \
	do {                                        \
		if (GG_UNLIKELY(gg_sig_nested))     \
			return gg_sig_refused(oom); \
	} while (0)

/* ---- resolve.c ---- */
/* A sanitizer runtime, preloaded ahead of us, calls dlsym(RTLD_NEXT, ...)
 * while it initialises, before its shadow memory exists: the code on that
 * path must not be instrumented, or it faults. */
#define GG_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))
/* glibc's own dlsym, found with dlvsym; gg_dlsym_resolve finds it (the
 * dlsym trampoline, hook_dlsym.c, calls it and reads gg_real_dlsym_ptr). */
void *gg_real_dlsym(void *handle, const char *name);
void *gg_dlsym_resolve(void);
extern void *_Atomic gg_real_dlsym_ptr;
/* Finds the next definition of name after our library: RTLD_NEXT, then
 * an already-loaded `lib` (dlopen RTLD_NOLOAD). NULL if none. */
void *gg_resolve_next(const char *name, const char *lib);

/* A governed exported name: our wrapper and the slot of its real pointer. */
struct gg_sym {
	const char *name;
	void *ours;
	void *_Atomic *real;
};
/* Loads *slot, resolving name behind us (RTLD_NEXT, then the already-loaded
 * lib) on first use; never returns `ours`. NULL when there is no real one. */
void *gg_real_load(void *_Atomic *slot, const char *name, void *ours, const char *lib);
/* gg_real_load's common case inline: a slot already filled costs one load
 * (acquire, as there) and no call; the REAL() of every hook file. */
static inline void *gg_real_get(void *_Atomic *slot, const char *name, void *ours, const char *lib)
{
	void *p = atomic_load_explicit(slot, memory_order_acquire);
	return GG_LIKELY(p != NULL) ? p : gg_real_load(slot, name, ours, lib);
}
/* What gg_real_load calls at a slot's first resolution, and the dlsym
 * override at a lookup in a plugin's handle: linkmap.c's gg_linkmap_follow,
 * set by its constructor (nothing before it). */
void gg_resolve_set_follow(void (*fn)(void));
void gg_resolve_follow(void);
/* Remembers real in *slot if it is still empty. */
void gg_real_offer(void *_Atomic *slot, void *real);
/* The dlsym override's answer for a name in table t (see hook_dlsym.c). */
void *gg_sym_wrap(const struct gg_sym *t, size_t n, const char *name, void *real);
int gg_sym_is_ours(const struct gg_sym *t, size_t n, void *fn);

/* ---- linkmap.c ---- */

/* Binds the governed imports of objects loaded since the last call (a
 * RTLD_DEEPBIND plugin's) to our wrappers. Cheap when nothing was loaded;
 * does nothing before our constructor ran (while a sanitizer runtime still
 * initialises). */
void gg_linkmap_follow(void);

/* ---- hook_cuda.c / hook_hip.c / hook_nvml.c ---- */
/* If name is a function we govern, records real as its real pointer and
 * returns our wrapper; else returns real unchanged. */
void *gg_cuda_wrap_symbol(const char *name, void *real);
void *gg_hip_wrap_symbol(const char *name, void *real);
void *gg_nvml_wrap_symbol(const char *name, void *real);
int gg_cuda_is_ours(void *fn);
int gg_hip_is_ours(void *fn);
int gg_nvml_is_ours(void *fn);

/* ---- export.c: cudart's private tables ---- */
/* The real cuGetExportTable, for the dlsym and cuGetProcAddress tables. */
extern void *_Atomic gg_real_cuGetExportTable;

/* ---- accounting shared by the hooks (account.c) ---- */
/* The context id (ctx.c) the calling hook found current: set by the hooks'
 * device lookup, stamped on each record gg_account_commit makes. */
extern GG_TLS uint16_t gg_cur_ctx;
/* Bracket around one governed allocation (DESIGN.md §3): begin reserves the
 * charge, end commits + records or rolls back. begin is the one admission
 * path every shape takes (plain, pool, graph launch): try; reconcile the
 * device's pools and reclaim dead members' charges, try again; wait
 * (ON_LIMIT=wait); else refuse, counted and dumped. 0 or -1. */
int gg_account_begin(int dev, uint64_t charge);
void gg_account_commit(int dev, enum gg_key_ns ns, uint64_t raw, uint64_t size, enum gpuguard_api api, uint64_t charge);
void gg_account_rollback(int dev, uint64_t charge, int driver_oom);
/* A refusal: counted under why, then dumped (rate-limited). */
void gg_account_refuse(int dev, enum gpuguard_refusal why);
/* Removes the record of raw (before the driver frees it). 1 if found. */
int gg_account_forget(enum gg_key_ns ns, uint64_t raw, struct gg_record *out);
/* After the driver's free: settles the books, or puts the record back. */
void gg_account_freed(const struct gg_record *rec, int ok);
void gg_account_untracked(int dev);
/* Pinned host memory: recorded and counted for dumps, never charged. */
void gg_account_host_alloc(uint64_t raw, uint64_t size);
int gg_account_host_forget(uint64_t raw, struct gg_record *out);
void gg_account_host_freed(const struct gg_record *rec, int ok);

/* GPUGUARD_ON_LIMIT=wait's sleep (gg_ceiling_wait_sleep) as a hook makes
 * it: for its duration this thread counts as outside any hook, so that a
 * signal handler allocating meanwhile is charged or refused, never passed
 * through as re-entry (issue 10, finding 9). */
int gg_hook_sleep(int dev, uint32_t seen, uint64_t deadline_ns);

/* Memory-info virtualisation for dev, in place (DESIGN.md §2). */
void gg_account_meminfo(int dev, size_t *free_bytes, size_t *total_bytes);
/* What a device-total query reports for dev: min(ceiling, physical). */
size_t gg_account_total(int dev, size_t physical);

/* Every hook runs inside GG_ENTER ... GG_LEAVE. A call made while a hook runs
 * on this thread (a runtime calling its own entry points, our helper calls)
 * sees gg_in_hook and passes straight through. */
#define GG_ENTER()                                \
	do {                                      \
		gg_hook_active = 1;               \
		gg_cur_runtime = GG_HOOK_RUNTIME; \
		gg_init_done();                   \
		gg_first_call();                  \
	} while (0)
#define GG_LEAVE() (gg_hook_active = 0)

/* ---- shape.c: the hooks' bodies, one core function per shape ---- */
/* What a runtime lends the shapes: its codes and the few calls the books
 * need. One per hook file (CUDA, HIP); the shapes never name a runtime. */
struct gg_runtime {
	uint8_t runtime; /* GG_RT_*, for gg_cur_runtime */
	int ok, oom;     /* the runtime's success and out-of-memory codes */
	/* Pinned host memory goes with the current context (freed by its
	 * destroy), so the host shape asks device() first; else it has none. */
	int host_in_ctx;
	/* The calling thread's device, or -1; sets gg_cur_ctx. */
	int (*device)(void);
	/* The context id of dev's memory, or NULL when device() and the hook's
	 * own lookups already set gg_cur_ctx. */
	uint16_t (*dev_ctx)(int dev);
	/* The card's physical size. 0 or -1. */
	int (*total)(int dev, uint64_t *bytes);
	gg_pool_reserved_fn pool_query;
	gg_pool_owner_fn pool_owner; /* NULL when the runtime cannot say */
	gg_pool_trim_fn pool_trim;   /* for a destroy */
	/* Undoing a pool's growth: free the block in stream order, wait for
	 * the stream, trim the pool to keep bytes. Each 0 or -1. */
	int (*free_async)(uint64_t ptr, void *stream);
	int (*sync)(void);
	int (*trim)(void *pool, uint64_t keep);
};

/* Before a charge on dev: resolves a percentage ceiling from the card's
 * size on first use, and sets the record's context (rt->dev_ctx). */
void gg_bind_device(const struct gg_runtime *rt, int dev);
/* Allocate (DESIGN.md §3): begin admits the charge (0 = go ahead, -1 =
 * refuse with rt->oom), the hook calls the runtime, end commits and records
 * or rolls back, and returns the code for the caller. A negative dev means
 * "not ours to govern" (no context, not device memory): the call passes
 * through. A result of zero from a successful call (no memory handed out)
 * is rolled back: nothing could ever free it. */
struct gg_alloc {
	int dev;
	enum gpuguard_api api;
	enum gg_key_ns ns;
	int charged; /* 0: recorded, never charged (managed memory, if told) */
	uint64_t size;
	void *out;           /* the runtime's out slot: 8 bytes, pointer or handle */
	const size_t *pitch; /* when the runtime picks a pitch: size = *pitch * rows */
	uint64_t rows;
	uint64_t charge; /* set by begin */
};
int gg_alloc_begin(const struct gg_runtime *rt, struct gg_alloc *a);
/* end's uncommon paths: a failure to roll back (raw 0), or a pitch. */
int gg_alloc_settle(const struct gg_runtime *rt, struct gg_alloc *a, int rc, uint64_t raw);
/* Inline, so that the record's stack is unwound from the hook itself: a
 * frame more costs the unwinder a step on every allocation. */
static inline int gg_alloc_end(const struct gg_runtime *rt, struct gg_alloc *a, int rc)
{
	if (a->dev < 0) {
		/* Not device memory. A VMM handle of host memory (NCCL 2.28's
		 * host buffers, cuMemCreate at a HOST_NUMA location) is never
		 * charged, but known, so that its release and unmaps are not
		 * counted as frees of memory we never saw. */
		uint64_t h = 0;
		if (a->ns == GG_NS_VMM && rc == rt->ok)
			__builtin_memcpy(&h, a->out, sizeof(h));
		if (h)
			gg_handle_created(h, GG_HANDLE_HOST);
		return rc;
	}
	uint64_t raw = 0;
	if (rc == rt->ok)
		__builtin_memcpy(&raw, a->out, sizeof(raw)); /* a device pointer, a void * or a handle */
	if (GG_UNLIKELY(!raw || a->pitch))
		return gg_alloc_settle(rt, a, rc, raw);
	/* A VMM handle is known to handles.c before its record exists: nobody
	 * can release it before this hook returns it. */
	if (a->ns == GG_NS_VMM)
		gg_handle_created(raw, GG_HANDLE_CHARGED);
	gg_account_commit(a->dev, a->ns, raw, a->size, a->api, a->charge);
	return rc;
}
#define GG_ALLOC(rt, a, call) (gg_alloc_begin(rt, a) == 0 ? gg_alloc_end(rt, a, call) : (rt)->oom)

/* Allocate from a stream-ordered pool (pool.c): charged by what the pool
 * reserves. A growth past the ceiling is undone and refused (*out nulled). */
struct gg_pool_alloc {
	struct gg_alloc a; /* a.dev: the pool's device */
	void *pool, *stream;
	struct gg_pool *p; /* set by begin, as below */
	uint64_t before, reserved;
};
int gg_pool_alloc_begin(const struct gg_runtime *rt, struct gg_pool_alloc *pa);
int gg_pool_alloc_end(const struct gg_runtime *rt, struct gg_pool_alloc *pa, int rc);
#define GG_POOL_ALLOC(rt, pa, call) (gg_pool_alloc_begin(rt, pa) == 0 ? gg_pool_alloc_end(rt, pa, call) : (rt)->oom)

/* Free: take the record out before the runtime can hand the address to
 * another thread, put it back if it refuses (DESIGN.md §3). An unknown
 * pointer freed is counted on the current device (never a graph's). */
struct gg_free {
	struct gg_record rec;
	enum gg_key_ns ns;
	uint64_t raw;
	int known;
};
void gg_free_untracked(const struct gg_runtime *rt, const struct gg_free *f);
static inline void gg_free_begin(struct gg_free *f, enum gg_key_ns ns, uint64_t raw)
{
	f->ns = ns;
	f->raw = raw;
	f->known = gg_account_forget(ns, raw, &f->rec);
}
static inline int gg_free_end(const struct gg_runtime *rt, struct gg_free *f, int rc)
{
	if (f->known)
		gg_account_freed(&f->rec, rc == rt->ok);
	else if (rc == rt->ok)
		gg_free_untracked(rt, f);
	return rc;
}
/* A VMM handle's release: handles.c's when it knows the handle (a mapped or
 * retained one outlives the release), else the plain free. */
struct gg_release {
	struct gg_vmm_op op;
	struct gg_free f;
	int tracked;
};
void gg_release_begin(struct gg_release *r, uint64_t handle);
int gg_release_end(const struct gg_runtime *rt, struct gg_release *r, int rc);
/* An unmap of [ptr, ptr+size), or the free of the address range itself
 * (range: the driver drops what is still mapped there with it). */
void gg_unmap_begin(struct gg_vmm_op *op, uint64_t ptr, uint64_t size);
int gg_unmap_end(const struct gg_runtime *rt, struct gg_vmm_op *op, int rc, uint64_t ptr, uint64_t size, int range);

/* Pinned host memory: recorded for dumps, never charged. begin before the
 * runtime's call sets the context of the record. */
void gg_host_alloc_begin(const struct gg_runtime *rt);
int gg_host_alloc_end(const struct gg_runtime *rt, int rc, const void *out, uint64_t size);
void gg_host_free_begin(struct gg_free *f, uint64_t raw);
int gg_host_free_end(const struct gg_runtime *rt, struct gg_free *f, int rc);

/* Memory info, after the runtime answered into f and t (the hook's own
 * variables, so NULL outputs are tolerated, HAMi-core #333): the ceiling's
 * view, copied out on success. Device total: min(ceiling, physical). */
int gg_meminfo_end(const struct gg_runtime *rt, int rc, size_t f, size_t t, size_t *free_out, size_t *total_out);
int gg_total_end(const struct gg_runtime *rt, int rc, size_t *bytes, int dev);

/* Pool management. created: after the runtime's create of a pool on dev
 * (-1: not device memory). trimmed: after a trim, whose refund the next
 * request sees at once. destroy: around the destroy (pool.c's doom). */
int gg_pool_created(const struct gg_runtime *rt, int rc, const void *pool_out, int dev);
int gg_pool_trimmed(const struct gg_runtime *rt, int rc, void *pool);
void gg_pool_destroy_enter(const struct gg_runtime *rt, void *pool, struct gg_pool_doom *d);
int gg_pool_destroy_leave(const struct gg_runtime *rt, void *pool, struct gg_pool_doom *d, int rc);

/* Note after success: each runs the books only when the runtime's call
 * succeeded and no hook of ours is already running on this thread, and
 * returns rc. A handle out slot may be NULL (then nothing is noted). */
int gg_note_synced(const struct gg_runtime *rt, int rc);
int gg_note_retained(const struct gg_runtime *rt, int rc, const void *handle_out);
int gg_note_imported(const struct gg_runtime *rt, int rc, const void *handle_out);
int gg_note_reserved(const struct gg_runtime *rt, int rc, const void *ptr_out, uint64_t size);
int gg_note_mapped(const struct gg_runtime *rt, int rc, uint64_t ptr, uint64_t size, uint64_t handle);

#endif
