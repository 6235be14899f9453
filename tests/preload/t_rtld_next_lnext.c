/* gpuguard: dlsym(RTLD_NEXT, ...) from another library keeps resolving
 * relative to that library, not to us (DESIGN.md §1). */
#include "common.h"

int probe_value(void);
int next_probe_value(void);

TEST(rtld_next_resolves_after_the_calling_library)
{
	/* our own preloaded dlsym is the one being called */
	CHECK(strcmp(object_of(dlsym(RTLD_DEFAULT, "dlsym")), "libgpuguard.so") == 0);
	CHECK_EQ_INT(probe_value(), 1);
	CHECK_EQ_INT(next_probe_value(), 2);
}

TEST(rtld_next_from_the_program)
{
	/* From the executable, "next" is the first library defining it. */
	int (*f)(void) = (int (*)(void))dlsym(RTLD_NEXT, "probe_value");
	CHECK(f != NULL);
	if (f)
		CHECK_EQ_INT(f(), 1);
	CHECK(dlsym(RTLD_NEXT, "no_such_symbol_anywhere") == NULL);
}

TEST(no_driver_means_no_driver_symbols)
{
	/* libcuda is not loaded in this program: looking a driver function up
	 * must fail as it would without us, though we define that name. */
	CHECK(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2") == NULL);
	CHECK(dlsym(RTLD_DEFAULT, "hipMalloc") == NULL);
	CHECK(dlsym(RTLD_DEFAULT, "gpuguard_version") != NULL);
}

int main(void)
{
	RUN(rtld_next_resolves_after_the_calling_library);
	RUN(rtld_next_from_the_program);
	RUN(no_driver_means_no_driver_symbols);
	return harness_done();
}
