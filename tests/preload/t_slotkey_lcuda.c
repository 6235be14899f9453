/* gpuguard: a driver that hands out 1 or 2 as an allocation's address.
 * Those are the allocation table's slot states, never a key (table.h), so
 * the hooks send such a result out of line (shape.c's gg_alloc_settle and
 * gg_pool_alloc_end_slow): the call's result reaches the caller untouched,
 * the allocation stays charged (no record can refund it), the table works
 * on for every other address, and the warning names the address, not a
 * full table. No real driver does this; the simulator's
 * simgpu_cuda_debug_next_address makes one that does, once.
 * GPUGUARD_LIMIT=1Gi on an 8 GiB simulated card (see .env). */
#include "common.h"
#include "cuda_start.h"
#include "gpuguard/cuda_abi.h"

void simgpu_cuda_debug_next_address(gg_CUdeviceptr addr);

static gg_CUcontext ctx0;

/* What our books hold on device 0 beyond the runtime category. */
static uint64_t books(void)
{
	return gg_stats(0).used - gg_runtime(0);
}

static uint64_t table_live(void)
{
	int (*ts)(uint64_t *, uint64_t *) =
	    (int (*)(uint64_t *, uint64_t *))dlsym(RTLD_DEFAULT, "gpuguard_table_stats");
	uint64_t live = UINT64_MAX, spilled = 0;
	if (!ts || ts(&live, &spilled) != 0)
		return UINT64_MAX;
	return live;
}

/* Many blocks allocated and freed after: each refunded exactly. */
static void the_table_works_on(uint64_t want_books)
{
	gg_CUdeviceptr p[64];
	uint64_t live0 = table_live();
	for (int i = 0; i < 64; i++)
		CHECK_EQ_INT(cuMemAlloc_v2(&p[i], 2 * MIB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(books(), want_books + 64 * 2 * MIB);
	CHECK_EQ_U64(table_live(), live0 + 64);
	for (int i = 0; i < 64; i++)
		CHECK_EQ_INT(cuMemFree_v2(p[i]), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(books(), want_books);
	CHECK_EQ_U64(table_live(), live0);
}

TEST(a_plain_allocation_at_1_or_2_stays_charged)
{
	struct gpuguard_device_stats s0 = gg_stats(0);
	uint64_t b0 = books(), live0 = table_live();
	gg_CUdeviceptr p = 0, q = 0;
	simgpu_cuda_debug_next_address(1);
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 8 * MIB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(p, 1);
	simgpu_cuda_debug_next_address(2);
	CHECK_EQ_INT(cuMemAlloc_v2(&q, 4 * MIB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(q, 2);
	struct gpuguard_device_stats s = gg_stats(0);
	CHECK_EQ_U64(books(), b0 + 12 * MIB);
	CHECK_EQ_U64(s.allocs, s0.allocs + 2);
	CHECK_EQ_U64(s.live_bytes, s0.live_bytes + 12 * MIB);
	CHECK_EQ_U64(table_live(), live0); /* no record: no slot can hold such a key */
	/* The driver holds neither: its own refusal, and the charge stays. */
	CHECK_EQ_INT(cuMemFree_v2(1), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemFree_v2(2), GG_CUDA_ERROR_INVALID_VALUE);
	s = gg_stats(0);
	CHECK_EQ_U64(books(), b0 + 12 * MIB);
	CHECK_EQ_U64(s.frees, s0.frees);
	the_table_works_on(b0 + 12 * MIB);
	/* The ceiling counts the charge kept: 12 MiB of 1 GiB are spoken for. */
	gg_CUdeviceptr big = 0;
	uint64_t room = gg_stats(0).limit - gg_stats(0).used;
	CHECK_EQ_INT(cuMemAlloc_v2(&big, room + 2 * MIB), GG_CUDA_ERROR_OUT_OF_MEMORY);
}

/* What the simulated card holds in pages on device 0. */
static unsigned long long sim_held(void)
{
	return sim_held_by("cuda", 0);
}

/* A stream-ordered block at 1 or 2: on a cold pool (the request that grows
 * it: reserved, then settled) and on a warm one (served from the reserve,
 * unread: the pool's lock, held across the driver call, must be given back
 * or the next request waits for ever). The pool carries the charge, so the
 * books follow what the card holds, and a trim takes it back. */
TEST(a_pool_allocation_at_1_or_2_is_carried_by_the_pool)
{
	gg_CUmemoryPool def = NULL;
	CHECK_EQ_INT(cuDeviceGetMemPool(&def, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemPoolTrimTo(def, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxSynchronize(), GG_CUDA_SUCCESS);
	uint64_t b0 = books(), live0 = table_live();
	unsigned long long held0 = sim_held();
	gg_CUdeviceptr p = 0, q = 0, r = 0;
	simgpu_cuda_debug_next_address(1);
	CHECK_EQ_INT(cuMemAllocAsync(&p, 1 * MIB, NULL), GG_CUDA_SUCCESS); /* grows the pool */
	CHECK_EQ_U64(p, 1);
	CHECK(sim_held() > held0);
	CHECK_EQ_U64(books() - b0, sim_held() - held0);
	simgpu_cuda_debug_next_address(2);
	CHECK_EQ_INT(cuMemAllocAsync(&q, 1 * MIB, NULL), GG_CUDA_SUCCESS); /* from the reserve */
	CHECK_EQ_U64(q, 2);
	CHECK_EQ_U64(table_live(), live0);
	/* the pool's lock was given back: the next requests go through */
	for (int i = 0; i < 300; i++) {
		CHECK_EQ_INT(cuMemAllocAsync(&r, 1 * MIB, NULL), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(cuMemFreeAsync(r, NULL), GG_CUDA_SUCCESS);
	}
	CHECK_EQ_U64(table_live(), live0);
	CHECK_EQ_INT(cuMemFreeAsync(1, NULL), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuMemFreeAsync(2, NULL), GG_CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ_INT(cuCtxSynchronize(), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(books() - b0, sim_held() - held0);
	CHECK_EQ_INT(cuMemPoolTrimTo(def, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxSynchronize(), GG_CUDA_SUCCESS);
	/* the next request reads the pool again and settles to what it holds */
	CHECK_EQ_INT(cuMemAllocAsync(&r, 1 * MIB, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(books() - b0, sim_held() - held0);
	CHECK_EQ_INT(cuMemFreeAsync(r, NULL), GG_CUDA_SUCCESS);
}

/* A worker: one allocation at 1, then exit; its stderr is the parent's. */
static int warn_worker(void)
{
	gg_CUdeviceptr p = 0;
	simgpu_cuda_debug_next_address(1);
	if (cuMemAlloc_v2(&p, 4 * MIB) != GG_CUDA_SUCCESS || p != 1)
		return 3;
	return 0;
}

TEST(the_warning_names_the_address_not_a_full_table)
{
	char err[4096];
	CHECK_EQ_INT(spawn_self("warn_worker", NULL, err, sizeof err), 0);
	CHECK(strstr(err, "the runtime returned 0x1 as an allocation's address") != NULL);
	CHECK(strstr(err, "table and overflow area full") == NULL);
	if (harness_cur_failed)
		fprintf(stderr, "worker's stderr:\n%s", err);
}

int main(int argc, char **argv)
{
	cuda_start(&ctx0, NULL);
	if (argc > 1 && !strcmp(argv[1], "warn_worker"))
		return warn_worker();
	RUN_ONE(a_plain_allocation_at_1_or_2_stays_charged);
	RUN_ONE(a_pool_allocation_at_1_or_2_is_carried_by_the_pool);
	RUN_ONE(the_warning_names_the_address_not_a_full_table);
	return harness_done();
}
