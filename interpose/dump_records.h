/* gpuguard: the dump's records (dump_records.c), one function per record
 * type, their keys from gpuguard/schema.h; and what a dump says, which
 * dump.c takes and these write from. */
#ifndef GG_DUMP_RECORDS_H
#define GG_DUMP_RECORDS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "dump_json.h"
#include "history.h"
#include "shared.h"
#include "table.h"
#include "vmm.h"

enum gg_dump_trigger { GG_DUMP_CEILING, GG_DUMP_DRIVER_OOM, GG_DUMP_SIGNAL, GG_DUMP_EXIT };

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
