/* gpuguard: reaching NVML without linking it, as pynvml, DCGM exporters and Go
 * bindings do: dlopen("libnvidia-ml.so.1") + dlsym. The governed names come
 * back as our wrappers and report the ceiling (GPUGUARD_LIMIT=1Gi on an 8 GiB
 * card, see .env); everything else comes back untouched. */
#include "common.h"
#include "gpuguard/cuda_abi.h"
#include "gpuguard/nvml_abi.h"

static void *libnvml;
static gg_nvmlDevice_t dev0;

#define SYM(h, name) ((gg_pfn_##name)dlsym(h, #name))

static int is_ours(void *fn)
{
	return strcmp(object_of(fn), "libgpuguard.so") == 0;
}

/* free and total of device 0 through the v1 function fn, or ~0 on failure */
static gg_nvmlMemory_t query(gg_pfn_nvmlDeviceGetMemoryInfo fn)
{
	gg_nvmlMemory_t m;
	memset(&m, 0xff, sizeof(m));
	if (fn)
		CHECK_EQ_INT(fn(dev0, &m), GG_NVML_SUCCESS);
	return m;
}

TEST(nothing_to_find_before_the_library_is_loaded)
{
	/* We export the name, but with no NVML behind us the lookup must fail
	 * as it would without the preload. */
	CHECK(dlsym(RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo") == NULL);
	CHECK(dlsym(RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo_v2") == NULL);
}

TEST(handle_lookups_return_our_wrappers)
{
	CHECK(is_ours(dlsym(libnvml, "nvmlDeviceGetMemoryInfo")));
	CHECK(strcmp(symbol_of(dlsym(libnvml, "nvmlDeviceGetMemoryInfo")), "nvmlDeviceGetMemoryInfo") == 0);
	CHECK(is_ours(dlsym(libnvml, "nvmlDeviceGetMemoryInfo_v2")));
	CHECK(strcmp(symbol_of(dlsym(libnvml, "nvmlDeviceGetMemoryInfo_v2")), "nvmlDeviceGetMemoryInfo_v2") == 0);
	/* names we do not govern come back untouched */
	CHECK(strcmp(object_of(dlsym(libnvml, "nvmlDeviceGetName")), "libnvidia-ml.so.1") == 0);
	CHECK(strcmp(object_of(dlsym(libnvml, "nvmlInit_v2")), "libnvidia-ml.so.1") == 0);
	CHECK(strcmp(object_of(dlsym(libnvml, "nvmlDeviceGetUUID")), "libnvidia-ml.so.1") == 0);
	CHECK(dlsym(libnvml, "nvmlNoSuchFunction") == NULL);
	/* RTLD_LOCAL: the default scope does not see it, with us or without */
	CHECK(dlsym(RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo") == NULL);
}

TEST(wrappers_report_the_ceiling)
{
	gg_nvmlMemory_t m = query(SYM(libnvml, nvmlDeviceGetMemoryInfo));
	CHECK_EQ_U64(m.total, GIB);
	CHECK_EQ_U64(m.free, GIB);
	CHECK_EQ_U64(m.used, 0);
	gg_pfn_nvmlDeviceGetMemoryInfo_v2 f2 = SYM(libnvml, nvmlDeviceGetMemoryInfo_v2);
	gg_nvmlMemory_v2_t n = {.version = GG_nvmlMemory_v2};
	CHECK(f2 != NULL);
	if (f2)
		CHECK_EQ_INT(f2(dev0, &n), GG_NVML_SUCCESS);
	CHECK_EQ_U64(n.total, GIB);
	CHECK_EQ_U64(n.free, GIB);
	CHECK_EQ_U64(n.reserved + n.used, 0);
}

/* libcuda opened RTLD_LOCAL too: an allocation through its dlsym'ed
 * cuMemAlloc_v2 shows in NVML's free figure at once. */
TEST(free_follows_a_dlopened_driver)
{
	void *cu = dlopen("libcuda.so.1", RTLD_NOW);
	CHECK(cu != NULL);
	if (!cu)
		return;
	gg_pfn_cuMemAlloc_v2 alloc = SYM(cu, cuMemAlloc_v2);
	gg_pfn_cuMemFree_v2 release = SYM(cu, cuMemFree_v2);
	gg_CUcontext ctx;
	gg_CUdeviceptr p = 0;
	CHECK(SYM(cu, cuInit)(0) == 0 && SYM(cu, cuDevicePrimaryCtxRetain)(&ctx, 0) == 0 &&
	      SYM(cu, cuCtxSetCurrent)(ctx) == 0);
	CHECK_EQ_INT(alloc(&p, 128 * MIB), GG_CUDA_SUCCESS);
	gg_nvmlMemory_t m = query(SYM(libnvml, nvmlDeviceGetMemoryInfo));
	CHECK_EQ_U64(m.total, GIB);
	CHECK_EQ_U64(m.free, 896 * MIB);
	CHECK_EQ_U64(m.used, 128 * MIB);
	CHECK_EQ_INT(release(p), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(query(SYM(libnvml, nvmlDeviceGetMemoryInfo)).free, GIB);
}

TEST(default_scope_lookups_once_global)
{
	/* Promoted to the global scope, the name is found by RTLD_DEFAULT: ours. */
	void *again = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
	CHECK(again != NULL);
	void *fn = dlsym(RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo");
	CHECK(is_ours(fn));
	CHECK_EQ_U64(query((gg_pfn_nvmlDeviceGetMemoryInfo)fn).total, GIB);
	CHECK(is_ours(dlsym(RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo_v2")));
	CHECK(strcmp(object_of(dlsym(RTLD_DEFAULT, "nvmlDeviceGetName")), "libnvidia-ml.so.1") == 0);
	if (again)
		dlclose(again);
}

int main(void)
{
	RUN(nothing_to_find_before_the_library_is_loaded);
	libnvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	gg_pfn_nvmlInit_v2 init = libnvml ? SYM(libnvml, nvmlInit_v2) : NULL;
	gg_pfn_nvmlDeviceGetHandleByIndex_v2 by_index = libnvml ? SYM(libnvml, nvmlDeviceGetHandleByIndex_v2) : NULL;
	if (!init || !by_index || init() != 0 || by_index(0, &dev0) != 0) {
		fprintf(stderr, "simulated NVML did not start: %s\n", dlerror());
		return 2;
	}
	RUN(handle_lookups_return_our_wrappers);
	RUN(wrappers_report_the_ceiling);
	RUN(free_follows_a_dlopened_driver);
	RUN(default_scope_lookups_once_global);
	return harness_done();
}
