/* gpuguard command: `report --torch-snapshot FILE` (issue 27). Writes a dump
 * as the pickle torch.cuda.memory._dump_snapshot writes, so PyTorch users
 * open a gpuguard dump in the viewer they know (pytorch.org/memory_viz,
 * python -m torch.cuda._memory_viz): a dict of "segments" (one per live
 * allocation, holding one active block) and "device_traces" (one list per
 * device, from the history), with frames as {filename, line, name}. The
 * pickle is protocol 2, written by hand (dicts, lists, str, int, bool). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tool.h"

#define MB 1048576ull

static void op(FILE *f, int c)
{
	fputc(c, f);
}

static void p_str(FILE *f, const char *s)
{
	uint32_t n = (uint32_t)strlen(s);
	op(f, 'X'); /* BINUNICODE: 4-byte little-endian length, UTF-8 */
	for (int i = 0; i < 4; i++)
		fputc((int)((n >> (8 * i)) & 0xff), f);
	fwrite(s, 1, n, f);
}

static void p_int(FILE *f, uint64_t v)
{
	if (v < 0x80000000ull) { /* BININT: 4-byte signed little-endian */
		op(f, 'J');
		for (int i = 0; i < 4; i++)
			fputc((int)((v >> (8 * i)) & 0xff), f);
		return;
	}
	/* LONG1: a length byte, then two's complement little-endian; one
	 * more byte when the top bit would read as a sign. */
	int n = 0;
	uint64_t t = v;
	while (t) {
		n++;
		t >>= 8;
	}
	int extra = (v >> (8 * n - 1)) & 1;
	op(f, 0x8a);
	fputc(n + extra, f);
	for (int i = 0; i < n; i++)
		fputc((int)((v >> (8 * i)) & 0xff), f);
	if (extra)
		fputc(0, f);
}

static void key_str(FILE *f, const char *k, const char *v)
{
	p_str(f, k);
	p_str(f, v);
}

static void key_int(FILE *f, const char *k, uint64_t v)
{
	p_str(f, k);
	p_int(f, v);
}

/* A stack as torch's frames, innermost first: a Python frame as its file,
 * line and function; a native one as its module, line 0 and its symbol
 * (or module+offset). */
static void p_frames(FILE *f, const struct gg_dump *d, uint64_t st)
{
	const struct gg_stack *s = st ? gg_dump_stack(d, st) : NULL;
	op(f, ']');
	if (!s || !s->nframes)
		return;
	op(f, '(');
	for (uint32_t i = 0; i < s->nframes; i++) {
		const struct gg_frame *fr = &s->frames[i];
		char nat[512];
		op(f, '}');
		op(f, '(');
		if (fr->py) {
			key_str(f, "filename", fr->py);
			key_int(f, "line", fr->line);
			key_str(f, "name", fr->s ? fr->s : "?");
		} else {
			snprintf(nat, sizeof nat, "%s+0x%s", fr->m, fr->o);
			key_str(f, "filename", fr->m);
			key_int(f, "line", 0);
			key_str(f, "name", fr->s ? fr->s : nat);
		}
		op(f, 'u'); /* SETITEMS */
	}
	op(f, 'e'); /* APPENDS */
}

static void p_trace(FILE *f, const struct gg_dump *d, const char *action, const struct gg_hist *h)
{
	op(f, '}');
	op(f, '(');
	key_str(f, "action", action);
	key_int(f, "addr", h->addr);
	key_int(f, "size", h->size);
	key_int(f, "stream", 0);
	key_int(f, "time_us", h->ms * 1000);
	if (h->op == 'r')
		key_int(f, "device_free", 0);
	p_str(f, "frames");
	p_frames(f, d, h->st);
	op(f, 'u');
}

int gg_report_torch_snapshot(FILE *f, const struct gg_analysis *a)
{
	const struct gg_dump *d = a->d;
	uint32_t ndev = 1;
	for (size_t i = 0; i < d->nallocs; i++)
		if (d->allocs[i].dev + 1 > ndev)
			ndev = d->allocs[i].dev + 1;
	for (size_t i = 0; i < d->nhist; i++)
		if (d->hist[i].dev + 1 > ndev)
			ndev = d->hist[i].dev + 1;
	op(f, 0x80); /* PROTO 2 */
	op(f, 2);
	op(f, '}');
	op(f, '(');
	/* segments: each live allocation is a segment of one active block
	 * (gpuguard sees the driver's allocations, not the tensors a caching
	 * allocator carves out of them). */
	p_str(f, "segments");
	op(f, ']');
	if (d->nallocs) {
		op(f, '(');
		for (size_t i = 0; i < d->nallocs; i++) {
			const struct gg_alloc *al = &d->allocs[i];
			op(f, '}');
			op(f, '(');
			key_int(f, "device", al->dev);
			key_int(f, "address", al->addr);
			key_int(f, "total_size", al->size);
			key_int(f, "allocated_size", al->size);
			key_int(f, "active_size", al->size);
			key_int(f, "requested_size", al->size);
			key_int(f, "stream", 0);
			key_str(f, "segment_type", al->size > MB ? "large" : "small");
			p_str(f, "segment_pool_id");
			p_int(f, 0);
			p_int(f, 0);
			op(f, 0x86); /* TUPLE2 */
			p_str(f, "is_expandable");
			op(f, 0x89); /* NEWFALSE */
			p_str(f, "frames");
			p_frames(f, d, al->st);
			p_str(f, "blocks");
			op(f, ']');
			op(f, '(');
			op(f, '}');
			op(f, '(');
			key_int(f, "address", al->addr);
			key_int(f, "size", al->size);
			key_int(f, "requested_size", al->size);
			key_str(f, "state", "active_allocated");
			p_str(f, "frames");
			p_frames(f, d, al->st);
			op(f, 'u');
			op(f, 'e');
			op(f, 'u');
		}
		op(f, 'e');
	}
	/* device_traces: the history, oldest first, per device; each
	 * allocation is a segment and its one block. */
	p_str(f, "device_traces");
	op(f, ']');
	op(f, '(');
	for (uint32_t dev = 0; dev < ndev; dev++) {
		op(f, ']');
		int any = 0;
		for (size_t i = 0; i < d->nhist; i++) {
			const struct gg_hist *h = &d->hist[i];
			if (h->dev != dev)
				continue;
			if (!any)
				op(f, '(');
			any = 1;
			if (h->op == 'a') {
				p_trace(f, d, "segment_alloc", h);
				p_trace(f, d, "alloc", h);
			} else if (h->op == 'f') {
				p_trace(f, d, "free_requested", h);
				p_trace(f, d, "free_completed", h);
				p_trace(f, d, "segment_free", h);
			} else
				p_trace(f, d, "oom", h);
		}
		if (any)
			op(f, 'e');
	}
	op(f, 'e');
	p_str(f, "allocator_settings");
	op(f, '}');
	op(f, 'u');
	op(f, '.'); /* STOP */
	return ferror(f) ? -1 : 0;
}
