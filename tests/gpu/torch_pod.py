#!/usr/bin/env python3
"""gpuguard pod scope on a real GPU: two PyTorch processes, one budget.

Child processes of this script (same file, --child ROLE) run under
LD_PRELOAD=libgpuguard.so GPUGUARD_LIMIT=4Gi GPUGUARD_SCOPE=pod with one fresh
GPUGUARD_SHARED region file per phase, GPUGUARD_CONTEXT_RESERVE=0 and
PYTORCH_NO_CUDA_MEMORY_CACHING=1 (PyTorch calls cudaMalloc / cudaFree
directly, so a `del` gives the memory back at once). The parent drives them
one line at a time over stdin/stdout and reads the region's device entry
itself (struct, per include/gpuguard/region.h) to know what the pod uses.
The checks, one result line each:
  meminfo  A holds 3 GiB; B's torch.cuda.mem_get_info() says total == 4 GiB,
           free <= 1 GiB and free == limit - used of the region (2 MiB slack);
  nvml     the same through pynvml in B (device matched by UUID with torch's
           device 0): total == 4 GiB, free <= 1 GiB and == limit - used
           (SKIP when pynvml is not importable);
  refusal  B's 2 GiB is refused with an out-of-memory error. Uncached,
           PyTorch checks cudaMalloc with C10_CUDA_CHECK, which raises a
           RuntimeError (torch.AcceleratorError in newer releases) saying "out
           of memory", not torch.OutOfMemoryError: either passes, and the
           refusal column says which it was;
  free     after A's del + torch.cuda.empty_cache(), B's 2 GiB fits (and is
           written and read back);
  kill9    A takes 3 GiB again and gets SIGKILL; once it is reaped, B's
           3 GiB fits within 1 s (B retries a refusal every 20 ms: the library
           sweeps for dead processes at most every 10 ms per process; the
           dead process's charge comes back through its slot lock);
  wait     a fresh A2 and B2, B2 with GPUGUARD_ON_LIMIT=wait:3s: A2 holds
           3 GiB, B2 asks for 2 GiB in a thread, A2 frees 0.5 s later; B2's
           request succeeds, no exception, after >= 0.4 s.
Each child step has 30 s, the whole script 120 s; children are always
killed at the end.

Prints one line per check, the format tests/gpu/gg_gpu.h uses:
  GGRESULT program=torch_pod_<check> ceiling=.. meminfo=.. refusal=.. working=.. result=PASS|FAIL|SKIP reason=..
(reason: the first failure, or on a pass what was measured). Exit status: 0
unless a check failed (a missing torch or CUDA is a skip, not a failure). The
temporary directory (region files, children's stderr) is removed after a pass
and kept (its path printed) after a failure.

  torch_pod.py [--lib build/lib/libgpuguard.so]
  torch_pod.py --child ROLE        a child (internal)
"""
import json
import os
import queue
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

from gg_torch import built, child_env, preflight, result_line  # tests/gpu/gg_torch.py, beside this script

GIB = 1 << 30
MIB = 1 << 20
CEILING = 4 * GIB
SLACK = 2 * MIB
STEP_TIMEOUT = 30.0
TOTAL_TIMEOUT = 120.0
CLEANUP_RESERVE = 10.0  # seconds of TOTAL_TIMEOUT kept for stopping children
WAIT_SPEC = "wait:3s"
FREE_AFTER = 0.5  # A2 frees this long after B2's request started
MIN_WAITED = 0.4
KILL_FIT = 1.0  # B's 3 GiB after the kill must take less than this

CHECKS = ["meminfo", "nvml", "refusal", "free", "kill9", "wait"]
PHASE1 = ["meminfo", "nvml", "refusal", "free", "kill9"]
PHASE2 = ["wait"]
COLUMN = {"meminfo": "meminfo", "nvml": "meminfo", "refusal": "ceiling", "free": "working", "kill9": "working",
          "wait": "working"}

# include/gpuguard/region.h, little-endian
REGION_MAGIC = 0x31444F5044524747  # "GGRDPOD1"
REGION_DEVICE_OFF = 512
REGION_DEVICES = 16
REGION_DEVICE_SIZE = 128
REGION_PROC_OFF = REGION_DEVICE_OFF + REGION_DEVICES * REGION_DEVICE_SIZE
REGION_PROCS = 256
REGION_PROC_SIZE = 256
RDEV_READY = 2
RDEV_CUDA = 1
RPROC_LIVE = 1


def gib(n):
    return "%.3f GiB" % (n / GIB) if isinstance(n, int) else "?"


def norm_uuid(u):
    """32 lower-case hex digits from "GPU-xxxxxxxx-xxxx-..." or a bare UUID, else None."""
    if u is None:
        return None
    if isinstance(u, bytes):
        u = u.decode(errors="replace")
    s = str(u).strip().lower()
    if s.startswith("gpu-"):
        s = s[4:]
    s = s.replace("-", "")
    return s if len(s) == 32 and all(c in "0123456789abcdef" for c in s) else None


# ---- child: one process of the pod, driven over stdin/stdout --------------

def torch_uuid(torch):
    try:
        u = torch.cuda.get_device_properties(0).uuid
    except Exception:  # noqa: BLE001 - older torch has no uuid
        return None
    b = getattr(u, "bytes", None)
    if b is not None and not isinstance(b, str):
        try:
            b = bytes(b)
            if len(b) == 16:
                return b.hex()
        except (TypeError, ValueError):
            pass
    return norm_uuid(u)


def child(role):
    lock = threading.Lock()

    def say(obj):
        with lock:
            sys.stdout.write("GGREPLY " + json.dumps(obj) + "\n")
            sys.stdout.flush()

    def info(msg):
        with lock:
            print("GGINFO torch_pod: %s: %s" % (role, msg), flush=True)

    try:
        import gc
        import torch
    except Exception as e:  # noqa: BLE001
        say({"skip": "torch not importable under the preload (%s)" % type(e).__name__})
        return 0
    if not torch.cuda.is_available():
        say({"skip": "torch.cuda.is_available()=False under the preload"})
        return 0
    oom_type = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    free, total = torch.cuda.mem_get_info(dev)
    uuid = torch_uuid(torch)
    info("pid %d, torch %s, CUDA %s, device uuid %s, GPUGUARD_ON_LIMIT=%s; mem_get_info free=%d total=%d" % (
        os.getpid(), torch.__version__, torch.version.cuda, uuid, os.environ.get("GPUGUARD_ON_LIMIT"), free, total))
    held = []

    def alloc(n, touch=False):
        t0 = time.monotonic()
        try:
            t = torch.empty(n, dtype=torch.uint8, device=dev)
            s = time.monotonic() - t0
            held.append(t)
            if touch:
                t.fill_(7)
                if int(t[-1].item()) != 7 or int(t[0].item()) != 7:
                    return {"ok": False, "s": s, "type": "none", "oom": False, "msg": "read back a wrong value"}
            torch.cuda.synchronize(dev)
            return {"ok": True, "s": s}
        except Exception as e:  # noqa: BLE001 - the type is what we test
            s = time.monotonic() - t0
            text = str(e).strip()
            kind = "torch.OutOfMemoryError" if oom_type and isinstance(e, oom_type) else type(e).__name__
            oom = kind == "torch.OutOfMemoryError" or (isinstance(e, RuntimeError) and "out of memory" in text.lower())
            return {"ok": False, "s": s, "type": kind, "oom": oom, "msg": " ".join(text.split())[:400]}

    def free_all():
        del held[:]
        gc.collect()
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()
        f, t = torch.cuda.mem_get_info(dev)
        return {"ok": True, "free": f, "total": t}

    def nvml():
        try:
            import pynvml
        except Exception as e:  # noqa: BLE001
            return {"skip": "pynvml not importable (%s)" % type(e).__name__}
        try:
            pynvml.nvmlInit()
        except Exception as e:  # noqa: BLE001
            if isinstance(e, getattr(pynvml, "NVMLError_LibraryNotFound", ())):
                return {"skip": "pynvml: no libnvidia-ml"}
            return {"ok": False, "msg": "nvmlInit: %s: %s" % (type(e).__name__, e)}
        try:
            handle, how = None, None
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                if uuid and norm_uuid(pynvml.nvmlDeviceGetUUID(h)) == uuid:
                    handle, how = h, "NVML index %d, UUID as torch's device 0" % i
                    break
            if handle is None:
                handle = pynvml.nvmlDeviceGetHandleByIndex(0)
                how = "NVML index 0 (%s)" % ("no NVML UUID matched torch's" if uuid else "torch gave no UUID")
            m = pynvml.nvmlDeviceGetMemoryInfo(handle)
            return {"ok": True, "total": int(m.total), "free": int(m.free), "used": int(m.used), "how": how}
        finally:
            try:
                pynvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass

    pending = {}

    def alloc_async(n):
        # The "started" reply comes from this thread, just before the call,
        # so it cannot be held up behind the allocation.
        def run():
            say({"ok": True, "started": True})
            pending["res"] = alloc(n)
        th = threading.Thread(target=run, daemon=True)
        pending.clear()
        pending["thread"] = th
        th.start()

    def join():
        th = pending.get("thread")
        if th is None:
            return {"ok": False, "msg": "nothing to join"}
        th.join(STEP_TIMEOUT)
        if th.is_alive():
            return {"ok": False, "msg": "the allocation thread still runs after %d s" % STEP_TIMEOUT}
        return pending.get("res") or {"ok": False, "msg": "the allocation thread gave no result"}

    say({"ok": True, "pid": os.getpid(), "uuid": uuid, "free": free, "total": total})
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        cmd = words[0]
        try:
            if cmd == "alloc":
                say(alloc(int(words[1]), len(words) > 2 and words[2] == "touch"))
            elif cmd == "alloc_until":
                # alloc_until N SECONDS [touch]: retry a refused request until
                # it fits or SECONDS have passed; "s" is the time to the end.
                t0, tries = time.monotonic(), 0
                while True:
                    tries += 1
                    r = alloc(int(words[1]), len(words) > 3 and words[3] == "touch")
                    if r.get("ok") or not r.get("oom") or time.monotonic() - t0 >= float(words[2]):
                        break
                    time.sleep(0.02)
                r["s"], r["tries"] = time.monotonic() - t0, tries
                say(r)
            elif cmd == "alloc_async":
                alloc_async(int(words[1]))
            elif cmd == "join":
                say(join())
            elif cmd == "free":
                say(free_all())
            elif cmd == "meminfo":
                f, t = torch.cuda.mem_get_info(dev)
                say({"ok": True, "free": f, "total": t})
            elif cmd == "nvml":
                say(nvml())
            elif cmd == "exit":
                say({"ok": True})
                break
            else:
                say({"ok": False, "msg": "unknown command %r" % cmd})
        except Exception as e:  # noqa: BLE001 - keep answering
            say({"ok": False, "type": type(e).__name__, "msg": " ".join(str(e).split())[:400]})
    return 0


# ---- parent ----------------------------------------------------------------

class StepError(Exception):
    """A step could not be carried out: the phase stops here."""


class Skip(Exception):
    pass


class Region:
    """The pod region file, read with struct (include/gpuguard/region.h)."""

    def __init__(self, path):
        self.path = path
        self.uuid = None  # torch's device 0, 32 hex digits
        self.why = "not read yet"

    def entry(self):
        """The device entry (dict) of torch's device 0, or None with the reason in self.why."""
        try:
            with open(self.path, "rb") as f:
                buf = f.read()
        except OSError as e:
            self.why = "cannot read %s: %s" % (self.path, e.strerror)
            return None
        if len(buf) < REGION_PROC_OFF + REGION_PROCS * REGION_PROC_SIZE:
            self.why = "%s is %d bytes, shorter than a region" % (self.path, len(buf))
            return None
        if struct.unpack_from("<Q", buf, 0)[0] != REGION_MAGIC:
            self.why = "%s has no region magic" % self.path
            return None
        want = bytes.fromhex(self.uuid) if self.uuid else None
        found = None
        for i in range(REGION_DEVICES):
            off = REGION_DEVICE_OFF + i * REGION_DEVICE_SIZE
            state, kind = struct.unpack_from("<II", buf, off)
            if state != RDEV_READY:
                continue
            limit, used, peak, refused, reclaimed = struct.unpack_from("<5Q", buf, off + 24)
            waiters, wake = struct.unpack_from("<II", buf, off + 64)
            e = {"index": i, "kind": kind, "uuid": buf[off + 8:off + 24].hex(), "limit": limit, "used": used,
                 "peak": peak, "refused": refused, "reclaimed": reclaimed, "waiters": waiters, "wake": wake}
            if want is not None and kind == RDEV_CUDA and buf[off + 8:off + 24] == want:
                found = e
                break
            if found is None:
                found = e  # no UUID match (yet): the first entry in use
        if found is None:
            self.why = "no device entry in use in %s" % self.path
            return None
        slots = []
        for s in range(REGION_PROCS):
            off = REGION_PROC_OFF + s * REGION_PROC_SIZE
            state, pid = struct.unpack_from("<II", buf, off)
            if state != RPROC_LIVE:
                continue
            comm = buf[off + 16:off + 32].split(b"\0")[0].decode(errors="replace")
            used = struct.unpack_from("<Q", buf, off + 32 + 8 * found["index"])[0]
            slots.append("pid %d (%s) %s" % (pid, comm, gib(used)))
        found["slots"] = slots
        return found

    def describe(self, e):
        if e is None:
            return self.why
        return "entry %d: limit %s, used %s, peak %s, refused %d, reclaimed %s, waiters %d; live slots: %s" % (
            e["index"], gib(e["limit"]), gib(e["used"]), gib(e["peak"]), e["refused"], gib(e["reclaimed"]),
            e["waiters"], "; ".join(e["slots"]) or "none")


class Child:
    def __init__(self, run, role, region_path, on_limit):
        self.run = run
        self.role = role
        env = child_env(run.lib, GPUGUARD_SCOPE="pod", GPUGUARD_SHARED=region_path, GPUGUARD_ON_LIMIT=on_limit,
                        GPUGUARD_CONTEXT_RESERVE="0", PYTORCH_NO_CUDA_MEMORY_CACHING="1")
        env.setdefault("GPUGUARD_DUMP_DIR", run.tmp)
        self.err_path = os.path.join(run.tmp, role + ".stderr")
        self.errf = open(self.err_path, "wb")
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", role], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errf)
        self.q = queue.Queue()
        self.gone = False  # its stdout reached end of file
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        try:
            for raw in iter(self.p.stdout.readline, b""):
                self.q.put(raw.decode(errors="replace").rstrip("\n"))
        except (OSError, ValueError):
            pass
        self.q.put(None)

    def send(self, cmd):
        try:
            self.p.stdin.write((cmd + "\n").encode())
            self.p.stdin.flush()
        except (OSError, ValueError) as e:
            raise StepError("%s: cannot send %r (%s), exit status %s" % (self.role, cmd, e, self.p.poll()))

    def reply(self, what):
        if self.gone:
            raise StepError("%s has exited (status %s): cannot answer %r" % (self.role, self.p.poll(), what))
        deadline = time.monotonic() + self.run.step_timeout()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StepError("%s: no answer to %r within %.0f s" % (self.role, what, self.run.step_timeout()))
            try:
                ln = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if ln is None:
                self.gone = True
                try:
                    rc = self.p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    rc = None
                raise StepError("%s exited (status %s) before answering %r" % (self.role, rc, what))
            if ln.startswith("GGREPLY "):
                try:
                    return json.loads(ln[len("GGREPLY "):])
                except ValueError:
                    raise StepError("%s: unreadable answer to %r: %s" % (self.role, what, ln[:200]))
            if ln.startswith("GGINFO "):
                print(ln, flush=True)
            else:
                print("GGINFO torch_pod: %s says: %s" % (self.role, ln[:300]), flush=True)

    def ask(self, cmd):
        self.send(cmd)
        r = self.reply(cmd)
        if not isinstance(r, dict):
            raise StepError("%s: answer to %r is not an object" % (self.role, cmd))
        return r

    def stop(self, wait_s=3.0):
        """Asks it to exit, then kills it. Returns its exit status."""
        if self.p.poll() is None:
            try:
                self.p.stdin.write(b"exit\n")
                self.p.stdin.flush()
            except (OSError, ValueError):
                pass
            try:
                self.p.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                self.p.kill()
                try:
                    self.p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        for f in (self.p.stdin, self.p.stdout):
            try:
                f.close()
            except (OSError, ValueError):
                pass
        self.errf.close()
        return self.p.returncode

    def stderr_lines(self):
        try:
            with open(self.err_path, "r", errors="replace") as f:
                return f.read().splitlines()
        except OSError:
            return []


class Run:
    def __init__(self, lib):
        self.lib = lib
        self.t0 = time.monotonic()
        self.tmp = tempfile.mkdtemp(prefix="gg-torch-pod-")
        self.rows = {}  # check -> (result, column value, refusal, reason)
        self.children = []
        self.current = None

    def step_timeout(self):
        left = TOTAL_TIMEOUT - CLEANUP_RESERVE - (time.monotonic() - self.t0)
        if left <= 0:
            raise StepError("the script's %d s are up" % TOTAL_TIMEOUT)
        return min(STEP_TIMEOUT, left)

    def info(self, msg):
        print("GGINFO torch_pod: %s" % msg, flush=True)

    def record(self, check, ok, reason, refusal="n/a"):
        if check in self.rows:
            return
        if not ok:
            print("GGFAIL torch_pod_%s: %s" % (check, reason), flush=True)
        self.rows[check] = ("PASS" if ok else "FAIL", "yes" if ok else "no", refusal, reason)

    def skip(self, check, reason):
        if check not in self.rows:
            self.rows[check] = ("SKIP", "n/a", "n/a", reason)

    def spawn(self, role, region_path, on_limit):
        c = Child(self, role, region_path, on_limit)
        self.children.append(c)
        return c

    def start(self, *children):
        for c in children:
            r = c.reply("start")
            if r.get("skip"):
                raise Skip(r["skip"])
            if not r.get("ok"):
                raise StepError("%s did not start: %s" % (c.role, r.get("msg")))
            c.pid = r.get("pid")
            c.uuid = r.get("uuid")
            c.start_info = r

    def phase(self, checks, body):
        try:
            body()
        except Skip as e:
            for c in CHECKS:
                self.skip(c, str(e))
            raise
        except StepError as e:
            if self.current in checks:
                self.record(self.current, False, str(e))
            for c in checks:
                self.record(c, False, "not reached: %s" % e)
        finally:
            self.stop_children(any(self.rows.get(c, ("FAIL",))[0] == "FAIL" for c in checks))

    def stop_children(self, failed=False):
        """Stops every child; their stderr's gpuguard lines are shown, and its
        last lines after a failure or an unexpected exit status."""
        for c in self.children:
            rc = c.stop()
            lines = c.stderr_lines()
            for ln in lines:
                if ln.startswith("gpuguard:"):
                    self.info("%s stderr: %s" % (c.role, ln))
            if rc not in (0, -signal.SIGKILL):
                self.info("%s exit status %s" % (c.role, rc))
            if failed or rc not in (0, -signal.SIGKILL):
                for ln in lines[-15:]:
                    print("GGFAIL torch_pod: %s stderr: %s" % (c.role, ln), flush=True)
        self.children = []

    # ---- phase 1: A and B, fail at the ceiling ----------------------------

    def phase1(self):
        region = Region(os.path.join(self.tmp, "pod1"))
        self.current = "meminfo"
        a = self.spawn("A", region.path, "fail")
        b = self.spawn("B", region.path, "fail")
        self.start(a, b)
        region.uuid = b.uuid
        if a.uuid != b.uuid:
            self.info("A and B see different device UUIDs: %s, %s" % (a.uuid, b.uuid))

        # 1. meminfo: A holds 3 GiB, B sees what is left of the pod's 4 GiB.
        r = a.ask("alloc %d" % (3 * GIB))
        if not r.get("ok"):
            raise StepError("A could not take 3 GiB of an empty pod: %s: %s" % (r.get("type"), r.get("msg")))
        e0 = region.entry()
        m = b.ask("meminfo")
        e1 = region.entry()
        self.info("after A's 3 GiB: region %s" % region.describe(e1))
        if not m.get("ok"):
            raise StepError("B: mem_get_info: %s" % m.get("msg"))
        free, total = m["free"], m["total"]
        bad = []
        if total != CEILING:
            bad.append("B's mem_get_info total %d != 4 GiB" % total)
        if free > GIB:
            bad.append("B's mem_get_info free %s > 1 GiB while A holds 3 GiB" % gib(free))
        if e0 is None or e1 is None:
            bad.append("pod region: %s" % region.why)
        else:
            if e1["limit"] != CEILING:
                bad.append("region limit %d != 4 GiB" % e1["limit"])
            lo = e1["limit"] - max(e0["used"], e1["used"]) - SLACK
            hi = e1["limit"] - min(e0["used"], e1["used"]) + SLACK
            if not lo <= free <= hi:
                bad.append("B's free %d is not limit - used = %d (2 MiB slack)" % (free, e1["limit"] - e1["used"]))
            if e1["used"] < 3 * GIB:
                bad.append("region used %s < A's 3 GiB" % gib(e1["used"]))
        used = e1["used"] if e1 else None
        self.record("meminfo", not bad, bad[0] if bad else "B: total 4 GiB, free %s = limit - pod used %s" % (
            gib(free), gib(used)))

        # 6. nvml, in the same state.
        self.current = "nvml"
        r = b.ask("nvml")
        if r.get("skip"):
            self.skip("nvml", r["skip"])
        elif not r.get("ok"):
            self.record("nvml", False, "B: %s" % r.get("msg"))
        else:
            e = region.entry()
            self.info("B's NVML (%s): total=%d free=%d used=%d" % (r.get("how"), r["total"], r["free"], r["used"]))
            bad = []
            if r["total"] != CEILING:
                bad.append("NVML total %d != 4 GiB" % r["total"])
            if r["free"] > GIB:
                bad.append("NVML free %s > 1 GiB while A holds 3 GiB" % gib(r["free"]))
            if e is not None and abs(r["free"] - (e["limit"] - e["used"])) > SLACK:
                bad.append("NVML free %d is not limit - used = %d" % (r["free"], e["limit"] - e["used"]))
            self.record("nvml", not bad, bad[0] if bad else "B: NVML total 4 GiB, free %s" % gib(r["free"]))

        # 2. refusal: B's 2 GiB does not fit beside A's 3 GiB.
        self.current = "refusal"
        r = b.ask("alloc %d" % (2 * GIB))
        if r.get("ok"):
            self.record("refusal", False, "B got 2 GiB while A holds 3 GiB of the 4 GiB pod", "none")
        else:
            self.info("B's 2 GiB refused after %.3f s: %s: %s" % (r.get("s", -1), r.get("type"), r.get("msg")))
            if "4.00 GiB" in (r.get("msg") or ""):
                self.info("the message names the 4.00 GiB ceiling")
            self.record("refusal", bool(r.get("oom")),
                        "B refused with %s" % r.get("type") if r.get("oom") else
                        "B's refusal is %s, not an out-of-memory error: %s" % (r.get("type"), r.get("msg")),
                        r.get("type") or "?")
        r = b.ask("free")  # in case it was not refused
        if not r.get("ok"):
            raise StepError("B: free: %s" % r.get("msg"))

        # 3. free: A gives its 3 GiB back, B's 2 GiB fits.
        self.current = "free"
        r = a.ask("free")
        if not r.get("ok"):
            raise StepError("A: free: %s" % r.get("msg"))
        e = region.entry()
        self.info("after A's free: A's mem_get_info free=%d total=%d; region %s" % (
            r["free"], r["total"], region.describe(e)))
        r = b.ask("alloc %d touch" % (2 * GIB))
        self.record("free", bool(r.get("ok")), "B got 2 GiB in %.3f s once A freed" % r.get("s", -1)
                    if r.get("ok") else "B's 2 GiB after A freed: %s: %s" % (r.get("type"), r.get("msg")))
        r = b.ask("free")
        if not r.get("ok"):
            raise StepError("B: free: %s" % r.get("msg"))

        # 4. kill9: A dies holding 3 GiB; its charge must come back.
        self.current = "kill9"
        r = a.ask("alloc %d" % (3 * GIB))
        if not r.get("ok"):
            raise StepError("A could not take 3 GiB again: %s: %s" % (r.get("type"), r.get("msg")))
        e = region.entry()
        self.info("before the kill: region %s" % region.describe(e))
        if e is None or e["used"] < 3 * GIB:
            raise StepError("before the kill the pod does not hold A's 3 GiB: %s" % (
                region.why if e is None else "used %s" % gib(e["used"])))
        t_kill = time.monotonic()
        a.p.send_signal(signal.SIGKILL)
        try:
            a.p.wait(timeout=self.step_timeout())
        except subprocess.TimeoutExpired:
            raise StepError("A not reaped %.0f s after SIGKILL" % (time.monotonic() - t_kill))
        t_reaped = time.monotonic() - t_kill
        # B retries a refusal: the library sweeps for dead processes at most
        # every 10 ms per process, so a first try soon after B's last sweep
        # (its refusal above) may be refused. What counts is the time to fit.
        r = b.ask("alloc_until %d %.1f touch" % (3 * GIB, 3 * KILL_FIT))
        t_fit = time.monotonic() - t_kill
        self.info("A reaped %.3f s after SIGKILL; B's 3 GiB answered %.3f s after it, after %s tries; region %s" % (
            t_reaped, t_fit, r.get("tries"), region.describe(region.entry())))
        if not r.get("ok"):
            self.record("kill9", False, "B's 3 GiB after A's kill -9 (%d tries in %.3f s): %s: %s" % (
                r.get("tries", 0), r.get("s", -1), r.get("type"), r.get("msg")))
        else:
            self.record("kill9", r["s"] < KILL_FIT,
                        "B got 3 GiB in %.3f s (%d tries), %.3f s after SIGKILL (A reaped after %.3f s)" % (
                            r["s"], r["tries"], t_fit, t_reaped) if r["s"] < KILL_FIT else
                        "B's 3 GiB took %.3f s and %d tries after A was reaped (limit %.1f s)" % (
                            r["s"], r["tries"], KILL_FIT))
        b.ask("free")

    # ---- phase 2: B2 waits at the ceiling for A2's free -------------------

    def phase2(self):
        region = Region(os.path.join(self.tmp, "pod2"))
        self.current = "wait"
        a = self.spawn("A2", region.path, "fail")
        b = self.spawn("B2", region.path, WAIT_SPEC)
        self.start(a, b)
        region.uuid = b.uuid
        r = a.ask("alloc %d" % (3 * GIB))
        if not r.get("ok"):
            raise StepError("A2 could not take 3 GiB of an empty pod: %s: %s" % (r.get("type"), r.get("msg")))
        r = b.ask("alloc_async %d" % (2 * GIB))
        t_start = time.monotonic()
        if not r.get("started"):
            raise StepError("B2 did not start its request: %s" % r.get("msg"))
        seen = None
        while time.monotonic() < t_start + FREE_AFTER - 0.05:
            e = region.entry()
            if e is not None and e["waiters"] > 0:
                seen = e
                break
            time.sleep(0.01)
        self.info("B2 %s" % ("waiting: region %s" % region.describe(seen) if seen else
                             "not seen waiting in the region (waiters 0) within %.2f s" % FREE_AFTER))
        time.sleep(max(0.0, t_start + FREE_AFTER - time.monotonic()))
        r = a.ask("free")
        if not r.get("ok"):
            raise StepError("A2: free: %s" % r.get("msg"))
        t_freed = time.monotonic() - t_start
        r = b.ask("join")
        if not r.get("ok"):
            self.record("wait", False, "B2's 2 GiB (%s, A2 freed after %.3f s): %s: %s" % (
                WAIT_SPEC, t_freed, r.get("type"), r.get("msg")))
        else:
            ok = r["s"] >= MIN_WAITED
            self.record("wait", ok, "B2 got 2 GiB after waiting %.3f s (A2 freed after %.3f s)" % (r["s"], t_freed)
                        if ok else "B2's 2 GiB came after %.3f s, before A2 freed (%.3f s): it did not wait" % (
                            r["s"], t_freed))
        b.ask("free")

    def results(self):
        failed = 0
        for c in CHECKS:
            res, val, refusal, reason = self.rows.get(c, ("FAIL", "no", "n/a", "not run"))
            cols = {"ceiling": "n/a", "meminfo": "n/a", "working": "n/a"}
            if res != "SKIP":
                cols[COLUMN[c]] = val
            print(result_line("torch_pod_" + c, cols["ceiling"], cols["meminfo"], refusal, cols["working"], res,
                              reason[:160]), flush=True)
            failed += res == "FAIL"
        return failed


def parent(lib):
    rc = preflight(["torch_pod_" + c for c in CHECKS], [lib])
    if rc is not None:
        return rc
    run = Run(lib)
    run.info("library %s, GPUGUARD_LIMIT=4Gi, pod regions in %s" % (lib, run.tmp))
    try:
        run.phase(PHASE1, run.phase1)
        run.phase(PHASE2, run.phase2)
    except Skip:
        pass
    finally:
        run.stop_children()
    failed = run.results()
    if failed:
        run.info("kept %s (region files, children's stderr)" % run.tmp)
    else:
        shutil.rmtree(run.tmp, ignore_errors=True)
    run.info("%.1f s in all" % (time.monotonic() - run.t0))
    return 1 if failed else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "--child":
        return child(argv[2])
    lib = argv[2] if len(argv) >= 3 and argv[1] == "--lib" else built("lib", "libgpuguard.so")
    return parent(os.path.abspath(lib))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
