/* gpuguard: pod scope's region file (include/gpuguard/region.h): the
 * process's attachment (its descriptor, mapping and slot), the OFD locks,
 * opening and vetting the file. Every process of a pod maps one small file
 * and charges its device memory to the device entries there, so
 * GPUGUARD_LIMIT is one budget for all of them (shared.c binds a device's
 * budget to its entry; the reservation itself is ceiling.c's single CAS on
 * the entry's `used` word).
 *
 * - A process owns its slot while it holds an OFD lock on the slot's byte;
 *   the kernel drops the lock when the process dies, in any PID namespace
 *   (DESIGN.md §4). Whoever next takes the lock returns what the slot held
 *   (shared_sweep.c). Locks are only ever tried (F_OFD_SETLK), never waited
 *   on, except the setup lock, which is retried for at most 2 s: its holder
 *   is alive (else the kernel would have dropped it) and only writes a few
 *   fields.
 * - The file is hostile input: checked before use (gpuguard_region_check),
 *   never a symlink, refused when its owner or mode is wider than ours; no
 *   index is ever read from it, and every subtraction saturates.
 * Any failure leaves the process in process scope, with one message. */
#define _GNU_SOURCE
#include "shared_file.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "options.h"

_Atomic int gg_shared_attach_state;
int gg_shared_fd = -1;
void *gg_shared_reg;
struct gpuguard_region_proc *gg_shared_me;
unsigned gg_shared_slot;
_Atomic int gg_shared_detached;
static dev_t reg_dev;
static ino_t reg_ino;

/* ---- locks ------------------------------------------------------------- */

/* Tries an OFD lock (type F_WRLCK or F_UNLCK) on one byte. 0 = done. */
int gg_shared_lock_byte(int fd, uint64_t off, short type)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)off, .l_len = 1};
	return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -1;
}

/* The setup lock (byte 0), tried for at most 2 s. */
int gg_shared_lock_setup(int fd)
{
	for (int i = 0; i < 2000; i++) {
		if (gg_shared_lock_byte(fd, 0, F_WRLCK) == 0)
			return 0;
		if (errno != EAGAIN && errno != EACCES)
			return -1;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	errno = ETIMEDOUT;
	return -1;
}

/* ---- opening the file -------------------------------------------------- */

void gg_shared_refuse(const char *why, int err)
{
	gg_log(GG_LOG_ERROR, "pod region %s: %s%s%s; using a per-process ceiling (as GPUGUARD_SCOPE=process)",
	       gg_opt.shared_path, why, err ? ": " : "", err ? strerror(err) : "");
}

static int in_my_groups(gid_t gid)
{
	if (gid == getegid())
		return 1;
	gid_t groups[256];
	int n = getgroups(256, groups);
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return 1;
	return 0;
}

/* Opens (creating it with our mode when absent) and vets the file. */
int gg_shared_open_region(void)
{
	const char *path = gg_opt.shared_path;
	mode_t mode = gg_opt.shared_mode;
	/* O_NOFOLLOW: a symlink planted at the path is refused (ELOOP). */
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd >= 0) {
		if (fchmod(fd, mode) != 0) { /* the umask must not narrow it */
			gg_shared_refuse("cannot set its mode", errno);
			close(fd);
			unlink(path);
			return -1;
		}
	} else if (errno == EEXIST) {
		fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0) {
		gg_shared_refuse(errno == ELOOP ? "is a symbolic link, refused" : "cannot open",
		                 errno == ELOOP ? 0 : errno);
		return -1;
	}
	struct stat st;
	char why[128];
	if (fstat(fd, &st) != 0) {
		gg_shared_refuse("cannot stat", errno);
	} else if (!S_ISREG(st.st_mode)) {
		gg_shared_refuse("is not a regular file", 0);
	} else if (st.st_uid != geteuid() && !((mode & 060) && in_my_groups(st.st_gid))) {
		snprintf(why, sizeof why,
		         "owned by uid %u, not us (uid %u), and GPUGUARD_SHARED_MODE=%04o shares nothing",
		         (unsigned)st.st_uid, (unsigned)geteuid(), (unsigned)mode);
		gg_shared_refuse(why, 0);
	} else if ((st.st_mode & 0777 & ~mode) != 0) {
		snprintf(why, sizeof why, "its mode %04o is wider than GPUGUARD_SHARED_MODE=%04o",
		         (unsigned)(st.st_mode & 0777), (unsigned)mode);
		gg_shared_refuse(why, 0);
	} else {
		reg_dev = st.st_dev;
		reg_ino = st.st_ino;
		return fd;
	}
	close(fd);
	return -1;
}

/* A second descriptor on our file: its OFD locks conflict with our main
 * one's, so other threads and our own slot are seen as holders. Through
 * /proc/self/fd it is the same inode even if the path was removed or
 * replaced since we attached; by path only where /proc is not mounted. */
int gg_shared_open_again(void)
{
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", gg_shared_fd);
	int fd = open(self, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		fd = open(gg_opt.shared_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_dev != reg_dev || st.st_ino != reg_ino)) {
		close(fd); /* replaced under us: not our region any more */
		fd = -1;
	}
	return fd;
}

/* Someone removed or replaced the file while we use it: processes that
 * start now get a new budget beside ours. Said once; nothing else to do. */
void gg_shared_check_path(void)
{
	static _Atomic int warned;
	struct stat st;
	if (lstat(gg_opt.shared_path, &st) == 0 && st.st_dev == reg_dev && st.st_ino == reg_ino)
		return;
	/* relaxed: a once-only flag guarding a message */
	if (!atomic_exchange_explicit(&warned, 1, memory_order_relaxed))
		gg_log(GG_LOG_WARN,
		       "pod region %s was removed or replaced while in use; this process keeps the budget it "
		       "attached to, but processes that start now get a separate one",
		       gg_opt.shared_path);
}
