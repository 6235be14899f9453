/* gpuguard: objects that bind around the preload (issue 10, finding 10). A
 * plugin dlopened with RTLD_DEEPBIND resolves its imports in its own
 * dependency tree first, so its cuMemAlloc_v2 goes straight to libcuda and its
 * dlsym straight to libc, and LD_PRELOAD never sees either. So we follow the
 * link map: whenever it has grown (checked at our dlsym hook, which a host
 * reaches right after dlopen to find a plugin's entry point, and at start-up)
 * each new object's import slots for the names we govern are pointed at our
 * wrappers, exactly as the loader would have bound them without DEEPBIND.
 *
 * A slot is changed only when it is unbound (a lazy PLT stub inside the
 * object) or bound to the library that really defines the name (libcuda.so.1,
 * libamdhip64, libnvidia-ml.so.1, or libc for dlsym). A slot bound to anything
 * else, e.g. a program or an earlier preload that defines dlsym itself, is
 * that object's choice: it is left alone and named once on stderr, since
 * lookups through it are not governed (README "How the runtime is reached"). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "linkmap.h"
#include "base.h"
#include "hook_cuda.h"
#include "hook_hip.h"
#include "hook_nvml.h"
#include "log.h"
#include "pystack.h"
#include "resolve.h"

#if defined(__x86_64__)
#define R_GLOB_DAT R_X86_64_GLOB_DAT
#define R_JUMP_SLOT R_X86_64_JUMP_SLOT
#elif defined(__aarch64__)
#define R_GLOB_DAT R_AARCH64_GLOB_DAT
#define R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#endif

/* The trampoline's own entry (hook_dlsym.c), hidden, so taking its address
 * never goes through a GOT slot this file may be rewriting; and the one for
 * objects of other link-map namespaces (below). */
extern char gg_dlsym_trampoline[];
extern char gg_dlsym_foreign[];

/* Link-map generation last scanned (dl_iterate_phdr's adds + subs). Relaxed:
 * it only decides whether to scan again; a race scans twice, harmlessly. */
static _Atomic unsigned long long seen_generation;
static _Atomic int warned_foreign_dlsym;
/* Set by our constructor; relaxed: it guards only against being called
 * from a sanitizer runtime's own initialisation, long before. */
static _Atomic int ready;

__attribute__((constructor)) static void linkmap_ready(void)
{
	atomic_store_explicit(&ready, 1, memory_order_relaxed);
	gg_resolve_set_follow(gg_linkmap_follow);
}

struct scan {
	uintptr_t self_base;
	int self_seen;
	int index;
	int patched;
	int foreign; /* the object being scanned is outside the base namespace */
};

/* ---- objects in other link-map namespaces (issue 25, item 1) ----------
 * dlmopen gives a new namespace its own copy of every library, the driver
 * included, which our wrappers (bound to the base namespace's copy) cannot
 * stand in front of. An object there that calls its driver directly gets,
 * for each governed name, a stub that refuses (the runtime's NOT_SUPPORTED)
 * and says so once; its dlsym goes through gg_dlsym_foreign, which refuses
 * governed names looked up in its namespace's handles (hook_dlsym.c) and
 * passes RTLD_DEFAULT and RTLD_NEXT straight on, so they still resolve in
 * the caller's own namespace. */
static _Atomic int warned_foreign_call;

static int refuse_foreign(int rc)
{
	/* relaxed: only decides who prints the one line */
	if (!atomic_exchange_explicit(&warned_foreign_call, 1, memory_order_relaxed))
		gg_log(GG_LOG_WARN, "a library loaded by dlmopen into another link-map namespace called its own copy "
		                    "of the driver: every governed call of that copy is refused (gpuguard governs the "
		                    "driver of the base namespace only)");
	return rc;
}

/* Called through GOT slots of any governed prototype: the x86-64 and
 * aarch64 calling conventions let a function that reads no argument stand
 * for any of them. 801: CUDA_ERROR_NOT_SUPPORTED and hipErrorNotSupported;
 * 3: NVML_ERROR_NOT_SUPPORTED. */
static int refused_cuda(void)
{
	return refuse_foreign(801);
}
static int refused_hip(void)
{
	return refuse_foreign(801);
}
static int refused_nvml(void)
{
	return refuse_foreign(3);
}

static void *refusal_for(const char *name)
{
	if (name[0] == 'c' && name[1] == 'u')
		return gg_cuda_wrap_symbol(name, NULL) ? (void *)refused_cuda : NULL;
	if (name[0] == 'h' && name[1] == 'i' && name[2] == 'p')
		return gg_hip_wrap_symbol(name, NULL) ? (void *)refused_hip : NULL;
	if (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l')
		return gg_nvml_wrap_symbol(name, NULL) ? (void *)refused_nvml : NULL;
	return NULL;
}

/* Whether the object loaded at bias addr is in the base namespace, whose
 * chain is _r_debug's. Called under dl_iterate_phdr, which holds the
 * loader's lock: the chain cannot change under us. */
static int in_base_namespace(uintptr_t addr)
{
	for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next)
		if ((uintptr_t)l->l_addr == addr)
			return 1;
	return 0;
}

/* The basename of the object that defines addr, or "". */
static const char *object_name(const void *addr)
{
	Dl_info info;
	if (!addr || !dladdr(addr, &info) || !info.dli_fname)
		return "";
	const char *slash = strrchr(info.dli_fname, '/');
	return slash ? slash + 1 : info.dli_fname;
}

static int starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Is `owner` (a basename) the library that really defines `name`? */
static int real_provider(const char *name, const char *owner)
{
	if (name[0] == 'c' && name[1] == 'u')
		return starts_with(owner, "libcuda.so");
	if (name[0] == 'h' && name[1] == 'i' && name[2] == 'p')
		return starts_with(owner, "libamdhip64.so");
	if (name[0] == 'n' && name[1] == 'v')
		return starts_with(owner, "libnvidia-ml.so");
	return starts_with(owner, "libc.so") || starts_with(owner, "libdl.so");
}

/* Our function for an import named `name` currently bound to `real` (NULL:
 * unbound), or NULL if we do not govern the name. */
static void *ours_for(const char *name, void *real)
{
	if (strcmp(name, "dlsym") == 0)
		return gg_dlsym_trampoline;
	void *w = real;
	if (name[0] == 'c' && name[1] == 'u')
		w = gg_cuda_wrap_symbol(name, real);
	else if (name[0] == 'h' && name[1] == 'i' && name[2] == 'p')
		w = gg_hip_wrap_symbol(name, real);
	else if (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l')
		w = gg_nvml_wrap_symbol(name, real);
	return w && w != real ? w : NULL;
}

/* Stores fn into a GOT slot that may sit in the object's RELRO segment
 * (read-only once relocated): unprotect that page for the store. */
static void store_slot(void **slot, void *fn, uintptr_t relro_lo, uintptr_t relro_hi)
{
	uintptr_t a = (uintptr_t)slot;
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t page = a & ~(uintptr_t)(pg - 1);
	int in_relro = a >= relro_lo && a < relro_hi;
	if (in_relro && mprotect((void *)page, (size_t)pg, PROT_READ | PROT_WRITE) != 0)
		return;
	/* release: a thread calling through the slot sees either the old
	 * function or ours, each whole, and ours with its real pointer offered
	 * (gg_real_offer above happened before this store). */
	__atomic_store_n(slot, fn, __ATOMIC_RELEASE);
	if (in_relro)
		mprotect((void *)page, (size_t)pg, PROT_READ);
}

static void patch_relocs(struct dl_phdr_info *info, const ElfW(Rela) * rel, size_t n, const ElfW(Sym) * symtab,
                         const char *strtab, size_t strsz, uintptr_t lo, uintptr_t hi, uintptr_t relro_lo,
                         uintptr_t relro_hi, struct scan *sc)
{
	for (size_t i = 0; i < n; i++) {
		unsigned type = (unsigned)ELF64_R_TYPE(rel[i].r_info);
		if (type != R_GLOB_DAT && type != R_JUMP_SLOT)
			continue;
		const ElfW(Sym) *sym = &symtab[ELF64_R_SYM(rel[i].r_info)];
		if (sym->st_shndx != SHN_UNDEF || sym->st_name >= strsz)
			continue; /* only imports: what the object defines is its own */
		const char *name = strtab + sym->st_name;
		if (!((name[0] == 'c' && name[1] == 'u') || (name[0] == 'h' && name[1] == 'i') ||
		      (name[0] == 'n' && name[1] == 'v') || strcmp(name, "dlsym") == 0))
			continue;
		void **slot = (void **)(info->dlpi_addr + rel[i].r_offset);
		void *cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
		uintptr_t c = (uintptr_t)cur;
		int unbound = c >= lo && c < hi; /* a lazy PLT stub of the object itself */
		if (!unbound) {
			if (!cur || (strcmp(name, "dlsym") == 0
			                 ? cur == (void *)gg_dlsym_trampoline || cur == (void *)gg_dlsym_foreign
			                 : gg_cuda_is_ours(cur) || gg_hip_is_ours(cur) || gg_nvml_is_ours(cur) ||
			                       cur == (void *)refused_cuda || cur == (void *)refused_hip ||
			                       cur == (void *)refused_nvml))
				continue; /* already ours */
			const char *owner = object_name(cur);
			if (!real_provider(name, owner)) {
				if (strcmp(name, "dlsym") == 0 &&
				    !atomic_exchange_explicit(&warned_foreign_dlsym, 1, memory_order_relaxed))
					gg_log(GG_LOG_WARN,
					       "%s binds dlsym to %s, ahead of gpuguard: driver lookups through it are "
					       "not governed",
					       *info->dlpi_name ? info->dlpi_name : "the program",
					       *owner ? owner : "?");
				continue;
			}
		}
		/* never offer another namespace's pointer to our wrappers */
		void *ours = !sc->foreign                 ? ours_for(name, unbound ? NULL : cur)
		             : strcmp(name, "dlsym") == 0 ? (void *)gg_dlsym_foreign
		                                          : refusal_for(name);
		if (!ours)
			continue;
		store_slot(slot, ours, relro_lo, relro_hi);
		sc->patched++;
	}
}

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct scan *sc = arg;
	int index = sc->index++;
	if (info->dlpi_addr == sc->self_base) {
		sc->self_seen = 1;
		return 0;
	}
	/* The program (first) and everything loaded after us. Objects between
	 * them are preloads ahead of us (a sanitizer runtime): theirs to bind. */
	if (index != 0 && !sc->self_seen)
		return 0;
	sc->foreign = index != 0 && !in_base_namespace(info->dlpi_addr);
	const ElfW(Dyn) *dyn = NULL;
	uintptr_t lo = UINTPTR_MAX, hi = 0, relro_lo = 0, relro_hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
		else if (ph->p_type == PT_LOAD) {
			uintptr_t a = info->dlpi_addr + ph->p_vaddr;
			if (a < lo)
				lo = a;
			if (a + ph->p_memsz > hi)
				hi = a + ph->p_memsz;
		} else if (ph->p_type == PT_GNU_RELRO) {
			relro_lo = info->dlpi_addr + ph->p_vaddr;
			relro_hi = relro_lo + ph->p_memsz;
		}
	}
	if (!dyn)
		return 0;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	size_t strsz = 0, relasz = 0, pltsz = 0;
	const ElfW(Rela) *rela = NULL, *jmprel = NULL;
	int pltrel_is_rela = 1;
	/* glibc relocates .dynamic's pointers in place on these architectures;
	 * a value below the load address is still an offset. */
#define DPTR(d) ((uintptr_t)(d)->d_un.d_ptr < info->dlpi_addr ? info->dlpi_addr + (d)->d_un.d_ptr : (d)->d_un.d_ptr)
	for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB:
			symtab = (const ElfW(Sym) *)DPTR(d);
			break;
		case DT_STRTAB:
			strtab = (const char *)DPTR(d);
			break;
		case DT_STRSZ:
			strsz = d->d_un.d_val;
			break;
		case DT_RELA:
			rela = (const ElfW(Rela) *)DPTR(d);
			break;
		case DT_RELASZ:
			relasz = d->d_un.d_val;
			break;
		case DT_JMPREL:
			jmprel = (const ElfW(Rela) *)DPTR(d);
			break;
		case DT_PLTRELSZ:
			pltsz = d->d_un.d_val;
			break;
		case DT_PLTREL:
			pltrel_is_rela = d->d_un.d_val == DT_RELA;
			break;
		default:
			break;
		}
	}
#undef DPTR
	if (!symtab || !strtab || !strsz)
		return 0;
	if (rela && relasz)
		patch_relocs(info, rela, relasz / sizeof(ElfW(Rela)), symtab, strtab, strsz, lo, hi, relro_lo, relro_hi,
		             sc);
	if (jmprel && pltsz && pltrel_is_rela)
		patch_relocs(info, jmprel, pltsz / sizeof(ElfW(Rela)), symtab, strtab, strsz, lo, hi, relro_lo,
		             relro_hi, sc);
	return 0;
}

static int generation_of(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds + info->dlpi_subs;
	return 1; /* one object is enough: the counters are global */
}

/* glibc 2.35 and later chain one r_debug per namespace from the base one's
 * (r_version 2); dl_iterate_phdr shows only the caller's namespace. Our own
 * mirror of the chain, so an older glibc's headers still build it. */
struct r_debug_chain {
	struct r_debug base;
	struct r_debug_chain *r_next;
};

/* Each object of every other namespace, scanned as a dl_iterate_phdr entry
 * made from its ELF header (mapped at its load bias: a shared object's first
 * segment starts at address 0). Run inside a dl_iterate_phdr callback, so
 * under the loader's lock, with no chain changing under us. */
static int scan_other_namespaces(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	struct scan *sc = arg;
	if (_r_debug.r_version < 2)
		return 1; /* before glibc 2.35: not reachable (README "Not governed") */
	/* _r_debug is declared as the shorter struct r_debug: launder the
	 * pointer, or the compiler holds r_next to be out of its bounds */
	const struct r_debug_chain *base = (const struct r_debug_chain *)&_r_debug;
	__asm__("" : "+r"(base));
	for (const struct r_debug_chain *ns = base->r_next; ns; ns = ns->r_next)
		for (const struct link_map *l = ns->base.r_map; l; l = l->l_next) {
			const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)l->l_addr;
			if (!l->l_addr || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_type != ET_DYN)
				continue;
			struct dl_phdr_info one = {.dlpi_addr = l->l_addr,
			                           .dlpi_name = l->l_name,
			                           .dlpi_phdr = (const ElfW(Phdr) *)(l->l_addr + eh->e_phoff),
			                           .dlpi_phnum = eh->e_phnum};
			sc->self_seen = 1; /* every object there is after us */
			sc->index = 1;
			scan_one(&one, size, sc);
		}
	return 1; /* once */
}

void gg_linkmap_follow(void)
{
	/* relaxed: as in gg_in_hook; an inert copy binds nothing */
	if (!atomic_load_explicit(&ready, memory_order_relaxed) ||
	    atomic_load_explicit(&gg_inert, memory_order_relaxed))
		return;
	unsigned long long gen = 0;
	dl_iterate_phdr(generation_of, &gen);
	if (gen == atomic_load_explicit(&seen_generation, memory_order_relaxed))
		return;
	atomic_store_explicit(&seen_generation, gen, memory_order_relaxed);
	gg_pystack_recheck(); /* perhaps libpython, dlopen'ed by an embedder */
	Dl_info self;
	if (!dladdr((void *)gg_linkmap_follow, &self))
		return;
	struct scan sc = {(uintptr_t)self.dli_fbase, 0, 0, 0, 0};
	dl_iterate_phdr(scan_one, &sc);
	dl_iterate_phdr(scan_other_namespaces, &sc);
}
