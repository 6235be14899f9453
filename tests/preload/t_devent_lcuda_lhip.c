/* gpuguard: the pod region's device entries (issue 9, finding 6). A device
 * is bound only once its runtime has accepted the ordinal, so cuMemCreate
 * and hipMemCreate naming devices that do not exist create no entry and
 * leave room for the real ones; and an entry is a card (its UUID), so CUDA
 * device 0 and HIP device 0 share a budget exactly when they are one card.
 * Each case runs in processes of this program re-executed (spawn_self). */
#include "common.h" /* first: it defines _GNU_SOURCE */

#include <stdatomic.h>
#include <stdio.h>
#include <sys/mman.h>

#include "gpuguard/cuda_abi.h"
#include "gpuguard/hip_abi.h"
#include "gpuguard/region.h"
#include "pod_region.h"

static char region_path[256];
static char region_env[300];
static const char *base_dir;

/* A region file of its own for each test, named to the workers. */
static void use_region(const char *name)
{
	snprintf(region_path, sizeof region_path, "%s/gg-%s.%d", base_dir, name, (int)getpid());
	unlink(region_path);
	snprintf(region_env, sizeof region_env, "GPUGUARD_SHARED=%s", region_path);
}

/* The region as the parent sees it (read-only mapping). */
static struct gpuguard_region_header *map_region(void)
{
	return map_region_at(region_path);
}

/* How many entries are bound, and how many of them have no UUID. */
static int count_entries(int *without_uuid)
{
	struct gpuguard_region_header *h = map_region();
	if (!h)
		return -1;
	int n = 0, ord = 0;
	for (unsigned i = 0; i < GPUGUARD_REGION_DEVICES; i++) {
		struct gpuguard_region_device *e = gpuguard_region_dev(h, i);
		if (atomic_load(&e->state) != GPUGUARD_RDEV_READY)
			continue;
		n++;
		ord += e->kind == GPUGUARD_RDEV_ORDINAL;
	}
	munmap(h, GPUGUARD_REGION_SIZE);
	*without_uuid = ord;
	return n;
}

static void use_context(int dev)
{
	gg_CUcontext ctx;
	if (cuInit(0) != GG_CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, dev) != GG_CUDA_SUCCESS ||
	    cuCtxSetCurrent(ctx) != GG_CUDA_SUCCESS)
		exit(3);
}

/* ---- workers ------------------------------------------------------------ */

/* cuMemCreate on ids 16..31 (two devices exist): the driver's own
 * INVALID_DEVICE, nothing charged; then device 1 joins the pod. */
static int bogus_cuda(void)
{
	use_context(0);
	for (int id = 16; id < 32; id++) {
		gg_CUmemAllocationProp p = {.type = GG_CU_MEM_ALLOCATION_TYPE_PINNED,
		                            .location = {.type = GG_CU_MEM_LOCATION_TYPE_DEVICE, .id = id}};
		gg_CUmemGenericAllocationHandle h = 0;
		CHECK_EQ_INT(cuMemCreate(&h, 2 * MIB, &p, 0), GG_CUDA_ERROR_INVALID_DEVICE);
	}
	CHECK_EQ_U64(gg_stats(0).used, 0);
	use_context(1);
	gg_CUdeviceptr d = 0;
	CHECK_EQ_INT(cuMemAlloc_v2(&d, 64 * MIB), GG_CUDA_SUCCESS);
	struct gpuguard_device_stats s = gg_stats(1);
	CHECK_EQ_U64(s.pod, 1);
	CHECK_EQ_U64(s.used, 64 * MIB);
	CHECK_EQ_INT(cuMemFree_v2(d), GG_CUDA_SUCCESS);
	return harness_cur_failed; /* no summary line: the parent counts */
}

/* The same through HIP alone (CUDA is linked, never initialised). */
static int bogus_hip(void)
{
	for (int id = 16; id < 32; id++) {
		/* libamdhip64.so.6 speaks the ROCm 6 layout (as in t_hip_lhip.c) */
		gg_hipMemAllocationProp_v6 hp = {.type = GG_hipMemAllocationTypePinned,
		                                 .location = {.type = GG_hipMemLocationTypeDevice, .id = id}};
		gg_hipMemGenericAllocationHandle_t hh = NULL;
		CHECK_EQ_INT(hipMemCreate(&hh, 2 * MIB, (const gg_hipMemAllocationProp *)(const void *)&hp, 0),
		             GG_hipErrorInvalidDevice);
	}
	CHECK_EQ_INT(hipSetDevice(1), GG_hipSuccess);
	void *p = NULL;
	CHECK_EQ_INT(hipMalloc(&p, 64 * MIB), GG_hipSuccess);
	struct gpuguard_device_stats s = gg_stats(1);
	CHECK_EQ_U64(s.pod, 1);
	CHECK_EQ_U64(s.used, 64 * MIB);
	CHECK_EQ_INT(hipFree(p), GG_hipSuccess);
	return harness_cur_failed;
}

/* Holds 3 GiB of CUDA device 0 while a second process asks HIP device 0
 * for 3 GiB (GG_T_HIP_CUINIT=1: that process has also initialised CUDA);
 * the second process's exit status is ours. */
static int cuda_holds(void)
{
	use_context(0);
	gg_CUdeviceptr d = 0;
	if (cuMemAlloc_v2(&d, 3 * GIB) != GG_CUDA_SUCCESS)
		return 4;
	char err[4096];
	int st = spawn_self("hip_asks", NULL, err, sizeof err);
	if (st != 0)
		fprintf(stderr, "hip_asks exited %d:\n%s", st, err);
	cuMemFree_v2(d);
	return st;
}

/* GG_T_EXPECT: "ok" (another card) or "oom" (the same card, its budget
 * already spent by the CUDA process). */
static int hip_asks(void)
{
	const char *cuinit = getenv("GG_T_HIP_CUINIT");
	if (cuinit && !strcmp(cuinit, "1") && cuInit(0) != GG_CUDA_SUCCESS)
		return 3;
	const char *want = getenv("GG_T_EXPECT");
	int expect = want && !strcmp(want, "oom") ? GG_hipErrorOutOfMemory : GG_hipSuccess;
	void *p = NULL;
	CHECK_EQ_INT(hipMalloc(&p, 3 * GIB), expect);
	CHECK_EQ_U64(gg_stats(0).pod, 1); /* in the pod, not on a ceiling of its own */
	if (p)
		hipFree(p);
	return harness_cur_failed;
}

/* One process, both runtimes, ordinal 0 (GG_T_HIP_FIRST=1: HIP first). Its
 * books are per ordinal, so both charge one budget; it must say so when
 * the two are different cards. */
static int mixed(void)
{
	const char *hf = getenv("GG_T_HIP_FIRST");
	int hip_first = hf && !strcmp(hf, "1");
	void *p = NULL;
	gg_CUdeviceptr d = 0;
	if (hip_first)
		CHECK_EQ_INT(hipMalloc(&p, 64 * MIB), GG_hipSuccess);
	use_context(0);
	CHECK_EQ_INT(cuMemAlloc_v2(&d, 64 * MIB), GG_CUDA_SUCCESS);
	if (!hip_first)
		CHECK_EQ_INT(hipMalloc(&p, 64 * MIB), GG_hipSuccess);
	CHECK_EQ_U64(gg_stats(0).process_used, 128 * MIB);
	cuMemFree_v2(d);
	hipFree(p);
	return harness_cur_failed;
}

/* ---- tests -------------------------------------------------------------- */

/* Runs worker `mode` on a fresh region; it must pass, without a "no room"
 * warning, and leave `entries` device entries, each named by a UUID. */
static void bogus_ids(const char *mode, int entries)
{
	use_region(mode);
	const char *env[] = {region_env, "GPUGUARD_LIMIT=4Gi", NULL};
	char err[8192];
	int st = spawn_self(mode, env, err, sizeof err);
	if (st != 0)
		fprintf(stderr, "%s", err);
	CHECK_EQ_INT(st, 0);
	CHECK(strstr(err, "no room") == NULL);
	int ord = -1;
	CHECK_EQ_INT(count_entries(&ord), entries);
	CHECK_EQ_INT(ord, 0);
	unlink(region_path);
}

TEST(invalid_ordinals_create_no_entries)
{
	bogus_ids("bogus_cuda", 2); /* CUDA devices 0 and 1 */
	bogus_ids("bogus_hip", 1);  /* HIP device 1 */
}

static void cuda_then_hip(const char *region, const char *same_cards, const char *cuinit, const char *expect)
{
	use_region(region);
	char e1[64], e2[64], e3[64];
	snprintf(e1, sizeof e1, "SIMGPU_SAME_CARDS=%s", same_cards);
	snprintf(e2, sizeof e2, "GG_T_HIP_CUINIT=%s", cuinit);
	snprintf(e3, sizeof e3, "GG_T_EXPECT=%s", expect);
	const char *env[] = {region_env, "GPUGUARD_LIMIT=4Gi", e1, e2, e3, NULL};
	char err[8192];
	int st = spawn_self("cuda_holds", env, err, sizeof err);
	if (st != 0)
		fprintf(stderr, "%s", err);
	CHECK_EQ_INT(st, 0);
	unlink(region_path);
}

/* Different UUIDs (the simulator's default): separate budgets, also when
 * the HIP process has the CUDA driver initialised beside it. */
TEST(cuda_and_hip_device_0_on_different_cards_have_separate_budgets)
{
	cuda_then_hip("devent-two-cards", "0", "1", "ok");
	cuda_then_hip("devent-two-cards-hip-only", "0", "0", "ok");
}

/* One UUID (HIP over the same card): one budget, also when the HIP process
 * never touched CUDA. */
TEST(one_card_seen_through_cuda_and_hip_has_one_budget)
{
	cuda_then_hip("devent-one-card", "1", "0", "oom");
	cuda_then_hip("devent-one-card-cuinit", "1", "1", "oom");
}

static void mixed_says(const char *same_cards, const char *hip_first, int warns)
{
	use_region("devent-mixed");
	char e1[64], e2[64];
	snprintf(e1, sizeof e1, "SIMGPU_SAME_CARDS=%s", same_cards);
	snprintf(e2, sizeof e2, "GG_T_HIP_FIRST=%s", hip_first);
	const char *env[] = {region_env, "GPUGUARD_LIMIT=4Gi", e1, e2, NULL};
	char err[8192];
	int st = spawn_self("mixed", env, err, sizeof err);
	if (st != 0)
		fprintf(stderr, "%s", err);
	CHECK_EQ_INT(st, 0);
	static const char said[] = "CUDA device 0 and HIP device 0 are different cards";
	const char *w = strstr(err, said);
	CHECK_EQ_INT(w != NULL, warns);
	if (w)
		CHECK(strstr(w + sizeof said - 1, said) == NULL); /* once */
	unlink(region_path);
}

TEST(a_process_using_both_runtimes_on_different_cards_is_told)
{
	mixed_says("0", "0", 1);
	mixed_says("0", "1", 1);
	mixed_says("1", "0", 0);
	mixed_says("1", "1", 0);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		harness_cur_name = argv[1]; /* a worker: its failures name it */
	if (argc > 1 && !strcmp(argv[1], "bogus_cuda"))
		return bogus_cuda();
	if (argc > 1 && !strcmp(argv[1], "bogus_hip"))
		return bogus_hip();
	if (argc > 1 && !strcmp(argv[1], "cuda_holds"))
		return cuda_holds();
	if (argc > 1 && !strcmp(argv[1], "hip_asks"))
		return hip_asks();
	if (argc > 1 && !strcmp(argv[1], "mixed"))
		return mixed();
	static char dir[256];
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s", tmp && *tmp ? tmp : "/tmp");
	base_dir = dir;
	RUN(invalid_ordinals_create_no_entries);
	RUN(cuda_and_hip_device_0_on_different_cards_have_separate_budgets);
	RUN(one_card_seen_through_cuda_and_hip_has_one_budget);
	RUN(a_process_using_both_runtimes_on_different_cards_is_told);
	return harness_done();
}
