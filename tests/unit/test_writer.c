/* gpuguard: unit tests for the dump writer's pieces (dump_json.c,
 * dump_json.h): string escaping (C0 and C1 controls, DEL, bytes that are
 * not UTF-8, kept UTF-8) and numbers at their limits; and a writer ->
 * loader round trip in one process, records from dump_records.c read back
 * by the command's loader (tools/load.c) field for field. schema.sh checks
 * whole dumps' keys and that the report loads them; here the values. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness.h"
#include "base.h"
#include "dump_json.h"
#include "dump_records.h"
#include "gpuguard/dump.h"
#include "vmm.h"
/* tools/tool.h's struct gg_alloc (a record as read) is not the library's */
#define gg_alloc gg_loaded_alloc
#include "../tools/tool.h"
#undef gg_alloc

static struct gg_out out;

static void out_reset(int fd)
{
	if (!out.buf)
		out.buf = malloc(GG_OUT_CAP);
	out.fd = fd;
	out.err = 0;
	out.len = 0;
	out.records = 0;
	out.bytes = 0;
}

/* What s (n bytes) becomes as a JSON string, against want. */
static int escapes_to(const char *s, size_t n, const char *want)
{
	out_reset(-1);
	gg_out_json_n(&out, s, n);
	int same = out.len == strlen(want) && memcmp(out.buf, want, out.len) == 0;
	if (!same)
		fprintf(stderr, "    got %.*s, want %s\n", (int)out.len, out.buf, want);
	return same;
}
#define ESC(lit, want) escapes_to(lit, sizeof(lit) - 1, want)

TEST(strings_escape_quotes_controls_and_bad_bytes)
{
	CHECK(ESC("plain text", "\"plain text\""));
	CHECK(ESC("a\"b\\c/d", "\"a\\\"b\\\\c/d\""));
	/* C0 controls, DEL: \u00XX, newline and tab included */
	CHECK(ESC("\x01\x1f\n\t\x7f", "\"\\u0001\\u001f\\u000a\\u0009\\u007f\""));
	/* C1 controls as lone bytes are not UTF-8: escaped */
	CHECK(ESC("\x85\x9b", "\"\\u0085\\u009b\""));
	/* well-formed UTF-8 is kept, C1 controls written as UTF-8 (U+009B)
	 * too: valid JSON, and the command's terminal filter is the reader's */
	CHECK(ESC("\xc3\xa9\xf0\x9f\x98\x80\xc2\x9b", "\"\xc3\xa9\xf0\x9f\x98\x80\xc2\x9b\""));
	/* not UTF-8: overlong, surrogate, past U+10FFFF, cut short, 0xff */
	CHECK(ESC("\xc0\xaf", "\"\\u00c0\\u00af\""));
	CHECK(ESC("\xed\xa0\x80", "\"\\u00ed\\u00a0\\u0080\""));
	CHECK(ESC("\xf4\x90\x80\x80", "\"\\u00f4\\u0090\\u0080\\u0080\""));
	CHECK(ESC("x\xe2\x82", "\"x\\u00e2\\u0082\""));
	CHECK(ESC("\xff", "\"\\u00ff\""));
	CHECK(ESC("", "\"\""));
}

static int number_is(void (*put)(struct gg_out *), const char *want)
{
	out_reset(-1);
	put(&out);
	int same = out.len == strlen(want) && memcmp(out.buf, want, out.len) == 0;
	if (!same)
		fprintf(stderr, "    got %.*s, want %s\n", (int)out.len, out.buf, want);
	return same;
}
static void u0(struct gg_out *o)
{
	gg_out_u64(o, 0);
}
static void umax(struct gg_out *o)
{
	gg_out_u64(o, UINT64_MAX);
}
static void imin(struct gg_out *o)
{
	gg_out_i64(o, INT64_MIN);
}
static void ineg(struct gg_out *o)
{
	gg_out_i64(o, -42);
}
static void h0(struct gg_out *o)
{
	gg_out_hex_str(o, 0);
}
static void hmax(struct gg_out *o)
{
	gg_out_hex_str(o, UINT64_MAX);
}
static void hmid(struct gg_out *o)
{
	gg_out_hex_str(o, 0x7f0000200000ull);
}

TEST(numbers_at_their_limits)
{
	CHECK(number_is(u0, "0"));
	CHECK(number_is(umax, "18446744073709551615"));
	CHECK(number_is(imin, "-9223372036854775808"));
	CHECK(number_is(ineg, "-42"));
	CHECK(number_is(h0, "\"0\""));
	CHECK(number_is(hmax, "\"ffffffffffffffff\""));
	CHECK(number_is(hmid, "\"7f0000200000\""));
}

/* The writer's records, flushed to a file, read back by the loader. */
TEST(writer_to_loader_round_trip)
{
	char path[] = "/tmp/gg-test-writer-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	out_reset(fd);
	/* a host name with every kind of byte the escaper treats */
	static const char host[] = "h\"\\\x01\x7f\xc3\xa9\xff";
	gg_dump_rec_header(&out, GG_DUMP_EXIT, 1700000000123ull, 5000, host);
	gg_vmm_reset();
	uint64_t base = 0xfffffffe00000000ull;
	gg_vmm_reserved(base, 5 * GG_PAGE);
	gg_vmm_mapped(base, GG_PAGE, 1);
	gg_vmm_mapped(base + 3 * GG_PAGE, GG_PAGE, 1);
	gg_vmm_foreach(gg_dump_rec_vmm_one, &out);
	gg_vmm_freed(base);
	gg_dump_rec_end(&out, 7, 9, NULL);
	gg_out_flush(&out);
	CHECK_EQ_INT(out.err, 0);
	close(fd);

	struct gg_dump d;
	char err[256] = "";
	memset(&d, 0, sizeof d);
	int rc = gg_dump_load(&d, path, stderr, err, sizeof err);
	unlink(path);
	CHECK_EQ_INT(rc, 0);
	if (rc) {
		fprintf(stderr, "    %s\n", err);
		return;
	}
	CHECK_EQ_U64(d.format, GPUGUARD_DUMP_FORMAT);
	CHECK_EQ_U64(d.unix_ms, 1700000000123ull);
	CHECK_EQ_U64(d.start_unix_ms, 1700000000123ull - 5000);
	CHECK_EQ_U64(d.pid, (uint64_t)getpid());
	CHECK(d.trigger && strcmp(d.trigger, "exit") == 0);
	/* \u00ff comes back as U+00FF: the one byte that was not UTF-8 */
	CHECK(d.host && strcmp(d.host, "h\"\\\x01\x7f\xc3\xa9\xc3\xbf") == 0);
	CHECK(d.cmdline && strncmp(d.cmdline, program_invocation_name, strlen(program_invocation_name)) == 0);
	CHECK_EQ_U64(d.nvmm, 1);
	if (d.nvmm == 1) {
		CHECK_EQ_U64(d.vmm[0].base, base);
		CHECK_EQ_U64(d.vmm[0].size, 5 * GG_PAGE);
		CHECK_EQ_U64(d.vmm[0].mapped, 2 * GG_PAGE);
		CHECK_EQ_U64(d.vmm[0].holes, 1);
		CHECK_EQ_U64(d.vmm[0].largest_hole, 2 * GG_PAGE);
	}
	CHECK(d.has_end);
	CHECK_EQ_U64(d.end_records, 2);
	CHECK_EQ_U64(d.suppressed, 7);
	CHECK_EQ_U64(d.write_errors, 9);
	CHECK(!d.truncated);
	CHECK_EQ_U64(d.lines, 3);
	gg_dump_free(&d);
}

int main(void)
{
	RUN(strings_escape_quotes_controls_and_bad_bytes);
	RUN(numbers_at_their_limits);
	RUN(writer_to_loader_round_trip);
	return harness_done();
}
