/* gpuguard: what the dump's files share. dump.c: the triggers and the
 * writer thread, and one dump from start to finish; dump_json.c: the JSON
 * writer (an mmap'd buffer and hand-rolled formatting, no malloc);
 * dump_records.c: the records, their keys from gpuguard/schema.h;
 * dump_host.c: the host probes (declared in internal.h, which the pod's
 * obituaries use too). */
#ifndef GPUGUARD_DUMP_WRITE_H
#define GPUGUARD_DUMP_WRITE_H

#include <string.h>
#include <sys/mman.h>

#include "gpuguard/schema.h"
#include "internal.h"

/* A failure dump's request, filled on the failing thread. */
struct gg_dump_req {
	int valid;
	int dev;
	enum gpuguard_api api;
	uint64_t size;
	uint32_t tid, stack;
	int driver_oom;
	int have_meminfo; /* driver_free/driver_total for dev, asked on the failing thread */
	uint64_t driver_free, driver_total;
	uint64_t cut; /* gg_history_head() just after the refusal's own event */
};

/* What a dump says about memory, copied at one moment (issue 25, finding
 * 7): the books of every device, the peaks, the live table and the
 * history, copied first thing by the writer (a refusing thread waits for
 * this copy only), then put back to the cut's moment event by event: a
 * record whose first event since the cut is its allocation came later, one
 * whose first event is its free was live then. The history ends at the
 * cut. dump.c takes it, dump_records.c writes from it. */
struct gg_dump_cut {
	uint64_t seq;     /* history events before the cut */
	uint64_t through; /* events claimed when the table copy ended */
	int exact;        /* every event since the cut was read and applied */
	int stream;       /* too many records to copy: written from the table as it is walked */
	uint64_t skew;    /* events after the cut that the copy overlapped */
	struct gpuguard_device_stats dev[GG_MAX_DEVICES];
	uint64_t peak[GG_MAX_DEVICES], peak_ms[GG_MAX_DEVICES], live[GG_MAX_DEVICES];
	struct gg_record *recs; /* mmap'd, kept from dump to dump */
	size_t nrecs, cap;
	struct gg_hist_event *ev; /* the history, trimmed to the cut */
	uint64_t nev;
};

/* ---- dump_json.c ---- */
#define GG_OUT_CAP (4u << 20)
struct gg_out {
	int fd;
	int err; /* first errno, 0 if none */
	char *buf;
	size_t len;
	uint64_t records;
	uint64_t bytes; /* written so far */
};

void gg_out_flush(struct gg_out *o);
/* A JSON string: quotes, backslashes and control characters escaped; valid
 * UTF-8 kept; any other byte written as \u00XX, so the line stays valid
 * JSON whatever the input (a command line can hold anything). */
void gg_out_json_n(struct gg_out *o, const char *s, size_t n);

static inline void gg_out_need(struct gg_out *o, size_t n)
{
	if (o->len + n > GG_OUT_CAP)
		gg_out_flush(o);
}

static inline void gg_out_mem(struct gg_out *o, const char *s, size_t n)
{
	if (n > GG_OUT_CAP / 2) { /* never: every piece is small */
		gg_out_flush(o);
		return;
	}
	gg_out_need(o, n);
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

#define GG_OUT_LIT(o, s) gg_out_mem(o, s, sizeof(s) - 1)

static inline void gg_out_u64(struct gg_out *o, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[23 - n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	gg_out_mem(o, tmp + 24 - n, (size_t)n);
}

static inline void gg_out_i64(struct gg_out *o, int64_t v)
{
	if (v < 0) {
		GG_OUT_LIT(o, "-");
		gg_out_u64(o, (uint64_t)0 - (uint64_t)v);
	} else {
		gg_out_u64(o, (uint64_t)v);
	}
}

/* v in hex, quoted: an address or handle ("7f0000200000"), as a string so
 * that readers parsing numbers as doubles keep all 64 bits. */
static inline void gg_out_hex_str(struct gg_out *o, uint64_t v)
{
	static const char dig[] = "0123456789abcdef";
	char tmp[18];
	int n = 0;
	tmp[17] = '"';
	do {
		tmp[16 - n++] = dig[v & 15];
		v >>= 4;
	} while (v);
	tmp[16 - n] = '"';
	gg_out_mem(o, tmp + 16 - n, (size_t)n + 2);
}

/* {"t":"name" opening record t, and ,"key": before key k's value: the
 * text comes from the one list (gpuguard/schema.h), and a key that is not
 * in it for that record does not compile. KEY_FIRST: a key opening an
 * object of its own (a stack's frame), without the comma. */
#define GG_OUT_REC(o, t) \
	gg_out_mem(o, gpuguard_dump_records[GPUGUARD_DR_##t].open, gpuguard_dump_records[GPUGUARD_DR_##t].open_len)
#define GG_OUT_KEY(o, t, k)                                           \
	gg_out_mem(o, gpuguard_dump_keys[GPUGUARD_DK_##t##_##k].json, \
	           gpuguard_dump_keys[GPUGUARD_DK_##t##_##k].json_len)
/* Key k of record t and its number: the pair most records are made of. */
#define GG_OUT_U64(o, t, k, v)       \
	do {                         \
		GG_OUT_KEY(o, t, k); \
		gg_out_u64(o, v);    \
	} while (0)
#define GG_OUT_KEY_FIRST(o, t, k)                                         \
	gg_out_mem(o, gpuguard_dump_keys[GPUGUARD_DK_##t##_##k].json + 1, \
	           gpuguard_dump_keys[GPUGUARD_DK_##t##_##k].json_len - 1u)

static inline void gg_out_u64_or_null(struct gg_out *o, int known, uint64_t v)
{
	if (known)
		gg_out_u64(o, v);
	else
		GG_OUT_LIT(o, "null");
}

static inline void gg_out_json(struct gg_out *o, const char *s)
{
	gg_out_json_n(o, s, strlen(s));
}

static inline void gg_out_end_record(struct gg_out *o)
{
	GG_OUT_LIT(o, "}\n");
	o->records++;
}

static inline void *gg_dump_map_once(void **slot, size_t size)
{
	if (!*slot) {
		void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		*slot = m == MAP_FAILED ? NULL : m;
	}
	return *slot;
}

/* ---- dump_records.c: one function per record type, in file order ---- */
const char *gg_dump_trigger_name(enum gg_dump_trigger trig);
const char *gg_dump_api_name(unsigned api);
/* host: the hostname written in the header. */
void gg_dump_rec_header(struct gg_out *o, enum gg_dump_trigger trig, uint64_t unix_ms, uint64_t since_start,
                        const char *host);
void gg_dump_rec_config(struct gg_out *o);
void gg_dump_rec_devices(struct gg_out *o, const struct gg_dump_req *req, const struct gg_dump_cut *c);
void gg_dump_rec_pod_one(const struct gg_pod_use *u, void *arg); /* arg: the struct gg_out */
void gg_dump_rec_deaths(struct gg_out *o);
void gg_dump_rec_request(struct gg_out *o, const struct gg_dump_req *r);
void gg_dump_rec_host(struct gg_out *o, _Atomic int64_t *pinned_bytes, _Atomic int64_t *pinned_count);
void gg_dump_rec_meminfo(struct gg_out *o);
void gg_dump_rec_peaks(struct gg_out *o, const struct gg_dump_cut *c);
void gg_dump_rec_vmm_one(const struct gg_vmm_info *v, void *arg); /* arg: the struct gg_out */
/* One record per live allocation; now: the clock reading ages are from. */
void gg_dump_rec_allocs(struct gg_out *o, uint64_t now, const struct gg_dump_cut *c);
/* The table's key of a history event's pointer (its namespace from the api). */
uint64_t gg_dump_event_key(uint64_t p, unsigned api);
/* The stack ids this dump references, one bit each: emptied at the start
 * of each dump, marked by the records that name a stack, written out by
 * gg_dump_rec_stacks. */
void gg_dump_stacks_reset(void);
void gg_dump_mark_stack(uint32_t id);
void gg_dump_rec_stacks(struct gg_out *o);
void gg_dump_rec_history(struct gg_out *o, const struct gg_hist_event *ev, uint64_t n);
/* The trailer: records counts every line before it. */
void gg_dump_rec_end(struct gg_out *o, uint64_t suppressed, uint64_t write_errors, const struct gg_dump_cut *c);

#endif
