/* gpuguard command: what the live views of the pod region share (top.c,
 * metrics.c, http.c; discover.c renders through metrics.c). Internal to
 * tools/: small helpers, inline, so each file stays a pure user of them. */
#ifndef GG_LIVE_H
#define GG_LIVE_H

#include <time.h>

#include "tool.h"

static inline uint64_t clock_ms(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline const char *live_text(enum gg_liveness l)
{
	return l == GG_LIVE_YES ? "live" : l == GG_LIVE_EXITED ? "exited" : "unknown";
}

/* Prometheus text format 0.0.4: label values escape backslash, double
 * quote and newline. Our strings are already printable ASCII (region.c). */
static inline void prom_str(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static inline void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* gpuguard_up's help: the region's metrics and the HTTP server's down
 * answer say the same. */
#define UP_HELP                                                                              \
	"1 when the pod region was read; 0 before any process of the pod attached, or when " \
	"the file cannot be read (gpuguard_region_error says why)."

#endif
