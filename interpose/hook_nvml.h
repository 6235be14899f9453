/* gpuguard: the NVML hooks (hook_nvml.c), as the dlsym override (hook_dlsym.c)
 * asks for them. */
#ifndef GG_HOOK_NVML_H
#define GG_HOOK_NVML_H

/* If name is a function we govern, records real as its real pointer and
 * returns our wrapper; else returns real unchanged. */
void *gg_nvml_wrap_symbol(const char *name, void *real);
int gg_nvml_is_ours(void *fn);

#endif
