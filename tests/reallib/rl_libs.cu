/* gpuguard: the toolkit's cuBLAS, cuBLASLt and NCCL on the simulated GPU.
 * Each embeds its own static cudart (a second, third and fourth start-up of
 * the runtime in one process) and reaches VMM, NVML and the driver's private
 * tables its own way (REAL-CUDA.md §4). Under the preload their allocations
 * are charged, refusals come back as each library's own out-of-memory status,
 * and NCCL's own free path (retain, release, unmap, release) leaves the books
 * exact. */
#include "rl.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <nccl.h>

static uint64_t base_used;

/* The books (the runtime category, on by default, is apart: rl.h) */
static uint64_t used(void)
{
	return rl_books();
}

/* Takes all but `room` of the ceiling with one cudaMalloc (governed runs
 * only); returns the pointer to free. The whole charge, runtime included,
 * is what the ceiling holds; a grant this close to it reads the runtime
 * fresh first, so a first try that the runtime's growth refuses (a refusal
 * reads it too) is made again with the runtime known. */
static void *fill_to(uint64_t room)
{
	void *d = NULL;
	if (!rl_governed())
		return NULL;
	rl_note_overhead(used());
	if (cudaMalloc(&d, RL_LIMIT - rl_gg().used - room) != cudaSuccess) {
		(void)cudaGetLastError();
		CUDA_OK(cudaMalloc(&d, RL_LIMIT - rl_gg().used - room));
	}
	return d;
}

TEST(runtime_starts)
{
	CUDA_OK(cudaSetDevice(0));
	CUDA_OK(cudaFree(0));
	base_used = used();
}

TEST(cublas_create_and_destroy)
{
	cublasHandle_t h = NULL;
	CHECK_EQ_INT(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
	int v = 0;
	CHECK_EQ_INT(cublasGetVersion(h, &v), CUBLAS_STATUS_SUCCESS);
	CHECK(v >= 130000);
	/* its workspace and scratch are charged */
	if (rl_governed())
		CHECK(used() > base_used);
	CHECK_EQ_INT(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
	CHECK_EQ_U64(used(), base_used);
}

TEST(cublas_refused_at_the_ceiling)
{
	if (!rl_governed())
		SKIP("needs the preload");
	void *hog = fill_to(512 * 1024); /* less than cuBLAS's first buffers */
	cublasHandle_t h = NULL;
	cublasStatus_t st = cublasCreate(&h);
	CHECK_CEILING_HELD();
	/* cuBLAS's own out-of-memory status, not a crash or an internal error */
	CHECK_EQ_INT(st, CUBLAS_STATUS_ALLOC_FAILED);
	if (st == CUBLAS_STATUS_SUCCESS)
		cublasDestroy(h);
	CUDA_OK(cudaFree(hog));
	/* and the process carries on */
	CHECK_EQ_INT(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
	CHECK_EQ_INT(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
	CHECK_EQ_U64(used(), base_used);
}

TEST(cublaslt_init)
{
	cublasLtHandle_t lt = NULL;
	CHECK_EQ_INT(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
	CHECK(cublasLtGetVersion() >= 130000);
	CHECK_EQ_INT(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS);
	CHECK_EQ_U64(used(), base_used);
}

TEST(nccl_init_all_then_destroy)
{
	uint64_t untracked = rl_gg().untracked_frees;
	ncclComm_t comm = NULL;
	int devs[1] = {0};
	CHECK_EQ_INT(ncclCommInitAll(&comm, 1, devs), ncclSuccess);
	if (!comm)
		return;
	int n = 0, dev = -1;
	CHECK_EQ_INT(ncclCommCount(comm, &n), ncclSuccess);
	CHECK_EQ_INT(n, 1);
	CHECK_EQ_INT(ncclCommCuDevice(comm, &dev), ncclSuccess);
	CHECK_EQ_INT(dev, 0);
	if (rl_governed())
		CHECK(used() > base_used);
	CHECK_CEILING_HELD();
	CHECK_EQ_INT(ncclCommDestroy(comm), ncclSuccess);
	/* NCCL frees its VMM buffers its own way: nothing left charged, and
	 * every one of its frees was a tracked one */
	CHECK_EQ_U64(used(), base_used);
	CHECK_EQ_U64(rl_gg().untracked_frees, untracked);
	CHECK_EQ_U64(rl_gg().live_bytes, 0);
}

TEST(nccl_refused_at_the_ceiling)
{
	if (!rl_governed())
		SKIP("needs the preload");
	void *hog = fill_to(16 * MIB);
	ncclComm_t comm = NULL;
	int devs[1] = {0};
	ncclResult_t r = ncclCommInitAll(&comm, 1, devs);
	CHECK_CEILING_HELD();
	/* a clean error (NCCL reports a CUDA failure), never success past the
	 * ceiling and never a crash */
	CHECK(r != ncclSuccess);
	if (r == ncclSuccess)
		ncclCommDestroy(comm);
	CUDA_OK(cudaFree(hog));
	/* NCCL keeps what it took before the refusal (a failed init frees
	 * nothing): the books still say exactly what the card holds */
	uint64_t kept = used() - base_used;
	if (rl_sim_used() != UINT64_MAX)
		CHECK_EQ_U64(rl_sim_used(), used() + rl_overhead);
	CHECK(kept < 64 * MIB);
	comm = NULL;
	CHECK_EQ_INT(ncclCommInitAll(&comm, 1, devs), ncclSuccess);
	if (comm)
		CHECK_EQ_INT(ncclCommDestroy(comm), ncclSuccess);
	CHECK_EQ_U64(used(), base_used + kept);
	base_used += kept; /* for books_end_exact */
}

TEST(books_end_exact)
{
	struct gpuguard_device_stats s = rl_gg();
	s.used -= rl_runtime(); /* the books */
	CHECK_EQ_U64(s.used, base_used);
	CHECK_EQ_U64(s.live_bytes, base_used);
	CHECK_EQ_U64(s.untracked_frees, 0);
	if (rl_governed())
		CHECK(s.peak <= RL_LIMIT);
	/* the books and the card agree */
	if (rl_governed() && rl_sim_used() != UINT64_MAX)
		CHECK_EQ_U64(rl_sim_used(), s.used + rl_overhead);
}

int main(void)
{
	printf("# cuBLAS, cuBLASLt, NCCL %s\n", rl_governed() ? "under gpuguard" : "on the bare simulator");
	RUN(runtime_starts);
	RUN(cublas_create_and_destroy);
	RUN(cublas_refused_at_the_ceiling);
	RUN(cublaslt_init);
	RUN(nccl_init_all_then_destroy);
	RUN(nccl_refused_at_the_ceiling);
	RUN(books_end_exact);
	return harness_done();
}
