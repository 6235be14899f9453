/* gpuguard: an allocation made in a signal handler while the interrupted
 * thread sleeps inside our hook for room (GPUGUARD_ON_LIMIT=wait, see .env)
 * is governed like any other: charged when it fits, refused when it does
 * not, never passed through as if the driver were re-entering us (issue 10,
 * finding 9: it went through uncharged). */
#include "common.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include "gpuguard/cuda_abi.h"

static volatile sig_atomic_t in_call, handled, handler_rc;
static volatile size_t handler_bytes;
static gg_CUdeviceptr handler_ptr;
static gg_CUcontext g_ctx;
static volatile int poke_ready;

static void on_usr1(int sig)
{
	(void)sig;
	handled = in_call ? 1 : -1;
	handler_rc = (sig_atomic_t)cuMemAlloc_v2(&handler_ptr, handler_bytes);
}

static void *poke(void *arg)
{
	/* A thread that has made a governed call counts as one that could free
	 * memory, so the main thread's request waits for it rather than giving
	 * up at once (nobody else could free). */
	size_t f, t;
	cuCtxSetCurrent(g_ctx);
	cuMemGetInfo_v2(&f, &t);
	__atomic_store_n(&poke_ready, 1, __ATOMIC_RELEASE);
	/* The main thread is asleep in its hook by now: its request cannot
	 * fit, and it waits up to 600 ms for room. */
	struct timespec ts = {0, 150 * 1000 * 1000};
	nanosleep(&ts, NULL);
	pthread_kill(*(pthread_t *)arg, SIGUSR1);
	return NULL;
}

/* ThreadSanitizer holds an asynchronous signal back until the thread next
 * enters one of its interceptors, which the sleep (a raw futex) is not: the
 * handler then runs after the sleep, in the hook's bookkeeping, where it is
 * indistinguishable from re-entry. The plain and other sanitizer builds
 * deliver it where the kernel does, during the sleep. */
#if defined(__SANITIZE_THREAD__)
#define SKIP_UNDER_TSAN() SKIP("ThreadSanitizer defers the signal past the sleep")
#else
#define SKIP_UNDER_TSAN() ((void)0)
#endif

/* Fills the ceiling to 960 MiB, asks for 512 MiB more (which waits), and has
 * a signal handler ask for `bytes` meanwhile. Returns the main request's
 * result. */
static int wait_with_handler(size_t bytes, gg_CUdeviceptr *held)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1; /* no SA_RESTART: the sleep is interrupted */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	handled = 0;
	handler_rc = -1;
	handler_bytes = bytes;
	handler_ptr = 0;
	if (cuMemAlloc_v2(held, 960 * MIB) != GG_CUDA_SUCCESS)
		return -2;
	pthread_t self = pthread_self(), t;
	poke_ready = 0;
	pthread_create(&t, NULL, poke, &self);
	while (!__atomic_load_n(&poke_ready, __ATOMIC_ACQUIRE))
		sched_yield();
	gg_CUdeviceptr big = 0;
	in_call = 1;
	int rc = cuMemAlloc_v2(&big, 512 * MIB);
	in_call = 0;
	pthread_join(t, NULL);
	return rc;
}

TEST(a_handler_allocation_that_fits_is_charged)
{
	SKIP_UNDER_TSAN();
	gg_CUdeviceptr held;
	struct gpuguard_device_stats before = gg_stats(0);
	CHECK_EQ_INT(wait_with_handler(32 * MIB, &held), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(handled, 1);
	CHECK_EQ_INT(handler_rc, GG_CUDA_SUCCESS);
	struct gpuguard_device_stats s = gg_stats(0);
	CHECK_EQ_U64(s.used, 992 * MIB); /* the handler's 32 MiB is on the books */
	CHECK_EQ_U64(s.allocs - before.allocs, 2);
	CHECK_EQ_U64(s.refused[GPUGUARD_REFUSED_CEILING] - before.refused[GPUGUARD_REFUSED_CEILING], 1);
	/* and refunded at its free: it was recorded, not just charged */
	CHECK_EQ_INT(cuMemFree_v2(handler_ptr), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(held), GG_CUDA_SUCCESS);
	s = gg_stats(0);
	CHECK_EQ_U64(s.used, 0);
	CHECK_EQ_U64(s.untracked_frees, 0);
}

TEST(a_handler_allocation_past_the_ceiling_is_refused)
{
	SKIP_UNDER_TSAN();
	gg_CUdeviceptr held;
	struct gpuguard_device_stats before = gg_stats(0);
	CHECK_EQ_INT(wait_with_handler(128 * MIB, &held), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(handled, 1);
	CHECK_EQ_INT(handler_rc, GG_CUDA_ERROR_OUT_OF_MEMORY);
	struct gpuguard_device_stats s = gg_stats(0);
	CHECK_EQ_U64(s.used, 960 * MIB);
	CHECK_EQ_U64(s.refused[GPUGUARD_REFUSED_CEILING] - before.refused[GPUGUARD_REFUSED_CEILING], 2);
	if (handler_rc == GG_CUDA_SUCCESS)
		cuMemFree_v2(handler_ptr);
	CHECK_EQ_INT(cuMemFree_v2(held), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, 0);
}

int main(void)
{
	gg_CUdevice d;
	gg_CUcontext ctx;
	if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx))
		return 2;
	g_ctx = ctx;
	RUN(a_handler_allocation_that_fits_is_charged);
	RUN(a_handler_allocation_past_the_ceiling_is_refused);
	return harness_done();
}
