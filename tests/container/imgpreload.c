/* gpuguard: the application image's own LD_PRELOAD (a stand-in for
 * tcmalloc, jemalloc or a profiler an image sets in its ENV), for the
 * container run (tests/scripts/container.sh): it says that it was loaded, so
 * the test sees that gpuguard's /etc/ld.so.preload chains with it rather
 * than replacing it. */
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void imgpreload_loaded(void)
{
	static const char msg[] = "imgpreload: loaded\n";
	ssize_t r = write(2, msg, sizeof msg - 1);
	(void)r;
}

/* something for the application to call: proof it resolved through us */
int imgpreload_answer(void);
int imgpreload_answer(void)
{
	return 42;
}
