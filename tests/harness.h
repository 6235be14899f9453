/* gpuguard: a tiny header-only test harness. Each TEST is a function; a failed
 * CHECK prints file:line and marks the running test failed. harness_done()
 * prints the one summary line tests/run.sh adds up. */
#ifndef GPUGUARD_TEST_HARNESS_H
#define GPUGUARD_TEST_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int harness_passed, harness_failed, harness_skipped, harness_cur_failed, harness_cur_skipped;
static const char *harness_cur_name = "";

#define TEST(name) static void name(void)

#define CHECK(cond)                                                                                                    \
	do {                                                                                                           \
		if (!(cond)) {                                                                                         \
			fprintf(stderr, "%s:%d: %s: check failed: %s\n", __FILE__, __LINE__, harness_cur_name, #cond); \
			harness_cur_failed = 1;                                                                        \
		}                                                                                                      \
	} while (0)

#define CHECK_EQ_U64(a, b)                                                                                            \
	do {                                                                                                          \
		uint64_t ha_ = (uint64_t)(a), hb_ = (uint64_t)(b);                                                    \
		if (ha_ != hb_) {                                                                                     \
			fprintf(stderr, "%s:%d: %s: check failed: %s == %s (%" PRIu64 " vs %" PRIu64 ")\n", __FILE__, \
			        __LINE__, harness_cur_name, #a, #b, ha_, hb_);                                        \
			harness_cur_failed = 1;                                                                       \
		}                                                                                                     \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                                                        \
	do {                                                                                                      \
		long long ha_ = (long long)(a), hb_ = (long long)(b);                                             \
		if (ha_ != hb_) {                                                                                 \
			fprintf(stderr, "%s:%d: %s: check failed: %s == %s (%lld vs %lld)\n", __FILE__, __LINE__, \
			        harness_cur_name, #a, #b, ha_, hb_);                                              \
			harness_cur_failed = 1;                                                                   \
		}                                                                                                 \
	} while (0)

/* Inside a TEST: this machine cannot run it (counted as skipped, never as
 * passed). */
#define SKIP(why)                                               \
	do {                                                    \
		printf("skip %s: %s\n", harness_cur_name, why); \
		harness_cur_skipped = 1;                        \
		return;                                         \
	} while (0)

#define RUN(name)                                   \
	do {                                        \
		harness_cur_name = #name;           \
		harness_cur_failed = 0;             \
		harness_cur_skipped = 0;            \
		name();                             \
		if (harness_cur_failed) {           \
			harness_failed++;           \
			printf("FAIL %s\n", #name); \
		} else if (harness_cur_skipped) {   \
			harness_skipped++;          \
		} else {                            \
			harness_passed++;           \
			printf("ok   %s\n", #name); \
		}                                   \
		fflush(stdout);                     \
	} while (0)

static inline int harness_done(void)
{
	if (harness_skipped)
		printf("harness: %d passed, %d failed, %d skipped\n", harness_passed, harness_failed, harness_skipped);
	else
		printf("harness: %d passed, %d failed\n", harness_passed, harness_failed);
	return harness_failed ? 1 : 0;
}

#endif
