/* gpuguard: libFuzzer target for the pod region reader and the views of
 * `gpuguard top` and `gpuguard metrics`: any file content must give a table
 * or a clean error, never a crash or undefined behaviour. An input of region
 * size or more is the file itself; a shorter one is laid over a valid header
 * (first byte: bit 0 makes entry states mostly valid, bit 1 overlays the
 * header too), so the fuzzer reaches the views. `make fuzz` runs it. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <gpuguard/region.h>

#include "../../tools/tool.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void valid_header(char *buf)
{
	struct gpuguard_region_header *h = (struct gpuguard_region_header *)buf;
	gpuguard_region_layout(h, 1700000000000ull, "20Gi");
	h->magic = GPUGUARD_REGION_MAGIC;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[GPUGUARD_REGION_SIZE + 1] __attribute__((aligned(64)));
	static struct gg_region r;
	static FILE *sink;
	if (!sink)
		sink = fopen("/dev/null", "w");
	size_t len;
	memset(buf, 0, sizeof buf);
	if (size >= GPUGUARD_REGION_SIZE) {
		len = size > sizeof buf ? sizeof buf : size;
		memcpy(buf, data, len);
	} else {
		len = GPUGUARD_REGION_SIZE;
		valid_header(buf);
		if (size) {
			size_t off = data[0] & 2 ? 0 : GPUGUARD_REGION_DEVICE_OFF;
			size_t n = size - 1 < len - off ? size - 1 : len - off;
			memcpy(buf + off, data + 1, n);
			for (unsigned i = 0; data[0] & 1 && i < GPUGUARD_REGION_DEVICES; i++)
				gpuguard_region_dev(buf, i)->state %= 3;
			for (unsigned i = 0; data[0] & 1 && i < GPUGUARD_REGION_PROCS; i++)
				gpuguard_region_proc(buf, i)->state %= 2;
			for (unsigned i = 0; data[0] & 1 && i < GPUGUARD_REGION_DEATHS; i++) /* in place: shown */
				gpuguard_region_death(buf, i)->seq =
				    gpuguard_region_death(buf, i)->seq / 16 * 16 + i + 1;
		}
	}
	char err[GG_REGION_ERR];
	if (gg_region_parse(&r, "/dev/shm/fuzz\n\"region\\", buf, len, -1, err, sizeof err) == 0) {
		gg_top_render(sink, &r, 1800000000000ull);
		gg_metrics_render(sink, &r);
	}
	return 0;
}
