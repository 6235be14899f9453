/* gpuguard: the dump's JSON writer: records go into an mmap'd buffer,
 * flushed with write(2); strings are escaped so that every line stays
 * valid JSON whatever bytes the process gave us. */
#include <errno.h>
#include <unistd.h>

#include "dump_json.h"
#include "gpuguard/utf8.h"

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
		} else if (c >= 0x80 && gpuguard_utf8_len(p + i, n - i)) {
			size_t l = gpuguard_utf8_len(p + i, n - i);
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
