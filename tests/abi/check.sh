#!/bin/sh
# gpuguard: checks include/gpuguard/{cuda,hip}_abi.h against the vendor headers
# this machine has, by compiling tests/abi/*.c, which are all static asserts.
# A missing header set is a skip; a compile error is a failure. One line per
# group, then "harness: N passed, N failed[, N skipped]" for tests/run.sh.
# Env: CC, OUT (logs), CUDA_INC and HIP_INC to point at other headers.
CC=${CC:-cc}
OUT=${OUT:-build/tests/abi}
FLAGS="-std=gnu11 -Wall -Wextra -Werror -Iinclude -fsyntax-only"
mkdir -p "$OUT" || exit 1

. "$(dirname "$0")/lib.sh"

# compile NAME WHAT ARGS...: one group, its errors shown indented.
compile() {
	name=$1
	what=$2
	shift 2
	# shellcheck disable=SC2086
	if $CC $FLAGS "$@" >"$OUT/$name.log" 2>&1; then
		ok "$name: $what"
	else
		fail "$name: $what"
		sed 's/^/    /' "$OUT/$name.log"
	fi
}

# uncovered HEADER TEST: every gg_ type and object-like GG_ constant that
# HEADER declares must be named in TEST, so a new one cannot go unchecked.
# (Prototypes need no list: the tests re-expand the header's own X-list.)
uncovered() {
	{
		grep -o 'gg_[A-Za-z0-9_]*' "$1" | grep -v '^gg_pfn_' | grep -v '^gg_$'
		sed -n 's/^#define \(GG_[A-Za-z0-9_]*\)[ 	].*/\1/p' "$1"
	} | sort -u | while read -r sym; do
		grep -q -w "$sym" "$2" || printf ' %s' "$sym"
	done
}

# --- CUDA driver (cuda.h) and runtime (cuda_runtime_api.h) ---------------
cuda_inc=$(cuda_headers)
if [ -z "$cuda_inc" ] || [ ! -f "$cuda_inc/cuda.h" ]; then
	why="no cuda.h (set CUDA_INC, CUDA_HOME or put nvcc on PATH)"
	skip "cuda: $why"
	skip "cuda_ptsz: $why"
	skip "cuda_legacy: $why"
	skip "cudart: $why"
else
	v=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$cuda_inc/cuda.h")
	at="CUDA $((v / 1000)).$((v % 1000 / 10)), $cuda_inc"
	missing=$(uncovered include/gpuguard/cuda_abi.h tests/abi/cuda.c)
	if [ -n "$missing" ]; then
		fail "cuda: tests/abi/cuda.c does not check:$missing"
	else
		compile cuda "types, constants, prototypes ($at)" -I"$cuda_inc" -DGG_ABI_GROUP=1 tests/abi/cuda.c
	fi
	compile cuda_ptsz "per-thread default stream prototypes" -I"$cuda_inc" -DGG_ABI_GROUP=2 tests/abi/cuda.c
	compile cuda_legacy "unversioned legacy prototypes" -I"$cuda_inc" -DGG_ABI_GROUP=3 tests/abi/cuda.c
	if [ -f "$cuda_inc/cuda_runtime_api.h" ]; then
		compile cudart "cudaErrorMemoryAllocation is our OUT_OF_MEMORY" -I"$cuda_inc" -DGG_ABI_GROUP=4 \
			tests/abi/cuda.c
	else
		skip "cudart: no cuda_runtime_api.h beside $cuda_inc/cuda.h"
	fi
fi

# --- HIP (Debian's libamdhip64-dev, HIP 5.x) ----------------------------------
hip_inc=${HIP_INC:-/usr/include}
if [ ! -f "$hip_inc/hip/hip_runtime_api.h" ]; then
	skip "hip: no $hip_inc/hip/hip_runtime_api.h (install libamdhip64-dev or set HIP_INC)"
else
	vh="$hip_inc/hip/hip_version.h"
	at="HIP $(sed -n 's/^#define HIP_VERSION_MAJOR \([0-9]*\).*/\1/p' "$vh").$(sed -n 's/^#define HIP_VERSION_MINOR \([0-9]*\).*/\1/p' "$vh"), $hip_inc"
	missing=$(uncovered include/gpuguard/hip_abi.h tests/abi/hip.c)
	if [ -n "$missing" ]; then
		fail "hip: tests/abi/hip.c does not check:$missing"
	else
		compile hip "types, constants, prototypes ($at)" -I"$hip_inc" -D__HIP_PLATFORM_AMD__ tests/abi/hip.c
	fi
fi

finish
