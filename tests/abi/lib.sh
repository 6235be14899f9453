# gpuguard: what tests/abi/check.sh and tests/scripts/hook_coverage.sh share,
# sourced: their counters, their "ok   X" / "FAIL X" / "skip X" lines, the
# closing "harness: N passed, N failed[, N skipped]" line tests/run.sh
# parses, and where this machine keeps the CUDA headers.
passed=0
failed=0
skipped=0
ok() {
	echo "ok   $1"
	passed=$((passed + 1))
}
fail() {
	echo "FAIL $1"
	failed=$((failed + 1))
}
skip() {
	echo "skip $1"
	skipped=$((skipped + 1))
}

# The harness line; the status is 0 only if nothing failed (end a script
# with it).
abi_finish() {
	if [ "$skipped" -gt 0 ]; then
		echo "harness: $passed passed, $failed failed, $skipped skipped"
	else
		echo "harness: $passed passed, $failed failed"
	fi
	[ "$failed" -eq 0 ]
}

# cuda_headers [FILE...]: the directory of cuda.h (and of each FILE beside
# it): $CUDA_INC as it is where set, else the first of $CUDA_HOME/include,
# nvcc's include directory (nvcc on PATH), /usr/local/cuda/include and
# /usr/include that holds them all. Prints nothing where none does.
cuda_headers() {
	if [ -n "${CUDA_INC:-}" ]; then
		echo "$CUDA_INC"
		return
	fi
	nvcc=$(command -v nvcc 2>/dev/null)
	for d in ${CUDA_HOME:+"$CUDA_HOME/include"} ${nvcc:+"$(dirname "$(dirname "$nvcc")")/include"} \
		/usr/local/cuda/include /usr/include; do
		has=1
		for f in cuda.h "$@"; do
			[ -f "$d/$f" ] || has=
		done
		if [ -n "$has" ]; then
			echo "$d"
			return
		fi
	done
}
