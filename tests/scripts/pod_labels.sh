#!/bin/sh
# gpuguard: the pod's identity and its pinned host memory reach the metrics
# (issue 13). Pod members on the simulated GPU, given GPUGUARD_POD_NAMESPACE,
# GPUGUARD_POD_NAME and GPUGUARD_CONTAINER_NAME as the policy sets them,
# write them into the pod region: process series carry container=,
# --discover's carry namespace= and pod= beside pod_uid= (and Hostname= from
# NODE_NAME), and gpuguard_process_host_pinned_bytes follows cuMemHostAlloc
# and cuMemFreeHost, pinned memory taken before the process attached
# included. A region as an older library leaves it (mkregion without pod=,
# container= or pinned=) is still read, without those labels and series;
# a name that is not a Kubernetes name is refused with one line.
. "$(dirname "$0")/lib.sh"
PIDS=
on_exit() { for p in $PIDS; do kill -9 $p 2>/dev/null; done; }
TOOL="$GG_TEST_BUILD/bin/gpuguard"
MK="$GG_TEST_BUILD/tests/tools/mkregion"
CLIENT="$GG_TEST_BUILD/tests/tools/podclient"
FAIL_PREFIX=pod_labels- BAD_LINES=20
U=0c1d2e3f-3333-4a4a-8b8b-000000000003
VOL="$TMP/pods/$U/volumes/kubernetes.io~empty-dir/gpuguard-region"
mkdir -p "$VOL"
REGION="$VOL/pod"
# member NAME [VAR=VALUE...]: a pod member reading commands from the fifo
# $TMP/NAME, its output in $TMP/NAME.out
member() {
	name=$1
	shift
	mkfifo "$TMP/$name"
	: >"$TMP/$name.out"
	env LD_PRELOAD="$GG_TEST_PRELOAD" LD_LIBRARY_PATH="$GG_TEST_SIMDIR" GPUGUARD_SHARED="$REGION" \
		GPUGUARD_SHARED_MODE=0600 GPUGUARD_LIMIT=1Gi GPUGUARD_DUMP_DIR="$TMP" "$@" "$CLIENT" \
		<"$TMP/$name" >"$TMP/$name.out" 2>&1 &
	PIDS="$PIDS $!"
}

# server: pinned memory first (before anything attaches it to the region),
# then a device allocation, then more pinned memory
member server GPUGUARD_POD_NAMESPACE=ml GPUGUARD_POD_NAME=infer-0 GPUGUARD_CONTAINER_NAME=server
exec 3>"$TMP/server"
echo "h 64" >&3
echo "a 16" >&3
echo "h 128" >&3
lines "$TMP/server.out" 4
# worker: another container of the pod, with no pod name of its own
member worker GPUGUARD_CONTAINER_NAME=worker
exec 4>"$TMP/worker"
echo "a 8" >&4
lines "$TMP/worker.out" 2
# no pinned memory in the worker yet: its gauge is there, at 0
"$TOOL" metrics --region "$REGION" >"$TMP/m1" 2>&1 || bad "metrics: exit $?" "$TMP/m1"
grep -q '^gpuguard_process_host_pinned_bytes{slot="[0-9]*",pid="[0-9]*",comm="podclient",container="server"} 196608$' \
	"$TMP/m1" && ok || bad "pinned: want 192 KiB, 64 of them taken before the process attached" "$TMP/m1"
grep -q '^gpuguard_process_host_pinned_bytes{.*container="worker"} 0$' "$TMP/m1" && ok || bad "pinned-worker: want 0" "$TMP/m1"
n=$(grep -c '^gpuguard_process_used_bytes{.*container="\(server\|worker\)",UUID="GPU-' "$TMP/m1")
[ "$n" -eq 2 ] && ok || bad "container: $n process series with container=, want 2" "$TMP/m1"
# top names each member's container, in a column of its own
"$TOOL" top --once --region "$REGION" >"$TMP/top1" 2>&1 || bad "top: exit $?" "$TMP/top1"
grep -q '^  slot  *pid  *comm  *container  *age  *state' "$TMP/top1" &&
	grep -q '^  [0-9]*  *[0-9]*  *podclient  *server  ' "$TMP/top1" &&
	grep -q '^  [0-9]*  *[0-9]*  *podclient  *worker  ' "$TMP/top1" &&
	ok || bad "top: want a container column naming server and worker" "$TMP/top1"
# the sidecar's series leave namespace and pod to the target's labels
grep -q 'namespace=\|pod=' "$TMP/m1" && bad "sidecar: namespace= or pod= in gpuguard metrics --region" "$TMP/m1" || ok
echo "H" >&3
lines "$TMP/server.out" 5
"$TOOL" metrics --region "$REGION" >"$TMP/m2" 2>&1
grep -q '^gpuguard_process_host_pinned_bytes{.*container="server"} 65536$' "$TMP/m2" && ok ||
	bad "pinned after cuMemFreeHost: want 64 KiB" "$TMP/m2"

# the node exporter: namespace and pod from the region, Hostname from NODE_NAME
NODE_NAME=node-a "$TOOL" metrics --discover "$TMP/pods" >"$TMP/d1" 2>&1 || bad "discover: exit $?" "$TMP/d1"
grep -q "^gpuguard_up{pod_uid=\"$U\",namespace=\"ml\",pod=\"infer-0\",Hostname=\"node-a\"} 1$" "$TMP/d1" && ok ||
	bad "discover-labels" "$TMP/d1"
grep -q "^gpuguard_process_host_pinned_bytes{pod_uid=\"$U\",namespace=\"ml\",pod=\"infer-0\",Hostname=\"node-a\",slot=.*,container=\"server\"} 65536$" \
	"$TMP/d1" && ok || bad "discover-pinned" "$TMP/d1"
if command -v promtool >/dev/null 2>&1; then
	promtool check metrics <"$TMP/d1" >"$TMP/prom" 2>&1 && ok || bad "promtool" "$TMP/prom"
fi
echo q >&3
echo q >&4
exec 3>&- 4>&-
wait

# a name that is not one: said once, left out
mkdir -p "$TMP/p2"
out=$(env LD_PRELOAD="$GG_TEST_PRELOAD" LD_LIBRARY_PATH="$GG_TEST_SIMDIR" GPUGUARD_SHARED="$TMP/p2/pod" \
	GPUGUARD_POD_NAMESPACE=ml GPUGUARD_POD_NAME='Not_A_Name' GPUGUARD_DUMP_DIR="$TMP" "$CLIENT" 2>&1 <<EOF
a 1
q
EOF
)
echo "$out" | grep -q 'GPUGUARD_POD_NAME="Not_A_Name" is not valid.*leaving it out of the pod.s metrics' && ok ||
	{ echo "$out" >"$TMP/bad.out"; bad "bad-name: no message" "$TMP/bad.out"; }
mkdir -p "$TMP/p2pods/$U/volumes/kubernetes.io~empty-dir/r"
cp "$TMP/p2/pod" "$TMP/p2pods/$U/volumes/kubernetes.io~empty-dir/r/pod"
"$TOOL" metrics --discover "$TMP/p2pods" >"$TMP/d2" 2>&1
grep -q "^gpuguard_up{pod_uid=\"$U\"} 1$" "$TMP/d2" && ok || bad "bad-name: namespace without pod is left out" "$TMP/d2"

# a region an older library wrote: read, without the new labels and series
mkdir -p "$TMP/old/$U/volumes/kubernetes.io~empty-dir/r"
"$MK" "$TMP/old/$U/volumes/kubernetes.io~empty-dir/r/pod" limit=1Gi proc=0:42:vllm:1700000000000:0=4096 \
	dev=0:cuda:00112233445566778899aabbccddeeff:1073741824:4096:4096:85899345920:0:0:0 >/dev/null
"$TOOL" metrics --discover "$TMP/old" >"$TMP/d3" 2>&1 || bad "old: exit $?" "$TMP/d3"
grep -q "^gpuguard_up{pod_uid=\"$U\"} 1$" "$TMP/d3" && ok || bad "old: not read as before" "$TMP/d3"
grep -q 'container=\|namespace=\|^gpuguard_process_host_pinned_bytes{' "$TMP/d3" && bad "old: labels or pinned from nothing" "$TMP/d3" || ok
# and the same image with them, as mkregion writes what a new library does
mkdir -p "$TMP/new/$U/volumes/kubernetes.io~empty-dir/r"
"$MK" "$TMP/new/$U/volumes/kubernetes.io~empty-dir/r/pod" limit=1Gi proc=0:42:vllm:1700000000000:0=4096 \
	proc=1:43:vllm:1700000000000:0=4096 pod=ml:a container=0:server container=1:server pinned=1:4096 \
	dev=0:cuda:00112233445566778899aabbccddeeff:1073741824:8192:8192:85899345920:0:0:0 >/dev/null
"$TOOL" metrics --discover "$TMP/new" >"$TMP/d4" 2>&1
n=$(grep -c "^gpuguard_process_info{pod_uid=\"$U\",namespace=\"ml\",pod=\"a\",slot=\"[01]\",.*,container=\"server\",state=" "$TMP/d4")
[ "$n" -eq 2 ] && ok || bad "mkregion: $n process_info series of container server, want 2" "$TMP/d4"
n=$(grep -c '^gpuguard_process_host_pinned_bytes{' "$TMP/d4")
[ "$n" -eq 1 ] && ok || bad "mkregion: $n pinned series, want 1 (slot 0 does not say)" "$TMP/d4"

finish
