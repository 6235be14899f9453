#!/bin/bash
# gpuguard: make check-gpu on a lent GPU machine, in one prepared call of
# about six minutes (docs/gpu-checks.md). Nothing is compiled on the card:
#
#   here, first:   bash tests/gpu/lent.sh --prepare
#                  (make gpu-build: build/lib, build/bin, build/reallib and
#                  build/gpu with run.sh's device programs compiled by nvcc
#                  for sm_90 + compute_75 PTX, card, pairs and nvml_watch;
#                  then build/unw with libunwind.so.8 for a card without it;
#                  checks that what is carried fits the 64 MiB)
#   on the card:   the run tool, command "bash tests/gpu/lent.sh",
#                  carry ["build/lib","build/bin","build/reallib","build/gpu","build/unw"],
#                  timeout_s 480
#
# On the card: the new checks of issues 22 and 24 first (pods, overhead,
# pairs: at most 200 s), then the rest of check-gpu (the nvcc programs, the
# real-library programs, PyTorch: at most 260 s), each with its own summary.
# The programs keep this machine's toolkit as RUNPATH (/usr/local/cuda-13.0/
# lib64); where that is missing, its libraries are linked there from
# wherever the card keeps them (a toolkit, or PyTorch's nvidia-* wheels).
# Writes logs.tgz to $OUT. Exit status: 0 when both summaries pass.
cd "$(dirname "$0")/../.." || exit 1
CARRY="build/lib build/bin build/reallib build/gpu build/unw"

if [ "${1:-}" = --prepare ]; then
	make -j2 gpu-build || exit 1
	# logs of runs here are not for the card (and a FIFO left behind cannot travel)
	rm -rf build/gpu/new build/gpu/old build/gpu/dumps build/gpu/pods build/gpu/*.log build/gpu/rows.txt
	find build/gpu -type p -delete
	mkdir -p build/unw
	u=$(ldconfig -p | awk '$1 == "libunwind.so.8" { print $NF; exit }')
	if [ -n "$u" ]; then
		cp -L "$u" build/unw/libunwind.so.8
		for d in $(ldd "$u" | awk '$3 ~ /^\// && $1 !~ /^(libc|libm|libpthread|libdl|ld-linux)/ { print $3 }'); do
			cp -L "$d" build/unw/
		done
	else
		echo "note: no libunwind.so.8 here: a card without one records frame-pointer stacks"
	fi
	kib=$(du -skL $CARRY | awk '{ s += $1 } END { print s }')
	echo "carry: $CARRY ($((kib / 1024)) MiB of 64)"
	[ "$kib" -lt $((64 * 1024)) ] || { echo "lent.sh: the carry is over 64 MiB" >&2; exit 1; }
	for f in build/lib/libgpuguard.so build/bin/gpuguard build/gpu/card build/gpu/pairs build/gpu/nvml_watch \
		build/reallib/rl_fill_shared build/reallib/rl_fill_static build/gpu/driver_api; do
		[ -x "$f" ] || [ -f "$f" ] || { echo "lent.sh: $f was not built" >&2; exit 1; }
	done
	echo "ready: run bash tests/gpu/lent.sh on the card with that carry"
	exit 0
fi

echo "== machine"; date -u; uname -a; nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader
for t in nvcc gcc cc make python3 timeout; do printf '%s: %s\n' "$t" "$(command -v $t || echo missing)"; done
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.is_available())' 2>&1 | tail -1
for f in build/lib/libgpuguard.so build/gpu/card build/reallib/rl_fill_shared; do
	[ -e "$f" ] || echo "lent.sh: $f was not carried (run lent.sh --prepare here first)"
done
if ldconfig -p | grep -q 'libunwind.so.8 '; then
	echo "libunwind: system"
else
	export LD_LIBRARY_PATH=$PWD/build/unw${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	echo "libunwind: carried"
fi
# the programs' RUNPATH is this build machine's toolkit; point it at the card's
if [ ! -e /usr/local/cuda-13.0/lib64/libcublas.so.13 ]; then
	mkdir -p /usr/local/cuda-13.0/lib64
	for n in libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcudart.so.13; do
		f=$( (ls /usr/local/cuda/lib64/$n /usr/local/cuda/targets/*/lib/$n 2>/dev/null; timeout 30 find / -xdev -name "$n" 2>/dev/null) | head -n 1)
		echo "$n: ${f:-not found}"
		[ -n "$f" ] && ln -sf "$f" /usr/local/cuda-13.0/lib64/$n
	done
fi
export GG_GPU_PREBUILT=1 GG_GPU_TIMEOUT=60 GG_TORCH_TIMEOUT=100 GG_GPU_PODS_TIMEOUT=120
mkdir -p build/gpu/new build/gpu/old
echo "== check-gpu, part 1: pods, overhead, pairs (issues 22, 24)"
GG_GPU_LOGS=build/gpu/new GG_GPU_PARTS="pods overhead pairs" timeout -k 5 200 sh tests/gpu/run.sh
rc1=$?
[ $rc1 = 124 ] && { echo "part 1 timed out; its rows so far:"; cat build/gpu/new/rows.txt; }
echo "== check-gpu, part 2: programs, reallib, torch, torch_dump, torch_pod"
GG_GPU_LOGS=build/gpu/old GG_GPU_PARTS="programs reallib torch torch_dump torch_pod" \
	REALLIB_NAMES="rl_cudart_shared rl_cudart_static rl_cudart_ptds rl_libs" timeout -k 5 260 sh tests/gpu/run.sh
rc2=$?
[ $rc2 = 124 ] && { echo "part 2 timed out; its rows so far:"; cat build/gpu/old/rows.txt; }
echo "check-gpu rc=$rc1/$rc2"
[ -n "${OUT:-}" ] && tar czf "$OUT/logs.tgz" build/gpu/new build/gpu/old 2>/dev/null
[ $rc1 = 0 ] && [ $rc2 = 0 ]
