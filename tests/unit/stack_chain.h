/* gpuguard: a known call chain for test_stack, in a library of its own:
 * stack capture skips the frames of the object it is linked into (for the
 * library, its own), so the chain must lie outside the test program.
 * chain_top calls chain_mid calls chain_leaf calls fn. */
#ifndef GPUGUARD_TEST_STACK_CHAIN_H
#define GPUGUARD_TEST_STACK_CHAIN_H

#include <stdint.h>

uint32_t chain_top(uint32_t (*fn)(void));
uint32_t chain_mid(uint32_t (*fn)(void));
uint32_t chain_leaf(uint32_t (*fn)(void));
/* Each calls chain_top; alike but for the return address into them. */
uint32_t chain_via_a(uint32_t (*fn)(void));
uint32_t chain_via_b(uint32_t (*fn)(void));
/* k calls of chain_rec, then fn. */
uint32_t chain_rec(uint32_t (*fn)(void), int k);
/* Each calls chain_rec(fn, k); alike but for the return address into them. */
uint32_t chain_deep_a(uint32_t (*fn)(void), int k);
uint32_t chain_deep_b(uint32_t (*fn)(void), int k);

#endif
