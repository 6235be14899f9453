/* gpuguard: the dump's JSON writer: records go into an mmap'd buffer,
 * flushed with write(2); strings are escaped so that every line stays
 * valid JSON whatever bytes the process gave us. */
#include <errno.h>
#include <unistd.h>

#include "dump_write.h"

void gg_out_flush(struct gg_out *o)
{
	size_t off = 0;
	while (!o->err && off < o->len) {
		ssize_t w = write(o->fd, o->buf + off, o->len - off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			o->err = errno;
		} else if (w == 0) {
			o->err = EIO;
		} else {
			off += (size_t)w;
			o->bytes += (uint64_t)w;
		}
	}
	o->len = 0;
}

/* Length of a valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef) {
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
	} else
		return 0;
	if (len > n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

void gg_out_json_n(struct gg_out *o, const char *s, size_t n)
{
	static const char dig[] = "0123456789abcdef";
	GG_OUT_LIT(o, "\"");
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		unsigned c = p[i];
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			gg_out_need(o, 1);
			o->buf[o->len++] = (char)c;
			i++;
		} else if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			gg_out_mem(o, e, 2);
			i++;
		} else if (c >= 0x80 && utf8_len(p + i, n - i)) {
			size_t l = utf8_len(p + i, n - i);
			gg_out_mem(o, (const char *)p + i, l);
			i += l;
		} else {
			char e[6] = {'\\', 'u', '0', '0', dig[c >> 4], dig[c & 15]};
			gg_out_mem(o, e, 6);
			i++;
		}
	}
	GG_OUT_LIT(o, "\"");
}
