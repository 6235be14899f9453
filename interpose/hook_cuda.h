/* gpuguard: the CUDA hooks (hook_cuda.c), as the dlsym override (hook_dlsym.c)
 * asks for them. */
#ifndef GG_HOOK_CUDA_H
#define GG_HOOK_CUDA_H

/* If name is a function we govern, records real as its real pointer and
 * returns our wrapper; else returns real unchanged. */
void *gg_cuda_wrap_symbol(const char *name, void *real);
int gg_cuda_is_ours(void *fn);
/* 1 if name is one of the calls that change the current context
 * (hooks.h's GG_CUDA_CTX_HOOKS). */
int gg_cuda_ctx_symbol(const char *name);

#endif
