/* gpuguard: the calling thread's Python frames, for every captured stack
 * (issue 27). Read straight from CPython's memory, never through its C API
 * and never under the GIL: the allocator is usually entered with the GIL
 * released (ctypes.CDLL, PyTorch's bindings), taking it deadlocks (pytorch
 * #97833), and a thread blocked in our hook cannot change its own frames.
 * The interpreter is found at run time in the global scope; each Python
 * frame becomes one word of the stack (GG_PY_FRAME_BIT, a code-object id and
 * a line) spliced where the eval loop's native frames are. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pystack.h"
#include "base.h"
#include "log.h"
#include "options.h"
#include "pystack_layout.h"
#include "resolve.h"

/* gg_py_live: 1 while a capture should look for Python (not yet looked, or
 * found and readable), 0 when there is none or it was refused: the one
 * predicted branch a process without Python pays. relaxed: a hint; the
 * state itself is read with acquire below. */
_Atomic int gg_py_live = 1;

enum { PY_UNCHECKED, PY_ABSENT, PY_READY, PY_REFUSED };
static _Atomic int state = PY_UNCHECKED;
static pthread_mutex_t detect_lock = PTHREAD_MUTEX_INITIALIZER;

/* What detection found; written before state becomes PY_READY (release),
 * read only after an acquire load sees it. */
static struct gg_py_layout L;
static int minor;
static int use_published; /* a 3.13 whose _Py_DebugOffsets differ from its row */
static uintptr_t code_type, str_type, bytes_type, frame_type;
static uintptr_t eval_lo, eval_hi; /* _PyEval_EvalFrameDefault's code */
static void *(*gilstate_tstate)(void);
static int (*is_initialized)(void);
static int (*is_finalizing)(void);

/* The first walk after detection reads through process_vm_readv, so a
 * layout that is wrong for this interpreter despite its version is refused
 * instead of followed; once one walk has read every word it followed
 * without a fault, walks read directly. relaxed: a race makes two careful
 * walks. */
static _Atomic int calibrated;

/* ---- interned code objects: (code, file, name, line table, first line,
 * version) to an id whose file and function names are copied into an
 * arena. The address alone is not enough: a code object freed and another
 * made at its address must not take its names. On 3.12+ the version (a
 * counter the interpreter hands each new code object) tells them apart;
 * before, the names' and line table's own addresses and the first line
 * must all match too. Found lock-free; inserted under ins_lock (a new code
 * object, rare). */
#define CODE_SLOTS (1u << 14)
#define CODE_IDS (CODE_SLOTS / 2)
#define ARENA_BYTES (8u << 20)
#define NAME_MAX_BYTES 1024
struct code_slot {
	_Atomic uintptr_t code; /* 0 = empty; published last (release) */
	uintptr_t file, name, table;
	int32_t first;
	uint32_t version; /* 0 before 3.12 */
	uint32_t id;
};
struct code_entry {
	uint32_t file, name; /* offsets into the arena */
};
static struct code_slot *code_slots;
static struct code_entry *entries; /* by id - 1 */
static char *arena;
static uint32_t arena_used, next_code_id; /* under ins_lock */
static _Atomic uint32_t published_ids;    /* entries below it are complete */
static pthread_mutex_t ins_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the line cache: (code id, instruction offset) to the line,
 * direct-mapped, each slot a seqlock so that readers never wait. Keyed by
 * the id, never the address, so it is exactly as safe as the id. */
#define LINE_SLOTS (1u << 12)
struct line_slot {
	_Atomic uint32_t seq; /* odd while written */
	_Atomic uint64_t key; /* id << 32 | (uint32_t)lasti; 0 = empty (ids start at 1) */
	_Atomic int32_t line;
};
static struct line_slot *line_slots;

/* A pointer we follow: 8-aligned, above the first page, below 2^48 (user
 * space on x86-64 and aarch64); two tests. */
#define PTR_OK(p) ((uintptr_t)(p)-4096 < (1ull << 48) - 4096 && !((p)&7))

static uintptr_t sym(const char *name)
{
	return (uintptr_t)gg_real_dlsym(RTLD_DEFAULT, name);
}

static void refuse(const char *why, int m)
{
	gg_log(GG_LOG_WARN,
	       "Python 3.%d in this process: %s; its stacks are native frames only (Python frames are read "
	       "on CPython 3.9 to 3.13 with the GIL, docs/python.md)",
	       m, why);
	atomic_store_explicit(&state, PY_REFUSED, memory_order_release);
	atomic_store_explicit(&gg_py_live, 0, memory_order_relaxed);
}

/* 3.13: the layout the interpreter publishes at the start of _PyRuntime,
 * if its cookie, version and build agree with our row for that minor. */
static int take_debug_offsets(uintptr_t rt, int m, uint32_t hexversion)
{
	const struct gg_py_debug_layout *D = NULL;
	for (size_t i = 0; i < GG_PY_DEBUG_LAYOUTS; i++)
		if (gg_py_debug_layouts[i].minor == m)
			D = &gg_py_debug_layouts[i];
	if (!D)
		return 1; /* 3.9-3.12: the row alone */
	if (!rt || memcmp((const void *)rt, "xdebugpy", 8) != 0) {
		refuse("no _Py_DebugOffsets (cookie \"xdebugpy\") at _PyRuntime", m);
		return 0;
	}
	uint64_t v = *(const uint64_t *)(rt + D->version);
	if ((v >> 16) != (hexversion >> 16)) {
		refuse("_Py_DebugOffsets names another version", m);
		return 0;
	}
	if (*(const uint64_t *)(rt + D->free_threaded)) {
		refuse("a free-threaded build (3.13t), not supported", m);
		return 0;
	}
	const uint16_t pos[] = {D->ts_current_frame, D->fr_previous,     D->fr_executable, D->fr_instr_ptr,
	                        D->fr_owner,         D->co_filename,     D->co_name,       D->co_linetable,
	                        D->co_firstlineno,   D->co_code_adaptive};
	uint16_t *dst[] = {&L.ts_frame,    &L.fr_back, &L.fr_code,      &L.fr_lasti,       &L.fr_owner,
	                   &L.co_filename, &L.co_name, &L.co_linetable, &L.co_firstlineno, &L.co_code};
	for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
		uint64_t off = *(const uint64_t *)(rt + pos[i]);
		if (off >= 4096) {
			refuse("_Py_DebugOffsets holds an implausible offset", m);
			return 0;
		}
		*dst[i] = (uint16_t)off;
	}
	return 1;
}

static void detect_locked(void)
{
	is_initialized = (int (*)(void))sym("Py_IsInitialized");
	if (!is_initialized || gg_opt.pystack_off) {
		atomic_store_explicit(&state, PY_ABSENT, memory_order_release);
		atomic_store_explicit(&gg_py_live, 0, memory_order_relaxed);
		return;
	}
	uint32_t hexversion = 0;
	const uint32_t *pv = (const uint32_t *)sym("Py_Version"); /* 3.11+ */
	if (pv)
		hexversion = *pv;
	else {
		const char *(*getv)(void) = (const char *(*)(void))sym("Py_GetVersion");
		const char *s = getv ? getv() : NULL;
		char *end;
		long maj = s ? strtol(s, &end, 10) : 0;
		long mi = (s && *end == '.') ? strtol(end + 1, NULL, 10) : 0;
		if (maj > 0 && maj < 256 && mi >= 0 && mi < 256)
			hexversion = (uint32_t)(maj << 24 | mi << 16);
	}
	int m = (int)((hexversion >> 16) & 0xff);
	if ((hexversion >> 24) != 3) {
		refuse("not a Python 3 we know", m);
		return;
	}
	const struct gg_py_layout *row = NULL;
	for (size_t i = 0; i < GG_PY_LAYOUTS; i++)
		if (gg_py_layouts[i].minor == m)
			row = &gg_py_layouts[i];
	if (!row) {
		refuse("a version with no layout row", m);
		return;
	}
	L = *row;
	minor = m;
	if (sym("_Py_IsFinalizing") == 0 && sym("Py_IsFinalizing") == 0) {
		refuse("no Py_IsFinalizing", m);
		return;
	}
	if (!take_debug_offsets(sym("_PyRuntime"), m, hexversion))
		return;
	is_finalizing = (int (*)(void))(sym("Py_IsFinalizing") ? sym("Py_IsFinalizing") : sym("_Py_IsFinalizing"));
	gilstate_tstate = (void *(*)(void))sym("PyGILState_GetThisThreadState");
	code_type = sym("PyCode_Type");
	str_type = sym("PyUnicode_Type");
	bytes_type = sym("PyBytes_Type");
	frame_type = sym("PyFrame_Type");
	if (!gilstate_tstate || !code_type || !str_type || !bytes_type || !frame_type) {
		refuse("a symbol the reader needs is not exported", m);
		return;
	}
	/* The eval loop's extent, where Python frames are spliced in. Unknown
	 * (stripped .dynsym size): they go after the native frames. */
	void *ev = gg_real_dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
	Dl_info di;
	const ElfW(Sym) *es = NULL;
	if (ev && dladdr1(ev, &di, (void **)&es, RTLD_DL_SYMENT) && es && es->st_size) {
		eval_lo = (uintptr_t)ev;
		eval_hi = (uintptr_t)ev + es->st_size;
	}
	size_t sz_code = CODE_SLOTS * sizeof(struct code_slot), sz_ent = CODE_IDS * sizeof(struct code_entry);
	size_t sz_line = LINE_SLOTS * sizeof(struct line_slot);
	char *mem = mmap(NULL, sz_code + sz_ent + sz_line + ARENA_BYTES, PROT_READ | PROT_WRITE,
	                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED) {
		refuse("no memory for its tables", m);
		return;
	}
	code_slots = (void *)mem;
	entries = (void *)(mem + sz_code);
	line_slots = (void *)(mem + sz_code + sz_ent);
	arena = mem + sz_code + sz_ent + sz_line;
	/* The constant row's walkers, unless a 3.13 published other offsets. */
	use_published = memcmp(&L, row, sizeof L) != 0;
	if (use_published)
		L.co_version = GG_PY_NONE; /* not published: the row's is not trusted either */
	/* release: a capture that sees PY_READY sees the layout and tables. */
	atomic_store_explicit(&state, PY_READY, memory_order_release);
}

static int ready(void)
{
	/* acquire: pairs with the release store of PY_READY in detection. */
	int s = atomic_load_explicit(&state, memory_order_acquire);
	if (GG_UNLIKELY(s == PY_UNCHECKED)) {
		pthread_mutex_lock(&detect_lock);
		if (atomic_load_explicit(&state, memory_order_relaxed) == PY_UNCHECKED)
			detect_locked();
		pthread_mutex_unlock(&detect_lock);
		s = atomic_load_explicit(&state, memory_order_acquire);
	}
	return s == PY_READY;
}

void gg_pystack_recheck(void)
{
	/* A library loaded since we looked may be libpython (a C program that
	 * embeds it, dlopen'ed after our init). relaxed: the next capture's
	 * detection takes detect_lock and publishes with release. */
	int s = PY_ABSENT;
	if (atomic_compare_exchange_strong_explicit(&state, &s, PY_UNCHECKED, memory_order_relaxed,
	                                            memory_order_relaxed))
		atomic_store_explicit(&gg_py_live, 1, memory_order_relaxed);
}

/* ---- reading ---- */

/* One word at p. careful: through process_vm_readv, so an unmapped p fails
 * instead of faulting. */
__attribute__((always_inline)) static inline int rd(uintptr_t p, uintptr_t *out, int careful)
{
	if (!careful) {
		*out = *(const uintptr_t *)p;
		return 1;
	}
	struct iovec local = {out, sizeof *out}, remote = {(void *)p, sizeof *out};
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)sizeof *out;
}

/* A str's text as UTF-8 into dst (at most cap - 1 bytes), NUL-terminated. */
static void copy_str(uintptr_t s, char *dst, size_t cap)
{
	size_t n = 0;
	if (!PTR_OK(s) || *(const uintptr_t *)(s + 8) != str_type) {
		memcpy(dst, "?", 2);
		return;
	}
	uint32_t st = *(const uint32_t *)(s + L.str_state);
	size_t len = *(const size_t *)(s + L.str_length);
	unsigned kind = (st >> 2) & 7, compact = (st >> 5) & 1, ascii = (st >> 6) & 1;
	if (!compact) {
		memcpy(dst, "?", 2);
		return;
	}
	if (ascii) {
		n = len < cap - 1 ? len : cap - 1;
		memcpy(dst, (const char *)(s + L.str_ascii_size), n);
	} else {
		const unsigned char *d = (const unsigned char *)(s + L.str_compact_size);
		for (size_t i = 0; i < len; i++) {
			uint32_t c = kind == 1 ? d[i] : kind == 2 ? ((const uint16_t *)d)[i] : ((const uint32_t *)d)[i];
			if (n + 4 >= cap)
				break;
			if (c < 0x80)
				dst[n++] = (char)c;
			else if (c < 0x800) {
				dst[n++] = (char)(0xc0 | c >> 6);
				dst[n++] = (char)(0x80 | (c & 63));
			} else if (c < 0x10000) {
				dst[n++] = (char)(0xe0 | c >> 12);
				dst[n++] = (char)(0x80 | ((c >> 6) & 63));
				dst[n++] = (char)(0x80 | (c & 63));
			} else {
				dst[n++] = (char)(0xf0 | c >> 18);
				dst[n++] = (char)(0x80 | ((c >> 12) & 63));
				dst[n++] = (char)(0x80 | ((c >> 6) & 63));
				dst[n++] = (char)(0x80 | (c & 63));
			}
		}
	}
	dst[n] = 0;
}

/* The line of byte offset addr (-1: before the first instruction), decoded
 * from the line table t (a bytes object of n bytes) as each version's
 * PyCode_Addr2Line does. 0 = no line. */
int gg_pystack_addr2line(int m, const unsigned char *t, size_t n, int first, int addr)
{
	if (addr < 0)
		return first;
	const unsigned char *p = t, *end = t + n;
	if (m == 9) { /* co_lnotab: (address delta, signed line delta) pairs */
		int line = first, a = 0;
		for (; p + 1 < end; p += 2) {
			a += p[0];
			if (a > addr)
				break;
			line += (signed char)p[1];
		}
		return line;
	}
	int computed = first, line = -1, a_end = 0;
	if (m == 10) { /* co_linetable: (length, line delta or -128 for none) */
		while (a_end <= addr) {
			if (p + 1 >= end)
				return 0;
			a_end += p[0];
			int d = (signed char)p[1];
			if (d == -128)
				line = -1;
			else
				line = computed += d;
			p += 2;
		}
		return line > 0 ? line : 0;
	}
	/* 3.11+: the location table (Objects/locations.md): an entry starts
	 * with a byte whose high bit is set, code = bits 3-6, length in code
	 * units = bits 0-2 + 1; its line delta is in the bytes after it. */
	while (a_end <= addr) {
		if (p >= end)
			return 0;
		unsigned b = *p, code = (b >> 3) & 15;
		a_end += (int)((b & 7) + 1) * 2;
		if (code == 15)
			line = -1;
		else {
			int d = 0;
			if (code == 13 || code == 14) { /* a signed varint follows */
				const unsigned char *q = p + 1;
				unsigned v = 0, shift = 0, r;
				do {
					if (q >= end || shift > 28)
						return 0;
					r = *q++;
					v |= (r & 63) << shift;
					shift += 6;
				} while (r & 64);
				d = (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
			} else if (code >= 10)
				d = (int)code - 10;
			line = computed += d;
		}
		do
			p++;
		while (p < end && !(*p & 128));
	}
	return line > 0 ? line : 0;
}

/* The id of the code object at c (type-checked by the caller), found or
 * interned; 0 when the tables are full. */
static uint32_t code_id(uintptr_t c, uintptr_t file, uintptr_t name, uintptr_t table, int first, uint32_t version)
{
	uint32_t h = (uint32_t)((c >> 4) * 0x9e3779b1u) & (CODE_SLOTS - 1);
	for (int locked = 0; locked < 2; locked++) {
		if (locked)
			pthread_mutex_lock(&ins_lock);
		for (uint32_t probe = 0; probe < 64; probe++) {
			struct code_slot *s = &code_slots[(h + probe) & (CODE_SLOTS - 1)];
			/* acquire: pairs with the release store of code below,
			 * so a match sees the slot's key and id. */
			uintptr_t k = atomic_load_explicit(&s->code, memory_order_acquire);
			if (k == c && s->file == file && s->name == name && s->table == table && s->first == first &&
			    s->version == version) {
				if (locked)
					pthread_mutex_unlock(&ins_lock);
				return s->id;
			}
			if (k == 0 && locked) {
				if (next_code_id >= CODE_IDS || arena_used + 2 * NAME_MAX_BYTES > ARENA_BYTES)
					break;
				uint32_t id = ++next_code_id;
				struct code_entry *e = &entries[id - 1];
				e->file = arena_used;
				copy_str(file, arena + arena_used, NAME_MAX_BYTES);
				arena_used += (uint32_t)strlen(arena + arena_used) + 1;
				e->name = arena_used;
				copy_str(name, arena + arena_used, NAME_MAX_BYTES);
				arena_used += (uint32_t)strlen(arena + arena_used) + 1;
				s->file = file, s->name = name, s->table = table, s->first = first;
				s->version = version, s->id = id;
				/* release: a dump that sees the count sees the names. */
				atomic_store_explicit(&published_ids, id, memory_order_release);
				/* release: a finder that sees code sees the key and id. */
				atomic_store_explicit(&s->code, c, memory_order_release);
				pthread_mutex_unlock(&ins_lock);
				return id;
			}
			if (k == 0)
				break;
		}
	}
	pthread_mutex_unlock(&ins_lock);
	return 0;
}

/* The line of code id at byte offset lasti, through the line cache; the
 * table (a bytes object of the code the id names) decodes a miss. */
static int line_of(uint32_t id, uintptr_t table, int first, int lasti)
{
	uint64_t key = (uint64_t)id << 32 | (uint32_t)lasti;
	struct line_slot *s = &line_slots[(uint32_t)((key >> 1) * 0x9e3779b97f4a7c15ull >> 52) & (LINE_SLOTS - 1)];
	/* Seqlock read: acquire pairs with the writer's release store of the
	 * even count; the acquire fence orders the field loads before the
	 * second count load, so a torn read is seen as a changed count. */
	uint32_t s1 = atomic_load_explicit(&s->seq, memory_order_acquire);
	uint64_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
	int32_t line = atomic_load_explicit(&s->line, memory_order_relaxed);
#if !defined(__SANITIZE_THREAD__)
	atomic_thread_fence(memory_order_acquire);
#endif
	/* (ThreadSanitizer models no fences, and GCC refuses this one under it
	 * as an error; every field is an atomic load, so it reports no race.) */
	if (!(s1 & 1) && k == key && atomic_load_explicit(&s->seq, memory_order_relaxed) == s1)
		return line;
	ssize_t n = *(const ssize_t *)(table + L.bytes_size);
	line = gg_pystack_addr2line(minor, (const unsigned char *)(table + L.bytes_sval), n > 0 ? (size_t)n : 0, first,
	                            lasti);
	if (line < 0 || line > 0xffffff)
		line = 0;
	/* Seqlock write, skipped if another writer holds the slot: relaxed
	 * CAS to odd, then a release fence so the field stores are not seen
	 * before the odd count; the release store of the even count publishes
	 * them. */
	if (!(s1 & 1) &&
	    atomic_compare_exchange_strong_explicit(&s->seq, &s1, s1 + 1, memory_order_relaxed, memory_order_relaxed)) {
#if !defined(__SANITIZE_THREAD__)
		atomic_thread_fence(memory_order_release);
#endif
		/* (Left out under ThreadSanitizer, as the reader's: GCC refuses
		 * it there once inlined; every field is atomic.) */
		atomic_store_explicit(&s->key, key, memory_order_relaxed);
		atomic_store_explicit(&s->line, line, memory_order_relaxed);
		atomic_store_explicit(&s->seq, s1 + 2, memory_order_release);
	}
	return line;
}

/* The word for code c (its type checked) at byte offset lasti. 0 = not a
 * frame we can name. */
static uint64_t frame_word(uintptr_t c, uintptr_t table, int lasti, uint32_t version)
{
	uintptr_t file = *(const uintptr_t *)(c + L.co_filename);
	uintptr_t name = *(const uintptr_t *)(c + L.co_name);
	int first = *(const int32_t *)(c + L.co_firstlineno);
	if (!PTR_OK(table) || *(const uintptr_t *)(table + 8) != bytes_type)
		return 0;
	uint32_t id = code_id(c, file, name, table, first, version);
	if (!id)
		return 0;
	return GG_PY_FRAME_BIT | (uint64_t)id << 24 | (uint64_t)line_of(id, table, first, lasti);
}

/* ---- the per-thread memo: the last combined stack this thread captured,
 * with what identifies each Python frame it followed (a key). A capture
 * whose native stack is the same id and whose frames all match their keys
 * is the same stack: its id comes back without a line looked up, a splice
 * or an intern (issue 27's cost target). A key is exact, never a hash: the
 * frame's address, its code object's address, its instruction pointer and
 * owner, and what tells a code object from another made later at its
 * address (the version on 3.12+; before, the line table's, names' and
 * first line's, as the code-object cache's key). */
#define KEYS (4 * GG_STACK_MAX_DEPTH)
#define KEY_CODE (1ull << 63) /* in id4: the code's type was checked, and id1-id4 read from it */
struct py_key {
	uintptr_t f, c, ip, owner;
	uint64_t id1, id2, id3, id4; /* version (3.12+), or table, name, file, first */
	/* 3.12+: where the version is read, c's own where its type was
	 * checked, else this key's id1 (so the compare needs no branch). */
	const uint32_t *vp;
};
struct py_memo {
	int busy; /* set while this thread reads or writes it (a signal handler's capture skips it) */
	int nk;   /* keys; 0 = no memo */
	uint32_t native, id;
	uintptr_t ts, head, tail; /* the thread state, the first word read from it, the frame after the last key */
	struct py_key keys[KEYS];
};

/* 3.11: a frame's owner and is_entry, as a key word (is_entry places the
 * splice). 3.12+: none; what the owner decides (a C entry frame, an
 * incomplete one) follows from the code object and instruction pointer,
 * which the key holds. */
#define OWNER_WORD(f) (m == 11 ? (uintptr_t) * (const uint16_t *)((f) + o_entry) : 0)

/* The thread's Python frames, innermost first, at most max; ends[i] = 1
 * when frame i is the last (outermost) one that its native eval-loop call
 * runs. Each frame's word goes into out (through the caches). keys: when
 * not NULL, each frame followed is recorded there (the memo), *nk their
 * count, and *tail the frame after them; *nk = -1 when the walk ended in a
 * way the memo cannot replay (a pointer that failed its check). Returns
 * how many words, or -1 when a careful read failed. m is a constant in
 * each instantiation, and the layout is copied into locals first: the
 * stores to ends would otherwise make the compiler reload every global
 * after each. */
__attribute__((always_inline)) static inline int walk_py(uintptr_t ts, uint64_t *out, uint8_t *ends, int max,
                                                         int careful, const int m, const struct gg_py_layout *LL,
                                                         struct py_key *keys, int *nk, uintptr_t *head, uintptr_t *tail)
{
	/* LL is the version's constant row (its offsets fold into the loads)
	 * or, for a 3.13 whose published offsets differ from the row, L. */
	const uintptr_t o_back = LL->fr_back, o_code = LL->fr_code, o_ip = LL->fr_lasti, o_owner = LL->fr_owner;
	const uintptr_t o_entry = LL->fr_is_entry, o_cc = LL->co_code, o_trace = LL->co_firsttraceable;
	const uintptr_t o_table = LL->co_linetable, o_ver = LL->co_version, ctype = code_type, ftype = frame_type;
	const uintptr_t o_file = LL->co_filename, o_name = LL->co_name, o_first = LL->co_firstlineno;
	int n = 0, k = 0, clean = 0;
	uintptr_t f;
	if (!rd(ts + LL->ts_frame, &f, careful))
		return -1;
	if (keys)
		*head = f, *nk = -1;
	if (m == 11 || m == 12) { /* through the cframe */
		if (!PTR_OK(f) || !rd(f + LL->cframe_current, &f, careful))
			return PTR_OK(f) ? -1 : 0;
	}
	/* Bounded: max frames named, and at most 4 * max followed (shims,
	 * incomplete frames), so a cycle cannot hold us. */
	int steps = 4 * max;
	for (;; steps--) {
		if (!f || n >= max || !steps) {
			clean = 1; /* the end, or the bounds: the same keys end the same way */
			break;
		}
		uintptr_t c, t, back, ip;
		if (!PTR_OK(f))
			break;
		if (!rd(f + o_back, &back, careful) || !rd(f + o_code, &c, careful) || !rd(f + o_ip, &ip, careful))
			return -1;
		int owner = m >= 11 ? *(const char *)(f + o_owner) : 0;
		struct py_key *key = keys ? &keys[k++] : NULL;
		if (key) {
			key->f = f, key->c = c, key->ip = ip, key->owner = OWNER_WORD(f);
			key->id1 = key->id2 = key->id3 = key->id4 = 0;
			key->vp = (const uint32_t *)&key->id1;
		}
		if (m >= 12 && owner == 3) { /* FRAME_OWNED_BY_CSTACK: a C entry */
			if (n)
				ends[n - 1] = 1;
			f = back;
			continue;
		}
		if (!PTR_OK(c) || !rd(c + 8, &t, careful))
			break;
		if (t != ctype) {
			f = back; /* 3.13's shim executes None */
			continue;
		}
		uintptr_t table = *(const uintptr_t *)(c + o_table);
		uint32_t version = o_ver != GG_PY_NONE ? *(const uint32_t *)(c + o_ver) : 0;
		if (key) {
			if (o_ver != GG_PY_NONE) {
				key->id1 = version;
				key->vp = (const uint32_t *)(c + o_ver);
				if (!version)
					keys = NULL; /* the counter is spent: no memo */
			} else {
				key->id1 = table;
				key->id2 = *(const uintptr_t *)(c + o_name);
				key->id3 = *(const uintptr_t *)(c + o_file);
				key->id4 = (uint32_t) * (const int32_t *)(c + o_first);
			}
			key->id4 |= KEY_CODE;
		}
		if (m <= 10) { /* a frame object: check its type too */
			if (!rd(f + 8, &t, careful))
				return -1;
			if (t != ftype)
				break;
		}
		int lasti, entry = m <= 10;
		if (m == 9)
			lasti = (int32_t)ip;
		else if (m == 10)
			lasti = (int32_t)ip * 2;
		else {
			/* Byte offset of the instruction (code units are 2 bytes). */
			intptr_t u = (intptr_t)ip - (intptr_t)(c + o_cc);
			int trace = *(const int32_t *)(c + o_trace);
			if (m == 11)
				entry = *(const char *)(f + o_entry);
			/* An incomplete frame (still being set up) is not shown,
			 * as the interpreter's own tracebacks skip it. */
			if (owner != 1 && u < 2 * (intptr_t)trace) {
				if (entry && n)
					ends[n - 1] = 1;
				f = back;
				continue;
			}
			lasti = u < 0 ? -1 : (int)u;
		}
		ends[n] = (uint8_t)entry;
		uint64_t w = frame_word(c, table, lasti, version);
		if (w)
			out[n++] = w;
		f = back;
	}
	if (n)
		ends[n - 1] = 1;
	if (keys && clean)
		*nk = k, *tail = f;
	return n;
}

/* 1 when the thread's frames match the memo's keys, frame by frame (the
 * memo's thread state and native stack already matched): the steady
 * state of a capture, a few loads and compares per frame. Reads only what
 * the recording walk read before it: a frame is followed only where its
 * address equals the key's, and a code object is read only where its
 * address equals one whose type was checked, and a live frame holds it. */
__attribute__((always_inline)) static inline int memo_match(uintptr_t ts, const struct py_memo *mm, const int m,
                                                            const struct gg_py_layout *LL)
{
	const uintptr_t o_back = LL->fr_back, o_code = LL->fr_code, o_ip = LL->fr_lasti;
	const uintptr_t o_entry = LL->fr_is_entry, o_ver = LL->co_version, o_table = LL->co_linetable;
	const uintptr_t o_file = LL->co_filename, o_name = LL->co_name, o_first = LL->co_firstlineno;
	uintptr_t f = *(const uintptr_t *)(ts + LL->ts_frame);
	if (f != mm->head)
		return 0;
	if (m == 11 || m == 12)
		f = *(const uintptr_t *)(f + LL->cframe_current); /* head was checked when recorded */
	const struct py_key *key = mm->keys, *end = mm->keys + mm->nk;
	for (; key < end; key++) {
		if (f != key->f)
			return 0;
		uintptr_t c = *(const uintptr_t *)(f + o_code);
		uintptr_t ip = *(const uintptr_t *)(f + o_ip);
		uintptr_t back = *(const uintptr_t *)(f + o_back);
		if ((c ^ key->c) | (ip ^ key->ip) | (OWNER_WORD(f) ^ key->owner))
			return 0;
		if (o_ver != GG_PY_NONE) {
			/* c is the key's (checked just above), whose type was
			 * checked when recorded, and a live frame holds it. */
			if (*key->vp != (uint32_t)key->id1)
				return 0;
		} else if (key->id4 & KEY_CODE) {
			if ((*(const uintptr_t *)(c + o_table) ^ key->id1) |
			    (*(const uintptr_t *)(c + o_name) ^ key->id2) |
			    (*(const uintptr_t *)(c + o_file) ^ key->id3) |
			    ((uint32_t) * (const int32_t *)(c + o_first) ^ (key->id4 & ~KEY_CODE)))
				return 0;
		}
		f = back;
	}
	return f == mm->tail;
}

#define WALKERS(M, NAME, ROW)                                                                                   \
	static int walk_careful_##NAME(uintptr_t ts, uint64_t *out, uint8_t *ends, int max)                     \
	{                                                                                                       \
		return walk_py(ts, out, ends, max, 1, M, ROW, NULL, NULL, NULL, NULL);                          \
	}                                                                                                       \
	static int walk_resolve_##NAME(uintptr_t ts, uint64_t *out, uint8_t *ends, int max, struct py_memo *mm) \
	{                                                                                                       \
		return walk_py(ts, out, ends, max, 0, M, ROW, mm ? mm->keys : NULL, mm ? &mm->nk : NULL,        \
		               mm ? &mm->head : NULL, mm ? &mm->tail : NULL);                                   \
	}                                                                                                       \
	static int match_##NAME(uintptr_t ts, const struct py_memo *mm)                                         \
	{                                                                                                       \
		return memo_match(ts, mm, M, ROW);                                                              \
	}
/* gg_py_layouts holds the rows in minor order from 3.9. */
WALKERS(9, 9, &gg_py_layouts[0])
WALKERS(10, 10, &gg_py_layouts[1])
WALKERS(11, 11, &gg_py_layouts[2])
WALKERS(12, 12, &gg_py_layouts[3])
WALKERS(13, 13, &gg_py_layouts[4])
WALKERS(13, 13_published, &L)

struct walkers {
	int (*careful)(uintptr_t, uint64_t *, uint8_t *, int);
	int (*resolve)(uintptr_t, uint64_t *, uint8_t *, int, struct py_memo *);
	int (*match)(uintptr_t, const struct py_memo *);
};
static const struct walkers walkers_by_minor[] = {
    {walk_careful_9, walk_resolve_9, match_9},    {walk_careful_10, walk_resolve_10, match_10},
    {walk_careful_11, walk_resolve_11, match_11}, {walk_careful_12, walk_resolve_12, match_12},
    {walk_careful_13, walk_resolve_13, match_13},
};
static const struct walkers walkers_published = {walk_careful_13_published, walk_resolve_13_published,
                                                 match_13_published};

/* Per thread, mapped at its first capture, unmapped by the key's
 * destructor when the thread exits. */
static GG_TLS struct py_memo *memo_tls;
static pthread_key_t memo_key;
static pthread_once_t memo_once = PTHREAD_ONCE_INIT;
static int memo_key_ok;

static void memo_free(void *p)
{
	memo_tls = NULL;
	munmap(p, sizeof(struct py_memo));
}

static void memo_key_init(void)
{
	memo_key_ok = pthread_key_create(&memo_key, memo_free) == 0;
}

static struct py_memo *memo_get(void)
{
	struct py_memo *mm = memo_tls;
	if (GG_LIKELY(mm))
		return mm;
	pthread_once(&memo_once, memo_key_init);
	if (!memo_key_ok)
		return NULL;
	mm = mmap(NULL, sizeof *mm, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mm == MAP_FAILED)
		return NULL;
	if (pthread_setspecific(memo_key, mm) != 0) {
		munmap(mm, sizeof *mm);
		return NULL;
	}
	memo_tls = mm;
	return mm;
}

static int can_read_careful(void)
{
	uintptr_t probe = 42, got = 0;
	return rd((uintptr_t)&probe, &got, 1) && got == 42;
}

/* The Python frames py[0,np) spliced into the native frames fr[0,n) where
 * the eval loop's frames are (room for max): the new count. */
static int splice(uintptr_t *fr, int n, int max, const uint64_t *py, const uint8_t *ends, int np)
{
	uintptr_t out[GG_STACK_MAX_DEPTH];
	const uintptr_t lo = eval_lo, span = eval_hi - eval_lo;
	int o = 0, gi = 0, keep = n, first_eval = -1;
	/* Where the eval loop's first frame is (unsigned compare: one test). */
	for (int i = 0; i < n; i++)
		if (fr[i] - 1 - lo < span) {
			first_eval = i;
			break;
		}
	if (first_eval < 0 && n + np > max) /* no eval frame seen: room for both */
		keep = max - (np < max / 2 ? np : max / 2) < n ? max - (np < max / 2 ? np : max / 2) : n;
	if (first_eval > 0) {
		memcpy(out, fr, (size_t)first_eval * sizeof *out);
		o = first_eval;
	}
	for (int i = o; i < keep && o < max;) {
		if (fr[i] - 1 - lo < span && gi < np) {
			/* The eval loop's frame gives way to the Python frames
			 * it runs, as py-spy --native shows them. */
			int j = gi;
			while (j < np - 1 && !ends[j])
				j++;
			int take = j - gi + 1 < max - o ? j - gi + 1 : max - o;
			memcpy(out + o, py + gi, (size_t)take * sizeof *out);
			o += take;
			gi = j + 1;
			i++;
			continue;
		}
		/* A run of native frames up to the next eval frame, at once. */
		int r = i + 1;
		while (r < keep && (fr[r] - 1 - lo >= span || gi >= np))
			r++;
		int take = r - i < max - o ? r - i : max - o;
		memcpy(out + o, fr + i, (size_t)take * sizeof *out);
		o += take;
		i = r;
	}
	while (gi < np && o < max) /* outer frames the native walk did not reach */
		out[o++] = (uintptr_t)py[gi++];
	memcpy(fr, out, (size_t)o * sizeof *out);
	return o;
}

uint32_t gg_pystack_stack(uint32_t native, int cap, int (*frames)(uint32_t, const uintptr_t **),
                          uint32_t (*intern)(const uintptr_t *, int))
{
	if (!ready() || !is_initialized() || is_finalizing())
		return native;
	uintptr_t ts = (uintptr_t)gilstate_tstate();
	if (!PTR_OK(ts))
		return native; /* a thread with no Python state: native only */
	const struct walkers *wk = use_published ? &walkers_published : &walkers_by_minor[minor - 9];
	struct py_memo *mm = NULL;
	if (GG_LIKELY(atomic_load_explicit(&calibrated, memory_order_relaxed))) {
		mm = memo_get();
		if (mm && mm->busy)
			mm = NULL; /* a signal handler's capture, inside this thread's: no memo */
		if (mm) {
			mm->busy = 1;
			/* this thread's own handlers (the only other users) see
			 * busy before any of the memo is read or changed */
			atomic_signal_fence(memory_order_seq_cst);
			if (mm->nk > 0 && mm->native == native && mm->ts == ts && wk->match(ts, mm)) {
				uint32_t id = mm->id;
				atomic_signal_fence(memory_order_seq_cst);
				mm->busy = 0;
				return id;
			}
			mm->nk = 0;
		}
	}
	uintptr_t fr[GG_STACK_MAX_DEPTH];
	uint64_t py[GG_STACK_MAX_DEPTH];
	uint8_t ends[GG_STACK_MAX_DEPTH] = {0};
	int max = cap < GG_STACK_MAX_DEPTH ? cap : GG_STACK_MAX_DEPTH;
	const uintptr_t *nf;
	int n = native ? frames(native, &nf) : 0;
	if (n > max)
		n = max;
	if (n > 0)
		memcpy(fr, nf, (size_t)n * sizeof *fr);
	else
		n = 0;
	int np;
	uint32_t id = native;
	if (!mm) {
		if (!atomic_load_explicit(&calibrated, memory_order_relaxed) && can_read_careful()) {
			/* The first walk: a layout wrong for this interpreter
			 * is refused here instead of followed. relaxed: a race
			 * makes two careful walks. */
			np = wk->careful(ts, py, ends, max);
			if (np < 0) {
				refuse("its frames could not be read with the known layout", minor);
				return native;
			}
		} else
			np = wk->resolve(ts, py, ends, max, NULL);
		atomic_store_explicit(&calibrated, 1, memory_order_relaxed);
	} else
		np = wk->resolve(ts, py, ends, max, mm);
	if (np > 0) {
		n = splice(fr, n, max, py, ends, np);
		id = intern(fr, n);
	}
	if (mm) {
		if (mm->nk > 0 && id) {
			mm->native = native, mm->ts = ts, mm->id = id;
		} else
			mm->nk = 0;
		atomic_signal_fence(memory_order_seq_cst);
		mm->busy = 0;
	}
	return id;
}

int gg_pystack_frame(uintptr_t w, const char **file, const char **func, uint32_t *line)
{
	if (!(w & GG_PY_FRAME_BIT))
		return 0;
	uint32_t id = (uint32_t)((w & ~GG_PY_FRAME_BIT) >> 24);
	/* acquire: pairs with the release store of the count after the names. */
	if (!id || id > atomic_load_explicit(&published_ids, memory_order_acquire)) {
		*file = "?", *func = "?";
	} else {
		*file = arena + entries[id - 1].file;
		*func = arena + entries[id - 1].name;
	}
	*line = (uint32_t)(w & 0xffffff);
	return 1;
}
