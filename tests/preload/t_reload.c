/* gpuguard: libraries come and go (issue 10, finding 1). A program probes
 * for a GPU (dlopen, a call, dlclose), then loads the driver for real: the
 * real pointers we cached on the first round must still be valid on the
 * second. Covers libcuda.so.1, libamdhip64.so.6 and libnvidia-ml.so.1.
 * GPUGUARD_LIMIT=1Gi (see .env). */
#include "common.h"
#include "gpuguard/cuda_abi.h"
#include "gpuguard/hip_abi.h"
#include "gpuguard/nvml_abi.h"

#include <sys/mman.h>

#define SYM(h, type, name) ((type)dlsym((h), (name)))

/* After a dlclose that really unloads, the loader would put the library back
 * at the same address and hide a stale pointer; other libraries loaded in
 * between (the usual case) take that room. Take it ourselves: old_place()
 * notes the object's extent from /proc/self/maps while it is loaded, and
 * take_the_old_place() maps over it after the dlclose. Where the object
 * still lives (pinned), the mapping fails and changes nothing. */
struct extent {
	uintptr_t lo, hi;
};

static struct extent old_place(void *fn)
{
	struct extent e = {0, 0};
	Dl_info info;
	if (!fn || !dladdr(fn, &info) || !info.dli_fname)
		return e;
	FILE *f = fopen("/proc/self/maps", "r");
	char line[1024];
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (!strstr(line, info.dli_fname) || sscanf(line, "%lx-%lx", &lo, &hi) != 2)
			continue;
		if (!e.lo || lo < e.lo)
			e.lo = lo;
		if (hi > e.hi)
			e.hi = hi;
	}
	if (f)
		fclose(f);
	return e;
}

static void take_the_old_place(struct extent e)
{
	if (!e.lo)
		return;
	/* kept for the life of the test */
	(void)mmap((void *)e.lo, e.hi - e.lo, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
}

/* One round of the driver through a fresh handle: start it, allocate under
 * the ceiling through the wrapper dlsym hands out, free. */
static void cuda_round(int round)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	if (!h)
		return;
	gg_pfn_cuInit init = SYM(h, gg_pfn_cuInit, "cuInit");
	gg_pfn_cuDeviceGet get = SYM(h, gg_pfn_cuDeviceGet, "cuDeviceGet");
	gg_pfn_cuDevicePrimaryCtxRetain retain = SYM(h, gg_pfn_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	gg_pfn_cuCtxSetCurrent set = SYM(h, gg_pfn_cuCtxSetCurrent, "cuCtxSetCurrent");
	gg_pfn_cuMemAlloc_v2 alloc = SYM(h, gg_pfn_cuMemAlloc_v2, "cuMemAlloc_v2");
	gg_pfn_cuMemFree_v2 mfree = SYM(h, gg_pfn_cuMemFree_v2, "cuMemFree_v2");
	gg_pfn_cuMemGetInfo_v2 info = SYM(h, gg_pfn_cuMemGetInfo_v2, "cuMemGetInfo_v2");
	CHECK(init && get && retain && set && alloc && mfree && info);
	if (!(init && get && retain && set && alloc && mfree && info))
		return;
	CHECK(strcmp(object_of((void *)alloc), "libgpuguard.so") == 0);
	gg_CUdevice d = -1;
	gg_CUcontext ctx = NULL;
	CHECK_EQ_INT(init(0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(get(&d, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(retain(&ctx, d), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(set(ctx), GG_CUDA_SUCCESS);
	gg_CUdeviceptr p = 0;
	CHECK_EQ_INT(alloc(&p, 64 * MIB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(alloc(&p, 2 * GIB), GG_CUDA_ERROR_OUT_OF_MEMORY); /* the ceiling holds */
	size_t fr = 0, to = 0;
	CHECK_EQ_INT(info(&fr, &to), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(to, 1 * GIB);
	CHECK_EQ_INT(mfree(p), GG_CUDA_SUCCESS);
	if (round == 0) {
		struct extent was = old_place((void *)init);
		CHECK_EQ_INT(dlclose(h), 0);
		take_the_old_place(was);
	}
}

TEST(libcuda_closed_and_opened_again)
{
	cuda_round(0); /* the probe */
	cuda_round(1); /* for real: this round crashed at its first call */
	cuda_round(2);
}

TEST(libamdhip64_closed_and_opened_again)
{
	for (int round = 0; round < 3; round++) {
		void *h = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
		CHECK(h != NULL);
		if (!h)
			return;
		gg_pfn_hipMalloc hmalloc = SYM(h, gg_pfn_hipMalloc, "hipMalloc");
		gg_pfn_hipFree hfree = SYM(h, gg_pfn_hipFree, "hipFree");
		CHECK(hmalloc && hfree);
		if (!hmalloc || !hfree)
			return;
		void *p = NULL;
		CHECK_EQ_INT(hmalloc(&p, 64 * MIB), 0);
		CHECK_EQ_INT(hmalloc(&p, 2 * GIB), GG_hipErrorOutOfMemory);
		CHECK_EQ_INT(hfree(p), 0);
		struct extent was = old_place((void *)hfree);
		CHECK_EQ_INT(dlclose(h), 0);
		take_the_old_place(was);
	}
}

TEST(libnvidia_ml_closed_and_opened_again)
{
	for (int round = 0; round < 3; round++) {
		void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
		CHECK(h != NULL);
		if (!h)
			return;
		gg_pfn_nvmlInit_v2 init = SYM(h, gg_pfn_nvmlInit_v2, "nvmlInit_v2");
		gg_pfn_nvmlShutdown shut = SYM(h, gg_pfn_nvmlShutdown, "nvmlShutdown");
		gg_pfn_nvmlDeviceGetHandleByIndex_v2 byidx =
		    SYM(h, gg_pfn_nvmlDeviceGetHandleByIndex_v2, "nvmlDeviceGetHandleByIndex_v2");
		gg_pfn_nvmlDeviceGetMemoryInfo meminfo =
		    SYM(h, gg_pfn_nvmlDeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo");
		CHECK(init && shut && byidx && meminfo);
		if (!(init && shut && byidx && meminfo))
			return;
		gg_nvmlDevice_t dev = NULL;
		gg_nvmlMemory_t m;
		CHECK_EQ_INT(init(), 0);
		CHECK_EQ_INT(byidx(0, &dev), 0);
		CHECK_EQ_INT(meminfo(dev, &m), 0);
		CHECK_EQ_INT(shut(), 0);
		struct extent was = old_place((void *)shut);
		CHECK_EQ_INT(dlclose(h), 0);
		take_the_old_place(was);
	}
}

int main(void)
{
	RUN(libcuda_closed_and_opened_again);
	RUN(libamdhip64_closed_and_opened_again);
	RUN(libnvidia_ml_closed_and_opened_again);
	return harness_done();
}
