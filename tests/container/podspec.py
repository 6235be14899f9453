#!/usr/bin/env python3
"""gpuguard: what the policy gives a GPU container, for the container run
(tests/scripts/container.sh): its environment and its mounts, read from the
policy itself so the run follows it.

  podspec.py POLICY LIMIT NAMESPACE POD CONTAINER

prints one line per item:
  env NAME VALUE                 (LD_PRELOAD left out: see below)
  mount VOLUME MOUNTPATH ro|rw [SUBPATH]
  volume NAME emptyDir|other

The chaining decision (issue 23): the pod spec sets no LD_PRELOAD, so an
image's own LD_PRELOAD (its ENV) keeps working; the init step writes
ld.so.preload into the gpuguard-bin emptyDir, and each GPU container mounts
that one file (subPath) read-only at /etc/ld.so.preload. Where the policy
still sets LD_PRELOAD and mounts no /etc/ld.so.preload (the ClusterPolicy
before that change lands), this model applies the decision to it.
Kyverno's templates are filled in: the limit from the pod's annotation, the
container's name, and the downward API's namespace and name.
"""
import sys

import yaml


def container_patch(policy):
    with open(policy) as f:
        for d in yaml.safe_load_all(f):
            if not d:
                continue
            for r in d.get("spec", {}).get("rules", []):
                m = r.get("mutate") or {}
                for fe in m.get("foreach") or []:
                    psm = fe.get("patchStrategicMerge") or {}
                    cs = (psm.get("spec") or {}).get("containers") or []
                    if cs and cs[0].get("env"):
                        return cs[0], d
    sys.exit(f"{policy}: no per-container patch with env found")


def pod_volumes(doc):
    vols = []
    for r in doc["spec"]["rules"]:
        psm = (r.get("mutate") or {}).get("patchStrategicMerge") or {}
        vols += (psm.get("spec") or {}).get("volumes") or []
    return vols


def fill(v, limit, container):
    if "{{" not in str(v):
        return str(v)
    if "gpuguard.io/limit" in v:
        return limit
    if "element.name" in v:
        return container
    sys.exit(f"podspec: a template this model does not know: {v}")


def main(policy, limit, namespace, pod, container):
    c, doc = container_patch(policy)
    field = {"metadata.namespace": namespace, "metadata.name": pod}
    for e in c.get("env") or []:
        if e["name"] == "LD_PRELOAD":
            continue
        if "valueFrom" in e:
            val = field[e["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            val = fill(e.get("value", ""), limit, container)
        print(f"env {e['name']} {val}")
    mounts = c.get("volumeMounts") or []
    for m in mounts:
        ro = "ro" if m.get("readOnly") else "rw"
        print(f"mount {m['name']} {m['mountPath']} {ro} {m.get('subPath', '')}".rstrip())
    if not any(m["mountPath"] == "/etc/ld.so.preload" for m in mounts):
        print("mount gpuguard-bin /etc/ld.so.preload ro ld.so.preload")
    for v in pod_volumes(doc):
        print(f"volume {v['name']} {'emptyDir' if 'emptyDir' in v else 'other'}")


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
