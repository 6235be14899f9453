/* gpuguard: unit tests for stack capture (stack.c): depth 0 is off, the
 * depth bounds what is kept, identical call stacks give one id, and the two
 * unwinders, libunwind and the frame-pointer walk (GPUGUARD_TEST_UNWINDER,
 * also what runs where libunwind is missing), agree on a known chain. The
 * unwinder and depth are fixed at the first capture, so each case runs in a
 * child of its own; interning itself is test_history's. */
#define _GNU_SOURCE
#define GG_OPTIONS_WRITER /* these tests set options (options.h) */
#include <dlfcn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness.h"
#include "options.h"
#include "stack.h"
#include "stack_chain.h"

struct capture {
	char unwinder[16];
	uint32_t id, again, other;
	uint32_t via[2][3]; /* chain_via_a, chain_via_b, three rounds each */
	                    /* chain_deep_a, chain_deep_b, k frames deep, two rounds each */
#define DEEP_KS 8
	uint32_t deep[DEEP_KS][2][2];
	int n;
	uintptr_t f[GG_STACK_MAX_DEPTH];
};

static uint32_t capture(void)
{
	return gg_stack_capture();
}

/* In a fresh child: init at depth, the chain captured twice from one call
 * site and once from another (chain_mid directly), sent back whole. */
static int run_child(int depth, int use_fp, struct capture *c)
{
	int p[2];
	memset(c, 0, sizeof *c);
	if (pipe(p) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		struct capture r;
		memset(&r, 0, sizeof r);
		gg_opt.unwinder_fp = use_fp;
		gg_stack_init(depth);
		/* volatile: the loop stays one call site, never unrolled */
		uint32_t ids[2];
		for (volatile int i = 0; i < 2; i++)
			ids[i] = chain_top(capture);
		r.id = ids[0];
		r.again = ids[1];
		r.other = chain_mid(capture);
		/* alternating, from one call site each: the same stack pointer
		 * below both, other return addresses above */
		for (volatile int i = 0; i < 3; i++) {
			r.via[0][i] = chain_via_a(capture);
			r.via[1][i] = chain_via_b(capture);
		}
		/* through one call site (a pointer), so that the return
		 * address into chain_deep_a or _b is the only word that
		 * differs, k frames above the capture's */
		for (int k = 0; k < DEEP_KS; k++)
			for (volatile int i = 0; i < 4; i++) {
				uint32_t (*volatile deep)(uint32_t(*)(void), int) = i & 1 ? chain_deep_b : chain_deep_a;
				r.deep[k][i & 1][i >> 1] = deep(capture, k);
			}
		const uintptr_t *f;
		r.n = gg_stack_frames(r.id, &f);
		if (r.n > 0)
			memcpy(r.f, f, (size_t)r.n * sizeof *f);
		strncpy(r.unwinder, gg_stack_unwinder(), sizeof r.unwinder - 1);
		ssize_t w = write(p[1], &r, sizeof r);
		_exit(w == (ssize_t)sizeof r ? 0 : 1);
	}
	close(p[1]);
	ssize_t got = read(p[0], c, sizeof *c);
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	return got == (ssize_t)sizeof *c && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static const char *fn_of(uintptr_t a)
{
	Dl_info info;
	/* a return address: the call is the byte before it */
	if (!dladdr((void *)(a - 1), &info) || !info.dli_sname)
		return "?";
	return info.dli_sname;
}

/* The first three frames are the chain, innermost first. */
static void check_chain(const struct capture *c)
{
	CHECK(c->n >= 3);
	if (c->n < 3)
		return;
	CHECK(strcmp(fn_of(c->f[0]), "chain_leaf") == 0);
	CHECK(strcmp(fn_of(c->f[1]), "chain_mid") == 0);
	CHECK(strcmp(fn_of(c->f[2]), "chain_top") == 0);
}

TEST(depth_0_is_off)
{
	struct capture c;
	CHECK_EQ_INT(run_child(0, 0, &c), 0);
	CHECK_EQ_INT(c.id, 0);
	CHECK_EQ_INT(c.again, 0);
	CHECK_EQ_INT(c.n, 0);
	CHECK(strcmp(c.unwinder, "none") == 0);
}

TEST(libunwind_captures_the_chain)
{
	struct capture c;
	CHECK_EQ_INT(run_child(16, 0, &c), 0);
	CHECK(c.id != 0);
	CHECK_EQ_INT(c.again, c.id); /* one call site, one stack, one id */
	CHECK(c.other != 0 && c.other != c.id);
	check_chain(&c);
}

TEST(frame_pointer_walk_captures_the_chain)
{
	struct capture c;
	CHECK_EQ_INT(run_child(16, 1, &c), 0);
	CHECK(strcmp(c.unwinder, "frame-pointer") == 0);
	CHECK(c.id != 0);
	CHECK_EQ_INT(c.again, c.id);
	CHECK(c.other != 0 && c.other != c.id);
	check_chain(&c);
}

/* A stack cached by where it was captured (stack.c's call-path cache)
 * is still told from another reached through another caller at the same
 * depth: each keeps its own id, round after round. */
TEST(same_depth_other_caller_is_another_stack)
{
	for (int fp = 0; fp < 2; fp++) {
		struct capture c;
		CHECK_EQ_INT(run_child(16, fp, &c), 0);
		CHECK(c.via[0][0] != 0 && c.via[1][0] != 0);
		CHECK(c.via[0][0] != c.via[1][0]);
		for (int i = 1; i < 3; i++) {
			CHECK_EQ_INT(c.via[0][i], c.via[0][0]);
			CHECK_EQ_INT(c.via[1][i], c.via[1][0]);
		}
		CHECK(c.via[0][0] != c.id && c.via[1][0] != c.id);
	}
}

/* The word that tells two call paths apart, at each distance from the
 * capture (the cache compares its words several at a time): each path
 * keeps its own id. */
TEST(a_differing_word_anywhere_is_another_stack)
{
	for (int fp = 0; fp < 2; fp++) {
		struct capture c;
		CHECK_EQ_INT(run_child(16, fp, &c), 0);
		for (int k = 0; k < DEEP_KS; k++) {
			CHECK(c.deep[k][0][0] != 0 && c.deep[k][1][0] != 0);
			CHECK(c.deep[k][0][0] != c.deep[k][1][0]);
			CHECK_EQ_INT(c.deep[k][0][1], c.deep[k][0][0]);
			CHECK_EQ_INT(c.deep[k][1][1], c.deep[k][1][0]);
		}
	}
}

/* Forked from one parent, both children have the chain at one address: the
 * unwinders must give the same return addresses, frame for frame. */
TEST(unwinders_agree)
{
	struct capture u, f;
	CHECK_EQ_INT(run_child(16, 0, &u), 0);
	CHECK_EQ_INT(run_child(16, 1, &f), 0);
	if (strcmp(u.unwinder, "libunwind") != 0)
		SKIP("no libunwind here (or a ThreadSanitizer build, which walks frame pointers)");
	CHECK(u.n >= 3 && f.n >= 3);
	for (int i = 0; i < 3 && i < u.n && i < f.n; i++)
		CHECK_EQ_U64(u.f[i], f.f[i]);
}

TEST(depth_bounds_the_frames_kept)
{
	struct capture c;
	CHECK_EQ_INT(run_child(2, 1, &c), 0);
	CHECK_EQ_INT(c.n, 2);
	CHECK(strcmp(fn_of(c.f[0]), "chain_leaf") == 0);
	CHECK(strcmp(fn_of(c.f[1]), "chain_mid") == 0);
	/* cut to two frames, chain_mid's own call of chain_leaf is the same stack */
	CHECK_EQ_INT(c.other, c.id);
	CHECK_EQ_INT(run_child(GG_STACK_MAX_DEPTH + 100, 0, &c), 0);
	CHECK(c.n >= 3 && c.n <= GG_STACK_MAX_DEPTH);
}

int main(void)
{
	RUN(depth_0_is_off);
	RUN(libunwind_captures_the_chain);
	RUN(frame_pointer_walk_captures_the_chain);
	RUN(same_depth_other_caller_is_another_stack);
	RUN(a_differing_word_anywhere_is_another_stack);
	RUN(unwinders_agree);
	RUN(depth_bounds_the_frames_kept);
	return harness_done();
}
