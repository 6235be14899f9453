/* gpuguard: the names libgpuguard.so must export, no more, no less, read off
 * interpose/hooks.h's rows. Not compiled: the Makefile runs it through the
 * preprocessor into build/lib/exports.txt, one name a line, and
 * tests/scripts/exports.sh holds `nm -D` of the library to that list. */
#include "hooks.h"

#define NAME(name, ...) name
#define NAME_PTSZ(name, ptsz, ...) name ptsz

GG_CUDA_HOOKS(NAME, NAME_PTSZ)
GG_CUDA_HOOKS_ELSEWHERE(NAME)
GG_HIP_HOOKS(NAME)
GG_NVML_HOOKS(NAME)
GG_API_EXPORTS(NAME)
GG_LIBC_EXPORTS(NAME)
