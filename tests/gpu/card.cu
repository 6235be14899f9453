/* gpuguard on a real card (issue 22): the device memory the card holds for a
 * process beyond its allocation calls, and the ballast that leaves the
 * three-pod check (tests/gpu/pods.sh) a card of the size it asks for. Runs
 * bare (no preload): these are the card's own figures. Host code only.
 *   card overhead      each stage's cost: bare context, cudart init, cublasCreate
 *                      + a GEMM, a one-rank NCCL init, the stack limit 1K -> 4K
 *                      -> 16K against the formula, and NVML v1 against v2
 *   card ctx           a bare context's cost: "ctx BYTES free BYTES total BYTES"
 *   card ballast BYTES takes BYTES after its context, prints "holding BYTES
 *                      free BYTES", holds them until stdin closes
 * Figures are measurements, never judged here: only a call that fails or a
 * figure that cannot be had makes the GGRESULT line FAIL. */
#define GG_ABI_NO_PROTOTYPES
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The header is C11; its layout checks read as C++'s in this file. */
#define _Static_assert static_assert
#include "gpuguard/nvml_abi.h"
#undef _Static_assert

#define MIB (1024ull * 1024ull)
#define MAXP 256

static struct {
	gg_pfn_nvmlDeviceGetMemoryInfo v1;
	gg_pfn_nvmlDeviceGetMemoryInfo_v2 v2;
	gg_pfn_nvmlDeviceGetComputeRunningProcesses_v3 procs;
	gg_nvmlDevice_t dev;
	int ok;
	unsigned self; /* this process's PID as NVML lists it; 0 = not found */
} g_nv;

struct snap {
	int ok;                /* v1 read */
	gg_nvmlMemory_t m1;    /* card, v1 */
	gg_nvmlMemory_v2_t m2; /* card, v2 (m2_ok) */
	int m2_ok;
	unsigned n; /* processes listed (procs_ok) */
	int procs_ok;
	gg_nvmlProcessInfo_t p[MAXP];
	size_t mem_free; /* cuMemGetInfo, where a context is current */
	int mem_ok;
};

static int failures;

/* An empty kernel, as PTX the driver compiles for the card: a launch after
 * cuCtxSetLimit, where the driver grows local memory at the launch rather
 * than at the call. */
static const char empty_ptx[] = ".version 7.0\n.target sm_52\n.address_size 64\n"
                                ".visible .entry gg_empty()\n{\n\tret;\n}\n";

static void fail(const char *what, int code)
{
	printf("GGFAIL card: %s (%d)\n", what, code);
	failures++;
}

/* NVML through dlopen, as a tool would find it; the device by UUID, so
 * CUDA_VISIBLE_DEVICES cannot make NVML read another card. */
static void nvml_open(CUdevice d)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("GGINFO card: no libnvidia-ml.so.1: %s\n", dlerror());
		return;
	}
	gg_pfn_nvmlInit_v2 init = (gg_pfn_nvmlInit_v2)dlsym(h, "nvmlInit_v2");
	gg_pfn_nvmlDeviceGetHandleByUUID by_uuid =
	    (gg_pfn_nvmlDeviceGetHandleByUUID)dlsym(h, "nvmlDeviceGetHandleByUUID");
	gg_pfn_nvmlDeviceGetHandleByIndex_v2 by_index =
	    (gg_pfn_nvmlDeviceGetHandleByIndex_v2)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	g_nv.v1 = (gg_pfn_nvmlDeviceGetMemoryInfo)dlsym(h, "nvmlDeviceGetMemoryInfo");
	g_nv.v2 = (gg_pfn_nvmlDeviceGetMemoryInfo_v2)dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
	g_nv.procs =
	    (gg_pfn_nvmlDeviceGetComputeRunningProcesses_v3)dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
	if (!init || !g_nv.v1 || init() != GG_NVML_SUCCESS) {
		printf("GGINFO card: NVML does not start\n");
		return;
	}
	CUuuid u;
	char s[64];
	if (cuDeviceGetUuid(&u, d) == CUDA_SUCCESS) {
		const unsigned char *b = (const unsigned char *)u.bytes;
		snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
		         b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
		         b[15]);
		if (by_uuid && by_uuid(s, &g_nv.dev) == GG_NVML_SUCCESS) {
			g_nv.ok = 1;
			return;
		}
	}
	if (by_index && by_index(0, &g_nv.dev) == GG_NVML_SUCCESS) {
		printf("GGINFO card: NVML does not know CUDA device 0's UUID; reading NVML device 0\n");
		g_nv.ok = 1;
	}
}

static void take(struct snap *s, int with_ctx)
{
	memset(s, 0, sizeof *s);
	if (g_nv.ok) {
		s->ok = g_nv.v1(g_nv.dev, &s->m1) == GG_NVML_SUCCESS;
		s->m2.version = GG_nvmlMemory_v2;
		s->m2_ok = g_nv.v2 && g_nv.v2(g_nv.dev, &s->m2) == GG_NVML_SUCCESS;
		s->n = MAXP;
		s->procs_ok = g_nv.procs && g_nv.procs(g_nv.dev, &s->n, s->p) == GG_NVML_SUCCESS;
	}
	size_t fr = 0, tot = 0;
	if (with_ctx)
		s->mem_ok = cuMemGetInfo(&fr, &tot) == CUDA_SUCCESS;
	s->mem_free = fr;
}

static int listed(const struct snap *s, unsigned pid)
{
	for (unsigned i = 0; s->procs_ok && i < s->n; i++)
		if (s->p[i].pid == pid)
			return (int)i;
	return -1;
}

/* Our NVML PID: getpid() where NVML lists it, else the one PID that the
 * context made appear (a container's PID namespace: NVML's are the host's). */
static void find_self(const struct snap *before, const struct snap *after)
{
	if (listed(after, (unsigned)getpid()) >= 0) {
		g_nv.self = (unsigned)getpid();
		return;
	}
	unsigned found = 0, n = 0;
	for (unsigned i = 0; after->procs_ok && i < after->n; i++)
		if (listed(before, after->p[i].pid) < 0) {
			found = after->p[i].pid;
			n++;
		}
	if (n == 1) {
		g_nv.self = found;
		printf("GGINFO card: NVML lists this process as pid %u (getpid %d: a PID namespace)\n", found,
		       (int)getpid());
	} else {
		printf("GGINFO card: this process is not in NVML's list (%u new entries)\n", n);
	}
}

static long long self_used(const struct snap *s)
{
	int i = g_nv.self ? listed(s, g_nv.self) : -1;
	return i < 0 ? -1 : (long long)s->p[i].usedGpuMemory;
}

/* One stage's cost: NVML's figure for this process, the card's used (NVML
 * v1), and cuMemGetInfo's free, each as the difference across the stage. */
static void cost(const char *stage, const struct snap *a, const struct snap *b)
{
	char nvml[32] = "-", card[32] = "-", mem[32] = "-";
	long long ua = self_used(a), ub = self_used(b);
	if (ub >= 0)
		snprintf(nvml, sizeof nvml, "%lld", ub - (ua < 0 ? 0 : ua));
	if (a->ok && b->ok)
		snprintf(card, sizeof card, "%lld", (long long)b->m1.used - (long long)a->m1.used);
	if (a->mem_ok && b->mem_ok)
		snprintf(mem, sizeof mem, "%lld", (long long)a->mem_free - (long long)b->mem_free);
	printf("GGCOST stage=%s nvml=%s card=%s meminfo=%s\n", stage, nvml, card, mem);
	if (!strcmp(card, "-") && !strcmp(mem, "-"))
		fail("no figure for a stage", 0);
}

#define CU(call)                               \
	do {                                   \
		CUresult rc_ = (call);         \
		if (rc_ != CUDA_SUCCESS) {     \
			fail(#call, (int)rc_); \
			return 1;              \
		}                              \
	} while (0)

static int context(CUdevice *d, CUcontext *ctx, struct snap *before, struct snap *after)
{
	CU(cuInit(0));
	CU(cuDeviceGet(d, 0));
	nvml_open(*d);
	take(before, 0);
	CU(cuDevicePrimaryCtxRetain(ctx, *d));
	CU(cuCtxSetCurrent(*ctx));
	CU(cuCtxSynchronize());
	take(after, 1);
	find_self(before, after);
	return 0;
}

static void nvml_versions(const struct snap *s)
{
	if (!s->ok || !s->m2_ok) {
		printf("GGNVML v1=%s v2=%s\n", s->ok ? "yes" : "no", s->m2_ok ? "yes" : "no");
		return;
	}
	/* v1's used is total - free (what the driver reserves included). v2's
	 * used includes reserved when it equals v1's; it leaves it out when it
	 * is v1's less reserved. Read in one call each, a moment apart: a
	 * neighbour's allocation in between shows as "unclear". */
	const char *inc = "unclear";
	if (s->m2.reserved == 0)
		inc = "unclear (reserved is 0)";
	else if (s->m2.used == s->m1.used)
		inc = "yes";
	else if (s->m2.used + s->m2.reserved == s->m1.used)
		inc = "no";
	printf("GGNVML v1_total=%llu v1_free=%llu v1_used=%llu v2_total=%llu v2_reserved=%llu v2_free=%llu "
	       "v2_used=%llu v2_used_includes_reserved=%s\n",
	       s->m1.total, s->m1.free, s->m1.used, s->m2.total, s->m2.reserved, s->m2.free, s->m2.used, inc);
}

static int overhead(void)
{
	CUdevice d;
	CUcontext ctx;
	struct snap *a = (struct snap *)calloc(1, sizeof *a), *b = (struct snap *)calloc(1, sizeof *b);
	if (!a || !b)
		return 1;
	const char *mode = getenv("CUDA_MODULE_LOADING");
	if (context(&d, &ctx, a, b))
		return 1;
	CUmoduleLoadingMode lm;
	if (cuModuleGetLoadingMode(&lm) == CUDA_SUCCESS)
		printf("GGINFO card: CUDA_MODULE_LOADING=%s, the driver says %s\n", mode ? mode : "(unset)",
		       lm == CU_MODULE_LAZY_LOADING ? "LAZY" : "EAGER");
	nvml_versions(a);
	cost("context", a, b);

	/* cudart's init: its own modules, in the context it shares */
	*a = *b;
	if (cudaSetDevice(0) != cudaSuccess || cudaFree(0) != cudaSuccess) {
		fail("cudart init", 0);
		return 1;
	}
	take(b, 1);
	cost("cudart", a, b);

	/* cublasCreate and one GEMM; the operands are taken before */
	const int n = 1024;
	float *x = NULL, *y = NULL, *z = NULL;
	if (cudaMalloc(&x, n * n * 4) || cudaMalloc(&y, n * n * 4) || cudaMalloc(&z, n * n * 4)) {
		fail("cudaMalloc of the GEMM's operands", 0);
		return 1;
	}
	cudaMemset(x, 0, n * n * 4);
	cudaMemset(y, 0, n * n * 4);
	cudaDeviceSynchronize();
	take(a, 1);
	cublasHandle_t h;
	const float one = 1, zero = 0;
	/* The simulator (it exports its test hooks) runs no cuBLAS kernel: its
	 * GEMM's heuristics crash in cuBLASLt, so there only the create is
	 * measured (tests/scripts/gpu_selftest.sh). */
	int sim = dlsym(RTLD_DEFAULT, "simgpu_cuda_func_set_footprint") != NULL;
	if (sim)
		printf("GGINFO card: the simulator: cublasCreate without the GEMM\n");
	if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS ||
	    (!sim && cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, x, n, y, n, &zero, z, n) !=
	                 CUBLAS_STATUS_SUCCESS) ||
	    cudaDeviceSynchronize() != cudaSuccess) {
		fail("cublasCreate + cublasSgemm", 0);
		return 1;
	}
	take(b, 1);
	cost("cublas_gemm", a, b);

	/* a one-rank NCCL communicator */
	*a = *b;
	ncclComm_t comm;
	int dev = 0;
	ncclResult_t nr = ncclCommInitAll(&comm, 1, &dev);
	if (nr != ncclSuccess) {
		printf("GGINFO card: ncclCommInitAll: %s\n", ncclGetErrorString(nr));
		fail("ncclCommInitAll", (int)nr);
	} else {
		cudaDeviceSynchronize();
		take(b, 1);
		cost("nccl_init", a, b);
	}

	/* local memory: stack per thread (rounded up to 16 bytes) x threads per
	 * SM x SMs, the formula footprint.c and the simulator use */
	int tpsm = 0, sms = 0;
	CU(cuDeviceGetAttribute(&tpsm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, d));
	CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d));
	CUmodule mod;
	CUfunction fn;
	CU(cuModuleLoadData(&mod, empty_ptx));
	CU(cuModuleGetFunction(&fn, mod, "gg_empty"));
	CU(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL)); /* loaded, lazily or not */
	CU(cuCtxSynchronize());
	size_t cur = 0;
	CU(cuCtxGetLimit(&cur, CU_LIMIT_STACK_SIZE));
	printf("GGINFO card: %d SMs, %d threads per SM, stack %zu bytes a thread at start\n", sms, tpsm, cur);
	if (cur != 1024) {
		CU(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024));
		CU(cuCtxGetLimit(&cur, CU_LIMIT_STACK_SIZE));
	}
	struct snap *c = (struct snap *)calloc(1, sizeof *c);
	if (!c)
		return 1;
	const size_t to[] = {4096, 16384};
	for (int i = 0; i < 2; i++) {
		take(a, 1);
		CU(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, to[i]));
		size_t now = 0;
		CU(cuCtxGetLimit(&now, CU_LIMIT_STACK_SIZE));
		CU(cuCtxSynchronize());
		take(b, 1);
		CU(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
		CU(cuCtxSynchronize());
		take(c, 1);
		unsigned long long r0 = (cur + 15) / 16 * 16, r1 = (now + 15) / 16 * 16;
		unsigned long long formula =
		    r1 > r0 ? (r1 - r0) * (unsigned long long)tpsm * (unsigned long long)sms : 0;
		long long measured = (long long)a->mem_free - (long long)b->mem_free;
		long long launched = (long long)a->mem_free - (long long)c->mem_free;
		char ratio[32] = "-", ratio_l[32] = "-";
		if (formula) {
			snprintf(ratio, sizeof ratio, "%.3f", (double)measured / (double)formula);
			snprintf(ratio_l, sizeof ratio_l, "%.3f", (double)launched / (double)formula);
		}
		long long nv_self = self_used(b) >= 0 && self_used(a) >= 0 ? self_used(b) - self_used(a) : -1;
		/* measured: at the call; launched: after a launch too */
		printf("GGSTACK from=%zu to=%zu measured=%lld nvml=%lld formula=%llu ratio=%s launched=%lld "
		       "ratio_launched=%s\n",
		       cur, now, measured, nv_self, formula, ratio, launched, ratio_l);
		cur = now;
	}
	free(c);
	cuModuleUnload(mod);
	if (nr == ncclSuccess)
		ncclCommDestroy(comm);
	cublasDestroy(h);
	cudaFree(x);
	cudaFree(y);
	cudaFree(z);
	free(a);
	free(b);
	return failures != 0;
}

static int ctx_only(void)
{
	CUdevice d;
	CUcontext ctx;
	struct snap *a = (struct snap *)calloc(1, sizeof *a), *b = (struct snap *)calloc(1, sizeof *b);
	if (!a || !b || context(&d, &ctx, a, b))
		return 1;
	size_t fr = 0, tot = 0;
	CU(cuMemGetInfo(&fr, &tot));
	long long c = self_used(b);
	if (c < 0 && a->ok && b->ok)
		c = (long long)b->m1.used - (long long)a->m1.used;
	if (c <= 0) {
		fail("no figure for the context", 0);
		return 1;
	}
	printf("ctx %lld free %zu total %zu\n", c, fr, tot);
	return 0;
}

static int ballast(unsigned long long want)
{
	CUdevice d;
	CUcontext ctx;
	CU(cuInit(0));
	CU(cuDeviceGet(&d, 0));
	CU(cuDevicePrimaryCtxRetain(&ctx, d));
	CU(cuCtxSetCurrent(ctx));
	static CUdeviceptr p[4096];
	int np = 0;
	unsigned long long got = 0;
	while (got < want && np < 4096) {
		unsigned long long step = want - got > 1024 * MIB ? 1024 * MIB : want - got;
		CU(cuMemAlloc(&p[np], step));
		np++;
		got += step;
	}
	size_t fr = 0, tot = 0;
	CU(cuMemGetInfo(&fr, &tot));
	printf("holding %llu free %zu\n", got, fr);
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin))
		;
	for (int i = 0; i < np; i++)
		cuMemFree(p[i]);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *m = argc > 1 ? argv[1] : "";
	int rc;
	if (!strcmp(m, "overhead")) {
		rc = overhead();
		printf("GGRESULT program=overhead ceiling=n/a meminfo=n/a refusal=n/a working=n/a result=%s\n",
		       rc ? "FAIL" : "PASS");
		return rc;
	}
	if (!strcmp(m, "ctx"))
		return ctx_only();
	if (!strcmp(m, "ballast") && argc == 3) {
		char *end;
		unsigned long long v = strtoull(argv[2], &end, 10);
		if (*argv[2] && !*end)
			return ballast(v);
	}
	fprintf(stderr, "usage: card overhead | card ctx | card ballast BYTES\n");
	return 2;
}
