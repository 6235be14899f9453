/* gpuguard tests: the command's reading of GPUGUARD_DUMP_SIGNAL values
 * (gpuguard/signals.h, what `gpuguard dump` sends), one line per argument:
 * "N" for a signal number (0: dumps on signal off) or "invalid". Compared
 * with the library's own reading by tests/scripts/dump_target.sh. */
#include <stdio.h>

#include <gpuguard/signals.h>

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		int sig;
		if (gpuguard_dump_signal_parse(argv[i], &sig, NULL))
			puts("invalid");
		else
			printf("%d\n", sig);
	}
	return 0;
}
