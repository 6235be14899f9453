/* gpuguard: finding the real functions behind our hooks. glibc's own dlsym
 * (dlvsym), the next definition after us, and the slots that cache real
 * pointers, pinning the objects they point into. The dlsym override itself
 * is hook_dlsym.c; the hook files call down into this file. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "resolve.h"
#include "base.h"
#include "log.h"

typedef void *(*dlsym_fn)(void *, const char *);

/* Read by the assembly trampoline (hook_dlsym.c); written once, by whoever
 * resolves first (every resolver stores the same value). */
__attribute__((visibility("hidden"))) void *_Atomic gg_real_dlsym_ptr;

GG_NO_SANITIZE __attribute__((visibility("hidden"), used)) void *gg_dlsym_resolve(void)
{
	/* acquire: pairs with the release store below. */
	void *p = atomic_load_explicit(&gg_real_dlsym_ptr, memory_order_acquire);
	if (p)
		return p;
	/* dlvsym is not ours, so this cannot recurse. GLIBC_2.34 is where dlsym
	 * moved into libc; the older version names cover older glibc. */
	static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
	for (unsigned i = 0; i < sizeof(versions) / sizeof(versions[0]) && !p; i++)
		p = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
	/* release: the function pointer is plain data; publishing it this way
	 * keeps TSan informed and costs nothing on x86. */
	atomic_store_explicit(&gg_real_dlsym_ptr, p, memory_order_release);
	return p;
}

GG_NO_SANITIZE void *gg_real_dlsym(void *handle, const char *name)
{
	dlsym_fn f = (dlsym_fn)gg_dlsym_resolve();
	return f ? f(handle, name) : NULL;
}

/* A real pointer we cache must stay valid for the life of the process: a
 * program that probes for a GPU (dlopen, a call, dlclose) and then loads the
 * driver for real would otherwise have us jump into an unmapped library, or
 * into whatever was mapped there next (issue 10, finding 1). So the first
 * pointer cached into an object takes one reference on that object, which is
 * never dropped: the application's dlclose then leaves it loaded, and its
 * next dlopen gets the same mapping back. A handful of objects at most
 * (libcuda, libamdhip64, libnvidia-ml); a full list only costs a second
 * dlopen reference, which is harmless. */
#define MAX_PINNED 16
static void *_Atomic pinned[MAX_PINNED];

static void pin_object_of(void *fn)
{
	Dl_info info;
	if (!fn || !dladdr(fn, &info) || !info.dli_fbase || !info.dli_fname || !info.dli_fname[0])
		return;
	for (int i = 0; i < MAX_PINNED; i++) {
		/* acquire: pairs with the release CAS below; a base seen here
		 * was pinned by whoever stored it. */
		void *b = atomic_load_explicit(&pinned[i], memory_order_acquire);
		if (b == info.dli_fbase)
			return;
		if (b)
			continue;
		/* RTLD_NOLOAD: a reference on what is loaded, never a load. */
		void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			return;
		void *expect = NULL;
		/* release: orders the dlopen before the base is published. A
		 * lost race leaves an extra reference, never a missing one. */
		if (atomic_compare_exchange_strong_explicit(&pinned[i], &expect, info.dli_fbase, memory_order_release,
		                                            memory_order_acquire) ||
		    expect == info.dli_fbase)
			return;
		/* another object took this slot: try the next with our reference held */
	}
}

void *gg_resolve_next(const char *name, const char *lib)
{
	void *p = gg_real_dlsym(RTLD_NEXT, name);
	if (p || !lib)
		return p;
	/* The application may have opened the library RTLD_LOCAL; find it by
	 * soname without loading anything new. */
	void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	p = gg_real_dlsym(h, name);
	dlclose(h); /* RTLD_NOLOAD took a reference; the library stays loaded */
	return p;
}

/* gg_linkmap_follow, handed down by linkmap.c's constructor: linkmap.c
 * calls the hook files and the dlsym trampoline, which call us, so we
 * cannot call it by name.
 * relaxed: a code pointer set once to a function that is always there;
 * before it is set, following would do nothing (linkmap.c is not ready). */
static void (*_Atomic follow)(void);

void gg_resolve_set_follow(void (*fn)(void))
{
	atomic_store_explicit(&follow, fn, memory_order_relaxed);
}

GG_NO_SANITIZE void gg_resolve_follow(void)
{
	void (*fn)(void) = atomic_load_explicit(&follow, memory_order_relaxed);
	if (fn)
		fn();
}

void *gg_real_load(void *_Atomic *slot, const char *name, void *ours, const char *lib)
{
	/* acquire/release: a code pointer is published like any data; whoever
	 * loads it sees the library it points into fully relocated, and TSan can
	 * follow the hand-over. The slot may already hold the exact pointer the
	 * application was given by our dlsym or cuGetProcAddress override. */
	void *p = atomic_load_explicit(slot, memory_order_acquire);
	if (GG_LIKELY(p != NULL))
		return p;
	p = gg_resolve_next(name, lib);
	if (p == ours)
		p = NULL; /* never call ourselves */
	/* A first call through this hook: the process has reached the driver,
	 * so look at what binds around us (linkmap.c). Once per slot. */
	gg_resolve_follow();
	if (p) {
		atomic_store_explicit(&gg_gpu_touched, 1, memory_order_relaxed);
		gg_watch_exit();  /* once: from here on, exit() is seen (base.h) */
		gg_first_call();  /* what initialisation held back (log.c) */
		pin_object_of(p); /* before anyone can use the pointer */
		atomic_store_explicit(slot, p, memory_order_release);
	}
	return p;
}

void gg_real_offer(void *_Atomic *slot, void *real)
{
	/* acquire: pairs with the release below; a slot already filled needs
	 * nothing (its object is pinned), the common case on every lookup. */
	if (atomic_load_explicit(slot, memory_order_acquire) || !real)
		return;
	atomic_store_explicit(&gg_gpu_touched, 1, memory_order_relaxed);
	gg_watch_exit(); /* as in gg_real_load */
	gg_first_call();
	pin_object_of(real);
	void *expect = NULL;
	/* release: as in gg_real_load. A second, different pointer for the same
	 * variant keeps the first: both implement the same ABI. */
	atomic_compare_exchange_strong_explicit(slot, &expect, real, memory_order_release, memory_order_relaxed);
}

int gg_sym_is_ours(const struct gg_sym *t, size_t n, void *fn)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].ours == fn)
			return 1;
	return 0;
}

int gg_sym_named(const char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(name, names[i]) == 0)
			return 1;
	return 0;
}

void *gg_sym_wrap(const struct gg_sym *t, size_t n, const char *name, void *real)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(name, t[i].name) != 0)
			continue;
		if (real == t[i].ours) {
			/* The lookup found us (RTLD_DEFAULT, or a handle whose scope
			 * includes the preload). Answer as if we were not there: ours
			 * only if a real definition exists behind us. */
			void *next = gg_real_dlsym(RTLD_NEXT, name);
			if (!next)
				return NULL;
			gg_real_offer(t[i].real, next);
			return real;
		}
		gg_real_offer(t[i].real, real);
		return t[i].ours;
	}
	return real;
}
