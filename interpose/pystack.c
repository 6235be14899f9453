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

/* ---- interned code objects: (code, file, name, line table, first line)
 * to an id whose file and function names are copied into an arena. Found
 * lock-free; inserted under ins_lock (a new code object, rare). */
#define CODE_SLOTS (1u << 14)
#define CODE_IDS (CODE_SLOTS / 2)
#define ARENA_BYTES (8u << 20)
#define NAME_MAX_BYTES 1024
struct code_slot {
	_Atomic uintptr_t code; /* 0 = empty; published last (release) */
	uintptr_t file, name, table;
	int32_t first;
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

/* ---- the line cache: (code, instruction offset) to the frame's word,
 * direct-mapped, each slot a seqlock so that readers never wait. */
#define LINE_SLOTS (1u << 12)
struct line_slot {
	_Atomic uint32_t seq; /* odd while written */
	_Atomic uintptr_t code, table;
	_Atomic int32_t lasti;
	_Atomic uint64_t word;
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
static uint32_t code_id(uintptr_t c, uintptr_t file, uintptr_t name, uintptr_t table, int first)
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
			if (k == c && s->file == file && s->name == name && s->table == table && s->first == first) {
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
				s->file = file, s->name = name, s->table = table, s->first = first, s->id = id;
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

/* The word for code c at byte offset lasti: the slow path of the line
 * cache. 0 = not a frame we can name. */
static uint64_t frame_word_slow(uintptr_t c, uintptr_t table, int lasti)
{
	uintptr_t file = *(const uintptr_t *)(c + L.co_filename);
	uintptr_t name = *(const uintptr_t *)(c + L.co_name);
	int first = *(const int32_t *)(c + L.co_firstlineno);
	if (!PTR_OK(table) || *(const uintptr_t *)(table + 8) != bytes_type)
		return 0;
	uint32_t id = code_id(c, file, name, table, first);
	if (!id)
		return 0;
	ssize_t n = *(const ssize_t *)(table + L.bytes_size);
	int line = gg_pystack_addr2line(minor, (const unsigned char *)(table + L.bytes_sval), n > 0 ? (size_t)n : 0,
	                                first, lasti);
	if (line < 0 || line > 0xffffff)
		line = 0;
	return GG_PY_FRAME_BIT | (uint64_t)id << 24 | (uint64_t)line;
}

/* The line cache's fast path, inlined into the walk; a miss goes to
 * frame_word_miss. */
static uint64_t frame_word_miss(struct line_slot *s, uint32_t s1, uintptr_t c, uintptr_t table, int lasti)
{
	uint64_t w = frame_word_slow(c, table, lasti);
	if (!w)
		return 0;
	/* Seqlock write, skipped if another writer holds the slot: relaxed
	 * CAS to odd, then a release fence so the field stores are not seen
	 * before the odd count; the release store of the even count publishes
	 * them. */
	if (!(s1 & 1) &&
	    atomic_compare_exchange_strong_explicit(&s->seq, &s1, s1 + 1, memory_order_relaxed, memory_order_relaxed)) {
		atomic_thread_fence(memory_order_release);
		atomic_store_explicit(&s->code, c, memory_order_relaxed);
		atomic_store_explicit(&s->table, table, memory_order_relaxed);
		atomic_store_explicit(&s->lasti, lasti, memory_order_relaxed);
		atomic_store_explicit(&s->word, w, memory_order_relaxed);
		atomic_store_explicit(&s->seq, s1 + 2, memory_order_release);
	}
	return w;
}

__attribute__((always_inline)) static inline uint64_t frame_word(struct line_slot *slots, uintptr_t c, uintptr_t table,
                                                                 int lasti)
{
	uint32_t h = (uint32_t)(((c >> 4) + (uintptr_t)lasti) * 0x9e3779b1u) >> 20 & (LINE_SLOTS - 1);
	struct line_slot *s = &slots[h];
	/* Seqlock read: acquire pairs with the writer's release store of the
	 * even count; the acquire fence orders the field loads before the
	 * second count load, so a torn read is seen as a changed count. */
	uint32_t s1 = atomic_load_explicit(&s->seq, memory_order_acquire);
	uintptr_t kc = atomic_load_explicit(&s->code, memory_order_relaxed);
	uintptr_t kt = atomic_load_explicit(&s->table, memory_order_relaxed);
	int32_t kl = atomic_load_explicit(&s->lasti, memory_order_relaxed);
	uint64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
#if !defined(__SANITIZE_THREAD__)
	atomic_thread_fence(memory_order_acquire);
#endif
	/* (ThreadSanitizer models no fences, and GCC refuses this one under it
	 * as an error; every field is an atomic load, so it reports no race.) */
	if (GG_UNLIKELY((s1 & 1) | (kc != c) | (kt != table) | (kl != lasti) ||
	                atomic_load_explicit(&s->seq, memory_order_relaxed) != s1))
		return frame_word_miss(s, s1, c, table, lasti);
	return w;
}

/* The thread's Python frames, innermost first, at most max; ends[i] = 1
 * when frame i is the last (outermost) one that its native eval-loop call
 * runs. resolve: each frame's word into out (through the line cache);
 * otherwise only a hash of what names the frames (code object, line table,
 * instruction offset) into *hash, for the per-thread memo below. Returns
 * how many, or -1 when a careful read failed. m is a constant in each
 * instantiation, and the layout is copied into locals first: the stores to
 * ends would otherwise make the compiler reload every global after each. */
__attribute__((always_inline)) static inline int walk_py(uintptr_t ts, uint64_t *out, uint8_t *ends, int max,
                                                         int careful, const int m, int resolve, uint64_t *hash,
                                                         const struct gg_py_layout *LL)
{
	/* LL is the version's constant row (its offsets fold into the loads)
	 * or, for a 3.13 whose published offsets differ from the row, L. */
	const uintptr_t o_back = LL->fr_back, o_code = LL->fr_code, o_ip = LL->fr_lasti, o_owner = LL->fr_owner;
	const uintptr_t o_entry = LL->fr_is_entry, o_cc = LL->co_code, o_trace = LL->co_firsttraceable;
	const uintptr_t o_table = LL->co_linetable, ctype = code_type, ftype = frame_type;
	struct line_slot *const slots = line_slots;
	uint64_t h = 0x9e3779b97f4a7c15ull;
	int n = 0;
	uintptr_t f;
	if (!rd(ts + LL->ts_frame, &f, careful))
		return -1;
	if (m == 11 || m == 12) { /* through the cframe */
		if (!PTR_OK(f) || !rd(f + LL->cframe_current, &f, careful))
			return PTR_OK(f) ? -1 : 0;
	}
	/* Bounded: max frames named, and at most 4 * max followed (shims,
	 * incomplete frames), so a cycle cannot hold us. */
	for (int steps = 4 * max; f && n < max && steps; steps--) {
		uintptr_t c, t, back, ip;
		if (!PTR_OK(f))
			break;
		if (!rd(f + o_back, &back, careful) || !rd(f + o_code, &c, careful))
			return -1;
		int owner = m >= 11 ? *(const char *)(f + o_owner) : 0;
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
		if (m <= 10) { /* a frame object: check its type too */
			if (!rd(f + 8, &t, careful))
				return -1;
			if (t != ftype)
				break;
		}
		if (!rd(f + o_ip, &ip, careful))
			return -1;
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
		uintptr_t table = *(const uintptr_t *)(c + o_table);
		ends[n] = (uint8_t)entry;
		if (resolve) {
			uint64_t w = frame_word(slots, c, table, lasti);
			if (w)
				out[n++] = w;
		} else {
			/* Multiply-add: order-sensitive, and enough for a
			 * memo that a hash collision can only make show the
			 * last stack's lines for this one. */
			h = h * 0xff51afd7ed558ccdull + (c ^ table ^ (uint64_t)(uint32_t)lasti << 48);
			n++;
		}
		f = back;
	}
	if (n)
		ends[n - 1] = 1;
	if (hash)
		*hash = h ^ (uint64_t)n;
	return n;
}

#define WALKERS(M, NAME, ROW)                                                               \
	static int walk_careful_##NAME(uintptr_t ts, uint64_t *out, uint8_t *ends, int max) \
	{                                                                                   \
		return walk_py(ts, out, ends, max, 1, M, 1, NULL, ROW);                     \
	}                                                                                   \
	static int walk_resolve_##NAME(uintptr_t ts, uint64_t *out, uint8_t *ends, int max) \
	{                                                                                   \
		return walk_py(ts, out, ends, max, 0, M, 1, NULL, ROW);                     \
	}                                                                                   \
	static int walk_hash_##NAME(uintptr_t ts, uint8_t *ends, int max, uint64_t *hash)   \
	{                                                                                   \
		return walk_py(ts, NULL, ends, max, 0, M, 0, hash, ROW);                    \
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
	int (*resolve)(uintptr_t, uint64_t *, uint8_t *, int);
	int (*hash)(uintptr_t, uint8_t *, int, uint64_t *);
};
static const struct walkers walkers_by_minor[] = {
    {walk_careful_9, walk_resolve_9, walk_hash_9},    {walk_careful_10, walk_resolve_10, walk_hash_10},
    {walk_careful_11, walk_resolve_11, walk_hash_11}, {walk_careful_12, walk_resolve_12, walk_hash_12},
    {walk_careful_13, walk_resolve_13, walk_hash_13},
};
static const struct walkers walkers_published = {walk_careful_13_published, walk_resolve_13_published,
                                                 walk_hash_13_published};

/* The last Python stack this thread captured, resolved: a capture whose
 * frames hash the same (code objects, line tables and offsets) takes its
 * words from here without one line-cache lookup per frame (issue 27's cost
 * target). Per thread, mapped at its first capture, unmapped by the key's
 * destructor when the thread exits. */
struct py_memo {
	uint64_t hash;
	int np;
	uint8_t ends[GG_STACK_MAX_DEPTH];
	uint64_t words[GG_STACK_MAX_DEPTH];
};
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
	mm->np = -1;
	memo_tls = mm;
	return mm;
}

static int can_read_careful(void)
{
	uintptr_t probe = 42, got = 0;
	return rd((uintptr_t)&probe, &got, 1) && got == 42;
}

int gg_pystack_splice(uintptr_t *fr, int n, int cap)
{
	if (!ready() || !is_initialized() || is_finalizing())
		return n;
	uintptr_t ts = (uintptr_t)gilstate_tstate();
	if (!PTR_OK(ts))
		return n; /* a thread with no Python state: native only */
	uint64_t pybuf[GG_STACK_MAX_DEPTH];
	const uint64_t *py = pybuf;
	uint8_t endbuf[GG_STACK_MAX_DEPTH] = {0};
	const uint8_t *ends = endbuf;
	int max = cap < GG_STACK_MAX_DEPTH ? cap : GG_STACK_MAX_DEPTH;
	int np;
	const struct walkers *wk = use_published ? &walkers_published : &walkers_by_minor[minor - 9];
	if (GG_UNLIKELY(!atomic_load_explicit(&calibrated, memory_order_relaxed))) {
		if (can_read_careful()) {
			np = wk->careful(ts, pybuf, endbuf, max);
			if (np < 0) {
				refuse("its frames could not be read with the known layout", minor);
				return n;
			}
		} else
			np = wk->resolve(ts, pybuf, endbuf, max);
		atomic_store_explicit(&calibrated, 1, memory_order_relaxed);
	} else {
		struct py_memo *mm = memo_get();
		uint64_t h;
		np = mm ? wk->hash(ts, endbuf, max, &h) : -1;
		if (mm && np == mm->np && h == mm->hash) {
			py = mm->words; /* the same frames as last time: their words */
			ends = mm->ends;
		} else {
			np = wk->resolve(ts, pybuf, endbuf, max);
			if (mm && np >= 0) {
				/* Only a stack whose every frame resolved is kept
				 * (the hash counts frames the words may lack). */
				int full = wk->hash(ts, mm->ends, max, &h) == np;
				mm->np = full ? np : -1;
				mm->hash = h;
				memcpy(mm->words, pybuf, (size_t)(np > 0 ? np : 0) * sizeof *pybuf);
				memcpy(mm->ends, endbuf, (size_t)(np > 0 ? np : 0));
			}
		}
	}
	if (np <= 0)
		return n;
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
