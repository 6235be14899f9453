/* gpuguard: call stacks for dumps. Captured at each governed allocation with
 * libunwind's unw_backtrace (dlopen'ed, never DT_NEEDED) or, where libunwind
 * is absent, a validated frame-pointer walk; interned lock-free into a mapped
 * table so a record carries a 32-bit id. Symbols are resolved only at dump
 * time (gg_stack_frames + dladdr in dump.c). Nothing is mapped or loaded
 * until the first capture: a process that never allocates device memory (a
 * shell, a probe) never loads libunwind and liblzma (issue 10, finding 13). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#define STACK_SLOTS (1u << 16) /* hash slots; ids are at most STACK_SLOTS / 2 */
#define STACK_IDS (STACK_SLOTS / 2)

typedef int (*unw_backtrace_fn)(void **buffer, int size);

static unw_backtrace_fn unw_backtrace_ptr;
static int depth;      /* frames captured, once activated; 0 before */
static int want_depth; /* GPUGUARD_STACK_DEPTH, clamped; what dumps report */
static pthread_once_t activate_once = PTHREAD_ONCE_INIT;
static const char *unwinder = "none";
static uintptr_t self_lo, self_hi; /* our own text: frames there are skipped */

struct stack_slot {
	_Atomic uint64_t hash; /* 0 = empty; PENDING bit while its id is filled */
	_Atomic uint32_t id;
};
#define PENDING (1ull << 63)
static struct stack_slot *slots;
static uintptr_t *arena;          /* STACK_IDS * depth frames, by id - 1 */
static _Atomic uint8_t *id_depth; /* frames in id; 0 = not yet published */
static _Atomic uint32_t next_id;  /* ids handed out so far */
static _Atomic uint64_t full_count;

static void self_range(void)
{
	Dl_info info;
	if (!dladdr((void *)self_range, &info) || !info.dli_fbase)
		return;
	const ElfW(Ehdr) *eh = info.dli_fbase;
	const ElfW(Phdr) *ph = (const void *)((const char *)eh + eh->e_phoff);
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X))
			continue;
		uintptr_t a = eh->e_type == ET_EXEC ? ph[i].p_vaddr : (uintptr_t)info.dli_fbase + ph[i].p_vaddr;
		if (a < lo)
			lo = a;
		if (a + ph[i].p_memsz > hi)
			hi = a + ph[i].p_memsz;
	}
	if (hi > lo)
		self_lo = lo, self_hi = hi;
}

/* libunwind from beside our own library first (make install puts a copy
 * there), then wherever the loader finds the soname. */
static void *open_libunwind(void)
{
	Dl_info info;
	if (dladdr((void *)open_libunwind, &info) && info.dli_fname) {
		const char *slash = strrchr(info.dli_fname, '/');
		char path[4096];
		size_t dir = slash ? (size_t)(slash - info.dli_fname) + 1 : 0;
		if (dir + sizeof("libunwind.so.8") < sizeof(path)) {
			memcpy(path, info.dli_fname, dir);
			memcpy(path + dir, "libunwind.so.8", sizeof("libunwind.so.8"));
			void *h = dir ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
			if (h)
				return h;
		}
	}
	return dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
}

void gg_stack_init(int max_depth)
{
	if (max_depth > GG_STACK_MAX_DEPTH)
		max_depth = GG_STACK_MAX_DEPTH;
	want_depth = max_depth > 0 ? max_depth : 0;
}

/* At the first capture, through pthread_once: every capturing thread waits
 * for it and then sees its tables, unwinder and depth. */
static void activate(void)
{
	int max_depth = want_depth;
	if (max_depth <= 0)
		return;
	size_t sz_slots = STACK_SLOTS * sizeof(struct stack_slot);
	size_t sz_arena = (size_t)STACK_IDS * (size_t)max_depth * sizeof(uintptr_t);
	size_t sz_depth = STACK_IDS;
	char *m = mmap(NULL, sz_slots + sz_arena + sz_depth, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return;
	slots = (void *)m;
	arena = (void *)(m + sz_slots);
	id_depth = (void *)(m + sz_slots + sz_arena);
	self_range();
	int use_fp = gg_opt.unwinder_fp; /* GPUGUARD_TEST_UNWINDER, for tests */
#if defined(__SANITIZE_THREAD__)
	/* libunwind frees its per-thread cache from a TSD destructor, which runs
	 * after TSan has torn the thread's state down: the intercepted mutex
	 * there crashes. TSan builds have frame pointers; walk those. */
	use_fp = 1;
#endif
	void *h = use_fp ? NULL : open_libunwind();
	if (h)
		unw_backtrace_ptr = (unw_backtrace_fn)gg_real_dlsym(h, "unw_backtrace");
	unwinder = unw_backtrace_ptr ? "libunwind" : "frame-pointer";
	depth = max_depth;
}

const char *gg_stack_unwinder(void)
{
	/* A dump asks: the unwinder it would use, loaded now if not yet. */
	if (want_depth)
		pthread_once(&activate_once, activate);
	return unwinder;
}

int gg_stack_depth(void)
{
	return want_depth;
}

/* The calling thread's stack range, for the frame-pointer walk to stay in. */
static GG_TLS uintptr_t tstack_lo, tstack_hi;

static void thread_range(void)
{
	pthread_attr_t a;
	void *addr;
	size_t size;
	tstack_hi = 1; /* tried: do not retry on failure */
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return;
	if (pthread_attr_getstack(&a, &addr, &size) == 0) {
		tstack_lo = (uintptr_t)addr;
		tstack_hi = (uintptr_t)addr + size;
	}
	pthread_attr_destroy(&a);
}

__attribute__((noinline)) static int fp_walk(uintptr_t *out, int max)
{
	if (GG_UNLIKELY(tstack_hi == 0))
		thread_range();
	uintptr_t *fp = __builtin_frame_address(0);
	int n = 0;
	while (n < max) {
		uintptr_t f = (uintptr_t)fp;
		/* Validated: aligned, inside this thread's stack, strictly upwards. */
		if ((f & 7) || f < tstack_lo || f + 16 > tstack_hi)
			break;
		uintptr_t next = fp[0], ret = fp[1];
		if (ret < 4096)
			break;
		out[n++] = ret;
		if (next <= f)
			break;
		fp = (uintptr_t *)next;
	}
	return n;
}

static uint64_t hash_frames(const uintptr_t *f, int n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
	for (int i = 0; i < n; i++) {
		h ^= f[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	h &= ~PENDING;
	return h ? h : 1;
}

/* Room for our own frames above the caller's: at most OWN_ROOM are walked
 * and skipped. */
#define OWN_ROOM 8
/* The most of our own frames a capture has found so far (at most
 * OWN_ROOM). A capture walks depth + this many frames, not depth +
 * OWN_ROOM, sparing the unwinder the frames it would walk only to drop
 * (issue 12, step 7); one that finds more of ours walks again with the
 * whole room, so every stack is the one the full walk gives. relaxed: a
 * hint; any value yields the same frames, a stale one a second walk. */
static _Atomic int own_seen;

static int walk(void **raw, int want)
{
	return unw_backtrace_ptr ? unw_backtrace_ptr(raw, want) : fp_walk((uintptr_t *)raw, want);
}

static int own_prefix(void *const *raw, int n)
{
	int skip = 0;
	while (skip < n && (uintptr_t)raw[skip] >= self_lo && (uintptr_t)raw[skip] < self_hi)
		skip++;
	return skip;
}

static uint32_t intern(const uintptr_t *fr, int n);

uint32_t gg_stack_capture(void)
{
	if (!want_depth)
		return 0;
	pthread_once(&activate_once, activate);
	if (!depth)
		return 0;
	void *raw[GG_STACK_MAX_DEPTH + OWN_ROOM];
	int room = atomic_load_explicit(&own_seen, memory_order_relaxed);
	int want = depth + room;
	int n = walk(raw, want);
	int skip = own_prefix(raw, n);
	/* A walk that ended before want frames saw the whole stack, and one
	 * with no more than room frames of ours holds depth of the caller's:
	 * either way the longer walk would keep the same frames (a walk of
	 * fewer frames is a prefix of a longer one). Otherwise walk again. */
	if (n == want && skip > room && room < OWN_ROOM) {
		want = depth + OWN_ROOM;
		n = walk(raw, want);
		skip = own_prefix(raw, n);
		int seen = skip < OWN_ROOM ? skip : OWN_ROOM;
		/* relaxed CAS: raises the hint to its maximum; nothing hangs on it. */
		while (room < seen && !atomic_compare_exchange_weak_explicit(
		                          &own_seen, &room, seen, memory_order_relaxed, memory_order_relaxed))
			;
	}
	n -= skip;
	if (n > depth)
		n = depth;
	uintptr_t *fr = (uintptr_t *)raw + skip;
	/* Python frames where the eval loop runs (pystack.c, issue 27); a
	 * process without Python pays this one load and branch. */
	if (GG_UNLIKELY(atomic_load_explicit(&gg_py_live, memory_order_relaxed)))
		n = gg_pystack_splice(fr, n < 0 ? 0 : n, depth);
	if (n <= 0)
		return 0;
	return intern(fr, n);
}

uint32_t gg_stack_intern(const uintptr_t *fr, int n)
{
	if (want_depth)
		pthread_once(&activate_once, activate); /* callers may intern frames they walked themselves */
	return intern(fr, n);
}

/* gg_stack_intern once activated (gg_stack_capture has been through the
 * pthread_once already). */
static uint32_t intern(const uintptr_t *fr, int n)
{
	if (!slots || n <= 0)
		return 0;
	if (n > depth)
		n = depth;
	uint64_t h = hash_frames(fr, n);
	for (uint32_t probe = 0; probe < 64; probe++) {
		struct stack_slot *s = &slots[(h + probe) & (STACK_SLOTS - 1)];
		/* acquire: pairs with the release store of the published hash, so a
		 * match sees the slot's id and the id's frames. */
		uint64_t cur = atomic_load_explicit(&s->hash, memory_order_acquire);
		if (cur == 0) {
			/* acquire on failure: pairs with the winner's release
			 * store of the hash, as the load above. Success needs no
			 * order: the frames are published by the release stores
			 * below. */
			if (!atomic_compare_exchange_strong_explicit(&s->hash, &cur, h | PENDING, memory_order_acquire,
			                                             memory_order_acquire))
				goto occupied;
			uint32_t id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed) + 1;
			if (id > STACK_IDS) {
				/* Out of ids: leave the slot PENDING forever (never matched). */
				atomic_fetch_add_explicit(&full_count, 1, memory_order_relaxed);
				return 0;
			}
			memcpy(&arena[(size_t)(id - 1) * (size_t)depth], fr, (size_t)n * sizeof(uintptr_t));
			/* release: a dump that sees this depth sees the frames. */
			atomic_store_explicit(&id_depth[id - 1], (uint8_t)n, memory_order_release);
			atomic_store_explicit(&s->id, id, memory_order_relaxed);
			/* release: a lookup that sees the hash sees id and frames. */
			atomic_store_explicit(&s->hash, h, memory_order_release);
			return id;
		}
	occupied:
		if (cur != h)
			continue; /* another stack, or this one still PENDING: probe on */
		uint32_t id = atomic_load_explicit(&s->id, memory_order_relaxed);
		if (atomic_load_explicit(&id_depth[id - 1], memory_order_relaxed) == n &&
		    memcmp(&arena[(size_t)(id - 1) * (size_t)depth], fr, (size_t)n * sizeof(uintptr_t)) == 0)
			return id;
	}
	atomic_fetch_add_explicit(&full_count, 1, memory_order_relaxed);
	return 0;
}

int gg_stack_frames(uint32_t id, const uintptr_t **frames)
{
	if (!slots || id == 0 || id > STACK_IDS || id > atomic_load_explicit(&next_id, memory_order_relaxed))
		return 0;
	/* acquire: pairs with the release store of the depth after the frames. */
	int n = atomic_load_explicit(&id_depth[id - 1], memory_order_acquire);
	*frames = &arena[(size_t)(id - 1) * (size_t)depth];
	return n;
}

uint32_t gg_stack_ids(void)
{
	uint32_t n = atomic_load_explicit(&next_id, memory_order_relaxed);
	return n > STACK_IDS ? STACK_IDS : n;
}
