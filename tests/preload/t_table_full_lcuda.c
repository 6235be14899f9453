/* gpuguard: with a table that starts at 64 slots (GPUGUARD_TABLE_SLOTS=64,
 * see .env) and thousands of live allocations, every allocation still works,
 * is charged, and is refunded exactly at its free: the table grows to hold
 * them all, with nothing left to the overflow area (table.c's unit tests
 * cover that area, on a table that cannot grow). The runtime category is
 * on (the default): the simulated card's partly filled pages, and the
 * headroom held once it shows any, are charged beside the books, so the
 * books are `used` less gg_runtime(). */
#include "common.h"
#include "gpuguard/charge.h"
#include "gpuguard/cuda_abi.h"

#define N 5000

TEST(allocations_past_the_table_are_charged_and_refunded)
{
	static gg_CUdeviceptr p[N];
	uint64_t live = 0, spilled = 0;
	int (*ts)(uint64_t *, uint64_t *) =
	    (int (*)(uint64_t *, uint64_t *))dlsym(RTLD_DEFAULT, "gpuguard_table_stats");
	CHECK(ts != NULL);
	if (!ts)
		return;
	for (int i = 0; i < N; i++)
		CHECK_EQ_INT(cuMemAlloc_v2(&p[i], 4096 + (size_t)(i % 7) * 512), GG_CUDA_SUCCESS);
	uint64_t want = 0, asked = 0;
	for (int i = 0; i < N; i++) {
		want += gpuguard_charge_size(GPUGUARD_API_CU_MEM_ALLOC, 4096 + (uint64_t)(i % 7) * 512);
		asked += 4096 + (uint64_t)(i % 7) * 512;
	}
	struct gpuguard_device_stats s = gg_stats(0);
	CHECK_EQ_U64(s.used - gg_runtime(0), want);
	CHECK_EQ_U64(s.live_bytes, asked);
	CHECK_EQ_INT(ts(&live, &spilled), 0);
	CHECK_EQ_U64(live, N);
	CHECK_EQ_U64(spilled, 0); /* grown past the first 64 slots, not overflowed */
	/* the ceiling still holds with the table grown */
	gg_CUdeviceptr big;
	CHECK_EQ_INT(cuMemAlloc_v2(&big, 64 * MIB), GG_CUDA_ERROR_OUT_OF_MEMORY);
	for (int i = N - 1; i >= 0; i -= 2)
		CHECK_EQ_INT(cuMemFree_v2(p[i]), GG_CUDA_SUCCESS);
	for (int i = N - 2; i >= 0; i -= 2)
		CHECK_EQ_INT(cuMemFree_v2(p[i]), GG_CUDA_SUCCESS);
	s = gg_stats(0);
	CHECK_EQ_U64(s.used - gg_runtime(0), 0);
	CHECK_EQ_U64(s.live_bytes, 0);
	CHECK_EQ_U64(s.frees, N);
	CHECK_EQ_U64(s.untracked_frees, 0);
	CHECK_EQ_INT(ts(&live, &spilled), 0);
	CHECK_EQ_U64(live, 0);
	CHECK_EQ_U64(spilled, 0);
}

int main(void)
{
	gg_CUdevice d;
	gg_CUcontext ctx;
	if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx))
		return 2;
	RUN(allocations_past_the_table_are_charged_and_refunded);
	return harness_done();
}
