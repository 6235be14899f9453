/* gpuguard: the stat family as system calls, for glibc_compat.h: on glibc
 * before 2.33 fstat and lstat are not functions at all, so calling them would
 * need a symbol version an old image lacks. The kernel's struct stat is
 * glibc's on x86-64 and aarch64. */
#define _GNU_SOURCE
#include "glibc_compat.h" /* also where the build does not force it in */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int gg_compat_fstat(int fd, struct stat *st)
{
	return (int)syscall(SYS_fstat, fd, st);
}

int gg_compat_lstat(const char *path, struct stat *st)
{
	return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

int gg_compat_stat(const char *path, struct stat *st)
{
	return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st, 0);
}
