/* gpuguard: libFuzzer target for the dump reader and the analyzer behind
 * `gpuguard report` (and its report model): any bytes must give a report or a clean error, never a
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
		struct gg_model m;
		gg_analyze(&a, &d);
		if (gg_model_build(&m, &a, &o) == 0) {
			gg_report_text(sink, &m);
			gg_report_json(sink, &m);
			gg_report_html(sink, &m);
			gg_report_folded(sink, &m);
			gg_report_speedscope(sink, &m);
			gg_report_diff(sink, &m, &m, 0);
			gg_report_diff(sink, &m, &m, 1);
			gg_model_free(&m);
		}
		gg_analysis_free(&a);
	}
	gg_dump_free(&d);
	return 0;
}
