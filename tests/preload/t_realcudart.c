/* gpuguard: NVIDIA's own libcudart.so.13 (dlopen'd from the toolkit) on the
 * simulated driver, under the preload: cudaDeviceReset refunds what the
 * driver freed, and the primary context cudart retains through its private
 * table (6bd5fb6c, slot 2) goes through the context books, while cudart's
 * integrity check still passes on the copies we hand it. 2 GiB ceiling,
 * 256 MiB context reserve, two 8 GiB cards (see .env). */
#include "common.h"
#include "gpuguard/cuda_abi.h"

#define RESERVE (256 * MIB)

static void *rt;
static int (*rt_malloc)(void **, size_t);
static int (*rt_free)(void *);
static int (*rt_reset)(void);
static int (*rt_set_device)(int);
static int (*rt_count)(int *);

static const uint8_t CUDART_IFACE[16] = {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
                                         0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9};
static const uint8_t INTEGRITY[16] = {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b,
                                      0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2};

static const void *table(const uint8_t uuid[16])
{
	gg_CUuuid id;
	memcpy(id.bytes, uuid, 16);
	const void *t = NULL;
	/* the driver cudart loaded; our dlsym answers with our hook */
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
	gg_pfn_cuGetExportTable get = cuda ? (gg_pfn_cuGetExportTable)dlsym(cuda, "cuGetExportTable") : NULL;
	if (!get || get(&t, &id) != GG_CUDA_SUCCESS)
		return NULL;
	return t;
}

TEST(cudart_starts_on_our_tables)
{
	int n = 0;
	CHECK_EQ_INT(rt_count(&n), 0);
	CHECK_EQ_INT(n, 2);
	CHECK_EQ_INT(rt_set_device(0), 0);
	void *p = NULL;
	/* any failed integrity check would make this 103 */
	CHECK_EQ_INT(rt_malloc(&p, 64 * MIB), 0);
	CHECK_EQ_INT(rt_free(p), 0);
	const void *iface = table(CUDART_IFACE), *check = table(INTEGRITY);
	CHECK(iface && check);
	if (!iface || !check)
		return;
	/* both copies are ours, or the context slot would bypass the books */
	CHECK(strcmp(object_of((void *)iface), "libgpuguard.so") == 0);
	CHECK(strcmp(object_of((void *)check), "libgpuguard.so") == 0);
	CHECK(strcmp(object_of(((void *const *)iface)[2]), "libgpuguard.so") == 0);
	/* every other table is the driver's own */
	static const uint8_t tools_tls[16] = {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47,
	                                      0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc};
	const void *other = table(tools_tls);
	CHECK(other && strcmp(object_of((void *)other), "libcuda.so.1") == 0);
}

TEST(context_retained_through_the_table_is_charged_its_reserve)
{
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
	gg_CUresult (*init)(unsigned) = cuda ? (gg_CUresult(*)(unsigned))dlsym(cuda, "cuInit") : NULL;
	CHECK(init && init(0) == GG_CUDA_SUCCESS);
	const void *iface = table(CUDART_IFACE);
	CHECK(iface != NULL);
	if (!iface)
		return;
	/* Before cudart starts (its start-up binds every device by asking
	 * their totals): device 1's first context comes through slot 2. */
	CHECK_EQ_U64(gg_stats(1).used, 0);
	gg_CUresult (*retain)(gg_CUcontext *, gg_CUdevice) =
	    (gg_CUresult(*)(gg_CUcontext *, gg_CUdevice))((void *const *)iface)[2];
	gg_CUcontext c = NULL;
	CHECK_EQ_INT(retain(&c, 1), GG_CUDA_SUCCESS);
	CHECK(c != NULL);
	CHECK_EQ_U64(gg_stats(1).used, RESERVE);
	/* once per device */
	CHECK_EQ_INT(retain(&c, 1), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(1).used, RESERVE);
	/* the driver's answer is unchanged */
	CHECK_EQ_INT(retain(&c, 99), GG_CUDA_ERROR_INVALID_DEVICE);
}

TEST(cuda_device_reset_refunds_what_the_driver_freed)
{
	CHECK_EQ_INT(rt_set_device(0), 0);
	uint64_t base = gg_stats(0).used;
	void *a = NULL, *b = NULL;
	CHECK_EQ_INT(rt_malloc(&a, 1024 * MIB), 0);
	CHECK_EQ_INT(rt_malloc(&b, 512 * MIB), 0);
	CHECK_EQ_U64(gg_stats(0).used, base + 1536 * MIB);
	CHECK_EQ_INT(rt_reset(), 0);
	CHECK(gg_stats(0).used <= base);
	/* the room is back: 1.5 GiB fits under the 2 GiB ceiling again */
	CHECK_EQ_INT(rt_malloc(&a, 1536 * MIB), 0);
	CHECK_EQ_INT(rt_free(a), 0);
	CHECK_EQ_U64(gg_stats(0).untracked_frees, 0);
}

int main(void)
{
	const char *path = getenv("GG_CUDART");
	rt = dlopen(path && *path ? path : "/usr/local/cuda/lib64/libcudart.so.13", RTLD_NOW);
	if (!rt) {
		printf("skip realcudart: no libcudart.so.13 (%s)\n", dlerror());
		printf("harness: 0 passed, 0 failed, 1 skipped\n");
		return 0;
	}
	rt_malloc = (int (*)(void **, size_t))dlsym(rt, "cudaMalloc");
	rt_free = (int (*)(void *))dlsym(rt, "cudaFree");
	rt_reset = (int (*)(void))dlsym(rt, "cudaDeviceReset");
	rt_set_device = (int (*)(int))dlsym(rt, "cudaSetDevice");
	rt_count = (int (*)(int *))dlsym(rt, "cudaGetDeviceCount");
	if (!rt_malloc || !rt_free || !rt_reset || !rt_set_device || !rt_count) {
		fprintf(stderr, "libcudart.so.13 lacks the runtime calls\n");
		return 2;
	}
	RUN(context_retained_through_the_table_is_charged_its_reserve);
	RUN(cudart_starts_on_our_tables);
	RUN(cuda_device_reset_refunds_what_the_driver_freed);
	return harness_done();
}
