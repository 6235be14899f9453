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

/* k frames of chain_rec, then fn. */
__attribute__((noinline)) uint32_t chain_rec(uint32_t (*fn)(void), int k)
{
	uint32_t id = k > 0 ? chain_rec(fn, k - 1) : fn();
	__asm__ volatile("" ::: "memory");
	return id;
}

/* As chain_via_a and chain_via_b, with k frames between the capture and
 * the return address that tells them apart: the cache must compare the
 * word wherever it lies among the ones it checks. */
__attribute__((noinline)) uint32_t chain_deep_a(uint32_t (*fn)(void), int k)
{
	uint32_t id = chain_rec(fn, k);
	__asm__ volatile("" ::: "memory");
	return id;
}

__attribute__((noinline)) uint32_t chain_deep_b(uint32_t (*fn)(void), int k)
{
	uint32_t id = chain_rec(fn, k);
	__asm__ volatile("" ::: "memory");
	return id;
}
