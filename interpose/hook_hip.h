/* gpuguard: the HIP hooks (hook_hip.c), as the dlsym override (hook_dlsym.c)
 * asks for them. */
#ifndef GG_HOOK_HIP_H
#define GG_HOOK_HIP_H

/* If name is a function we govern, records real as its real pointer and
 * returns our wrapper; else returns real unchanged. */
void *gg_hip_wrap_symbol(const char *name, void *real);
int gg_hip_is_ours(void *fn);
/* 1 if name is one of the calls that may change the current device
 * (hooks.h's GG_HIP_DEV_HOOKS). */
int gg_hip_dev_symbol(const char *name);

#endif
