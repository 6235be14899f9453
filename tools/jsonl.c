/* gpuguard command: a strict JSON reader for one dump record. Objects,
 * arrays, strings with every escape (\u with surrogate pairs, to UTF-8),
 * integers, true/false/null. No floats, at most GG_MAX_DEPTH levels: a dump
 * never has them, so anything else is a hostile or broken file. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <gpuguard/utf8.h>

#include "tool.h"

struct cursor {
	struct gg_json *j;
	const char *p, *end, *start;
	char *err;
	size_t errlen;
	int failed;
};

static void fail(struct cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct cursor *c, const char *fmt, ...)
{
	if (c->failed)
		return;
	c->failed = 1;
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(c->err, c->errlen, "%s (column %zu)", msg, (size_t)(c->p - c->start) + 1);
}

void gg_json_init(struct gg_json *j)
{
	memset(j, 0, sizeof *j);
}

void gg_json_free(struct gg_json *j)
{
	free(j->v);
	free(j->str);
	memset(j, 0, sizeof *j);
}

static uint32_t new_val(struct cursor *c, enum gg_jtype t)
{
	struct gg_json *j = c->j;
	if (j->nv == j->cap) {
		uint32_t ncap = j->cap ? j->cap * 2 : 64;
		struct gg_jval *nv = realloc(j->v, (size_t)ncap * sizeof *nv);
		if (!nv) {
			fail(c, "out of memory");
			return 0;
		}
		j->v = nv;
		j->cap = ncap;
	}
	uint32_t i = j->nv++;
	memset(&j->v[i], 0, sizeof j->v[i]);
	j->v[i].type = t;
	return i;
}

static void skip_ws(struct cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r'))
		c->p++;
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char ch = p[i];
		v <<= 4;
		if (ch >= '0' && ch <= '9')
			v |= (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			v |= (unsigned)(ch - 'a' + 10);
		else if (ch >= 'A' && ch <= 'F')
			v |= (unsigned)(ch - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* Decodes a string at c->p (on the opening quote) into the string arena.
 * The decoded form is never longer than the source, and the arena holds
 * the whole line, so it never grows mid-line (pointers stay valid). */
static const char *parse_string(struct cursor *c, size_t *lenp)
{
	struct gg_json *j = c->j;
	c->p++;
	char *out = j->str + j->strlen, *o = out;
	for (;;) {
		if (c->p >= c->end) {
			fail(c, "unterminated string");
			return NULL;
		}
		unsigned char ch = (unsigned char)*c->p;
		if (ch == '"') {
			c->p++;
			break;
		}
		if (ch < 0x20) {
			fail(c, "control character in string");
			return NULL;
		}
		if (ch >= 0x80) {
			size_t n = gpuguard_utf8_len((const unsigned char *)c->p, (size_t)(c->end - c->p));
			if (!n) {
				fail(c, "invalid UTF-8 in string");
				return NULL;
			}
			memcpy(o, c->p, n);
			o += n;
			c->p += n;
			continue;
		}
		if (ch != '\\') {
			*o++ = (char)ch;
			c->p++;
			continue;
		}
		if (c->end - c->p < 2) {
			fail(c, "unterminated escape");
			return NULL;
		}
		char e = c->p[1];
		c->p += 2;
		switch (e) {
		case '"':
			*o++ = '"';
			break;
		case '\\':
			*o++ = '\\';
			break;
		case '/':
			*o++ = '/';
			break;
		case 'b':
			*o++ = '\b';
			break;
		case 'f':
			*o++ = '\f';
			break;
		case 'n':
			*o++ = '\n';
			break;
		case 'r':
			*o++ = '\r';
			break;
		case 't':
			*o++ = '\t';
			break;
		case 'u': {
			unsigned cp;
			if (c->end - c->p < 4 || hex4(c->p, &cp)) {
				fail(c, "bad \\u escape");
				return NULL;
			}
			c->p += 4;
			if (cp >= 0xD800 && cp <= 0xDBFF) {
				unsigned lo;
				if (c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u' || hex4(c->p + 2, &lo) ||
				    lo < 0xDC00 || lo > 0xDFFF) {
					fail(c, "unpaired surrogate in \\u escape");
					return NULL;
				}
				c->p += 6;
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			} else if (cp >= 0xDC00 && cp <= 0xDFFF) {
				fail(c, "unpaired surrogate in \\u escape");
				return NULL;
			}
			if (cp == 0) {
				fail(c, "\\u0000 in string");
				return NULL;
			}
			if (cp < 0x80) {
				*o++ = (char)cp;
			} else if (cp < 0x800) {
				*o++ = (char)(0xC0 | (cp >> 6));
				*o++ = (char)(0x80 | (cp & 0x3F));
			} else if (cp < 0x10000) {
				*o++ = (char)(0xE0 | (cp >> 12));
				*o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
				*o++ = (char)(0x80 | (cp & 0x3F));
			} else {
				*o++ = (char)(0xF0 | (cp >> 18));
				*o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
				*o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
				*o++ = (char)(0x80 | (cp & 0x3F));
			}
			break;
		}
		default:
			fail(c, "bad escape \\%c", (e >= 0x20 && e < 0x7f) ? e : '?');
			return NULL;
		}
	}
	*o++ = '\0';
	*lenp = (size_t)(o - out) - 1;
	j->strlen += (size_t)(o - out);
	return out;
}

static uint32_t parse_value(struct cursor *c, int depth);

static uint32_t parse_container(struct cursor *c, int depth, int is_obj)
{
	if (depth >= GG_MAX_DEPTH) {
		fail(c, "nesting deeper than %d levels", GG_MAX_DEPTH);
		return 0;
	}
	uint32_t self = new_val(c, is_obj ? GG_J_OBJ : GG_J_ARR);
	if (!self)
		return 0;
	c->p++;
	skip_ws(c);
	uint32_t last = 0;
	size_t n = 0;
	char close = is_obj ? '}' : ']';
	if (c->p < c->end && *c->p == close) {
		c->p++;
		return self;
	}
	for (;;) {
		const char *key = NULL;
		size_t keylen = 0;
		skip_ws(c);
		if (is_obj) {
			if (c->p >= c->end || *c->p != '"') {
				fail(c, "expected a member name");
				return 0;
			}
			key = parse_string(c, &keylen);
			if (!key)
				return 0;
			skip_ws(c);
			if (c->p >= c->end || *c->p != ':') {
				fail(c, "expected ':'");
				return 0;
			}
			c->p++;
			skip_ws(c);
		}
		uint32_t v = parse_value(c, depth + 1);
		if (!v)
			return 0;
		c->j->v[v].key = key;
		c->j->v[v].keylen = keylen;
		if (last)
			c->j->v[last].next = v;
		else
			c->j->v[self].child = v;
		last = v;
		n++;
		skip_ws(c);
		if (c->p >= c->end) {
			fail(c, "unterminated %s", is_obj ? "object" : "array");
			return 0;
		}
		if (*c->p == ',') {
			c->p++;
			continue;
		}
		if (*c->p == close) {
			c->p++;
			break;
		}
		fail(c, "expected ',' or '%c'", close);
		return 0;
	}
	c->j->v[self].len = n;
	return self;
}

static int word(struct cursor *c, const char *w)
{
	size_t n = strlen(w);
	if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
		c->p += n;
		return 1;
	}
	return 0;
}

static uint32_t parse_value(struct cursor *c, int depth)
{
	skip_ws(c);
	if (c->p >= c->end) {
		fail(c, "expected a value");
		return 0;
	}
	char ch = *c->p;
	if (ch == '{' || ch == '[')
		return parse_container(c, depth, ch == '{');
	if (ch == '"') {
		uint32_t v = new_val(c, GG_J_STR);
		if (!v)
			return 0;
		size_t len;
		const char *s = parse_string(c, &len);
		if (!s)
			return 0;
		c->j->v[v].s = s;
		c->j->v[v].len = len;
		return v;
	}
	if (ch == '-' || (ch >= '0' && ch <= '9')) {
		uint32_t v = new_val(c, GG_J_INT);
		if (!v)
			return 0;
		int neg = 0;
		if (*c->p == '-') {
			neg = 1;
			c->p++;
		}
		if (c->p >= c->end || *c->p < '0' || *c->p > '9') {
			fail(c, "bad number");
			return 0;
		}
		if (*c->p == '0' && c->end - c->p > 1 && c->p[1] >= '0' && c->p[1] <= '9') {
			fail(c, "number with a leading zero");
			return 0;
		}
		uint64_t u = 0;
		while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
			unsigned dgt = (unsigned)(*c->p - '0');
			if (u > (UINT64_MAX - dgt) / 10) {
				fail(c, "integer out of range");
				return 0;
			}
			u = u * 10 + dgt;
			c->p++;
		}
		if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E')) {
			fail(c, "non-integer number");
			return 0;
		}
		c->j->v[v].neg = neg && u != 0;
		c->j->v[v].u = u;
		return v;
	}
	uint32_t v = 0;
	if (word(c, "null")) {
		v = new_val(c, GG_J_NULL);
	} else if (word(c, "true")) {
		v = new_val(c, GG_J_BOOL);
		if (v)
			c->j->v[v].u = 1;
	} else if (word(c, "false")) {
		v = new_val(c, GG_J_BOOL);
	} else {
		fail(c, "unexpected character '%c'", (ch >= 0x20 && ch < 0x7f) ? ch : '?');
	}
	return v;
}

uint32_t gg_json_parse(struct gg_json *j, const char *line, size_t len, char *err, size_t errlen)
{
	struct cursor c = {j, line, line + len, line, err, errlen, 0};
	j->nv = 1; /* index 0 means "none" */
	if (!j->v) {
		j->v = calloc(64, sizeof *j->v);
		if (!j->v) {
			snprintf(err, errlen, "out of memory");
			return 0;
		}
		j->cap = 64;
	}
	if (j->strcap < len + 1) {
		char *ns = realloc(j->str, len + 1);
		if (!ns) {
			snprintf(err, errlen, "out of memory");
			return 0;
		}
		j->str = ns;
		j->strcap = len + 1;
	}
	j->strlen = 0;
	skip_ws(&c);
	if (c.p >= c.end || *c.p != '{') {
		fail(&c, "a record must be a JSON object");
		return 0;
	}
	uint32_t root = parse_value(&c, 0);
	if (!root)
		return 0;
	skip_ws(&c);
	if (c.p != c.end) {
		fail(&c, "trailing characters after the record");
		return 0;
	}
	return root;
}

const struct gg_jval *gg_json_get(const struct gg_json *j, const struct gg_jval *obj, const char *name)
{
	size_t n = strlen(name);
	if (!obj || obj->type != GG_J_OBJ)
		return NULL;
	for (uint32_t i = obj->child; i; i = j->v[i].next)
		if (j->v[i].keylen == n && memcmp(j->v[i].key, name, n) == 0)
			return &j->v[i];
	return NULL;
}
