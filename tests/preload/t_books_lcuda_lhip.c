/* gpuguard: the books follow the driver's own lifetimes (REAL-CUDA.md §5):
 * VMM memory lives while a reference or a mapping holds it, reset, the
 * last release and destroy free a context's memory, imported memory is the
 * exporter's, and graph memory is the device's graph reserve. 2 GiB
 * ceiling, 8 GiB card. */
#include "common.h"
#include "cuda_start.h"
#include "gpuguard/cuda_abi.h"
#include "gpuguard/hip_abi.h"

static gg_CUcontext ctx0;

/* Entry points the simulated driver may add after this file was written are
 * looked up, so that the test builds either way; a missing one fails. */
typedef gg_CUresult (*retain_fn)(gg_CUmemGenericAllocationHandle *, void *);
typedef gg_CUresult (*reset_fn)(gg_CUdevice);
typedef gg_CUresult (*ctx_create_fn)(gg_CUcontext *, unsigned, gg_CUdevice);
typedef gg_CUresult (*ctx_destroy_fn)(gg_CUcontext);
typedef gg_hipError_t (*hip_reset_fn)(void);

static uint64_t live_records(void)
{
	uint64_t live = 0, spilled = 0;
	int (*f)(uint64_t *, uint64_t *) = (int (*)(uint64_t *, uint64_t *))dlsym(RTLD_DEFAULT, "gpuguard_table_stats");
	if (!f || f(&live, &spilled) != 0)
		return UINT64_MAX;
	return live;
}

/* The entry point cudart holds for name at version (its cuGetProcAddress). */
static void *proc(const char *name, int version)
{
	void *fn = NULL;
	gg_CUdriverProcAddressQueryResult st;
	if (cuGetProcAddress_v2(name, &fn, version, 0, &st) != GG_CUDA_SUCCESS)
		return NULL;
	return fn;
}

static void *need(const char *name)
{
	void *f = dlsym(RTLD_DEFAULT, name);
	if (!f)
		fprintf(stderr, "%s not found\n", name);
	return f;
}

static void setup(void)
{
	cuda_start(&ctx0, NULL);
}

static const gg_CUmemAllocationProp cu_prop = {.type = GG_CU_MEM_ALLOCATION_TYPE_PINNED,
                                               .location = {.type = GG_CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};

TEST(vmm_mapped_after_release_stays_charged_until_unmap)
{
	uint64_t untracked = gg_stats(0).untracked_frees;
	gg_CUdeviceptr va, p = 0;
	gg_CUmemGenericAllocationHandle h;
	CHECK_EQ_INT(cuMemAddressReserve(&va, 4 * GIB, 0, 0, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemCreate(&h, GIB, &cu_prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemMap(va, GIB, 0, h, 0), GG_CUDA_SUCCESS);
	/* NVIDIA's samples release at once; the mapping keeps the memory. */
	CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, GIB);
	/* 1 GiB still held: 1.5 GiB more would pass the 2 GiB ceiling */
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 3 * GIB / 2), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(cuMemUnmap(va, GIB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, 0);
	CHECK_EQ_INT(cuMemAlloc_v2(&p, 3 * GIB / 2), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(p), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAddressFree(va, 4 * GIB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, 0);
	CHECK_EQ_U64(gg_stats(0).untracked_frees, untracked);
}

TEST(vmm_retained_reference_is_counted)
{
	retain_fn retain = (retain_fn)need("cuMemRetainAllocationHandle");
	CHECK(retain != NULL);
	if (!retain)
		return;
	gg_CUdeviceptr va;
	gg_CUmemGenericAllocationHandle h, h2 = 0;
	CHECK_EQ_INT(cuMemAddressReserve(&va, GIB, 0, 0, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemCreate(&h, 512 * MIB, &cu_prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemMap(va, 512 * MIB, 0, h, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(retain(&h2, (void *)(uintptr_t)va), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(h2, h);
	/* two references and a mapping: neither release nor unmap alone frees */
	CHECK_EQ_INT(cuMemRelease(h2), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, 512 * MIB);
	CHECK_EQ_INT(cuMemUnmap(va, 512 * MIB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, 512 * MIB);
	CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, 0);
	CHECK_EQ_INT(cuMemAddressFree(va, GIB), GG_CUDA_SUCCESS);
}

/* NCCL 2.28 makes its host buffers with cuMemCreate at a HOST_NUMA location
 * where the card supports it (an H200 does: attribute 141; the simulator
 * with SIMGPU_HOST_NUMA_VMM=1, this test's .env). Host memory is never
 * charged, and its release is no free of memory gpuguard never saw: on the
 * card, each NCCL init counted one untracked free. */
TEST(vmm_host_memory_is_never_charged_nor_an_untracked_free)
{
	typedef gg_CUresult (*attr_fn)(int *, int, gg_CUdevice);
	typedef gg_CUresult (*gran_fn)(size_t *, const gg_CUmemAllocationProp *, int);
	attr_fn attr = (attr_fn)need("cuDeviceGetAttribute");
	gran_fn gran = (gran_fn)need("cuMemGetAllocationGranularity");
	retain_fn retain = (retain_fn)need("cuMemRetainAllocationHandle");
	CHECK(attr && gran && retain);
	if (!attr || !gran || !retain)
		return;
	int numa_vmm = 0;
	CHECK_EQ_INT(attr(&numa_vmm, GG_CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
	             GG_CUDA_SUCCESS);
	CHECK_EQ_INT(numa_vmm, 1);
	struct gpuguard_device_stats s0 = gg_stats(0);
	uint64_t live0 = live_records();
	const int types[] = {GG_CU_MEM_LOCATION_TYPE_HOST_NUMA, GG_CU_MEM_LOCATION_TYPE_HOST,
	                     GG_CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT};
	for (unsigned i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		gg_CUmemAllocationProp hp = {.type = GG_CU_MEM_ALLOCATION_TYPE_PINNED,
		                             .location = {.type = types[i], .id = 0}};
		size_t g = 0;
		CHECK_EQ_INT(gran(&g, &hp, GG_CU_MEM_ALLOC_GRANULARITY_MINIMUM), GG_CUDA_SUCCESS);
		CHECK(g > 0);
		/* 3 GiB of host memory under a 2 GiB device ceiling: not ours to govern */
		gg_CUdeviceptr va;
		gg_CUmemGenericAllocationHandle h, h2 = 0;
		CHECK_EQ_INT(cuMemAddressReserve(&va, 3 * GIB, 0, 0, 0), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(cuMemCreate(&h, 3 * GIB, &hp, 0), GG_CUDA_SUCCESS);
		CHECK_EQ_U64(gg_stats(0).used, s0.used);
		/* NCCL's free path: retain, release, unmap, release */
		CHECK_EQ_INT(cuMemMap(va, 3 * GIB, 0, h, 0), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(retain(&h2, (void *)(uintptr_t)va), GG_CUDA_SUCCESS);
		CHECK_EQ_U64(h2, h);
		CHECK_EQ_INT(cuMemRelease(h2), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(cuMemUnmap(va, 3 * GIB), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(cuMemAddressFree(va, 3 * GIB), GG_CUDA_SUCCESS);
		struct gpuguard_device_stats s = gg_stats(0);
		CHECK_EQ_U64(s.used, s0.used);
		CHECK_EQ_U64(s.untracked_frees, s0.untracked_frees);
		CHECK_EQ_U64(live_records(), live0);
	}
	/* device memory beside it is governed as ever */
	gg_CUmemGenericAllocationHandle d;
	CHECK_EQ_INT(cuMemCreate(&d, 512 * MIB, &cu_prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, s0.used + 512 * MIB);
	CHECK_EQ_INT(cuMemRelease(d), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, s0.used);
	CHECK_EQ_U64(gg_stats(0).untracked_frees, s0.untracked_frees);
}

/* NCCL frees each of its 2 MiB blocks with: retain, release, unmap, release. */
TEST(vmm_nccl_free_path_balances_to_zero)
{
	retain_fn retain = (retain_fn)need("cuMemRetainAllocationHandle");
	CHECK(retain != NULL);
	if (!retain)
		return;
	enum { N = 194 };
	struct gpuguard_device_stats s0 = gg_stats(0);
	gg_CUdeviceptr va;
	CHECK_EQ_INT(cuMemAddressReserve(&va, N * 2 * MIB, 0, 0, 0), GG_CUDA_SUCCESS);
	for (int i = 0; i < N; i++) {
		gg_CUmemGenericAllocationHandle h;
		CHECK_EQ_INT(cuMemCreate(&h, 2 * MIB, &cu_prop, 0), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(cuMemMap(va + (uint64_t)i * 2 * MIB, 2 * MIB, 0, h, 0), GG_CUDA_SUCCESS);
	}
	CHECK_EQ_U64(gg_stats(0).used, N * 2 * MIB);
	for (int i = 0; i < N; i++) {
		gg_CUdeviceptr p = va + (uint64_t)i * 2 * MIB;
		gg_CUmemGenericAllocationHandle h = 0;
		CHECK_EQ_INT(retain(&h, (void *)(uintptr_t)p), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(cuMemUnmap(p, 2 * MIB), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_SUCCESS);
	}
	struct gpuguard_device_stats s = gg_stats(0);
	CHECK_EQ_U64(s.used, 0);
	CHECK_EQ_U64(s.untracked_frees, s0.untracked_frees);
	CHECK_EQ_U64(s.frees - s0.frees, N);
	CHECK_EQ_INT(cuMemAddressFree(va, N * 2 * MIB), GG_CUDA_SUCCESS);
}

/* One unmap over several mappings, and an address free over what is still
 * mapped, each free exactly the handles they leave unheld. */
TEST(vmm_unmap_of_a_range_and_address_free)
{
	gg_CUdeviceptr va;
	gg_CUmemGenericAllocationHandle h[4];
	CHECK_EQ_INT(cuMemAddressReserve(&va, GIB, 0, 0, 0), GG_CUDA_SUCCESS);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ_INT(cuMemCreate(&h[i], 64 * MIB, &cu_prop, 0), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(cuMemMap(va + (uint64_t)i * 64 * MIB, 64 * MIB, 0, h[i], 0), GG_CUDA_SUCCESS);
		CHECK_EQ_INT(cuMemRelease(h[i]), GG_CUDA_SUCCESS);
	}
	CHECK_EQ_U64(gg_stats(0).used, 256 * MIB);
	CHECK_EQ_INT(cuMemUnmap(va, 128 * MIB), GG_CUDA_SUCCESS); /* h[0], h[1] */
	CHECK_EQ_U64(gg_stats(0).used, 128 * MIB);
	/* an unmap the driver refuses (it would split a mapping) changes nothing */
	CHECK(cuMemUnmap(va + 160 * MIB, 32 * MIB) != GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, 128 * MIB);
	CHECK_EQ_INT(cuMemAddressFree(va, GIB), GG_CUDA_SUCCESS); /* h[2], h[3] */
	CHECK_EQ_U64(gg_stats(0).used, 0);
}

/* A release the driver refuses keeps the reference: a double release of a
 * mapped handle must not refund it. */
TEST(vmm_double_release_of_a_mapped_handle)
{
	gg_CUdeviceptr va;
	gg_CUmemGenericAllocationHandle h;
	uint64_t untracked = gg_stats(0).untracked_frees;
	CHECK_EQ_INT(cuMemAddressReserve(&va, GIB, 0, 0, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemCreate(&h, 64 * MIB, &cu_prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemMap(va, 64 * MIB, 0, h, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemRelease(h), GG_CUDA_SUCCESS);
	CHECK(cuMemRelease(h) != GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, 64 * MIB);
	CHECK_EQ_INT(cuMemUnmap(va, 64 * MIB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, 0);
	CHECK_EQ_U64(gg_stats(0).untracked_frees, untracked);
	CHECK_EQ_INT(cuMemAddressFree(va, GIB), GG_CUDA_SUCCESS);
}

/* ---- HIP: the same lifetime (ROCm follows the CUDA VMM rules) ---------- */

static const gg_hipMemAllocationProp *hip_prop(void)
{
	/* libamdhip64.so.6 speaks the ROCm 6 layout */
	static gg_hipMemAllocationProp_v6 prop = {.type = GG_hipMemAllocationTypePinned,
	                                          .location = {.type = GG_hipMemLocationTypeDevice, .id = 0}};
	return (const gg_hipMemAllocationProp *)(const void *)&prop;
}

TEST(hip_vmm_mapped_after_release_stays_charged_until_unmap)
{
	uint64_t untracked = gg_stats(0).untracked_frees;
	void *va, *p = NULL;
	gg_hipMemGenericAllocationHandle_t h;
	CHECK_EQ_INT(hipMemAddressReserve(&va, 4 * GIB, 0, NULL, 0), GG_hipSuccess);
	CHECK_EQ_INT(hipMemCreate(&h, GIB, hip_prop(), 0), GG_hipSuccess);
	CHECK_EQ_INT(hipMemMap(va, GIB, 0, h, 0), GG_hipSuccess);
	CHECK_EQ_INT(hipMemRelease(h), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).used, GIB);
	CHECK_EQ_INT(hipMalloc(&p, 3 * GIB / 2), GG_hipErrorOutOfMemory);
	CHECK_EQ_INT(hipMemUnmap(va, GIB), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).used, 0);
	CHECK_EQ_INT(hipMalloc(&p, 3 * GIB / 2), GG_hipSuccess);
	CHECK_EQ_INT(hipFree(p), GG_hipSuccess);
	CHECK_EQ_INT(hipMemAddressFree(va, 4 * GIB), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).untracked_frees, untracked);
}

TEST(hip_vmm_nccl_free_path_balances_to_zero)
{
	enum { N = 64 };
	struct gpuguard_device_stats s0 = gg_stats(0);
	void *va;
	CHECK_EQ_INT(hipMemAddressReserve(&va, N * 2 * MIB, 0, NULL, 0), GG_hipSuccess);
	for (int i = 0; i < N; i++) {
		gg_hipMemGenericAllocationHandle_t h;
		CHECK_EQ_INT(hipMemCreate(&h, 2 * MIB, hip_prop(), 0), GG_hipSuccess);
		CHECK_EQ_INT(hipMemMap((char *)va + (uint64_t)i * 2 * MIB, 2 * MIB, 0, h, 0), GG_hipSuccess);
	}
	for (int i = 0; i < N; i++) {
		void *p = (char *)va + (uint64_t)i * 2 * MIB;
		gg_hipMemGenericAllocationHandle_t h = NULL;
		CHECK_EQ_INT(hipMemRetainAllocationHandle(&h, p), GG_hipSuccess);
		CHECK_EQ_INT(hipMemRelease(h), GG_hipSuccess);
		if (i == 0)
			CHECK_EQ_U64(gg_stats(0).used, N * 2 * MIB);
		CHECK_EQ_INT(hipMemUnmap(p, 2 * MIB), GG_hipSuccess);
		CHECK_EQ_INT(hipMemRelease(h), GG_hipSuccess);
	}
	struct gpuguard_device_stats s = gg_stats(0);
	CHECK_EQ_U64(s.used, 0);
	CHECK_EQ_U64(s.untracked_frees, s0.untracked_frees);
	CHECK_EQ_INT(hipMemAddressFree(va, N * 2 * MIB), GG_hipSuccess);
}

/* ---- reset and destroy free the context's memory ------------------------ */

/* Allocates through every family the primary context owns; *p is a block
 * of the default pool, which outlives a reset (tests/sim/README.md). */
static void fill_primary(gg_CUdeviceptr *a, gg_CUmemGenericAllocationHandle *h, gg_CUdeviceptr *va, gg_CUdeviceptr *p)
{
	CHECK_EQ_INT(cuMemAlloc_v2(a, 1024 * MIB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAddressReserve(va, GIB, 0, 0, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemCreate(h, 256 * MIB, &cu_prop, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemMap(*va, 256 * MIB, 0, *h, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAllocAsync(p, 128 * MIB, NULL), GG_CUDA_SUCCESS);
}

static void reset_and_check(reset_fn reset, const char *how)
{
	struct gpuguard_device_stats s0 = gg_stats(0);
	uint64_t live0 = live_records();
	gg_CUdeviceptr a, va, big, p;
	gg_CUmemGenericAllocationHandle h;
	fill_primary(&a, &h, &va, &p);
	CHECK(gg_stats(0).used >= s0.used + 1408 * MIB);
	CHECK(live_records() >= live0 + 3);
	if (!reset) {
		fprintf(stderr, "%s: no reset entry point\n", how);
		CHECK(reset != NULL);
		return;
	}
	CHECK_EQ_INT(reset(0), GG_CUDA_SUCCESS);
	struct gpuguard_device_stats s = gg_stats(0);
	/* everything the driver freed is refunded and its records gone; the
	 * default pool's block, which the driver keeps, stays charged (its
	 * pool's 128 MiB) and recorded */
	CHECK_EQ_U64(s.used, s0.used + 128 * MIB);
	CHECK_EQ_U64(s.live_bytes, s0.live_bytes + 128 * MIB);
	CHECK_EQ_U64(live_records(), live0 + 1);
	CHECK_EQ_U64(s.untracked_frees, s0.untracked_frees);
	/* the context comes back (cudart retains it again); 1.5 GiB fits */
	gg_CUcontext c;
	CHECK_EQ_INT(cuDevicePrimaryCtxRetain(&c, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxSetCurrent(c), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAlloc_v2(&big, 3 * GIB / 2), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemFree_v2(big), GG_CUDA_SUCCESS);
	cuMemAddressFree(va, GIB);
	/* the kept block frees as any other: a tracked free, all refunded */
	CHECK_EQ_INT(cuMemFreeAsync(p, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxSynchronize(), GG_CUDA_SUCCESS);
	s = gg_stats(0);
	CHECK_EQ_U64(s.used, s0.used);
	CHECK_EQ_U64(s.live_bytes, s0.live_bytes);
	CHECK_EQ_U64(live_records(), live0);
	CHECK_EQ_U64(s.untracked_frees, s0.untracked_frees);
}

TEST(primary_reset_v2_refunds_the_context)
{
	reset_and_check((reset_fn)need("cuDevicePrimaryCtxReset_v2"), "cuDevicePrimaryCtxReset_v2");
}

TEST(primary_reset_through_cudart_lookup_refunds_the_context)
{
	/* cudaDeviceReset: cudart asks for cuDevicePrimaryCtxReset at 7000 */
	reset_fn r = (reset_fn)proc("cuDevicePrimaryCtxReset", 7000);
	CHECK(r != NULL && strcmp(object_of((void *)r), "libgpuguard.so") == 0);
	reset_and_check(r, "cuDevicePrimaryCtxReset@7000");
	reset_fn r2 = (reset_fn)proc("cuDevicePrimaryCtxReset", 11000);
	CHECK(r2 != NULL && strcmp(symbol_of((void *)r2), "cuDevicePrimaryCtxReset_v2") == 0);
}

/* The last release of the primary context resets it (the driver API's
 * reference; tests/sim/README.md): "reset" here is release_to_zero, which
 * first drops a retain that is not the last (the books stay), then the
 * last one. */
static reset_fn release_fn;

static gg_CUresult release_to_zero(gg_CUdevice dev)
{
	struct gpuguard_device_stats s = gg_stats(0);
	uint64_t live = live_records();
	unsigned flags;
	int active = 0;
	CHECK_EQ_INT(release_fn(dev), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuDevicePrimaryCtxGetState(dev, &flags, &active), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(active, 1);
	CHECK_EQ_U64(gg_stats(0).used, s.used);
	CHECK_EQ_U64(live_records(), live);
	return release_fn(dev);
}

static void release_case(reset_fn release, const char *how)
{
	release_fn = release;
	gg_CUcontext c;
	/* the context is retained once (setup, or the reset case's retain):
	 * one more, so that the first release is not the last */
	CHECK_EQ_INT(cuDevicePrimaryCtxRetain(&c, 0), GG_CUDA_SUCCESS);
	CHECK(c == ctx0);
	reset_and_check(release ? release_to_zero : NULL, how);
}

TEST(last_primary_release_refunds_the_context)
{
	release_case((reset_fn)need("cuDevicePrimaryCtxRelease_v2"), "cuDevicePrimaryCtxRelease_v2");
}

/* cudart asks for the legacy ABI at 7000. */
TEST(last_primary_release_through_cudart_lookup_refunds_the_context)
{
	reset_fn r = (reset_fn)proc("cuDevicePrimaryCtxRelease", 7000);
	CHECK(r != NULL && strcmp(object_of((void *)r), "libgpuguard.so") == 0);
	release_case(r, "cuDevicePrimaryCtxRelease@7000");
	reset_fn r2 = (reset_fn)proc("cuDevicePrimaryCtxRelease", 11000);
	CHECK(r2 != NULL && strcmp(symbol_of((void *)r2), "cuDevicePrimaryCtxRelease_v2") == 0);
}

TEST(ctx_destroy_refunds_that_context_only)
{
	ctx_create_fn create = (ctx_create_fn)need("cuCtxCreate_v2");
	ctx_destroy_fn destroy = (ctx_destroy_fn)need("cuCtxDestroy_v2");
	CHECK(create && destroy);
	if (!create || !destroy)
		return;
	struct gpuguard_device_stats s0 = gg_stats(0);
	uint64_t live0 = live_records();
	gg_CUcontext c1;
	gg_CUdeviceptr a, b;
	CHECK_EQ_INT(create(&c1, 0, 0), GG_CUDA_SUCCESS); /* current now */
	CHECK_EQ_INT(cuMemAlloc_v2(&a, 512 * MIB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxSetCurrent(ctx0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAlloc_v2(&b, 256 * MIB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(destroy(c1), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, s0.used + 256 * MIB);
	CHECK_EQ_U64(live_records(), live0 + 1);
	CHECK_EQ_INT(cuMemFree_v2(b), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, s0.used);
	CHECK_EQ_U64(gg_stats(0).untracked_frees, s0.untracked_frees);
	/* a context made later at the same address starts with clean books */
	gg_CUcontext c2;
	CHECK_EQ_INT(create(&c2, 0, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAlloc_v2(&a, 64 * MIB), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(destroy(c2), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, s0.used);
	CHECK_EQ_INT(cuCtxSetCurrent(ctx0), GG_CUDA_SUCCESS);
}

TEST(hip_device_reset_refunds_the_device)
{
	struct gpuguard_device_stats s0 = gg_stats(0);
	uint64_t live0 = live_records();
	void *p, *q;
	CHECK_EQ_INT(hipSetDevice(0), GG_hipSuccess);
	CHECK_EQ_INT(hipMalloc(&p, GIB), GG_hipSuccess);
	CHECK_EQ_INT(hipMallocAsync(&q, 256 * MIB, NULL), GG_hipSuccess);
	CHECK(gg_stats(0).used >= s0.used + 1280 * MIB);
	CHECK_EQ_INT(hipDeviceReset(), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).used, s0.used);
	CHECK_EQ_U64(live_records(), live0);
	CHECK_EQ_INT(hipMalloc(&p, 3 * GIB / 2), GG_hipSuccess);
	CHECK_EQ_INT(hipFree(p), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).untracked_frees, s0.untracked_frees);
}

/* ---- graph memory: the device's graph reserve ----------------------------- */

static gg_CUDA_MEM_ALLOC_NODE_PARAMS node_params(uint64_t bytes)
{
	gg_CUDA_MEM_ALLOC_NODE_PARAMS p;
	memset(&p, 0, sizeof(p));
	p.poolProps.allocType = GG_CU_MEM_ALLOCATION_TYPE_PINNED;
	p.poolProps.location.type = GG_CU_MEM_LOCATION_TYPE_DEVICE;
	p.poolProps.location.id = 0;
	p.bytesize = bytes;
	return p;
}

TEST(graph_alloc_nodes_charged_by_the_graph_reserve)
{
	struct gpuguard_device_stats s0 = gg_stats(0);
	gg_CUgraph g, g2;
	gg_CUgraphNode n;
	gg_CUgraphExec e, e2;
	gg_CUDA_MEM_ALLOC_NODE_PARAMS p = node_params(512 * MIB);
	CHECK_EQ_INT(cuGraphCreate(&g, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphAddMemAllocNode(&n, g, NULL, 0, &p), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphInstantiateWithFlags(&e, g, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, s0.used); /* nothing runs until the launch */
	CHECK_EQ_INT(cuGraphLaunch(e, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, s0.used + 512 * MIB);
	CHECK_EQ_U64(gg_stats(0).pool_reserved, s0.pool_reserved + 512 * MIB);
	/* a graph that needs 1.75 GiB more is refused before the driver runs it */
	gg_CUDA_MEM_ALLOC_NODE_PARAMS p2 = node_params(1792 * MIB);
	CHECK_EQ_INT(cuGraphCreate(&g2, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphAddMemAllocNode(&n, g2, NULL, 0, &p2), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphInstantiateWithFlags(&e2, g2, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphLaunch(e2, NULL), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_U64(gg_stats(0).used, s0.used + 512 * MIB);
	CHECK_EQ_U64(gg_stats(0).refused[GPUGUARD_REFUSED_CEILING], s0.refused[GPUGUARD_REFUSED_CEILING] + 1);
	CHECK_EQ_U64(gg_stats(0).pool_overshoot, s0.pool_overshoot);
	/* the graph's allocation freed outside it: no untracked free, and the
	 * reserve stays until the driver trims it */
	CHECK_EQ_INT(cuMemFreeAsync(p.dptr, NULL), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).untracked_frees, s0.untracked_frees);
	CHECK_EQ_INT(cuGraphExecDestroy(e), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphExecDestroy(e2), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphDestroy(g), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphDestroy(g2), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, s0.used + 512 * MIB);
	CHECK_EQ_INT(cuDeviceGraphMemTrim(0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, s0.used);
	CHECK_EQ_U64(gg_stats(0).pool_reserved, s0.pool_reserved);
}

/* cudaMallocAsync captured into a graph allocates nothing at capture: it is
 * neither charged nor recorded as an async allocation, nor its captured free
 * counted; the launch is what the reserve pays for. */
TEST(captured_async_allocation_is_graph_memory)
{
	struct gpuguard_device_stats s0 = gg_stats(0);
	uint64_t live0 = live_records();
	gg_CUstream st;
	gg_CUgraph g;
	gg_CUgraphExec e;
	gg_CUdeviceptr p = 0;
	/* cudart's capture goes through our hook at both ABIs */
	CHECK(strcmp(symbol_of(proc("cuStreamBeginCapture", 10010)), "cuStreamBeginCapture_v2") == 0);
	CHECK(strcmp(symbol_of(proc("cuStreamBeginCapture", 10000)), "cuStreamBeginCapture") == 0);
	CHECK_EQ_INT(cuStreamCreate(&st, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamBeginCapture_v2(st, GG_CU_STREAM_CAPTURE_MODE_GLOBAL), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAllocAsync(&p, 256 * MIB, st), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, s0.used);
	CHECK_EQ_U64(live_records(), live0);
	CHECK_EQ_INT(cuMemFreeAsync(p, st), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamEndCapture(st, &g), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).untracked_frees, s0.untracked_frees);
	CHECK_EQ_U64(gg_stats(0).frees, s0.frees);
	CHECK_EQ_INT(cuGraphInstantiateWithFlags(&e, g, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphLaunch(e, st), GG_CUDA_SUCCESS);
	/* allocated and freed inside the graph: the reserve keeps the pages */
	CHECK_EQ_U64(gg_stats(0).used, s0.used + 256 * MIB);
	CHECK_EQ_INT(cuGraphExecDestroy(e), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphDestroy(g), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuDeviceGraphMemTrim(0), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, s0.used);
	CHECK_EQ_INT(cuStreamDestroy_v2(st), GG_CUDA_SUCCESS);
}

int main(void)
{
	setup();
	RUN(vmm_mapped_after_release_stays_charged_until_unmap);
	RUN(vmm_retained_reference_is_counted);
	RUN(vmm_nccl_free_path_balances_to_zero);
	RUN(vmm_host_memory_is_never_charged_nor_an_untracked_free);
	RUN(vmm_unmap_of_a_range_and_address_free);
	RUN(vmm_double_release_of_a_mapped_handle);
	RUN(hip_vmm_mapped_after_release_stays_charged_until_unmap);
	RUN(hip_vmm_nccl_free_path_balances_to_zero);
	RUN(last_primary_release_refunds_the_context);
	RUN(primary_reset_v2_refunds_the_context);
	RUN(primary_reset_through_cudart_lookup_refunds_the_context);
	RUN(last_primary_release_through_cudart_lookup_refunds_the_context);
	RUN(ctx_destroy_refunds_that_context_only);
	RUN(hip_device_reset_refunds_the_device);
	RUN(graph_alloc_nodes_charged_by_the_graph_reserve);
	RUN(captured_async_allocation_is_graph_memory);
	return harness_done();
}
