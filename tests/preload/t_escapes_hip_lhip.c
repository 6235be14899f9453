/* gpuguard: issue 25, item 2 for HIP: device 1's default or current pool,
 * asked for by ordinal, used from a stream of device 0, is charged to
 * device 1. Two 16 GiB simulated cards, GPUGUARD_LIMIT='0=8Gi,1=1Gi'. The
 * case is pool_cases.h's, shared with t_escapes_lcuda. */
#include "common.h"
#include "gpuguard/hip_abi.h"

#define POOL_CASES_HIP
#include "pool_cases.h"

TEST(hip_another_devices_default_pool_is_charged_to_that_device)
{
	other_devices_pool(0);
}

TEST(hip_another_devices_current_pool_is_charged_to_that_device)
{
	other_devices_pool(1);
}

int main(void)
{
	RUN(hip_another_devices_default_pool_is_charged_to_that_device);
	RUN(hip_another_devices_current_pool_is_charged_to_that_device);
	return harness_done();
}
