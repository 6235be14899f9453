/* gpuguard command: the formatting every part of the command shares (byte
 * sizes, escaped bytes, JSON strings, fractions, wall-clock times). A leaf:
 * it calls only text.c, so the reader, the analyzer, the region reader and
 * the renderers all sit above it and none of them needs another's file. */
#include <string.h>
#include <time.h>

#include "tool.h"

const char *gg_bytes(uint64_t v, char buf[32])
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (v < 1024) {
		snprintf(buf, 32, "%llu B", (unsigned long long)v);
		return buf;
	}
	double x = (double)v / 1024.0;
	int u = 0;
	while (x >= 1024.0 && u < 5) {
		x /= 1024.0;
		u++;
	}
	snprintf(buf, 32, "%.2f %s", x, units[u]);
	return buf;
}

void gg_escape_bytes(char *out, const char *s, size_t max)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f && c != '\\') { /* a backslash only starts escapes */
			*out++ = (char)c;
		} else {
			*out++ = '\\';
			*out++ = 'x';
			*out++ = hex[c >> 4];
			*out++ = hex[c & 15];
		}
	}
	*out = '\0';
}

void gg_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	const char *p = s ? s : "", *end = p + strlen(p);
	while (p < end) {
		unsigned char c = (unsigned char)*p;
		int safe;
		size_t n = gg_text_next(p, end, &safe);
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\r')
			fputs("\\r", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (safe)
			fwrite(p, 1, n, f);
		else if (c < 0x80)
			fprintf(f, "\\u%04x", c); /* C0 and DEL */
		else if (n == 2)
			fprintf(f, "\\u%04x", (unsigned char)p[1]); /* C1: C2 80..C2 9F is U+0080..U+009F */
		else
			fputs("\\ufffd", f); /* not UTF-8 (a path from the command line): the replacement character */
		p += n;
	}
	fputc('"', f);
}

const char *gg_fraction(unsigned pm, char buf[16])
{
	snprintf(buf, 16, "%u.%02u", pm / 1000, pm % 1000 / 10);
	return buf;
}

unsigned long long gg_percent(uint64_t part, uint64_t whole)
{
	return whole ? (unsigned long long)((unsigned __int128)part * 100 / whole) : 0;
}

const char *gg_wall_ms(uint64_t start_unix_ms, uint64_t ms, char buf[32])
{
	uint64_t t = start_unix_ms + ms;
	time_t s = (time_t)(t / 1000);
	struct tm tm;
	if (!start_unix_ms || !gmtime_r(&s, &tm)) {
		snprintf(buf, 32, "?");
		return buf;
	}
	snprintf(buf, 32, "%02d:%02d:%02d.%03uZ", tm.tm_hour, tm.tm_min, tm.tm_sec, (unsigned)(t % 1000));
	return buf;
}
