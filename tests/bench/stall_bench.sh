#!/bin/sh
# gpuguard benchmark: the refusal stall (issue 24), how long a refused
# cuMemAlloc_v2 holds its thread while the dump writer copies what was live,
# by GPUGUARD_TABLE_SLOTS and live count (target: <= 5 ms with 1k live,
# whatever the table's size). Two figures per cell, medians of REPS
# processes (one refusal each: the first is the one dumped): the refusing
# call as the application times it, which includes waking the writer thread
# (scheduler latency: on a loaded machine, most of it), and the writer's
# copy alone (the library's "copied in N us"). Also written to
# $BUILD/bench-stall.txt. LIB overrides the library (an older build).
set -eu
BUILD=${BUILD:-build}
REPS=${REPS:-5}
STALL="$BUILD/tests/bench/stall"
LIB=${LIB:-"$BUILD/lib/libgpuguard.so"}
OUT=${OUT:-"$BUILD/bench-stall.txt"}
SLOTS=${SLOTS:-"64 64Ki 1Mi 4Mi"}
LIVES=${LIVES:-"28 1000"}
for f in "$STALL" "$LIB" "$BUILD/sim/libcuda.so.1"; do
	[ -e "$f" ] || {
		echo "stall_bench: $f is missing; run 'make bench'" >&2
		exit 1
	}
done
ddir=$(mktemp -d)
GPUGUARD_SHARED=$(mktemp -u)
export GPUGUARD_SHARED
trap 'rm -rf "$ddir" "$GPUGUARD_SHARED"' EXIT INT TERM
med() { sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", v[int((NR + 1) / 2)]; else printf "?" }'; }
{
	echo
	echo "refusal stall: a refused cuMemAlloc_v2 (2 GiB under a 1 GiB ceiling), median of $REPS processes;"
	echo "  call ms = the refusing call as timed by the caller; copy ms = the writer's copy it waits for"
	echo "  (target: <= 5 ms with 1k live whatever the size); load average $(cut -d' ' -f1 /proc/loadavg)"
	printf "%-22s" "GPUGUARD_TABLE_SLOTS"
	for live in $LIVES; do printf " %22s" "$live live: call / copy"; done
	echo
	for slots in $SLOTS; do
		printf "%-22s" "$slots"
		for live in $LIVES; do
			: >"$ddir/call"
			: >"$ddir/copy"
			for r in $(seq "$REPS"); do
				env LD_LIBRARY_PATH="$BUILD/sim" SIMGPU_MEMORY=16Gi GPUGUARD_LIMIT=1Gi \
					GPUGUARD_TABLE_SLOTS="$slots" GPUGUARD_DUMP_DIR="$ddir" LD_PRELOAD="$LIB" \
					"$STALL" "$live" 2147483648 2>"$ddir/err" | awk '{ print $2 }' >>"$ddir/call"
				sed -n 's/.*copied in \([0-9]*\) us).*/\1/p' "$ddir/err" | awk '{ print $1 / 1000 }' >>"$ddir/copy"
				rm -f "$ddir"/gpuguard-*.jsonl
			done
			printf " %13s / %6s" "$(med <"$ddir/call")" "$(med <"$ddir/copy")"
		done
		echo
	done
} | tee "$OUT"
