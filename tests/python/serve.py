# gpuguard test (issue 27): a "server" that allocates on the simulated GPU
# through ctypes from two functions until the ceiling refuses: 4 x 8 MiB of
# weights from load_weights, then 96 MiB KV blocks from grow_kv_cache.
# argv[1]: "cdll" (ctypes.CDLL, GIL released) or "pydll" (ctypes.PyDLL, GIL
# held); argv[2]: "main" or "thread" (a threading.Thread allocates).
# tests/scripts/python.sh finds the lines by their LINE_ comments.
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
MIB = 1 << 20
held = []


def load_weights():
    for _ in range(4):
        p = ctypes.c_uint64()
        if lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(8 * MIB)) != 0:  # LINE_WEIGHTS
            raise SystemExit("weights refused")
        held.append(p)


def grow_kv_cache():
    while True:
        p = ctypes.c_uint64()
        if lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(96 * MIB)) != 0:  # LINE_KV
            return
        held.append(p)


def serve():
    lib.cuCtxSetCurrent(ctx)  # a context is current per thread
    load_weights()
    grow_kv_cache()


if WHERE == "thread":
    t = threading.Thread(target=serve)
    t.start()
    t.join()
else:
    serve()
print("refused")
