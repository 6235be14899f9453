/* gpuguard: the GPUGUARD_LIMIT syntax, one parser for the library (which
 * enforces the ceiling) and the gpuguard command (`gpuguard check`, which
 * tells whether a process's value took effect), so the two can never
 * disagree on a value. Depends on libc alone. */
#include <ctype.h>
#include <string.h>

#include "limit.h"

static int mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

int gg_parse_quantity(const char *s, uint64_t *out)
{
	/* Kubernetes resource.Quantity, restricted to what makes sense for bytes:
	 * <digits>[.<digits>] then a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal
	 * suffix (k M G T P E) or a decimal exponent (e3, E9). Fractions round up,
	 * as Kubernetes does when it converts to an integer. */
	if (!s || !*s)
		return -1;
	const char *p = s;
	uint64_t ip = 0, frac = 0, fscale = 1;
	int digits = 0;
	while (isdigit((unsigned char)*p)) {
		if (!mul_ok(ip, 10, &ip) || __builtin_add_overflow(ip, (uint64_t)(*p - '0'), &ip))
			return -1;
		p++, digits++;
	}
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char)*p)) {
			if (fscale < 1000000000000000ull) { /* keep 15 fractional digits */
				frac = frac * 10 + (uint64_t)(*p - '0');
				fscale *= 10;
			}
			p++, digits++;
		}
	}
	if (digits == 0)
		return -1;
	uint64_t mult = 1;
	int exp10 = -1;
	if ((p[0] == 'e' || p[0] == 'E') && isdigit((unsigned char)p[1])) {
		exp10 = 0;
		for (p++; isdigit((unsigned char)*p); p++) {
			exp10 = exp10 * 10 + (*p - '0');
			if (exp10 > 18)
				return -1;
		}
		for (int i = 0; i < exp10; i++)
			mult *= 10;
	} else if (*p) {
		static const struct {
			const char *sfx;
			uint64_t mult;
		} sfx[] = {{"Ki", 1ull << 10},      {"Mi", 1ull << 20},         {"Gi", 1ull << 30},
		           {"Ti", 1ull << 40},      {"Pi", 1ull << 50},         {"Ei", 1ull << 60},
		           {"k", 1000ull},          {"M", 1000000ull},          {"G", 1000000000ull},
		           {"T", 1000000000000ull}, {"P", 1000000000000000ull}, {"E", 1000000000000000000ull}};
		size_t i;
		for (i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++)
			if (strcmp(p, sfx[i].sfx) == 0)
				break;
		if (i == sizeof(sfx) / sizeof(sfx[0]))
			return -1;
		mult = sfx[i].mult;
		p += strlen(sfx[i].sfx);
	}
	if (*p)
		return -1;
	uint64_t whole;
	if (!mul_ok(ip, mult, &whole))
		return -1;
	/* frac/fscale * mult, rounded up, without overflow: split mult. */
	if (frac) {
		unsigned __int128 f = (unsigned __int128)frac * mult;
		uint64_t add = (uint64_t)((f + fscale - 1) / fscale);
		if (__builtin_add_overflow(whole, add, &whole))
			return -1;
	}
	*out = whole;
	return 0;
}

/* "90%" or "12.5%" into hundredths of a percent, 1..10000. */
static int parse_percent(const char *s, size_t len, uint64_t *out)
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
		if (!isdigit((unsigned char)s[i]) || frac_digits >= 2)
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

static int parse_one_limit(const char *s, size_t len, struct gg_limit_spec *out)
{
	char buf[64];
	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = 0;
	if (buf[len - 1] == '%') {
		out->kind = GG_LIMIT_PERCENT;
		return parse_percent(buf, len, &out->value);
	}
	out->kind = GG_LIMIT_BYTES;
	return gg_parse_quantity(buf, &out->value);
}

int gg_parse_limit(const char *s, struct gg_limits *out)
{
	memset(out, 0, sizeof(*out));
	if (!s)
		return 0;
	while (isspace((unsigned char)*s))
		s++;
	size_t len = strlen(s);
	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	if (len == 0)
		return -1;
	if (!memchr(s, '=', len)) {
		struct gg_limit_spec one;
		if (parse_one_limit(s, len, &one) != 0)
			return -1;
		for (int d = 0; d < GPUGUARD_MAX_DEVICES; d++)
			out->dev[d] = one;
		return 0;
	}
	/* The CUDA_MPS_PINNED_DEVICE_MEM_LIMIT shape: "0=20Gi,1=8Gi"; devices not
	 * listed have no ceiling unless "*=" gives a default. Ordinals are those
	 * the process sees (after CUDA_VISIBLE_DEVICES). */
	struct gg_limit_spec star = {GG_LIMIT_NONE, 0};
	int seen[GPUGUARD_MAX_DEVICES] = {0};
	int have_star = 0;
	const char *p = s, *end = s + len;
	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *item_end = comma ? comma : end;
		const char *eq = memchr(p, '=', (size_t)(item_end - p));
		if (!eq || eq == p)
			return -1;
		struct gg_limit_spec spec;
		if (parse_one_limit(eq + 1, (size_t)(item_end - eq - 1), &spec) != 0)
			return -1;
		if (eq - p == 1 && *p == '*') {
			if (have_star)
				return -1;
			have_star = 1;
			star = spec;
		} else {
			int dev = 0;
			for (const char *q = p; q < eq; q++) {
				if (!isdigit((unsigned char)*q))
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
