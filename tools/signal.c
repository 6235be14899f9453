/* gpuguard command: GPUGUARD_DUMP_SIGNAL read exactly as the library reads
 * it, so `gpuguard dump` sends the signal the library listens on. Written
 * from the library's rules (interpose/options.c), not shared with it:
 * tools/ never includes interpose/. tests/scripts/dump_target.sh feeds one
 * list of names to both and compares. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

int gg_signal_parse(const char *s, int *out)
{
	/* The library's names, case-sensitive, each also with "SIG" before it. */
	static const struct {
		const char *name;
		int sig;
	} names[] = {{"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"USR1", SIGUSR1},
	             {"USR2", SIGUSR2},     {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},   {"TERM", SIGTERM},
	             {"CHLD", SIGCHLD},     {"CONT", SIGCONT}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
	             {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
	             {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
	             {"PWR", SIGPWR},       {"SYS", SIGSYS}};
	if (!s || !*s)
		return -1;
	if (isdigit((unsigned char)*s)) {
		/* A decimal number 0..SIGRTMAX, never KILL or STOP; 0 = off. */
		char *end;
		errno = 0;
		long v = strtol(s, &end, 10);
		if (errno || *end || v < 0 || v > SIGRTMAX || v == SIGKILL || v == SIGSTOP)
			return -1;
		*out = (int)v;
		return 0;
	}
	if (!strncmp(s, "SIG", 3))
		s += 3;
	if (!strncmp(s, "RTMIN+", 6) && isdigit((unsigned char)s[6])) {
		/* The library reads the offset with atoi: leading digits, the rest
		 * ignored. Same here, without atoi's overflow: an offset past
		 * SIGRTMAX is refused. */
		long n = 0;
		for (const char *p = s + 6; isdigit((unsigned char)*p); p++) {
			n = n * 10 + (*p - '0');
			if (n > SIGRTMAX)
				return -1;
		}
		if (SIGRTMIN + n > SIGRTMAX)
			return -1;
		*out = SIGRTMIN + (int)n;
		return 0;
	}
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(s, names[i].name)) {
			*out = names[i].sig;
			return 0;
		}
	return -1;
}
