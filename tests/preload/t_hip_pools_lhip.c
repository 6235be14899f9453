/* gpuguard: HIP stream-ordered pools held to the ceiling for as long as the
 * runtime holds their memory (issue 10, findings 6 and 8, for HIP):
 * GPUGUARD_LIMIT=4Gi on two 16 GiB simulated cards (see .env). */
#include "common.h"
#include "gpuguard/hip_abi.h"

/* What the simulated card holds in pages on dev. */
static unsigned long long sim_held(int dev)
{
	return sim_held_by("hip", dev);
}

/* Finding 6: ROCm keeps a destroyed pool's live block until it is freed,
 * and cannot say which pool a pointer came from: what the blocks hold
 * stays charged, so no plain 3 GiB fits beside the 3 GiB block. The old
 * code refunded the pool at the destroy. */
TEST(hip_destroyed_pool_keeps_its_live_blocks_charged)
{
	gg_hipMemPoolProps props = {.allocType = GG_hipMemAllocationTypePinned,
	                            .location = {.type = GG_hipMemLocationTypeDevice, .id = 0}};
	gg_hipMemPool_t pool = NULL;
	CHECK_EQ_INT(hipMemPoolCreate(&pool, &props), GG_hipSuccess);
	void *a = NULL, *b = NULL, *c = NULL;
	CHECK_EQ_INT(hipMallocFromPoolAsync(&a, 3 * GIB, pool, NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipMallocFromPoolAsync(&b, 512 * MIB, pool, NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipFreeAsync(b, NULL), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).used, 3 * GIB + 512 * MIB);
	CHECK_EQ_INT(hipMemPoolDestroy(pool), GG_hipSuccess);
	CHECK_EQ_U64(sim_held(0), 3 * GIB);
	CHECK_EQ_U64(gg_stats(0).used, 3 * GIB);
	CHECK_EQ_INT(hipMalloc(&c, 3 * GIB), GG_hipErrorOutOfMemory);
	CHECK(sim_held(0) <= 4 * GIB);
	CHECK_EQ_INT(hipFreeAsync(a, NULL), GG_hipSuccess);
	CHECK_EQ_U64(sim_held(0), 0);
}

/* Finding 8: hipMallocAsync on a stream of device 1, device 0 current,
 * draws from device 1's pool and is charged there. */
TEST(hip_async_on_another_devices_stream_is_charged_to_that_device)
{
	gg_hipStream_t s1 = NULL;
	CHECK_EQ_INT(hipSetDevice(1), GG_hipSuccess);
	CHECK_EQ_INT(hipStreamCreate(&s1), GG_hipSuccess);
	CHECK_EQ_INT(hipSetDevice(0), GG_hipSuccess);
	uint64_t used0 = gg_stats(0).used;
	void *a[8] = {0};
	int granted = 0, refused = 0;
	for (int i = 0; i < 8; i++) {
		gg_hipError_t rc = hipMallocAsync(&a[granted], 1 * GIB, s1);
		if (rc == GG_hipSuccess)
			granted++;
		else if (rc == GG_hipErrorOutOfMemory)
			refused++;
	}
	CHECK_EQ_INT(granted, 4);
	CHECK_EQ_INT(refused, 4);
	CHECK(sim_held(1) <= 4 * GIB);
	CHECK_EQ_U64(gg_stats(1).used, 4 * GIB);
	CHECK_EQ_U64(gg_stats(0).used, used0);
	for (int i = 0; i < granted; i++)
		CHECK_EQ_INT(hipFreeAsync(a[i], s1), GG_hipSuccess);
	CHECK_EQ_INT(hipStreamSynchronize(s1), GG_hipSuccess);
	CHECK_EQ_U64(sim_held(1), 0);
	CHECK_EQ_U64(gg_stats(1).used, 0);
}

#define RUN_ONE(name)                                        \
	do {                                                 \
		if (argc < 2 || strcmp(argv[1], #name) == 0) \
			RUN(name);                           \
	} while (0)

int main(int argc, char **argv)
{
	RUN_ONE(hip_destroyed_pool_keeps_its_live_blocks_charged);
	RUN_ONE(hip_async_on_another_devices_stream_is_charged_to_that_device);
	return harness_done();
}
