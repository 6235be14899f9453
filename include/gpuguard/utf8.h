/* gpuguard: what counts as well-formed UTF-8, for the library's dump writer
 * (which keeps such text and escapes every other byte) and the command's
 * readers (which accept and print only such text). One rule, so that what
 * the writer keeps the reader takes. Header-only, like region.h. */
#ifndef GPUGUARD_UTF8_H
#define GPUGUARD_UTF8_H

#include <stddef.h>

/* Length of the well-formed multi-byte sequence at s (at most n bytes
 * there), or 0: no overlong forms, no surrogates, nothing past U+10FFFF.
 * ASCII is 0 too: callers treat it themselves. */
static inline size_t gpuguard_utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0;
		if (c == 0xed)
			hi = 0x9f; /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;
		if (c == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (len > n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

#endif
