/* gpuguard: the toolkit's own libcudart on the simulated GPU. Built three
 * times (tests/reallib/README.md): shared cudart, static cudart (nvcc's
 * default) and --default-stream per-thread, so every lookup form cudart makes
 * (flag 0 and 2, 13000 ABIs) is exercised. Under the preload the ceiling
 * (2Gi on an 8Gi card) holds on every path, refusals come back as
 * cudaErrorMemoryAllocation and the books end exact (REAL-CUDA.md §6). */
#include "rl.h"

#include <unistd.h>

static uint64_t base_used; /* gpuguard's charge once the context is up */

static uint64_t used(void)
{
	return rl_books();
}

TEST(starts_on_the_simulator)
{
	int n = -1;
	CUDA_OK(cudaGetDeviceCount(&n));
	CHECK_EQ_INT(n, 1);
	CUDA_OK(cudaSetDevice(0));
	CUDA_OK(cudaFree(0)); /* creates the primary context */
	int dv = 0, rv = 0;
	CUDA_OK(cudaDriverGetVersion(&dv));
	CUDA_OK(cudaRuntimeGetVersion(&rv));
	CHECK(dv >= 13000);
	CHECK(rv >= 13000);
	base_used = used();
}

TEST(properties_and_meminfo_report_the_ceiling)
{
	cudaDeviceProp p;
	CUDA_OK(cudaGetDeviceProperties(&p, 0));
	/* what the card says of itself, for make check-gpu's comparison */
	printf("GGINFO device=\"%s\" cc=%d.%d sms=%d total=%zu pci=%04x:%02x:%02x\n", p.name, p.major, p.minor,
	       p.multiProcessorCount, p.totalGlobalMem, p.pciDomainID, p.pciBusID, p.pciDeviceID);
	uint64_t want = rl_governed() ? RL_LIMIT : RL_CARD;
	if (rl_governed() || rl_sim_used() != UINT64_MAX)
		CHECK_EQ_U64(p.totalGlobalMem, want);
	CHECK(p.major >= 7);
	CHECK(p.multiProcessorCount > 0);
	size_t fr = 0, to = 0;
	CUDA_OK(cudaMemGetInfo(&fr, &to));
	if (rl_governed() || rl_sim_used() != UINT64_MAX)
		CHECK_EQ_U64(to, want);
	CHECK(fr <= to);
	CHECK(fr + 64 * MIB >= to); /* nothing much allocated yet */
	/* free moves at once when the process allocates */
	void *d = NULL;
	CUDA_OK(cudaMalloc(&d, 512 * MIB));
	size_t fr2 = 0;
	CUDA_OK(cudaMemGetInfo(&fr2, &to));
	CHECK(fr2 + 512 * MIB <= fr);
	CUDA_OK(cudaFree(d));
}

TEST(malloc_holds_the_ceiling_and_carries_on)
{
	void *a = NULL, *b = NULL;
	CUDA_OK(cudaMalloc(&a, 1536 * MIB));
	CHECK_REFUSED_IF_GOVERNED(cudaMalloc(&b, 1 * GIB), cudaSuccess, cudaErrorMemoryAllocation, cudaFree(b));
	CHECK_CEILING_HELD();
	/* the refusal is not sticky: the process carries on */
	(void)cudaGetLastError();
	CUDA_OK(cudaFree(a));
	CHECK_EQ_U64(used(), base_used);
	CUDA_OK(cudaMalloc(&b, 1 * GIB));
	CUDA_OK(cudaFree(b));
	CHECK_EQ_U64(used(), base_used);
}

TEST(pitch_and_managed)
{
	void *p = NULL;
	size_t pitch = 0;
	CUDA_OK(cudaMallocPitch(&p, &pitch, 1000, 1000));
	CHECK(pitch >= 1000);
	if (rl_governed())
		CHECK(used() >= base_used + pitch * 1000);
	CUDA_OK(cudaFree(p));
	CHECK_REFUSED_IF_GOVERNED(cudaMallocPitch(&p, &pitch, 1 << 20, 3000), cudaSuccess,
	                          cudaErrorMemoryAllocation, cudaFree(p));
	(void)cudaGetLastError();
	void *m = NULL;
	CUDA_OK(cudaMallocManaged(&m, 1 * GIB, cudaMemAttachGlobal));
	CHECK_REFUSED_IF_GOVERNED(cudaMallocManaged(&p, 1536 * MIB, cudaMemAttachGlobal), cudaSuccess,
	                          cudaErrorMemoryAllocation, cudaFree(p));
	(void)cudaGetLastError();
	CHECK_CEILING_HELD();
	CUDA_OK(cudaFree(m));
	CHECK_EQ_U64(used(), base_used);
}

static void async_on(cudaStream_t s)
{
	void *a = NULL, *b = NULL;
	CUDA_OK(cudaMallocAsync(&a, 1 * GIB, s));
	CHECK_REFUSED_IF_GOVERNED(cudaMallocAsync(&b, 1536 * MIB, s), cudaSuccess, cudaErrorMemoryAllocation,
	                          cudaFreeAsync(b, s));
	(void)cudaGetLastError();
	CHECK_CEILING_HELD();
	CUDA_OK(cudaFreeAsync(a, s));
	/* the default pool's release threshold is 0: a sync hands it back */
	CUDA_OK(cudaStreamSynchronize(s));
	CUDA_OK(cudaDeviceSynchronize());
	CHECK_EQ_U64(used(), base_used);
	CUDA_OK(cudaMallocAsync(&b, 1536 * MIB, s));
	CUDA_OK(cudaFreeAsync(b, s));
	CUDA_OK(cudaStreamSynchronize(s));
}

TEST(malloc_async_on_the_default_stream)
{
	async_on(0);
	CHECK_EQ_U64(used(), base_used);
}

TEST(malloc_async_on_a_created_stream)
{
	cudaStream_t s = NULL;
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	async_on(s);
	CUDA_OK(cudaStreamDestroy(s));
	CHECK_EQ_U64(used(), base_used);
}

TEST(pool_with_a_release_threshold_then_trim)
{
	cudaMemPoolProps props;
	memset(&props, 0, sizeof(props));
	props.allocType = cudaMemAllocationTypePinned;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = 0;
	cudaMemPool_t pool = NULL;
	CUDA_OK(cudaMemPoolCreate(&pool, &props));
	uint64_t thr = 1 * GIB;
	CUDA_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
	cudaStream_t s = NULL;
	CUDA_OK(cudaStreamCreate(&s));
	void *a = NULL, *b = NULL;
	CUDA_OK(cudaMallocFromPoolAsync(&a, 512 * MIB, pool, s));
	CHECK_REFUSED_IF_GOVERNED(cudaMallocFromPoolAsync(&b, 1792 * MIB, pool, s), cudaSuccess,
	                          cudaErrorMemoryAllocation, cudaFreeAsync(b, s));
	(void)cudaGetLastError();
	CHECK_CEILING_HELD();
	CUDA_OK(cudaFreeAsync(a, s));
	CUDA_OK(cudaStreamSynchronize(s));
	/* under the threshold the pool keeps its 512Mi, and it stays charged */
	uint64_t reserved = 0;
	CUDA_OK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
	CHECK(reserved >= 512 * MIB);
	if (rl_governed())
		CHECK(used() >= base_used + 512 * MIB);
	/* a warm reserve serves a new request without a refusal */
	CUDA_OK(cudaMallocFromPoolAsync(&a, 512 * MIB, pool, s));
	CUDA_OK(cudaFreeAsync(a, s));
	CUDA_OK(cudaStreamSynchronize(s));
	CUDA_OK(cudaMemPoolTrimTo(pool, 0));
	CUDA_OK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
	CHECK_EQ_U64(reserved, 0);
	CHECK_EQ_U64(used(), base_used);
	CUDA_OK(cudaStreamDestroy(s));
	CUDA_OK(cudaMemPoolDestroy(pool));
	CHECK_EQ_U64(used(), base_used);
}

/* cudaDeviceSetMemPool reaches the driver's cuDeviceSetMemPool through
 * cudart's entry-point table, which hands out our hook: the hooks' cached
 * current pool (issue 24) moves with it, so the new pool's growth is
 * charged, though the old pool's free reserve would have served the
 * request. Without the invalidation the 512 MiB went uncharged and a
 * cudaMalloc of 1 GiB fitted beside it under the 2 GiB ceiling. */
TEST(device_set_mem_pool_moves_async_requests)
{
	cudaMemPoolProps props;
	memset(&props, 0, sizeof(props));
	props.allocType = cudaMemAllocationTypePinned;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = 0;
	cudaMemPool_t pool = NULL, def = NULL;
	CUDA_OK(cudaMemPoolCreate(&pool, &props));
	CUDA_OK(cudaDeviceGetDefaultMemPool(&def, 0));
	void *a = NULL, *b = NULL, *c = NULL;
	/* the default pool keeps 1 GiB free (no sync) */
	CUDA_OK(cudaMallocAsync(&a, 1 * GIB, 0));
	CUDA_OK(cudaFreeAsync(a, 0));
	CUDA_OK(cudaDeviceSetMemPool(0, pool));
	CUDA_OK(cudaMallocAsync(&b, 512 * MIB, 0));
	if (rl_governed())
		CHECK_EQ_U64(used(), base_used + 1 * GIB + 512 * MIB);
	CHECK_REFUSED_IF_GOVERNED(cudaMalloc(&c, 1 * GIB), cudaSuccess, cudaErrorMemoryAllocation, cudaFree(c));
	(void)cudaGetLastError();
	CHECK_CEILING_HELD();
	CUDA_OK(cudaFreeAsync(b, 0));
	CUDA_OK(cudaDeviceSetMemPool(0, def));
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemPoolDestroy(pool));
	CHECK_EQ_U64(used(), base_used);
}

/* The driver's VMM entry points, reached as PyTorch and NCCL reach them. */
static struct {
	decltype(&cuMemCreate) create;
	decltype(&cuMemRelease) release;
	decltype(&cuMemAddressReserve) reserve;
	decltype(&cuMemAddressFree) address_free;
	decltype(&cuMemMap) map;
	decltype(&cuMemUnmap) unmap;
	decltype(&cuMemSetAccess) set_access;
	decltype(&cuMemRetainAllocationHandle) retain;
	decltype(&cuMemGetAllocationGranularity) granularity;
} vmm;

static int vmm_ready(void)
{
	if (vmm.create)
		return 1;
	/* the deprecated form (asks at the toolkit's version, with a status) */
	cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
	void *fn = NULL;
	CUDA_OK(cudaGetDriverEntryPoint("cuMemCreate", &fn, cudaEnableDefault, &st));
	CHECK_EQ_INT(st, cudaDriverEntryPointSuccess);
	vmm.create = (decltype(vmm.create))fn;
	vmm.release = (decltype(vmm.release))rl_driver_fn("cuMemRelease", 10020);
	vmm.reserve = (decltype(vmm.reserve))rl_driver_fn("cuMemAddressReserve", 10020);
	vmm.address_free = (decltype(vmm.address_free))rl_driver_fn("cuMemAddressFree", 10020);
	vmm.map = (decltype(vmm.map))rl_driver_fn("cuMemMap", 10020);
	vmm.unmap = (decltype(vmm.unmap))rl_driver_fn("cuMemUnmap", 10020);
	vmm.set_access = (decltype(vmm.set_access))rl_driver_fn("cuMemSetAccess", 10020);
	vmm.retain = (decltype(vmm.retain))rl_driver_fn("cuMemRetainAllocationHandle", 11000);
	vmm.granularity = (decltype(vmm.granularity))rl_driver_fn("cuMemGetAllocationGranularity", 10020);
	int ok = vmm.create && vmm.release && vmm.reserve && vmm.address_free && vmm.map && vmm.unmap &&
	         vmm.set_access && vmm.retain && vmm.granularity;
	CHECK(ok);
	if (!ok)
		vmm.create = NULL;
	return ok;
}

static CUmemAllocationProp vmm_prop(void)
{
	CUmemAllocationProp p;
	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = 0;
	return p;
}

/* Reserve, map and enable size bytes of handle h; returns the address. */
static CUdeviceptr vmm_map(CUmemGenericAllocationHandle h, size_t size)
{
	CUdeviceptr va = 0;
	CU_OK(vmm.reserve(&va, size, 0, 0, 0));
	CU_OK(vmm.map(va, size, 0, h, 0));
	CUmemAccessDesc acc;
	memset(&acc, 0, sizeof(acc));
	acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc.location.id = 0;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU_OK(vmm.set_access(va, size, &acc, 1));
	return va;
}

TEST(vmm_map_then_release_then_unmap)
{
	if (!vmm_ready())
		return;
	CUmemAllocationProp prop = vmm_prop();
	size_t g = 0;
	CU_OK(vmm.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CHECK_EQ_U64(g, 2 * MIB);
	CUmemGenericAllocationHandle h = 0;
	CU_OK(vmm.create(&h, 1 * GIB, &prop, 0));
	CUdeviceptr va = vmm_map(h, 1 * GIB);
	/* NVIDIA's samples release at once: the memory lives until the unmap */
	CU_OK(vmm.release(h));
	if (rl_governed())
		CHECK_EQ_U64(used(), base_used + 1 * GIB);
	void *d = NULL;
	CHECK_REFUSED_IF_GOVERNED(cudaMalloc(&d, 1536 * MIB), cudaSuccess, cudaErrorMemoryAllocation, cudaFree(d));
	(void)cudaGetLastError();
	CHECK_CEILING_HELD();
	CU_OK(vmm.unmap(va, 1 * GIB));
	CHECK_EQ_U64(used(), base_used);
	CUDA_OK(cudaMalloc(&d, 1536 * MIB));
	CUDA_OK(cudaFree(d));
	CU_OK(vmm.address_free(va, 1 * GIB));
}

TEST(vmm_retain_then_release)
{
	if (!vmm_ready())
		return;
	CUmemAllocationProp prop = vmm_prop();
	uint64_t untracked = rl_gg().untracked_frees;
	CUmemGenericAllocationHandle h = 0, h2 = 0;
	CU_OK(vmm.create(&h, 512 * MIB, &prop, 0));
	CUdeviceptr va = vmm_map(h, 512 * MIB);
	CU_OK(vmm.retain(&h2, (void *)va));
	CHECK_EQ_U64(h2, h);
	/* the extra reference goes; the memory is still mapped and held */
	CU_OK(vmm.release(h2));
	if (rl_governed())
		CHECK_EQ_U64(used(), base_used + 512 * MIB);
	CU_OK(vmm.release(h));
	if (rl_governed())
		CHECK_EQ_U64(used(), base_used + 512 * MIB);
	CU_OK(vmm.unmap(va, 512 * MIB));
	CHECK_EQ_U64(used(), base_used);
	CHECK_EQ_U64(rl_gg().untracked_frees, untracked);
	CU_OK(vmm.address_free(va, 512 * MIB));
}

TEST(vmm_nccl_free_path)
{
	if (!vmm_ready())
		return;
	/* NCCL's buffers: 2 MiB each, freed by retain, release, unmap, release */
	enum { N = 64 };
	CUmemAllocationProp prop = vmm_prop();
	uint64_t untracked = rl_gg().untracked_frees;
	CUmemGenericAllocationHandle hs[N];
	CUdeviceptr vas[N];
	for (int i = 0; i < N; i++) {
		CU_OK(vmm.create(&hs[i], 2 * MIB, &prop, 0));
		vas[i] = vmm_map(hs[i], 2 * MIB);
	}
	if (rl_governed())
		CHECK_EQ_U64(used(), base_used + N * 2 * MIB);
	for (int i = 0; i < N; i++) {
		CUmemGenericAllocationHandle h = 0;
		CU_OK(vmm.retain(&h, (void *)vas[i]));
		CU_OK(vmm.release(h));
		CU_OK(vmm.unmap(vas[i], 2 * MIB));
		CU_OK(vmm.release(h));
		CU_OK(vmm.address_free(vas[i], 2 * MIB));
	}
	CHECK_EQ_U64(used(), base_used);
	CHECK_EQ_U64(rl_gg().untracked_frees, untracked);
	if (rl_sim_used() != UINT64_MAX)
		CHECK_EQ_U64(rl_sim_used(), 0);
}

TEST(captured_malloc_async_in_a_graph)
{
	cudaStream_t s = NULL;
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	uint64_t sim_before = rl_sim_used();
	CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	void *a = NULL;
	/* capturing allocates nothing: no charge, nothing on the card */
	CUDA_OK(cudaMallocAsync(&a, 1 * GIB, s));
	CHECK(a != NULL);
	CHECK_EQ_U64(used(), base_used);
	CHECK_EQ_U64(rl_sim_used(), sim_before);
	CUDA_OK(cudaFreeAsync(a, s));
	cudaGraph_t g = NULL;
	CUDA_OK(cudaStreamEndCapture(s, &g));
	cudaGraphExec_t ge = NULL;
	CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
	CUDA_OK(cudaGraphLaunch(ge, s));
	CUDA_OK(cudaStreamSynchronize(s));
	/* the graph's memory stays reserved after the launch, and is charged */
	uint64_t reserved = 0;
	CUDA_OK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &reserved));
	CHECK(reserved >= 1 * GIB);
	if (rl_governed())
		CHECK(used() >= base_used + 1 * GIB);
	void *d = NULL;
	CHECK_REFUSED_IF_GOVERNED(cudaMalloc(&d, 1536 * MIB), cudaSuccess, cudaErrorMemoryAllocation, cudaFree(d));
	(void)cudaGetLastError();
	CHECK_CEILING_HELD();
	CUDA_OK(cudaGraphExecDestroy(ge));
	CUDA_OK(cudaGraphDestroy(g));
	CUDA_OK(cudaDeviceGraphMemTrim(0));
	CUDA_OK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &reserved));
	CHECK_EQ_U64(reserved, 0);
	CHECK_EQ_U64(used(), base_used);
	CUDA_OK(cudaMalloc(&d, 1536 * MIB));
	CUDA_OK(cudaFree(d));
	CUDA_OK(cudaStreamDestroy(s));
}

/* What a pool holds, by its own figures. */
static uint64_t pool_reserved(cudaMemPool_t pool)
{
	uint64_t r = 0;
	CUDA_OK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &r));
	return r;
}

static uint64_t default_pool_reserved(void)
{
	cudaMemPool_t pool;
	CUDA_OK(cudaDeviceGetDefaultMemPool(&pool, 0));
	return pool_reserved(pool);
}

TEST(device_reset_frees_all_but_the_pools_blocks)
{
	void *a = NULL, *m = NULL, *as = NULL, *ps = NULL;
	uint64_t untracked = rl_gg().untracked_frees;
	cudaMemPoolProps pp = {};
	pp.allocType = cudaMemAllocationTypePinned;
	pp.location.type = cudaMemLocationTypeDevice;
	pp.location.id = 0;
	cudaMemPool_t pool;
	CUDA_OK(cudaMemPoolCreate(&pool, &pp));
	CUDA_OK(cudaMalloc(&a, 1 * GIB));
	CUDA_OK(cudaMallocManaged(&m, 256 * MIB, cudaMemAttachGlobal));
	CUDA_OK(cudaMallocAsync(&as, 256 * MIB, 0));
	CUDA_OK(cudaMallocFromPoolAsync(&ps, 256 * MIB, pool, 0));
	CUDA_OK(cudaDeviceSynchronize());
	/* The driver frees the context's memory, but pools keep their blocks
	 * (seen on an H200, driver 580: the default pool's and a created
	 * pool's 256 MiB still in use by cudaMemGetInfo and the pools). The
	 * books follow both. */
	CUDA_OK(cudaDeviceReset());
	CUDA_OK(cudaSetDevice(0));
	uint64_t kept = default_pool_reserved() + pool_reserved(pool);
	CHECK(kept >= 512 * MIB);
	if (rl_governed()) {
		CHECK_EQ_U64(used(), kept);
		CHECK_EQ_U64(rl_gg().live_bytes, 512 * MIB);
	}
	if (rl_sim_used() != UINT64_MAX)
		CHECK_EQ_U64(rl_sim_used(), kept);
	/* nothing is refused falsely afterwards */
	void *b = NULL;
	CUDA_OK(cudaMalloc(&b, 1 * GIB));
	CUDA_OK(cudaFree(b));
	/* and the kept blocks free as any other: tracked frees, all refunded */
	CUDA_OK(cudaFreeAsync(as, 0));
	CUDA_OK(cudaFreeAsync(ps, 0));
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemPoolDestroy(pool));
	CHECK_EQ_U64(default_pool_reserved(), 0);
	CHECK_EQ_U64(used(), 0);
	if (rl_governed()) {
		CHECK_EQ_U64(rl_gg().live_bytes, 0);
		CHECK_EQ_U64(rl_gg().untracked_frees, untracked);
	}
	if (rl_sim_used() != UINT64_MAX)
		CHECK_EQ_U64(rl_sim_used(), 0);
	base_used = used();
}

TEST(books_end_exact)
{
	struct gpuguard_device_stats s = rl_gg();
	s.used -= rl_runtime(); /* the books */
	CHECK_EQ_U64(s.used, base_used);
	CHECK_EQ_U64(s.live_bytes, 0);
	CHECK_EQ_U64(s.untracked_frees, 0);
	CHECK_EQ_U64(s.pool_overshoot, 0);
	if (rl_governed())
		CHECK(s.peak <= RL_LIMIT);
}

/* `exit-dump` mode: leaves 256Mi live from a function of its own, for the
 * exit dump whose report tests/reallib/exit_report.sh checks. Exported and
 * never inlined, so the report can name it. */
extern "C" __attribute__((noinline, visibility("default"))) void *rl_load_weights(size_t bytes)
{
	void *d = NULL;
	if (cudaMalloc(&d, bytes) != cudaSuccess)
		return NULL;
	return d;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "exit-dump") == 0)
		return rl_load_weights(256 * MIB) ? 0 : 1;
	printf("# cudart %s, %s\n", rl_governed() ? "under gpuguard" : "bare simulator",
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
	       "per-thread default stream"
#else
	       "legacy default stream"
#endif
	);
	RUN(starts_on_the_simulator);
	RUN(properties_and_meminfo_report_the_ceiling);
	RUN(malloc_holds_the_ceiling_and_carries_on);
	RUN(pitch_and_managed);
	RUN(malloc_async_on_the_default_stream);
	RUN(malloc_async_on_a_created_stream);
	RUN(pool_with_a_release_threshold_then_trim);
	RUN(device_set_mem_pool_moves_async_requests);
	RUN(vmm_map_then_release_then_unmap);
	RUN(vmm_retain_then_release);
	RUN(vmm_nccl_free_path);
	RUN(captured_malloc_async_in_a_graph);
	RUN(device_reset_frees_all_but_the_pools_blocks);
	RUN(books_end_exact);
	return harness_done();
}
