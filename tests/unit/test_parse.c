/* gpuguard: unit tests for the value syntaxes the library and the gpuguard
 * command share (include/gpuguard/parse.h, signals.h): quantities,
 * durations, GPUGUARD_LIMIT and dump signals. Compiled against the headers
 * alone, which both sides include, so these answers are both sides'
 * answers (tests/scripts/dump_target.sh also runs the two programs). */
#include <signal.h>

#include <gpuguard/parse.h>
#include <gpuguard/signals.h>

#include "../harness.h"

#define KI 1024ull
#define MI (1024ull * KI)
#define GI (1024ull * MI)

static int q(const char *s, uint64_t want)
{
	uint64_t v = 0xabababab;
	if (gpuguard_parse_quantity(s, &v) != 0) {
		fprintf(stderr, "  quantity \"%s\" rejected\n", s);
		return 0;
	}
	if (v != want)
		fprintf(stderr, "  quantity \"%s\" = %llu, want %llu\n", s, (unsigned long long)v,
		        (unsigned long long)want);
	return v == want;
}

static int q_bad(const char *s)
{
	uint64_t v;
	if (gpuguard_parse_quantity(s, &v) == 0) {
		fprintf(stderr, "  quantity \"%s\" accepted as %llu\n", s, (unsigned long long)v);
		return 0;
	}
	return 1;
}

TEST(quantity_accepts)
{
	CHECK(q("20Gi", 20 * GI));
	CHECK(q("20G", 20000000000ull));
	CHECK(q("1.5Gi", 3 * GI / 2));
	CHECK(q("1e9", 1000000000ull));
	CHECK(q("1E3", 1000));
	CHECK(q("512", 512));
	CHECK(q("0", 0));
	CHECK(q("1Ki", 1024));
	CHECK(q("100k", 100000));
	CHECK(q("8Mi", 8 * MI));
	CHECK(q("3M", 3000000));
	CHECK(q("2Ti", 2048 * GI));
	CHECK(q("1T", 1000000000000ull));
	CHECK(q("1Pi", 1ull << 50));
	CHECK(q("1P", 1000000000000000ull));
	CHECK(q("15Ei", 15ull << 60));
	CHECK(q("1E", 1000000000000000000ull));
	CHECK(q("18446744073709551615", UINT64_MAX));
	CHECK(q("2.5k", 2500));
	/* Fractions round up to a whole byte, as Kubernetes does. */
	CHECK(q("0.5", 1));
	CHECK(q("0.1", 1));
	CHECK(q("1.5", 2));
	CHECK(q("0.001Ki", 2)); /* 1.024 */
	CHECK(q("1.0000001Ki", 1025));
	CHECK(q("0.3Gi", 322122548)); /* 322122547.2 */
}

TEST(quantity_rejects)
{
	const char *bad[] = {"",
	                     "Gi",
	                     "20GB",
	                     "20 Gi",
	                     "-1",
	                     "1.2.3",
	                     "20g",
	                     "20Ei",
	                     "16Ei",
	                     "99999999999999999999",
	                     "18446744073709551616",
	                     "20e18",
	                     "1e99",
	                     " 20Gi",
	                     "20Gi ",
	                     "+5",
	                     "20i",
	                     "20KI",
	                     "20ki",
	                     "0x10",
	                     "1e",
	                     "1e-3",
	                     "e9",
	                     ".",
	                     "20Gii",
	                     "20GiB"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(q_bad(bad[i]));
	CHECK(gpuguard_parse_quantity(NULL, &(uint64_t){0}) == -1);
}

TEST(limit_single_value_all_devices)
{
	struct gpuguard_limits l;
	CHECK_EQ_INT(gpuguard_parse_limit("20Gi", &l), 0);
	int bad = 0;
	for (int d = 0; d < GPUGUARD_MAX_DEVICES; d++)
		bad += l.dev[d].kind != GPUGUARD_LIMIT_BYTES || l.dev[d].value != 20 * GI;
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(gpuguard_parse_limit("  8Gi \n", &l), 0); /* surrounding space is trimmed */
	CHECK_EQ_U64(l.dev[3].value, 8 * GI);

	CHECK_EQ_INT(gpuguard_parse_limit("90%", &l), 0);
	CHECK_EQ_INT(l.dev[0].kind, GPUGUARD_LIMIT_PERCENT);
	CHECK_EQ_U64(l.dev[0].value, 9000);
	CHECK_EQ_INT(l.dev[63].kind, GPUGUARD_LIMIT_PERCENT);
	CHECK_EQ_INT(gpuguard_parse_limit("12.5%", &l), 0);
	CHECK_EQ_U64(l.dev[7].value, 1250);
	CHECK_EQ_INT(gpuguard_parse_limit("100%", &l), 0);
	CHECK_EQ_U64(l.dev[0].value, 10000);
	CHECK_EQ_INT(gpuguard_parse_limit("0.01%", &l), 0);
	CHECK_EQ_U64(l.dev[0].value, 1);

	CHECK_EQ_INT(gpuguard_parse_limit(NULL, &l), 0); /* unset: no ceiling anywhere */
	CHECK_EQ_INT(l.dev[0].kind, GPUGUARD_LIMIT_NONE);
}

TEST(limit_list)
{
	struct gpuguard_limits l;
	CHECK_EQ_INT(gpuguard_parse_limit("0=20Gi,1=8Gi", &l), 0);
	CHECK_EQ_INT(l.dev[0].kind, GPUGUARD_LIMIT_BYTES);
	CHECK_EQ_U64(l.dev[0].value, 20 * GI);
	CHECK_EQ_INT(l.dev[1].kind, GPUGUARD_LIMIT_BYTES);
	CHECK_EQ_U64(l.dev[1].value, 8 * GI);
	int others = 0;
	for (int d = 2; d < GPUGUARD_MAX_DEVICES; d++)
		others += l.dev[d].kind != GPUGUARD_LIMIT_NONE;
	CHECK_EQ_INT(others, 0);

	CHECK_EQ_INT(gpuguard_parse_limit("*=4Gi,1=8Gi", &l), 0);
	CHECK_EQ_U64(l.dev[0].value, 4 * GI);
	CHECK_EQ_U64(l.dev[1].value, 8 * GI);
	CHECK_EQ_U64(l.dev[63].value, 4 * GI);
	CHECK_EQ_INT(l.dev[63].kind, GPUGUARD_LIMIT_BYTES);

	CHECK_EQ_INT(gpuguard_parse_limit("1=50%,*=4Gi,63=1Mi", &l), 0); /* star anywhere */
	CHECK_EQ_INT(l.dev[1].kind, GPUGUARD_LIMIT_PERCENT);
	CHECK_EQ_U64(l.dev[1].value, 5000);
	CHECK_EQ_U64(l.dev[2].value, 4 * GI);
	CHECK_EQ_U64(l.dev[63].value, MI);
}

TEST(limit_rejects)
{
	const char *bad[] = {"0%",          "101%",         "%",     "",       "   ",    "12.345%",  "-5%",
	                     "0=1Gi,0=2Gi", "0=1Gi,",       "x=1Gi", "64=1Gi", "0=",     "=1Gi",     "0=1Gi,,1=1Gi",
	                     "*=1Gi,*=2Gi", "0=1Gi, 1=2Gi", "0=1GB", "20GB",   "0==1Gi", "1000=1Gi", "0=101%",
	                     "20Gi,8Gi",    "-1=1Gi"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct gpuguard_limits l;
		if (gpuguard_parse_limit(bad[i], &l) != -1) {
			fprintf(stderr, "  limit \"%s\" accepted\n", bad[i]);
			CHECK(!"bad limit accepted");
		}
	}
}

static int d(const char *s, uint64_t want)
{
	uint64_t v = 0xabababab;
	if (gpuguard_parse_duration_ms(s, &v) != 0) {
		fprintf(stderr, "  duration \"%s\" rejected\n", s);
		return 0;
	}
	if (v != want)
		fprintf(stderr, "  duration \"%s\" = %llu ms, want %llu\n", s, (unsigned long long)v,
		        (unsigned long long)want);
	return v == want;
}

TEST(duration_accepts)
{
	CHECK(d("10s", 10000));
	CHECK(d("500ms", 500));
	CHECK(d("2m", 120000));
	CHECK(d("1h", 3600000));
	CHECK(d("3", 3000)); /* plain seconds */
	CHECK(d("0", 0));
	CHECK(d("0ms", 0));
	/* Decimals, in every unit (the library refused them before issue 12;
	 * the command refused "1h"). */
	CHECK(d("1.5s", 1500));
	CHECK(d("1.5", 1500));
	CHECK(d("0.25m", 15000));
	CHECK(d("1.5h", 5400000));
	CHECK(d(".5s", 500));
	CHECK(d("2.s", 2000));
	CHECK(d("007s", 7000));
	/* A fraction of a millisecond rounds up: not zero stays not zero. */
	CHECK(d("0.5ms", 1));
	CHECK(d("1.0001ms", 2));
	CHECK(d("0.0001s", 1));
	CHECK(d("0.0000000000000000001s", 1)); /* past 15 digits too */
	CHECK(d("0.000000000000000000s", 0));
	CHECK(d("18446744073709551615ms", UINT64_MAX));
	CHECK(d("5124095576030h", 5124095576030ull * 3600000));
}

TEST(duration_rejects)
{
	const char *bad[] = {"",
	                     "s",
	                     "ms",
	                     ".",
	                     ".s",
	                     "-1s",
	                     "+1s",
	                     " 1s",
	                     "1s ",
	                     "1 s",
	                     "1S",
	                     "1sec",
	                     "1d",
	                     "1e3",
	                     "1e3ms",
	                     "0x10",
	                     "inf",
	                     "nan",
	                     "1.5.5",
	                     "1..5s",
	                     "1,5s",
	                     "1h30m",
	                     "wait",
	                     "10s\n",
	                     "1mss",
	                     "1hs",
	                     "18446744073709551616ms",
	                     "18446744073709551615s",
	                     "5124095576031h",
	                     "99999999999999999999"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v;
		if (gpuguard_parse_duration_ms(bad[i], &v) == 0) {
			fprintf(stderr, "  duration \"%s\" accepted as %llu ms\n", bad[i], (unsigned long long)v);
			CHECK(!"bad duration accepted");
		}
	}
	CHECK(gpuguard_parse_duration_ms(NULL, &(uint64_t){0}) == -1);
}

TEST(quantity_past_fifteen_digits_rounds_up)
{
	CHECK(q("0.0000000000000000001", 1));
	CHECK(q("1.0000000000000000000", 1));
	CHECK(q("0.9999999999999999999", 1));
	CHECK(q("0.0000000000000000001Ki", 1));
	CHECK(q("1.", 1));
	CHECK(q(".5Ki", 512));
	CHECK(q_bad(".Ki"));
	CHECK(q_bad("1.5.Ki"));
}

static int signal_of(const char *s, int *sig)
{
	return gpuguard_dump_signal_parse(s, sig, NULL);
}

TEST(dump_signal_parse)
{
	int sig = -1;
	CHECK(signal_of("SIGUSR2", &sig) == 0 && sig == SIGUSR2);
	CHECK(signal_of("USR1", &sig) == 0 && sig == SIGUSR1);
	CHECK(signal_of("12", &sig) == 0 && sig == 12);
	CHECK(signal_of("0", &sig) == 0 && sig == 0);
	CHECK(signal_of("SIGRTMIN+2", &sig) == 0 && sig == SIGRTMIN + 2);
	CHECK(signal_of("9", &sig) != 0); /* SIGKILL cannot be caught */
	CHECK(signal_of("SIGFOO", &sig) != 0);
	CHECK(signal_of("", &sig) != 0);
	CHECK(signal_of("-1", &sig) != 0);
	CHECK(signal_of("SIGRTMIN+999999999999", &sig) != 0); /* no overflow into a valid signal */
	CHECK(signal_of("RTMIN+1x", &sig) != 0);
	CHECK(signal_of("SIGRTMAX-1", &sig) == 0 && sig == SIGRTMAX - 1);
	CHECK(signal_of("PWR", &sig) == 0 && sig == SIGPWR);
	/* Issue 10, finding 3: a signal whose handler would change a crash or
	 * a stop is refused (SEGV became a hang with no core, TERM was
	 * ignored), and so is a number with no handler slot (32 and 33 installed
	 * nothing, silently). */
	const char *const refused[] = {"SEGV",   "SIGBUS", "ILL",  "FPE",  "ABRT", "TRAP", "SYS",  "TERM",
	                               "SIGINT", "QUIT",   "HUP",  "KILL", "STOP", "PIPE", "ALRM", "XCPU",
	                               "XFSZ",   "TSTP",   "TTIN", "TTOU", "11",   "4",    "7",    "8",
	                               "15",     "32",     "33",   "65",   "1000"};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		sig = -7;
		if (signal_of(refused[i], &sig) == 0) {
			fprintf(stderr, "accepted %s as dump signal %d\n", refused[i], sig);
			CHECK(!"a signal that changes a crash or a stop was accepted");
		}
	}
	const char *why = NULL;
	CHECK(gpuguard_dump_signal_parse("SEGV", &sig, &why) == -1 && why != NULL);
	CHECK(gpuguard_dump_signal_parse("NOPE", &sig, &why) == -1 && why == NULL);
	CHECK(gpuguard_dump_signal_parse(NULL, &sig, &why) == -1 && why == NULL);
	CHECK(signal_of("SIG", &sig) != 0);
	CHECK(signal_of("SIGUSR2 ", &sig) != 0);
	CHECK(signal_of("usr2", &sig) != 0);
	CHECK(signal_of("RTMIN", &sig) == 0 && sig == SIGRTMIN);
	CHECK(signal_of("SIGRTMAX", &sig) == 0 && sig == SIGRTMAX);
	CHECK(signal_of("RTMIN+", &sig) != 0);
	CHECK(signal_of("RTMAX-99", &sig) != 0); /* below SIGRTMIN: glibc's own */
	CHECK(signal_of("00012", &sig) != 0);    /* at most 4 digits */
	CHECK(signal_of("0012", &sig) == 0 && sig == 12);
}

int main(void)
{
	RUN(quantity_accepts);
	RUN(quantity_rejects);
	RUN(quantity_past_fifteen_digits_rounds_up);
	RUN(duration_accepts);
	RUN(duration_rejects);
	RUN(limit_single_value_all_devices);
	RUN(limit_list);
	RUN(limit_rejects);
	RUN(dump_signal_parse);
	return harness_done();
}
