# gpuguard: the application of the container run (tests/scripts/container.sh),
# as an inference server's process would be: Python, the CUDA driver through
# ctypes (dlopen and dlsym, as PyTorch's loader does), one allocation under
# the ceiling and one past it. Prints what it saw, one "key: value" per line,
# then "ready", and waits (the probe runs beside it) until killed.
import ctypes
import os
import sys
import time


def say(k, v):
    print(f"{k}: {v}", flush=True)


maps = open("/proc/self/maps").read()
say("uid", os.getuid())
say("pid", os.getpid())
say("gpuguard mapped", "libgpuguard.so" in maps)
say("image preload mapped", "libimgpreload.so" in maps)
say("LD_PRELOAD", os.environ.get("LD_PRELOAD", ""))
try:
    with open("/", "rb"):
        pass
    open("/etc/gpuguard-write-test", "w")
    say("root writable", True)
except OSError:
    say("root writable", False)

cuda = ctypes.CDLL("libcuda.so.1")
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
say("cuInit", cuda.cuInit(0))
say("cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(dev), 0))
say("cuCtxCreate", cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev))
MiB = 1 << 20
a, b = ctypes.c_uint64(), ctypes.c_uint64()
say("alloc 512 MiB", cuda.cuMemAlloc_v2(ctypes.byref(a), ctypes.c_size_t(512 * MiB)))
# past the ceiling (GPUGUARD_LIMIT=1Gi): CUDA_ERROR_OUT_OF_MEMORY, 2
say("alloc 768 MiB more", cuda.cuMemAlloc_v2(ctypes.byref(b), ctypes.c_size_t(768 * MiB)))
free, total = ctypes.c_size_t(), ctypes.c_size_t()
cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
say("total MiB", total.value // MiB)
if "libimgpreload.so" in maps:
    say("image preload answers", ctypes.CDLL(None).imgpreload_answer())
say("ready", True)
sys.stdout.flush()
time.sleep(60)
