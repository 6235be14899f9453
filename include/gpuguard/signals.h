/* gpuguard: GPUGUARD_DUMP_SIGNAL, read by one parser in the library (which
 * listens on it) and in the gpuguard command (which sends it), so the two
 * can never disagree on a value. Header-only, like region.h.
 *
 * Syntax: a name with or without "SIG" (USR2, SIGUSR2), RTMIN+N, RTMAX-N, a
 * decimal number, or 0 for off. A signal that would change how the process
 * crashes or stops is refused (issue 10, finding 3): with our handler on
 * SIGSEGV a segfault became a 100 % CPU hang with no core, and on SIGTERM
 * the pod ignored Kubernetes' stop. So are numbers with no handler slot
 * (glibc keeps 32 and 33 for itself; past SIGRTMAX there is nothing). */
#ifndef GPUGUARD_SIGNALS_H
#define GPUGUARD_SIGNALS_H

#include <signal.h>
#include <stddef.h>
#include <string.h>

struct gpuguard_signal_name {
	const char *name;
	int sig;
};

/* Every standard Linux signal, so that a refused one is named as refused,
 * not as unknown. */
static const struct gpuguard_signal_name gpuguard_signal_names[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},       {"QUIT", SIGQUIT}, {"ILL", SIGILL},     {"TRAP", SIGTRAP},
    {"ABRT", SIGABRT}, {"IOT", SIGIOT},       {"BUS", SIGBUS},   {"FPE", SIGFPE},     {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},     {"USR2", SIGUSR2}, {"PIPE", SIGPIPE},   {"ALRM", SIGALRM},
    {"TERM", SIGTERM}, {"STKFLT", SIGSTKFLT}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT},   {"STOP", SIGSTOP},
    {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN},     {"TTOU", SIGTTOU}, {"URG", SIGURG},     {"XCPU", SIGXCPU},
    {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
    {"POLL", SIGPOLL}, {"PWR", SIGPWR},       {"SYS", SIGSYS},
};

/* The syntax, as option messages and help show it. */
#define GPUGUARD_SIGNAL_SYNTAX                                                                                      \
	"a signal name or number the application does not use (SIGUSR2, USR1, SIGRTMIN+3, 40); 0 = off; never one " \
	"that crashes or stops the process (SEGV BUS ILL FPE ABRT TRAP SYS TERM INT QUIT HUP PIPE ALRM XCPU XFSZ "  \
	"TSTP TTIN TTOU KILL STOP) or has no handler slot (32, 33)"

/* A decimal number of at most 4 digits, the whole string; -1 otherwise. */
static inline int gpuguard_signal_number(const char *s)
{
	int v = 0, n = 0;
	for (; s[n]; n++) {
		if (s[n] < '0' || s[n] > '9' || n >= 4)
			return -1;
		v = v * 10 + (s[n] - '0');
	}
	return n ? v : -1;
}

/* Parses any signal syntax above into *out (0 = off), without judging it.
 * Returns 0, or -1 for text that names no signal. */
static inline int gpuguard_signal_parse(const char *s, int *out)
{
	if (!s || !*s)
		return -1;
	int v = gpuguard_signal_number(s);
	if (v >= 0) {
		*out = v;
		return 0;
	}
	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	if (strncmp(s, "RTMIN+", 6) == 0 || strncmp(s, "RTMAX-", 6) == 0) {
		int n = gpuguard_signal_number(s + 6);
		if (n < 0)
			return -1;
		*out = s[5] == '+' ? SIGRTMIN + n : SIGRTMAX - n;
		return 0;
	}
	if (strcmp(s, "RTMIN") == 0 || strcmp(s, "RTMAX") == 0) {
		*out = s[3] == 'I' ? SIGRTMIN : SIGRTMAX;
		return 0;
	}
	for (size_t i = 0; i < sizeof(gpuguard_signal_names) / sizeof(gpuguard_signal_names[0]); i++)
		if (strcmp(s, gpuguard_signal_names[i].name) == 0) {
			*out = gpuguard_signal_names[i].sig;
			return 0;
		}
	return -1;
}

/* NULL if sig may carry dump requests (0, off, included); else why not. */
static inline const char *gpuguard_dump_signal_refusal(int sig)
{
	switch (sig) {
	case SIGSEGV:
	case SIGBUS:
	case SIGILL:
	case SIGFPE:
	case SIGABRT:
	case SIGTRAP:
	case SIGSYS:
		return "a crash signal: a handler would turn the crash into a hang with no core";
	case SIGTERM:
	case SIGINT:
	case SIGQUIT:
	case SIGHUP:
		return "a stop request: a handler would make the process ignore it";
	case SIGPIPE:
	case SIGALRM:
	case SIGXCPU:
	case SIGXFSZ:
		return "its default action ends the process, which a handler would cancel";
	case SIGTSTP:
	case SIGTTIN:
	case SIGTTOU:
		return "a job-control stop: a handler would cancel the stop";
	case SIGKILL:
	case SIGSTOP:
		return "it cannot be caught";
	default:
		break;
	}
	if (sig < 0 || sig > SIGRTMAX || (sig >= 32 && sig < SIGRTMIN))
		return "no handler slot (glibc keeps 32 and 33; nothing past SIGRTMAX)";
	return NULL;
}

/* Parse and judge in one: 0 and *out set, or -1 with *why (if given) set
 * for a value that parses but is refused, NULL for one that does not parse. */
static inline int gpuguard_dump_signal_parse(const char *s, int *out, const char **why)
{
	int sig;
	if (why)
		*why = NULL;
	if (gpuguard_signal_parse(s, &sig) != 0)
		return -1;
	const char *no = gpuguard_dump_signal_refusal(sig);
	if (no) {
		if (why)
			*why = no;
		return -1;
	}
	*out = sig;
	return 0;
}

#endif
