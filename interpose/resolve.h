/* gpuguard: finding the real functions (resolve.c). */
#ifndef GG_RESOLVE_H
#define GG_RESOLVE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* A sanitizer runtime, preloaded ahead of us, calls dlsym(RTLD_NEXT, ...)
 * while it initialises, before its shadow memory exists: the code on that
 * path must not be instrumented, or it faults. */
#define GG_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))
/* glibc's own dlsym, found with dlvsym; gg_dlsym_resolve finds it (the
 * dlsym trampoline, hook_dlsym.c, calls it and reads gg_real_dlsym_ptr). */
void *gg_real_dlsym(void *handle, const char *name);
void *gg_dlsym_resolve(void);
extern void *_Atomic gg_real_dlsym_ptr;
/* Finds the next definition of name after our library: RTLD_NEXT, then
 * an already-loaded `lib` (dlopen RTLD_NOLOAD). NULL if none. */
void *gg_resolve_next(const char *name, const char *lib);

/* A governed exported name: our wrapper and the slot of its real pointer. */
struct gg_sym {
	const char *name;
	void *ours;
	void *_Atomic *real;
};
/* Loads *slot, resolving name behind us (RTLD_NEXT, then the already-loaded
 * lib) on first use; never returns `ours`. NULL when there is no real one. */
void *gg_real_load(void *_Atomic *slot, const char *name, void *ours, const char *lib);
/* gg_real_load's common case inline: a slot already filled costs one load
 * (acquire, as there) and no call; the REAL() of every hook file. */
static inline void *gg_real_get(void *_Atomic *slot, const char *name, void *ours, const char *lib)
{
	void *p = atomic_load_explicit(slot, memory_order_acquire);
	return GG_LIKELY(p != NULL) ? p : gg_real_load(slot, name, ours, lib);
}
/* What gg_real_load calls at a slot's first resolution, and the dlsym
 * override at a lookup in a plugin's handle: linkmap.c's gg_linkmap_follow,
 * set by its constructor (nothing before it). */
void gg_resolve_set_follow(void (*fn)(void));
void gg_resolve_follow(void);
/* Remembers real in *slot if it is still empty. */
void gg_real_offer(void *_Atomic *slot, void *real);
/* The dlsym override's answer for a name in table t (see hook_dlsym.c). */
void *gg_sym_wrap(const struct gg_sym *t, size_t n, const char *name, void *real);
int gg_sym_is_ours(const struct gg_sym *t, size_t n, void *fn);
/* 1 if name is one of the n names (a hook file's sub-list of hooks.h). */
int gg_sym_named(const char *const *names, size_t n, const char *name);

#endif
