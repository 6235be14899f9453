#!/bin/sh
# gpuguard: runs every test program and adds up their "harness: N passed,
# N failed" lines. A program that exits non-zero with no failure of its own
# (a crash, a sanitizer report) counts as one failed test. Closing line:
# "N passed, N failed" (", N skipped" where a test could not run here).
BUILD=${BUILD:-build}
ROOT=$(pwd)
LIB="$ROOT/$BUILD/lib/libgpuguard.so"
SIMDIR="$ROOT/$BUILD/sim"
# Under a sanitizer its runtime must be loaded first, before our library.
PRELOAD="${SAN_RUNTIME:+$SAN_RUNTIME }$LIB"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"
# Dumps the tests provoke (every ceiling refusal writes one) land in a
# scratch directory, never in the tree.
GG_DUMPS=$(mktemp -d)
export GPUGUARD_DUMP_DIR="$GG_DUMPS"
export GG_TEST_LIB="$LIB" GG_TEST_SIMDIR="$SIMDIR" GG_TEST_PRELOAD="$PRELOAD" GG_TEST_BUILD="$ROOT/$BUILD"

passed=0
nrun=0
failed=0
skipped=0
log=$(mktemp)
trap 'rm -f "$log"; rm -rf "$GG_DUMPS"' EXIT

# run NAME ENV... -- CMD...
run() {
	name=$1
	shift
	start=$(date +%s)
	# Each test program gets a pod region of its own (pod scope is the
	# default), so no test sees another's budget.
	nrun=$((nrun + 1))
	# A hung test must not hang CI: each program gets a time limit.
	timeout -k 10 "${GG_TEST_TIMEOUT:-300}" env GPUGUARD_SHARED="$GG_DUMPS/pod-$nrun" "$@" >"$log" 2>&1
	rc=$?
	[ "$rc" -eq 124 ] && echo "timed out after ${GG_TEST_TIMEOUT:-300}s" >>"$log"
	secs=$(($(date +%s) - start))
	line=$(grep '^harness: ' "$log" | tail -n 1)
	if [ -n "$line" ]; then
		p=$(echo "$line" | sed -n 's/^harness: \([0-9]*\) passed, \([0-9]*\) failed.*/\1/p')
		f=$(echo "$line" | sed -n 's/^harness: \([0-9]*\) passed, \([0-9]*\) failed.*/\2/p')
		s=$(echo "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
	else
		p=0 f=0 s=
	fi
	if [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
		f=1
	fi
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	skipped=$((skipped + ${s:-0}))
	if [ "${f:-0}" -ne 0 ]; then
		echo "FAIL $name (exit $rc, ${secs}s)"
		sed 's/^/    /' "$log" | tail -n 60
	else
		echo "ok   $name: ${p:-0} passed${s:+, $s skipped} (${secs}s)"
	fi
}

# skip NAME WHY: a test this machine cannot run, counted by name.
skip() {
	echo "skip $1: $2"
	skipped=$((skipped + 1))
}

# GG_TEST_GROUPS picks the groups to run (default: all). The aarch64 run
# (tests/aarch64.sh) takes the ones that run on the simulated GPU alone.
GROUPS=${GG_TEST_GROUPS:-unit sim preload reallib scripts abi}
want() {
	case " $GROUPS " in *" $1 "*) return 0 ;; esac
	return 1
}

want unit && for t in "$BUILD"/tests/unit/test_*; do
	[ -x "$t" ] && run "unit/$(basename "$t")" "$t"
done

want sim && [ -x "$BUILD/tests/sim_test" ] && run sim/test_sim LD_LIBRARY_PATH="$SIMDIR" "$BUILD/tests/sim_test"

want preload && for t in "$BUILD"/tests/preload/t_*; do
	[ -x "$t" ] || continue
	n=$(basename "$t")
	# A program defining dlsym itself breaks ThreadSanitizer's own start-up
	# (its interceptors are found through dlsym), before any test runs.
	if [ "$SAN" = thread ] && [ "$n" = t_own_dlsym_rdyn ]; then
		skip "preload/$n" "ThreadSanitizer cannot start under a program that defines dlsym"
		continue
	fi
	envfile="tests/preload/$n.env"
	extra=
	[ -f "$envfile" ] && extra=$(grep -v '^#' "$envfile" | tr '\n' ' ')
	# shellcheck disable=SC2086
	run "preload/$n" LD_LIBRARY_PATH="$SIMDIR:$BUILD/tests/preload" LD_PRELOAD="$PRELOAD" $extra "$t"
done

# The toolkit's own libcudart, cuBLAS and NCCL (tests/reallib/), built by
# nvcc once for every variant in build/reallib/: on the bare simulator (it
# must host them), then under the preload (the books must hold). Skipped by
# name where there is no toolkit.
REALLIB_DIR="$ROOT/build/reallib"
export REALLIB_DIR
want reallib && for n in ${REALLIB_NAMES:-rl_cudart_shared rl_cudart_static rl_cudart_ptds rl_libs}; do
	t="$REALLIB_DIR/$n"
	if [ ! -x "$t" ]; then
		skip "reallib/$n" "no CUDA toolkit (nvcc) on this machine"
		skip "reallib/$n+gpuguard" "no CUDA toolkit (nvcc) on this machine"
		continue
	fi
	run "reallib/$n" LD_LIBRARY_PATH="$SIMDIR" LD_PRELOAD="${SAN_RUNTIME:-}" SIMGPU_MEMORY=8Gi "$t"
	run "reallib/$n+gpuguard" LD_LIBRARY_PATH="$SIMDIR" LD_PRELOAD="$PRELOAD" GPUGUARD_LIMIT=2Gi SIMGPU_MEMORY=8Gi "$t"
done
if ! want reallib; then
	:
elif [ -x "$REALLIB_DIR/rl_cudart_shared" ] && [ -x "$REALLIB_DIR/rl_cudart_static" ]; then
	run reallib/exit_report sh tests/reallib/exit_report.sh
else
	skip reallib/exit_report "no CUDA toolkit (nvcc) on this machine"
fi

# (group "exports" is tests/scripts/exports.sh alone: the library's face;
# lib.sh is what the scripts source, not a test)
for t in tests/scripts/*.sh; do
	[ "$t" = tests/scripts/lib.sh ] && continue
	want scripts || { [ "$t" = tests/scripts/exports.sh ] && want exports; } || continue
	[ -f "$t" ] && run "scripts/$(basename "$t")" sh "$t"
done

if want abi && [ -f "$BUILD/tests/abi/result.txt" ]; then
	cp "$BUILD/tests/abi/result.txt" "$log.abi"
	run abi/conformance cat "$log.abi"
	rm -f "$log.abi"
fi

echo
if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
