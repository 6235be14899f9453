#!/bin/sh
# The node exporter as it runs in its manifest (issue 23): the uid, groups,
# capabilities, no_new_privs and read-only mount that deploy/node/exporter.yaml
# gives it, read from that file (tests/node/manifest.py: a drifted manifest
# fails here), reproduced with setpriv and a read-only bind mount, over a
# tree laid out as the kubelet lays out /var/lib/kubelet/pods: directories
# 0750 root:root, emptyDirs of the pods' users, regions of other uids 0600
# and 0640. It must read every region; the same exporter without
# CAP_DAC_READ_SEARCH must say what it could not read
# (gpuguard_discovery_errors and one log line per path), never a silent 0;
# as the image's user (the manifest before issue 23) it reads nothing and
# says so. The manifest's own rules (exactly that privilege, GPU taints
# tolerated, NVIDIA and AMD nodes selected) are checked, and broken copies
# must fail them.
. "$(dirname "$0")/lib.sh"
FAIL_PREFIX=node_exporter- BAD_LINES=12
EXPORTER=${GG_EXPORTER_YAML:-deploy/node/exporter.yaml}
PY=
for p in python3 /usr/bin/python3; do
	"$p" -c "import yaml" 2>/dev/null && PY=$p && break
done
M="$PY tests/node/manifest.py"
PIDS=
on_exit() { for p in $PIDS; do kill $p 2>/dev/null; done; }

if [ -z "$PY" ]; then
	skip "node_exporter: no python3 with PyYAML (Debian package python3-yaml; tests/deps.sh installs it)"
	finish
fi

# --- the manifest's rules, and broken copies that must break them ----------
$M check "$EXPORTER" >"$TMP/check" 2>&1
ok_lines "$TMP/check" "manifest: "
[ "$(grep -c '^ok ' "$TMP/check")" -ge 15 ] || bad "manifest check printed too little" "$TMP/check"
for w in no-cap extra-cap no-amd-toleration no-amd-node writable-mount escalation; do
	$M mutate "$EXPORTER" "$TMP/bad-$w.yaml" "$w" && $M check "$TMP/bad-$w.yaml" >"$TMP/out" 2>&1
	grep -q '^FAIL ' "$TMP/out" && ok || bad "manifest check passed a broken copy ($w)" "$TMP/out"
done

# --- the identity ----------------------------------------------------------
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null 2>&1; then
	skip "node_exporter-identity: needs root and setpriv (util-linux) to take the manifest's identity"
	finish
fi
have_unshare=1
unshare --mount --propagation private true 2>/dev/null || {
	have_unshare=
	skip "node_exporter-read-only-mount: unshare --mount is refused here (the tree is mounted writable)"
}

# the tool where any uid can run it (the manifest's may not be ours)
chmod 0755 "$TMP"
mkdir -p "$TMP/bin"
cp "$GG_TEST_BUILD/bin/gpuguard" "$TMP/bin/gpuguard"
chmod 0755 "$TMP/bin" "$TMP/bin/gpuguard"
TOOL="$TMP/bin/gpuguard"
MK="$GG_TEST_BUILD/tests/tools/mkregion"

# The kubelet's tree: ROOT (0750 root:root) / <pod uid> / volumes /
# kubernetes.io~empty-dir / <volume> / <file>, every level the kubelet makes
# 0750 root:root. The emptyDirs belong to the pods: one 0750 root:root, one
# 2770 root:65532 (fsGroup), one 0700 of the pod's own user. Regions of
# other uids: 0600 uid 1000, 0640 uid 65532, 0600 uid 1001; beside one, a
# dump of the pod's user that is not a region.
ROOT="$TMP/kubelet/pods"
U1=7f1d2e3f-1111-4a4a-8b8b-000000000001
U2=7f1d2e3f-2222-4a4a-8b8b-000000000002
U3=7f1d2e3f-3333-4a4a-8b8b-000000000003
ED=volumes/kubernetes.io~empty-dir
mkdir -p "$ROOT"
for u in $U1 $U2 $U3; do mkdir -p "$ROOT/$u/$ED/gpuguard-region"; done
mkdir -p "$ROOT/$U1/$ED/gpuguard-dumps"
i=0
for u in $U1 $U2 $U3; do
	i=$((i + 1))
	"$MK" "$ROOT/$u/$ED/gpuguard-region/pod" limit=${i}Gi proc=0:4$i:worker:1700000000000:0=$((i * 1024)) \
		dev=0:cuda:00112233445566778899aabbccddeef$i:$((i * 1073741824)):$((i * 1024)):$((i * 1024)):85899345920:0:0:0 \
		>/dev/null || bad "mkregion $u"
done
echo '{"t":"meta"}' >"$ROOT/$U1/$ED/gpuguard-dumps/gpuguard-1.jsonl"
chown -R 0:0 "$TMP/kubelet"
find "$TMP/kubelet" -type d -exec chmod 0750 {} +
chown 1000:1000 "$ROOT/$U1/$ED/gpuguard-region/pod" "$ROOT/$U1/$ED/gpuguard-dumps/gpuguard-1.jsonl"
chmod 0600 "$ROOT/$U1/$ED/gpuguard-region/pod" "$ROOT/$U1/$ED/gpuguard-dumps/gpuguard-1.jsonl"
chown 0:65532 "$ROOT/$U2/$ED/gpuguard-region"
chmod 2770 "$ROOT/$U2/$ED/gpuguard-region"
chown 65532:65532 "$ROOT/$U2/$ED/gpuguard-region/pod"
chmod 0640 "$ROOT/$U2/$ED/gpuguard-region/pod"
chown 1001:1001 "$ROOT/$U3/$ED/gpuguard-region" "$ROOT/$U3/$ED/gpuguard-region/pod"
chmod 0700 "$ROOT/$U3/$ED/gpuguard-region"
chmod 0600 "$ROOT/$U3/$ED/gpuguard-region/pod"

# as MANIFEST NAME CMD...: CMD under the identity MANIFEST gives the exporter
# (its hostPath mount bound read-only where it says readOnly), stdout in
# $TMP/NAME.out, stderr in $TMP/NAME.err, the exit status in rc
as() {
	man=$1 name=$2
	shift 2
	$M identity "$man" deploy/image/Dockerfile >"$TMP/$name.id" || {
		bad "identity of $man" "$TMP/$name.id"
		return
	}
	. "$TMP/$name.id"
	sp="--reuid=$uid --regid=$gid --clear-groups --inh-caps=-all --bounding-set=-all${caps:+,+$(echo "$caps" | sed 's/,/,+/g')}"
	[ "$nnp" = 1 ] && sp="$sp --no-new-privs"
	if [ -n "$have_unshare" ] && [ "$mount_ro" = 1 ]; then
		# shellcheck disable=SC2086 # sp is words
		unshare --mount --propagation private sh -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"' \
			sh "$ROOT" setpriv $sp "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
	else
		# shellcheck disable=SC2086
		setpriv $sp "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
	fi
	rc=$?
}

# The manifest's identity, as the kernel sees it: the capabilities it
# names, effective, and nothing more; and its --discover is its mount.
as "$EXPORTER" caps grep -E '^(Uid|Gid|CapEff|NoNewPrivs):' /proc/self/status
. "$TMP/caps.id"
grep -q "^CapEff:[[:space:]]*$capmask$" "$TMP/caps.out" && grep -q "^Uid:[[:space:]]*$uid[[:space:]]" "$TMP/caps.out" &&
	ok || bad "identity: want uid $uid, CapEff $capmask ($caps)" "$TMP/caps.out" "$TMP/caps.err"
[ -n "$discover" ] && [ "$discover" = "$mount_path" ] && ok ||
	bad "the manifest's --discover ($discover) is not where it mounts the kubelet's pods ($mount_path)"
if [ -n "$have_unshare" ]; then
	as "$EXPORTER" ro touch "$ROOT/x"
	[ "$rc" -ne 0 ] && [ ! -e "$ROOT/x" ] && ok || bad "the kubelet's tree is writable to the exporter"
fi

# metrics_ok NAME: every region read, no error, nothing said
as "$EXPORTER" good "$TOOL" metrics --discover "$ROOT"
[ "$rc" -eq 0 ] && ok || bad "as the manifest: exit $rc" "$TMP/good.err"
grep -qx 'gpuguard_discovered_regions 3' "$TMP/good.out" && ok ||
	bad "as the manifest: want 3 regions (of uids 1000, 65532, 1001)" "$TMP/good.out" "$TMP/good.err"
for u in $U1 $U2 $U3; do
	grep -q "^gpuguard_up{pod_uid=\"$u\"} 1$" "$TMP/good.out" && ok || bad "as the manifest: pod $u not read" "$TMP/good.err"
done
[ "$(grep -c '^gpuguard_discovery_errors{.*} 0$' "$TMP/good.out")" -eq 9 ] && ok ||
	bad "as the manifest: discovery errors" "$TMP/good.out"
[ ! -s "$TMP/good.err" ] && ok || bad "as the manifest: it said something" "$TMP/good.err"

# Without CAP_DAC_READ_SEARCH (the manifest less its add): root still owns
# the kubelet's directories, but not the pods' files (uid 1000's 0600, uid
# 65532's 0640: root is not in its group) nor uid 1001's 0700 emptyDir. Not
# a silent 0: the error metric, and each path named once.
$M mutate "$EXPORTER" "$TMP/nocap.yaml" no-cap
as "$TMP/nocap.yaml" nocap "$TOOL" metrics --discover "$ROOT"
[ "$rc" -eq 0 ] && ok || bad "without the capability: exit $rc" "$TMP/nocap.err"
grep -qx 'gpuguard_discovered_regions 0' "$TMP/nocap.out" && ok ||
	bad "without the capability: want 0 regions" "$TMP/nocap.out"
grep -qx 'gpuguard_discovery_errors{path_kind="file",reason="permission"} 3' "$TMP/nocap.out" &&
	grep -qx 'gpuguard_discovery_errors{path_kind="empty_dir",reason="permission"} 1' "$TMP/nocap.out" && ok ||
	bad "without the capability: want 3 files and 1 emptyDir in gpuguard_discovery_errors" "$TMP/nocap.out"
for p in "$ROOT/$U1/$ED/gpuguard-region/pod" "$ROOT/$U1/$ED/gpuguard-dumps/gpuguard-1.jsonl" \
	"$ROOT/$U2/$ED/gpuguard-region/pod" "$ROOT/$U3/$ED/gpuguard-region"; do
	[ "$(grep -c "cannot read $p: Permission denied" "$TMP/nocap.err")" -eq 1 ] && ok ||
		bad "without the capability: want one line naming $p" "$TMP/nocap.err"
done
grep -q 'CAP_DAC_READ_SEARCH' "$TMP/nocap.err" && ok || bad "the log line does not say what is missing" "$TMP/nocap.err"

# Served, scraped twice: each unreadable path named once, not per scrape;
# the metric at every scrape.
HC="$GG_TEST_BUILD/tests/tools/httpc"
as "$TMP/nocap.yaml" served sh -c '"$1" metrics --discover "$2" --listen 127.0.0.1:0 2>"$3" & p=$!
	i=0; while ! grep -q "serving metrics on" "$3" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	port=$(sed -n "s|^gpuguard: serving metrics on http://127\.0\.0\.1:\([0-9]*\)/metrics$|\1|p" "$3")
	for n in 1 2; do printf "GET /metrics HTTP/1.1\r\n\r\n" | "$4" 127.0.0.1 "${port:-1}" 5 | tr -d "\r" >"$5.$n"; done
	kill $p; wait $p 2>/dev/null; exit 0' sh "$TOOL" "$ROOT" "$TMP/served.log" "$HC" "$TMP/scrape"
for n in 1 2; do
	grep -qx 'gpuguard_discovery_errors{path_kind="file",reason="permission"} 3' "$TMP/scrape.$n" 2>/dev/null && ok ||
		bad "served without the capability, scrape $n: want the error metric" "$TMP/scrape.$n" "$TMP/served.log"
done
[ "$(grep -c "cannot read $ROOT/$U1/$ED/gpuguard-region/pod:" "$TMP/served.log")" -eq 1 ] && ok ||
	bad "served: want $ROOT/$U1/$ED/gpuguard-region/pod named once in two scrapes" "$TMP/served.log"

# As the image's user with nothing added (the manifest before issue 23):
# the kubelet's 0750 root:root directory cannot be opened at all.
$M mutate "$EXPORTER" "$TMP/old.yaml" old-identity
as "$TMP/old.yaml" old "$TOOL" metrics --discover "$ROOT"
[ "$rc" -eq 2 ] && grep -q "$ROOT: Permission denied.*CAP_DAC_READ_SEARCH" "$TMP/old.err" && ok ||
	bad "as the image's user: want exit 2 naming $ROOT and the capability (exit $rc)" "$TMP/old.err"
finish
