#!/bin/sh
# gpuguard: the kill soak of pod scope (issue 9). Four worker processes of
# four threads allocate and free mixed sizes at a pod ceiling; one at random
# is killed with SIGKILL, hundreds of times, and restarted. A monitor stops
# all of them over and over and checks that the simulated memory they hold
# together never passes the ceiling (tests/tools/podsoak.c; the worker's
# shim, podsoak_shim.c, says why its figure never undercounts). At the end,
# with the workers parked: the pod's `used` in `gpuguard metrics` equals
# what they hold to the byte, and a request that exactly fits is granted
# and one granule more refused. SOAK_SECONDS (20) and SOAK_KILLS (300, 150
# under ThreadSanitizer) set the length; `make soak` runs 600 s.
ROOT=$(pwd)
B="${GG_TEST_BUILD:-$ROOT/build}"
PRE="${GG_TEST_PRELOAD:-$B/lib/libgpuguard.so}"
SOAK="$B/tests/tools/podsoak"
SHIM="$B/tests/tools/libpodsoak_shim.so"
GG="$B/bin/gpuguard"
. "$(dirname "$0")/lib.sh"
for x in "$SOAK" "$SHIM" "$GG"; do
	if [ ! -e "$x" ]; then
		bad "$x is missing (make all)"
		finish
	fi
done
SECONDS_=${SOAK_SECONDS:-20}
if [ "$SAN" = thread ]; then
	KILLS=${SOAK_KILLS:-150} # each start under TSan maps its shadow: slower
else
	KILLS=${SOAK_KILLS:-300}
fi
CEILING=300Mi
CEILING_BYTES=314572800

export LD_LIBRARY_PATH="${GG_TEST_SIMDIR:-$B/sim}"
export GPUGUARD_SHARED="$TMP/pod" GPUGUARD_LIMIT="$CEILING" GPUGUARD_CONTEXT_RESERVE=0 GPUGUARD_SCOPE=pod
export GPUGUARD_DUMP_MAX=0 GPUGUARD_DUMP_DIR="$TMP" GPUGUARD_ON_LIMIT=fail
unset GPUGUARD_VERBOSE
export PODSOAK_PRELOAD="$PRE $SHIM"
export GG PRE SOAK CEILING_BYTES TMP

# Run by the controller while the workers are parked, holding PODSOAK_LIVE.
cat >"$TMP/final.sh" <<'FINAL'
"$GG" metrics --region "$GPUGUARD_SHARED" >"$TMP/metrics.txt" 2>&1
used=$(sed -n 's/^gpuguard_device_used_bytes{kind="CUDA",[^}]*} \([0-9]*\)$/\1/p' "$TMP/metrics.txt")
# used is the books plus the runtime (what each process's NVML shows beyond
# its books: here its own simulated card's partly filled pages, issue 22);
# the books alone are what the live processes hold
runtime=$(sed -n 's/^gpuguard_device_runtime_bytes{kind="CUDA",[^}]*} \([0-9]*\)$/\1/p' "$TMP/metrics.txt")
[ -n "$used" ] && used=$((used - ${runtime:-0}))
live=$(sed -n 's/^gpuguard_processes{state="live"} \([0-9]*\)$/\1/p' "$TMP/metrics.txt")
echo "soak: pod books (gpuguard metrics: used less runtime ${runtime:-0}) ${used:-?}, live holdings $PODSOAK_LIVE; final difference $((${used:-0} - PODSOAK_LIVE))"
rc=0
if [ -n "$used" ] && [ "$used" -eq "$PODSOAK_LIVE" ]; then
	echo "check final-used-exact ok"
else
	echo "check final-used-exact FAIL (metrics:)"
	grep -v '^#' "$TMP/metrics.txt" | head -n 20 | sed 's/^/    /'
	rc=1
fi
if [ "$live" = 4 ]; then
	echo "check final-four-live ok"
else
	echo "check final-four-live FAIL ($live live processes in the region, want 4)"
	rc=1
fi
# the room: the ceiling less the books and the parked workers' runtime
# (their own cards' partly filled pages, and the headroom held once NVML
# shows any: GPUGUARD_RUNTIME is on); parked, they reconcile no more
room=$((CEILING_BYTES - PODSOAK_LIVE - ${runtime:-0}))
if [ "$room" -gt 0 ]; then
	echo "soak: probing with $room bytes, the room left under the ceiling"
	LD_PRELOAD="$PRE" "$SOAK" probe "$room" || rc=1
else
	echo "check probe FAIL (the parked workers hold $PODSOAK_LIVE, over the ceiling $CEILING_BYTES)"
	rc=1
fi
exit $rc
FINAL
export PODSOAK_FINAL="sh $TMP/final.sh"

"$SOAK" run "$TMP/stats" "$TMP/pod" "$CEILING_BYTES" "$SECONDS_" "$KILLS" >"$TMP/out.txt" 2>&1
rc=$?
cat "$TMP/out.txt"
passed=$(grep -c '^check .* ok' "$TMP/out.txt")
failed=$(grep -c '^check .* FAIL' "$TMP/out.txt")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
	echo "FAIL the soak exited $rc without naming a failed check"
	failed=1
fi
finish
