# gpuguard test (issue 27): a "server" that allocates on the simulated GPU
# through ctypes from two functions until the ceiling refuses. argv[1]:
# "cdll" (ctypes.CDLL, GIL released) or "pydll" (ctypes.PyDLL, GIL held);
# argv[2]: "main" or "thread" (a threading.Thread does the allocating).
import ctypes
import sys
import threading

MODE = sys.argv[1] if len(sys.argv) > 1 else "cdll"
WHERE = sys.argv[2] if len(sys.argv) > 2 else "main"
lib = (ctypes.PyDLL if MODE == "pydll" else ctypes.CDLL)("libcuda.so.1")
lib.cuInit(0)
dev = ctypes.c_int()
lib.cuDeviceGet(ctypes.byref(dev), 0)
ctx = ctypes.c_void_p()
lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
lib.cuCtxSetCurrent(ctx)
MIB = 1 << 20


def alloc(size):
    p = ctypes.c_uint64()
    rc = lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(size))
    return rc


def load_weights():
    for _ in range(4):
        if alloc(8 * MIB) != 0:  # LINE_WEIGHTS
            return False
    return True


def grow_kv_cache():
    while True:
        if alloc(96 * MIB) != 0:  # LINE_KV
            return


def serve():
    load_weights()
    grow_kv_cache()


if WHERE == "thread":
    t = threading.Thread(target=serve)
    t.start()
    t.join()
else:
    serve()
print("refused")
