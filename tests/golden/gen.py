#!/usr/bin/env python3
# gpuguard: writes the golden dumps in this directory (run by hand, from
# here, when the scenarios change; the .jsonl files are checked in). Each
# dump is one scenario the report must diagnose; the bad_* ones must be
# refused with FILE:LINE. Expected reports: GG_GOLDEN_UPDATE=1 sh
# tests/scripts/golden.sh.
import json

MiB = 1 << 20
GiB = 1 << 30
NOW = 1796200200000  # 2026-12-02T10:30:00Z


def rec(**kw):
    return json.dumps(kw, separators=(",", ":"))


def header(trigger, uptime_ms=600000, cmd=("python3", "serve.py"), fmt=1):
    return rec(t="header", format=fmt, lib="0.1.0", time="2026-12-02T10:30:00Z", unix_ms=NOW,
               start_unix_ms=NOW - uptime_ms, host="node-7", pid=4242, cmdline=list(cmd), trigger=trigger,
               unwinder="libunwind", stack_depth=32, history_capacity=65536)


def config(limit="4Gi"):
    return [rec(t="config", name="GPUGUARD_LIMIT", value=limit, source="environment"),
            rec(t="config", name="GPUGUARD_HISTORY", value="65536", source="default")]


def device(dev=0, limit=4 * GiB, used=0, peak=None, pool=0, live=None, allocs=0, frees=0, rc=0, rd=0,
           dfree=70 * GiB, dtotal=80 * GiB, scope=None, process_used=None):
    extra = {}
    if scope is not None:  # dumps written before pod scope have neither
        extra = dict(scope=scope, process_used=process_used)
    return rec(t="device", dev=dev, limit=limit, used=used, peak=peak if peak is not None else used, pool_reserved=pool,
               live_bytes=live if live is not None else used, allocs=allocs, frees=frees, untracked_frees=0,
               refused_ceiling=rc, refused_config=0, refused_driver=rd, pool_overshoot=0, driver_free=dfree,
               driver_total=dtotal, **extra)


def request(size, outcome, api="cuMemAlloc_v2", stack=1, dev=0):
    return rec(t="request", api=api, size=size, dev=dev, tid=4243, stack=stack, outcome=outcome)


def host(rss=2 * GiB, limit=16 * GiB, usage=4 * GiB, oom=0, pinned=256 * MiB):
    return rec(t="host", rss=rss, cgroup_version=2, cgroup_limit=limit, cgroup_usage=usage, cgroup_oom_kill=oom,
               pinned_bytes=pinned, pinned_allocs=4)


def vmm(base, size, mapped, holes, largest):
    return rec(t="vmm", base="%x" % base, size=size, mapped=mapped, holes=holes, largest_hole=largest)


def alloc(p, s, st, age, api=1, d=0):
    return rec(t="a", p="%x" % p, s=s, d=d, api=api, age=age, tid=4243, st=st)


STACKS = {
    1: [{"m": "libcuda.so.1", "o": "2a1f0", "s": "cuMemAlloc_v2"},
        {"m": "libcudart.so.12", "o": "51c2", "s": "cudaMalloc"},
        {"m": "serve.so", "o": "1a2b", "s": "kv_cache_grow"},
        {"m": "serve.so", "o": "1100", "s": "handle_request"},
        {"m": "python3", "o": "9f00"}],
    2: [{"m": "libcuda.so.1", "o": "2a1f0", "s": "cuMemAlloc_v2"},
        {"m": "libtorch_cuda.so", "o": "77aa10", "s": "c10::cuda::CUDACachingAllocator::malloc"},
        {"m": "libtorch_cuda.so", "o": "4410", "s": "at::native::empty_cuda"},
        {"m": "python3", "o": "9f00"}],
    3: [{"m": "libcuda.so.1", "o": "2a1f0", "s": "cuMemAlloc_v2"},
        {"m": "serve.so", "o": "2200", "s": "load_weights"},
        {"m": "python3", "o": "9f00"}],
    4: [{"m": "libcuda.so.1", "o": "3b000", "s": "cuMemAllocAsync"},
        {"m": "serve.so", "o": "3300", "s": "scratch_async"}],
    5: [{"m": "libcuda.so.1", "o": "3c400", "s": "cuMemCreate"},
        {"m": "cumem_allocator.abi3.so", "o": "4f10", "s": "create_and_map"},
        {"m": "cumem_allocator.abi3.so", "o": "5a20", "s": "my_malloc"},
        {"m": "python3", "o": "9f00"}],
}


def stacks(ids):
    return [rec(t="stack", id=i, frames=STACKS[i]) for i in ids]


def hist(ms, op, p, s, st, api=1):
    return rec(t="h", ms=ms, op=op, p="%x" % p, s=s, d=0, api=api, st=st)


def write(name, lines, end=True, extra=""):
    if end:
        lines = lines + [rec(t="end", records=len(lines), suppressed=0, write_errors=0)]
    with open(name, "w") as f:
        f.write("\n".join(lines) + "\n" + extra)


# ceiling reached, usage growing steadily (an unbounded KV cache).
L = [header("ceiling")] + config()
L += [device(used=3968 * MiB, peak=3968 * MiB, allocs=62, rc=1)]
L += [request(256 * MiB, "refused_ceiling")]
L += [host()]
L += [alloc(0x7f0000000000 + i * 64 * MiB, 64 * MiB, 1, 590000 - i * 9000) for i in range(60)]
L += [alloc(0x7e0000000000, 64 * MiB, 3, 599000), alloc(0x7e0004000000, 64 * MiB, 3, 599000)]
L += stacks([1, 3])
L += [hist(10000 + i * 9000, "a", 0x7f0000000000 + i * 64 * MiB, 64 * MiB, 1) for i in range(60)]
L += [hist(550000, "r", 0, 256 * MiB, 1)]
write("ceiling_steady.jsonl", L)

# pod scope: the pod's budget is full, and this process holds only a quarter
# of it; the other processes of the pod hold the rest.
L = [header("ceiling")] + config()
L += [device(used=4000 * MiB, peak=4000 * MiB, live=1 * GiB, allocs=16, rc=1, scope="pod", process_used=1 * GiB)]
L += [rec(t="pod", slot=0, pid=1, comm="python3", self=0, alive=1, dev=0, used=2 * GiB),
      rec(t="pod", slot=1, pid=4242, comm="python3", self=1, alive=1, dev=0, used=1 * GiB),
      rec(t="pod", slot=2, pid=1, comm="stub\x1b[31m", self=0, alive=0, dev=0, used=928 * MiB)]
L += [request(256 * MiB, "refused_ceiling")]
L += [host()]
L += [alloc(0x7f0000000000 + i * 64 * MiB, 64 * MiB, 1, 500000 - i * 1000) for i in range(16)]
L += stacks([1])
write("ceiling_pod.jsonl", L)

# a pod record whose flag is neither 0 nor 1
L = [header("ceiling")] + config()
L += [device(used=1 * GiB, allocs=1, scope="pod", process_used=1 * GiB)]
L += [rec(t="pod", slot=0, pid=7, comm="x", self=2, alive=1, dev=0, used=1)]
write("bad_pod.jsonl", L)

# a scope that is neither "pod" nor "process"
L = [header("ceiling")] + config()
L += [device(used=1 * GiB, allocs=1, scope="cluster", process_used=1 * GiB)]
write("bad_scope.jsonl", L)

# ceiling reached by one huge request.
L = [header("ceiling")] + config()
L += [device(used=1 * GiB, peak=1 * GiB, allocs=16, rc=1)]
L += [request(3 * GiB + 512 * MiB, "refused_ceiling", stack=3)]
L += [host()]
L += [alloc(0x7f0000000000 + i * 64 * MiB, 64 * MiB, 3, 500000) for i in range(16)]
L += stacks([3])
L += [hist(100 + i, "a", 0x7f0000000000 + i * 64 * MiB, 64 * MiB, 3) for i in range(16)]
L += [hist(599000, "r", 0, 3 * GiB + 512 * MiB, 3)]
write("ceiling_jump.jsonl", L)

# ceiling reached at a plateau: the working set is simply larger.
L = [header("ceiling")] + config()
L += [device(used=4000 * MiB, peak=4064 * MiB, allocs=500, frees=440, rc=1)]
L += [request(128 * MiB, "refused_ceiling")]
L += [host()]
L += [alloc(0x7f0000000000 + i * 128 * MiB, 125 * MiB, 1 if i % 2 else 3, 1000 * (60 - i)) for i in range(32)]
L += stacks([1, 3])
h = []
for i in range(200):
    p = 0x7a0000000000 + (i % 8) * 128 * MiB
    h.append(hist(100000 + i * 2000, "a", p, 125 * MiB, 1))
    h.append(hist(100000 + i * 2000 + 1000, "f", p, 125 * MiB, 1))
L += h
write("ceiling_plateau.jsonl", L)

# device full: the driver refused while far under the ceiling.
L = [header("driver_oom")] + config("40Gi")
L += [device(limit=40 * GiB, used=6 * GiB, peak=6 * GiB, allocs=3, rd=1, dfree=512 * MiB)]
L += [request(2 * GiB, "driver_oom", stack=3)]
L += [host()]
L += [alloc(0x7f0000000000 + i * 2 * GiB, 2 * GiB, 3, 300000) for i in range(3)]
L += stacks([3])
L += [hist(300000 + i, "a", 0x7f0000000000 + i * 2 * GiB, 2 * GiB, 3) for i in range(3)]
L += [hist(600000, "r", 0, 2 * GiB, 3)]
write("device_full.jsonl", L)

# fragmentation: the driver had the bytes free but no block; PyTorch segments.
L = [header("driver_oom")] + config("16Gi")
segs = [2 * MiB] * 40 + [20 * MiB] * 30 + [64 * MiB] * 10
used = sum(segs)
L += [device(limit=16 * GiB, used=used, peak=used, allocs=len(segs), rd=1, dfree=3 * GiB, dtotal=16 * GiB)]
L += [request(2 * GiB, "driver_oom", stack=2)]
L += [host()]
L += [alloc(0x7f0000000000 + i * 64 * MiB, s, 2, 100000) for i, s in enumerate(segs)]
L += stacks([2])
write("fragmentation.jsonl", L)

# fragmentation in a stream-ordered pool: the reserve holds the bytes.
L = [header("ceiling")] + config()
L += [device(used=3584 * MiB, peak=3584 * MiB, pool=3 * GiB, live=700 * MiB, allocs=10, rc=1)]
L += [request(1 * GiB, "refused_ceiling", api="cuMemAllocAsync", stack=4)]
L += [host()]
L += [alloc(0x7f0000000000 + i * 128 * MiB, 100 * MiB, 4, 1000, api=4) for i in range(5)]
L += [alloc(0x7e0000000000, 200 * MiB, 3, 500000)]
L += stacks([3, 4])
write("fragmentation_pool.jsonl", L)

# fragmentation in VMM reservations (vLLM sleep mode, PyTorch expandable
# segments): the driver had the bytes free, but the request is larger than
# every hole left between mapped chunks.
L = [header("driver_oom")] + config("16Gi")
# (address, size): 8 GiB reserved with holes of 512, 256, 256, 256 MiB
# between its 12 mapped 256 MiB chunks and an unmapped tail; 1 GiB reserved
# with one 128 MiB hole between its 6 mapped 128 MiB chunks.
A, B = 0x7f0000000000, 0x7f1000000000
chunks = [(A + o * 256 * MiB, 256 * MiB) for o in (0, 1, 2, 3, 6, 7, 9, 10, 12, 13, 15, 16)]
chunks += [(B + o * 128 * MiB, 128 * MiB) for o in (0, 1, 2, 4, 5, 6)]
used = sum(s for _, s in chunks)
L += [device(limit=16 * GiB, used=used, peak=used, allocs=len(chunks), rd=1, dfree=3 * GiB, dtotal=16 * GiB)]
L += [request(2 * GiB, "driver_oom", api="cuMemCreate", stack=5)]
L += [host()]
L += [vmm(0x7f0000000000, 8 * GiB, 3 * GiB, 4, 512 * MiB), vmm(0x7f1000000000, 1 * GiB, 768 * MiB, 1, 128 * MiB)]
L += [alloc(p, s, 5, 200000, api=6) for p, s in chunks]
L += stacks([5])
write("fragmentation_vmm.jsonl", L)

# leak suspected: one site keeps everything it allocates (at-exit dump).
def leak(name, n):
    L = [header("exit", cmd=("./trainer", "--epochs", "3"))] + config()
    L += [device(used=n * 8 * MiB + 64 * MiB, peak=n * 8 * MiB + 64 * MiB, allocs=n * 3, frees=n * 2)]
    L += [host()]
    L += [alloc(0x7f0000000000 + i * 8 * MiB, 8 * MiB, 1, 590000 - i * (500000 // n)) for i in range(n)]
    L += [alloc(0x7e0000000000, 64 * MiB, 3, 599000)]
    L += stacks([1, 3])
    h = []
    for i in range(n):
        t = 10000 + i * (500000 // n)
        h.append(hist(t, "a", 0x7f0000000000 + i * 8 * MiB, 8 * MiB, 1))
        h.append(hist(t + 10, "a", 0x7d0000000000 + i * 2 * MiB, 2 * MiB, 2))
        h.append(hist(t + 20, "f", 0x7d0000000000 + i * 2 * MiB, 2 * MiB, 2))
    L += h
    write(name, L)


leak("leak.jsonl", 40)
leak("leak_old.jsonl", 10)

# host memory pressure: the pod is near its memory limit, one OOM kill.
L = [header("signal")] + config()
L += [device(used=1 * GiB, allocs=4)]
L += [host(rss=7 * GiB, limit=8 * GiB, usage=7782 * MiB, oom=1, pinned=3 * GiB)]
L += [alloc(0x7f0000000000 + i * 256 * MiB, 256 * MiB, 3, 1000) for i in range(4)]
L += stacks([3])
write("host_pressure.jsonl", L)

# truncated: the writer died in the middle of a stack record.
L = [header("ceiling")] + config()
L += [device(used=2 * GiB, allocs=2, rc=1)]
L += [request(3 * GiB, "refused_ceiling")]
L += [alloc(0x7f0000000000, 1 * GiB, 1, 1000), alloc(0x7f0040000000, 1 * GiB, 3, 2000)]
L += stacks([1])
write("truncated.jsonl", L, end=False, extra=rec(t="stack", id=3, frames=STACKS[3])[:40])

# hostile strings: markup, escapes, a semicolon for folded output.
L = [header("signal", cmd=("<script>alert(1)</script>", "a\"b", "\u00e9\u4e2d\U0001F600"))] + config()
L += [r'{"t":"config","name":"ESCAPES","value":"q\" bs\\ sl\/ b\b f\f n\n r\r t\t A\u0041 e\u00E9 g\ud834\udd1e","source":"x"}']
L += [device(used=1 * MiB, allocs=1)]
L += [alloc(0x7f0000000000, 1 * MiB, 9, 10)]
L += [rec(t="stack", id=9, frames=[{"m": "<img src=x onerror=alert(1)>", "o": "10", "s": "f;g<b>&amp;"}])]
write("hostile_strings.jsonl", L)

# refused: a newer format, and malformed files.
write("bad_newer_format.jsonl", [header("ceiling", fmt=2), rec(t="future", x=1)])
L = [header("ceiling")] + config() + [device(used=1), '{"t":"a","p":"7f00","s":12,"d":0,"api":1,"age":1,"tid":1,"st":1,}']
write("bad_syntax.jsonl", L)
write("bad_deep.jsonl", [header("exit"), '{"t":"stack","id":1,"frames":[{"m":[[1]]}]}'])
write("bad_not_a_dump.jsonl", ['{"hello":"world"}'], end=False)
write("bad_escape.jsonl", [header("exit"), '{"t":"config","name":"X","value":"\\ud800","source":"environment"}'])
write("bad_float.jsonl", [header("exit"), '{"t":"a","p":"7f00","s":1.5,"d":0,"api":1,"age":1,"tid":1,"st":0}'])
write("bad_type.jsonl", [header("exit"), '{"t":"a","p":"7f00","s":"12","d":0,"api":1,"age":1,"tid":1,"st":0}'])
write("bad_device.jsonl", [header("exit"), rec(t="a", p="7f00", s=1, d=99, api=1, age=1, tid=1, st=0)])
write("bad_frame.jsonl", [header("exit"), '{"t":"stack","id":1,"frames":[{"m":"a","o":"1"},2]}'])
write("bad_vmm.jsonl", [header("exit"), rec(t="host", rss=1, cgroup_version=0, cgroup_limit=None, cgroup_usage=None,
                                          cgroup_oom_kill=None, pinned_bytes=0, pinned_allocs=0),
                       vmm(0x7f0000000000, 1 * GiB, 2 * GiB, 0, 0)])
write("bad_peak_site.jsonl", [header("exit"), '{"t":"peak_site","dev":0,"st":0,"bytes":5,"at":4,"ms":1}'])
write("bad_meminfo_via.jsonl", [header("exit"), '{"t":"meminfo","n":0,"of":1,"ms":0,"dev":0,"free":1,"total":2,'
                                '"used":0,"via":"smi"}'])


# ---- issue 11: programs that size themselves, and sizing from the peak ----

def meminfo(n, of, ms, free, total, used, dev=0):
    return rec(t="meminfo", n=n, of=of, ms=ms, dev=dev, free=free, total=total, used=used)


def peak(bytes_, ms, live, dev=0):
    return rec(t="peak", dev=dev, bytes=bytes_, ms=ms, live=live)


def host2(rss=2 * GiB, limit=16 * GiB, usage=4 * GiB, oom=0, pinned=256 * MiB, inactive=None):
    return rec(t="host", rss=rss, cgroup_version=2, cgroup_limit=limit, cgroup_usage=usage, cgroup_oom_kill=oom,
               pinned_bytes=pinned, pinned_allocs=4, cgroup_inactive_file=inactive)


def frames(*fs):
    return [{"m": m, "o": o, "s": s} if s else {"m": m, "o": o} for (m, o, s) in fs]


def stack_rec(i, fs):
    return rec(t="stack", id=i, frames=frames(*fs))


UP = 600000  # uptime of these dumps, ms


def at(ms):
    """age of an allocation made ms after start"""
    return UP - ms


# vLLM-like: asks cuMemGetInfo, loads 8 GiB of weights, profiles (1 GiB of
# activations, freed), asks again, allocates its KV cache as 32 tensors of
# 0.9 x total - weights - activations, then serves; activations outside the
# cache push it over the 16 GiB ceiling it was told is the total.
T = 16 * GiB
KV = int(0.9 * T) - 8 * GiB - 1 * GiB
L = [header("ceiling", uptime_ms=UP, cmd=("python3", "-m", "vllm.entrypoints.openai.api_server",
                                          "--gpu-memory-utilization", "0.9"))] + config("16Gi")
held = 8 * GiB + KV + 512 * MiB + 1024 * MiB
L += [device(limit=T, used=held, peak=held, allocs=200, frees=120, rc=1, dfree=64 * GiB, dtotal=80 * GiB)]
L += [request(1536 * MiB, "refused_ceiling", stack=4)]
L += [host2(inactive=1 * GiB)]
L += [meminfo(0, 3, 1000, T, T, 0), meminfo(1, 3, 5000, 8 * GiB, T, 8 * GiB), meminfo(2, 3, 5200, T - 8 * GiB - KV, T, 8 * GiB + KV)]
L += [peak(held, 590000, held)]
L += [alloc(0x7f0000000000 + i * GiB, GiB, 1, at(2000 + i * 100)) for i in range(8)]
L += [alloc(0x7e0000000000 + i * (KV // 32), KV // 32, 2, at(5100)) for i in range(32)]
L += [alloc(0x7d0000000000, 512 * MiB, 3, at(6000))]
L += [alloc(0x7c0000000000 + i * 256 * MiB, 256 * MiB, 4, at(589000)) for i in range(4)]
L += [stack_rec(1, [("libcuda.so.1", "2a1f0", "cuMemAlloc_v2"), ("libc10_cuda.so", "41f00", None),
                    ("python3", "9f00", None)]),
      stack_rec(2, [("libcuda.so.1", "2a1f0", "cuMemAlloc_v2"), ("libtorch_cuda.so", "77a000", None),
                    ("worker.py", "1", "vllm.worker.cache_engine._allocate_kv_cache")]),
      stack_rec(3, [("libcuda.so.1", "2a1f0", "cuMemAlloc_v2"), ("libcudart.so.12", "51c2", "cudaMalloc"),
                    ("model_runner.py", "2", "vllm.worker.model_runner.capture_graphs")]),
      stack_rec(4, [("libcuda.so.1", "2a1f0", "cuMemAlloc_v2"), ("libcudart.so.12", "51c2", "cudaMalloc"),
                    ("model_runner.py", "3", "vllm.worker.model_runner.execute_model")])]
H = [hist(4000, "a", 0x7b0000000000, 1 * GiB, 5), hist(4500, "f", 0x7b0000000000, 1 * GiB, 5)]
for k in range(40):  # activations come and go while it serves
    for j in range(4):
        H.append(hist(10000 + k * 14000 + j, "a", 0x7c0000000000 + j * 256 * MiB, 256 * MiB, 4))
    if k < 39:
        for j in range(4):
            H.append(hist(10000 + k * 14000 + 10 + j, "f", 0x7c0000000000 + j * 256 * MiB, 256 * MiB, 4))
H.append(hist(590000, "r", 0, 1536 * MiB, 4))
L += H
write("sizing_vllm.jsonl", L)

# JAX-like: preallocates 75 % of the total it is told in one allocation
# (XLA_PYTHON_CLIENT_MEM_FRACTION=.75), then NCCL and cuBLAS workspaces
# outside that pool meet the ceiling.
L = [header("ceiling", uptime_ms=UP, cmd=("python3", "train.py"))] + config("16Gi")
held = 12 * GiB + 2 * GiB + 1 * GiB
L += [device(limit=T, used=held, peak=held, allocs=30, frees=20, rc=1, dfree=64 * GiB, dtotal=80 * GiB)]
L += [request(2 * GiB, "refused_ceiling", stack=3)]
L += [host2(inactive=512 * MiB)]
L += [meminfo(0, 1, 800, T, T, 0), peak(held, 400000, held)]
L += [alloc(0x7f0000000000, 12 * GiB, 1, at(810))]
L += [alloc(0x7e0000000000 + i * 512 * MiB, 512 * MiB, 2, at(20000)) for i in range(4)]
L += [alloc(0x7d0000000000, 1 * GiB, 3, at(400000))]
L += [stack_rec(1, [("libcuda.so.1", "2a1f0", "cuMemAlloc_v2"),
                    ("xla_extension.so", "9a1b20", "stream_executor::gpu::GpuDriver::DeviceAllocate"),
                    ("xla_extension.so", "5100a0", "xla::gpu::GpuBFCAllocator")]),
      stack_rec(2, [("libcuda.so.1", "2a1f0", "cuMemAlloc_v2"), ("libnccl.so.2", "3f000", "ncclCommInitRank")]),
      stack_rec(3, [("libcuda.so.1", "2a1f0", "cuMemAlloc_v2"), ("libcublasLt.so.12", "1200", None),
                    ("xla_extension.so", "61aa00", None)])]
H = []
for k in range(10):
    H += [hist(30000 + k * 30000, "a", 0x7d0000000000, 1 * GiB, 3), hist(30000 + k * 30000 + 50, "f", 0x7d0000000000, 1 * GiB, 3)]
H += [hist(400000, "a", 0x7d0000000000, 1 * GiB, 3), hist(400010, "r", 0, 2 * GiB, 3)]
L += H
write("sizing_jax.jsonl", L)

# PyTorch-like: no memory-info query; the caching allocator's frames are in
# the stacks (c10::cuda::CUDACachingAllocator), so its hint names them.
L = [header("ceiling", uptime_ms=UP, cmd=("python3", "train.py"))] + config("8Gi")
segs = [20 * MiB] * 100 + [2 * MiB] * 200 + [64 * MiB] * 60
used = sum(segs)
L += [device(limit=8 * GiB, used=used, peak=used, allocs=len(segs), rc=1, dfree=64 * GiB, dtotal=80 * GiB)]
L += [request(8 * GiB - used + 32 * MiB, "refused_ceiling", stack=1)]
L += [host2(inactive=256 * MiB)]
L += [alloc(0x7f0000000000 + i * 64 * MiB, s, 1, at(1000 + i)) for i, s in enumerate(segs)]
L += [rec(t="stack", id=1, frames=[{"m": "libcuda.so.1", "o": "2a1f0", "s": "cuMemAlloc_v2"},
                                    {"m": "libcudart.so.12", "o": "51c2", "s": "cudaMalloc"},
                                    {"m": "libc10_cuda.so", "o": "4a1f0",
                                     "s": "_ZN3c104cuda20CUDACachingAllocator6Native22NativeCachingAllocator6mallocEPPvimP11CUstream_st"},
                                    {"m": "libtorch_python.so", "o": "9910"}])]
write("sizing_pytorch.jsonl", L)

# Plain C: 2 MiB blocks from its own allocator, no PyTorch anywhere: the
# report must not call it PyTorch's caching allocator.
L = [header("ceiling", uptime_ms=UP, cmd=("./solver", "--grid", "4096"))] + config("4Gi")
n = 1900
L += [device(limit=4 * GiB, used=n * 2 * MiB, peak=n * 2 * MiB, allocs=n, rc=1, dfree=64 * GiB, dtotal=80 * GiB)]
L += [request(256 * MiB, "refused_ceiling", stack=1)]
L += [host2(inactive=64 * MiB)]
L += [alloc(0x7f0000000000 + i * 2 * MiB, 2 * MiB, 1, at(1000 + i * 10)) for i in range(n)]
L += [stack_rec(1, [("libcuda.so.1", "2a1f0", "cuMemAlloc_v2"), ("solver", "1a20", "alloc_block"),
                    ("solver", "1100", "main")])]
write("sizing_plain_c.jsonl", L)

# Sizing from the peak: no ceiling, an exit dump with nothing live; the
# history holds the run up to its 7.38 GiB peak and back.
L = [header("exit", uptime_ms=UP, cmd=("./batch",))] + config("")
pk = int(7.38 * GiB) // MiB * MiB
L += [device(limit=None, used=0, peak=pk, allocs=3, frees=3, dfree=64 * GiB, dtotal=80 * GiB)]
L += [host2(inactive=128 * MiB), peak(pk, 300000, 0)]
L += [stack_rec(1, [("libcuda.so.1", "2a1f0", "cuMemAlloc_v2"), ("batch", "1200", "load_model")]),
      stack_rec(2, [("libcuda.so.1", "2a1f0", "cuMemAlloc_v2"), ("batch", "1300", "run_batch")]),
      stack_rec(3, [("libcuda.so.1", "2a1f0", "cuMemAlloc_v2"), ("batch", "1400", "make_workspace")])]
L += [hist(1000, "a", 0x7f0000000000, 4 * GiB, 1), hist(200000, "a", 0x7e0000000000, pk - 4 * GiB - 512 * MiB, 2),
      hist(300000, "a", 0x7d0000000000, 512 * MiB, 3), hist(300100, "f", 0x7d0000000000, 512 * MiB, 3),
      hist(400000, "f", 0x7e0000000000, pk - 4 * GiB - 512 * MiB, 2), hist(590000, "f", 0x7f0000000000, 4 * GiB, 1)]
write("sizing_peak_exit.jsonl", L)

# Host: 15 GiB of a 16 GiB cgroup, but 14 GiB of it is inactive page cache
# (weights read through it): the working set is 1 GiB, no OOMKill risk.
L = [header("signal", uptime_ms=UP)] + config()
L += [device(used=1 * GiB, allocs=1)]
L += [host2(rss=21 * MiB, limit=16 * GiB, usage=15 * GiB, inactive=14 * GiB, pinned=0)]
L += [alloc(0x7f0000000000, 1 * GiB, 3, at(1000))] + stacks([3])
write("host_pagecache.jsonl", L)
