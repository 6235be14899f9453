/* gpuguard: the lifetime of VMM physical memory (cuMemCreate, hipMemCreate),
 * as the driver keeps it: a handle's memory lives while it has a reference
 * (create gives one, retain adds one, each release drops one) or a mapping,
 * and goes at whichever of the last release and the last unmap comes second
 * (DESIGN.md §2, REAL-CUDA.md §5). The charge is refunded exactly there. */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "handles.h"
#include "account.h"
#include "base.h"
#include "log.h"
#include "table.h"
#include "vmm.h"

/* Open addressing with linear probing and backward-shift deletion, keyed by
 * a non-zero 64-bit value; both maps are mmap'd on first use (MAP_NORESERVE:
 * untouched pages cost nothing). Full maps fall back to the pre-lifetime
 * rule, see gg_handle_release_begin. */
#define H_SLOTS (1u << 16) /* handles */
#define M_SLOTS (1u << 17) /* mappings (PyTorch expandable segments: one per 2 or 20 MiB chunk) */

struct hent {
	uint64_t h; /* 0 = empty */
	uint32_t refs, maps;
	uint32_t flags; /* GG_HANDLE_* */
};
struct ment {
	uint64_t va; /* 0 = empty */
	uint64_t size, h;
};

static struct hent *htab;
static struct ment *mtab;
static uint32_t hcount, mcount;
/* Guards both maps. Taken by the VMM hooks before and after their driver
 * call, never across one, and nothing else is locked inside it except the
 * lock-free allocation table: it cannot join a cycle with a driver lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static void after_fork_child(void);

static int maps_ready_locked(void)
{
	if (GG_LIKELY(htab && mtab))
		return 1;
	/* Registered here, with the first map, so the core's unit tests (which
	 * do not link this file) keep their own fork handler list. */
	static int atfork_done;
	if (!atfork_done && pthread_atfork(NULL, NULL, after_fork_child) == 0)
		atfork_done = 1;
	if (!htab) {
		void *m = mmap(NULL, H_SLOTS * sizeof(struct hent), PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED)
			return 0;
		htab = m;
	}
	if (!mtab) {
		void *m = mmap(NULL, M_SLOTS * sizeof(struct ment), PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED)
			return 0;
		mtab = m;
	}
	return 1;
}

static struct hent *hfind_locked(uint64_t h)
{
	if (!htab || h == 0)
		return NULL;
	for (uint32_t i = (uint32_t)mix(h) & (H_SLOTS - 1);; i = (i + 1) & (H_SLOTS - 1)) {
		if (htab[i].h == h)
			return &htab[i];
		if (htab[i].h == 0)
			return NULL;
	}
}

static struct hent *hadd_locked(uint64_t h)
{
	if (h == 0 || !maps_ready_locked() || hcount >= H_SLOTS * 3 / 4)
		return NULL;
	uint32_t i = (uint32_t)mix(h) & (H_SLOTS - 1);
	while (htab[i].h != 0 && htab[i].h != h)
		i = (i + 1) & (H_SLOTS - 1);
	if (htab[i].h == 0)
		hcount++;
	htab[i] = (struct hent){.h = h};
	return &htab[i];
}

static void hdel_locked(struct hent *e)
{
	uint32_t i = (uint32_t)(e - htab);
	hcount--;
	/* Backward shift: pull each later entry of the run into the hole if its
	 * home slot is not between the hole and where it sits. */
	for (uint32_t j = (i + 1) & (H_SLOTS - 1); htab[j].h != 0; j = (j + 1) & (H_SLOTS - 1)) {
		uint32_t home = (uint32_t)mix(htab[j].h) & (H_SLOTS - 1);
		if (((j - home) & (H_SLOTS - 1)) >= ((j - i) & (H_SLOTS - 1))) {
			htab[i] = htab[j];
			i = j;
		}
	}
	htab[i].h = 0;
}

static struct ment *mfind_locked(uint64_t va)
{
	if (!mtab || va == 0)
		return NULL;
	for (uint32_t i = (uint32_t)mix(va) & (M_SLOTS - 1);; i = (i + 1) & (M_SLOTS - 1)) {
		if (mtab[i].va == va)
			return &mtab[i];
		if (mtab[i].va == 0)
			return NULL;
	}
}

static int madd_locked(uint64_t va, uint64_t size, uint64_t h)
{
	if (va == 0 || !maps_ready_locked() || mcount >= M_SLOTS * 3 / 4)
		return -1;
	uint32_t i = (uint32_t)mix(va) & (M_SLOTS - 1);
	while (mtab[i].va != 0 && mtab[i].va != va)
		i = (i + 1) & (M_SLOTS - 1);
	if (mtab[i].va == 0)
		mcount++;
	mtab[i] = (struct ment){va, size, h};
	return 0;
}

static void mdel_locked(struct ment *e)
{
	uint32_t i = (uint32_t)(e - mtab);
	mcount--;
	for (uint32_t j = (i + 1) & (M_SLOTS - 1); mtab[j].va != 0; j = (j + 1) & (M_SLOTS - 1)) {
		uint32_t home = (uint32_t)mix(mtab[j].va) & (M_SLOTS - 1);
		if (((j - home) & (M_SLOTS - 1)) >= ((j - i) & (M_SLOTS - 1))) {
			mtab[i] = mtab[j];
			i = j;
		}
	}
	mtab[i].va = 0;
}

/* ---- the operation record ---------------------------------------------- */

static int op_push(struct gg_vmm_op *op, const struct gg_vmm_item *it)
{
	if (op->n == op->cap) {
		/* More than the inline items (an unmap over many mappings): grow
		 * with mmap, never libc malloc, off the common path. */
		size_t cap = op->cap * 4, bytes = cap * sizeof(*it);
		struct gg_vmm_item *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return -1;
		memcpy(m, op->items, op->n * sizeof(*it));
		if (op->items != op->inl)
			munmap(op->items, op->map_bytes);
		op->items = m;
		op->map_bytes = bytes;
		op->cap = cap;
	}
	op->items[op->n++] = *it;
	return 0;
}

static void op_init(struct gg_vmm_op *op)
{
	op->n = 0;
	op->cap = sizeof(op->inl) / sizeof(op->inl[0]);
	op->items = op->inl;
	op->map_bytes = 0;
}

static void op_done(struct gg_vmm_op *op)
{
	if (op->items != op->inl)
		munmap(op->items, op->map_bytes);
	op->items = op->inl;
	op->n = 0;
}

/* e lost its last reference or mapping: its record leaves the table now,
 * before the driver can hand the handle value out again (DESIGN.md §3). */
static void die_locked(struct hent *e, struct gg_vmm_item *it)
{
	it->dying = 1;
	it->flags = e->flags;
	it->known = (e->flags & GG_HANDLE_CHARGED) && gg_account_forget(GG_NS_VMM, e->h, &it->rec);
	hdel_locked(e);
}

/* ---- the hooks' entry points -------------------------------------------- */

void gg_handle_created(uint64_t h, unsigned flags)
{
	pthread_mutex_lock(&lock);
	struct hent *e = hfind_locked(h);
	if (e && (flags & GG_HANDLE_IMPORTED)) {
		/* Imported into the process that made it: the same memory, one
		 * more reference (never a second charge). */
		e->refs++;
	} else if ((e = hadd_locked(h)) != NULL) {
		e->refs = 1;
		e->maps = 0;
		e->flags = flags;
	}
	pthread_mutex_unlock(&lock);
	if (!e && (flags & GG_HANDLE_CHARGED)) {
		static _Atomic int warned;
		/* relaxed: only decides who prints the one warning. */
		if (!atomic_exchange_explicit(&warned, 1, memory_order_relaxed))
			gg_log(GG_LOG_WARN, "VMM handle map full; further handles are refunded at their first "
			                    "cuMemRelease");
	}
}

void gg_handle_retained(uint64_t h)
{
	pthread_mutex_lock(&lock);
	struct hent *e = hfind_locked(h);
	if (e)
		e->refs++;
	pthread_mutex_unlock(&lock);
}

int gg_handle_release_begin(uint64_t h, struct gg_vmm_op *op)
{
	op_init(op);
	pthread_mutex_lock(&lock);
	struct hent *e = hfind_locked(h);
	if (!e) {
		pthread_mutex_unlock(&lock);
		return 0;
	}
	struct gg_vmm_item it = {.h = h};
	/* The reference goes now, tentatively; end() gives it back if the
	 * driver refuses the release. With none left (a second release of a
	 * released, still mapped handle) there is nothing to take. */
	if (e->refs > 0) {
		it.dropped = 1;
		if (--e->refs == 0 && e->maps == 0)
			die_locked(e, &it);
	}
	op_push(op, &it); /* the inline items always have room for one */
	pthread_mutex_unlock(&lock);
	return 1;
}

static void settle(struct gg_vmm_item *it, int ok)
{
	if (it->dying && it->known)
		gg_account_freed(&it->rec, ok);
}

void gg_handle_release_end(struct gg_vmm_op *op, int ok)
{
	struct gg_vmm_item *it = &op->items[0];
	if (!ok && it->dropped) {
		pthread_mutex_lock(&lock);
		struct hent *e = it->dying ? hadd_locked(it->h) : hfind_locked(it->h);
		if (e) {
			e->refs++;
			if (it->dying)
				e->flags = it->flags;
		}
		pthread_mutex_unlock(&lock);
	}
	settle(it, ok);
	op_done(op);
}

void gg_handle_mapped(uint64_t va, uint64_t size, uint64_t h)
{
	pthread_mutex_lock(&lock);
	struct hent *e = hfind_locked(h);
	/* A handle we never saw created is none of our books. */
	if (e && madd_locked(va, size, h) == 0)
		e->maps++;
	pthread_mutex_unlock(&lock);
}

/* Takes mapping m out; its handle dies if nothing else holds it. */
static void unmap_one_locked(struct ment *m, struct gg_vmm_op *op)
{
	struct gg_vmm_item it = {.va = m->va, .size = m->size, .h = m->h};
	struct hent *e = hfind_locked(m->h);
	if (e) {
		if (e->maps > 0)
			e->maps--;
		if (e->refs == 0 && e->maps == 0)
			die_locked(e, &it);
	}
	if (op_push(op, &it) != 0) {
		/* No room to remember it (mmap failed): settle this one now, as
		 * if the driver will succeed, rather than lose the refund. */
		settle(&it, 1);
	}
	mdel_locked(m);
}

void gg_handle_unmap_begin(uint64_t va, uint64_t size, struct gg_vmm_op *op)
{
	op_init(op);
	pthread_mutex_lock(&lock);
	if (!mtab || mcount == 0 || size == 0) {
		pthread_mutex_unlock(&lock);
		return;
	}
	/* The common case: the range is exactly one mapping (PyTorch, NCCL). */
	struct ment *m = mfind_locked(va);
	if (m && m->size >= size) {
		unmap_one_locked(m, op);
	} else {
		/* A range over several mappings (or an address free): scan. A
		 * backward shift can move a later entry into slot i, so look at
		 * i again after a removal. */
		uint64_t end = va + size;
		for (uint32_t i = 0; i < M_SLOTS && mcount;) {
			struct ment *x = &mtab[i];
			if (x->va != 0 && x->va >= va && x->va < end)
				unmap_one_locked(x, op);
			else
				i++;
		}
	}
	pthread_mutex_unlock(&lock);
}

void gg_handle_unmap_end(struct gg_vmm_op *op, int ok)
{
	if (!ok) {
		/* The driver kept every mapping: put them and their handles back. */
		pthread_mutex_lock(&lock);
		for (size_t k = 0; k < op->n; k++) {
			struct gg_vmm_item *it = &op->items[k];
			struct hent *e = it->dying ? hadd_locked(it->h) : hfind_locked(it->h);
			if (e) {
				e->maps++;
				if (it->dying)
					e->flags = it->flags;
			}
			madd_locked(it->va, it->size, it->h);
		}
		pthread_mutex_unlock(&lock);
	}
	for (size_t k = 0; k < op->n; k++)
		settle(&op->items[k], ok);
	op_done(op);
}

void gg_handle_forget(uint64_t h)
{
	pthread_mutex_lock(&lock);
	struct hent *e = hfind_locked(h);
	if (e) {
		if (e->maps && mtab)
			for (uint32_t i = 0; i < M_SLOTS && e->maps;) {
				if (mtab[i].va != 0 && mtab[i].h == h) {
					/* the driver unmapped it with its context: dumps too */
					gg_vmm_mapped(mtab[i].va, mtab[i].size, 0);
					mdel_locked(&mtab[i]);
					e->maps--;
				} else {
					i++;
				}
			}
		hdel_locked(e);
	}
	pthread_mutex_unlock(&lock);
}

int gg_handle_state(uint64_t h, uint32_t *refs, uint32_t *maps)
{
	pthread_mutex_lock(&lock);
	struct hent *e = hfind_locked(h);
	if (e) {
		*refs = e->refs;
		*maps = e->maps;
	}
	pthread_mutex_unlock(&lock);
	return e != NULL;
}

static void after_fork_child(void)
{
	gg_handle_reset();
}

void gg_handle_reset(void)
{
	/* Fork child: one thread, and no VMM memory of the parent is ours. */
	if (htab && madvise(htab, H_SLOTS * sizeof(struct hent), MADV_DONTNEED) != 0)
		memset(htab, 0, H_SLOTS * sizeof(struct hent));
	if (mtab && madvise(mtab, M_SLOTS * sizeof(struct ment), MADV_DONTNEED) != 0)
		memset(mtab, 0, M_SLOTS * sizeof(struct ment));
	hcount = mcount = 0;
	pthread_mutex_init(&lock, NULL);
}
