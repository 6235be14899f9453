/* gpuguard: the frame every hook shares, written once for every runtime.
 * A hook file defines, before or after including this (each is expanded
 * where a hook uses it, never here):
 *   GG_VENEER_LIB      the library its real functions come from (soname)
 *   GG_VENEER_RUNTIME  its GG_RT_* (GG_ENTER: devices bound here are its)
 *   GG_VENEER_RESULT   its runtime's result type
 *   GG_VENEER_RT       its struct gg_runtime
 *   GG_VENEER_OK, GG_VENEER_OOM  its codes
 *   GG_VENEER_MISSING  the answer when the real function cannot be found
 * and has a gg_pfn_<name> type for each function it wraps or calls. Each
 * hook is then its signature, when it passes straight through, and the
 * shape (shape.c) it runs; the compiler holds the signature to the ABI's
 * prototype (gpuguard/cuda_abi_funcs.h, hip_abi_funcs.h, nvml_abi.h).
 *
 * Every exported hook of a file that includes this is one of the GG_VENEER*
 * macros below: none resolves its real function or enters the books by
 * hand (tests/scripts/veneer.sh fails on one that does). The exceptions,
 * each for a reason the frame cannot take (the check reads these lines):
 *   veneer-exempt: cuGetProcAddress cuGetProcAddress_v2  the lookup itself:
 *     it answers NOT_FOUND (not GG_VENEER_MISSING) when the driver has none,
 *     and substitutes pointers after the real call without entering the books
 *   veneer-exempt: cuGetExportTable  export.c: its real pointer is the one
 *     slot gg_real_cuGetExportTable that hook_cuda.c's tables name too, and
 *     it enters the books only for cudart's two tables, after the real call
 * A helper a GG_VENEER_TO hook hands its real function to (its frame its
 * own) may enter the books itself: it is static, not a hook. */
#ifndef GG_VENEER_H
#define GG_VENEER_H

#include "base.h"
#include "init.h"
#include "resolve.h"
#include "shape.h"
#include "signal.h"

/* One real pointer per function wrapped (a hooks.h row: DECLARE_HOOK, or
 * DECLARE_HOOK_PTSZ for a row with a per-thread-stream variant) or only
 * called (DECLARE_REAL): real_<name>, static to the hook file. */
#define DECLARE_REAL(name) static _Atomic(gg_pfn_##name) real_##name;
#define DECLARE_HOOK(name, ...) DECLARE_REAL(name)
#define DECLARE_HOOK_PTSZ(name, ptsz, ...) DECLARE_REAL(name) DECLARE_REAL(ptsz)
/* The real function behind our wrapper name, resolved on first use; a slot
 * already filled costs one load (gg_real_get). */
#define REAL(name) ((gg_pfn_##name)gg_real_get((void *_Atomic *)&real_##name, #name, (void *)name, GG_VENEER_LIB))
/* Our own calls into the runtime: as REAL, for a function we do not wrap. */
#define HELPER(name) ((gg_pfn_##name)gg_real_get((void *_Atomic *)&real_##name, #name, NULL, GG_VENEER_LIB))
/* name's real-pointer slot, for the dlsym and cuGetProcAddress tables. */
#define SLOT(name) ((void *_Atomic *)&real_##name)

/* The real function, or the runtime's answer that it is not there. */
#define GG_VENEER_REAL(name)              \
	gg_pfn_##name real = REAL(name);  \
	if (!real) {                      \
		return GG_VENEER_MISSING; \
	}                                 \
	(void)0

/* Resolves the real function; if refuse, answers GG_VENEER_OOM in a signal
 * handler that interrupted a hook (GG_SIG_REFUSE, before the re-entry
 * check); re-entered, or where pass holds (arguments the runtime answers
 * for itself), goes straight to the runtime; else runs the body, which sets
 * rc, between GG_ENTER and GG_LEAVE. */
#define GG_VENEER(name, params, args, refuse, pass, ...)        \
	GG_EXPORT GG_VENEER_RESULT name params                  \
	{                                                       \
		GG_VENEER_REAL(name);                           \
		if (refuse)                                     \
			GG_SIG_REFUSE(GG_VENEER_OOM);           \
		if (pass)                                       \
			return real args;                       \
		GG_ENTER_OR_PASS(GG_VENEER_RUNTIME, real args); \
		GG_VENEER_RESULT rc;                            \
		__VA_ARGS__                                     \
		GG_LEAVE();                                     \
		return rc;                                      \
	}

/* Notes what a successful call did: the real call, then note(rt, rc, ...),
 * which enters the books itself only when there is something to note. */
#define GG_VENEER_NOTE(name, params, args, note, ...)                 \
	GG_EXPORT GG_VENEER_RESULT name params                        \
	{                                                             \
		GG_VENEER_REAL(name);                                 \
		return note(&GG_VENEER_RT, real args, ##__VA_ARGS__); \
	}

/* Notes what a successful call did, where when holds (when names
 * gg_in_hook itself, so that the order of its tests is the hook's): the
 * body runs between GG_ENTER and GG_LEAVE after the real call. */
#define GG_VENEER_AFTER(name, params, args, when, ...) \
	GG_EXPORT GG_VENEER_RESULT name params         \
	{                                              \
		GG_VENEER_REAL(name);                  \
		GG_VENEER_RESULT rc = real args;       \
		if (rc == GG_VENEER_OK && (when)) {    \
			GG_ENTER(GG_VENEER_RUNTIME);   \
			__VA_ARGS__                    \
			GG_LEAVE();                    \
		}                                      \
		return rc;                             \
	}

/* Passes straight through after a note (statements, before the real call)
 * that touches no books, so needs no frame. */
#define GG_VENEER_PASS(name, params, args, ...) \
	GG_EXPORT GG_VENEER_RESULT name params  \
	{                                       \
		GG_VENEER_REAL(name);           \
		__VA_ARGS__                     \
		return real args;               \
	}

/* Runs before, then the real call, whose result after(rc) returns: for a
 * call that invalidates per-thread state on both sides of it, with no
 * books (and so no GG_ENTER: also on re-entry and in an inert copy). */
#define GG_VENEER_AROUND(name, params, args, before, after) \
	GG_EXPORT GG_VENEER_RESULT name params              \
	{                                                   \
		GG_VENEER_REAL(name);                       \
		before;                                     \
		return after(real args);                    \
	}

/* Hands the real function, with args, to impl, whose frame is its own (a
 * body that serves several variants of a name). */
#define GG_VENEER_TO(name, params, impl, args) \
	GG_EXPORT GG_VENEER_RESULT name params \
	{                                      \
		GG_VENEER_REAL(name);          \
		return impl args;              \
	}

/* An allocation: the rest of the arguments initialise its struct gg_alloc. */
#define GG_VENEER_ALLOC(name, params, args, pass, ...)                            \
	GG_VENEER(name, params, args, 1, pass, struct gg_alloc a = {__VA_ARGS__}; \
	          rc = GG_ALLOC(&GG_VENEER_RT, &a, real args);)

/* A stream-ordered allocation of size bytes from pool on dev (an
 * expression that may use dev), for stream. */
#define GG_VENEER_POOL_ALLOC(name, params, args, pass, api, dev_, pool, size, out, stream) \
	GG_VENEER(name, params, args, 1, pass, int dev = dev_; struct gg_pool_alloc pa;    \
	          gg_pool_alloc_init(&pa, api, dev, pool, size, out, stream);              \
	          rc = GG_POOL_ALLOC(&GG_VENEER_RT, &pa, real args);)
/* A free of raw in namespace ns. A null raw goes to the runtime, and so do
 * 1 and 2, which no allocation returns and no record can hold (the table's
 * slot states, table.h): one test where the hook's and the table's were two
 * (issue 24), the table's folded by the compiler into this one. */
#define GG_VENEER_FREE(name, params, args, ns, raw)                                                     \
	GG_VENEER(name, params, args, 0, (uint64_t)(uintptr_t)(raw) <= GG_TABLE_BUSY, struct gg_free f; \
	          gg_free_begin(&f, ns, (uint64_t)(uintptr_t)(raw)); rc = gg_free_end(&GG_VENEER_RT, &f, real args);)

/* A VMM handle's release: only its last reference or mapping refunds it. */
#define GG_VENEER_RELEASE(name, params, args, pass, handle)            \
	GG_VENEER(name, params, args, 0, pass, struct gg_release r;    \
	          gg_release_begin(&r, (uint64_t)(uintptr_t)(handle)); \
	          rc = gg_release_end(&GG_VENEER_RT, &r, real args);)

/* An unmap of [ptr, ptr + size); range: the reservation itself goes. */
#define GG_VENEER_UNMAP(name, params, args, ptr, size, range)            \
	GG_VENEER(name, params, args, 0, 0, struct gg_vmm_op op;         \
	          gg_unmap_begin(&op, (uint64_t)(uintptr_t)(ptr), size); \
	          rc = gg_unmap_end(&GG_VENEER_RT, &op, real args, (uint64_t)(uintptr_t)(ptr), size, range);)

/* Pinned host memory: tracked for dumps, never charged. */
#define GG_VENEER_HOST_ALLOC(name, params, args, ptr, size)                                         \
	GG_VENEER(name, params, args, 0, !(ptr) || (size) == 0, gg_host_alloc_begin(&GG_VENEER_RT); \
	          rc = gg_host_alloc_end(&GG_VENEER_RT, real args, ptr, size);)
#define GG_VENEER_HOST_FREE(name, params, args, ptr)                                                                   \
	GG_VENEER(name, params, args, 0, !(ptr), struct gg_free f; gg_host_free_begin(&f, (uint64_t)(uintptr_t)(ptr)); \
	          rc = gg_host_free_end(&GG_VENEER_RT, &f, real args);)

/* Free and total memory, answered under the ceiling. */
#define GG_VENEER_MEMINFO(name)                                                                                       \
	GG_VENEER(name, (size_t * free, size_t * total), (free, total), 0, 0, size_t f = 0, t = 0; rc = real(&f, &t); \
	          rc = gg_meminfo_end(&GG_VENEER_RT, rc, f, t, free, total);)
/* A device's total, answered under the ceiling. */
#define GG_VENEER_TOTAL(name, params, args, bytes, dev)                                    \
	GG_VENEER(name, params, args, 0, !(bytes) || (dev) < 0 || (dev) >= GG_MAX_DEVICES, \
	          rc = gg_total_end(&GG_VENEER_RT, real args, bytes, dev);)

/* Pool management. */
#define GG_VENEER_POOL_DESTROY(name, params, args, pool)                                                           \
	GG_VENEER(name, params, args, 0, 0, struct gg_pool_doom d; gg_pool_destroy_enter(&GG_VENEER_RT, pool, &d); \
	          rc = gg_pool_destroy_leave(&GG_VENEER_RT, pool, &d, real args);)
#define GG_VENEER_POOL_TRIM(name, params, args, pool) \
	GG_VENEER(name, params, args, 0, 0, rc = gg_pool_trimmed(&GG_VENEER_RT, real args, pool);)

/* A runtime call the shapes make (struct gg_runtime): 0 when fn answered
 * GG_VENEER_OK, -1 when it failed or cannot be found. */
#define GG_VENEER_CALL(self, fn, params, args)               \
	static int self params                               \
	{                                                    \
		gg_pfn_##fn f = REAL(fn);                    \
		return f && f args == GG_VENEER_OK ? 0 : -1; \
	}

/* The dlsym override's table of a runtime's hooks (rows: one GG_*_HOOKS
 * expansion of {name, ours, real slot}), and its two questions. */
#define GG_VENEER_SYMS(prefix, ...)                                                                  \
	static const struct gg_sym sym_table[] = {__VA_ARGS__};                                      \
	int gg_##prefix##_is_ours(void *fn)                                                          \
	{                                                                                            \
		return gg_sym_is_ours(sym_table, sizeof(sym_table) / sizeof(sym_table[0]), fn);      \
	}                                                                                            \
	void *gg_##prefix##_wrap_symbol(const char *name, void *real)                                \
	{                                                                                            \
		return gg_sym_wrap(sym_table, sizeof(sym_table) / sizeof(sym_table[0]), name, real); \
	}

#endif
