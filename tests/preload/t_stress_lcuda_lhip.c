/* gpuguard: 8 threads, a million alloc/free pairs through mixed APIs (driver,
 * pitch, managed, stream-ordered pool, VMM, HIP) against a ceiling they keep
 * hitting. A monitor thread checks the ceiling at every instant it samples;
 * at the end the books must balance to the byte. Runs under TSan too. */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include "gpuguard/cuda_abi.h"
#include "gpuguard/hip_abi.h"

#define THREADS 8
#define LIVE_PER_THREAD 12
#define LIMIT (192 * MIB)
/* How far past LIMIT the card may go for a moment: a stream-ordered pool
 * whose warm reserve is too fragmented for a request grows anyway, and holds
 * the growth until gpuguard hands it back (README "Pools"). The growth is
 * charged meanwhile (counted in pool_overshoot and the peak), so no other
 * request fits beside it: at most one request (8 MiB at most, whole pages)
 * per pool at a time, and this test has one pool (the default one). Issue
 * 25, item 5: this test asserted pool_overshoot 0 and peak <= LIMIT while
 * the card went past it, uncounted (now: peak 207,893,504 of 201,326,592,
 * overshoot 1,142,619,648 bytes in all over a million pairs). */
#define TRANSIENT (8 * MIB)

static gg_CUcontext ctx;
static gg_CUmemoryPool pool;
static _Atomic int stop_monitor;
static _Atomic uint64_t ok_allocs, ok_frees, refusals, bad_codes, monitor_samples, monitor_over;
static uint64_t pairs_per_thread;

enum kind { K_ALLOC, K_PITCH, K_MANAGED, K_ASYNC, K_VMM, K_HIP, K_COUNT };
struct live {
	enum kind kind;
	uint64_t handle;
};

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static size_t pick_size(uint64_t r)
{
	/* half small (packed), half 1-8 MiB (whole pages) */
	return (r & 1) ? 512 + (r >> 8) % 8192 : MIB + (r >> 8) % (7 * MIB);
}

static int do_alloc(enum kind k, size_t size, uint64_t *out)
{
	gg_CUdeviceptr p = 0;
	int rc;
	switch (k) {
	case K_ALLOC:
		rc = cuMemAlloc_v2(&p, size);
		break;
	case K_PITCH: {
		size_t pitch;
		rc = cuMemAllocPitch_v2(&p, &pitch, size / 16 + 1, 16, 4);
		break;
	}
	case K_MANAGED:
		rc = cuMemAllocManaged(&p, size, GG_CU_MEM_ATTACH_GLOBAL);
		break;
	case K_ASYNC:
		rc = cuMemAllocAsync(&p, size, NULL);
		break;
	case K_VMM: {
		gg_CUmemAllocationProp prop = {.type = GG_CU_MEM_ALLOCATION_TYPE_PINNED,
		                               .location = {.type = GG_CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
		gg_CUmemGenericAllocationHandle h = 0;
		rc = cuMemCreate(&h, (size + 2 * MIB - 1) / (2 * MIB) * (2 * MIB), &prop, 0);
		p = h;
		break;
	}
	default: {
		void *hp = NULL;
		rc = hipMalloc(&hp, size);
		p = (uint64_t)(uintptr_t)hp;
		rc = rc == GG_hipErrorOutOfMemory ? GG_CUDA_ERROR_OUT_OF_MEMORY : rc;
		break;
	}
	}
	*out = p;
	return rc;
}

static int do_free(const struct live *l)
{
	switch (l->kind) {
	case K_ASYNC:
		return cuMemFreeAsync(l->handle, NULL);
	case K_VMM:
		return cuMemRelease(l->handle);
	case K_HIP:
		return hipFree((void *)(uintptr_t)l->handle);
	default:
		return cuMemFree_v2(l->handle);
	}
}

static void *worker(void *arg)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
	struct live live[LIVE_PER_THREAD];
	int n = 0;
	cuCtxSetCurrent(ctx);
	for (uint64_t i = 0; i < pairs_per_thread;) {
		uint64_t r = xorshift(&seed);
		if (n == LIVE_PER_THREAD || (n > 0 && (r & 3) == 0)) {
			int j = (int)((r >> 2) % (uint64_t)n);
			if (do_free(&live[j]) != 0)
				atomic_fetch_add(&bad_codes, 1);
			atomic_fetch_add(&ok_frees, 1);
			live[j] = live[--n];
			i++;
			continue;
		}
		enum kind k = (enum kind)((r >> 4) % K_COUNT);
		uint64_t h;
		int rc = do_alloc(k, pick_size(r >> 8), &h);
		if (rc == GG_CUDA_SUCCESS) {
			atomic_fetch_add(&ok_allocs, 1);
			live[n++] = (struct live){k, h};
		} else if (rc == GG_CUDA_ERROR_OUT_OF_MEMORY) {
			atomic_fetch_add(&refusals, 1);
			i++; /* a refused request counts as a pair: it did the round trip */
		} else {
			atomic_fetch_add(&bad_codes, 1);
		}
	}
	while (n > 0)
		if (do_free(&live[--n]) == 0)
			atomic_fetch_add(&ok_frees, 1);
	return NULL;
}

static void *monitor(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_monitor)) {
		if (gg_stats(0).used > LIMIT + TRANSIENT)
			atomic_fetch_add(&monitor_over, 1);
		atomic_fetch_add(&monitor_samples, 1);
	}
	return NULL;
}

TEST(million_pairs_never_pass_the_ceiling_and_balance_to_the_byte)
{
	pthread_t t[THREADS], m;
	pthread_create(&m, NULL, monitor, NULL);
	for (uintptr_t i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	atomic_store(&stop_monitor, 1);
	pthread_join(m, NULL);

	/* the pool still holds its reserve; trimming hands it back */
	CHECK_EQ_INT(cuMemPoolTrimTo(pool, 0), 0);
	struct gpuguard_device_stats s = gg_stats(0);
	printf("pairs %llu, allocations %llu, refusals %llu, monitor samples %llu, peak %llu of %llu, pool "
	       "overshoot %llu\n",
	       (unsigned long long)(pairs_per_thread * THREADS), (unsigned long long)ok_allocs,
	       (unsigned long long)refusals, (unsigned long long)monitor_samples, (unsigned long long)s.peak,
	       (unsigned long long)LIMIT, (unsigned long long)s.pool_overshoot);
	CHECK_EQ_U64(bad_codes, 0);
	CHECK_EQ_U64(monitor_over, 0);
	CHECK(monitor_samples > 0);
	CHECK(s.peak <= LIMIT + TRANSIENT);
	CHECK(s.peak > LIMIT / 2); /* we really ran near the ceiling */
	CHECK(refusals > 1000);    /* ... and into it */
	/* The books balance to the byte: used less the runtime category (on by
	 * default). A reading taken while another thread's pool growth was
	 * in the driver and not yet in the books raises that charge, and only
	 * a refusal lowers it (footprint.c), so it may stay after the last. */
	uint64_t runtime = gg_runtime(0);
	CHECK(runtime <= s.used);
	CHECK_EQ_U64(s.used - runtime, 0);
	CHECK_EQ_U64(s.pool_reserved, 0);
	CHECK_EQ_U64(s.live_bytes, 0);
	CHECK_EQ_U64(s.allocs, ok_allocs);
	CHECK_EQ_U64(s.frees, ok_frees);
	CHECK_EQ_U64(s.refused[GPUGUARD_REFUSED_CEILING] + s.refused[GPUGUARD_REFUSED_DRIVER], refusals);
	CHECK_EQ_U64(s.untracked_frees, 0);
	uint64_t live = 1, spilled = 1;
	int (*ts)(uint64_t *, uint64_t *) =
	    (int (*)(uint64_t *, uint64_t *))dlsym(RTLD_DEFAULT, "gpuguard_table_stats");
	CHECK(ts && ts(&live, &spilled) == 0);
	CHECK_EQ_U64(live, 0);
	/* and the simulated card agrees that nothing is left */
	int (*simused)(int, unsigned long long *, unsigned long long *, unsigned long long *) =
	    (int (*)(int, unsigned long long *, unsigned long long *, unsigned long long *))dlsym(
	        RTLD_DEFAULT, "simgpu_cuda_debug_used");
	unsigned long long used = 1, peak = 0, nlive = 1;
	CHECK(simused && simused(0, &used, &peak, &nlive) == 0);
	CHECK_EQ_U64(used, 0);
	CHECK_EQ_U64(nlive, 0);
}

int main(void)
{
	gg_CUdevice d;
	if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx) ||
	    cuDeviceGetDefaultMemPool(&pool, 0)) {
		fprintf(stderr, "simulated driver did not start\n");
		return 2;
	}
	const char *p = getenv("GG_STRESS_PAIRS");
	uint64_t total = p ? strtoull(p, NULL, 10) : 1000000;
	pairs_per_thread = total / THREADS;
	RUN(million_pairs_never_pass_the_ceiling_and_balance_to_the_byte);
	return harness_done();
}
