#!/usr/bin/env python3
"""gpuguard: reads deploy/node/exporter.yaml as the kubelet and the container
runtime would (issue 23), for tests/scripts/node_exporter.sh:

  manifest.py identity EXPORTER DOCKERFILE
      shell assignments: the identity the exporter container gets, which the
      test reproduces with setpriv: uid, gid (runAsUser/runAsGroup, else the
      image's USER), caps (its effective capabilities after exec: the
      runtime's default set, less drop, plus add, and none at all for a
      non-root uid, since Kubernetes sets no ambient capabilities), nnp
      (allowPrivilegeEscalation false), ro_root, mount_ro, the --discover
      argument and the kubelet hostPath's mountPath.
  manifest.py check EXPORTER
      one "ok ..." or "FAIL ..." line per rule the exporter must keep:
      exactly the privilege it needs, and scheduling onto every GPU node.
  manifest.py mutate EXPORTER OUT WHAT
      a broken copy (WHAT: no-cap, extra-cap, no-amd-toleration, no-amd-node,
      writable-mount, escalation), to show each check can fail.
"""
import copy
import sys

import yaml

# containerd's and CRI-O's default capability set (what a container has when
# it drops nothing): the OCI default of both runtimes.
RUNTIME_DEFAULT_CAPS = [
    "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP", "SETPCAP",
    "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
]
NEEDED_CAPS = {"DAC_READ_SEARCH"}
# linux/capability.h's numbers, for the CapEff mask the test reads back
CAP_BITS = {n: i for i, n in enumerate([
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
    "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
    "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
    "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP"])}
KUBELET_PODS = "/var/lib/kubelet/pods"
# the taints GPU nodes carry, and the labels their operators set (one node
# per vendor); the exporter must tolerate each and select each
GPU_TAINTS = [
    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"},
    {"key": "amd.com/gpu", "value": "present", "effect": "NoSchedule"},
    {"key": "amd.com/gpu", "value": "", "effect": "NoExecute"},
]
GPU_NODES = {
    "nvidia (GPU feature discovery)": {"nvidia.com/gpu.present": "true"},
    "nvidia (NFD PCI vendor)": {"feature.node.kubernetes.io/pci-10de.present": "true"},
    "amd (GPU Operator)": {"feature.node.kubernetes.io/amd-gpu": "true"},
    "amd (NFD PCI vendor)": {"feature.node.kubernetes.io/pci-1002.present": "true"},
}
CPU_NODE = {"kubernetes.io/os": "linux"}


def daemonset(path):
    with open(path) as f:
        for d in yaml.safe_load_all(f):
            if d and d.get("kind") == "DaemonSet":
                return d
    sys.exit(f"{path}: no DaemonSet")


def container(ds):
    return ds["spec"]["template"]["spec"]["containers"][0]


def image_user(dockerfile):
    """The USER of the Dockerfile's last stage: uid, gid (root if none)."""
    user = "0:0"
    with open(dockerfile) as f:
        for line in f:
            if line.startswith("FROM "):
                user = "0:0"
            elif line.startswith("USER "):
                user = line.split()[1]
    u, _, g = user.partition(":")
    return int(u), int(g or u)


def effective_caps(c):
    sc = c.get("securityContext") or {}
    caps = sc.get("capabilities") or {}
    drop = [x.upper() for x in caps.get("drop") or []]
    add = [x.upper() for x in caps.get("add") or []]
    have = [] if "ALL" in drop else [x for x in RUNTIME_DEFAULT_CAPS if x not in drop]
    for x in add:
        if x not in have:
            have.append(x)
    if sc.get("privileged"):
        have = ["ALL"]
    return have


def identity(exporter, dockerfile):
    ds = daemonset(exporter)
    c = container(ds)
    psc = ds["spec"]["template"]["spec"].get("securityContext") or {}
    sc = c.get("securityContext") or {}
    iu, ig = image_user(dockerfile)
    uid = sc.get("runAsUser", psc.get("runAsUser", iu))
    gid = sc.get("runAsGroup", psc.get("runAsGroup", ig if "runAsUser" not in sc else 0))
    caps = effective_caps(c) if uid == 0 else []  # no ambient capabilities for a non-root uid
    vols = {v["name"]: v for v in ds["spec"]["template"]["spec"].get("volumes") or []}
    mount_path, mount_ro = "", 0
    for m in c.get("volumeMounts") or []:
        hp = (vols.get(m["name"]) or {}).get("hostPath") or {}
        if hp.get("path") == KUBELET_PODS:
            mount_path, mount_ro = m["mountPath"], int(bool(m.get("readOnly")))
    cmd = (c.get("command") or []) + (c.get("args") or [])
    discover = cmd[cmd.index("--discover") + 1] if "--discover" in cmd else ""
    print(f"uid={uid}")
    print(f"gid={gid}")
    print(f"caps={','.join(x.lower() for x in caps)}")
    print(f"capmask={sum(1 << CAP_BITS[x] for x in caps if x in CAP_BITS):016x}")
    print(f"nnp={int(sc.get('allowPrivilegeEscalation') is False)}")
    print(f"ro_root={int(bool(sc.get('readOnlyRootFilesystem')))}")
    print(f"mount_ro={mount_ro}")
    print(f"mount_path={mount_path}")
    print(f"discover={discover}")


def tolerates(tols, taint):
    for t in tols:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        op = t.get("operator", "Equal")
        if not t.get("key") and op == "Exists":
            return True
        if t.get("key") != taint["key"]:
            continue
        if op == "Exists" or t.get("value", "") == taint["value"]:
            return True
    return False


def selects(spec, labels):
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    na = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if not na:
        return True
    for term in na.get("nodeSelectorTerms") or []:
        good = True
        for e in term.get("matchExpressions") or []:
            have, op, vals = labels.get(e["key"]), e["operator"], e.get("values") or []
            if op == "In":
                good &= have in vals
            elif op == "NotIn":
                good &= have not in vals
            elif op == "Exists":
                good &= have is not None
            elif op == "DoesNotExist":
                good &= have is None
            else:
                good = False
        if good and (term.get("matchExpressions") or term.get("matchFields")):
            return True
    return False


def check(exporter):
    ds = daemonset(exporter)
    spec = ds["spec"]["template"]["spec"]
    c = container(ds)
    sc = c.get("securityContext") or {}
    res = []

    def rule(name, good, why):
        res.append(f"ok {name}" if good else f"FAIL {name}: {why}")

    caps = (sc.get("capabilities") or {})
    rule("drops every capability", [x.upper() for x in caps.get("drop") or []] == ["ALL"],
         f"capabilities.drop is {caps.get('drop')}, want [ALL]")
    add = {x.upper() for x in caps.get("add") or []}
    rule("adds only DAC_READ_SEARCH", add == NEEDED_CAPS, f"capabilities.add is {sorted(add)}")
    rule("no privilege escalation", sc.get("allowPrivilegeEscalation") is False,
         "allowPrivilegeEscalation is not false")
    rule("not privileged", not sc.get("privileged"), "privileged")
    rule("read-only root filesystem", sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem is not true")
    sp = (sc.get("seccompProfile") or (spec.get("securityContext") or {}).get("seccompProfile") or {})
    rule("seccomp RuntimeDefault", sp.get("type") == "RuntimeDefault", f"seccompProfile is {sp}")
    rule("no host namespaces", not (spec.get("hostPID") or spec.get("hostIPC") or spec.get("hostNetwork")),
         "hostPID, hostIPC or hostNetwork")
    rule("no service account token", spec.get("automountServiceAccountToken") is False,
         "automountServiceAccountToken is not false (it reads files, not the API)")
    vols = {v["name"]: v for v in spec.get("volumes") or []}
    hps = [v["hostPath"]["path"] for v in vols.values() if "hostPath" in v]
    rule("only the kubelet's pods directory from the host", hps == [KUBELET_PODS], f"hostPaths {hps}")
    rw = [m["mountPath"] for m in c.get("volumeMounts") or [] if not m.get("readOnly")]
    rule("every mount read-only", not rw, f"writable: {rw}")
    tols = spec.get("tolerations") or []
    for t in GPU_TAINTS:
        rule(f"tolerates {t['key']}={t['value']}:{t['effect']}", tolerates(tols, t), "no toleration matches")
    for name, labels in GPU_NODES.items():
        rule(f"runs on a {name} node", selects(spec, labels), f"its affinity does not select {labels}")
    rule("stays off a node without a GPU", not selects(spec, CPU_NODE), "it selects a node with no GPU label")
    print("\n".join(res))


def mutate(exporter, out, what):
    with open(exporter) as f:
        docs = list(yaml.safe_load_all(f))
    ds = next(d for d in docs if d and d.get("kind") == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    sc = spec["containers"][0]["securityContext"]
    if what == "no-cap":
        sc["capabilities"].pop("add", None)
    elif what == "extra-cap":
        sc["capabilities"]["add"] = ["DAC_READ_SEARCH", "SYS_ADMIN"]
    elif what == "old-identity":  # as before issue 23: the image's user, no capability
        for k in ("runAsUser", "runAsGroup", "runAsNonRoot"):
            sc.pop(k, None)
        sc["capabilities"].pop("add", None)
    elif what == "no-amd-toleration":
        spec["tolerations"] = [t for t in spec.get("tolerations") or [] if not t.get("key", "").startswith("amd.com")]
    elif what == "no-amd-node":
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        terms[:] = [t for t in terms if not any("amd" in e["key"] or "1002" in e["key"]
                                                for e in t.get("matchExpressions") or [])]
    elif what == "writable-mount":
        for m in spec["containers"][0]["volumeMounts"]:
            m["readOnly"] = False
    elif what == "escalation":
        sc["allowPrivilegeEscalation"] = True
    else:
        sys.exit(f"mutate: unknown {what}")
    with open(out, "w") as f:
        yaml.safe_dump_all(copy.deepcopy(docs), f)


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["identity"] and len(a) == 3:
        identity(a[1], a[2])
    elif a[:1] == ["check"] and len(a) == 2:
        check(a[1])
    elif a[:1] == ["mutate"] and len(a) == 4:
        mutate(a[1], a[2], a[3])
    else:
        sys.exit(__doc__)
