/* gpuguard: HIP's current device, cached per thread by our hooks
 * (hook_hip.c's current_device): a hipSetDevice, or one of ROCm's
 * deprecated context calls, moves the charge at the very next allocation,
 * however it was reached; a change no hook sees (a private table's entry,
 * simgpu_hip_debug_set_device here) is found within 256 allocations, and
 * from then on at every one. GPUGUARD_LIMIT=4Gi on two 16 GiB simulated
 * cards (see .env). */
#include "common.h"

#include <pthread.h>

#include "gpuguard/hip_abi.h"

gg_hipError_t simgpu_hip_debug_set_device(int dev);

/* The device a 2 MiB hipMalloc is charged to (0 or 1, or -1: to neither,
 * or to both), freed again. */
static int charged_on(void)
{
	uint64_t u0 = gg_stats(0).used, u1 = gg_stats(1).used;
	void *p = NULL;
	if (hipMalloc(&p, 2 * MIB) != GG_hipSuccess)
		return -2;
	int d0 = gg_stats(0).used == u0 + 2 * MIB, d1 = gg_stats(1).used == u1 + 2 * MIB;
	hipFree(p);
	return d0 && !d1 ? 0 : d1 && !d0 ? 1 : -1;
}

TEST(hip_set_device_moves_the_charge_at_once)
{
	for (int i = 0; i < 20; i++) {
		int dev = i % 2;
		CHECK_EQ_INT(hipSetDevice(dev), GG_hipSuccess);
		CHECK_EQ_INT(charged_on(), dev);
	}
	/* a refused change leaves the device as it was, and the books too */
	CHECK_EQ_INT(hipSetDevice(0), GG_hipSuccess);
	CHECK_EQ_INT(hipSetDevice(7), GG_hipErrorInvalidDevice);
	CHECK_EQ_INT(charged_on(), 0);
}

/* hipSetDevice as a program that looks it up (dlsym) or asks for it
 * (hipGetProcAddress, which ROCm answers with dlsym) calls it: our hook
 * all the same. */
typedef gg_hipError_t (*get_proc_address_fn)(const char *symbol, void **pfn, int hip_version, uint64_t flags,
                                             int *status);

TEST(hip_set_device_looked_up_is_ours_too)
{
	void *h = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_NOLOAD);
	CHECK(h != NULL);
	if (!h)
		return;
	gg_pfn_hipSetDevice by_dlsym = (gg_pfn_hipSetDevice)dlsym(h, "hipSetDevice");
	get_proc_address_fn gpa = (get_proc_address_fn)dlsym(h, "hipGetProcAddress");
	void *by_gpa = NULL;
	CHECK(gpa != NULL && gpa("hipSetDevice", &by_gpa, 602, 0, NULL) == GG_hipSuccess);
	CHECK(by_dlsym != NULL && strcmp(object_of((void *)by_dlsym), "libgpuguard.so") == 0);
	CHECK(by_gpa != NULL && strcmp(object_of(by_gpa), "libgpuguard.so") == 0);
	if (by_dlsym && by_gpa) {
		CHECK_EQ_INT(by_dlsym(1), GG_hipSuccess);
		CHECK_EQ_INT(charged_on(), 1);
		CHECK_EQ_INT(((gg_pfn_hipSetDevice)by_gpa)(0), GG_hipSuccess);
		CHECK_EQ_INT(charged_on(), 0);
	}
	dlclose(h);
}

/* Each thread has its own current device, and its own cache: a thread's
 * hipSetDevice moves no other thread's charge. */
static void *on_device_one(void *arg)
{
	int *got = arg;
	got[0] = charged_on(); /* a new thread starts on device 0 */
	got[1] = hipSetDevice(1) == GG_hipSuccess ? charged_on() : -3;
	return NULL;
}

TEST(each_thread_has_its_own_device)
{
	CHECK_EQ_INT(hipSetDevice(0), GG_hipSuccess);
	CHECK_EQ_INT(charged_on(), 0);
	int got[2] = {-9, -9};
	pthread_t t;
	CHECK_EQ_INT(pthread_create(&t, NULL, on_device_one, got), 0);
	pthread_join(t, NULL);
	CHECK_EQ_INT(got[0], 0);
	CHECK_EQ_INT(got[1], 1);
	CHECK_EQ_INT(charged_on(), 0); /* ours stayed */
}

/* ROCm's deprecated context calls change the thread's current device too
 * (a context is its device's): each moves the charge at once. */
TEST(hip_context_calls_move_the_charge_at_once)
{
	gg_hipCtx_t c0 = NULL, c1 = NULL, popped = NULL;
	CHECK_EQ_INT(hipSetDevice(0), GG_hipSuccess);
	CHECK_EQ_INT(charged_on(), 0);
	CHECK_EQ_INT(hipCtxCreate(&c1, 0, 1), GG_hipSuccess); /* pushed: device 1's */
	CHECK_EQ_INT(hipCtxCreate(&c0, 0, 0), GG_hipSuccess);
	CHECK_EQ_INT(hipCtxSetCurrent(c1), GG_hipSuccess);
	CHECK_EQ_INT(charged_on(), 1);
	CHECK_EQ_INT(hipCtxPushCurrent(c0), GG_hipSuccess);
	CHECK_EQ_INT(charged_on(), 0);
	CHECK_EQ_INT(hipCtxPopCurrent(&popped), GG_hipSuccess);
	CHECK(popped == c0);
	CHECK_EQ_INT(charged_on(), 1);
	CHECK_EQ_INT(hipCtxSetCurrent(c0), GG_hipSuccess);
	CHECK_EQ_INT(charged_on(), 0);
	/* the runtime's own answers pass through */
	CHECK_EQ_INT(hipCtxSetCurrent((gg_hipCtx_t)(void *)&popped), GG_hipErrorInvalidContext);
	CHECK_EQ_INT(charged_on(), 0);
	CHECK_EQ_INT(hipCtxDestroy(c0), GG_hipSuccess);
	CHECK_EQ_INT(hipCtxDestroy(c1), GG_hipSuccess);
	CHECK_EQ_INT(hipSetDevice(0), GG_hipSuccess);
}

/* A change no hook sees is found when the cache is checked (every 256
 * allocations of a thread, hook_hip.c's DEV_RECHECK); from then on the
 * runtime is asked on every allocation. Last: it turns the cache off for
 * the process. */
TEST(a_change_no_hook_sees_is_found_within_256_allocations)
{
	CHECK_EQ_INT(hipSetDevice(0), GG_hipSuccess);
	CHECK_EQ_INT(charged_on(), 0);
	CHECK_EQ_INT(simgpu_hip_debug_set_device(1), GG_hipSuccess);
	int n = 0;
	while (n < 1000 && charged_on() == 0)
		n++;
	CHECK(n <= 256);
	CHECK_EQ_INT(charged_on(), 1);
	/* off: the next change no hook sees reaches the very next allocation */
	CHECK_EQ_INT(simgpu_hip_debug_set_device(0), GG_hipSuccess);
	CHECK_EQ_INT(charged_on(), 0);
	CHECK_EQ_INT(simgpu_hip_debug_set_device(1), GG_hipSuccess);
	CHECK_EQ_INT(charged_on(), 1);
	CHECK_EQ_INT(hipSetDevice(0), GG_hipSuccess);
}

int main(int argc, char **argv)
{
	RUN_ONE(hip_set_device_moves_the_charge_at_once);
	RUN_ONE(hip_set_device_looked_up_is_ours_too);
	RUN_ONE(each_thread_has_its_own_device);
	RUN_ONE(hip_context_calls_move_the_charge_at_once);
	RUN_ONE(a_change_no_hook_sees_is_found_within_256_allocations);
	return harness_done();
}
