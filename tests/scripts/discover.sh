#!/bin/sh
# gpuguard metrics --discover (issue 13): one exporter per node finds every
# pod's region where the kubelet keeps emptyDir volumes,
#   ROOT/<pod uid>/volumes/kubernetes.io~empty-dir/<volume>/<file>,
# here two pods whose two containers each have a process attached, plus
# files that are not regions (a dump, a symlink to a region). Each series
# gets pod_uid; every family appears once; promtool accepts the text.
. "$(dirname "$0")/lib.sh"
TOOL="$GG_TEST_BUILD/bin/gpuguard"
MK="$GG_TEST_BUILD/tests/tools/mkregion"
FAIL_PREFIX=discover- BAD_LINES=12
ROOT="$TMP/pods"
U1=0c1d2e3f-1111-4a4a-8b8b-000000000001
U2=0c1d2e3f-2222-4a4a-8b8b-000000000002
for u in $U1 $U2; do
	mkdir -p "$ROOT/$u/volumes/kubernetes.io~empty-dir/gpuguard-region" "$ROOT/$u/volumes/kubernetes.io~empty-dir/gpuguard-dumps"
done
# pod 1: a vllm container and a sidecar, 20Gi; pod 2: two workers, 8Gi
"$MK" "$ROOT/$U1/volumes/kubernetes.io~empty-dir/gpuguard-region/pod" limit=20Gi \
	proc=0:42:vllm:1700000000000:0=4096 proc=1:43:metrics:1700000000000 \
	dev=0:cuda:00112233445566778899aabbccddeeff:21474836480:4096:8192:85899345920:0:0:0 >/dev/null
"$MK" "$ROOT/$U2/volumes/kubernetes.io~empty-dir/gpuguard-region/pod" limit=8Gi \
	proc=0:7:worker:1700000000000:0=1024 proc=1:8:worker:1700000000000:0=2048 \
	dev=0:cuda:ffeeddccbbaa99887766554433221100:8589934592:3072:3072:85899345920:0:0:0 >/dev/null
echo '{"t":"meta"}' >"$ROOT/$U1/volumes/kubernetes.io~empty-dir/gpuguard-dumps/gpuguard-x.jsonl"
ln -s "$ROOT/$U2/volumes/kubernetes.io~empty-dir/gpuguard-region/pod" "$ROOT/$U1/volumes/kubernetes.io~empty-dir/gpuguard-dumps/link"
mkdir -p "$ROOT/not-a-uid!/volumes"
"$TOOL" metrics --discover "$ROOT" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 0 ] && ok || bad "exit: $rc" "$TMP/err"
grep -qx 'gpuguard_discovered_pods 2' "$TMP/out" && ok || bad "pods: not 2" "$TMP/out"
grep -qx 'gpuguard_discovered_regions 2' "$TMP/out" && ok || bad "regions: not 2 (a symlink or a dump counted?)" "$TMP/out"
for u in $U1 $U2; do
	grep -q "^gpuguard_up{pod_uid=\"$u\"} 1$" "$TMP/out" && ok || bad "up-$u" "$TMP/out"
done
grep -q "^gpuguard_device_limit_bytes{pod_uid=\"$U1\",kind=\"CUDA\",UUID=\"GPU-00112233-4455-6677-8899-aabbccddeeff\"} 21474836480$" "$TMP/out" && ok || bad "limit-1" "$TMP/out"
grep -q "^gpuguard_device_limit_bytes{pod_uid=\"$U2\",kind=\"CUDA\",UUID=\"GPU-ffeeddcc-bbaa-9988-7766-554433221100\"} 8589934592$" "$TMP/out" && ok || bad "limit-2" "$TMP/out"
n=$(grep -c "^gpuguard_process_used_bytes{pod_uid=" "$TMP/out")
[ "$n" -eq 4 ] && ok || bad "processes: $n series, want 4 (two pods of two containers)" "$TMP/out"
dup=$(grep '^# TYPE ' "$TMP/out" | sort | uniq -d)
[ -z "$dup" ] && ok || bad "families repeated: $dup"
# every sample belongs to the family whose TYPE line came last
awk '/^# TYPE /{f=$3; next} /^#/{next} {n=$0; sub(/[{ ].*/, "", n); if (n != f) {print "sample " n " under " f; b=1}} END{exit b}' "$TMP/out" >"$TMP/grp" && ok || bad "grouping" "$TMP/grp"
if command -v promtool >/dev/null 2>&1; then
	promtool check metrics <"$TMP/out" >"$TMP/prom" 2>&1 && ok || bad "promtool" "$TMP/prom"
fi
# a missing directory: exit 2 naming it; served, 200 with gpuguard_up 0
"$TOOL" metrics --discover "$TMP/none" >/dev/null 2>"$TMP/err2"
[ $? -eq 2 ] && grep -q "$TMP/none" "$TMP/err2" && ok || bad "missing-root" "$TMP/err2"
"$TOOL" metrics --discover "$ROOT" --region "$TMP/x" >/dev/null 2>&1
[ $? -eq 1 ] && ok || bad "usage: --discover with --region is not a usage error"
# served: the same, read afresh per request; a missing root is 200 with
# gpuguard_up 0 (the DaemonSet's target is up before any pod has a region)
HC="$GG_TEST_BUILD/tests/tools/httpc"
serve() { # NAME ROOT: GETs /metrics once from a server on a free port
	"$TOOL" metrics --discover "$2" --listen 127.0.0.1:0 2>"$TMP/$1.err" &
	spid=$!
	wait_file "$TMP/$1.err" "serving metrics on"
	port=$(sed -n 's|^gpuguard: serving metrics on http://127\.0\.0\.1:\([0-9]*\)/metrics$|\1|p' "$TMP/$1.err")
	printf 'GET /metrics HTTP/1.1\r\n\r\n' | "$HC" 127.0.0.1 "${port:-1}" 5 | tr -d '\r' >"$TMP/$1.resp"
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
}
serve served "$ROOT"
head -n 1 "$TMP/served.resp" | grep -q "^HTTP/1.1 200 " && grep -qx 'gpuguard_discovered_regions 2' "$TMP/served.resp" &&
	ok || bad "served" "$TMP/served.resp"
serve gone "$TMP/none"
head -n 1 "$TMP/gone.resp" | grep -q "^HTTP/1.1 200 " && grep -qx 'gpuguard_up 0' "$TMP/gone.resp" &&
	ok || bad "served-missing-root: want 200 with gpuguard_up 0" "$TMP/gone.resp"
finish
