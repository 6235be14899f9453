/* gpuguard test: a library that, like many interposers, looks up "the next
 * definition after me" with dlsym(RTLD_NEXT). Loaded before libnextbase. */
#define _GNU_SOURCE
#include <dlfcn.h>

int probe_value(void);
int next_probe_value(void);

int probe_value(void)
{
	return 1;
}

/* Must find libnextbase's probe_value (2): the next one after *this* library.
 * If the preloaded dlsym made glibc see gpuguard as the caller, the search
 * would start after gpuguard and find ours (1). */
int next_probe_value(void)
{
	int (*f)(void) = (int (*)(void))dlsym(RTLD_NEXT, "probe_value");
	return f ? f() : -1;
}
