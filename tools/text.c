/* gpuguard command: what every output shares so a hostile string cannot
 * reach a terminal or a parser as a control: one UTF-8 reader, the terminal
 * text filter (C0, DEL, C1 and bytes that are not UTF-8 become '?'), the
 * error and warning lines built on it, the input files opened without
 * hanging on a FIFO, and the report file written beside its path and
 * renamed into place, never through a symlink. */
#define _GNU_SOURCE /* getrandom */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gpuguard/utf8.h>

#include "tool.h"

size_t gg_text_next(const char *p, const char *end, int *safe)
{
	unsigned char c = (unsigned char)*p;
	if (c < 0x80) {
		*safe = c >= 0x20 && c != 0x7f;
		return 1;
	}
	size_t n = gpuguard_utf8_len((const unsigned char *)p, (size_t)(end - p));
	if (!n) { /* a raw 0x9B is CSI to a terminal in 8-bit mode */
		*safe = 0;
		return 1;
	}
	/* U+0080..U+009F, the C1 controls, are C2 80..C2 9F in UTF-8. */
	*safe = !(n == 2 && c == 0xC2 && (unsigned char)p[1] < 0xA0);
	return n;
}

void gg_put_textn(FILE *f, const char *s, size_t len)
{
	const char *end = s + len;
	while (s < end) {
		int safe;
		size_t n = gg_text_next(s, end, &safe);
		if (safe)
			fwrite(s, 1, n, f);
		else
			fputc('?', f);
		s += n;
	}
}

void gg_put_text(FILE *f, const char *s)
{
	if (s)
		gg_put_textn(f, s, strlen(s));
}

void gg_text_copy(char *out, size_t outlen, const char *s)
{
	size_t o = 0;
	const char *end = s + strlen(s);
	if (!outlen)
		return;
	while (s < end) {
		int safe;
		size_t n = gg_text_next(s, end, &safe);
		size_t w = safe ? n : 1;
		if (o + w >= outlen)
			break; /* never half a character */
		if (safe)
			memcpy(out + o, s, n);
		else
			out[o] = '?';
		o += w;
		s += n;
	}
	out[o] = '\0';
}

static void vmsg(const char *kind, const char *fmt, va_list ap)
{
	char msg[4 * GG_MAX_ERR + 8192];
	vsnprintf(msg, sizeof msg, fmt, ap);
	/* One write of the whole line: it is not interleaved with another. */
	char line[sizeof msg + 32];
	int n = snprintf(line, sizeof line, "gpuguard: %s", kind);
	if (n < 0 || (size_t)n >= sizeof line)
		return;
	gg_text_copy(line + n, sizeof line - (size_t)n - 1, msg);
	strcat(line, "\n");
	fputs(line, stderr);
}

void gg_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("error: ", fmt, ap);
	va_end(ap);
}

void gg_warning(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("warning: ", fmt, ap);
	va_end(ap);
}

void gg_note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
}

/* ---- report files ---- */

/* The temporary being written, for the stop handler: a Ctrl-C mid-report
 * leaves nothing behind. One at a time (the command writes one file). */
/* volatile: read by a signal handler on this same thread; a pointer store
 * is one instruction on every target we build for. */
static char *volatile pending_tmp;
static struct sigaction saved_int, saved_term, saved_hup;

static void on_stop_unlink(int sig)
{
	char *t = pending_tmp;
	if (t)
		unlink(t); /* async-signal-safe */
	signal(sig, SIG_DFL);
	raise(sig); /* die of the signal, as without us */
}

static void guard_tmp(char *tmp)
{
	pending_tmp = tmp;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop_unlink;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &saved_int);
	sigaction(SIGTERM, &sa, &saved_term);
	sigaction(SIGHUP, &sa, &saved_hup);
}

/* Before the temporary is renamed or removed: the handler must not unlink
 * a name that is (or is about to be) someone else's. */
static void unguard_tmp(void)
{
	if (!pending_tmp)
		return;
	sigaction(SIGINT, &saved_int, NULL);
	sigaction(SIGTERM, &saved_term, NULL);
	sigaction(SIGHUP, &saved_hup, NULL);
	pending_tmp = NULL;
}

int gg_infile_open(const char *path, const char *shown, int nofollow, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0));
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", shown, strerror(e));
		errno = e;
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st)) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", shown, strerror(e));
		close(fd);
		errno = e;
		return -1;
	}
	struct stat in;
	/* The command's own standard input, named as /dev/stdin: a pipe the
	 * user set up on purpose (`cat dump | gpuguard report /dev/stdin`). */
	int is_stdin = S_ISFIFO(st.st_mode) && !fstat(0, &in) && in.st_dev == st.st_dev && in.st_ino == st.st_ino;
	if (!S_ISREG(st.st_mode) && !is_stdin) {
		snprintf(err, errlen, "%s: not a regular file (a %s); refusing to read it", shown,
		         S_ISFIFO(st.st_mode)                         ? "FIFO"
		         : S_ISDIR(st.st_mode)                        ? "directory"
		         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "device"
		         : S_ISSOCK(st.st_mode)                       ? "socket"
		                                                      : "special file");
		close(fd);
		errno = 0;
		return -1;
	}
	/* A regular file never blocks; clearing the flag only keeps reads
	 * plain for whoever inherits the descriptor. */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

/* What is at path now: 0 nothing or a regular file we may replace, -1 with
 * the reason in err. lstat: a symlink is seen as itself, never followed. */
static int check_target(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st)) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (S_ISLNK(st.st_mode)) {
		snprintf(err, errlen, "%s: is a symbolic link; not writing through it (remove it or name another file)",
		         path);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: exists and is not a regular file; not replacing it", path);
		return -1;
	}
	/* A file we could not open for writing stays as it is, as with `>`. */
	if (faccessat(AT_FDCWD, path, W_OK, AT_EACCESS)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int gg_outfile_open(struct gg_outfile *o, const char *path, char *err, size_t errlen)
{
	memset(o, 0, sizeof *o);
	if (errlen)
		err[0] = '\0';
	if (!*path) {
		snprintf(err, errlen, "an empty file name");
		return -1;
	}
	if (check_target(path, err, errlen))
		return -1;
	size_t plen = strlen(path);
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
	const char *base = path + dirlen;
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
		snprintf(err, errlen, "%s: not a file name", path);
		return -1;
	}
	o->path = path;
	o->tmp = malloc(plen + 64);
	if (!o->tmp) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	/* A hidden name in the same directory (so rename is atomic), created
	 * O_EXCL | O_NOFOLLOW: nothing planted there is opened or followed.
	 * Mode 0666 less the umask, as for any file a command creates. */
	for (int tries = 0; tries < 64; tries++) {
		unsigned long long r = 0;
		if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
			r = (unsigned long long)time(NULL) * 2654435761u ^ (unsigned long long)getpid() << 20 ^
			    (unsigned long long)tries;
		/* At most 200 bytes of the name: the temporary's stays under NAME_MAX. */
		snprintf(o->tmp, plen + 64, "%.*s.%.200s.%016llx.tmp", (int)dirlen, path, base, r);
		int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (fd < 0 && errno == EEXIST)
			continue;
		if (fd < 0) {
			snprintf(err, errlen, "%s: cannot create a file beside it: %s", path, strerror(errno));
			break;
		}
		guard_tmp(o->tmp);
		o->f = fdopen(fd, "w");
		if (!o->f) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			close(fd);
			unguard_tmp();
			unlink(o->tmp);
			break;
		}
		return 0;
	}
	if (!o->f && !err[0])
		snprintf(err, errlen, "%s: cannot find a free temporary name beside it", path);
	free(o->tmp);
	o->tmp = NULL;
	return -1;
}

void gg_outfile_abort(struct gg_outfile *o)
{
	if (o->f)
		fclose(o->f);
	unguard_tmp();
	if (o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	memset(o, 0, sizeof *o);
}

int gg_outfile_commit(struct gg_outfile *o, char *err, size_t errlen)
{
	int bad = ferror(o->f) || fflush(o->f);
	int saved = errno;
	if (fclose(o->f) && !bad) {
		bad = 1;
		saved = errno;
	}
	o->f = NULL;
	if (bad) {
		snprintf(err, errlen, "%s: writing: %s", o->path, strerror(saved ? saved : EIO));
		gg_outfile_abort(o);
		return -1;
	}
	/* Checked again: something may have been planted while we wrote.
	 * rename() replaces the directory entry itself, a symlink planted
	 * after this check included, and never writes through it. */
	if (check_target(o->path, err, errlen)) {
		gg_outfile_abort(o);
		return -1;
	}
	unguard_tmp();
	if (rename(o->tmp, o->path)) {
		snprintf(err, errlen, "%s: %s", o->path, strerror(errno));
		gg_outfile_abort(o);
		return -1;
	}
	free(o->tmp);
	memset(o, 0, sizeof *o);
	return 0;
}
