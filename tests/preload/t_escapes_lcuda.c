/* gpuguard: ceiling escapes at the edges of the hook tables (issue 25,
 * items 2, 3 and 5): another device's default or current pool used from
 * this device's stream, a graph instantiated through the CUDA 11 names, and
 * a pool's reserve overshooting the ceiling under churn. Two 16 GiB
 * simulated cards, GPUGUARD_LIMIT='0=8Gi,1=1Gi' (see .env). */
#include "common.h"

#include <pthread.h>

#include "cuda_start.h"
#include "gpuguard/cuda_abi.h"

static gg_CUcontext ctx0, ctx1;

static void setup(void)
{
	cuda_start(&ctx0, &ctx1);
}

/* What the simulated card holds in pages on dev. */
static unsigned long long sim_held(int dev)
{
	return sim_held_by("cuda", dev);
}

/* Item 2 (pool_cases.h), through the driver. */
#define POOL_CASES_CUDA
#include "pool_cases.h"

TEST(another_devices_default_pool_is_charged_to_that_device)
{
	other_devices_pool(0);
}

TEST(another_devices_current_pool_is_charged_to_that_device)
{
	other_devices_pool(1);
}

/* Item 3: a graph of one 1,536 MiB allocation node on device 1 (1 GiB),
 * instantiated every way there is, then launched: refused before the
 * driver runs it, whatever the instantiate. The old library had no row
 * for cuGraphInstantiate, its _v2, WithParams or cuGraphAddNode: the exec's
 * needs were unknown and the launch took 1,536 MiB under 1 GiB. */
enum how { LEGACY, V2, GPA_11000, GPA_12000, WITH_PARAMS, ADD_NODE };

typedef gg_CUresult (*instantiate_fn)(gg_CUgraphExec *, gg_CUgraph, gg_CUgraphNode *, char *, size_t);

static void graph_node_launch_is_refused(enum how how)
{
	gg_CUstream s1 = NULL;
	gg_CUgraph g = NULL;
	gg_CUgraphExec e = NULL;
	gg_CUgraphNode n = NULL;
	CHECK_EQ_INT(cuCtxSetCurrent(ctx1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamCreate(&s1, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphCreate(&g, 0), GG_CUDA_SUCCESS);
	gg_CUDA_MEM_ALLOC_NODE_PARAMS p = {.poolProps = {.allocType = GG_CU_MEM_ALLOCATION_TYPE_PINNED,
	                                                 .location = {.type = GG_CU_MEM_LOCATION_TYPE_DEVICE, .id = 1}},
	                                   .bytesize = 1536 * MIB};
	if (how == ADD_NODE) {
		gg_CUgraphNodeParams np = {.type = GG_CU_GRAPH_NODE_TYPE_MEM_ALLOC, .alloc = p};
		CHECK_EQ_INT(cuGraphAddNode_v2(&n, g, NULL, NULL, 0, &np), GG_CUDA_SUCCESS);
	} else {
		CHECK_EQ_INT(cuGraphAddMemAllocNode(&n, g, NULL, 0, &p), GG_CUDA_SUCCESS);
	}
	instantiate_fn f = NULL;
	gg_CUDA_GRAPH_INSTANTIATE_PARAMS ip = {0};
	switch (how) {
	case LEGACY:
		CHECK_EQ_INT(cuGraphInstantiate(&e, g, NULL, NULL, 0), GG_CUDA_SUCCESS);
		break;
	case V2:
		CHECK_EQ_INT(cuGraphInstantiate_v2(&e, g, NULL, NULL, 0), GG_CUDA_SUCCESS);
		break;
	case GPA_11000:
	case GPA_12000:
		CHECK_EQ_INT(
		    cuGetProcAddress_v2("cuGraphInstantiate", (void **)&f, how == GPA_11000 ? 11000 : 12000, 0, NULL),
		    GG_CUDA_SUCCESS);
		CHECK(f != NULL && f(&e, g, NULL, NULL, 0) == GG_CUDA_SUCCESS);
		break;
	case WITH_PARAMS:
		CHECK_EQ_INT(cuGraphInstantiateWithParams(&e, g, &ip), GG_CUDA_SUCCESS);
		break;
	case ADD_NODE:
		CHECK_EQ_INT(cuGraphInstantiateWithFlags(&e, g, 0), GG_CUDA_SUCCESS);
		break;
	}
	CHECK_EQ_INT(cuGraphLaunch(e, s1), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK(sim_held(1) <= 1 * GIB);
	CHECK(gg_stats(1).used <= 1 * GIB);
	CHECK_EQ_INT(cuGraphExecDestroy(e), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphDestroy(g), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuDeviceGraphMemTrim(1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamDestroy(s1), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(1).used, 0);
	CHECK_EQ_INT(cuCtxSetCurrent(ctx0), GG_CUDA_SUCCESS);
}

TEST(graph_instantiate_legacy_launch_is_refused)
{
	graph_node_launch_is_refused(LEGACY);
}

TEST(graph_instantiate_v2_launch_is_refused)
{
	graph_node_launch_is_refused(V2);
}

TEST(graph_instantiate_by_proc_address_11000_launch_is_refused)
{
	graph_node_launch_is_refused(GPA_11000);
}

TEST(graph_instantiate_by_proc_address_12000_launch_is_refused)
{
	graph_node_launch_is_refused(GPA_12000);
}

TEST(graph_instantiate_with_params_launch_is_refused)
{
	graph_node_launch_is_refused(WITH_PARAMS);
}

TEST(graph_add_node_alloc_launch_is_refused)
{
	graph_node_launch_is_refused(ADD_NODE);
}

/* Capture into the caller's own graph (cuStreamBeginCaptureToGraph): the
 * allocation is captured, not made, and the launch is refused. The old
 * library did not know the stream was capturing. */
TEST(capture_to_graph_alloc_is_captured_and_its_launch_refused)
{
	gg_CUstream s1 = NULL;
	gg_CUgraph g = NULL, got = NULL;
	gg_CUgraphExec e = NULL;
	gg_CUdeviceptr d = 0;
	CHECK_EQ_INT(cuCtxSetCurrent(ctx1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamCreate(&s1, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphCreate(&g, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamBeginCaptureToGraph(s1, g, NULL, NULL, 0, GG_CU_STREAM_CAPTURE_MODE_GLOBAL),
	             GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuMemAllocAsync(&d, 1536 * MIB, s1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamEndCapture(s1, &got), GG_CUDA_SUCCESS);
	CHECK(got == g);
	CHECK_EQ_U64(gg_stats(1).used, 0);
	CHECK_EQ_INT(cuGraphInstantiateWithFlags(&e, g, 0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphLaunch(e, s1), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK(sim_held(1) <= 1 * GIB);
	CHECK_EQ_INT(cuGraphExecDestroy(e), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuGraphDestroy(g), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuDeviceGraphMemTrim(1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamDestroy(s1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxSetCurrent(ctx0), GG_CUDA_SUCCESS);
}

/* Item 5: a fragmented warm reserve at the ceiling. Five 200 MiB blocks
 * on device 1 (1 GiB) fill its pool to 1,000 MiB; three are freed, so the
 * free reserve (600 MiB) adds up to a 300 MiB request that no free extent
 * can hold. The driver grows the pool to 1,300 MiB, past the ceiling, and
 * gpuguard hands the growth back and refuses. The card held it all the
 * same: the old library reported pool_overshoot 0 and a peak of 1,000 MiB. */
TEST(fragmented_reserve_overshoot_is_counted)
{
	gg_CUstream s1 = NULL;
	gg_CUdeviceptr b[5] = {0}, big = 0;
	CHECK_EQ_INT(cuCtxSetCurrent(ctx1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamCreate(&s1, 0), GG_CUDA_SUCCESS);
	uint64_t over0 = gg_stats(1).pool_overshoot;
	for (int i = 0; i < 5; i++)
		CHECK_EQ_INT(cuMemAllocAsync(&b[i], 200 * MIB, s1), GG_CUDA_SUCCESS);
	for (int i = 0; i < 5; i += 2)
		CHECK_EQ_INT(cuMemFreeAsync(b[i], s1), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(sim_held(1), 1000 * MIB);
	CHECK_EQ_INT(cuMemAllocAsync(&big, 300 * MIB, s1), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK(sim_held(1) <= 1 * GIB); /* handed back */
	struct gpuguard_device_stats st = gg_stats(1);
	/* 1,300 MiB held for a moment under 1,024: 276 MiB past the ceiling */
	CHECK_EQ_U64(st.pool_overshoot - over0, 276 * MIB);
	CHECK(st.peak >= 1300 * MIB);
	CHECK(st.used <= 1 * GIB);
	for (int i = 1; i < 5; i += 2)
		CHECK_EQ_INT(cuMemFreeAsync(b[i], s1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuStreamSynchronize(s1), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(sim_held(1), 0);
	CHECK_EQ_U64(gg_stats(1).used, 0);
	CHECK_EQ_INT(cuStreamDestroy(s1), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(cuCtxSetCurrent(ctx0), GG_CUDA_SUCCESS);
}

/* Item 4: runs of one size through cuMemAlloc_v2 on device 1 (1 GiB)
 * until refused. The books must hold what the card holds (less than one
 * page short: the last page is partly filled), and the card no more than
 * the ceiling. The old rule charged anything up to 1 MiB
 * at 512-byte granularity, as if blocks packed perfectly: 700 KiB blocks,
 * two to a 2 MiB page, were granted 1,497 times, the card holding 1,498 MiB
 * for 1,023 on the books. */
static void run_of(uint64_t size)
{
	enum { MAX = 300000 };
	static gg_CUdeviceptr p[MAX];
	int n = 0;
	CHECK_EQ_INT(cuCtxSetCurrent(ctx1), GG_CUDA_SUCCESS);
	/* the books: used less the runtime category (on by default: the
	 * card's partly filled pages as NVML shows them, and the headroom) */
	uint64_t used0 = gg_stats(1).used - gg_runtime(1), held0 = sim_held(1);
	while (n < MAX && cuMemAlloc_v2(&p[n], size) == GG_CUDA_SUCCESS)
		n++;
	uint64_t books = gg_stats(1).used - gg_runtime(1) - used0, card = sim_held(1) - held0;
	printf("%llu-byte blocks: %d granted, books %llu MiB, card %llu MiB\n", (unsigned long long)size, n,
	       (unsigned long long)(books / MIB), (unsigned long long)(card / MIB));
	CHECK(n > 0 && n < MAX);
	CHECK(card <= 1 * GIB);
	/* a per-block share leaves the last, partly filled page short by less
	 * than a page; nothing more */
	CHECK(books + 2 * MIB > card);
	for (int i = 0; i < n; i++)
		CHECK_EQ_INT(cuMemFree_v2(p[i]), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(1).used - gg_runtime(1), used0);
	CHECK_EQ_U64(sim_held(1), held0);
	CHECK_EQ_INT(cuCtxSetCurrent(ctx0), GG_CUDA_SUCCESS);
}

TEST(small_blocks_cost_what_the_card_holds)
{
	run_of(4 * 1024);
	run_of(64 * 1024);
	run_of(600 * 1024);
	run_of(700 * 1024);
	run_of(1 * MIB);
	run_of(1536 * 1024);
}

int main(int argc, char **argv)
{
	setup();
	RUN_ONE(another_devices_default_pool_is_charged_to_that_device);
	RUN_ONE(another_devices_current_pool_is_charged_to_that_device);
	RUN_ONE(graph_instantiate_legacy_launch_is_refused);
	RUN_ONE(graph_instantiate_v2_launch_is_refused);
	RUN_ONE(graph_instantiate_by_proc_address_11000_launch_is_refused);
	RUN_ONE(graph_instantiate_by_proc_address_12000_launch_is_refused);
	RUN_ONE(graph_instantiate_with_params_launch_is_refused);
	RUN_ONE(graph_add_node_alloc_launch_is_refused);
	RUN_ONE(capture_to_graph_alloc_is_captured_and_its_launch_refused);
	RUN_ONE(fragmented_reserve_overshoot_is_counted);
	RUN_ONE(small_blocks_cost_what_the_card_holds);
	return harness_done();
}
