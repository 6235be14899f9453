/* gpuguard: test_stack's call chain (stack_chain.h). Built with frame
 * pointers; noinline and the empty asm after each call keep every frame
 * (no inlining, no tail call), so each unwinder sees all three. */
#include "stack_chain.h"

__attribute__((noinline)) uint32_t chain_leaf(uint32_t (*fn)(void))
{
	uint32_t id = fn();
	__asm__ volatile("" ::: "memory");
	return id;
}

__attribute__((noinline)) uint32_t chain_mid(uint32_t (*fn)(void))
{
	uint32_t id = chain_leaf(fn);
	__asm__ volatile("" ::: "memory");
	return id;
}

__attribute__((noinline)) uint32_t chain_top(uint32_t (*fn)(void))
{
	uint32_t id = chain_mid(fn);
	__asm__ volatile("" ::: "memory");
	return id;
}
