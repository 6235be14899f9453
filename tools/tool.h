/* gpuguard command: what crosses files in tools/. The reader (jsonl.c,
 * load.c) turns a dump (include/gpuguard/dump.h) into a struct gg_dump; the
 * analyzer (analyze.c) aggregates and diagnoses it; model.c turns that into
 * the report model, which output.c (text, JSON) and html.c lay out. fmt.c
 * and text.c are the leaves all of them format and print through.
 * region.c reads the pod region (include/gpuguard/region.h) for top.c,
 * metrics.c and http.c (their shared helpers: live.h). Never includes
 * interpose/: those two formats are the contract. */
#ifndef GPUGUARD_TOOL_H
#define GPUGUARD_TOOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <gpuguard.h>
#include <uthash.h>

/* Exit codes of every subcommand. */
#define GG_EXIT_OK 0
#define GG_EXIT_USAGE 1
#define GG_EXIT_BADINPUT 2

/* Limits that keep a hostile file from costing unbounded memory or time. */
#define GG_MAX_LINE (1u << 20) /* bytes in one record */
#define GG_MAX_DEPTH 3         /* object > array > object (stack frames) */
#define GG_MAX_FRAMES 256      /* frames in one stack */
#define GG_MAX_CONFIG 256
#define GG_MAX_VMM 65536 /* vmm records (address-space reservations) */
#define GG_MAX_ERR 512

/* jsonl.c: a strict JSON reader for one line. Values live in a per-line
 * arena: valid until the next gg_json_parse on the same reader. */
enum gg_jtype { GG_J_NULL, GG_J_BOOL, GG_J_INT, GG_J_STR, GG_J_ARR, GG_J_OBJ };

struct gg_jval {
	enum gg_jtype type;
	int neg;         /* GG_J_INT: negative; magnitude in u */
	uint64_t u;      /* GG_J_INT magnitude, GG_J_BOOL value */
	const char *s;   /* GG_J_STR: decoded, NUL-terminated */
	size_t len;      /* GG_J_STR length; GG_J_ARR/OBJ number of children */
	const char *key; /* member name when the parent is an object */
	size_t keylen;
	uint32_t child, next; /* indexes into the arena; 0 = none */
};

struct gg_json {
	struct gg_jval *v;
	uint32_t nv, cap;
	char *str;
	size_t strcap, strlen;
};

void gg_json_init(struct gg_json *j);
void gg_json_free(struct gg_json *j);
/* Parses line[0..len) as exactly one JSON object. Returns the root index (>0),
 * or 0 with a message in err. */
uint32_t gg_json_parse(struct gg_json *j, const char *line, size_t len, char *err, size_t errlen);
/* Member `name` of object `obj`, or NULL. */
const struct gg_jval *gg_json_get(const struct gg_json *j, const struct gg_jval *obj, const char *name);
static inline const struct gg_jval *gg_json_at(const struct gg_json *j, uint32_t i)
{
	return i ? &j->v[i] : NULL;
}

/* load.c: the dump, as read. */
struct gg_frame {
	char *m, *o, *s; /* module, offset (hex), symbol (NULL when absent) */
	char *py;        /* a Python frame's file (issue 27), else NULL; s its function */
	uint64_t line;   /* a Python frame's line (0 = unknown) */
};

/* load.c: fr as text into out: a Python frame as "serve.py:212 in
 * grow_kv_cache" (returns 1), else nothing (returns 0). */
int gg_frame_py(const struct gg_frame *fr, char *out, size_t n);

struct gg_stack {
	uint64_t id;
	uint32_t nframes;
	struct gg_frame *frames; /* innermost first, as in the file */
	UT_hash_handle hh;
};

struct gg_alloc {
	uint64_t size, age, tid, st;
	uint32_t dev, api;
	uint64_t addr; /* its address or handle ("p") */
};

struct gg_hist {
	uint64_t ms, size, st;
	uint32_t dev, api;
	char op;       /* 'a', 'f', 'r' */
	uint64_t addr; /* "p" */
};

/* A "device" record as read: the library's books on one ordinal at the
 * dump's moment (the library's own struct gg_device holds the live ones). */
struct gg_dump_device {
	uint32_t dev;
	int has_limit, has_driver_free, has_driver_total;
	uint64_t limit, used, peak, pool_reserved, live_bytes, allocs, frees, untracked_frees;
	uint64_t refused_ceiling, refused_config, refused_driver, pool_overshoot;
	uint64_t driver_free, driver_total;
	int pod;               /* scope "pod": limit, used, peak are the pod's */
	uint64_t process_used; /* this process's part of used */
	int has_wait_ms;       /* dumps before 0.2 lack it */
	uint64_t wait_ms;      /* time its requests slept for memory (ON_LIMIT=wait) */
	/* issue 22, dumps before 0.3 lack them: the runtime part of
	 * process_used, and the driver's per-process figure (has_: read) */
	int has_runtime, has_runtime_driver;
	uint64_t runtime, runtime_driver;
	/* issue 22: the driver's own limit (MPS memory partitioning), where one
	 * was found: the cgroup's hard limit, its use, gpuguard's own ceiling
	 * (has_own_limit 0: none) */
	int has_driver_limit, has_own_limit;
	uint64_t driver_limit, driver_limit_used, own_limit;
};

struct gg_config {
	char *name, *value, *source;
};

/* One live virtual-address reservation (cuMemAddressReserve,
 * hipMemAddressReserve): holes are the unmapped runs between mapped parts. */
struct gg_vmm {
	uint64_t base, size, mapped, holes, largest_hole;
};

/* A "pod" record as read: one process of the pod holding memory on one of
 * the dump's devices. */
struct gg_dump_pod {
	uint32_t slot, dev;
	uint64_t pid, used;
	int self, alive;
	char *comm;
};
#define GG_MAX_POD 4096 /* pod records: 256 processes x 16 devices */

/* A memory-info query as the process was answered (record "meminfo"). */
struct gg_meminfo {
	uint64_t n, ms, free, total, used;
	uint32_t dev;
	int nvml; /* "via":"nvml": asked through NVML */
};
#define GG_MAX_MEMINFO 64

/* A pod member that died without exiting (record "death"; region.h's
 * deaths ring): what it last showed, for its verdict. */
struct gg_death {
	uint64_t n; /* its place in the pod's order of deaths, from 1 */
	uint32_t pid, gpu_entry, refused, cg_version;
	uint32_t refused_age_ms;              /* its last refusal before its last record; UINT32_MAX = none */
	int ws_known;                         /* working_set is usage less inactive_file */
	uint64_t start_ms, last_ms, found_ms; /* Unix ms */
	uint64_t gpu_used, gpu_limit;         /* gpu_limit UINT64_MAX = no ceiling */
	uint64_t working_set, host_limit;     /* host_limit 0 = none or not known */
	char comm[64];                        /* escaped, printable */
	int pending;                          /* region.c only: an exited slot not yet swept (n, found_ms 0) */
};
#define GG_MAX_DEATHS 16 /* GPUGUARD_REGION_DEATHS */
/* The verdict in words: "likely OOMKilled (working set 15.80 GiB of 16.00
 * GiB)", "GPU refusals before death", "killed while within GPU and host
 * limits (not an OOM)" or "killed while within GPU limits (host memory not
 * known)"; region.h's rule. And a short code for labels and JSON. */
const char *gg_death_verdict(const struct gg_death *d, char *buf, size_t n);
const char *gg_death_code(const struct gg_death *d);

/* The process's highest live bytes on a device (record "peak"). */
struct gg_peak {
	uint32_t dev;
	uint64_t bytes, ms, live;
};
/* "peak_site": what the library saw live by stack at its peak snapshot. */
struct gg_peak_site {
	uint32_t dev;
	uint64_t st, bytes, at, ms;
};
#define GG_MAX_PEAK_SITES 64

struct gg_dump {
	const char *path;
	/* header */
	uint64_t format, unix_ms, start_unix_ms, pid, stack_depth, history_capacity;
	char *lib, *time, *host, *cmdline, *trigger, *unwinder;
	struct gg_config *config;
	size_t nconfig;
	struct gg_dump_device *devices;
	size_t ndevices;
	/* the failing request */
	int has_request;
	char *req_api, *req_outcome;
	uint64_t req_size, req_tid, req_stack;
	uint32_t req_dev;
	/* host */
	int has_host, has_cg_limit, has_cg_usage, has_cg_oom;
	uint64_t rss, cg_version, cg_limit, cg_usage, cg_oom_kill, pinned_bytes, pinned_allocs;
	int has_cg_inactive; /* cgroup_inactive_file (dumps from 0.2 on) */
	uint64_t cg_inactive_file;
	struct gg_meminfo meminfo[GG_MAX_MEMINFO];
	size_t nmeminfo;
	uint64_t meminfo_count; /* queries in all ("of") */
	struct gg_peak peaks[GPUGUARD_MAX_DEVICES];
	size_t npeaks;
	struct gg_peak_site peak_sites[GG_MAX_PEAK_SITES];
	size_t npeak_sites;
	struct gg_vmm *vmm;
	size_t nvmm, vmm_cap;
	struct gg_dump_pod *pod; /* pod scope: who else holds the budget */
	size_t npod;
	struct gg_death deaths[GG_MAX_DEATHS]; /* the pod's recent deaths, oldest first */
	size_t ndeaths;
	struct gg_alloc *allocs;
	size_t nallocs, allocs_cap;
	struct gg_stack *stacks; /* uthash by id */
	size_t nstacks;
	struct gg_hist *hist;
	size_t nhist, hist_cap;
	/* trailer */
	int has_end;
	uint64_t end_records, suppressed, write_errors;
	uint64_t signal_refused, history_dropped, log_dropped; /* 0 in dumps from before they were written */
	/* The trailer's cut (issue 25, finding 7): has_cut 0 in older dumps;
	 * cut_exact 1 when the live table is the history's last moment. */
	int has_cut;
	uint64_t cut_exact, cut_skew;
	uint64_t lines; /* whole records read */
	int truncated;  /* no trailer, or a partial last line */
	uint64_t skipped_unknown;
};

/* Reads a dump from a file. Returns 0, or -1 with "FILE:LINE: what" in err.
 * Warnings (truncation) go to `warn` (may be NULL) as whole lines. */
int gg_dump_load(struct gg_dump *d, const char *path, FILE *warn, char *err, size_t errlen);
/* The same from memory (the fuzzer's entry point). */
int gg_dump_load_mem(struct gg_dump *d, const char *name, const char *buf, size_t len, FILE *warn, char *err,
                     size_t errlen);
void gg_dump_free(struct gg_dump *d);
const char *gg_api_name(uint64_t api);
struct gg_stack *gg_dump_stack(const struct gg_dump *d, uint64_t id);

/* analyze.c */
struct gg_site {
	uint64_t st;
	uint64_t live_bytes, live_count, oldest_age;
	uint64_t h_alloc_count, h_alloc_bytes, h_free_count, h_free_bytes;
	uint64_t h_first_ms, h_last_ms; /* of its allocations in the history */
	uint64_t h_first_before;        /* all sites' live bytes just before its first one */
	int h_seen;
	UT_hash_handle hh;
};

#define GG_HIST_BUCKETS 48 /* power-of-two size buckets: 2^0 .. 2^47+ */
#define GG_TIMELINE 24     /* time buckets of the usage timeline */

enum gg_diag_kind { GG_D_CEILING, GG_D_DEVICE_FULL, GG_D_FRAGMENTATION, GG_D_LEAK, GG_D_HOST, GG_D_SIZING, GG_D_NONE };

struct gg_diag {
	enum gg_diag_kind kind;
	char title[64];
	char evidence[12][320];
	int nevidence;
	char change[6][320];
	int nchange;
};

struct gg_devstat {
	uint64_t live_bytes, live_count, granted, async_live;
};

struct gg_analysis {
	const struct gg_dump *d;
	struct gg_site *sites; /* uthash by stack id */
	struct gg_site **by_bytes, **by_count;
	size_t nsites;
	uint64_t live_bytes, live_count, granted;
	uint64_t hist_count[GG_HIST_BUCKETS], hist_bytes[GG_HIST_BUCKETS];
	struct gg_devstat dev[GPUGUARD_MAX_DEVICES];
	/* timeline, from the history */
	int has_timeline;
	uint64_t t_start, t_end, baseline, t_peak, t_final;
	/* The timeline and peak view went over the books' own peak (the sum of
	 * the peak records) by this much
	 * and were capped at it: the live table and the history disagree. */
	uint64_t over_books;
	uint64_t t_max[GG_TIMELINE];
	int t_has[GG_TIMELINE];
	uint64_t h_allocs, h_frees, h_refusals, h_alloc_bytes, h_free_bytes, h_max_alloc;
	/* fragmentation */
	uint64_t internal_waste, pool_reserved, pool_used;
	int torch_pattern, torch_frames;
	uint64_t torch_segments, torch_exact; /* exact: 2 MiB or 20 MiB */
	/* VMM reservations: sums, and the largest hole of all */
	uint64_t vmm_reserved, vmm_mapped, vmm_holes, vmm_largest_hole;
	/* How the process sized itself (meminfo records): 0 no evidence,
	 * 1 preallocated a pool as a fraction of what it was told, 2 grew into
	 * the total it was told. Fractions in thousandths. */
	int sizing;
	const struct gg_meminfo *sz_q;                   /* the query it sized itself from */
	uint64_t sz_pool, sz_pool_count, sz_pool_st;     /* mode 1: the pool */
	int sz_of_free;                                  /* mode 1: a fraction of free, not total */
	uint64_t sz_keep, sz_transient, sz_transient_st; /* kept (never freed) vs comes and goes */
	uint64_t sz_refused_demand;                      /* most live + a refused request's size, in the history */
	unsigned sz_cur_pm, sz_new_pm, sz_delta_pm;
	unsigned sz_cmd_pm;  /* the knob's value on the command line, 0 = not there */
	unsigned sz_meas_pm; /* mode 1: the fraction measured (sz_cur_pm: the advice's start) */
	int sz_meas_of_free;
	uint64_t sz_over;                   /* demand beyond the total */
	const char *sz_framework, *sz_knob; /* from the stacks or command; NULL = unknown */
	unsigned sz_knob_default_pm;
	/* What was live at the GPU peak, rebuilt from the live table and the
	 * history (peak record, else the history's highest point). */
	int has_peak_view, peak_in_history;
	int pv_carried; /* the view is the dump's peak_site snapshot, not rebuilt */
	uint32_t pv_dev;
	uint64_t pv_bytes, pv_ms, pv_record_bytes, pv_record_ms;
	struct {
		uint64_t st, bytes;
	} pv_sites[16];
	int npv_sites;
	uint64_t pv_suggest_gib; /* GPUGUARD_LIMIT suggestion from the peak; 0 none */
	char torch_evidence[320];
	struct gg_diag diags[7];
	int frag_first;
	int ndiags;
};

void gg_analyze(struct gg_analysis *a, const struct gg_dump *d);
void gg_analysis_free(struct gg_analysis *a);
uint64_t gg_granted(uint32_t api, uint64_t size);

struct gg_opts {
	int top;    /* call sites shown */
	int frames; /* frames shown per stack in text */
};

/* model.c: the report model. Everything the text, JSON and HTML reports
 * say, worked out once from the analysis (and its diagnoses), so that the
 * three renderers only lay it out and cannot disagree. It refers to the
 * dump's own records (header, devices, request, pod, deaths, configuration,
 * stacks) as read, and holds what is derived from them: the warnings, the
 * tables' rows with their labels, the histogram's rows, the timeline's
 * levels, the peak view, the sizing, the host's working set, the deaths'
 * verdicts. Valid while the dump and the analysis are. docs/report.md. */

/* The report's warnings on the dump itself, in the order text gives them. */
enum gg_warn_kind {
	GG_W_TRUNCATED,       /* no end trailer: figures cover the records read */
	GG_W_SUPPRESSED,      /* n later dumps suppressed, n2 write errors */
	GG_W_SIGNAL_REFUSED,  /* n allocations refused inside signal handlers */
	GG_W_HISTORY_DROPPED, /* n history events lost: the timeline has gaps */
	GG_W_CUT_SKEW,        /* the live table is n events off one moment */
	GG_W_OVER_BOOKS,      /* the rebuilt views climbed n bytes past the books */
	GG_W_LOG_DROPPED,     /* n log lines over the library's rate limit */
};
struct gg_mwarn {
	enum gg_warn_kind kind;
	uint64_t n, n2;
};

/* A stack as a row shows it: its id, and its record (NULL when the id is 0
 * or the dump lacks the record). */
struct gg_mstack {
	uint64_t id;
	const struct gg_stack *s;
};

/* A row of a call-site table. */
struct gg_msite {
	const struct gg_site *site;
	struct gg_mstack stack;
	char label[320]; /* gg_stack_label */
};

struct gg_mdev {
	const struct gg_dump_device *rec;
	uint64_t live_in_dump, granted_in_dump; /* the live table's, on this device */
	int has_fill;                           /* a ceiling to be a fraction of */
	uint64_t fill_pct;                      /* charged of it, in percent */
	unsigned fill_bar;                      /* and in 40ths, at most 40 */
	uint64_t scale;                         /* a bar's full length: the ceiling, else the peak or the card */
};

struct gg_mbucket { /* a power-of-two bucket of live sizes, >= min */
	uint64_t min, count, bytes;
};

struct gg_mpv { /* a call site of the peak view */
	uint64_t bytes;
	struct gg_mstack stack;
	char label[320];
};

struct gg_mflame { /* a stack of the flame graph, with its live bytes */
	uint64_t bytes;
	struct gg_mstack stack;
};

struct gg_mlive { /* a live call site: its stack, live bytes and records */
	uint64_t bytes, count;
	struct gg_mstack stack;
};

struct gg_mdeath {
	const struct gg_death *rec;
	char verdict[160]; /* gg_death_verdict */
	const char *code;  /* gg_death_code */
	char found[32];    /* found dead, ISO 8601 UTC, or "at an unknown time" */
};

struct gg_model {
	const struct gg_dump *d; /* the header, request, host and configuration records, as read */
	struct gg_opts o;
	struct gg_mwarn warn[8];
	int nwarn;
	const struct gg_diag *diag; /* the diagnoses, in order */
	int ndiag;
	struct gg_mdev *dev; /* one per device record, in the dump's order */
	size_t ndev;
	struct gg_mstack req_stack;            /* the failing request's (d->has_request) */
	const struct gg_dump_pod **pod_sorted; /* by device, then largest first; NULL: none */
	size_t npod;                           /* pod records; d->pod has them in the dump's order */
	/* live call sites: the first `shown` of each order (o.top) */
	size_t nsites, shown;
	uint64_t live_bytes, live_count;
	struct gg_msite *by_bytes, *by_count;
	struct gg_mflame *flame; /* the flame graph's stacks: the first 500 by live bytes */
	size_t nflame;
	/* every call site, by live bytes (ties: the analysis's order), for
	 * --folded, --speedscope and --diff */
	struct gg_mlive *live;
	size_t nlive;
	struct gg_mbucket hist[GG_HIST_BUCKETS]; /* the buckets that hold any */
	int nhist;
	uint64_t hist_max; /* the fullest bucket's count (at least 1) */
	struct {
		uint64_t requested, granted, waste, pool_reserved, pool_used, pool_slack;
		int torch_frames, torch_pattern;
		uint64_t torch_segments;
		const char *torch_evidence;
		size_t nvmm; /* reservations; 0: the dump has none */
		uint64_t vmm_reserved, vmm_mapped, vmm_holes, vmm_largest_hole;
	} frag;
	struct {
		int has; /* a history to draw */
		uint64_t start_ms, end_ms, allocs, frees, refusals, start_bytes, peak_bytes, end_bytes;
		char wall_start[32], wall_end[32]; /* gg_wall_ms */
		int bucket_has[GG_TIMELINE];       /* events in the bucket */
		uint64_t bucket_max[GG_TIMELINE];  /* its highest level */
		uint64_t level[GG_TIMELINE];       /* drawn: the highest, else the level carried over */
		/* the chart's scale: the peak, or the ceiling or pod's use when
		 * they are near enough to show; the device they come from */
		uint64_t chart_top;
		const struct gg_dump_device *chart_dev;
		int chart_ceiling; /* the ceiling is on the chart */
	} tl;
	struct {
		int has, carried, in_history;
		int at_dump; /* no history to go back in: the view is the dump's moment */
		uint32_t dev;
		uint64_t bytes, ms, record_bytes, record_ms;
		uint64_t suggest_gib; /* 0: none */
		int show_suggest;     /* suggested beside the view (not when it sizes itself) */
		struct gg_mpv site[16];
		int nsite;
	} peak;
	struct {
		int mode; /* 0 none, 1 preallocates, 2 grows into the total */
		const struct gg_meminfo *q;
		int of_free, measured_of_free;
		unsigned now_pm, lower_by_pm, advised_pm, measured_pm, cmdline_pm;
		const char *framework, *knob;
	} sizing;
	struct {
		int has_ws;  /* usage and inactive page cache both read */
		uint64_t ws; /* the working set: usage less inactive page cache */
	} host;
	struct gg_mdeath *death; /* in the dump's order, oldest first */
	size_t ndeath;
};
/* 0, or -1 when out of memory (m is then freed). */
int gg_model_build(struct gg_model *m, const struct gg_analysis *a, const struct gg_opts *o);
void gg_model_free(struct gg_model *m);
const char *gg_diag_key(enum gg_diag_kind kind); /* "ceiling_reached", ... */

/* output.c: the renderers of the model: text, JSON, the folded and
 * speedscope views, and the diff of two. */
void gg_report_text(FILE *f, const struct gg_model *m);
void gg_report_json(FILE *f, const struct gg_model *m);
void gg_report_folded(FILE *f, const struct gg_model *m);
void gg_report_speedscope(FILE *f, const struct gg_model *m); /* speedscope JSON, unit bytes */
/* torch.c: the pickle torch.cuda.memory._dump_snapshot writes (0, or -1 on a
 * write error). */
int gg_report_torch_snapshot(FILE *f, const struct gg_analysis *a);
void gg_report_diff(FILE *f, const struct gg_model *old, const struct gg_model *new_, int json);
void gg_stack_label(const struct gg_dump *d, uint64_t st, char *out, size_t outlen);

/* html.c: the HTML renderer of the model. */
int gg_report_html(FILE *f, const struct gg_model *m);

/* region.c: the pod region as read, every field copied out of the file and
 * made safe to print (strings escaped, states folded). Fixed size: the file's
 * tables are. */
#define GG_REGION_DEVICES 16                            /* GPUGUARD_REGION_DEVICES */
#define GG_REGION_PROCS 256                             /* GPUGUARD_REGION_PROCS */
#define GG_REGION_TEXT 520                              /* an escaped string: 128 bytes as \xNN, plus NUL */
#define GG_REGION_PATH 1024                             /* bytes of the path shown; its escaped form is 4x */
#define GG_REGION_NAME_TEXT 253                         /* an escaped Kubernetes name: 63 bytes as \xNN, plus NUL */
#define GG_REGION_ERR (4 * GG_REGION_PATH + GG_MAX_ERR) /* "PATH: reason" */

enum gg_liveness { GG_LIVE_UNKNOWN, GG_LIVE_YES, GG_LIVE_EXITED };

struct gg_rdev {
	unsigned index;   /* entry in the region (no label: another pod numbers it otherwise) */
	const char *kind; /* "CUDA", "HIP", "ordinal", "unknown" */
	char uuid[48];    /* GPU-8-4-4-4-12, HIP-..., ordinal-N, unknown-<hex> */
	int has_limit;    /* limit != UINT64_MAX */
	uint64_t limit, used, peak, physical, refused, reclaimed;
	uint32_t waiters;
	uint64_t wait_ns;    /* time requests of the pod spent waiting for memory */
	uint64_t driver_oom; /* requests the driver refused below the ceiling */
	/* issue 22: the runtime category (what the driver holds for the
	 * members beyond their allocations, part of used) and what NVML says
	 * the card reserves (0 = not known: an older library) */
	uint64_t runtime, card_reserved;
};

struct gg_rproc {
	unsigned slot;
	uint32_t pid;
	uint64_t start_ms;
	char comm[64]; /* at most 15 bytes of the file's, non-printables as \xNN */
	enum gg_liveness live;
	uint64_t used[GG_REGION_DEVICES]; /* by entry index */
	/* its last host sample (the obituary in waiting; has_host when one
	 * was taken): the cgroup's working set (ws_known: inactive_file was
	 * read), usage and limit; and its refused requests */
	int has_host, ws_known;
	uint64_t host_ws, host_usage, host_limit;
	uint32_t refused;
	char container[GG_REGION_NAME_TEXT]; /* its container's name; "" = not known */
	int has_pinned;                      /* host_pinned is known (not a region an older library wrote) */
	uint64_t host_pinned;                /* pinned host memory it holds */
};

struct gg_region {
	char path[4 * GG_REGION_PATH + 1]; /* escaped, for display and labels */
	char limit[GG_REGION_TEXT];        /* GPUGUARD_LIMIT that set the budget; "" = none */
	uint64_t created_ms;
	uint64_t dumps_written; /* allocation dumps the pod's processes wrote */
	/* the pod's namespace and name, as its processes wrote them
	 * (GPUGUARD_POD_NAMESPACE, GPUGUARD_POD_NAME); "" = not known */
	char pod_namespace[GG_REGION_NAME_TEXT], pod_name[GG_REGION_NAME_TEXT];
	struct gg_rdev dev[GG_REGION_DEVICES]; /* READY entries only, by index */
	unsigned ndev;
	struct gg_rproc proc[GG_REGION_PROCS]; /* LIVE slots only, by slot */
	unsigned nproc, nlive, nexited, nunknown;
	struct gg_death death[GG_MAX_DEATHS]; /* the deaths ring, oldest first */
	unsigned ndeath;
	/* exited slots not yet swept, with the record they left (top only) */
	struct gg_death pending[GG_MAX_DEATHS];
	unsigned npending;
};

/* The region path: opt (--region) if set, else $GPUGUARD_SHARED, else the
 * default. */
const char *gg_region_path(const char *opt);
/* Reads and validates the file at path (no symlink, a regular file, read in
 * full, never mapped) and probes each process's liveness lock. 0, or -1 with
 * a one-line "PATH: reason" in err. */
int gg_region_read(struct gg_region *r, const char *path, char *err, size_t errlen);
/* Why a read failed, from a closed set: the reason label of
 * gpuguard_region_error and gpuguard_discovery_errors, whose values must
 * stay few (a label's values are series), never the free text of err. */
enum gg_read_why {
	GG_READ_OK,
	GG_READ_MISSING,     /* ENOENT, ENOTDIR: nothing there (yet) */
	GG_READ_PERMISSION,  /* EACCES, EPERM: the identity we run as may not read it */
	GG_READ_SYMLINK,     /* a symbolic link, never followed */
	GG_READ_NOT_REGULAR, /* a directory, FIFO, device... */
	GG_READ_INVALID,     /* read, but not a region this command reads */
	GG_READ_IO,          /* EIO */
	GG_READ_OTHER,       /* anything else (out of memory, an errno not above) */
};
int gg_region_read_why(struct gg_region *r, const char *path, char *err, size_t errlen, enum gg_read_why *why);
const char *gg_read_why_label(enum gg_read_why why); /* "missing", "permission", ... "other" */
enum gg_read_why gg_read_why_errno(int e);
/* The same from an image of len bytes (8-byte aligned). lock_fd: the open
 * region file to probe liveness locks on, or -1 (liveness unknown). */
int gg_region_parse(struct gg_region *r, const char *path, void *buf, size_t len, int lock_fd, char *err,
                    size_t errlen);

/* fmt.c: the shared formatting (a leaf above text.c). */
const char *gg_bytes(uint64_t v, char buf[32]); /* "1.50 GiB" */
/* Copies at most max bytes of s (stopping at a NUL) into out, printable
 * ASCII as is and anything else as \xNN; out holds 4 * max + 1 bytes. */
void gg_escape_bytes(char *out, const char *s, size_t max);
void gg_json_str(FILE *f, const char *s);                     /* a JSON string, or "" for NULL */
const char *gg_fraction(unsigned pm, char buf[16]);           /* thousandths as "0.85" */
unsigned long long gg_percent(uint64_t part, uint64_t whole); /* whole percent, 0 of 0 */
/* Wall-clock time (UTC) ms after start_unix_ms, "12:34:56.789Z" (or "?"
 * when the start is not known), to line a report up with dashboards. */
const char *gg_wall_ms(uint64_t start_unix_ms, uint64_t ms, char buf[32]);

/* text.c: output safety. Terminal text (reports, top, folded stacks, every
 * message) passes printable ASCII and well-formed UTF-8 above U+009F; C0
 * controls, DEL, C1 controls (U+0080..U+009F) and bytes that are not UTF-8
 * print as '?', one per character. */
/* The character at p (p < end): its length, *safe = 0 for one of the above. */
size_t gg_text_next(const char *p, const char *end, int *safe);
void gg_put_text(FILE *f, const char *s);
void gg_put_textn(FILE *f, const char *s, size_t len);
void gg_text_copy(char *out, size_t outlen, const char *s); /* filtered, never half a character */
/* "gpuguard: error: MSG\n" on stderr, MSG filtered as above. */
void gg_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gg_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gg_note(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* "gpuguard: MSG" */

/* A file the command reads (a dump, the pod region): opened with
 * O_NONBLOCK, so that a FIFO or a device planted at the path cannot hang
 * the command, and kept only when it is a regular file; reads on the
 * descriptor block again. nofollow: a symbolic link is refused too (the
 * region, whose path other users may write). shown is the path as
 * messages print it. The descriptor, or -1 with "SHOWN: why" in err and
 * errno as open left it (0 for a file that is not regular). */
int gg_infile_open(const char *path, const char *shown, int nofollow, char *err, size_t errlen);

/* A file the command writes (report --html): created under a hidden
 * temporary name beside path (O_CREAT|O_EXCL|O_NOFOLLOW, 0666 & ~umask),
 * renamed over path by commit. Refused, with path untouched, when path is a
 * symlink or anything but a regular file we may write. -1 with "PATH: why". */
struct gg_outfile {
	FILE *f;
	const char *path;
	char *tmp;
};
int gg_outfile_open(struct gg_outfile *o, const char *path, char *err, size_t errlen);
int gg_outfile_commit(struct gg_outfile *o, char *err, size_t errlen);
void gg_outfile_abort(struct gg_outfile *o); /* removes the temporary */

/* top.c */
void gg_top_render(FILE *f, const struct gg_region *r, uint64_t now_ms);
/* The refreshing table until SIGINT/SIGTERM; once: one table, no ANSI. */
int gg_top_run(const char *path, uint64_t interval_ms, int once);
/* metrics.c and http.c: `gpuguard metrics`: to stdout, or served at listen (ADDR:PORT) with a
 * per-connection deadline and at most max_conns connections open (a new
 * one past that closes the oldest unanswered), until SIGINT/SIGTERM. */
#define GG_HTTP_MAX_CONNS 1024 /* --max-connections default */
#define GG_HTTP_CONNS_LIMIT 4096
void gg_metrics_render(FILE *f, const struct gg_region *r);
int gg_metrics_print(const char *path);
int gg_metrics_serve(const char *path, const char *listen, uint64_t timeout_ms, int max_conns);
/* discover.c: every pod region under the kubelet's pods directory root,
 * each series labelled pod_uid, families merged. 0, or -1 with err. */
int gg_metrics_discover(FILE *out, const char *root, char *err, size_t errlen, enum gg_read_why *why);
/* After gg_metrics_discover: the node's cards (issue 22) as text, one line
 * each: memory, the pods' ceilings and footprints summed, and whether the
 * ceilings overcommit it or the footprints pass it. */
void gg_cards_render_text(FILE *f);
/* --discover: serve gg_metrics_discover of root instead of one region. */
extern const char *gg_metrics_discover_root;

#endif
