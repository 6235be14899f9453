/* gpuguard test server, PyTorch-like: a training loop over batches of
 * varying sequence length, through the stand-in caching allocator
 * (libc10_cuda.so). Weights and optimizer state stay; each step's
 * activations are freed at its end and stay cached in segments of their
 * sizes. The longest batches do not fit the ceiling: OutOfMemoryError,
 * the step is skipped. Never asks cuMemGetInfo: PyTorch does not size
 * itself. */
#include "c10.h"
#include "srv.h"

#define STEPS 120
#define ACTS 24

/* Not static: -rdynamic names them in the dump's stacks. */
void *at_empty(size_t n);

__attribute__((noinline)) void *at_empty(size_t n)
{
	void *p = c10_malloc(0, n);
	__asm__ volatile("" ::: "memory");
	return p;
}

int main(void)
{
	srv_init("torch_like");
	for (int i = 0; i < 8; i++) /* parameters and Adam's two moments */
		if (!at_empty(256 * MIB)) {
			fprintf(stderr, "torch_like: the model does not fit\n");
			return 3;
		}
	uint64_t rng = 5;
	int skipped = 0;
	void *act[ACTS];
	for (int s = 0; s < STEPS; s++) {
		uint64_t seq = 128 + srv_rand(&rng) % 1920; /* tokens */
		int n = 0, ok = 1;
		for (; n < ACTS; n++) {
			/* small bias grads, medium norms, large activations */
			size_t sz = n % 3 == 0 ? 300 * 1024 : n % 3 == 1 ? 3 * MIB + seq * 1024 : seq * 128 * 1024;
			if (!(act[n] = at_empty(sz))) {
				ok = 0;
				break;
			}
		}
		for (int k = 0; k < n; k++)
			c10_free(act[k]);
		skipped += !ok;
	}
	printf("summary: %d requests: %d served, %d rejected\n", STEPS, STEPS - skipped, skipped);
	return 0;
}
