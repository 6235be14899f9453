/* gpuguard: the value syntaxes the library reads from its environment and
 * the gpuguard command reads from its flags and from a process's
 * environment: quantities, durations and GPUGUARD_LIMIT. Header-only, like
 * region.h, so both sides compile one parser and can never disagree on a
 * value (issue 12: the library took `1h` and refused `1.5s`, the command the
 * opposite). Signals are in signals.h. Depends on libc alone.
 *
 * Every parser takes the whole string (no surrounding space, no sign) and
 * returns 0 with *out set, or -1 leaving *out unspecified. */
#ifndef GPUGUARD_PARSE_H
#define GPUGUARD_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../gpuguard.h"

/* A decimal number at *p: digits, optionally '.' and more digits, at least
 * one digit in all ("1", "1.5", ".5", "1."). The integer part in *ip, the
 * fraction as frac / fscale: its first 15 digits, plus one in the last
 * place when a later digit is not zero, so that rounding it up stays exact.
 * Advances *p past it. -1 if there is no digit or the integer part passes
 * 2^64. */
static inline int gpuguard_parse_decimal(const char **p, uint64_t *ip, uint64_t *frac, uint64_t *fscale)
{
	const char *s = *p;
	int digits = 0, rest = 0;
	*ip = 0, *frac = 0, *fscale = 1;
	for (; *s >= '0' && *s <= '9'; s++, digits++)
		if (__builtin_mul_overflow(*ip, 10, ip) || __builtin_add_overflow(*ip, (uint64_t)(*s - '0'), ip))
			return -1;
	if (*s == '.') {
		for (s++; *s >= '0' && *s <= '9'; s++, digits++) {
			if (*fscale < 1000000000000000ull) {
				*frac = *frac * 10 + (uint64_t)(*s - '0');
				*fscale *= 10;
			} else {
				rest |= *s != '0';
			}
		}
	}
	if (!digits)
		return -1;
	*frac += (uint64_t)rest;
	*p = s;
	return 0;
}

/* (ip + frac / fscale) * mult, the fraction rounded up, so that a value
 * with any fraction is never read as less than it says. -1 on overflow. */
static inline int gpuguard_scale_decimal(uint64_t ip, uint64_t frac, uint64_t fscale, uint64_t mult, uint64_t *out)
{
	uint64_t whole;
	if (__builtin_mul_overflow(ip, mult, &whole))
		return -1;
	if (frac) {
		unsigned __int128 f = (unsigned __int128)frac * mult;
		if (__builtin_add_overflow(whole, (uint64_t)((f + fscale - 1) / fscale), &whole))
			return -1;
	}
	*out = whole;
	return 0;
}

/* The quantity syntax, as option messages and help show it. */
#define GPUGUARD_QUANTITY_SYNTAX "a quantity: 20Gi, 1.5Gi, 20G, 1e9, 123"

/* Kubernetes resource.Quantity, restricted to what makes sense for bytes
 * and counts: a decimal number, then a binary suffix (Ki Mi Gi Ti Pi Ei), a
 * decimal suffix (k M G T P E), a decimal exponent (e3, E9, at most e18) or
 * nothing. Fractions round up, as Kubernetes does when it converts to an
 * integer. */
static inline int gpuguard_parse_quantity(const char *s, uint64_t *out)
{
	static const struct {
		const char *sfx;
		uint64_t mult;
	} sfx[] = {{"Ki", 1ull << 10},      {"Mi", 1ull << 20},         {"Gi", 1ull << 30},
	           {"Ti", 1ull << 40},      {"Pi", 1ull << 50},         {"Ei", 1ull << 60},
	           {"k", 1000ull},          {"M", 1000000ull},          {"G", 1000000000ull},
	           {"T", 1000000000000ull}, {"P", 1000000000000000ull}, {"E", 1000000000000000000ull}};
	uint64_t ip, frac, fscale, mult = 1;
	if (!s || gpuguard_parse_decimal(&s, &ip, &frac, &fscale) != 0)
		return -1;
	if ((s[0] == 'e' || s[0] == 'E') && s[1] >= '0' && s[1] <= '9') {
		int exp10 = 0;
		for (s++; *s >= '0' && *s <= '9'; s++)
			if ((exp10 = exp10 * 10 + (*s - '0')) > 18)
				return -1;
		while (exp10--)
			mult *= 10;
	} else if (*s) {
		size_t i;
		for (i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++)
			if (strcmp(s, sfx[i].sfx) == 0)
				break;
		if (i == sizeof(sfx) / sizeof(sfx[0]))
			return -1;
		mult = sfx[i].mult;
		s += strlen(sfx[i].sfx);
	}
	if (*s)
		return -1;
	return gpuguard_scale_decimal(ip, frac, fscale, mult, out);
}

/* The duration syntax, as option messages and help show it. */
#define GPUGUARD_DURATION_SYNTAX "a duration: 500ms, 1.5s, 10s, 2m, 1h, or plain seconds"

/* A duration in milliseconds: a decimal number, then ms, s, m, h or
 * nothing (seconds). A fraction of a millisecond rounds up, so a duration
 * that is not zero is never read as zero. */
static inline int gpuguard_parse_duration_ms(const char *s, uint64_t *out)
{
	uint64_t ip, frac, fscale, mult;
	if (!s || gpuguard_parse_decimal(&s, &ip, &frac, &fscale) != 0)
		return -1;
	if (strcmp(s, "ms") == 0)
		mult = 1;
	else if (*s == 0 || strcmp(s, "s") == 0)
		mult = 1000;
	else if (strcmp(s, "m") == 0)
		mult = 60000;
	else if (strcmp(s, "h") == 0)
		mult = 3600000;
	else
		return -1;
	return gpuguard_scale_decimal(ip, frac, fscale, mult, out);
}

/* GPUGUARD_LIMIT, parsed: one ceiling per device ordinal. */
enum gpuguard_limit_kind { GPUGUARD_LIMIT_NONE = 0, GPUGUARD_LIMIT_BYTES, GPUGUARD_LIMIT_PERCENT };
struct gpuguard_limit {
	enum gpuguard_limit_kind kind;
	uint64_t value; /* bytes, or percent in hundredths (9000 = 90 %) */
};
struct gpuguard_limits {
	struct gpuguard_limit dev[GPUGUARD_MAX_DEVICES];
};

/* "90%" or "12.5%" (at most two decimals) into hundredths of a percent,
 * 1..10000. */
static inline int gpuguard_parse_percent(const char *s, size_t len, uint64_t *out)
{
	if (len < 2 || s[len - 1] != '%')
		return -1;
	uint64_t v = 0;
	int frac_digits = -1;
	for (size_t i = 0; i + 1 < len; i++) {
		if (s[i] == '.' && frac_digits < 0) {
			frac_digits = 0;
			continue;
		}
		if (s[i] < '0' || s[i] > '9' || frac_digits >= 2)
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (frac_digits >= 0)
			frac_digits++;
		if (v > 1000000)
			return -1;
	}
	for (int i = frac_digits < 0 ? 0 : frac_digits; i < 2; i++)
		v *= 10;
	if (v == 0 || v > 10000)
		return -1;
	*out = v;
	return 0;
}

/* One device's ceiling, s[0..len): a quantity or a percentage. */
static inline int gpuguard_parse_limit_one(const char *s, size_t len, struct gpuguard_limit *out)
{
	char buf[64];
	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = 0;
	if (buf[len - 1] == '%') {
		out->kind = GPUGUARD_LIMIT_PERCENT;
		return gpuguard_parse_percent(buf, len, &out->value);
	}
	out->kind = GPUGUARD_LIMIT_BYTES;
	return gpuguard_parse_quantity(buf, &out->value);
}

static inline int gpuguard_limit_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* GPUGUARD_LIMIT: a quantity, "N%", or "0=20Gi,1=8Gi,*=4Gi", surrounding
 * space ignored. NULL (unset) is no ceiling anywhere. */
static inline int gpuguard_parse_limit(const char *s, struct gpuguard_limits *out)
{
	memset(out, 0, sizeof(*out));
	if (!s)
		return 0;
	while (gpuguard_limit_space(*s))
		s++;
	size_t len = strlen(s);
	while (len && gpuguard_limit_space(s[len - 1]))
		len--;
	if (len == 0)
		return -1;
	if (!memchr(s, '=', len)) {
		struct gpuguard_limit one;
		if (gpuguard_parse_limit_one(s, len, &one) != 0)
			return -1;
		for (int d = 0; d < GPUGUARD_MAX_DEVICES; d++)
			out->dev[d] = one;
		return 0;
	}
	/* The CUDA_MPS_PINNED_DEVICE_MEM_LIMIT shape: "0=20Gi,1=8Gi"; devices not
	 * listed have no ceiling unless "*=" gives a default. Ordinals are those
	 * the process sees (after CUDA_VISIBLE_DEVICES). */
	struct gpuguard_limit star = {GPUGUARD_LIMIT_NONE, 0};
	int seen[GPUGUARD_MAX_DEVICES] = {0};
	int have_star = 0;
	const char *p = s, *end = s + len;
	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *item_end = comma ? comma : end;
		const char *eq = memchr(p, '=', (size_t)(item_end - p));
		if (!eq || eq == p)
			return -1;
		struct gpuguard_limit spec;
		if (gpuguard_parse_limit_one(eq + 1, (size_t)(item_end - eq - 1), &spec) != 0)
			return -1;
		if (eq - p == 1 && *p == '*') {
			if (have_star)
				return -1;
			have_star = 1;
			star = spec;
		} else {
			int dev = 0;
			for (const char *q = p; q < eq; q++) {
				if (*q < '0' || *q > '9')
					return -1;
				dev = dev * 10 + (*q - '0');
				if (dev >= GPUGUARD_MAX_DEVICES)
					return -1;
			}
			if (seen[dev])
				return -1; /* the same device twice is a typo, not a choice */
			seen[dev] = 1;
			out->dev[dev] = spec;
		}
		if (!comma)
			break;
		p = comma + 1;
		if (p == end)
			return -1; /* trailing comma */
	}
	for (int d = 0; d < GPUGUARD_MAX_DEVICES; d++)
		if (!seen[d])
			out->dev[d] = star;
	return 0;
}

#endif
