#!/usr/bin/env python3
"""gpuguard: what the policy gives a GPU container, for the container run
(tests/scripts/container.sh), read from what `deploy/preview` prints (the
model tests/scripts/deploy.sh checks against Kubernetes' own merge), so the
run follows the policy.

  podspec.py ways PREVIEW.yaml
      the ways in the stream, one a line (gpuguard.io/injected-by)
  podspec.py spec PREVIEW.yaml WAY CONTAINER
      one line per item of that way's pod:
        env NAME VALUE            (the downward API's fields filled in)
        mount VOLUME MOUNTPATH ro|rw [SUBPATH]
        volume NAME emptyDir|other
        init VOLUME MOUNT         (gpuguard-install: the volume it fills, and
                                   the MOUNT argument of install.sh)
        group GID                 (the pod's fsGroup: a supplementary group
                                   of every container's processes)
"""
import sys

import yaml


def pods(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d and d.get("kind") == "Pod"]


def way(p):
    return (p["metadata"].get("annotations") or {}).get("gpuguard.io/injected-by", "")


def spec(path, want, cname):
    p = next((p for p in pods(path) if way(p) == want), None)
    if p is None:
        sys.exit(f"{path}: no pod injected by {want}")
    s = p["spec"]
    c = next((c for c in s["containers"] if c["name"] == cname), None)
    if c is None:
        sys.exit(f"{path}: {want}'s pod has no container {cname}")
    field = {"metadata.namespace": p["metadata"].get("namespace", "default"), "metadata.name": p["metadata"]["name"]}
    for e in c.get("env") or []:
        if "valueFrom" in e:
            val = field[e["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            val = str(e.get("value", ""))
        if " " in val or "\n" in val:
            sys.exit(f"podspec: {e['name']}'s value has a space, which this test's runtime cannot pass")
        print(f"env {e['name']} {val}")
    for m in c.get("volumeMounts") or []:
        ro = "ro" if m.get("readOnly") else "rw"
        print(f"mount {m['name']} {m['mountPath']} {ro} {m.get('subPath', '')}".rstrip())
    for v in s.get("volumes") or []:
        print(f"volume {v['name']} {'emptyDir' if 'emptyDir' in v else 'other'}")
    for ic in s.get("initContainers") or []:
        if ic["name"] != "gpuguard-install":
            continue
        cmd = (ic.get("command") or []) + (ic.get("args") or [])
        # /bin/sh /opt/gpuguard/install.sh DEST [MOUNT]
        dest = cmd[2]
        vol = next(m["name"] for m in ic.get("volumeMounts") or [] if m["mountPath"] == dest)
        print(f"init {vol} {cmd[3] if len(cmd) > 3 else '/opt/gpuguard'}")
    fsg = (s.get("securityContext") or {}).get("fsGroup")
    if fsg is not None:
        print(f"group {fsg}")


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["ways"] and len(a) == 2:
        print("\n".join(w for w in (way(p) for p in pods(a[1])) if w))
    elif a[:1] == ["spec"] and len(a) == 4:
        spec(*a[1:])
    else:
        sys.exit(__doc__)
