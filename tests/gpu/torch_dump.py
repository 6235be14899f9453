#!/usr/bin/env python3
"""gpuguard on a real GPU: a PyTorch OOM at the ceiling leaves a dump that
`gpuguard report` reads and that names the PyTorch call path.

For each allocator configuration (native caching allocator, the
cudaMallocAsync backend) a fresh subprocess runs under
LD_PRELOAD=libgpuguard.so GPUGUARD_LIMIT=4Gi GPUGUARD_DUMP_DIR=<fresh temp
dir> and allocates 256 MiB tensors until torch.OutOfMemoryError. After it
exits, the parent checks that:
  * the child ended in torch.OutOfMemoryError;
  * the dir holds at least one gpuguard-*.jsonl dump whose header has
    trigger "ceiling";
  * `gpuguard report --json DUMP` exits 0, is a "gpuguard_report": 1 document
    with dump.trigger "ceiling" and a "ceiling_reached" diagnosis, and the
    failing request's frames and the top call site's frames (sites_by_bytes[0])
    mention PyTorch: a module libc10*/libtorch* or a symbol with
    CUDACachingAllocator, CUDAMallocAsyncAllocator or c10::cuda in it
    (mangled or not);
  * `gpuguard report DUMP` exits 0, says "ceiling reached" and names a
    PyTorch frame (with --frames 64 if the default 8 frames stop short).

Prints one line per configuration, the format tests/gpu/gg_gpu.h uses:
  GGRESULT program=torch_dump_<config> ceiling=.. meminfo=n/a refusal=.. working=n/a result=PASS|FAIL|SKIP reason=..
(ceiling: the OOM came at the ceiling; result: that and the dump and report
checks; reason: the first failure, or on a pass the PyTorch frame the report
named). Exit status: 0 unless a configuration failed (a missing torch or
CUDA is a skip, not a failure). The dump dir is removed after a pass and kept
(its path printed) after a failure.

  torch_dump.py [--lib LIB] [--gpuguard BIN] [--configs "native cudaMallocAsync"]
  torch_dump.py --check-dir DIR [--gpuguard BIN] [--no-torch]
        only the dump/report checks on an existing dump dir (--no-torch: skip
        the PyTorch-frame checks; for testing this script on the simulator)
  torch_dump.py --child CONFIG        the allocating child (internal)
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from gg_torch import built, child_env, preflight, result_line  # tests/gpu/gg_torch.py, beside this script

MIB = 1 << 20
CHUNK = 256 * MIB
CHILD_TIMEOUT = 150
REPORT_TIMEOUT = 60
DUMP_WAIT = 15  # seconds the child holds its tensors for the dump to appear

CONFIGS = {
    "native": None,
    "cudaMallocAsync": "backend:cudaMallocAsync",
}

TORCH_MODULE = re.compile(r"^lib(c10|torch)[A-Za-z0-9_]*\.so")
TORCH_SYMBOL = re.compile(r"CUDACachingAllocator|CUDAMallocAsyncAllocator|c10::cuda|3c104cuda")


# ---- child: fill the GPU until PyTorch gives up --------------------------

def child(config):
    import torch

    if not torch.cuda.is_available():
        print("GGCHILD skip torch.cuda.is_available()=False", flush=True)
        return 77
    oom_type = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    print("GGINFO torch_dump_%s: torch %s, CUDA %s, PYTORCH_CUDA_ALLOC_CONF=%s, backend=%s" % (
        config, torch.__version__, torch.version.cuda, os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "(unset)"),
        getattr(torch.cuda, "get_allocator_backend", lambda: "?")()), flush=True)
    tensors = []
    refusal, message = "none", ""
    for _ in range(64):  # 16 GiB: far past the 4 GiB ceiling
        try:
            tensors.append(torch.empty(CHUNK, dtype=torch.uint8, device=dev))
        except Exception as e:  # noqa: BLE001 - the type is what we test
            refusal = "torch.OutOfMemoryError" if oom_type and isinstance(e, oom_type) else type(e).__name__
            message = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
            break
    print("GGCHILD allocated=%d refusal=%s" % (len(tensors), refusal), flush=True)
    print("GGINFO torch_dump_%s: allocated %d x 256 MiB; refusal %s: %s" % (
        config, len(tensors), refusal, message), flush=True)
    # The library's writer thread takes its snapshot of the live table when it
    # writes, not at the refusal: hold the tensors until the dump is there, or
    # frees (cudaMallocAsync returns memory at once) could empty it first.
    dump_dir = os.environ.get("GPUGUARD_DUMP_DIR", ".")
    deadline = time.monotonic() + DUMP_WAIT
    while not glob.glob(os.path.join(dump_dir, "gpuguard-*.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.05)
    del tensors
    torch.cuda.synchronize()
    return 0


# ---- the dump and report checks ------------------------------------------

def is_torch_frame(fr):
    m = fr.get("m") or ""
    s = fr.get("s") or ""
    return bool(TORCH_MODULE.match(os.path.basename(m)) or TORCH_SYMBOL.search(s))


def fmt_frames(frames, n=12):
    out = []
    for fr in frames[:n]:
        s = fr.get("s")
        out.append("%s+0x%s%s" % (fr.get("m"), fr.get("o"), " (%s)" % s[:80] if s else ""))
    return " <- ".join(out) if out else "(no frames)"


def header_of(path):
    with open(path, "r", errors="replace") as f:
        first = f.readline()
    try:
        h = json.loads(first)
    except ValueError:
        return None
    return h if isinstance(h, dict) and h.get("t") == "header" else None


def check_dir(dump_dir, gg, fail, info, want_torch=True):
    """The dump and report checks; fail(msg) records a failure. Returns None after a failure, else
    the first PyTorch frame of the top call site ("-" with want_torch False)."""
    n_fail = [0]

    def bad(msg):
        n_fail[0] += 1
        fail(msg)

    dumps = sorted(glob.glob(os.path.join(dump_dir, "gpuguard-*.jsonl")), key=os.path.getmtime)
    if not dumps:
        bad("no gpuguard-*.jsonl dump in %s (files: %s)" % (dump_dir, os.listdir(dump_dir)))
        return None
    ceiling = []
    for p in dumps:
        h = header_of(p)
        trig = h.get("trigger") if h else None
        info("dump %s: trigger %s, unwinder %s, stack_depth %s" % (
            os.path.basename(p), trig, h and h.get("unwinder"), h and h.get("stack_depth")))
        if trig == "ceiling":
            ceiling.append(p)
    if not ceiling:
        bad("none of the %d dumps has trigger \"ceiling\"" % len(dumps))
        return None
    dump = ceiling[0]

    # JSON report
    try:
        r = subprocess.run([gg, "report", "--json", dump], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=REPORT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        bad("gpuguard report --json: %s" % e)
        return None
    if r.returncode != 0:
        bad("gpuguard report --json exit status %d: %s" % (
            r.returncode, r.stderr.decode(errors="replace").strip()[-300:]))
        return None
    try:
        rep = json.loads(r.stdout.decode(errors="replace"))
    except ValueError as e:
        bad("gpuguard report --json output is not one JSON document: %s" % e)
        return None
    if rep.get("gpuguard_report") != 1:
        bad("report JSON lacks \"gpuguard_report\": 1")
    trig = (rep.get("dump") or {}).get("trigger")
    if trig != "ceiling":
        bad("report dump.trigger is %r, not \"ceiling\"" % trig)
    kinds = [g.get("kind") for g in rep.get("diagnoses") or []]
    info("diagnoses: %s" % (", ".join("%s" % k for k in kinds) or "none"))
    if not kinds or kinds[0] != "ceiling_reached":
        bad("first diagnosis is %s, not ceiling_reached (all: %s)" % (kinds[0] if kinds else None, kinds))
    req = rep.get("request")
    if not isinstance(req, dict):
        bad("report has no failing request")
        req = {}
    else:
        info("request: %s of %s bytes, outcome %s" % (req.get("api"), req.get("size"), req.get("outcome")))
        if req.get("outcome") != "refused_ceiling":
            bad("request outcome is %r, not refused_ceiling" % req.get("outcome"))
    sites = rep.get("sites_by_bytes") or []
    if not sites:
        bad("report has no call sites (sites_by_bytes empty)")
    top = sites[0] if sites else {}
    req_frames = req.get("frames") or []
    top_frames = top.get("frames") or []
    info("request frames: %s" % fmt_frames(req_frames))
    info("top site (stack %s, %s bytes in %s): %s" % (
        top.get("stack"), top.get("live_bytes"), top.get("live_count"), fmt_frames(top_frames)))
    if not top_frames:
        bad("top call site has no frames (stack capture off?)")
    if want_torch:
        if not any(is_torch_frame(fr) for fr in top_frames):
            bad("top call site's frames name no PyTorch module or symbol")
        if req_frames and not any(is_torch_frame(fr) for fr in req_frames):
            bad("failing request's frames name no PyTorch module or symbol")

    # text report
    def text(extra):
        try:
            t = subprocess.run([gg, "report"] + extra + [dump], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=REPORT_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as e:
            return -1, str(e)
        return t.returncode, t.stdout.decode(errors="replace")

    rc, out = text([])
    if rc != 0:
        bad("gpuguard report exit status %d" % rc)
    else:
        if not re.search(r"^DIAGNOSIS\s*\n\s+ceiling reached", out, re.M):
            bad("text report's first diagnosis is not \"ceiling reached\"")
        torch_text = re.compile(r"\blib(c10|torch)[A-Za-z0-9_]*\.so|" + TORCH_SYMBOL.pattern)
        if want_torch and not torch_text.search(out):
            rc2, out2 = text(["--frames", "64"])
            if rc2 == 0 and torch_text.search(out2):
                info("text report names PyTorch only with --frames 64 (beyond the default 8 frames)")
            else:
                bad("text report names no PyTorch module or symbol, even with --frames 64")
    if n_fail[0]:
        return None
    first = [fr for fr in top_frames if is_torch_frame(fr)]
    return (first[0].get("s") or first[0].get("m")) if first and want_torch else "-"


# ---- parent: one subprocess per configuration ----------------------------

def run_config(name, conf, lib, gg):
    program = "torch_dump_" + name
    failures = []

    def fail(msg):
        failures.append(msg)
        print("GGFAIL %s: %s" % (program, msg), flush=True)

    def info(msg):
        print("GGINFO %s: %s" % (program, msg), flush=True)

    dump_dir = tempfile.mkdtemp(prefix="gg-torch-dump-")
    env = child_env(lib, drop=("GPUGUARD_STACK_DEPTH", "GPUGUARD_DUMP_MAX", "GPUGUARD_DUMP_INTERVAL",
                               "GPUGUARD_DUMP_AT_EXIT"), GPUGUARD_DUMP_DIR=dump_dir,
                    **({"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else {}))
    try:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=CHILD_TIMEOUT)
        out, err, rc = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace"), r.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace")
        err, rc = "timed out after %d s" % CHILD_TIMEOUT, 124
    for ln in out.splitlines():
        if ln.startswith("GGINFO "):
            print(ln)
    if rc == 77:
        shutil.rmtree(dump_dir, ignore_errors=True)
        print(result_line(program, result="SKIP", reason="torch without CUDA under the preload"), flush=True)
        return 0
    m = re.search(r"^GGCHILD allocated=(\d+) refusal=(\S+)", out, re.M)
    refusal = m.group(2) if m else "n/a"
    ceiling = "n/a"
    if rc != 0 or not m:
        for ln in err.strip().splitlines()[-15:]:
            fail("stderr: %s" % ln)
        fail("child exit status %d" % rc)
    else:
        n = int(m.group(1))
        ok = refusal == "torch.OutOfMemoryError" and 12 <= n <= 16
        ceiling = "yes" if ok else "no"
        if not ok:
            fail("%d x 256 MiB then %s (expected 12..16, then torch.OutOfMemoryError)" % (n, refusal))
    for ln in err.splitlines():
        if ln.startswith("gpuguard:"):
            info("stderr: %s" % ln)
    named = check_dir(dump_dir, gg, fail, info)
    if failures:
        info("dump dir kept: %s" % dump_dir)
    else:
        shutil.rmtree(dump_dir, ignore_errors=True)
    print(result_line(program, ceiling, "n/a", refusal, "n/a", "FAIL" if failures else "PASS",
                      failures[0][:120] if failures else ("report names " + named)[:100]), flush=True)
    return 1 if failures else 0


def parent(lib, gg, configs):
    rc = preflight(["torch_dump_" + name for name in configs], [lib, gg])
    if rc is not None:
        return rc
    failed = 0
    for name in configs:
        if name not in CONFIGS:
            print(result_line("torch_dump_" + name, reason="unknown configuration"))
            failed += 1
            continue
        failed += run_config(name, CONFIGS[name], lib, gg)
        sys.stdout.flush()
    return 1 if failed else 0


def main(argv):
    args = argv[1:]
    if len(args) >= 2 and args[0] == "--child":
        return child(args[1])
    lib = built("lib", "libgpuguard.so")
    gg = built("bin", "gpuguard")
    configs = list(CONFIGS)
    check_only, want_torch = None, True
    while args:
        a = args.pop(0)
        if a in ("--lib", "--gpuguard", "--configs", "--check-dir") and args:
            v = args.pop(0)
            if a == "--lib":
                lib = v
            elif a == "--gpuguard":
                gg = v
            elif a == "--configs":
                configs = v.split()
            else:
                check_only = v
        elif a == "--no-torch":
            want_torch = False
        else:
            print("usage: see the docstring of %s" % argv[0], file=sys.stderr)
            return 2
    gg = os.path.abspath(gg)
    if check_only is not None:
        fails = []
        named = check_dir(check_only, gg, lambda m: (fails.append(m), print("GGFAIL check: " + m)),
                          lambda m: print("GGINFO check: " + m), want_torch)
        ok = named is not None and not fails
        print(result_line("torch_dump_check", result="PASS" if ok else "FAIL",
                          reason=fails[0][:120] if fails else "report names " + named))
        return 0 if ok else 1
    return parent(os.path.abspath(lib), gg, configs)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
