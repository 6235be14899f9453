#!/bin/sh
# gpuguard benchmark: the refusal stall (issue 24), how long a refused
# cuMemAlloc_v2 holds its thread while the dump writer copies what was live,
# by GPUGUARD_TABLE_SLOTS and live count (target: <= 5 ms with 1k live,
# whatever the table's size). Median of REPS processes each; one refusal per
# process (the first is the one dumped). Also written to $BUILD/bench-stall.txt.
set -eu
BUILD=${BUILD:-build}
REPS=${REPS:-5}
STALL="$BUILD/tests/bench/stall"
LIB="$BUILD/lib/libgpuguard.so"
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
{
	echo
	echo "refusal stall: ms a refused cuMemAlloc_v2 (2 GiB under a 1 GiB ceiling) takes, median of $REPS processes (target: <= 5 ms with 1k live)"
	printf "%-22s" "GPUGUARD_TABLE_SLOTS"
	for live in $LIVES; do printf " %12s" "$live live"; done
	echo
	for slots in $SLOTS; do
		printf "%-22s" "$slots"
		for live in $LIVES; do
			for r in $(seq "$REPS"); do
				env LD_LIBRARY_PATH="$BUILD/sim" SIMGPU_MEMORY=16Gi GPUGUARD_LIMIT=1Gi \
					GPUGUARD_TABLE_SLOTS="$slots" GPUGUARD_DUMP_DIR="$ddir" LD_PRELOAD="$LIB" \
					"$STALL" "$live" 2147483648 2>/dev/null | awk '{ print $2 }'
				rm -f "$ddir"/gpuguard-*.jsonl
			done | sort -n | awk '{ v[NR] = $1 } END { printf " %12.2f", v[int((NR + 1) / 2)] }'
		done
		echo
	done
} | tee "$OUT"
