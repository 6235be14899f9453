/* gpuguard: call stacks for dumps. Captured at each governed allocation with
 * libunwind's unw_backtrace (dlopen'ed, never DT_NEEDED) or, where libunwind
 * is absent, a validated frame-pointer walk; interned lock-free into a mapped
 * table so a record carries a 32-bit id. On x86-64 with libunwind, a
 * per-thread cache keyed by the capture's stack pointer answers a repeated
 * call path without unwinding, validated by every return address the walk
 * read (see "The call-path cache"). Symbols are resolved only at dump
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
#include <sys/auxv.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "stack.h"
#include "base.h"
#include "options.h"
#include "pystack.h"
#include "resolve.h"

#define STACK_SLOTS (1u << 16) /* hash slots; ids are at most STACK_SLOTS / 2 */
#define STACK_IDS (STACK_SLOTS / 2)

typedef int (*unw_backtrace_fn)(void **buffer, int size);

static unw_backtrace_fn unw_backtrace_ptr;
static int depth;  /* frames captured, once activated; 0 before */
int gg_stack_want; /* GPUGUARD_STACK_DEPTH, clamped; what dumps report */
static pthread_once_t activate_once = PTHREAD_ONCE_INIT;
/* What the first capture made of the process (activate): 0 until then.
 * Stored with release as activate's last step, loaded with acquire by each
 * capture, so one that reads it nonzero sees the tables, the unwinder's
 * pointers, depth and our text's range activate wrote, and skips
 * pthread_once's call (issue 24: about 9 instructions a capture). */
#define MODE_OFF 1   /* no tables (mmap failed): every capture gives 0 */
#define MODE_WALK 2  /* every capture walks */
#define MODE_CACHE 3 /* x86-64, libunwind's cursor: the call-path cache */
static _Atomic int stack_mode;
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
	gg_stack_want = max_depth > 0 ? max_depth : 0;
}

#if defined(__x86_64__)
static void cache_resolve(void *h);
static int cache_on;
#else
static void cache_resolve(void *h)
{
	(void)h;
}
#endif

static void activate_tables(void);

/* At the first capture, through pthread_once: every capturing thread waits
 * for it (or reads stack_mode) and then sees its tables, unwinder and
 * depth. */
static void activate(void)
{
	activate_tables();
	int mode = !depth ? MODE_OFF : MODE_WALK;
#if defined(__x86_64__)
	if (depth && cache_on)
		mode = MODE_CACHE;
#endif
	/* release: pairs with the acquire loads in gg_stack_take and
	 * take_slow; everything activate_tables wrote is before it. */
	atomic_store_explicit(&stack_mode, mode, memory_order_release);
}

static void activate_tables(void)
{
	int max_depth = gg_stack_want;
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
	if (h) {
		unw_backtrace_ptr = (unw_backtrace_fn)gg_real_dlsym(h, "unw_backtrace");
		cache_resolve(h);
	}
	unwinder = unw_backtrace_ptr ? "libunwind" : "frame-pointer";
	depth = max_depth;
}

const char *gg_stack_unwinder(void)
{
	/* A dump asks: the unwinder it would use, loaded now if not yet. */
	if (gg_stack_want)
		pthread_once(&activate_once, activate);
	return unwinder;
}

int gg_stack_depth(void)
{
	return gg_stack_want;
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

/* The call-path cache's check (below) reads the stack words its entry
 * names, in frames not ours, all of them before it decides: under
 * AddressSanitizer a stale entry's word can lie in another frame's redzone
 * by then (a stack-buffer-underflow report). They are mapped words of this
 * thread's stack, read as an unwinder reads them, so the check is not
 * instrumented. */
#if defined(__SANITIZE_ADDRESS__)
#define NO_ASAN __attribute__((no_sanitize_address))
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_ASAN __attribute__((no_sanitize_address))
#endif
#endif
#ifndef NO_ASAN
#define NO_ASAN
#endif

/* ---- The call-path cache (x86-64, libunwind) ----------------------------
 *
 * A caching allocator's hot loop allocates from one call path again and
 * again, and libunwind's unw_backtrace costs about a thousand instructions
 * each time (init_local on every call). So each thread keeps the last few
 * call paths it captured, keyed by the address of gg_stack_take's own
 * frame (which fixes the stack depth of everything below it) and
 * validated by every return address the unwind read: for each frame the
 * slot it came from (on x86-64 the word under the caller's stack pointer,
 * the frame's CFA - 8) and its value. With the same frame address and the
 * same word in every slot, libunwind's walk reads the same return
 * addresses from the same places, so the frames, and their id, are the
 * ones a fresh walk would give. The one case that check cannot see: a
 * frame whose CFA comes from its frame pointer and moved (alloca of
 * another size) while every frame inside it stayed put, with a stale copy
 * of the old return address left at the old slot; the frames outside that
 * one would then be the old call's. Frames that unwind through a signal
 * frame (the return address is not under the stack pointer) and stacks
 * other than the thread's own (fibers: a cached slot could be unmapped
 * memory by the next call) are never cached, only walked. A hit costs
 * about 4 instructions a word checked and some 30 besides (issue 24).
 *
 * Per thread, so no atomics: a signal handler on this thread that
 * allocates runs inside our hook (gg_in_hook: passed through), and the
 * entry is emptied before it is rewritten anyway (signal fences below). */
#if defined(__x86_64__)
#define CACHE_ENTRIES 16
#define CACHE_FRAMES (GG_STACK_MAX_DEPTH + OWN_ROOM)
/* A slot and the return address it held. Absolute: an entry answers only
 * for its own sp, so its slots are at fixed addresses. */
struct cache_word {
	uintptr_t at, ret;
};
/* The check reads the words four at a time (issue 24): an entry's words
 * are padded to a multiple of CACHE_STRIDE with copies of its first. */
#define CACHE_STRIDE 4
struct cache_entry {
	uintptr_t sp; /* gg_stack_take's frame address; 0 = empty */
	uint32_t id;  /* the stack's id (0: no stack, e.g. all frames ours) */
	uint32_t n;   /* words to check, a multiple of CACHE_STRIDE */
	struct cache_word w[CACHE_FRAMES + CACHE_STRIDE - 1];
} __attribute__((aligned(2048))); /* a power of two: an entry's address is a shift */
struct stack_cache {
	struct cache_entry e[CACHE_ENTRIES];
};
/* NULL: not made yet; CACHE_NONE: none for this thread (mmap failed, or
 * the thread is exiting: its destructor ran). */
#define CACHE_NONE ((struct stack_cache *)1)
static GG_TLS struct stack_cache *tcache;
static pthread_key_t cache_key;
static int cache_on; /* the cursor functions were found and the key made */

/* libunwind's local-unwind cursor API for x86-64 (libunwind.h spells
 * these unw_getcontext, unw_init_local, unw_step, unw_get_reg; the header
 * is not needed to build us). The context is a ucontext_t there, the
 * cursor 127 words; both are given more room here. */
#define UNW_X86_64_RSP 7
#define UNW_X86_64_RIP 16
typedef int (*unw_getcontext_fn)(void *ctx);
typedef int (*unw_init_local_fn)(void *cursor, void *ctx);
typedef int (*unw_step_fn)(void *cursor);
typedef int (*unw_get_reg_fn)(void *cursor, int reg, uintptr_t *val);
static unw_getcontext_fn unw_getcontext_ptr;
static unw_init_local_fn unw_init_local_ptr;
static unw_step_fn unw_step_ptr;
static unw_get_reg_fn unw_get_reg_ptr;

static void cache_free(void *c)
{
	if (c && c != CACHE_NONE)
		munmap(c, sizeof(struct stack_cache));
	tcache = CACHE_NONE;
}

/* The key's destructor is our code, run at every thread's exit: the
 * library must then still be mapped. Pinned (RTLD_NODELETE) before the key
 * is made; a library that hands out its wrappers to the runtime could not
 * be unloaded safely anyway. Code linked into the program itself needs no
 * pin. 0 when pinned. */
static int pin_self(void)
{
	Dl_info info;
	if (!dladdr((void *)pin_self, &info) || !info.dli_fbase)
		return -1;
	const ElfW(Ehdr) *eh = info.dli_fbase;
	if ((uintptr_t)info.dli_fbase + eh->e_phoff == getauxval(AT_PHDR))
		return 0; /* the program's own text */
	return info.dli_fname && dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE) ? 0 : -1;
}

static void cache_resolve(void *h)
{
	unw_getcontext_ptr = (unw_getcontext_fn)gg_real_dlsym(h, "_Ux86_64_getcontext");
	unw_init_local_ptr = (unw_init_local_fn)gg_real_dlsym(h, "_ULx86_64_init_local");
	unw_step_ptr = (unw_step_fn)gg_real_dlsym(h, "_ULx86_64_step");
	unw_get_reg_ptr = (unw_get_reg_fn)gg_real_dlsym(h, "_ULx86_64_get_reg");
	cache_on = unw_getcontext_ptr && unw_init_local_ptr && unw_step_ptr && unw_get_reg_ptr && pin_self() == 0 &&
	           pthread_key_create(&cache_key, cache_free) == 0;
}

/* libunwind's walk, frame by frame: each frame's return address and the
 * slot it was read from (0 for the innermost frame, this one). */
__attribute__((noinline)) static int walk_slots(uintptr_t *ips, uintptr_t *slot, int want)
{
	struct {
		ucontext_t uc;
		char room[1024];
	} ctx;
	struct {
		uintptr_t w[256];
	} cur;
	if (unw_getcontext_ptr(&ctx) != 0 || unw_init_local_ptr(&cur, &ctx) != 0)
		return 0;
	int n = 0;
	do {
		uintptr_t ip = 0, sp = 0;
		if (unw_get_reg_ptr(&cur, UNW_X86_64_RIP, &ip) != 0 || unw_get_reg_ptr(&cur, UNW_X86_64_RSP, &sp) != 0)
			break;
		if (ip == 0)
			break; /* as unw_backtrace: the outermost frame's */
		ips[n] = ip;
		slot[n] = n ? sp - sizeof(uintptr_t) : 0;
		n++;
	} while (n < want && unw_step_ptr(&cur) > 0);
	return n;
}

static struct stack_cache *cache_get(void)
{
	struct stack_cache *c = tcache;
	if (GG_LIKELY(c != NULL))
		return c == CACHE_NONE ? NULL : c;
	tcache = CACHE_NONE; /* until made: a failure is not retried */
	thread_range();
	if (tstack_lo >= tstack_hi)
		return NULL;
	c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED)
		return NULL;
	if (pthread_setspecific(cache_key, c) != 0) {
		munmap(c, sizeof *c);
		return NULL;
	}
	tcache = c;
	return c;
}

static inline struct cache_entry *cache_entry_of(struct stack_cache *c, uintptr_t sp)
{
	return &c->e[((sp >> 4) ^ (sp >> 11)) & (CACHE_ENTRIES - 1)];
}

/* The id of the call path below frame sp, or -1 when the cache cannot
 * answer (then the caller walks, and cache_fill may keep the result). The
 * thread's cache not made yet (NULL) is a miss too: the miss makes it. An
 * entry is filled only for a frame on the thread's own stack (cache_fill),
 * so a frame with the same address is on it as well, and the entry's
 * slots, between it and the stack's top, are mapped. */
NO_ASAN static inline __attribute__((always_inline)) int64_t cache_lookup(uintptr_t sp)
{
	struct stack_cache *c = tcache;
	if (GG_UNLIKELY((uintptr_t)c <= (uintptr_t)CACHE_NONE))
		return -1;
	const struct cache_entry *e = cache_entry_of(c, sp);
	if (e->sp != sp)
		return -1;
	/* every word compared, no branch per word: a hit reads them all */
	uintptr_t diff = 0;
	for (const struct cache_word *w = e->w, *end = e->w + e->n; w < end; w += CACHE_STRIDE)
		diff |= (*(const uintptr_t *)w[0].at ^ w[0].ret) | (*(const uintptr_t *)w[1].at ^ w[1].ret) |
		        (*(const uintptr_t *)w[2].at ^ w[2].ret) | (*(const uintptr_t *)w[3].at ^ w[3].ret);
	return diff ? -1 : (int64_t)e->id;
}

/* Keeps the walk of n frames (ips, slots) from frame sp as id: only when
 * every slot lies above sp, within the thread's stack, in order, and holds
 * its return address (so no signal frame, nothing unusual). */
static void cache_fill(uintptr_t sp, const uintptr_t *ips, const uintptr_t *slot, int n, uint32_t id)
{
	struct stack_cache *c = cache_get();
	if (!c || sp < tstack_lo || sp >= tstack_hi)
		return;
	struct cache_entry *e = cache_entry_of(c, sp);
	e->sp = 0;
	/* the entry reads as empty before any of it changes, to a handler on
	 * this thread (the only other reader) */
	atomic_signal_fence(memory_order_seq_cst);
	uint32_t m = 0;
	uintptr_t last = sp;
	for (int i = 0; i < n; i++) {
		if (slot[i] == 0 || slot[i] <= sp)
			continue; /* the walk's own frames, below the capture's */
		if (slot[i] <= last || slot[i] + sizeof(uintptr_t) > tstack_hi || *(const uintptr_t *)slot[i] != ips[i])
			return;
		last = slot[i];
		e->w[m].at = slot[i];
		e->w[m].ret = ips[i];
		m++;
	}
	for (uint32_t k = 0; m % CACHE_STRIDE; k++)
		e->w[m++] = e->w[k]; /* padding: the first words again */
	e->n = m;
	e->id = id;
	atomic_signal_fence(memory_order_seq_cst);
	e->sp = sp;
}

/* A miss: the frames of a fresh walk, kept for this thread's next capture
 * from frame sp. */
static uint32_t cache_miss(uintptr_t sp)
{
	uintptr_t ips[CACHE_FRAMES], slot[CACHE_FRAMES];
	int n = walk_slots(ips, slot, depth + OWN_ROOM);
	int skip = own_prefix((void *const *)ips, n);
	int keep = n - skip < depth ? n - skip : depth;
	uint32_t id = keep > 0 ? intern(ips + skip, keep) : 0;
	cache_fill(sp, ips, slot, n, id);
	return id;
}
#endif

/* The cache and the walks give the native stack; one native path (the
 * eval loop at one depth) is many Python stacks, which pystack.c tells
 * apart (issue 27). A process without Python pays this one load and
 * branch. relaxed: a hint; a capture that races Python's start takes
 * either path, and either is right. */
static inline __attribute__((always_inline)) uint32_t with_python(uint32_t id)
{
	if (GG_UNLIKELY(atomic_load_explicit(&gg_py_live, memory_order_relaxed)))
		return gg_pystack_stack(id, depth, gg_stack_frames, intern);
	return id;
}

/* gg_stack_take when the cache did not answer: activation, a miss, or a
 * process without the cache (every capture walks). sp: gg_stack_take's
 * frame, the cache's key. */
__attribute__((noinline)) static uint32_t take_slow(uintptr_t sp)
{
	/* acquire: pairs with activate's release store (see stack_mode) */
	if (GG_UNLIKELY(atomic_load_explicit(&stack_mode, memory_order_acquire) == 0))
		pthread_once(&activate_once, activate);
	if (!depth)
		return 0;
#if defined(__x86_64__)
	if (cache_on)
		return with_python(cache_miss(sp));
#else
	(void)sp;
#endif
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
	return with_python(n > 0 ? intern(fr, n) : 0);
}

/* gg_stack_capture past its check of the depth (stack.h). A hit in the
 * call-path cache is answered here, in a frame that saves no register:
 * the mode, the thread's cache, the entry and its words (issue 24).
 * Anything else is take_slow's. Its frame address is the cache's key. */
NO_ASAN __attribute__((noinline)) uint32_t gg_stack_take(void)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
#if defined(__x86_64__)
	/* acquire: pairs with activate's release store (see stack_mode) */
	if (GG_LIKELY(atomic_load_explicit(&stack_mode, memory_order_acquire) == MODE_CACHE)) {
		int64_t hit = cache_lookup(sp);
		if (GG_LIKELY(hit >= 0))
			return with_python((uint32_t)hit);
	}
#endif
	return take_slow(sp);
}

uint32_t gg_stack_intern(const uintptr_t *fr, int n)
{
	if (gg_stack_want)
		pthread_once(&activate_once, activate); /* callers may intern frames they walked themselves */
	return intern(fr, n);
}

/* gg_stack_intern once activated (a capture has been through activation
 * already). */
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
