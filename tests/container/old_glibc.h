/* gpuguard: what the container run (tests/scripts/container.sh) builds here
 * to run inside a Debian 11 root (glibc 2.31): the simulated driver and the
 * image's own preload library. The library's own binding of glibc symbols
 * to their oldest versions, plus dlsym, which the library does not bind
 * (it defines its own) and the simulator calls. Before glibc 2.34 dlsym
 * lives in libdl.so.2, which these objects therefore name (-l:libdl.so.2),
 * as they name librt.so.1 and libpthread.so.0. */
#include "../../interpose/glibc_compat.h"
#ifdef GG_GLIBC_BASE
__asm__(".symver dlsym,dlsym@" GG_GLIBC_BASE);
/* the simulated card's shared state (tests/sim/simcard.c): librt.so.1's
 * shm_open before 2.34, and libpthread's robust mutexes, which came at 2.12
 * on x86_64 */
__asm__(".symver shm_open,shm_open@" GG_GLIBC_BASE);
__asm__(".symver shm_unlink,shm_unlink@" GG_GLIBC_BASE);
__asm__(".symver pthread_mutexattr_setpshared,pthread_mutexattr_setpshared@" GG_GLIBC_BASE);
#if defined(__x86_64__)
__asm__(".symver pthread_mutexattr_setrobust,pthread_mutexattr_setrobust@GLIBC_2.12");
__asm__(".symver pthread_mutex_consistent,pthread_mutex_consistent@GLIBC_2.12");
#else
__asm__(".symver pthread_mutexattr_setrobust,pthread_mutexattr_setrobust@" GG_GLIBC_BASE);
__asm__(".symver pthread_mutex_consistent,pthread_mutex_consistent@" GG_GLIBC_BASE);
#endif
#endif
