/* gpuguard simulated GPU: MD2 (RFC 1319) and HMAC-MD2 (RFC 2104), hidden,
 * for the runtime's integrity check (sim_md2.c). */
#ifndef GPUGUARD_SIM_MD2_H
#define GPUGUARD_SIM_MD2_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

struct sim_md2 {
	uint8_t x[48], cksum[16], buf[16];
	unsigned nbuf;
};
void sim_md2_init(struct sim_md2 *c);
void sim_md2_update(struct sim_md2 *c, const void *data, size_t n);
void sim_md2_final(struct sim_md2 *c, uint8_t out[16]);
void sim_md2(const void *data, size_t n, uint8_t out[16]);
void sim_hmac_md2(const uint8_t *key, size_t keylen, const void *data, size_t n, uint8_t out[16]);
void sim_hmac_md2_begin(struct sim_md2 *c, const uint8_t k[16]);
void sim_hmac_md2_end(struct sim_md2 *c, const uint8_t k[16], uint8_t out[16]);

#pragma GCC visibility pop

#endif
