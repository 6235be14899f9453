#!/bin/sh
# gpuguard: make check-gpu's real-card checks of issues 22 and 24 (three pods,
# the card's own costs, the per-pair times), run here on the simulator's
# shared card (tests/gpu/run.sh with GG_GPU_SIM=1: build/sim's libcuda and
# NVML, and tests/gpu/sim/nvidia-smi answering from them), so their shell,
# arithmetic, tables and verdicts are tried before a card is lent:
#   1. all three parts pass, with the figures the simulator must give: the
#      ceilings sized from a measured 526 MiB context and a ballast, each
#      pod's NVML figure read beside gpuguard's, the context 526 MiB in NVML
#      under LAZY and EAGER, cuBLAS's modules larger under EAGER, the local
#      memory growth equal to the formula, v2's used without the reserved
#      memory, nine timed pairs; the PyTorch rows SKIP (no torch here);
#   2. NVML's PIDs not getpid()'s (a container): each pod is found by the
#      PID its start added, and the round still passes;
#   3. planted faults fail: a pod without the library (NVML sees it over its
#      ceiling), ceilings that overcommit the card (the driver refuses), a
#      measuring program that gives no figure, an unknown part.
# Needs nvcc-built programs (build/reallib/rl_fill_*, build/gpu/card, pairs).
. "$(dirname "$0")/lib.sh"
REALLIB=${GG_TEST_REALLIB:-build/reallib}
# Under a sanitizer (its runtime preloaded before the library) the
# programs that run bare (card, nvml_watch, the stand-in nvidia-smi) cannot
# load an instrumented simulator: they use the plain build's (check-all
# builds it first). The scripts are the same and the library is what
# shared_card.sh already runs there: one round of pods and no second run,
# so the suite stays within its time.
SIMDIR=$GG_TEST_SIMDIR
ROUNDS="lazy eager kill"
if [ "$GG_TEST_PRELOAD" != "$GG_TEST_LIB" ]; then
	SIMDIR=$PWD/build/sim
	ROUNDS=lazy
fi
for f in "$REALLIB/rl_fill_shared" "$REALLIB/rl_fill_static" build/gpu/card build/gpu/pairs build/gpu/nvml_watch \
	"$SIMDIR/libcuda.so.1"; do
	if [ ! -x "$f" ]; then
		skip "gpu_selftest: no $f (no CUDA toolkit: nvcc; or, under a sanitizer, no plain build)"
		finish
	fi
done
if [ ! -w /dev/shm ]; then
	skip "gpu_selftest: no /dev/shm for the simulator's shared card"
	finish
fi
CARD_NAME="gg-selftest-$$"
on_exit() { rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*; }

# check TAG RC-EXPECTED [ENV...]: run.sh on a fresh simulated card, logs in
# $TMP/TAG, its output in $TMP/TAG.out; the status it must exit with
check() {
	tag=$1 want=$2
	shift 2
	rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*
	env GG_GPU_SIM=1 SIMGPU_SHARED="$CARD_NAME" SIMGPU_MEMORY=16Gi GG_GPU_LOGS="$TMP/$tag" \
		GG_LIB="$GG_TEST_PRELOAD" GG_GPUGUARD="$GG_TEST_BUILD/bin/gpuguard" GG_NVML_WATCH="$PWD/build/gpu/nvml_watch" \
		GG_GPU_SIMDIR="$SIMDIR" GG_GPU_PYTHON='' GG_GPU_POD_MIB=2048 GG_GPU_PAIRS="100 3" \
		GG_GPU_POD_WAIT=60 "$@" sh tests/gpu/run.sh >"$TMP/$tag.out" 2>&1
	rc=$?
	if [ "$rc" = "$want" ]; then
		ok
	else
		BAD_LINES=60 bad "gpu_selftest $tag: run.sh exited $rc, expected $want" "$TMP/$tag.out"
	fi
}
# has TAG WHAT PATTERN [FILE]: a line matching PATTERN in TAG's output
has() {
	if grep -q -- "$3" "${4:-$TMP/$1.out}"; then
		ok
	else
		BAD_LINES=40 bad "gpu_selftest $1: $2 (no line matching '$3')" "${4:-$TMP/$1.out}"
	fi
}
# result TAG ROW RESULT: the summary row's verdict
result() {
	got=$(awk -F'|' -v r="$2" '$1 == r { print $6 }' "$TMP/$1/rows.txt" 2>/dev/null)
	if [ "$got" = "$3" ]; then
		ok
	else
		BAD_LINES=40 bad "gpu_selftest $1: row $2 is '${got:-missing}', expected $3" "$TMP/$1/rows.txt" "$TMP/$1.out"
	fi
}

# 1. the three parts, all rounds (reserved memory on the card for v1/v2)
check all 0 GG_GPU_PARTS="pods overhead pairs" SIMGPU_NVML_RESERVED=512Mi GG_GPU_POD_ROUNDS="$ROUNDS"
for r in overhead_LAZY overhead_EAGER pairs; do result all $r PASS; done
for r in $ROUNDS; do result all "pods_$r" PASS; done
for r in torch_overhead torch_pairs_native torch_pairs_async; do result all $r SKIP; done
# 16 GiB less 512 MiB reserved; bare context 526 MiB; three pods of 2048 MiB
# and three contexts leave 16384 - 512 - 526 - 7722 for the ballast
has all "the card's arithmetic" \
	'bare context 526 MiB; card free 15872 MiB; ballast 7624 MiB; left to the pods 7722 MiB; three ceilings of 2048 MiB'
# each pod's row: NVML and nvidia-smi beside gpuguard's figures, none over
prows=3
case $ROUNDS in *eager*) prows=6 ;; esac
if awk -v want=$prows '$1 ~ /^(lazy|eager)-[abc]$/ && $3 == 2048 && $7 <= 2048 && $7 >= 2048 - 36 && $8 == $7 && $5 <= 2048 { n++ }
	END { exit n != want }' "$TMP/all.out"; then
	ok
else
	bad "gpu_selftest all: $prows pod rows with NVML and nvidia-smi at their ceiling" "$TMP/all.out"
fi
if [ "$ROUNDS" = lazy ]; then
	skip "gpu_selftest: kill -9 and EAGER pods under a sanitizer (one round there)"
else
	has all "kill -9 gives the dead pod's memory back" 'the card gave back 2016 MiB, the successor filled 1490 MiB'
fi
for m in LAZY EAGER; do
	has all "$m: the context is SIMGPU_CONTEXT's 526 MiB, in NVML and on the card" \
		"^$m GGCOST stage=context nvml=551550976 card=551550976 " "$TMP/all/costs.txt"
	has all "$m: stack 1K to 4K is the formula's 792 MiB" \
		"^$m GGSTACK from=1024 to=4096 measured=830472192 nvml=830472192 formula=830472192 ratio=1.000" \
		"$TMP/all/costs.txt"
	has all "$m: stack 4K to 16K is the formula's 3168 MiB" \
		"^$m GGSTACK from=4096 to=16384 measured=3321888768 nvml=3321888768 formula=3321888768 ratio=1.000" \
		"$TMP/all/costs.txt"
done
lazy=$(sed -n 's/^LAZY GGCOST stage=cublas_gemm nvml=\([0-9]*\) .*/\1/p' "$TMP/all/costs.txt")
eager=$(sed -n 's/^EAGER GGCOST stage=cublas_gemm nvml=\([0-9]*\) .*/\1/p' "$TMP/all/costs.txt")
if [ -n "$lazy" ] && [ -n "$eager" ] && [ "$lazy" -gt 0 ] && [ "$eager" -gt "$lazy" ]; then
	ok
else
	bad "gpu_selftest all: cuBLAS's cost under LAZY '$lazy', under EAGER '$eager': EAGER should load more" "$TMP/all/costs.txt"
fi
has all "NVML v2's used leaves the reserved memory out, as the simulator's does" \
	'^GGNVML .* v2_reserved=536870912 .*v2_used_includes_reserved=no$'
n=$(grep -c '^[a-z]* GGPAIR name=[^ ]* ns=[0-9][0-9]* rounds=3 pairs=100$' "$TMP/all/pairs.txt")
if [ "$n" = 9 ]; then ok; else bad "gpu_selftest all: $n of 9 timed pairs (3 pairs x bare, defaults, accounting)" "$TMP/all/pairs.txt"; fi
has all "the pairs' table" '^cudaMallocAsync+cudaFreeAsync/stream0 *| [0-9]* *| [0-9]* ([+-][0-9]*) *| [0-9]* ([+-][0-9]*)'
has all "no run saw the current context change behind the hooks" '^| current-context cache .*| PASS   |$'
has all "the closing line" "^$((4 + $(echo "$ROUNDS" | wc -w))) passed, 0 failed, 3 skipped$"
if [ "$ROUNDS" = lazy ]; then
	skip "gpu_selftest: the PID-namespace and planted-fault runs under a sanitizer (the same scripts run plainly)"
	finish
fi

# 2. a container's PID namespace: NVML's PIDs are getpid() + 100000
check nspid 0 GG_GPU_PARTS=pods GG_GPU_POD_ROUNDS=lazy SIMGPU_NVML_PID_OFFSET=100000
result nspid pods_lazy PASS
for x in a b c; do
	pid=$(cat "$TMP/nspid/pods/lazy-$x.pid" 2>/dev/null)
	has nspid "pod $x found in NVML as its PID + 100000" "^lazy-$x  *$((${pid:-0} + 100000)) "
done

# 3. planted faults
check nolib 1 GG_GPU_PARTS=pods GG_GPU_POD_ROUNDS=lazy GG_GPU_PODS_FAULT=nolib
result nolib pods_lazy FAIL
has nolib "a pod without the library is seen over its ceiling" '^GGFAIL pods: lazy-b: NVML saw [0-9]* bytes, over its ceiling'
has nolib "and nvidia-smi sees it too" '^GGFAIL pods: lazy-b: nvidia-smi saw [0-9]* MiB, over its ceiling'
check overcommit 1 GG_GPU_PARTS=pods GG_GPU_POD_ROUNDS=lazy GG_GPU_PODS_FAULT=overcommit
result overcommit pods_lazy FAIL
has overcommit "ceilings past the card: the driver refuses a pod" \
	'^GGFAIL pods: lazy-[abc]: not refused by gpuguard alone (err 2, gpuguard [0-9]*, driver [1-9]'
check nofigure 1 GG_GPU_PARTS=pairs GG_GPU_PAIRS="0 3"
result nofigure pairs FAIL
has nofigure "a program with no figure fails its row" 'pairs_bare: no result line, exit status 2'
check badpart 2 GG_GPU_PARTS="pods overheads"
has badpart "an unknown part is named" "GG_GPU_PARTS: no part 'overheads'"
finish
