/* gpuguard: stack capture and interning (stack.c). */
#ifndef GG_STACK_H
#define GG_STACK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* Maps the intern table and opens libunwind (dlopen). depth 0 = off. */
void gg_stack_init(int depth);
/* "libunwind", "frame-pointer" or "none". */
const char *gg_stack_unwinder(void);
int gg_stack_depth(void);
/* GPUGUARD_STACK_DEPTH, clamped (0 = off): set by gg_stack_init, at
 * initialisation, before any capture. */
extern int gg_stack_want __attribute__((visibility("hidden"))); /* as defined: read in place */
/* gg_stack_capture past its check of the depth. Its frame address is the
 * call-path cache's key (stack.c). */
uint32_t gg_stack_take(void);
/* The caller's stack (our own frames skipped), interned. 0 = none. Inline:
 * with stacks off (GPUGUARD_STACK_DEPTH=0) a capture is a load and a
 * branch in its caller (issue 24). */
static inline uint32_t gg_stack_capture(void)
{
	return gg_stack_want ? gg_stack_take() : 0;
}
uint32_t gg_stack_intern(const uintptr_t *frames, int n);
/* The frames of id, innermost first; returns how many (0 = unknown id). */
int gg_stack_frames(uint32_t id, const uintptr_t **frames);
/* Ids handed out so far (ids are 1 .. this). */
uint32_t gg_stack_ids(void);

#endif
