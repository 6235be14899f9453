/* gpuguard: unit tests for pystack.c's line-table decoding (issue 27). The
 * tables are a small function's, as each CPython 3.9-3.13 compiled it
 * (co_lnotab on 3.9, co_linetable after), with the line of every instruction
 * offset as that interpreter reports it (dis.findlinestarts on 3.9,
 * co_lines() after); gg_pystack_addr2line must give the same lines. Then
 * what a truncated or empty table gives: no line, never a read past it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "pystack.h"

struct case_ {
	int minor, first;
	const char *tab;
	int len, npairs;
	struct {
		int off, line;
	} pairs[80];
};

/* Generated with each pyenv interpreter from
 *   def f(a):
 *       x = a + 1
 *       if x > 2:
 *           y = [i for i in range(x)]
 *       else:
 *           y = None
 *
 *       return (x,
 *               y)
 * compiled as t.py (first line 2). */
static const struct case_ cases[] = {
    {9,
     2,
     "\x00\x01\x08\x01\x08\x01\x14\x02\x04\x02\x02\x01\x02\xff",
     14,
     24,
     {{0, 3},  {2, 3},  {4, 3},  {6, 3},  {8, 4},  {10, 4}, {12, 4}, {14, 4}, {16, 5}, {18, 5},  {20, 5}, {22, 5},
      {24, 5}, {26, 5}, {28, 5}, {30, 5}, {32, 5}, {34, 5}, {36, 7}, {38, 7}, {40, 9}, {42, 10}, {44, 9}, {46, 9}}},
    {10,
     2,
     "\x08\x01\x08\x01\x12\x01\x02\x04\x02\x01\x04\xff\x04\xfe\x02\x02\x02\x01\x04\xff",
     20,
     27,
     {{0, 3},   {2, 3},  {4, 3},  {6, 3},  {8, 4},  {10, 4}, {12, 4},  {14, 4}, {16, 5},
      {18, 5},  {20, 5}, {22, 5}, {24, 5}, {26, 5}, {28, 5}, {30, 5},  {32, 5}, {34, 9},
      {36, 10}, {38, 9}, {40, 9}, {42, 7}, {44, 7}, {46, 9}, {48, 10}, {50, 9}, {52, 9}}},
    {11,
     2,
     "\x80\x00\xd8\x08\x09\x88\x41\x89\x05\x80\x41\xd8\x07\x08\x88\x31\x82\x75\x80\x75\xd8\x0c\x21\xd0\x0c\x21\x9d\x05"
     "\x98\x61\x99\x08\x9c\x08\xd0\x0c\x21\xd1\x0c\x21\xd4\x0c\x21\x88\x01\x88\x01\xe0\x0c\x10\x88\x01\xe0\x0c\x0d\xd8"
     "\x0c\x0d\xf0\x03\x01\x0c\x0f\xf0\x00\x01\x05\x0f",
     68,
     44,
     {{0, 2},  {2, 3},  {4, 3},  {6, 3},  {8, 3},  {10, 3}, {12, 4}, {14, 4}, {16, 4},  {18, 4}, {20, 4},
      {22, 4}, {24, 5}, {26, 5}, {28, 5}, {30, 5}, {32, 5}, {34, 5}, {36, 5}, {38, 5},  {40, 5}, {42, 5},
      {44, 5}, {46, 5}, {48, 5}, {50, 5}, {52, 5}, {54, 5}, {56, 5}, {58, 5}, {60, 5},  {62, 5}, {64, 5},
      {66, 5}, {68, 5}, {70, 5}, {72, 5}, {74, 5}, {76, 7}, {78, 7}, {80, 9}, {82, 10}, {84, 9}, {86, 9}}},
    {12,
     2,
     "\x80\x00\xd8\x08\x09\x88\x41\x89\x05\x80\x41\xd8\x07\x08\x88\x31\x82\x75\xdc\x18\x1d\x98\x61\x9b\x08\xd6\x0c\x21"
     "\x90\x31\x8a\x51\xd0\x0c\x21\x88\x01\xd0\x0c\x21\xf0\x08\x00\x0d\x0e\xd8\x0c\x0d\xf0\x03\x01\x0c\x0f\xf0\x00\x01"
     "\x05\x0f\xf0\x05\x00\x0d\x11\x88\x01\xe0\x0c\x0d\xd8\x0c\x0d\xf0\x03\x01\x0c\x0f\xf0\x00\x01\x05\x0f\xf9\xf2\x09"
     "\x00\x0d\x22",
     87,
     50,
     {{0, 2},  {2, 3},  {4, 3},   {6, 3},  {8, 3},  {10, 3}, {12, 4},  {14, 4}, {16, 4}, {18, 4},
      {20, 4}, {22, 5}, {24, 5},  {26, 5}, {28, 5}, {30, 5}, {32, 5},  {34, 5}, {36, 5}, {38, 5},
      {40, 5}, {42, 5}, {44, 5},  {46, 5}, {48, 5}, {50, 5}, {52, 5},  {54, 5}, {56, 5}, {58, 5},
      {60, 5}, {62, 5}, {64, 5},  {66, 5}, {68, 5}, {70, 9}, {72, 10}, {74, 9}, {76, 9}, {78, 7},
      {80, 7}, {82, 9}, {84, 10}, {86, 9}, {88, 9}, {90, 0}, {92, 0},  {94, 5}, {96, 5}, {98, 5}}},
    {13,
     2,
     "\x80\x00\xd8\x08\x09\x88\x41\x89\x05\x80\x41\xd8\x07\x08\x88\x31\x83\x75\xdc\x18\x1d\x98\x61\x9c\x08\xd3\x0c\x21"
     "\x99\x08\x90\x31\x8a\x51\x99\x08\x88\x01\xd0\x0c\x21\xf0\x08\x00\x0d\x0e\xd8\x0c\x0d\xf0\x03\x01\x0c\x0f\xf0\x00"
     "\x01\x05\x0f\xf0\x05\x00\x0d\x11\x88\x01\xe0\x0c\x0d\xd8\x0c\x0d\xf0\x03\x01\x0c\x0f\xf0\x00\x01\x05\x0f\xf9\xf2"
     "\x09\x00\x0d\x22",
     88,
     52,
     {{0, 2},   {2, 3},  {4, 3},  {6, 3},  {8, 3},  {10, 3},  {12, 4},  {14, 4}, {16, 4}, {18, 4}, {20, 4},
      {22, 4},  {24, 5}, {26, 5}, {28, 5}, {30, 5}, {32, 5},  {34, 5},  {36, 5}, {38, 5}, {40, 5}, {42, 5},
      {44, 5},  {46, 5}, {48, 5}, {50, 5}, {52, 5}, {54, 5},  {56, 5},  {58, 5}, {60, 5}, {62, 5}, {64, 5},
      {66, 5},  {68, 5}, {70, 5}, {72, 5}, {74, 9}, {76, 10}, {78, 9},  {80, 9}, {82, 7}, {84, 7}, {86, 9},
      {88, 10}, {90, 9}, {92, 9}, {94, 0}, {96, 0}, {98, 5},  {100, 5}, {102, 5}}},
};

TEST(lines_as_each_interpreter_reports_them)
{
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		const struct case_ *c = &cases[k];
		for (int i = 0; i < c->npairs; i++) {
			int got = gg_pystack_addr2line(c->minor, (const unsigned char *)c->tab, (size_t)c->len,
			                               c->first, c->pairs[i].off);
			if (got != c->pairs[i].line)
				fprintf(stderr, "  3.%d offset %d: line %d, expected %d\n", c->minor, c->pairs[i].off,
				        got, c->pairs[i].line);
			CHECK(got == c->pairs[i].line);
		}
		/* Before the first instruction: the first line. */
		CHECK(gg_pystack_addr2line(c->minor, (const unsigned char *)c->tab, (size_t)c->len, c->first, -1) ==
		      c->first);
	}
}

TEST(truncated_tables_give_no_line)
{
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		const struct case_ *c = &cases[k];
		/* A copy with nothing after it, so a read past the end is
		 * caught under ASan. */
		for (int cut = 0; cut < c->len; cut++) {
			unsigned char *t = malloc((size_t)cut + 1);
			memcpy(t, c->tab, (size_t)cut);
			int last = c->pairs[c->npairs - 1].off;
			int got = gg_pystack_addr2line(c->minor, t, (size_t)cut, c->first, last + 1000);
			CHECK(got >= 0 && got < 100);
			free(t);
		}
		CHECK(gg_pystack_addr2line(c->minor, NULL, 0, c->first, 0) == (c->minor == 9 ? c->first : 0));
	}
}

int main(void)
{
	RUN(lines_as_each_interpreter_reports_them);
	RUN(truncated_tables_give_no_line);
	return harness_done();
}
