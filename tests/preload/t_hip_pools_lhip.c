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

/* the cases shared with CUDA (pool_cases.h) */
#define POOL_CASES_HIP
#include "pool_cases.h"

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
	async_on_other_devices_stream(1);
}

/* A device's current pool is cached by the hooks (issue 24): after
 * hipDeviceSetMemPool, hipMallocAsync draws from the new pool and its
 * growth is charged, though the old pool's free reserve would have served
 * it. Without the invalidation the 512 MiB went uncharged. */
TEST(hip_a_devices_new_current_pool_is_charged)
{
	gg_hipMemPoolProps props = {.allocType = GG_hipMemAllocationTypePinned,
	                            .location = {.type = GG_hipMemLocationTypeDevice, .id = 0}};
	gg_hipMemPool_t pool = NULL;
	void *a = NULL, *b = NULL, *c = NULL;
	CHECK_EQ_INT(hipMallocAsync(&a, 1 * GIB, NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipFreeAsync(a, NULL), GG_hipSuccess);
	CHECK_EQ_U64(sim_held(0), 1 * GIB);
	CHECK_EQ_U64(gg_stats(0).used, 1 * GIB);
	CHECK_EQ_INT(hipMemPoolCreate(&pool, &props), GG_hipSuccess);
	CHECK_EQ_INT(hipDeviceSetMemPool(0, pool), GG_hipSuccess);
	CHECK_EQ_INT(hipMallocAsync(&b, 512 * MIB, NULL), GG_hipSuccess);
	CHECK_EQ_U64(sim_held(0), 1 * GIB + 512 * MIB);
	CHECK_EQ_U64(gg_stats(0).used, 1 * GIB + 512 * MIB);
	CHECK_EQ_INT(hipMalloc(&c, 3 * GIB), GG_hipErrorOutOfMemory);
	CHECK(sim_held(0) <= 4 * GIB);
	CHECK_EQ_INT(hipFreeAsync(b, NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipMemPoolDestroy(pool), GG_hipSuccess);
	CHECK_EQ_INT(hipDeviceSynchronize(), GG_hipSuccess);
	CHECK_EQ_U64(sim_held(0), 0);
	CHECK_EQ_U64(gg_stats(0).used, 0);
}

gg_hipError_t simgpu_hip_debug_set_mem_pool(int dev, gg_hipMemPool_t pool);

/* A change of the current pool that no hook sees (ROCm 7's
 * hipMemSetMemPool, which the simulated 6.2 runtime lacks; its debug entry
 * here) is found when the hooks' cached pool is checked again: every
 * GG_POOL_RECHECK (256) requests of a thread (hook_hip.c's
 * device_pool_cached). With a countdown that never runs out, the new
 * pool's growth went uncharged for good. */
TEST(hip_a_current_pool_change_no_hook_sees_is_found_within_256_requests)
{
	gg_hipMemPoolProps props = {.allocType = GG_hipMemAllocationTypePinned,
	                            .location = {.type = GG_hipMemLocationTypeDevice, .id = 0}};
	gg_hipMemPool_t def = NULL, pool = NULL;
	void *a = NULL;
	CHECK_EQ_INT(hipDeviceGetMemPool(&def, 0), GG_hipSuccess);
	CHECK_EQ_INT(hipMallocAsync(&a, 1 * MIB, NULL), GG_hipSuccess); /* the cache is filled */
	CHECK_EQ_INT(hipFreeAsync(a, NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipMemPoolCreate(&pool, &props), GG_hipSuccess);
	CHECK_EQ_INT(simgpu_hip_debug_set_mem_pool(0, pool), GG_hipSuccess);
	/* the first request drawn from the new pool whose growth we charge */
	int n = 0;
	for (; n < 1000; n++) {
		CHECK_EQ_INT(hipMallocAsync(&a, 1 * MIB, NULL), GG_hipSuccess);
		int seen = gg_stats(0).used >= sim_held(0);
		CHECK_EQ_INT(hipFreeAsync(a, NULL), GG_hipSuccess);
		if (seen)
			break;
	}
	CHECK(n <= 256);
	CHECK_EQ_INT(hipDeviceSetMemPool(0, def), GG_hipSuccess);
	CHECK_EQ_INT(hipMemPoolDestroy(pool), GG_hipSuccess);
	CHECK_EQ_INT(hipDeviceSynchronize(), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).used, sim_held(0));
}

int main(int argc, char **argv)
{
	RUN_ONE(hip_a_devices_new_current_pool_is_charged); /* first: the next keeps 3 GiB charged until exit */
	RUN_ONE(hip_a_current_pool_change_no_hook_sees_is_found_within_256_requests);
	RUN_ONE(hip_destroyed_pool_keeps_its_live_blocks_charged);
	RUN_ONE(hip_async_on_another_devices_stream_is_charged_to_that_device);
	return harness_done();
}
