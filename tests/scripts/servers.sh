#!/bin/sh
# gpuguard: the report's advice, tried on the program it was given for
# (issue 11, findings 1 and 4). Each test server (tests/servers/) behaves as
# one kind of real program does: vLLM, JAX, TensorRT-LLM (sizing
# themselves from cuMemGetInfo; one more from NVML), PyTorch (its caching
# allocator, frames in a stand-in libc10_cuda.so) and a plain C program.
# Each runs on the
# simulated GPU into a 4 GiB ceiling; the report must give the advice that
# fits the program, naming its evidence, and the advice applied must
# reject fewer requests. GG_GOLDEN_UPDATE=1 also copies the dumps to
# tests/golden/server_*.jsonl (then run golden.sh with it for the reports).
ROOT=$(pwd)
B="${GG_TEST_BUILD:-$ROOT/build}"
GG="$B/bin/gpuguard"
S="$B/tests/servers"
. "$(dirname "$0")/lib.sh"
export LD_LIBRARY_PATH="$B/sim"
export SIMGPU_MEMORY=16Gi
unset GPUGUARD_LIMIT LD_PRELOAD GPUGUARD_DUMP_AT_EXIT GPUGUARD_VERBOSE
[ -n "$SAN_RUNTIME" ] && export LD_PRELOAD="$SAN_RUNTIME" ASAN_OPTIONS="${ASAN_OPTIONS}:verify_asan_link_order=0"
# The dumps kept as golden cases (tests/golden/server_*.jsonl); with
# GG_GOLDEN_UPDATE=1, GG_SERVERS_GOLDEN="NAME..." copies only those.
GOLDEN=${GG_SERVERS_GOLDEN:-"vllm vllm95 jax trtllm trtllm_exit nvml torch plain_c plain_c_short"}
n=0
# serve NAME [gpuguard run options] -- [env VAR=V] PROGRAM: a pod region
# and dump directory of its own; the run's rejected count in $rejected,
# its first dump in $dump (last_dump: the exit dump).
serve() {
	name=$1
	shift
	n=$((n + 1))
	dir="$TMP/$name.$n"
	mkdir -p "$dir"
	GPUGUARD_SHARED="$dir/region" "$GG" run --dump-dir "$dir" "$@" >"$dir/log" 2>&1
	rejected=$(sed -n 's/^summary: .* \([0-9][0-9]*\) rejected.*/\1/p' "$dir/log")
	dump=$(ls "$dir"/gpuguard-*.jsonl 2>/dev/null | head -n 1)
	if [ -z "$rejected" ]; then
		bad "$name: no summary line"
		tail -n 3 "$dir/log"
		rejected=-1
	fi
}
# The exit dump (by its trigger: a refusal's dump may share its mtime).
last_dump() { dump=$(grep -l '"trigger":"exit"' "$dir"/gpuguard-*.jsonl 2>/dev/null | head -n 1); }
report() {
	if [ -z "$dump" ]; then
		bad "$1: no dump"
		: >"$TMP/$1.txt"
		return
	fi
	"$GG" report "$dump" >"$TMP/$1.txt" 2>&1 || bad "$1: report failed"
	case " $GOLDEN " in
	*" $1 "*) [ -n "$GG_GOLDEN_UPDATE" ] && cp "$dump" "$ROOT/tests/golden/server_$1.jsonl" ;;
	esac
}
has() { grep -qF -- "$2" "$TMP/$1.txt" && ok || bad "$1: the report lacks '$2'"; }
hasnt() { ! grep -qF -- "$2" "$TMP/$1.txt" && ok || bad "$1: the report says '$2'"; }
fewer() { [ "$2" -ge 0 ] && [ "$2" -lt "$3" ] && ok || bad "$1: $2 rejected with the advice, $3 without"; }

if [ ! -x "$S/vllm_like" ] || [ ! -x "$GG" ]; then
	bad "$S or $GG missing (make all)"
	finish
fi

# vLLM-like: the fraction, not a higher ceiling; no PyTorch without frames.
serve vllm --limit 4Gi -- "$S/vllm_like"
before=$rejected
report vllm
has vllm "the stacks or the command name vLLM, which sizes itself with gpu_memory_utilization"
has vllm "it sizes itself from the memory info: of 2 queries"
has vllm "=> lower gpu_memory_utilization by 0.05 (e.g. 0.90 -> 0.85)"
hasnt vllm "raise GPUGUARD_LIMIT"
hasnt vllm "expandable_segments"
serve vllm --limit 4Gi -- env GPU_MEMORY_UTILIZATION=0.85 "$S/vllm_like"
fewer vllm "$rejected" "$before"

# Its fraction on its command line (vLLM's own flag): the advice starts
# from it, though what it took measures as some other fraction (weights and
# the profiled peak come off the top).
serve vllm95 --limit 4Gi -- "$S/vllm_like" --gpu-memory-utilization 0.95
before=$rejected
report vllm95
has vllm95 "its command line sets gpu_memory_utilization to 0.95"
has vllm95 "=> lower gpu_memory_utilization from 0.95 to 0.90"
serve vllm95 --limit 4Gi -- "$S/vllm_like" --gpu-memory-utilization 0.90
fewer vllm95 "$rejected" "$before"

# JAX-like: one preallocation of 0.75 of the total right after the query;
# the advice leaves what the refused workspace needed, in one step.
serve jax --limit 4Gi -- "$S/jax_like"
before=$rejected
report jax
has jax "right after it, stack 1 allocated 3.00 GiB in 1 allocation and keeps it: 0.75 of the total: xla_bfc_preallocate (jax_like)"
has jax "=> lower XLA_PYTHON_CLIENT_MEM_FRACTION from 0.75 to 0.70"
hasnt jax "raise GPUGUARD_LIMIT"
serve jax --limit 4Gi -- env XLA_PYTHON_CLIENT_MEM_FRACTION=0.70 "$S/jax_like"
[ "$rejected" -eq 0 ] && ok || bad "jax: $rejected of 120 rejected at the advised 0.70 (before: $before)"

# TensorRT-LLM-like: a fraction of the free memory, stepped against the
# free memory. The first refusal's dump sees only that refusal; the exit
# dump sees them all and its advice leaves room for the largest.
serve trtllm --limit 4Gi -- "$S/trtllm_like"
before=$rejected
report trtllm
has trtllm "0.90 of the free"
has trtllm "=> lower kv_cache_free_gpu_mem_fraction from 0.90 to 0.85: it leaves 384.00 MiB of free memory"
has trtllm "=> this dump is the first refusal's"
serve trtllm --limit 4Gi -- env KV_CACHE_FREE_GPU_MEM_FRACTION=0.85 "$S/trtllm_like"
fewer trtllm "$rejected" "$before"
GPUGUARD_DUMP_AT_EXIT=1 serve trtllm_exit --limit 4Gi -- "$S/trtllm_like"
last_dump
report trtllm_exit
has trtllm_exit "device 0 refused $before requests at its 4.00 GiB ceiling"
has trtllm_exit "=> lower kv_cache_free_gpu_mem_fraction from 0.90 to 0.80"
hasnt trtllm_exit "no failure"
serve trtllm --limit 4Gi -- env KV_CACHE_FREE_GPU_MEM_FRACTION=0.80 "$S/trtllm_like"
[ "$rejected" -eq 0 ] && ok || bad "trtllm: $rejected of 150 rejected at the exit dump's 0.80"

# Sized from NVML's total: the library records NVML's memory-info queries
# too ("via":"nvml"), so the advice is the fraction here as well.
serve nvml --limit 4Gi -- "$S/nvml_sized"
before=$rejected
report nvml
grep -q '"t":"meminfo",.*"via":"nvml"' "$dump" && ok || bad "nvml: no meminfo record via NVML in the dump"
has nvml "it sizes itself from the memory info: of 1 queries, #1 (NVML) at"
has nvml "=> lower the fraction of the total it sizes itself to from 0.80 to 0.75"
hasnt nvml "raise GPUGUARD_LIMIT"
serve nvml --limit 4Gi -- env NVML_FRACTION=0.75 "$S/nvml_sized"
[ "$rejected" -eq 0 ] && ok || bad "nvml: $rejected of 100 rejected at the advised 0.75 (before: $before)"

# PyTorch-like: named from its c10 frames (demangled), with the frame.
serve torch --limit 4Gi -- "$S/torch_like"
report torch
has torch "the memory is PyTorch's caching allocator's: stack 1 frame #0 c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::alloc_block(unsigned long) (libc10_cuda.so)"
has torch "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
hasnt torch "sizes itself"

# Plain C with 2 MiB blocks: no PyTorch, no fraction; a limit from the
# evidence, which applied refuses nothing. Its exit dump without a
# ceiling: the peak view and a suggested GPUGUARD_LIMIT.
serve plain_c --limit 4Gi -- "$S/plain_c"
before=$rejected
report plain_c
hasnt plain_c "PyTorch's caching allocator"
has plain_c "(no PyTorch frames in the stacks)"
hasnt plain_c "expandable_segments"
hasnt plain_c "sizes itself"
grep -q "=> raise GPUGUARD_LIMIT to 5Gi\|GPUGUARD_LIMIT=5Gi covers the peak" "$TMP/plain_c.txt" && ok || bad "plain_c: no 5Gi advice: $(grep "=>" "$TMP/plain_c.txt")"
serve plain_c --limit 5Gi -- "$S/plain_c"
[ "$rejected" -eq 0 ] && ok || bad "plain_c: $rejected rejected at the advised 5Gi (before: $before)"
GPUGUARD_DUMP_AT_EXIT=1 serve plain_c_exit -- "$S/plain_c"
last_dump
report plain_c_exit
has plain_c_exit "no failure; sizing a ceiling"
sed -n '/^AT THE GPU PEAK/,/^HOST/p' "$TMP/plain_c_exit.txt" | grep -q "block_alloc (plain_c)" && ok ||
	bad "plain_c_exit: the peak view lacks block_alloc"
lim=$(sed -n 's/.*=> GPUGUARD_LIMIT=\([0-9]*Gi\): the peak.*/\1/p' "$TMP/plain_c_exit.txt")
if [ -n "$lim" ]; then
	ok
	serve plain_c --limit "$lim" -- "$S/plain_c"
	[ "$rejected" -eq 0 ] && ok || bad "plain_c: $rejected rejected at the suggested $lim"
else
	bad "plain_c_exit: no suggested GPUGUARD_LIMIT"
fi

# A history too short to reach back to the peak (64 events): the peak
# view is the library's own snapshot at the peak (peak_site records).
GPUGUARD_HISTORY=64 GPUGUARD_DUMP_AT_EXIT=1 serve plain_c_short -- "$S/plain_c"
last_dump
report plain_c_short
grep -q '"t":"peak_site",' "$dump" && ok || bad "plain_c_short: no peak_site records"
has plain_c_short "AT THE GPU PEAK (device 0, as the library saw it at its peak; the history is younger)"
has plain_c_short "the peak view is the library's own snapshot at "
sed -n '/^AT THE GPU PEAK/,/^HOST/p' "$TMP/plain_c_short.txt" | grep -q "^  4\.[0-9]* GiB  *stack [0-9]*  *block_alloc (plain_c)" &&
	ok || bad "plain_c_short: the peak view lacks the 4 GiB of blocks: $(sed -n '/^AT THE GPU PEAK/,/^HOST/p' "$TMP/plain_c_short.txt")"

# One large demand halfway, refused, then only small ones: the exit dump
# sizes from the largest refusal in its history, not from the peak (which
# is the ceiling), and that limit refuses nothing.
GPUGUARD_DUMP_AT_EXIT=1 serve plain_big --limit 4Gi -- env PLAIN_C_BIG_MIB=1536 "$S/plain_c"
last_dump
report plain_big
has plain_big "the largest refused demand in the history: "
# (the run is too short for its growth's shape to be told reliably: the
# limit comes as "raise" or as "if the growth is a warm-up")
lim=$(sed -n 's/.*=> raise GPUGUARD_LIMIT to \([0-9]*Gi\): the observed need .* (live + request at the largest refusal.*/\1/p
	s/.*=> if the growth is a warm-up that levels off, GPUGUARD_LIMIT=\([0-9]*Gi\) covers.*/\1/p' "$TMP/plain_big.txt")
if [ -n "$lim" ]; then
	ok
	serve plain_big --limit "$lim" -- env PLAIN_C_BIG_MIB=1536 "$S/plain_c"
	[ "$rejected" -eq 0 ] && ok || bad "plain_big: $rejected rejected at the advised $lim"
else
	bad "plain_big: no GPUGUARD_LIMIT from the largest refusal: $(grep "=>" "$TMP/plain_big.txt")"
fi

# The example server (examples/kvcache.c): its advised fraction at the same
# 4 GiB rejects fewer requests than the old advice, a 5 GiB ceiling.
serve kvcache --limit 4Gi -- "$B/examples/kvcache"
at4=$rejected
report kvcache
frac=$(sed -n 's/.*=> lower the fraction of the total it sizes itself to by [0-9.]* (e.g. 0.90 -> \([0-9.]*\)).*/\1/p' "$TMP/kvcache.txt")
if [ -n "$frac" ]; then
	ok
	serve kvcache --limit 5Gi -- "$B/examples/kvcache"
	at5=$rejected
	serve kvcache --limit 4Gi -- env KVCACHE_UTIL="$frac" "$B/examples/kvcache"
	fewer kvcache "$rejected" "$at5"
	echo "kvcache: 4Gi at 0.90 rejected $at4 of 400; the old advice, 5Gi, $at5; 4Gi at the advised $frac, $rejected"
else
	bad "kvcache: no fraction advice"
fi
# Its exit dump: the history ends in the teardown, which frees everything;
# what it keeps is judged up to the peak, and its refusals are reported.
GPUGUARD_DUMP_AT_EXIT=1 serve kvcache_exit --limit 4Gi -- "$B/examples/kvcache"
last_dump
report kvcache_exit
has kvcache_exit "device 0 refused "
grep -q "it keeps 3\.[89][0-9] GiB (0\.9[0-9] of the total) in call sites that do not free" "$TMP/kvcache_exit.txt" && ok ||
	bad "kvcache_exit: what it keeps is not about 3.9 GiB: $(grep 'it keeps' "$TMP/kvcache_exit.txt")"
has kvcache_exit "=> lower the fraction of the total it sizes itself to by 0.05 (e.g. 0.90 -> 0.85)"

finish
