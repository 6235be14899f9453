#!/bin/bash
# gpuguard: make check-gpu on a lent GPU machine (one prepared run), with
# build/lib, build/obj, build/bin and build/reallib built elsewhere and
# carried, and build/unw holding libunwind.so.8 for a machine without it.
# The reallib programs keep the build machine's toolkit as RUNPATH
# (/usr/local/cuda-13.0/lib64); where that is missing, its libraries are
# linked there from wherever the machine keeps them. Writes logs.tgz to $OUT.
cd "$(dirname "$0")/../.." || exit 1
echo "== machine"; date -u; uname -a; nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader
for t in nvcc gcc cc make python3 timeout; do printf '%s: %s\n' "$t" "$(command -v $t || echo missing)"; done
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.is_available())' 2>&1 | tail -1
ldconfig -p | grep -q 'libunwind.so.8 ' && echo "libunwind: system" || { export LD_LIBRARY_PATH=$PWD/build/unw${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; echo "libunwind: carried"; }
# rl_libs' RUNPATH is this build machine's toolkit; point it at the card's.
if [ ! -e /usr/local/cuda-13.0/lib64/libcublas.so.13 ]; then
	mkdir -p /usr/local/cuda-13.0/lib64
	for n in libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcudart.so.13; do
		f=$( (ls /usr/local/cuda/lib64/$n /usr/local/cuda/targets/*/lib/$n 2>/dev/null; find / -xdev -name "$n" 2>/dev/null) | head -n 1)
		echo "$n: ${f:-not found}"
		[ -n "$f" ] && ln -sf "$f" /usr/local/cuda-13.0/lib64/$n
	done
fi
export GG_GPU_TIMEOUT=60 GG_TORCH_TIMEOUT=150
mkdir -p build/gpu
# carried files are as new as the sources: nothing to rebuild
touch build/obj/*.o; touch build/lib/libgpuguard.so; touch build/reallib/* build/bin/gpuguard
echo "== what make would rebuild"; make -n lib build/reallib/rl_libs 2>&1 | head -5
if command -v make >/dev/null && make lib build/reallib/rl_cudart_shared build/reallib/rl_cudart_static build/reallib/rl_cudart_ptds build/reallib/rl_libs >build/gpu/make.log 2>&1; then
	echo "== make check-gpu"; timeout -k 5 330 make check-gpu; rc=$?
else
	echo "== make unusable here (see make.log); tests/gpu/run.sh"; tail -3 build/gpu/make.log
	REALLIB_NAMES="rl_cudart_shared rl_cudart_static rl_cudart_ptds rl_libs" timeout -k 5 330 sh tests/gpu/run.sh; rc=$?
fi
echo "check-gpu rc=$rc"
[ -n "${OUT:-}" ] && tar czf "$OUT/logs.tgz" build/gpu/*.log build/gpu/dumps build/gpu/rows.txt 2>/dev/null
exit "$rc"
