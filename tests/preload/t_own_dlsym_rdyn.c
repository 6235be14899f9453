/* gpuguard: a program that defines dlsym itself, going straight to libc's
 * (issue 10, finding 10). Lookups through its dlsym bypass our override, and
 * it is not ours to take over: the library says so once, naming who binds
 * dlsym where, and still governs what reaches the driver by symbol binding.
 * Exported with -rdynamic (_rdyn), as such programs are. */
#include "common.h"
#include "gpuguard/cuda_abi.h"

void *dlsym(void *handle, const char *name)
{
	static void *(*libc_dlsym)(void *, const char *);
	if (!libc_dlsym)
		libc_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!libc_dlsym)
		libc_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	return libc_dlsym ? libc_dlsym(handle, name) : NULL;
}

typedef int (*setup_fn)(void);
typedef int (*alloc_fn)(gg_CUdeviceptr *, size_t);

static int child(void)
{
	void *h = dlopen("libdeepplugin.so", RTLD_NOW);
	if (!h)
		return 2;
	setup_fn setup = (setup_fn)dlsym(h, "plugin_setup");
	alloc_fn direct = (alloc_fn)dlsym(h, "plugin_direct_alloc");
	alloc_fn via_dlsym = (alloc_fn)dlsym(h, "plugin_dlsym_alloc");
	if (!setup || !direct || !via_dlsym || setup() != 0)
		return 3;
	gg_CUdeviceptr a = 0, b = 0;
	/* by symbol binding: governed (1 GiB ceiling) */
	if (direct(&a, 2 * GIB) != GG_CUDA_ERROR_OUT_OF_MEMORY)
		return 4;
	/* through the program's dlsym: not governed, and said so */
	if (via_dlsym(&b, 64 * MIB) != GG_CUDA_SUCCESS)
		return 5;
	return 0;
}

TEST(a_program_that_defines_dlsym_is_named_once)
{
	char err[8192];
	const char *env[] = {NULL};
	CHECK_EQ_INT(spawn_self("child", env, err, sizeof err), 0);
	const char *w = strstr(err, "binds dlsym to");
	CHECK(w != NULL);
	CHECK(w && strstr(w + 1, "binds dlsym to") == NULL);
	CHECK(strstr(err, "not governed") != NULL);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "child") == 0)
		return child();
	RUN(a_program_that_defines_dlsym_is_named_once);
	return harness_done();
}
