#!/bin/sh
# gpuguard benchmark (issue 27), deterministic: instructions per
# cuMemAlloc_v2+cuMemFree_v2 pair (callgrind) from the bottom of a 30-frame
# Python stack, with Python frames read
# (shipped) and with them off (GPUGUARD_TEST_PYSTACK=off: the native capture
# alone); one capture per pair, so the difference is the Python capture's
# cost per captured event. Both at GPUGUARD_STACK_DEPTH=64, so all 30 frames
# are kept. Counted inside ffi_call (--toggle-collect=ffi_call: valgrind
# 3.19 names no function of the dlopen'ed libpybench.so, so timed_pairs
# cannot be the toggle), which holds the setup, the 1,000 warm pairs and the
# counted ones, all the same in both runs; per pair is over warm + counted.
# Appended to $BUILD/bench-count.txt.
set -eu
BUILD=${BUILD:-build}
LIB="$BUILD/lib/libgpuguard.so"
PYLIB="$BUILD/tests/bench/libpybench.so"
OUT=${OUT:-"$BUILD/bench-count.txt"}
PAIRS=${PAIRS:-2000}
DEPTH=${DEPTH:-30}
PY=${PYBENCH_PYTHON:-}
if [ -z "$PY" ]; then
	for c in /root/.pyenv/versions/3.12.*/bin/python3.12 "$HOME"/.pyenv/versions/3.12.*/bin/python3.12 \
		/usr/bin/python3.11 /usr/bin/python3; do
		[ -x "$c" ] && PY=$c && break
	done
fi
if ! command -v valgrind >/dev/null 2>&1 || [ -z "$PY" ]; then
	echo "bench: no valgrind or no Python; no Python capture count" | tee -a "$OUT"
	exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT INT TERM
count() {
	rm -f "$dir"/cg.*
	# shellcheck disable=SC2086
	env LD_LIBRARY_PATH="$BUILD/sim" SIMGPU_MEMORY=1Ti GPUGUARD_LIMIT=1Ti GPUGUARD_SHARED="$dir/region" \
		GPUGUARD_STACK_DEPTH=64 LD_PRELOAD="$LIB" $1 \
		valgrind --tool=callgrind --collect-atstart=no --toggle-collect=ffi_call \
		--callgrind-out-file="$dir/cg.%p" "$PY" tests/bench/pybench.py "$PYLIB" "$DEPTH" "$PAIRS" \
		>"$dir/line" 2>"$dir/err" || {
		echo "bench: callgrind run of pybench.py failed:" >&2
		cat "$dir/err" >&2
		exit 1
	}
	grep -q "^pybench $DEPTH $PAIRS\$" "$dir/line" || {
		echo "bench: pybench.py did not finish: $(cat "$dir/line")" >&2
		exit 1
	}
	cat "$dir"/cg.* | awk -v n="$((PAIRS + 1000))" '/^totals:/ { t += $2 } END { printf "%.1f", t / n }'
}
native=$(count GPUGUARD_TEST_PYSTACK=off)
python=$(count GPUGUARD_TEST_PYSTACK=on)
{
	echo
	echo "Python capture (issue 27): instructions per pair from a $DEPTH-frame Python stack, $("$PY" -V 2>&1), GPUGUARD_STACK_DEPTH=64"
	printf "  %-36s %10s\n" "native capture alone (PYSTACK=off)" "$native"
	printf "  %-36s %10s %+10.1f\n" "with Python frames (shipped)" "$python" "$(echo "$python $native" | awk '{ print $1 - $2 }')"
	echo "(target: Python frames add <= 1000 instructions per captured event)"
} | tee -a "$OUT"
