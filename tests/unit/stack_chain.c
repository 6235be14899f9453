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

/* Two callers alike in all but their return address: at the same depth, a
 * capture below either has the same stack pointer, so a cache keyed by the
 * stack pointer alone would give both one stack (stack.c's call-path
 * cache must tell them apart by the return addresses it validates). */
__attribute__((noinline)) uint32_t chain_via_a(uint32_t (*fn)(void))
{
	uint32_t id = chain_top(fn);
	__asm__ volatile("" ::: "memory");
	return id;
}

__attribute__((noinline)) uint32_t chain_via_b(uint32_t (*fn)(void))
{
	uint32_t id = chain_top(fn);
	__asm__ volatile("" ::: "memory");
	return id;
}
