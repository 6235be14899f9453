/* gpuguard: what the container run (tests/scripts/container.sh) builds here
 * to run inside a Debian 11 root (glibc 2.31): the simulated driver and the
 * image's own preload library. The library's own binding of glibc symbols
 * to their oldest versions, plus dlsym, which the library does not bind
 * (it defines its own) and the simulator calls. Before glibc 2.34 dlsym
 * lives in libdl.so.2, which these objects therefore name (-l:libdl.so.2). */
#include "../../interpose/glibc_compat.h"
#ifdef GG_GLIBC_BASE
__asm__(".symver dlsym,dlsym@" GG_GLIBC_BASE);
#endif
