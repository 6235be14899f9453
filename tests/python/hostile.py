# gpuguard test (issue 27): Python stacks the reader must survive. Each mode
# allocates 1 MiB blocks on the simulated GPU through ctypes.CDLL and keeps
# them, so an exit dump (GPUGUARD_DUMP_AT_EXIT=1) shows their stacks:
#   gen       from a generator frame (gen_alloc)
#   coro      from a coroutine frame (coro_alloc), run by asyncio
#   deep      from the bottom of a 1,000-deep recursion (recurse)
#   subinterp from a sub-interpreter, where the version has one
#   finalize  from a __del__ that runs while the interpreter finalises
#   threads   from 8 threads at once, 50 blocks each (the shared caches)
#   reuse     from alpha(), then from beta() whose code object was made at
#             the address alpha's had before it was freed, both called from
#             the same line: beta's block must be named beta (the code
#             caches and the per-thread memo must not take the address for
#             the object). Prints "reused" when the address was reused.
import ctypes
import sys

lib = ctypes.CDLL("libcuda.so.1")
lib.cuInit(0)
dev = ctypes.c_int()
lib.cuDeviceGet(ctypes.byref(dev), 0)
ctx = ctypes.c_void_p()
lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
lib.cuCtxSetCurrent(ctx)
held = []


def alloc():
    p = ctypes.c_uint64()
    assert lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
    held.append(p)


def gen_alloc():
    for _ in range(2):
        alloc()
        yield


def recurse(n):
    if n == 0:
        alloc()
        return 0
    return recurse(n - 1) + 1


async def coro_alloc():
    alloc()


class Late:
    def __del__(self, lib=lib, ctypes=ctypes, held=held):
        p = ctypes.c_uint64()
        lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20))
        held.append(p)


mode = sys.argv[1]
if mode == "gen":
    for _ in gen_alloc():
        pass
elif mode == "coro":
    import asyncio

    asyncio.run(coro_alloc())
elif mode == "deep":
    sys.setrecursionlimit(5000)
    recurse(1000)
elif mode == "subinterp":
    try:
        import _interpreters as interp  # 3.13
    except ImportError:
        try:
            import _xxsubinterpreters as interp  # 3.9-3.12
        except ImportError:
            interp = None
    if interp is None:
        print("no sub-interpreters")
    else:
        code = (
            "import ctypes\n"
            "lib = ctypes.CDLL('libcuda.so.1')\n"
            "ctx = ctypes.c_void_p()\n"
            "lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0)\n"
            "lib.cuCtxSetCurrent(ctx)\n"
            "def sub_alloc():\n"
            "    p = ctypes.c_uint64()\n"
            "    lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20))\n"
            "sub_alloc()\n"
        )
        try:
            try:
                i = interp.create(isolated=False)  # 3.12: a shared GIL, so ctypes loads
            except TypeError:
                i = interp.create()
            interp.run_string(i, code)
        except Exception as e:  # ctypes may refuse a sub-interpreter
            print("sub-interpreter:", type(e).__name__, e)
    alloc()
elif mode == "threads":
    import threading

    def threaded_alloc():
        lib.cuCtxSetCurrent(ctx)
        for _ in range(50):
            alloc()

    ts = [threading.Thread(target=threaded_alloc) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(held) == 400
elif mode == "reuse":
    SRC = "def {0}(alloc):\n    alloc()\n"

    def make(name):
        # The module's code is dropped after exec; the function keeps its own.
        ns = {}
        exec(compile(SRC.format(name), "reuse_%s.py" % name, "exec"), ns)
        return ns[name]

    def call(fn):
        fn(alloc)

    def run(name, addr):
        # A function whose code object is at addr (any for None), called
        # once; freed on return. The allocator hands a freed block to the
        # next object of its size (pymalloc is last in, first out), so this
        # seldom takes more than one try.
        for _ in range(1000):
            fn = make(name)
            if addr is None or id(fn.__code__) == addr:
                call(fn)
                return id(fn.__code__)
            del fn
        return None

    alloc()  # the process's first capture, which keeps no memo: alpha's will
    addr = None
    for name in ("alpha", "beta"):  # both from this one line: the same stack but for the code
        addr = run(name, addr)
    if addr is not None:
        print("reused")
elif mode == "finalize":
    alloc()
    late = Late()  # a module global: collected during finalisation
print("done", mode)
