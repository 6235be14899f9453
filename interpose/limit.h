/* gpuguard: the GPUGUARD_LIMIT syntax (limit.c), shared by the library and
 * the gpuguard command. Depends on libc alone. */
#ifndef GPUGUARD_LIMIT_H
#define GPUGUARD_LIMIT_H

#include <stdint.h>

#include "gpuguard.h"

enum gg_limit_kind { GG_LIMIT_NONE = 0, GG_LIMIT_BYTES, GG_LIMIT_PERCENT };
struct gg_limit_spec {
	enum gg_limit_kind kind;
	uint64_t value; /* bytes, or percent in hundredths (9000 = 90 %) */
};
struct gg_limits {
	struct gg_limit_spec dev[GPUGUARD_MAX_DEVICES];
};
/* Kubernetes quantity: "20Gi", "20G", "1.5Gi", "1e9", "123". 0 or -1. */
int gg_parse_quantity(const char *s, uint64_t *out);
/* GPUGUARD_LIMIT: a quantity, "N%", or "0=20Gi,1=8Gi,*=4Gi". 0 or -1. */
int gg_parse_limit(const char *s, struct gg_limits *out);

#endif
