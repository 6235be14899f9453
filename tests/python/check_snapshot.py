# gpuguard test (issue 27): checks a `gpuguard report --torch-snapshot` pickle
# against the fields torch.cuda.memory._snapshot() documents (Snapshot,
# Segment, Block, Frame, TraceEntry) and against the dump it came from.
# argv: PICKLE DUMP LINE_KV. Prints what is wrong and exits 1, else 0.
import json
import pickle
import sys

snap = pickle.load(open(sys.argv[1], "rb"))
dump = [json.loads(l) for l in open(sys.argv[2])]
line_kv = int(sys.argv[3])
errs = []


def need(cond, what):
    if not cond:
        errs.append(what)


def frame_ok(f):
    return (set(f) >= {"filename", "line", "name"} and isinstance(f["filename"], str)
            and isinstance(f["line"], int) and isinstance(f["name"], str))


need(isinstance(snap, dict) and set(snap) >= {"segments", "device_traces"}, "no segments or device_traces")
live = {int(r["p"], 16): r for r in dump if r["t"] == "a"}
segs = snap["segments"]
need(len(segs) == len(live), "%d segments for %d live allocations" % (len(segs), len(live)))
kv = 0
for s in segs:
    for k, t in (("address", int), ("total_size", int), ("allocated_size", int), ("active_size", int),
                 ("stream", int), ("segment_type", str), ("blocks", list), ("device", int)):
        need(isinstance(s.get(k), t), "segment field %s" % k)
    need(s["address"] in live and live[s["address"]]["s"] == s["total_size"], "segment %x not in the dump" % s["address"])
    need(s["segment_type"] in ("small", "large"), "segment_type")
    for b in s["blocks"]:
        for k, t in (("address", int), ("size", int), ("requested_size", int), ("state", str), ("frames", list)):
            need(isinstance(b.get(k), t), "block field %s" % k)
        need(b["state"] in ("active_allocated", "active_awaiting_free", "inactive"), "block state")
        need(all(frame_ok(f) for f in b["frames"]), "a frame lacks filename, line or name")
        if any(f["filename"].endswith("serve.py") and f["line"] == line_kv and f["name"] == "grow_kv_cache"
               for f in b["frames"]):
            kv += 1
need(kv >= 1, "no block whose frames name serve.py:%d grow_kv_cache" % line_kv)
tr = snap["device_traces"]
need(isinstance(tr, list) and all(isinstance(t, list) for t in tr), "device_traces is not a list of lists")
acts = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom", "snapshot"}
for t in tr:
    for e in t:
        need(e.get("action") in acts, "trace action %r" % e.get("action"))
        need(isinstance(e.get("size"), int) and isinstance(e.get("frames"), list), "trace entry fields")
        need(all(frame_ok(f) for f in e["frames"]), "a trace frame lacks filename, line or name")
need(any(e["action"] == "oom" for t in tr for e in t), "no oom trace entry for the refusal")
if errs:
    print("\n".join(sorted(set(errs))))
    sys.exit(1)
print("snapshot ok: %d segments, %d trace entries" % (len(segs), sum(len(t) for t in tr)))
