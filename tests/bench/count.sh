#!/bin/sh
# gpuguard benchmark, the deterministic half: instructions per allocate+free
# pair (callgrind), one thread, 4 KiB cuMemAlloc_v2 + cuMemFree_v2 on the
# simulated GPU, at 1k and at 1M live allocations, for each named variant of
# the options. Counted inside bench.c's timed_pairs only (--toggle-collect),
# so set-up, pre-fill and warm-up are left out. Instruction counts do not
# move with the load of a shared machine, unlike the timed medians of run.sh.
# Also written to $BUILD/bench-count.txt.
set -eu
BUILD=${BUILD:-build}
BENCH="$BUILD/tests/bench/bench"
LIB="$BUILD/lib/libgpuguard.so"
OUT=${OUT:-"$BUILD/bench-count.txt"}
PAIRS=${PAIRS:-10000}
LIVES=${LIVES:-"1000 1000000"}

if ! command -v valgrind >/dev/null 2>&1; then
	echo "bench: valgrind is missing (apt-get install valgrind); no instruction counts" | tee "$OUT"
	exit 0
fi
for f in "$BENCH" "$LIB" "$BUILD/sim/libcuda.so.1"; do
	if [ ! -e "$f" ]; then
		echo "bench: $f is missing; run 'make bench'" >&2
		exit 1
	fi
done

dir=$(mktemp -d)
GPUGUARD_SHARED="$dir/region"
export GPUGUARD_SHARED
trap 'rm -rf "$dir"' EXIT INT TERM

# The variants: a name, the preloaded run's extra environment ("-" for the
# shipped defaults, "plain" for no preload at all), and whether it runs at
# every live count ("all") or only the first (the 1M pre-fill is most of
# the time under valgrind).
VARIANTS='baseline|plain|all
shipped defaults|-|all
accounting only|GPUGUARD_STACK_DEPTH=0 GPUGUARD_HISTORY=0|all
stacks off|GPUGUARD_STACK_DEPTH=0|first
history off|GPUGUARD_HISTORY=0|first'

# count LIVE ENV: instructions per pair, printed with one decimal.
count() {
	rm -f "$dir"/cg.*
	if [ "$2" = plain ]; then
		pre=
	else
		pre="LD_PRELOAD=$LIB"
		[ "$2" = - ] || pre="$pre $2"
	fi
	# shellcheck disable=SC2086
	env LD_LIBRARY_PATH="$BUILD/sim" SIMGPU_MEMORY=1Ti GPUGUARD_LIMIT=1Ti $pre \
		valgrind --tool=callgrind --collect-atstart=no --toggle-collect=timed_pairs \
		--callgrind-out-file="$dir/cg.%p" "$BENCH" cuMemAlloc_v2 "$1" 1 "$PAIRS" >"$dir/line" 2>"$dir/err" || {
		echo "bench: callgrind run failed (live $1, ${2}):" >&2
		cat "$dir/err" >&2
		exit 1
	}
	want=preloaded
	[ "$2" = plain ] && want=plain
	if ! grep -q " $want\$" "$dir/line"; then
		echo "bench: expected a $want run, got: $(cat "$dir/line")" >&2
		exit 1
	fi
	cat "$dir"/cg.* | awk -v n="$PAIRS" '/^totals:/ { t += $2 } END { printf "%.1f", t / n }'
}

if commit=$(git rev-parse --short HEAD 2>/dev/null); then
	git diff --quiet HEAD 2>/dev/null || commit="$commit+dirty"
else
	commit='?'
fi
{
	echo "gpuguard benchmark: instructions per cuMemAlloc_v2+cuMemFree_v2 pair (callgrind), 1 thread, 4 KiB"
	echo "command: BUILD=$BUILD sh $0  (PAIRS=$PAIRS)"
	echo "each run: env LD_LIBRARY_PATH=$BUILD/sim SIMGPU_MEMORY=1Ti GPUGUARD_LIMIT=1Ti [LD_PRELOAD=$LIB VARIANT]" \
		"valgrind --tool=callgrind --collect-atstart=no --toggle-collect=timed_pairs $BENCH cuMemAlloc_v2 LIVE 1 $PAIRS"
	echo "  LIVE x 512 B pre-filled with cuMemAlloc_v2; $(valgrind --version); commit $commit"
	echo
	printf "%-18s %-42s %10s %10s %10s %10s %8s\n" variant environment "1k instr" "1k added" "1M instr" "1M added" "1M/1k"
} | tee "$OUT"

echo "$VARIANTS" | while IFS='|' read -r name env which; do
	line=$(printf "%-18s %-42s" "$name" "$([ "$env" = - ] && echo "(none)" || echo "$env")")
	vals=
	for live in $LIVES; do
		vals="$vals $(count "$live" "$env")"
		[ "$which" = all ] || break
	done
	echo "$name|$line|$vals"
done | awk -F'|' '
{
	n = split($3, v, " ")
	if (NR == 1)
		for (i = 1; i <= n; i++) base[i] = v[i]
	out = $2
	for (i = 1; i <= n; i++) {
		a[i] = v[i] - base[i]
		out = out sprintf(" %10.1f %10s", v[i], NR == 1 ? "-" : sprintf("%+.1f", a[i]))
	}
	if (n == 2)
		out = out sprintf(" %8s", NR == 1 || a[1] <= 0 ? "-" : sprintf("%.2f", a[2] / a[1]))
	else if (nl == 2)
		out = out sprintf(" %10s %10s %8s", "-", "-", "-")
	print out
}' nl="$(echo $LIVES | wc -w)" | tee -a "$OUT"
echo "(targets, instructions added per pair: accounting only <= 350; shipped defaults <= 900; 1M/1k <= 1.3 under the defaults)" |
	tee -a "$OUT"
