"""gpuguard check-gpu: what the PyTorch checks (torch_check.py, torch_dump.py,
torch_pod.py) share: the GGRESULT line tests/gpu/gg_gpu.h defines, and the
test, made before any child starts, that torch with CUDA and the files a
check needs are here."""
import os

# This tree's build/, where the library and the gpuguard command are.
BUILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build")


def built(*parts):
    """A path under this tree's build/ (the default --lib, --gpuguard)."""
    return os.path.join(BUILD, *parts)


def child_env(lib, drop=(), **values):
    """This environment for a child under the preload: lib first in
    LD_PRELOAD, GPUGUARD_LIMIT=4Gi and no allocator configuration of the
    caller's (PYTORCH_[CUDA_]ALLOC_CONF), less drop, plus values."""
    env = dict(os.environ)
    env["LD_PRELOAD"] = lib + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    env["GPUGUARD_LIMIT"] = "4Gi"
    for k in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF") + tuple(drop):
        env.pop(k, None)
    env.update(values)
    return env


def result_line(program, ceiling="n/a", meminfo="n/a", refusal="n/a", working="n/a", result="FAIL", reason=None):
    line = "GGRESULT program=%s ceiling=%s meminfo=%s refusal=%s working=%s result=%s" % (
        program, ceiling, meminfo, refusal, working, result)
    if reason:
        line += " reason=" + reason.replace(" ", "_").replace("|", "/")
    return line


def preflight(programs, paths):
    """None when the checks can run. Otherwise prints one row per program and
    returns the exit status: 0 with SKIP rows when torch or CUDA is missing
    (that is no failure), 1 with FAIL rows when a file in paths is missing."""
    try:
        import torch  # noqa: F401 - probing only, without the preload
    except Exception as e:  # noqa: BLE001
        reason = "torch not importable (%s)" % type(e).__name__
    else:
        reason = None if torch.cuda.is_available() else "torch without CUDA"
    if reason:
        for p in programs:
            print(result_line(p, result="SKIP", reason=reason))
        return 0
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        for p in programs:
            print(result_line(p, reason="missing " + " ".join(missing)))
        return 1
    return None


# This tree's public header: the layout of struct gpuguard_device_stats.
HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "gpuguard.h")


def stats_fields(header=HEADER):
    """The fields of struct gpuguard_device_stats as ctypes wants them, read
    from the header: a list typed here by hand went stale when the struct
    grew (pod, process_used), and the library then wrote past the end of
    the Python object. Raises ValueError when the header reads otherwise."""
    import ctypes
    import re

    with open(header) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    enum = re.search(r"enum\s+gpuguard_refusal\s*{(.*?)}", text, re.S)
    body = re.search(r"struct\s+gpuguard_device_stats\s*{(.*?)}\s*;", text, re.S)
    if not enum or not body:
        raise ValueError("%s: no enum gpuguard_refusal or struct gpuguard_device_stats" % header)
    names = [n.split("=")[0].strip() for n in enum.group(1).split(",") if n.strip()]
    consts = {n: i for i, n in enumerate(names)}  # GPUGUARD_REFUSED_COUNT is the last
    fields = []
    for decl in body.group(1).split(";"):
        decl = decl.strip()
        if not decl:
            continue
        m = re.fullmatch(r"uint64_t\s+(\w+)(?:\s*\[\s*(\w+)\s*\])?", decl)
        if not m:
            raise ValueError("%s: unexpected field %r in struct gpuguard_device_stats" % (header, decl))
        n = m.group(2)
        if n is None:
            fields.append((m.group(1), ctypes.c_uint64))
        else:
            count = int(n) if n.isdigit() else consts.get(n)
            if count is None:
                raise ValueError("%s: unknown array size %s" % (header, n))
            fields.append((m.group(1), ctypes.c_uint64 * count))
    return fields
