/* gpuguard: a HIP program (linked with -lamdhip64) under the preload, with
 * GPUGUARD_LIMIT=1Gi on the simulated ROCm 6 runtime (see .env). */
#include "common.h"
#include "gpuguard/hip_abi.h"

TEST(hip_malloc_refused_with_hip_out_of_memory)
{
	void *a = NULL, *b = NULL;
	CHECK_EQ_INT(hipMalloc(&a, 700 * MIB), GG_hipSuccess);
	CHECK_EQ_INT(hipMalloc(&b, 400 * MIB), GG_hipErrorOutOfMemory);
	CHECK_EQ_U64(gg_stats(0).used, 700 * MIB);
	CHECK_EQ_U64(gg_stats(0).refused[GPUGUARD_REFUSED_CEILING], 1);
	CHECK_EQ_INT(hipFree(a), GG_hipSuccess);
	CHECK_EQ_INT(hipMalloc(&b, 400 * MIB), GG_hipSuccess);
	CHECK_EQ_INT(hipFree(b), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).used, 0);
}

TEST(hip_runtime_answers_stay_its_own)
{
	void *p = (void *)1;
	uint64_t allocs0 = gg_stats(0).allocs;
	/* hipMalloc(&p, 0) succeeds with NULL; hipFree(NULL) succeeds */
	CHECK_EQ_INT(hipMalloc(&p, 0), GG_hipSuccess);
	CHECK(p == NULL);
	CHECK_EQ_INT(hipFree(NULL), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).used, 0);
	CHECK_EQ_U64(gg_stats(0).allocs, allocs0); /* nothing was allocated */
}

TEST(hip_meminfo_and_total_report_the_ceiling)
{
	size_t f = 0, t = 0, total = 0;
	void *a;
	CHECK_EQ_INT(hipMalloc(&a, 100 * MIB), GG_hipSuccess);
	CHECK_EQ_INT(hipMemGetInfo(&f, &t), GG_hipSuccess);
	CHECK_EQ_U64(t, GIB);
	CHECK_EQ_U64(f, 924 * MIB);
	CHECK_EQ_INT(hipMemGetInfo(NULL, &t), GG_hipSuccess);
	CHECK_EQ_INT(hipDeviceTotalMem(&total, 0), GG_hipSuccess);
	CHECK_EQ_U64(total, GIB);
	hipFree(a);
}

TEST(hip_every_allocator_is_charged)
{
	void *a, *b, *c;
	size_t pitch;
	CHECK_EQ_INT(hipExtMallocWithFlags(&a, 64 * MIB, GG_hipDeviceMallocFinegrained), GG_hipSuccess);
	CHECK_EQ_INT(hipMallocManaged(&b, 64 * MIB, GG_hipMemAttachGlobal), GG_hipSuccess);
	CHECK_EQ_INT(hipMallocPitch(&c, &pitch, 4096, 4096), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).used, 128 * MIB + (uint64_t)pitch * 4096);
	CHECK_EQ_INT(hipMallocPitch(&c, &pitch, 1 << 20, 1 << 10), GG_hipErrorOutOfMemory);
	hipFree(a);
	hipFree(b);
	hipFree(c);
	CHECK_EQ_U64(gg_stats(0).used, 0);
}

TEST(hip_pools_charged_by_reserve)
{
	gg_hipMemPool_t pool;
	CHECK_EQ_INT(hipDeviceGetDefaultMemPool(&pool, 0), GG_hipSuccess);
	uint64_t keep = UINT64_MAX;
	CHECK_EQ_INT(hipMemPoolSetAttribute(pool, GG_hipMemPoolAttrReleaseThreshold, &keep), GG_hipSuccess);
	void *a, *b;
	CHECK_EQ_INT(hipMallocAsync(&a, 600 * MIB, NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipFreeAsync(a, NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipStreamSynchronize(NULL), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).used, 600 * MIB);
	CHECK_EQ_INT(hipMalloc(&b, 600 * MIB), GG_hipErrorOutOfMemory);
	CHECK_EQ_INT(hipMallocFromPoolAsync(&a, 600 * MIB, pool, NULL), GG_hipSuccess); /* warm */
	CHECK_EQ_INT(hipFreeAsync(a, NULL), GG_hipSuccess);
	CHECK_EQ_INT(hipMemPoolTrimTo(pool, 0), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).used, 0);
	keep = 0;
	hipMemPoolSetAttribute(pool, GG_hipMemPoolAttrReleaseThreshold, &keep);
}

TEST(hip_vmm_charged_at_create)
{
	/* libamdhip64.so.6 speaks the ROCm 6 layout of hipMemAllocationProp */
	gg_hipMemAllocationProp_v6 prop = {.type = GG_hipMemAllocationTypePinned,
	                                   .location = {.type = GG_hipMemLocationTypeDevice, .id = 0}};
	const gg_hipMemAllocationProp *p = (const gg_hipMemAllocationProp *)(const void *)&prop;
	gg_hipMemGenericAllocationHandle_t h, h2;
	CHECK_EQ_INT(hipMemCreate(&h, 512 * MIB, p, 0), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).used, 512 * MIB);
	CHECK_EQ_INT(hipMemCreate(&h2, 1024 * MIB, p, 0), GG_hipErrorOutOfMemory);
	CHECK_EQ_INT(hipMemRelease(h), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).used, 0);
}

/* hipGetProcAddress (ROCm 6.1 and later; the simulated runtime is 6.2):
 * ROCm's clr answers it by dlsym on its own handle, so our dlsym override
 * answers for the names we govern. What it hands out for them is our hook,
 * and what is allocated through that is charged and refunded; a name we do
 * not govern is the runtime's own; its errors are the runtime's. Not in
 * every HIP header (Debian's is 5.2): declared here. */
typedef gg_hipError_t (*get_proc_address_fn)(const char *symbol, void **pfn, int hip_version, uint64_t flags,
                                             int *status);

TEST(hip_get_proc_address_hands_out_our_hooks)
{
	get_proc_address_fn gpa = (get_proc_address_fn)dlsym(RTLD_DEFAULT, "hipGetProcAddress");
	CHECK(gpa != NULL);
	if (!gpa)
		return;
	CHECK(strcmp(object_of((void *)gpa), "libamdhip64.so.6") == 0); /* not a call we wrap */
	void *alloc = NULL, *release = NULL, *f = NULL;
	int st = -1;
	CHECK_EQ_INT(gpa("hipMalloc", &alloc, 602, 0, &st), GG_hipSuccess);
	CHECK_EQ_INT(st, 0);
	CHECK(strcmp(object_of(alloc), "libgpuguard.so") == 0);
	CHECK_EQ_INT(gpa("hipFree", &release, 602, 0, NULL), GG_hipSuccess);
	CHECK(strcmp(object_of(release), "libgpuguard.so") == 0);
	uint64_t used0 = gg_stats(0).used, allocs0 = gg_stats(0).allocs;
	void *p = NULL, *q = NULL;
	if (alloc && release) {
		CHECK_EQ_INT(((gg_pfn_hipMalloc)alloc)(&p, 64 * MIB), GG_hipSuccess);
		CHECK_EQ_U64(gg_stats(0).used, used0 + 64 * MIB);
		CHECK_EQ_U64(gg_stats(0).allocs, allocs0 + 1);
		/* the ceiling holds on the handed-out pointer too */
		CHECK_EQ_INT(((gg_pfn_hipMalloc)alloc)(&q, GIB), GG_hipErrorOutOfMemory);
		CHECK_EQ_INT(((gg_pfn_hipFree)release)(p), GG_hipSuccess);
		CHECK_EQ_U64(gg_stats(0).used, used0);
	}
	/* per-thread default stream: the simulator has no hipMallocAsync_spt,
	 * so the name alone, and ours */
	CHECK_EQ_INT(gpa("hipMallocAsync", &f, 602, 2, &st), GG_hipSuccess);
	CHECK(strcmp(object_of(f), "libgpuguard.so") == 0);
	/* a name we do not govern: the runtime's own */
	CHECK_EQ_INT(gpa("hipGetDeviceCount", &f, 602, 0, &st), GG_hipSuccess);
	CHECK(strcmp(object_of(f), "libamdhip64.so.6") == 0);
	/* the runtime's own errors */
	f = (void *)1;
	CHECK_EQ_INT(gpa("hipNoSuchCall", &f, 602, 0, &st), GG_hipErrorInvalidValue);
	CHECK_EQ_INT(st, 1);
	CHECK(f == NULL);
	CHECK_EQ_INT(gpa("hipMalloc", NULL, 602, 0, &st), GG_hipErrorInvalidValue);
	CHECK_EQ_INT(gpa(NULL, &f, 602, 0, &st), GG_hipErrorInvalidValue);
}

int main(void)
{
	RUN(hip_malloc_refused_with_hip_out_of_memory);
	RUN(hip_runtime_answers_stay_its_own);
	RUN(hip_meminfo_and_total_report_the_ceiling);
	RUN(hip_every_allocator_is_charged);
	RUN(hip_pools_charged_by_reserve);
	RUN(hip_vmm_charged_at_create);
	RUN(hip_get_proc_address_hands_out_our_hooks);
	return harness_done();
}
