/* gpuguard: a plugin dlopened with RTLD_DEEPBIND (issue 10, finding 10)
 * binds its own imports first: its cuMemAlloc_v2 went straight to libcuda
 * and its dlsym straight to libc, past the ceiling. After the host's dlsym of
 * the plugin's entry points, both go through us, eagerly and lazily bound.
 * GPUGUARD_LIMIT=1Gi (see .env). */
#include "common.h"
#include "gpuguard/cuda_abi.h"

typedef int (*setup_fn)(void);
typedef int (*alloc_fn)(gg_CUdeviceptr *, size_t);
typedef int (*free_fn)(gg_CUdeviceptr);

static void one_load(int mode)
{
	/* The sanitizers refuse RTLD_DEEPBIND outright (they end the
	 * process), so under them there is nothing to test. */
	if (dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__tsan_init"))
		SKIP("the sanitizer runtime refuses RTLD_DEEPBIND");
	void *h = dlopen("libdeepplugin.so", mode | RTLD_DEEPBIND);
	CHECK(h != NULL);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return;
	}
	setup_fn setup = (setup_fn)dlsym(h, "plugin_setup");
	alloc_fn direct = (alloc_fn)dlsym(h, "plugin_direct_alloc");
	alloc_fn via_dlsym = (alloc_fn)dlsym(h, "plugin_dlsym_alloc");
	free_fn release = (free_fn)dlsym(h, "plugin_free");
	CHECK(setup && direct && via_dlsym && release);
	if (!(setup && direct && via_dlsym && release))
		return;
	CHECK_EQ_INT(setup(), 0);
	uint64_t base = gg_stats(0).used;
	gg_CUdeviceptr a = 0, b = 0, c = 0;
	/* charged, both ways */
	CHECK_EQ_INT(direct(&a, 64 * MIB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, base + 64 * MIB);
	CHECK_EQ_INT(via_dlsym(&b, 64 * MIB), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, base + 128 * MIB);
	/* and held to the ceiling */
	CHECK_EQ_INT(direct(&c, 1 * GIB), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(via_dlsym(&c, 1 * GIB), GG_CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ_INT(release(a), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(release(b), GG_CUDA_SUCCESS);
	CHECK_EQ_U64(gg_stats(0).used, base);
	CHECK_EQ_U64(gg_stats(0).untracked_frees, 0);
	dlclose(h);
}

TEST(deepbind_plugin_bound_now)
{
	one_load(RTLD_NOW);
}

TEST(deepbind_plugin_bound_lazily)
{
	one_load(RTLD_LAZY);
}

int main(void)
{
	RUN(deepbind_plugin_bound_now);
	RUN(deepbind_plugin_bound_lazily);
	return harness_done();
}
