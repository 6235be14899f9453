/* gpuguard: reaching the driver without linking it, as cudart, XLA and
 * PyTorch's expandable segments do (DESIGN.md §1): dlopen + dlsym, the
 * cuGetProcAddress sequence with its versions and flags, and
 * cudaGetDriverEntryPoint-style lookups. GPUGUARD_LIMIT=1Gi (see .env). */
#include "common.h"
#include "gpuguard/cuda_abi.h"

static void *libcuda;
static gg_pfn_cuGetProcAddress_v2 gpa; /* what cudart holds after its start-up */

static void *lookup(const char *sym, int version, uint64_t flags)
{
	void *fn = NULL;
	gg_CUdriverProcAddressQueryResult st = -1;
	if (gpa(sym, &fn, version, flags, &st) != GG_CUDA_SUCCESS || st != GG_CU_GET_PROC_ADDRESS_SUCCESS)
		return NULL;
	return fn;
}

TEST(dlsym_in_libcuda_handle_returns_our_wrappers)
{
	void *v2 = dlsym(libcuda, "cuMemAlloc_v2");
	CHECK(strcmp(object_of(v2), "libgpuguard.so") == 0);
	CHECK(strcmp(object_of(dlsym(libcuda, "cuGetProcAddress_v2")), "libgpuguard.so") == 0);
	CHECK(strcmp(object_of(dlsym(libcuda, "cuMemCreate")), "libgpuguard.so") == 0);
	/* ungoverned and legacy names come back untouched */
	CHECK(strcmp(object_of(dlsym(libcuda, "cuInit")), "libcuda.so.1") == 0);
	CHECK(strcmp(object_of(dlsym(libcuda, "cuMemAlloc")), "libcuda.so.1") == 0);
	CHECK(strcmp(object_of(dlsym(libcuda, "cuMemGetInfo")), "libcuda.so.1") == 0);
	CHECK(dlsym(libcuda, "cuNoSuchFunction") == NULL);
}

TEST(cudart_startup_sequence)
{
	/* 1. the only name cudart looks up by dlsym */
	gpa = (gg_pfn_cuGetProcAddress_v2)dlsym(libcuda, "cuGetProcAddress_v2");
	CHECK(gpa != NULL);
	if (!gpa)
		return;
	/* 2. the probe: NOT_FOUND is the expected answer */
	void *fn = (void *)1;
	gg_CUdriverProcAddressQueryResult st = 0;
	CHECK_EQ_INT(gpa("", &fn, 0, 0, &st), GG_CUDA_ERROR_NOT_FOUND);
	CHECK_EQ_INT(st, GG_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	/* 3. cuGetProcAddress by name at 11030 (legacy, 4 arguments) and 12000 */
	void *legacy = lookup("cuGetProcAddress", 11030, 0);
	CHECK(strcmp(object_of(legacy), "libgpuguard.so") == 0);
	CHECK(strcmp(symbol_of(legacy), "cuGetProcAddress") == 0);
	void *v2 = lookup("cuGetProcAddress", 12000, 0);
	CHECK(strcmp(symbol_of(v2), "cuGetProcAddress_v2") == 0);
	CHECK(strcmp(object_of(v2), "libgpuguard.so") == 0);
	if (v2)
		gpa = (gg_pfn_cuGetProcAddress_v2)v2;
	/* the legacy one works too, and also substitutes */
	if (legacy) {
		void *p = NULL;
		CHECK_EQ_INT(((gg_pfn_cuGetProcAddress)legacy)("cuMemAlloc", &p, 3020, 0), GG_CUDA_SUCCESS);
		CHECK(strcmp(symbol_of(p), "cuMemAlloc_v2") == 0);
		CHECK(strcmp(object_of(p), "libgpuguard.so") == 0);
	}
}

TEST(per_function_versions_and_flags)
{
	/* version 3020 and later mean the _v2 ABI, which we wrap */
	CHECK(strcmp(symbol_of(lookup("cuMemAlloc", 3020, 0)), "cuMemAlloc_v2") == 0);
	CHECK(strcmp(object_of(lookup("cuMemAlloc", 12000, 0)), "libgpuguard.so") == 0);
	CHECK(strcmp(object_of(lookup("cuMemGetInfo", 3020, 0)), "libgpuguard.so") == 0);
	/* below it the legacy 32-bit ABI: never wrapped */
	void *old = lookup("cuMemAlloc", 2000, 0);
	CHECK(old != NULL);
	CHECK(strcmp(object_of(old), "libcuda.so.1") == 0);
	CHECK(strcmp(object_of(lookup("cuMemGetInfo", 2000, 0)), "libcuda.so.1") == 0);
	/* flag 2 selects the per-thread-default-stream variant, ours per variant */
	CHECK(strcmp(symbol_of(lookup("cuMemAllocAsync", 12000, 2)), "cuMemAllocAsync_ptsz") == 0);
	CHECK(strcmp(symbol_of(lookup("cuMemAllocAsync", 12000, 0)), "cuMemAllocAsync") == 0);
	CHECK(strcmp(symbol_of(lookup("cuMemFreeAsync", 12000, 2)), "cuMemFreeAsync_ptsz") == 0);
	CHECK(strcmp(symbol_of(lookup("cuMemAllocFromPoolAsync", 12000, 2)), "cuMemAllocFromPoolAsync_ptsz") == 0);
	/* flag 2 on a function with no stream variant changes nothing */
	CHECK(strcmp(symbol_of(lookup("cuMemAlloc", 12000, 2)), "cuMemAlloc_v2") == 0);
	/* ungoverned functions are the driver's own */
	CHECK(strcmp(object_of(lookup("cuDeviceGetCount", 12000, 0)), "libcuda.so.1") == 0);
	/* synchronisation points are ours, each at its own ABI: the 13000 form
	 * takes a context, the older one nothing */
	CHECK(strcmp(symbol_of(lookup("cuCtxSynchronize", 12000, 0)), "cuCtxSynchronize") == 0);
	CHECK(strcmp(object_of(lookup("cuCtxSynchronize", 12000, 0)), "libgpuguard.so") == 0);
	CHECK(strcmp(symbol_of(lookup("cuCtxSynchronize", 13000, 0)), "cuCtxSynchronize_v2") == 0);
	CHECK(strcmp(symbol_of(lookup("cuStreamSynchronize", 12000, 2)), "cuStreamSynchronize_ptsz") == 0);
	/* a version too old for the function: the driver's answer, unchanged */
	void *fn = (void *)1;
	gg_CUdriverProcAddressQueryResult st = 0;
	CHECK_EQ_INT(gpa("cuMemAllocAsync", &fn, 10000, 0, &st), GG_CUDA_ERROR_NOT_FOUND);
	CHECK_EQ_INT(st, GG_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

TEST(calls_through_cudart_pointers_are_governed)
{
	gg_pfn_cuInit init = (gg_pfn_cuInit)lookup("cuInit", 2000, 0);
	gg_pfn_cuDeviceGet devget = (gg_pfn_cuDeviceGet)lookup("cuDeviceGet", 2000, 0);
	gg_pfn_cuDevicePrimaryCtxRetain retain =
	    (gg_pfn_cuDevicePrimaryCtxRetain)lookup("cuDevicePrimaryCtxRetain", 7000, 0);
	gg_pfn_cuCtxSetCurrent setcur = (gg_pfn_cuCtxSetCurrent)lookup("cuCtxSetCurrent", 4000, 0);
	gg_pfn_cuMemAlloc_v2 alloc = (gg_pfn_cuMemAlloc_v2)lookup("cuMemAlloc", 3020, 0);
	gg_pfn_cuMemFree_v2 release = (gg_pfn_cuMemFree_v2)lookup("cuMemFree", 3020, 0);
	gg_pfn_cuMemGetInfo_v2 info = (gg_pfn_cuMemGetInfo_v2)lookup("cuMemGetInfo", 3020, 0);
	gg_pfn_cuMemAllocAsync aasync = (gg_pfn_cuMemAllocAsync)lookup("cuMemAllocAsync", 11020, 2);
	gg_pfn_cuMemFreeAsync fasync = (gg_pfn_cuMemFreeAsync)lookup("cuMemFreeAsync", 11020, 2);
	gg_pfn_cuMemPoolTrimTo trim = (gg_pfn_cuMemPoolTrimTo)lookup("cuMemPoolTrimTo", 11020, 0);
	gg_pfn_cuDeviceGetDefaultMemPool defpool =
	    (gg_pfn_cuDeviceGetDefaultMemPool)lookup("cuDeviceGetDefaultMemPool", 11020, 0);
	CHECK(init && devget && retain && setcur && alloc && release && info && aasync && fasync && trim && defpool);
	if (!(init && devget && retain && setcur && alloc && release && info && aasync && fasync && trim && defpool))
		return;
	gg_CUdevice d;
	gg_CUcontext ctx;
	CHECK_EQ_INT(init(0), 0);
	CHECK_EQ_INT(devget(&d, 0), 0);
	CHECK_EQ_INT(retain(&ctx, d), 0);
	CHECK_EQ_INT(setcur(ctx), 0);
	size_t f, t;
	CHECK_EQ_INT(info(&f, &t), 0);
	CHECK_EQ_U64(t, GIB);
	gg_CUdeviceptr a, b;
	CHECK_EQ_INT(alloc(&a, 700 * MIB), 0);
	CHECK_EQ_INT(alloc(&b, 400 * MIB), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(aasync(&b, 400 * MIB, NULL), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(release(a), 0);
	CHECK_EQ_INT(aasync(&b, 400 * MIB, NULL), 0);
	CHECK_EQ_U64(gg_stats(0).used, 400 * MIB);
	CHECK_EQ_INT(fasync(b, NULL), 0);
	gg_CUmemoryPool pool;
	CHECK_EQ_INT(defpool(&pool, 0), 0);
	CHECK_EQ_INT(trim(pool, 0), 0);
	CHECK_EQ_U64(gg_stats(0).used, 0);
}

TEST(driver_entry_point_lookups)
{
	/* cudaGetDriverEntryPoint[ByVersion] (NCCL, PyTorch expandable segments,
	 * vLLM) calls the driver's cuGetProcAddress_v2 with the caller's version. */
	gg_pfn_cuMemCreate create = (gg_pfn_cuMemCreate)lookup("cuMemCreate", 12000, 0);
	gg_pfn_cuMemRelease rel = (gg_pfn_cuMemRelease)lookup("cuMemRelease", 10020, 0);
	CHECK(strcmp(object_of((void *)create), "libgpuguard.so") == 0);
	CHECK(strcmp(object_of((void *)rel), "libgpuguard.so") == 0);
	if (!create || !rel)
		return;
	gg_CUmemAllocationProp prop = {.type = GG_CU_MEM_ALLOCATION_TYPE_PINNED,
	                               .location = {.type = GG_CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
	gg_CUmemGenericAllocationHandle h;
	CHECK_EQ_INT(create(&h, 1026 * MIB, &prop, 0), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(create(&h, 1024 * MIB, &prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, GIB);
	CHECK_EQ_INT(rel(h), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, 0);
}

int main(void)
{
	libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!libcuda) {
		fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
		return 2;
	}
	RUN(dlsym_in_libcuda_handle_returns_our_wrappers);
	RUN(cudart_startup_sequence);
	if (!gpa)
		return harness_done();
	RUN(per_function_versions_and_flags);
	RUN(calls_through_cudart_pointers_are_governed);
	RUN(driver_entry_point_lookups);
	return harness_done();
}
