#!/bin/sh
# gpuguard demo: the toy inference server (examples/kvcache.c) on a simulated
# 16 GiB GPU, first alone, then under gpuguard with a 4 GiB ceiling. Builds
# nothing: `make demo` has built the server, the library and the simulator.
BUILD=${BUILD:-build}
SERVER="$BUILD/examples/kvcache"
LIB="$BUILD/lib/libgpuguard.so"
TOOL="$BUILD/bin/gpuguard"
DUMPS="$BUILD/demo-dumps"
for f in "$SERVER" "$LIB" "$TOOL" "$BUILD/sim/libcuda.so.1"; do
	if [ ! -e "$f" ]; then
		echo "demo: $f is missing; run 'make demo'" >&2
		exit 1
	fi
done
export LD_LIBRARY_PATH="$BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SIMGPU_MEMORY=16Gi
unset LD_PRELOAD GPUGUARD_LIMIT GPUGUARD_VERBOSE GPUGUARD_DUMP_DIR

rule() {
	echo "=============================================================================="
}

rule
echo "Run 1: no gpuguard. A 16 GiB card (simulated); the server is alone on it."
echo "  The server asks cuMemGetInfo how big the card is and, like vLLM, gives its"
echo "  KV cache 0.9 x total - weights: it sizes itself to the whole card."
echo "  \$ SIMGPU_MEMORY=16Gi $SERVER"
rule
"$SERVER" 2>&1
rc1=$?
echo

rule
echo "Run 2: the same server under gpuguard with a 4 GiB ceiling. Nothing else changes."
echo "  cuMemGetInfo now reports total 4 GiB, so the server sizes itself to the ceiling."
echo "  When load pushes past it, allocations fail with CUDA_ERROR_OUT_OF_MEMORY, the"
echo "  one code PyTorch and vLLM recover from: the server empties its block cache,"
echo "  retries, and if that is not enough drops one request and keeps serving."
echo "  The first refusal also writes an allocation dump for the post-mortem."
echo "  \$ $TOOL run --limit 4Gi --dump-dir $DUMPS -- $SERVER"
rule
rm -rf "$DUMPS"
mkdir -p "$DUMPS"
# A pod region of the demo's own: never join a real pod's budget on this host.
export GPUGUARD_SHARED="$DUMPS/pod-region"
GPUGUARD_VERBOSE=1 "$TOOL" run --limit 4Gi --dump-dir "$DUMPS" -- "$SERVER" 2>&1
rc2=$?
echo

# The first dump written is the one the first refusal provoked.
dump=$(ls -1 "$DUMPS"/gpuguard-*.jsonl 2>/dev/null | head -n 1)
rule
echo "The post-mortem: what filled the 4 GiB, from where, and what to change."
echo "  \$ $TOOL report $dump"
rule
rc3=1
if [ -n "$dump" ]; then
	"$TOOL" report "$dump"
	rc3=$?
else
	echo "demo: no dump was written to $DUMPS" >&2
fi
echo


rule
echo "Run 3: one pod, two servers, one 6 GiB budget. In pod scope (the default) every"
echo "  process that shares the region file draws from the same GPUGUARD_LIMIT, and"
echo "  cuMemGetInfo reports the pod's ceiling to each. Like two vLLM instances with"
echo "  gpu_memory_utilization=0.45, each sizes its KV cache to 0.45 of it. Their scratch"
echo "  memory comes on top, so near the end of the budget some requests are refused,"
echo "  in whichever server makes them; it backs off and serves on. The pod never passes 6 GiB."
echo "  \$ KVCACHE_UTIL=0.45 $TOOL run --limit 6Gi --shared $DUMPS/pod/region -- $SERVER   (twice)"
rule
POD="$DUMPS/pod"
mkdir -p "$POD/barrier"
start_server() {
	"$TOOL" run --limit 6Gi --shared "$POD/region" --dump-dir "$POD" -- env KVCACHE_UTIL=0.45 \
		KVCACHE_BARRIER="$POD/barrier" KVCACHE_STEP_US=2000 "$SERVER" >"$POD/$1.log" 2>&1
}
start_server A &
pa=$!
start_server B &
pb=$!
# Both have loaded their weights (or given up): let them serve together.
i=0
while [ "$(ls "$POD/barrier" | grep -c '^ready\.')" -lt 2 ] && [ "$i" -lt 1000 ]; do
	sleep 0.01
	i=$((i + 1))
done
touch "$POD/barrier/go"
sleep 0.4
echo "While both serve:  \$ $TOOL top --once --region $POD/region"
"$TOOL" top --once --region "$POD/region" 2>&1 | sed 's/^/  /'
wait "$pa"
ra=$?
wait "$pb"
rb=$?
for s in A B; do
	echo
	echo "Server $s:"
	grep -E '^kvcache: (weights|the weights)|^summary' "$POD/$s.log" | sed 's/^/  /'
done
echo
echo "After both exited, the pod's books:  \$ $TOOL top --once --region $POD/region"
"$TOOL" top --once --region "$POD/region" 2>&1 | sed -n '1,6p' | sed 's/^/  /'
rc4=0
[ "$ra" -ne 0 ] || [ "$rb" -ne 0 ] && rc4=1
echo

if [ "$rc1" -ne 0 ] || [ "$rc2" -ne 0 ] || [ "$rc3" -ne 0 ] || [ "$rc4" -ne 0 ]; then
	echo "demo: FAILED (run 1 exit $rc1, run 2 exit $rc2, report exit $rc3, run 3 exits $ra/$rb)" >&2
	exit 1
fi
echo "demo: all runs exited 0, and the report above read the dump the second run wrote."
