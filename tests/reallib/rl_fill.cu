/* gpuguard: one pod of the shared-card test (tests/scripts/shared_card.sh,
 * issue 22). Starts the way a workload does, then allocates until refused,
 * and says what it got:
 *   rl_fill driver   the driver API (cuMemAlloc_v2 through cudaGetDriverEntryPoint)
 *   rl_fill cudart   cudaMalloc
 *   rl_fill cublas   cublasCreate and a GEMM workspace, then cudaMalloc
 *   rl_fill nccl     a one-rank ncclCommInitAll, then cudaMalloc
 * 64 MiB steps, then 2 MiB ones, until the first refusal of each. Prints
 *   filled <bytes> err <code> ceiling_refusals <n> driver_refusals <n>
 * then, with "hold" as second argument, keeps its memory until stdin closes
 * or says "free" (frees all, prints "freed", then fills again). Host code
 * only; built -cudart shared and -cudart static. */
#include <cublas_v2.h>
#include <nccl.h>
#include <stdlib.h>
#include <unistd.h>

#include "rl.h"

#define MAXP 4096
static void *ptrs[MAXP];
static size_t nptr;

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
static alloc_fn drv_alloc;
static free_fn drv_free;

static int one(size_t bytes)
{
	if (nptr == MAXP)
		return -1;
	if (drv_alloc) {
		CUdeviceptr p = 0;
		CUresult rc = drv_alloc(&p, bytes);
		if (rc != CUDA_SUCCESS)
			return (int)rc;
		ptrs[nptr++] = (void *)(uintptr_t)p;
		return 0;
	}
	void *p = NULL;
	cudaError_t rc = cudaMalloc(&p, bytes);
	if (rc != cudaSuccess) {
		(void)cudaGetLastError();
		return (int)rc;
	}
	ptrs[nptr++] = p;
	return 0;
}

static void fill(void)
{
	uint64_t got = 0;
	int err = 0;
	for (size_t step = 64 * MIB; step >= 2 * MIB; step /= 32)
		while ((err = one(step)) == 0)
			got += step;
	struct gpuguard_device_stats s = rl_gg();
	printf("filled %llu err %d ceiling_refusals %llu driver_refusals %llu\n", (unsigned long long)got, err,
	       (unsigned long long)s.refused[GPUGUARD_REFUSED_CEILING],
	       (unsigned long long)s.refused[GPUGUARD_REFUSED_DRIVER]);
	fflush(stdout);
}

static void free_all(void)
{
	for (size_t i = 0; i < nptr; i++) {
		if (drv_free)
			drv_free((CUdeviceptr)(uintptr_t)ptrs[i]);
		else
			cudaFree(ptrs[i]);
	}
	nptr = 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "cudart";
	int hold = argc > 2 && !strcmp(argv[2], "hold");
	if (cudaSetDevice(0) != cudaSuccess || cudaFree(0) != cudaSuccess) {
		printf("start failed\n");
		return 1;
	}
	cublasHandle_t h = NULL;
	ncclComm_t comm = NULL;
	void *workspace = NULL;
	if (!strcmp(mode, "driver")) {
		cudaDriverEntryPointQueryResult q;
		if (cudaGetDriverEntryPoint("cuMemAlloc", (void **)&drv_alloc, cudaEnableDefault, &q) != cudaSuccess ||
		    cudaGetDriverEntryPoint("cuMemFree", (void **)&drv_free, cudaEnableDefault, &q) != cudaSuccess ||
		    !drv_alloc || !drv_free) {
			printf("no driver entry point\n");
			return 1;
		}
	} else if (!strcmp(mode, "cublas")) {
		if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS ||
		    cudaMalloc(&workspace, 32 * MIB) != cudaSuccess || /* a GEMM workspace */
		    cublasSetWorkspace(h, workspace, 32 * MIB) != CUBLAS_STATUS_SUCCESS) {
			printf("cublas start failed\n");
			return 1;
		}
	} else if (!strcmp(mode, "nccl")) {
		int dev = 0;
		if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess) {
			printf("nccl start failed\n");
			return 1;
		}
	} else if (strcmp(mode, "cudart")) {
		fprintf(stderr, "rl_fill: mode '%s' is not driver, cudart, cublas or nccl\n", mode);
		return 2;
	}
	printf("started %s\n", mode);
	fflush(stdout);
	fill();
	if (hold) {
		char line[64];
		while (fgets(line, sizeof line, stdin)) {
			if (!strncmp(line, "free", 4)) {
				free_all();
				printf("freed\n");
				fflush(stdout);
			} else if (!strncmp(line, "fill", 4)) {
				fill();
			}
		}
	}
	free_all();
	if (h) {
		cublasDestroy(h);
		cudaFree(workspace);
	}
	if (comm)
		ncclCommDestroy(comm);
	return 0;
}
