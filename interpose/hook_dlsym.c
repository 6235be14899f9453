/* gpuguard: the dlsym override. cudart, XLA and friends reach the driver by
 * dlopen + dlsym, never by symbol binding (DESIGN.md §1), so a lookup of a
 * governed name in libcuda's handle must return our wrapper. RTLD_NEXT
 * lookups from other libraries are forwarded by a tail jump, so glibc still
 * sees *their* return address and resolves relative to them. */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "hook_cuda.h"
#include "hook_hip.h"
#include "hook_nvml.h"
#include "init.h"
#include "log.h"
#include "resolve.h"

/* Reached from the assembly below only, so declared here, not in a header. */
void *gg_dlsym_hook(void *handle, const char *name);

/* Whether we govern name (a row of hooks.h): wrap_symbol with no real
 * pointer offers nothing and answers ours or NULL. */
static int governed(const char *name)
{
	if (name[0] == 'c' && name[1] == 'u')
		return gg_cuda_wrap_symbol(name, NULL) != NULL;
	if (name[0] == 'h' && name[1] == 'i' && name[2] == 'p')
		return gg_hip_wrap_symbol(name, NULL) != NULL;
	if (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l')
		return gg_nvml_wrap_symbol(name, NULL) != NULL;
	return 0;
}

static _Atomic int warned_namespace;

/* A driver loaded by dlmopen into another link-map namespace is a second
 * copy, with its own contexts and memory; our wrappers call the base
 * namespace's copy and cannot stand in front of it (issue 25, item 1: 8 GiB
 * through such a handle under a 1 GiB ceiling). So its governed entry
 * points are not handed out (1): the lookup fails as for a missing symbol,
 * and the first refusal says why. Its other entry points are its own, and
 * so are the calls that change its current context (-1); 0: not another
 * namespace's, or not governed. */
static int refused_in_namespace(void *handle, const char *name)
{
	Lmid_t lmid = LM_ID_BASE;
	if (!governed(name) || dlinfo(handle, RTLD_DI_LMID, &lmid) != 0 || lmid == LM_ID_BASE)
		return 0;
	/* The calls that change the current context (or HIP's current device)
	 * are ours only to keep our cache of the base copy's (hook_cuda.c,
	 * hook_hip.c): the other copy's are its own, handed out unwrapped
	 * (-1). */
	if (gg_cuda_ctx_symbol(name) || gg_hip_dev_symbol(name))
		return -1;
	/* relaxed: only decides who prints the one line */
	if (!atomic_exchange_explicit(&warned_namespace, 1, memory_order_relaxed))
		gg_log(GG_LOG_WARN,
		       "%s looked up in a library loaded by dlmopen into link-map namespace %ld: not handed out "
		       "(gpuguard governs the driver of the base namespace only; every governed entry point of "
		       "another namespace's copy is refused)",
		       name, (long)lmid);
	return 1;
}

/* Everything but RTLD_NEXT arrives here from the trampoline. */
GG_NO_SANITIZE __attribute__((visibility("hidden"), used)) void *gg_dlsym_hook(void *handle, const char *name)
{
	void *real = gg_real_dlsym(handle, name);
	/* A host looks up a plugin's entry point in the plugin's own handle
	 * right after dlopen: the time to bind a RTLD_DEEPBIND plugin's imports
	 * to us (linkmap.c). Never for RTLD_DEFAULT: a sanitizer runtime looks
	 * up its interceptors that way before its own initialisation is done,
	 * when none of our instrumented code may run. */
	if (!gg_in_hook && handle != RTLD_DEFAULT)
		gg_resolve_follow();
	if (!real || !name || gg_in_hook)
		return real;
	if (handle != RTLD_DEFAULT) {
		int refused = refused_in_namespace(handle, name);
		if (refused)
			return refused > 0 ? NULL : real;
	}
	if (name[0] == 'c' && name[1] == 'u')
		return gg_cuda_wrap_symbol(name, real);
	if (name[0] == 'h' && name[1] == 'i' && name[2] == 'p')
		return gg_hip_wrap_symbol(name, real);
	if (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l')
		return gg_nvml_wrap_symbol(name, real);
	return real;
}

/* dlsym itself. A C function calling the real dlsym would make glibc see us
 * as the caller, and dlsym(RTLD_NEXT, ...) from another interposer would
 * resolve "next after gpuguard" instead of "next after them". So RTLD_NEXT
 * leaves by a tail jump with the caller's return address untouched. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        ".globl gg_dlsym_trampoline\n"
        ".hidden gg_dlsym_trampoline\n"
        ".p2align 4\n"
        "gg_dlsym_trampoline:\n"
        "dlsym:\n"
        "	.cfi_startproc\n"
        "	endbr64\n"
        "	cmpq $-1, %rdi\n" /* RTLD_NEXT is ((void *) -1l) */
        "	jne gg_dlsym_hook\n"
        "	movq gg_real_dlsym_ptr(%rip), %rax\n"
        "	testq %rax, %rax\n"
        "	jz 1f\n"
        "	jmp *%rax\n"
        "1:\n" /* first call: resolve, keeping the arguments */
        "	pushq %rdi\n"
        "	.cfi_adjust_cfa_offset 8\n"
        "	pushq %rsi\n"
        "	.cfi_adjust_cfa_offset 8\n"
        "	subq $8, %rsp\n"
        "	.cfi_adjust_cfa_offset 8\n"
        "	call gg_dlsym_resolve\n"
        "	addq $8, %rsp\n"
        "	.cfi_adjust_cfa_offset -8\n"
        "	popq %rsi\n"
        "	.cfi_adjust_cfa_offset -8\n"
        "	popq %rdi\n"
        "	.cfi_adjust_cfa_offset -8\n"
        "	testq %rax, %rax\n"
        "	jz 2f\n"
        "	jmp *%rax\n"
        "2:\n"
        "	ret\n" /* no real dlsym: behave as a failed lookup (NULL) */
        "	.cfi_endproc\n"
        ".size dlsym, .-dlsym\n"
        /* For objects of other link-map namespaces (linkmap.c): RTLD_NEXT
         * and RTLD_DEFAULT leave by a tail jump, so glibc resolves them in
         * the caller's own namespace; a handle goes to the hook. Installed
         * only after the real dlsym was resolved (the fallback is the
         * plain trampoline). */
        ".globl gg_dlsym_foreign\n"
        ".hidden gg_dlsym_foreign\n"
        ".type gg_dlsym_foreign, @function\n"
        ".p2align 4\n"
        "gg_dlsym_foreign:\n"
        "	.cfi_startproc\n"
        "	endbr64\n"
        "	cmpq $-1, %rdi\n"
        "	je 1f\n"
        "	testq %rdi, %rdi\n"
        "	jne gg_dlsym_hook\n"
        "1:\n"
        "	movq gg_real_dlsym_ptr(%rip), %rax\n"
        "	testq %rax, %rax\n"
        "	jz gg_dlsym_trampoline\n"
        "	jmp *%rax\n"
        "	.cfi_endproc\n"
        ".size gg_dlsym_foreign, .-gg_dlsym_foreign\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, %function\n"
        ".globl gg_dlsym_trampoline\n"
        ".hidden gg_dlsym_trampoline\n"
        ".p2align 2\n"
        "gg_dlsym_trampoline:\n"
        "dlsym:\n"
        "	.cfi_startproc\n"
        "	cmn x0, #1\n"
        "	b.ne gg_dlsym_hook\n"
        "	adrp x16, gg_real_dlsym_ptr\n"
        "	ldr x16, [x16, :lo12:gg_real_dlsym_ptr]\n"
        "	cbz x16, 1f\n"
        "	br x16\n"
        "1:\n"
        "	stp x29, x30, [sp, #-32]!\n"
        "	.cfi_def_cfa_offset 32\n"
        "	.cfi_offset 29, -32\n"
        "	.cfi_offset 30, -24\n"
        "	stp x0, x1, [sp, #16]\n"
        "	bl gg_dlsym_resolve\n"
        "	mov x16, x0\n"
        "	ldp x0, x1, [sp, #16]\n"
        "	ldp x29, x30, [sp], #32\n"
        "	.cfi_def_cfa_offset 0\n"
        "	cbz x16, 2f\n"
        "	br x16\n"
        "2:\n"
        "	mov x0, #0\n"
        "	ret\n"
        "	.cfi_endproc\n"
        ".size dlsym, .-dlsym\n"
        /* as on x86-64: RTLD_NEXT (-1) and RTLD_DEFAULT (0) tail-jump */
        ".globl gg_dlsym_foreign\n"
        ".hidden gg_dlsym_foreign\n"
        ".type gg_dlsym_foreign, %function\n"
        ".p2align 2\n"
        "gg_dlsym_foreign:\n"
        "	.cfi_startproc\n"
        "	cmn x0, #1\n"
        "	b.eq 1f\n"
        "	cbz x0, 1f\n"
        "	b gg_dlsym_hook\n"
        "1:\n"
        "	adrp x16, gg_real_dlsym_ptr\n"
        "	ldr x16, [x16, :lo12:gg_real_dlsym_ptr]\n"
        "	cbz x16, 2f\n"
        "	br x16\n"
        "2:\n"
        "	b gg_dlsym_trampoline\n"
        "	.cfi_endproc\n"
        ".size gg_dlsym_foreign, .-gg_dlsym_foreign\n");
#else
#error "gpuguard's dlsym trampoline supports x86-64 and aarch64"
#endif
