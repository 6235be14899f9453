# gpuguard: what tests/abi/check.sh and tests/scripts/hook_coverage.sh share,
# sourced from either: tests/scripts/lib.sh (counters, TMP, on_exit, skip,
# finish), with an "ok   X" line for each check passed and "FAIL X" for
# each failed, and where this machine keeps the CUDA headers.
. tests/scripts/lib.sh
# every check is said by name, the passed ones too
ok() {
	echo "ok   $1"
	passed=$((passed + 1))
}
fail() { bad "$1"; }

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
