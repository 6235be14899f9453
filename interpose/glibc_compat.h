/* gpuguard: old images. Every object of the library is compiled with
 * -include of this header, which binds the glibc functions whose default
 * version moved past 2.17 to the oldest version that has them, so the
 * library loads into any glibc >= 2.17 (CentOS 7, UBI 8, Ubuntu 20.04).
 * A preloaded library that needs a newer symbol version stops every process
 * of the container from starting, shells included (issue 10, finding 4).
 * tests/scripts/exports.sh checks the highest version the library needs. */
#ifndef GPUGUARD_GLIBC_COMPAT_H
#define GPUGUARD_GLIBC_COMPAT_H

#if defined(__GLIBC__) || defined(__gnu_linux__)

/* The first version of each architecture's ABI: every symbol glibc had at
 * 2.17 carries it (aarch64 support began at 2.17). */
#if defined(__x86_64__)
#define GG_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define GG_GLIBC_BASE "GLIBC_2.17"
#endif

#ifdef GG_GLIBC_BASE
#define GG_SYMVER_BASE(sym) __asm__(".symver " #sym "," #sym "@" GG_GLIBC_BASE);

/* libdl and libpthread moved into libc at 2.34 (new default versions,
 * GLIBC_2.34); the old versions stay as compatibility symbols there, and
 * before 2.34 they live in libdl.so.2 / libpthread.so.0, which the library
 * therefore lists as needed (Makefile). */
GG_SYMVER_BASE(dlopen)
GG_SYMVER_BASE(dlclose)
GG_SYMVER_BASE(dladdr)
/* dladdr1 came at 2.3.3, after x86-64's base version (pystack.c). */
#if defined(__x86_64__)
__asm__(".symver dladdr1,dladdr1@GLIBC_2.3.3");
#else
GG_SYMVER_BASE(dladdr1)
#endif
GG_SYMVER_BASE(dlvsym)
GG_SYMVER_BASE(dlerror)
/* dlinfo came at 2.3.3 on x86-64 (the base version elsewhere) */
#if defined(__x86_64__)
__asm__(".symver dlinfo,dlinfo@GLIBC_2.3.3");
#else
GG_SYMVER_BASE(dlinfo)
#endif
GG_SYMVER_BASE(dl_iterate_phdr)
GG_SYMVER_BASE(pthread_create)
GG_SYMVER_BASE(pthread_join)
GG_SYMVER_BASE(pthread_detach)
GG_SYMVER_BASE(pthread_kill)
GG_SYMVER_BASE(pthread_once)
GG_SYMVER_BASE(pthread_key_create)
GG_SYMVER_BASE(pthread_key_delete)
GG_SYMVER_BASE(pthread_getspecific)
GG_SYMVER_BASE(pthread_setspecific)
GG_SYMVER_BASE(pthread_mutex_trylock)
GG_SYMVER_BASE(pthread_mutexattr_init)
GG_SYMVER_BASE(pthread_mutexattr_settype)
GG_SYMVER_BASE(pthread_mutexattr_destroy)
GG_SYMVER_BASE(pthread_attr_getstack)
GG_SYMVER_BASE(pthread_attr_setstacksize)
GG_SYMVER_BASE(pthread_getattr_np)
GG_SYMVER_BASE(pthread_sigmask)
GG_SYMVER_BASE(pthread_rwlock_rdlock)
GG_SYMVER_BASE(pthread_rwlock_wrlock)
GG_SYMVER_BASE(pthread_rwlock_unlock)
GG_SYMVER_BASE(pthread_cond_wait)
GG_SYMVER_BASE(pthread_cond_timedwait)
GG_SYMVER_BASE(pthread_cond_signal)
GG_SYMVER_BASE(pthread_cond_broadcast)
GG_SYMVER_BASE(sem_init)
GG_SYMVER_BASE(sem_wait)
GG_SYMVER_BASE(sem_post)
#if defined(__x86_64__)
/* memcpy@GLIBC_2.14 only exists since 2.14; the 2.2.5 one is memmove-safe. */
GG_SYMVER_BASE(memcpy)
#endif
#undef GG_SYMVER_BASE

/* stat, fstat and lstat are functions only since 2.33 (before, inline
 * wrappers of __xstat): the library calls the system calls (compat.c).
 * Nothing is included here, so each file's own _GNU_SOURCE still counts. */
struct stat;
int gg_compat_fstat(int fd, struct stat *st);
int gg_compat_lstat(const char *path, struct stat *st);
int gg_compat_stat(const char *path, struct stat *st);
#define fstat(fd, st) gg_compat_fstat(fd, st)
#define lstat(path, st) gg_compat_lstat(path, st)
#define stat(path, st) gg_compat_stat(path, st)
#endif /* GG_GLIBC_BASE */

#endif /* glibc */

#endif
