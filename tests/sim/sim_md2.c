/* gpuguard simulated GPU: MD2 (RFC 1319) and HMAC (RFC 2104) over it, written
 * from the RFCs, for the runtime's integrity check (export table d4082055,
 * tests/sim/README.md). Not a security primitive here, only a protocol. */
#include "sim_md2.h"

#include <string.h>

/* RFC 1319's permutation of 0..255 built from the digits of pi */
static const uint8_t PI_SUBST[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,  98,  167, 5,   243, 192, 199,
    115, 140, 152, 147, 43,  217, 188, 76,  130, 202, 30,  155, 87,  60,  253, 212, 224, 22,  103, 66,  111, 24,
    138, 23,  229, 18,  190, 78,  196, 214, 218, 158, 222, 73,  160, 251, 245, 142, 187, 47,  238, 122, 169, 104,
    121, 145, 21,  178, 7,   63,  148, 194, 16,  137, 11,  34,  95,  33,  128, 127, 93,  154, 90,  144, 50,  39,
    53,  62,  204, 231, 191, 247, 151, 3,   255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,
    170, 198, 79,  184, 56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241, 69,  157, 112, 89,
    100, 113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,   27,  96,  37,  173, 174, 176, 185, 246, 28,  70,
    97,  105, 52,  64,  126, 15,  85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249, 206, 186, 197, 234, 38,
    44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129, 77,  82,  106, 220, 55,  200, 108, 193,
    171, 250, 36,  225, 123, 8,   12,  189, 177, 74,  120, 136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254,
    59,  0,   29,  57,  242, 239, 183, 14,  102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,  49,  68,
    80,  180, 143, 237, 31,  26,  219, 153, 141, 51,  159, 17,  131, 20,
};

void sim_md2_init(struct sim_md2 *c)
{
	memset(c, 0, sizeof(*c));
}

/* one 16-byte block: update the checksum (RFC 1319 3.2), then 18 rounds
 * over the 48-byte state (3.4) */
static void md2_block(struct sim_md2 *c, const uint8_t *blk)
{
	uint8_t L = c->cksum[15];
	for (int j = 0; j < 16; j++) {
		c->cksum[j] ^= PI_SUBST[blk[j] ^ L];
		L = c->cksum[j];
	}
	for (int j = 0; j < 16; j++) {
		c->x[16 + j] = blk[j];
		c->x[32 + j] = (uint8_t)(c->x[16 + j] ^ c->x[j]);
	}
	uint8_t t = 0;
	for (int j = 0; j < 18; j++) {
		for (int k = 0; k < 48; k++)
			t = c->x[k] ^= PI_SUBST[t];
		t = (uint8_t)(t + j);
	}
}

void sim_md2_update(struct sim_md2 *c, const void *data, size_t n)
{
	const uint8_t *p = data;
	while (n) {
		size_t k = 16 - c->nbuf < n ? 16 - c->nbuf : n;
		memcpy(c->buf + c->nbuf, p, k);
		c->nbuf += (unsigned)k;
		p += k;
		n -= k;
		if (c->nbuf == 16) {
			md2_block(c, c->buf);
			c->nbuf = 0;
		}
	}
}

/* pad with i bytes of value i (1..16, always at least one), then the checksum */
void sim_md2_final(struct sim_md2 *c, uint8_t out[16])
{
	uint8_t pad[16];
	unsigned i = 16 - c->nbuf;
	memset(pad, (int)i, i);
	sim_md2_update(c, pad, i);
	uint8_t ck[16];
	memcpy(ck, c->cksum, 16);
	md2_block(c, ck);
	memcpy(out, c->x, 16);
}

void sim_md2(const void *data, size_t n, uint8_t out[16])
{
	struct sim_md2 c;
	sim_md2_init(&c);
	sim_md2_update(&c, data, n);
	sim_md2_final(&c, out);
}

/* RFC 2104 with B = 16 (MD2's block): H(K ^ opad || H(K ^ ipad || text)),
 * for a text streamed into c between begin and end (k: the 16-byte key). */
void sim_hmac_md2_begin(struct sim_md2 *c, const uint8_t k[16])
{
	uint8_t pad[16];
	for (int i = 0; i < 16; i++)
		pad[i] = k[i] ^ 0x36;
	sim_md2_init(c);
	sim_md2_update(c, pad, 16);
}

void sim_hmac_md2_end(struct sim_md2 *c, const uint8_t k[16], uint8_t out[16])
{
	uint8_t pad[16], inner[16];
	sim_md2_final(c, inner);
	for (int i = 0; i < 16; i++)
		pad[i] = k[i] ^ 0x5c;
	sim_md2_init(c);
	sim_md2_update(c, pad, 16);
	sim_md2_update(c, inner, 16);
	sim_md2_final(c, out);
}

/* ... for a text in one buffer, the key any length (hashed past 16 bytes) */
void sim_hmac_md2(const uint8_t *key, size_t keylen, const void *data, size_t n, uint8_t out[16])
{
	uint8_t k[16] = {0};
	if (keylen > 16)
		sim_md2(key, keylen, k);
	else
		memcpy(k, key, keylen);
	struct sim_md2 c;
	sim_hmac_md2_begin(&c, k);
	sim_md2_update(&c, data, n);
	sim_hmac_md2_end(&c, k, out);
}
