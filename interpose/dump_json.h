/* gpuguard: the dump's JSON writer (dump_json.c): an mmap'd buffer and
 * hand-rolled formatting, no malloc. The inline writers below call only
 * dump_json.c's flush and escape, their own slow paths. */
#ifndef GG_DUMP_JSON_H
#define GG_DUMP_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "gpuguard/schema.h"

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

#endif
