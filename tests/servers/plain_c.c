/* gpuguard test server, a plain C program: never asks how much memory
 * there is; keeps a working set of 2 MiB blocks (the size proves nothing:
 * it is no PyTorch) that grows with its input and is freed as items
 * finish, plus one 64 MiB table. Past its ceiling an item is dropped.
 * PLAIN_C_BIG_MIB=N: halfway through, one item also needs a buffer of N
 * MiB for a moment (a merge), the largest demand of the run. */
#include "srv.h"

#define ITEMS 300
#define RING 100

/* Not static: -rdynamic names them in the dump's stacks. */
gg_CUdeviceptr block_alloc(size_t n);

__attribute__((noinline)) gg_CUdeviceptr block_alloc(size_t n)
{
	gg_CUdeviceptr p = 0;
	return cuMemAlloc_v2(&p, n) == GG_CUDA_SUCCESS ? p : 0;
}

int main(void)
{
	srv_init("plain_c");
	gg_CUdeviceptr table = block_alloc(64 * MIB);
	if (!table)
		return 3;
	/* Each item in flight holds up to 32 blocks; RING items are in flight. */
	static gg_CUdeviceptr held[RING][32];
	static int nheld[RING];
	uint64_t rng = 3;
	int dropped = 0;
	const char *big = getenv("PLAIN_C_BIG_MIB");
	for (int it = 0; it < ITEMS; it++) {
		int slot = it % RING;
		for (int k = 0; k < nheld[slot]; k++)
			cuMemFree_v2(held[slot][k]);
		nheld[slot] = 0;
		int want = 8 + (int)(srv_rand(&rng) % 25), ok = 1;
		for (int k = 0; k < want; k++) {
			gg_CUdeviceptr p = block_alloc(2 * MIB);
			if (!p) {
				ok = 0;
				break;
			}
			held[slot][nheld[slot]++] = p;
		}
		if (ok && big && it == ITEMS / 2) {
			gg_CUdeviceptr p = block_alloc((size_t)strtoull(big, NULL, 10) * MIB);
			if (p)
				cuMemFree_v2(p);
			ok = p != 0;
		}
		dropped += !ok;
	}
	printf("summary: %d requests: %d served, %d rejected\n", ITEMS, ITEMS - dropped, dropped);
	return 0;
}
