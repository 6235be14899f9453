/* gpuguard: a driver loaded into a new link-map namespace (issue 25, item
 * 1). LD_PRELOAD reaches only the base namespace, so dlmopen(LM_ID_NEWLM,
 * "libcuda.so.1") gave a second copy of the driver whose entry points no
 * hook stood in front of: 8 GiB allocated under a 1 GiB ceiling. The
 * program links no driver; GPUGUARD_LIMIT=1Gi on a 16 GiB simulated card. */
#include "common.h"
#include "gpuguard/cuda_abi.h"

/* Under ASan or TSan the simulated driver is built with the sanitizer, so
 * dlmopen loads a second sanitizer runtime into the new namespace, which
 * ends the process ("runtime does not come first"): nothing to test there. */
#define NO_SANITIZER()                                                                        \
	do {                                                                                  \
		if (dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__tsan_init")) \
			SKIP("a sanitizer runtime cannot be loaded into a second namespace"); \
	} while (0)

typedef gg_CUresult (*init_fn)(unsigned);
typedef gg_CUresult (*dev_get_fn)(gg_CUdevice *, int);
typedef gg_CUresult (*retain_fn)(gg_CUcontext *, gg_CUdevice);
typedef gg_CUresult (*set_fn)(gg_CUcontext);
typedef gg_CUresult (*alloc_fn)(gg_CUdeviceptr *, size_t);
typedef gg_CUresult (*free_fn)(gg_CUdeviceptr);
typedef gg_CUresult (*gpa_fn)(const char *, void **, int, gg_cuuint64_t, gg_CUdriverProcAddressQueryResult *);

/* Allocates 1 GiB blocks through h's cuMemAlloc_v2 (or what its
 * cuGetProcAddress hands out) until refused or 8 granted, and frees them:
 * how many were granted (0 when the entry point is not handed out). */
static int granted_through(void *h, int by_gpa)
{
	init_fn init = (init_fn)dlsym(h, "cuInit");
	dev_get_fn get = (dev_get_fn)dlsym(h, "cuDeviceGet");
	set_fn set = (set_fn)dlsym(h, "cuCtxSetCurrent");
	retain_fn retain = (retain_fn)dlsym(h, "cuDevicePrimaryCtxRetain");
	gg_CUresult (*create)(gg_CUcontext *, unsigned, gg_CUdevice) =
	    (gg_CUresult(*)(gg_CUcontext *, unsigned, gg_CUdevice))dlsym(h, "cuCtxCreate_v2");
	alloc_fn alloc = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
	free_fn fr = (free_fn)dlsym(h, "cuMemFree_v2");
	if (by_gpa) {
		gpa_fn gpa = (gpa_fn)dlsym(h, "cuGetProcAddress_v2");
		alloc = NULL;
		if (gpa && gpa("cuMemAlloc", (void **)&alloc, 12000, 0, NULL) != GG_CUDA_SUCCESS)
			alloc = NULL;
	}
	/* what is not ours to govern stays the copy's own */
	CHECK(init && get && set);
	if (!init || !get || !set || !alloc)
		return 0;
	gg_CUdevice d;
	gg_CUcontext c = NULL;
	CHECK_EQ_INT(init(0), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(get(&d, 0), GG_CUDA_SUCCESS);
	if (retain)
		CHECK_EQ_INT(retain(&c, d), GG_CUDA_SUCCESS);
	else if (create)
		CHECK_EQ_INT(create(&c, 0, d), GG_CUDA_SUCCESS);
	CHECK_EQ_INT(set(c), GG_CUDA_SUCCESS);
	gg_CUdeviceptr p[8];
	int n = 0;
	while (n < 8 && alloc(&p[n], 1 * GIB - 64 * MIB) == GG_CUDA_SUCCESS)
		n++;
	for (int i = 0; fr && i < n; i++)
		fr(p[i]);
	return n;
}

/* The case: at most one block of 960 MiB fits under 1 GiB through
 * the handle (8 on the old library). Today the handle's governed entry
 * points are refused, so none is handed out at all. */
TEST(driver_in_a_new_namespace_is_not_an_escape)
{
	NO_SANITIZER();
	void *h = dlmopen(LM_ID_NEWLM, "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	if (!h)
		return;
	CHECK(granted_through(h, 0) <= 1);
	CHECK(granted_through(h, 1) <= 1);
	CHECK(dlsym(h, "cuMemAlloc_v2") == NULL);
	CHECK(dlsym(h, "cuMemCreate") == NULL);
	CHECK(dlsym(h, "cuGetProcAddress_v2") == NULL);
	CHECK(dlsym(h, "cuInit") != NULL);
	dlclose(h);
}

/* The refusal is said once, however many lookups it answers. */
TEST(the_refusal_is_said_once)
{
	NO_SANITIZER();
	char err[4096];
	CHECK_EQ_INT(spawn_self("lookups", NULL, err, sizeof(err)), 0);
	const char *first = strstr(err, "link-map namespace");
	CHECK(first != NULL);
	CHECK(first && strstr(first + 1, "link-map namespace") == NULL);
	CHECK(strstr(err, "dlmopen") != NULL);
}

/* A second copy beside the base namespace's driver leaves the base one
 * governed and working: 768 MiB through it, none through the copy. */
TEST(base_driver_beside_a_second_copy_is_governed)
{
	NO_SANITIZER();
	void *h0 = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	void *h1 = dlmopen(LM_ID_NEWLM, "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CHECK(h0 != NULL && h1 != NULL);
	if (!h0 || !h1)
		return;
	CHECK_EQ_INT(granted_through(h1, 0), 0);
	CHECK_EQ_INT(granted_through(h0, 0), 1);
	dlclose(h1);
	dlclose(h0);
}

/* A plugin loaded by dlmopen brings its own copy of the driver into the
 * new namespace, reached both by its own link (an import the loader binds
 * in that namespace) and by its own dlopen + dlsym. Neither may allocate
 * past the ceiling. */
TEST(plugin_in_a_new_namespace_is_not_an_escape)
{
	NO_SANITIZER();
	void *h = dlmopen(LM_ID_NEWLM, "libdeepplugin.so", RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	if (!h)
		return;
	int (*setup)(void) = (int (*)(void))dlsym(h, "plugin_setup");
	int (*direct)(gg_CUdeviceptr *, size_t) = (int (*)(gg_CUdeviceptr *, size_t))dlsym(h, "plugin_direct_alloc");
	int (*viadlsym)(gg_CUdeviceptr *, size_t) = (int (*)(gg_CUdeviceptr *, size_t))dlsym(h, "plugin_dlsym_alloc");
	CHECK(setup && direct && viadlsym);
	if (!setup || !direct || !viadlsym)
		return;
	setup(); /* may be refused: its context is made through a governed entry point */
	gg_CUdeviceptr p;
	int n = 0, m = 0;
	while (n < 8 && direct(&p, 1 * GIB - 64 * MIB) == 0)
		n++;
	while (m < 8 && viadlsym(&p, 1 * GIB - 64 * MIB) == 0)
		m++;
	CHECK(n <= 1);
	CHECK(m <= 1);
	CHECK(n + m <= 1);
	dlclose(h);
}

/* HIP's runtime in a new namespace: its governed entry points are refused
 * as the driver's are, but the calls that change its own current device
 * (hipSetDevice and the context calls, hooked for our cache of the base
 * copy's) are its own, handed out unwrapped: nothing of our books. */
TEST(hip_runtime_in_a_new_namespace_keeps_its_device_calls)
{
	NO_SANITIZER();
	void *h = dlmopen(LM_ID_NEWLM, "libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	if (!h)
		return;
	CHECK(dlsym(h, "hipMalloc") == NULL);
	CHECK(dlsym(h, "hipMallocAsync") == NULL);
	int (*set)(int) = (int (*)(int))dlsym(h, "hipSetDevice");
	CHECK(set != NULL && strcmp(object_of((void *)set), "libgpuguard.so") != 0);
	CHECK(dlsym(h, "hipCtxSetCurrent") != NULL);
	CHECK(dlsym(h, "hipCtxPopCurrent") != NULL);
	CHECK(dlsym(h, "hipGetDevice") != NULL);
	if (set)
		CHECK_EQ_INT(set(0), 0);
	dlclose(h);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "lookups") == 0) {
		void *h = dlmopen(LM_ID_NEWLM, "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
		for (int i = 0; h && i < 5; i++)
			if (dlsym(h, "cuMemAlloc_v2") || dlsym(h, "cuMemCreate"))
				return 1;
		return h ? 0 : 2;
	}
	RUN(driver_in_a_new_namespace_is_not_an_escape);
	RUN(the_refusal_is_said_once);
	RUN(base_driver_beside_a_second_copy_is_governed);
	RUN(plugin_in_a_new_namespace_is_not_an_escape);
	RUN(hip_runtime_in_a_new_namespace_keeps_its_device_calls);
	return harness_done();
}
