/* gpuguard test (issue 27): a C program that embeds CPython, loaded by
 * dlopen after the library's init. Allocates on the simulated GPU
 *   1. before libpython is loaded, 2. with it loaded but not initialised,
 *   3. from Python code run by PyRun_SimpleStringFlags (embedded_alloc),
 *   4. from a native thread that has no Python state (native_thread_alloc),
 *   5. after Py_FinalizeEx,
 * keeping every block, so an exit dump shows each stack. None may crash;
 * 3 must show its Python frame, 4 its native one. argv[1]: libpython. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

typedef int CUresult;
CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(void **, int);
CUresult cuCtxSetCurrent(void *);
CUresult cuMemAlloc_v2(uint64_t *, size_t);

static void *ctx;

__attribute__((noinline)) void native_alloc(const char *what)
{
	uint64_t p;
	if (cuMemAlloc_v2(&p, 1 << 20) != 0)
		fprintf(stderr, "embed: allocation %s failed\n", what);
}

__attribute__((noinline)) void *native_thread_alloc(void *arg)
{
	(void)arg;
	cuCtxSetCurrent(ctx);
	native_alloc("in a native thread");
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	cuInit(0);
	cuDevicePrimaryCtxRetain(&ctx, 0);
	cuCtxSetCurrent(ctx);
	native_alloc("before python");
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		fprintf(stderr, "embed: %s\n", dlerror());
		return 2;
	}
	void (*init)(int) = (void (*)(int))dlsym(h, "Py_InitializeEx");
	int (*run)(const char *, void *) = (int (*)(const char *, void *))dlsym(h, "PyRun_SimpleStringFlags");
	int (*fini)(void) = (int (*)(void))dlsym(h, "Py_FinalizeEx");
	void *(*save)(void) = (void *(*)(void))dlsym(h, "PyEval_SaveThread");
	void (*restore)(void *) = (void (*)(void *))dlsym(h, "PyEval_RestoreThread");
	if (!init || !run || !fini || !save || !restore)
		return 2;
	native_alloc("loaded, not initialised");
	init(0);
	if (run("import ctypes\n"
	        "lib = ctypes.CDLL('libcuda.so.1')\n"
	        "keep = []\n"
	        "def embedded_alloc():\n"
	        "    p = ctypes.c_uint64()\n"
	        "    assert lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0\n"
	        "    keep.append(p)\n"
	        "embedded_alloc()\n",
	        NULL) != 0)
		return 3;
	/* A native thread while the main thread holds a Python state. */
	void *ts = save();
	pthread_t t;
	if (pthread_create(&t, NULL, native_thread_alloc, NULL) == 0)
		pthread_join(t, NULL);
	restore(ts);
	fini();
	native_alloc("after finalisation");
	printf("embed done\n");
	return 0;
}
