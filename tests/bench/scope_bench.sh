#!/bin/sh
# gpuguard benchmark: what pod scope (one budget in the shared region file)
# adds over process scope, per allocate+free pair of cuMemAlloc_v2, 1k live,
# with the dump instrumentation off so only the accounting differs. Each
# configuration runs REPS times as its own process, rotating the order;
# medians. Appended to $BUILD/bench.txt.
set -eu
BUILD=${BUILD:-build}
REPS=${REPS:-7}
BENCH="$BUILD/tests/bench/bench"
LIB="$BUILD/lib/libgpuguard.so"
OUT=${OUT:-"$BUILD/bench.txt"}
THREADS=${THREADS:-"1 8"}
region=$(mktemp -u /dev/shm/gpuguard-bench-XXXXXX 2>/dev/null || mktemp -u)
raw=$(mktemp)
trap 'rm -f "$raw" "$region"' EXIT INT TERM

pairs_for() { if [ "$1" -eq 1 ]; then echo 600000; else echo $((800000 / $1)); fi; }

# one MODE THREADS: base (no preload), process or pod.
one() {
	mode=$1 thr=$2
	set -- env LD_LIBRARY_PATH="$BUILD/sim" SIMGPU_MEMORY=1Ti GPUGUARD_LIMIT=1Ti \
		GPUGUARD_STACK_DEPTH=0 GPUGUARD_HISTORY=0 GPUGUARD_SHARED="$region"
	case $mode in
	base) line=$("$@" "$BENCH" cuMemAlloc_v2 1000 "$thr" "$(pairs_for "$thr")") ;;
	*) line=$("$@" GPUGUARD_SCOPE="$mode" LD_PRELOAD="$LIB" "$BENCH" cuMemAlloc_v2 1000 "$thr" \
		"$(pairs_for "$thr")") ;;
	esac
	echo "$mode $thr $(echo "$line" | awk '{ print $4 }')" >>"$raw"
}

for r in $(seq "$REPS"); do
	for thr in $THREADS; do
		case $((r % 3)) in
		0) one base "$thr"; one process "$thr"; one pod "$thr" ;;
		1) one process "$thr"; one pod "$thr"; one base "$thr" ;;
		2) one pod "$thr"; one base "$thr"; one process "$thr" ;;
		esac
	done
done
[ -e "$region" ] || { echo "scope_bench: the pod runs made no region at $region" >&2; exit 1; }

awk -v threads="$THREADS" -v reps="$REPS" '
function median(key,    n, i, j, t, v) {
	n = split(vals[key], v, " ")
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
{ vals[$1 " " $2] = vals[$1 " " $2] " " $3 }
END {
	printf "\npod scope vs process scope: cuMemAlloc_v2, 1k live, stacks and history off (median of %d runs)\n", reps
	printf "command: BUILD=build sh tests/bench/scope_bench.sh\n"
	printf "%7s %12s %12s %12s %12s %12s %7s\n", "threads", "baseline ns", "process ns", "pod ns", "process +ns", "pod +ns", "pod/proc"
	nt = split(threads, T, " ")
	for (m = 1; m <= nt; m++) {
		b = median("base " T[m]); p = median("process " T[m]); s = median("pod " T[m])
		printf "%7d %12.1f %12.1f %12.1f %12.1f %12.1f %7s\n", T[m], b, p, s, p - b, s - b,
			(p - b > 0 ? sprintf("%.2f", (s - b) / (p - b)) : "n/a")
	}
	printf "(target: pod +ns within 2x of process +ns)\n"
}' "$raw" | tee -a "$OUT"
