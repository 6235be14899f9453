#!/usr/bin/env python3
"""gpuguard on a real card: PyTorch's part of make check-gpu's measurements
(issues 22 and 24). tests/gpu/run.sh runs it:

  torch_costs.py overhead   the device memory torch.zeros(1) takes (the
                            context and torch's modules) and then a 1024x1024
                            matmul (cuBLAS), as GGCOST lines: NVML's figure
                            for this process, the card's used, and
                            torch.cuda.mem_get_info's free, each as a
                            difference across the stage
  torch_costs.py pairs      the median ns of one torch.empty(1024,
                            device="cuda") and its release, as a GGPAIR line
                            (run.sh runs it bare and under the preload, with
                            the allocator PYTORCH_CUDA_ALLOC_CONF names)

Measurements, never judged: only a failed call or a missing figure makes the
GGRESULT line FAIL. No torch or no CUDA: SKIP (exit 77)."""
import ctypes
import os
import sys
import time

MIB = 1 << 20


class Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Proc(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong), ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]


class Nvml:
    """NVML through ctypes, device 0 (CUDA_VISIBLE_DEVICES unset by run.sh)."""

    def __init__(self):
        self.lib = None
        self.self_pid = None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            h = ctypes.c_void_p()
            if lib.nvmlInit_v2() == 0 and lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) == 0:
                self.lib, self.h = lib, h
        except OSError:
            pass

    def card_used(self):
        if not self.lib:
            return None
        m = Mem()
        return m.used if self.lib.nvmlDeviceGetMemoryInfo(self.h, ctypes.byref(m)) == 0 else None

    def procs(self):
        if not self.lib:
            return {}
        n = ctypes.c_uint(256)
        arr = (Proc * 256)()
        if self.lib.nvmlDeviceGetComputeRunningProcesses_v3(self.h, ctypes.byref(n), arr) != 0:
            return {}
        return {arr[i].pid: arr[i].used for i in range(n.value)}

    def find_self(self, before, after):
        """getpid() where NVML lists it, else the one PID our context added."""
        if os.getpid() in after:
            self.self_pid = os.getpid()
        else:
            new = [p for p in after if p not in before]
            if len(new) == 1:
                self.self_pid = new[0]

    def self_used(self, procs):
        return procs.get(self.self_pid) if self.self_pid is not None else None


def result(program, res, reason=None):
    line = "GGRESULT program=%s ceiling=n/a meminfo=n/a refusal=n/a working=n/a result=%s" % (program, res)
    if reason:
        line += " reason=" + reason.replace(" ", "_")
    print(line, flush=True)


def diff(a, b):
    return "-" if a is None or b is None else str(b - a)


def overhead(torch):
    nv = Nvml()
    p0, c0 = nv.procs(), nv.card_used()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    p1, c1 = nv.procs(), nv.card_used()
    nv.find_self(p0, p1)
    f1 = torch.cuda.mem_get_info()[0]
    print("GGCOST stage=torch_zeros nvml=%s card=%s meminfo=-" % (diff(0, nv.self_used(p1)), diff(c0, c1)), flush=True)
    a = torch.ones(1024, 1024, device="cuda")
    torch.cuda.synchronize()
    p1, c1, f1, r1 = nv.procs(), nv.card_used(), torch.cuda.mem_get_info()[0], torch.cuda.memory_reserved()
    b = a @ a
    torch.cuda.synchronize()
    p2, c2, f2, r2 = nv.procs(), nv.card_used(), torch.cuda.mem_get_info()[0], torch.cuda.memory_reserved()
    print("GGCOST stage=torch_matmul nvml=%s card=%s meminfo=%d torch_reserved=%d"
          % (diff(nv.self_used(p1), nv.self_used(p2)), diff(c1, c2), f1 - f2, r2 - r1), flush=True)
    del a, b
    if c0 is None:
        print("GGINFO torch_costs: no NVML: the card's figures are missing", flush=True)
    return c0 is not None


def pairs(torch, n=2000, rounds=15):
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    backend = "cudaMallocAsync" if "cudaMallocAsync" in conf else "native"
    live = [torch.empty(1024, device="cuda") for _ in range(1000)]  # 1k live beside the pairs
    for _ in range(n):  # warm
        torch.empty(1024, device="cuda")
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            torch.empty(1024, device="cuda")
        torch.cuda.synchronize()
        times.append((time.perf_counter_ns() - t0) / n)
    times.sort()
    print("GGPAIR name=torch.empty/%s ns=%.0f rounds=%d pairs=%d" % (backend, times[rounds // 2], rounds, n), flush=True)
    del live
    return True


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in ("overhead", "pairs"):
        print("usage: torch_costs.py overhead|pairs", file=sys.stderr)
        return 2
    program = "torch_" + mode
    try:
        import torch
    except ImportError:
        result(program, "SKIP", "no torch")
        return 77
    if not torch.cuda.is_available():
        result(program, "SKIP", "torch sees no CUDA device")
        return 77
    try:
        ok = overhead(torch) if mode == "overhead" else pairs(torch)
    except Exception as e:  # a measurement that cannot be had is a failed row
        print("GGFAIL %s: %s: %s" % (program, type(e).__name__, e), flush=True)
        ok = False
    result(program, "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
