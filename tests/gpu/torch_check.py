#!/usr/bin/env python3
"""gpuguard on a real GPU, through PyTorch's three CUDA allocators.

For each allocator configuration (native caching allocator, expandable
segments, the cudaMallocAsync backend) a fresh subprocess runs under
LD_PRELOAD=libgpuguard.so GPUGUARD_LIMIT=4Gi, with PYTORCH_CUDA_ALLOC_CONF set
before torch initialises CUDA, and checks that:
  * torch.cuda.mem_get_info() reports total == 4 GiB;
  * allocating 256 MiB tensors ends in torch.OutOfMemoryError (that type,
    nothing else), with peak memory_reserved <= 4 GiB and gpuguard's peak
    <= its limit;
  * after del + torch.cuda.empty_cache() the room is back: 1 GiB allocates
    and a matmul runs (the process keeps working).

Prints one line per allocator, the format tests/gpu/gg_gpu.h uses:
  GGRESULT program=torch_<config> ceiling=.. meminfo=.. refusal=.. working=.. result=PASS|FAIL|SKIP
Exit status: 0 unless a configuration failed (a missing torch or CUDA is a
skip, not a failure).

  torch_check.py [--lib build/lib/libgpuguard.so]   run all three
  torch_check.py --child CONFIG                     one configuration (internal)
"""
import os
import subprocess
import sys

from gg_torch import built, child_env, preflight, result_line, stats_fields  # tests/gpu/gg_torch.py, beside this script

GIB = 1 << 30
MIB = 1 << 20
CEILING = 4 * GIB
CHUNK = 256 * MIB
CHILD_TIMEOUT = 150

CONFIGS = [
    ("native", None),
    ("expandable_segments", "expandable_segments:True"),
    ("cudaMallocAsync", "backend:cudaMallocAsync"),
]


# ---- child: one allocator configuration, under the preload ---------------

class Verdict:
    def __init__(self, program):
        self.program = program
        self.cols = {"ceiling": None, "meminfo": None, "working": None}
        self.refusal = "none"
        self.failures = 0

    def info(self, msg):
        print("GGINFO %s: %s" % (self.program, msg), flush=True)

    def check(self, ok, what, col=None):
        ok = bool(ok)
        if col is not None and self.cols[col] is not False:
            self.cols[col] = ok
        if not ok:
            self.failures += 1
            print("GGFAIL %s: %s" % (self.program, what), flush=True)
        return ok

    def finish(self):
        yn = {None: "n/a", True: "yes", False: "no"}
        print(result_line(self.program, yn[self.cols["ceiling"]], yn[self.cols["meminfo"]],
                          self.refusal, yn[self.cols["working"]],
                          "FAIL" if self.failures else "PASS"), flush=True)
        return 1 if self.failures else 0


def gpuguard_stats_fn():
    """gpuguard_device_stats from the preloaded library, or None."""
    import ctypes

    class Stats(ctypes.Structure):
        _fields_ = stats_fields()  # from include/gpuguard.h, so it cannot drift

    try:
        fn = ctypes.CDLL(None).gpuguard_device_stats
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(Stats)]
    fn.restype = ctypes.c_int

    def stats(dev=0):
        s = Stats()
        return s if fn(dev, ctypes.byref(s)) == 0 else None
    return stats


def child(config):
    v = Verdict("torch_" + config)
    import gc
    import torch

    if not torch.cuda.is_available():
        print(result_line(v.program, result="SKIP", reason="torch.cuda.is_available()=False"), flush=True)
        return 0
    stats = gpuguard_stats_fn()
    if not v.check(stats is not None, "gpuguard_device_stats not found: libgpuguard.so not preloaded"):
        return v.finish()
    oom_type = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)

    free, total = torch.cuda.mem_get_info(dev)
    s = stats()
    v.info("torch %s, CUDA %s, PYTORCH_CUDA_ALLOC_CONF=%s, backend=%s" % (
        torch.__version__, torch.version.cuda, os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "(unset)"),
        getattr(torch.cuda, "get_allocator_backend", lambda: "?")()))
    v.info("mem_get_info at start: free=%d total=%d; gpuguard limit=%d used=%d" % (free, total, s.limit, s.used))
    v.check(s.limit == CEILING, "gpuguard limit is %d, not 4 GiB" % s.limit)
    v.check(total == CEILING, "mem_get_info total %d != 4 GiB" % total, "meminfo")
    v.check(free <= CEILING, "mem_get_info free %d > 4 GiB" % free, "meminfo")
    if hasattr(torch.cuda, "get_allocator_backend"):
        want = "cudaMallocAsync" if config == "cudaMallocAsync" else "native"
        v.check(torch.cuda.get_allocator_backend() == want, "allocator backend is %s, wanted %s" % (
            torch.cuda.get_allocator_backend(), want))
    try:
        torch.cuda.reset_peak_memory_stats(dev)
    except Exception as e:  # noqa: BLE001 - not every backend supports it
        v.info("reset_peak_memory_stats: %s" % e)

    # Fill until PyTorch gives up; it must give up with OutOfMemoryError.
    tensors = []
    refusal, message = None, ""
    for _ in range(64):  # 16 GiB: far past the ceiling
        try:
            tensors.append(torch.empty(CHUNK, dtype=torch.uint8, device=dev))
        except Exception as e:  # noqa: BLE001 - the type is what we test
            refusal = "torch.OutOfMemoryError" if oom_type and isinstance(e, oom_type) else type(e).__name__
            message = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
            break
    n = len(tensors)
    v.refusal = refusal or "none"
    v.info("allocated %d x 256 MiB; refusal %s: %s" % (n, refusal, message))
    v.check(refusal == "torch.OutOfMemoryError", "refusal was %s, not torch.OutOfMemoryError" % refusal, "ceiling")
    v.check(12 <= n <= 16, "%d x 256 MiB fit under a 4 GiB ceiling (expected 12..16)" % n, "ceiling")
    try:
        peak_reserved = torch.cuda.max_memory_reserved(dev)
    except Exception as e:  # noqa: BLE001 - some backends keep no such statistic
        peak_reserved = None
        v.info("max_memory_reserved unavailable: %s" % e)
    s = stats()
    v.info("peak memory_reserved=%s; gpuguard used=%d peak=%d pool_reserved=%d overshoot=%d" % (
        peak_reserved, s.used, s.peak, s.pool_reserved, s.pool_overshoot))
    if peak_reserved is not None:
        v.check(peak_reserved <= CEILING, "peak memory_reserved %d > 4 GiB" % peak_reserved, "ceiling")
    v.check(s.peak <= s.limit and s.used <= s.limit, "gpuguard peak %d > limit %d" % (s.peak, s.limit), "ceiling")
    v.check(s.pool_overshoot == 0, "gpuguard pool_overshoot=%d" % s.pool_overshoot, "ceiling")
    free, total = torch.cuda.mem_get_info(dev)
    v.check(total == CEILING, "mem_get_info total %d != 4 GiB when full" % total, "meminfo")
    v.check(free < CHUNK + 20 * MIB, "mem_get_info free %d when full" % free, "meminfo")

    # Give it all back and keep working.
    if n:
        tensors[0].fill_(1)
        tensors[-1].fill_(2)
        torch.cuda.synchronize()
    del tensors
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    s = stats()
    free, total = torch.cuda.mem_get_info(dev)
    v.info("after empty_cache: memory_reserved=%d; gpuguard used=%d; mem_get_info free=%d total=%d" % (
        torch.cuda.memory_reserved(dev), s.used, free, total))
    v.check(s.used <= 64 * MIB, "gpuguard still charges %d after empty_cache" % s.used, "ceiling")
    v.check(free >= CEILING - 64 * MIB and total == CEILING,
            "mem_get_info after empty_cache: free=%d total=%d" % (free, total), "meminfo")
    try:
        x = torch.empty(GIB, dtype=torch.uint8, device=dev)
        x.fill_(7)
        a = torch.randn(2048, 2048, device=dev)
        c = a @ a
        torch.cuda.synchronize()
        ok = bool(torch.isfinite(c).all().item()) and int(x[-1].item()) == 7
        v.check(ok, "matmul/fill result wrong", "working")
        del x, a, c
    except Exception as e:  # noqa: BLE001
        v.check(False, "after empty_cache: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:200]), "working")
    torch.cuda.synchronize()
    return v.finish()


# ---- parent: one subprocess per configuration ----------------------------

def parent(lib):
    rc = preflight(["torch_" + name for name, _ in CONFIGS], [lib])
    if rc is not None:
        return rc
    failed = 0
    for name, conf in CONFIGS:
        env = child_env(lib, **({"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else {}))
        program = "torch_" + name
        try:
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=CHILD_TIMEOUT)
            out, err, rc = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace"), r.returncode
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace")
            err, rc = "timed out after %d s" % CHILD_TIMEOUT, 124
        lines = out.splitlines()
        results = [ln for ln in lines if ln.startswith("GGRESULT ")]
        for ln in lines:
            if not ln.startswith("GGRESULT "):
                print(ln)
        if results and (rc == 0 or " result=FAIL" in results[-1]):
            print(results[-1])
            failed += " result=FAIL" in results[-1]
        else:
            for ln in err.strip().splitlines()[-15:]:
                print("GGFAIL %s: stderr: %s" % (program, ln))
            print(result_line(program, reason="exit status %d" % rc))
            failed += 1
        sys.stdout.flush()
    return 1 if failed else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "--child":
        return child(argv[2])
    lib = argv[2] if len(argv) >= 3 and argv[1] == "--lib" else built("lib", "libgpuguard.so")
    return parent(os.path.abspath(lib))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
