#!/bin/sh
# gpuguard benchmark: the cost the preload adds to one allocate+free pair, per
# path, live-allocation count and thread count, on the simulated GPU. Each
# configuration runs REPS times as its own process, alternating plain and
# preloaded runs; the table compares medians. Also written to $BUILD/bench.txt.
set -eu
BUILD=${BUILD:-build}
REPS=${REPS:-5}
BENCH="$BUILD/tests/bench/bench"
LIB="$BUILD/lib/libgpuguard.so"
OUT=${OUT:-"$BUILD/bench.txt"}
# Extra environment for the preloaded runs only, e.g. the dump instrumentation
# off: GG_ENV="GPUGUARD_STACK_DEPTH=0 GPUGUARD_HISTORY=0".
GG_ENV=${GG_ENV:-}
# The variant's name, for the table's title.
if [ -n "$GG_ENV" ]; then VARIANT=${VARIANT:-"$GG_ENV"}; else VARIANT=${VARIANT:-"shipped defaults"}; fi
PATHS=${PATHS:-"cuMemAlloc_v2 cudart async vmm hip hipasync"}
LIVES=${LIVES:-"1000 1000000"}
THREADS=${THREADS:-"1 2 8"}

for f in "$BENCH" "$LIB" "$BUILD/sim/libcuda.so.1" "$BUILD/sim/libamdhip64.so.6"; do
	if [ ! -e "$f" ]; then
		echo "bench: $f is missing; run 'make bench'" >&2
		exit 1
	fi
done

# Pairs per thread: about the same total work whatever the thread count
# (8 threads on a 2-core machine measure contention, not throughput).
pairs_for() {
	case $1 in
	1) echo 300000 ;;
	2) echo 150000 ;;
	*) echo $((400000 / $1)) ;;
	esac
}

# Every run uses the shipped defaults but for GG_ENV (the table's size
# included: it grows, so the 1M case needs no larger GPUGUARD_TABLE_SLOTS).
# The ceiling is high enough never to refuse (bench checks).

raw=$(mktemp)
# A pod region of the bench's own: never join a real pod's budget on this host.
GPUGUARD_SHARED=$(mktemp -u)
export GPUGUARD_SHARED
trap 'rm -f "$raw" "$GPUGUARD_SHARED"' EXIT INT TERM

# bench_once MODE PATH LIVE THREADS: one process, one line into $raw.
bench_once() {
	mode=$1 path=$2 live=$3 thr=$4
	pairs=$(pairs_for "$thr")
	if [ "$mode" = gg ]; then
		# shellcheck disable=SC2086
		line=$(env LD_LIBRARY_PATH="$BUILD/sim" SIMGPU_MEMORY=1Ti GPUGUARD_LIMIT=1Ti \
			$GG_ENV LD_PRELOAD="$LIB" "$BENCH" "$path" "$live" "$thr" "$pairs")
		want=preloaded
	else
		line=$(env LD_LIBRARY_PATH="$BUILD/sim" SIMGPU_MEMORY=1Ti GPUGUARD_LIMIT=1Ti \
			"$BENCH" "$path" "$live" "$thr" "$pairs")
		want=plain
	fi
	set -- $line
	if [ "$#" -ne 5 ] || [ "$5" != "$want" ]; then
		echo "bench: expected a $want run, got: $line" >&2
		exit 1
	fi
	echo "$mode $1 $2 $3 $4" >>"$raw"
}

if commit=$(git rev-parse --short HEAD 2>/dev/null); then
	git diff --quiet HEAD 2>/dev/null || commit="$commit+dirty"
else
	commit='?'
fi

{
	echo "gpuguard benchmark: added cost per allocate+free pair (median of $REPS runs each)"
	echo "variant: $VARIANT"
	echo "command: BUILD=$BUILD${GG_ENV:+ GG_ENV=\"$GG_ENV\"} PATHS=\"$PATHS\" LIVES=\"$LIVES\" THREADS=\"$THREADS\" sh $0${*:+ $*}  (REPS=$REPS)"
	echo "each run: env LD_LIBRARY_PATH=$BUILD/sim SIMGPU_MEMORY=1Ti GPUGUARD_LIMIT=1Ti" \
		"[${GG_ENV:+$GG_ENV }LD_PRELOAD=$LIB]" \
		"$BENCH PATH LIVE THREADS PAIRS"
	echo "  PAIRS per thread: 1 thread $(pairs_for 1), 2 threads $(pairs_for 2), 8 threads $(pairs_for 8);" \
		"4 KiB per pair (VMM: 2 MiB); LIVE x 512 B pre-filled with cuMemAlloc_v2"
	echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)," \
		"$(uname -sr); commit $commit"
} | tee "$OUT"

start=$(date +%s)
rep=1
while [ "$rep" -le "$REPS" ]; do
	for live in $LIVES; do
		for path in $PATHS; do
			for thr in $THREADS; do
				# Alternate which goes first, so drift favours neither.
				if [ $((rep % 2)) -eq 1 ]; then
					bench_once base "$path" "$live" "$thr"
					bench_once gg "$path" "$live" "$thr"
				else
					bench_once gg "$path" "$live" "$thr"
					bench_once base "$path" "$live" "$thr"
				fi
			done
		done
	done
	rep=$((rep + 1))
done
secs=$(($(date +%s) - start))

# Medians per (path, live, threads), in the order configurations were run.
awk -v paths="$PATHS" -v lives="$LIVES" -v threads="$THREADS" -v secs="$secs" '
function median(key,    n, i, j, t, v) {
	n = split(vals[key], v, " ")
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) {
			t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
		}
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function label(l) { return l >= 1000000 ? (l / 1000000) "M" : l >= 1000 ? (l / 1000) "k" : l }
{ vals[$1 " " $2 " " $3 " " $4] = vals[$1 " " $2 " " $3 " " $4] " " $5 }
END {
	np = split(paths, P, " "); nl = split(lives, L, " "); nt = split(threads, T, " ")
	printf "\nadded = gpuguard - baseline; ratio = gpuguard / baseline (ns per pair, per thread)\n"
	printf "%-14s %5s %7s %12s %12s %10s %7s\n", "path", "live", "threads", "baseline ns", "gpuguard ns", "added ns", "ratio"
	for (i = 1; i <= np; i++)
		for (k = 1; k <= nl; k++)
			for (m = 1; m <= nt; m++) {
				key = P[i] " " L[k] " " T[m]
				b = median("base " key); g = median("gg " key)
				added[key] = g - b
				printf "%-14s %5s %7d %12.1f %12.1f %10.1f %7.2f\n", P[i], label(L[k]), T[m], b, g, g - b, (b > 0 ? g / b : 0)
			}
	if (nl == 2) {
		printf "\nadded(%s) / added(%s), per path and threads:\n", label(L[2]), label(L[1])
		for (i = 1; i <= np; i++) {
			line = sprintf("  %-14s", P[i])
			for (m = 1; m <= nt; m++) {
				a1 = added[P[i] " " L[1] " " T[m]]; a2 = added[P[i] " " L[2] " " T[m]]
				line = line sprintf("  %dT %6s", T[m], (a1 > 0 ? sprintf("%.2f", a2 / a1) : "n/a"))
			}
			print line
		}
	}
	k1 = "cuMemAlloc_v2 1000 1"; k2 = "cuMemAlloc_v2 1000000 1"
	if ((k1 in added) && (k2 in added)) {
		printf "\nheadline: cuMemAlloc_v2, 1 thread, 1M live: gpuguard adds %.1f ns per pair (target <= 100)\n", added[k2]
		printf "headline: added(1M) / added(1k) = %.1f / %.1f = %s (target <= 1.5)\n", added[k2], added[k1],
			(added[k1] > 0 ? sprintf("%.2f", added[k2] / added[k1]) : "n/a")
	}
	printf "(%d s)\n", secs
}' "$raw" | tee -a "$OUT"

# The accounting-only run (GG_ENV) has no stacks to measure.
[ -n "$GG_ENV" ] && exit 0

# A dump of 1 million live allocations (the exit trigger, so the bench's
# pre-filled allocations are all live): time and bytes per allocation.
ddir=$(mktemp -d)
msg=$(env LD_LIBRARY_PATH="$BUILD/sim" SIMGPU_MEMORY=1Ti GPUGUARD_LIMIT=1Ti \
	GPUGUARD_DUMP_AT_EXIT=1 GPUGUARD_DUMP_DIR="$ddir" LD_PRELOAD="$LIB" "$BENCH" cuMemAlloc_v2 1000000 1 1000 2>&1 |
	sed -n 's/.*wrote allocation dump .* (\(.*\))$/\1/p')
f=$(ls "$ddir"/gpuguard-*.jsonl 2>/dev/null | head -n 1)
if [ -n "$f" ]; then
	grep '"t":"a"' "$f" | awk -v m="$msg" '{ n++; b += length($0) + 1 }
		END { printf "\ndump of 1M live allocations: %s; %d allocation records, %.1f bytes each (targets: < 1.5 s, < 150 B)\n", m, n, b / n }'
fi | tee -a "$OUT"
rm -rf "$ddir"

# Stack capture for dumps (GPUGUARD_STACK_DEPTH), 60 frames deep as in a
# framework: median ns per pair, cuMemAlloc_v2, 1k live, 1 thread.
{
	printf "\nstack capture (%s unwinder, caller 60 frames deep): ns per pair by GPUGUARD_STACK_DEPTH\n" \
		"$(ldconfig -p 2>/dev/null | grep -q 'libunwind.so.8 ' && echo libunwind || echo frame-pointer)"
	for d in 0 8 16 32 64; do
		for r in $(seq "$REPS"); do
			env LD_LIBRARY_PATH="$BUILD/sim" SIMGPU_MEMORY=1Ti GPUGUARD_LIMIT=1Ti BENCH_FRAMES=60 \
				GPUGUARD_STACK_DEPTH=$d LD_PRELOAD="$LIB" "$BENCH" cuMemAlloc_v2 1000 1 200000 | awk '{ print $4 }'
		done | sort -n | awk -v d=$d '{ v[NR] = $1 } END { printf "  depth %2d: %8.1f\n", d, v[int((NR + 1) / 2)] }'
	done
} | tee -a "$OUT"
