/* gpuguard command: GPUGUARD_DUMP_SIGNAL read exactly as the library reads
 * it, so `gpuguard dump` sends the signal the library listens on: both use
 * the one parser in gpuguard/signals.h (names, numbers, RTMIN+N, and the
 * signals refused because a handler would change a crash or a stop).
 * tests/scripts/dump_target.sh feeds one list of values to both. */
#include <gpuguard/signals.h>

#include "tool.h"

int gg_signal_parse(const char *s, int *out)
{
	return gpuguard_dump_signal_parse(s, out, NULL);
}
