/* gpuguard: libFuzzer target for the dump reader and the analyzer behind
 * `gpuguard report`: any bytes must give a report or a clean error, never a
 * crash, a leak or undefined behaviour. `make fuzz` runs it, seeded with
 * tests/golden/. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../../tools/tool.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *sink;
	if (!sink)
		sink = fopen("/dev/null", "w");
	struct gg_dump d;
	char err[GG_MAX_ERR + 64];
	if (gg_dump_load_mem(&d, "fuzz.jsonl", (const char *)data, size, NULL, err, sizeof err) == 0) {
		struct gg_analysis a;
		struct gg_opts o = {10, 8};
		gg_analyze(&a, &d);
		gg_report_text(sink, &a, &o);
		gg_report_json(sink, &a, &o);
		gg_report_folded(sink, &a);
		gg_report_html(sink, &a, &o);
		gg_report_diff(sink, &a, &a, &o, 0);
		gg_analysis_free(&a);
	}
	gg_dump_free(&d);
	return 0;
}
