/* gpuguard: a CUDA call from another library's constructor, before our
 * own constructor has run, is governed like any other (issue 12, step 8:
 * the constructor-order test). libctoruser allocates 512 MiB and then asks
 * for 2 GiB under a 1 GiB ceiling from its constructor. */
#include "common.h"
#include "gpuguard/cuda_abi.h"

extern int ctor_setup_rc, ctor_kept_rc, ctor_big_rc;
extern gg_CUdeviceptr ctor_kept;

TEST(a_constructor_allocation_is_charged)
{
	CHECK_EQ_INT(ctor_setup_rc, 0);
	CHECK_EQ_INT(ctor_kept_rc, GG_CUDA_SUCCESS);
	struct gpuguard_device_stats s = gg_stats(0);
	CHECK(s.limit == GIB);
	CHECK(s.live_bytes == 512 * MIB);
	CHECK(s.allocs == 1);
}

TEST(a_constructor_allocation_past_the_ceiling_is_refused)
{
	CHECK_EQ_INT(ctor_big_rc, GG_CUDA_ERROR_OUT_OF_MEMORY);
	struct gpuguard_device_stats s = gg_stats(0);
	CHECK(s.refused[GPUGUARD_REFUSED_CEILING] == 1);
}

TEST(its_free_after_start_up_settles_the_books)
{
	CHECK_EQ_INT(cuMemFree_v2(ctor_kept), GG_CUDA_SUCCESS);
	struct gpuguard_device_stats s = gg_stats(0);
	CHECK(s.live_bytes == 0);
	CHECK(s.frees == 1);
	CHECK(s.untracked_frees == 0);
}

int main(void)
{
	RUN(a_constructor_allocation_is_charged);
	RUN(a_constructor_allocation_past_the_ceiling_is_refused);
	RUN(its_free_after_start_up_settles_the_books);
	return harness_done();
}
