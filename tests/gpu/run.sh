#!/bin/sh
# gpuguard on a real NVIDIA GPU (`make check-gpu`). Builds tests/gpu/*.cu into
# build/gpu/, runs each under LD_PRELOAD=build/lib/libgpuguard.so
# GPUGUARD_LIMIT=4Gi, then tests/gpu/torch_check.py (PyTorch's three
# allocators) if python3 + torch are there, then tests/gpu/torch_dump.py (a
# PyTorch OOM at the ceiling leaves a dump; `gpuguard report` on it says
# "ceiling reached" and names the PyTorch call path), then
# tests/gpu/torch_pod.py (two PyTorch processes share one pod budget:
# memory info, refusal, free, kill -9, ON_LIMIT=wait, NVML), and prints a
# summary table. Then the real-card checks of issues 22 and 24 (each a part
# of its own, docs/gpu-checks.md): tests/gpu/pods.sh (three pods on the
# card, NVML and nvidia-smi read beside gpuguard's figures, kill -9), the
# card's own costs under CUDA_MODULE_LOADING LAZY and EAGER (build/gpu/card
# overhead, tests/gpu/torch_costs.py overhead), and the per-pair times bare
# and under the preload (build/gpu/pairs, torch_costs.py pairs), each set out
# in a table of its own before the summary.
#
# No GPU: prints "no NVIDIA GPU: check-gpu skipped" and exits 0. A missing
# optional tool (nvcc, python3, torch) makes its rows "skipped", never
# failed. Without nvcc, binaries already in build/gpu/ (built elsewhere, with
# libcudart.so.* copied beside them) are used. Exit status 1 on any failure.
#
# Environment: GG_LIB (library, default build/lib/libgpuguard.so),
# NVCC (compiler), GG_GPU_GENCODE (nvcc -gencode flags), GG_GPU_TIMEOUT
# (seconds per program, default 120), GG_TORCH_TIMEOUT (default 600, each of
# torch_check.py, torch_dump.py and torch_pod.py), GG_GPUGUARD (the gpuguard
# command, default build/bin/gpuguard), GG_TORCH_DUMP_CONFIGS (default
# "native cudaMallocAsync"), GG_GPU_PARTS (the parts to run, default all:
# programs reallib torch torch_dump torch_pod pods overhead pairs),
# GG_GPU_PODS_TIMEOUT (seconds for pods.sh, default 240), GG_GPU_PAIRS
# (pairs' "PAIRS_PER_ROUND ROUNDS", default "2000 15"), GG_GPU_LOGS (where
# logs, rows.txt and dumps go, default build/gpu), GG_GPU_BUILD_ONLY=1
# (build the CUDA programs into build/gpu/ and stop: `make gpu-build`, so a
# lent card need not compile), GG_GPU_PREBUILT=1 (never compile: use
# build/gpu/ as it is, as tests/gpu/lent.sh does on the card).
#
# GG_GPU_SIM=1 runs it on the simulator's shared card instead
# (tests/scripts/gpu_selftest.sh): build/sim first in LD_LIBRARY_PATH,
# SIMGPU_SHARED a card of its own (SIMGPU_MEMORY 16Gi unless set), and
# tests/gpu/sim/ first on PATH, whose nvidia-smi answers from that card.

ROOT=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
cd "$ROOT" || exit 1
SRC=tests/gpu
OUT=$ROOT/build/gpu
LIB=${GG_LIB:-$ROOT/build/lib/libgpuguard.so}
TMO=${GG_GPU_TIMEOUT:-120}
TORCH_TMO=${GG_TORCH_TIMEOUT:-600}
PODS_TMO=${GG_GPU_PODS_TIMEOUT:-240}
LOGS=${GG_GPU_LOGS:-$OUT}
PARTS=${GG_GPU_PARTS:-programs reallib torch torch_dump torch_pod pods overhead pairs}
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
ALL_PARTS=" programs reallib torch torch_dump torch_pod pods overhead pairs "
for p in $PARTS; do
	case $ALL_PARTS in *" $p "*) ;; *)
		echo "check-gpu: GG_GPU_PARTS: no part '$p' (one or more of:$ALL_PARTS)" >&2
		exit 2
		;;
	esac
done

if [ -n "${GG_GPU_SIM:-}" ]; then
	LD_LIBRARY_PATH=${GG_GPU_SIMDIR:-$ROOT/build/sim}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	SIMGPU_SHARED=${SIMGPU_SHARED:-gg-gpusim-$$}
	SIMGPU_MEMORY=${SIMGPU_MEMORY:-16Gi}
	GG_NVML_WATCH=${GG_NVML_WATCH:-$OUT/nvml_watch}
	PATH=$ROOT/tests/gpu/sim:$PATH
	export LD_LIBRARY_PATH SIMGPU_SHARED SIMGPU_MEMORY GG_NVML_WATCH PATH GG_GPU_SIM
	trap 'rm -f "/dev/shm/simgpu-cuda-$SIMGPU_SHARED"*' EXIT
	echo "simulated card: SIMGPU_SHARED=$SIMGPU_SHARED SIMGPU_MEMORY=$SIMGPU_MEMORY"
fi
# H200 is sm_90: native code for it, plus compute_75 PTX (the oldest CUDA 13
# target) that the driver JIT-compiles on any other GPU.
GENCODE=${GG_GPU_GENCODE:-"-gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75"}

# ---- is there a GPU at all? ----------------------------------------------
have_gpu() {
	if command -v nvidia-smi >/dev/null 2>&1; then
		nvidia-smi -L 2>/dev/null | grep -q '^GPU '
		return
	fi
	[ -e /dev/nvidiactl ] && ls /dev/nvidia[0-9]* >/dev/null 2>&1
}
if [ -z "${GG_GPU_BUILD_ONLY:-}" ] && ! have_gpu; then
	echo "no NVIDIA GPU: check-gpu skipped"
	exit 0
fi

mkdir -p "$OUT" "$LOGS" || exit 1
# Refusals at the ceiling write allocation dumps, by default into the working
# directory (the repository): keep them in build/gpu/dumps/ instead.
# torch_dump.py gives its children their own fresh directory.
rm -rf "$LOGS/dumps"
mkdir -p "$LOGS/dumps" || exit 1
GPUGUARD_DUMP_DIR=$LOGS/dumps
export GPUGUARD_DUMP_DIR
ROWS=$LOGS/rows.txt
: >"$ROWS"
if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version --format=csv,noheader 2>/dev/null |
		sed 's/^/gpu: /'
fi

if [ ! -f "$LIB" ] && [ -z "${GG_LIB:-}" ] && command -v make >/dev/null 2>&1; then
	make lib >/dev/null 2>&1
fi
# (a list, as a sanitizer build preloads its runtime first)
for f in $(printf '%s\n' "$LIB" | tr ':' ' '); do
	if [ ! -f "$f" ]; then
		echo "check-gpu: $f is missing (make lib)" >&2
		exit 1
	fi
done
echo "library: $LIB, GPUGUARD_LIMIT=4Gi"

if command -v timeout >/dev/null 2>&1; then
	have_timeout=1
else
	have_timeout=0
	echo "note: no timeout(1); programs run without a time limit"
fi
# tmo SECONDS COMMAND...: under the time limit where timeout(1) is
tmo() {
	t=$1
	shift
	if [ $have_timeout = 1 ]; then timeout -k 10 "$t" "$@"; else "$@"; fi
}
GG_BIN=${GG_GPUGUARD:-$ROOT/build/bin/gpuguard}
# The new parts' Python (GG_GPU_PYTHON, default python3; empty: none, as
# under a sanitizer, whose runtime is not for preloading into python3)
PY=${GG_GPU_PYTHON-python3}
have_py() { [ -n "$PY" ] && command -v "$PY" >/dev/null 2>&1; }

# row NAME CEILING MEMINFO REFUSAL WORKING RESULT NOTE
row() {
	printf '%s|%s|%s|%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" >>"$ROWS"
}

# key=value from a GGRESULT line
field() {
	printf '%s\n' "$2" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"
}

# Turns a program's log and exit status into one row.
judge() { # NAME RC LOG
	name=$1 rc=$2 log=$3
	line=$(grep '^GGRESULT ' "$log" | tail -n 1)
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		row "$name" - - - - FAIL "timed out"
	elif [ -z "$line" ]; then
		row "$name" - - - - FAIL "no result line, exit status $rc"
	else
		res=$(field result "$line")
		note=$(field reason "$line")
		if [ "$res" = PASS ] && [ "$rc" = 0 ]; then
			:
		elif [ "$res" = SKIP ] && [ "$rc" = 77 ]; then
			:
		else
			[ "$res" = PASS ] && note="exit status $rc"
			res=FAIL
		fi
		row "$name" "$(field ceiling "$line")" "$(field meminfo "$line")" \
			"$(field refusal "$line")" "$(field working "$line")" "$res" "$note"
	fi
	if [ "$(tail -n 1 "$ROWS" | cut -d'|' -f6)" = FAIL ]; then
		echo "---- $name: last lines of $log"
		tail -n 25 "$log"
		echo "----"
	fi
}

# ---- build the CUDA programs ---------------------------------------------
want programs && PROGS="driver_api cudart_shared cudart_static vmm async_pool managed packing"
NVCC=${NVCC:-}
if [ -z "$NVCC" ]; then
	if command -v nvcc >/dev/null 2>&1; then
		NVCC=$(command -v nvcc)
	else
		for d in ${CUDA_HOME:-} ${CUDA_PATH:-} /usr/local/cuda /opt/cuda; do
			if [ -x "$d/bin/nvcc" ]; then
				NVCC=$d/bin/nvcc
				break
			fi
		done
	fi
fi

BUILT=""    # programs with a binary to run
NOBUILD=""  # programs that failed to build and have no binary
if [ -n "${GG_GPU_PREBUILT:-}" ]; then
	want programs && echo "note: GG_GPU_PREBUILT: the programs already in $OUT, not compiled here"
elif [ -n "$NVCC" ] && want programs; then
	CUDA_DIR=$(cd "$(dirname "$NVCC")/.." && pwd)
	echo "nvcc: $NVCC ($("$NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
	# The driver is not linked at build time on a GPU-less box: use the stub.
	STUBS=""
	for d in "$CUDA_DIR/lib64/stubs" "$CUDA_DIR/lib/stubs" "$CUDA_DIR"/targets/*/lib/stubs; do
		if [ -f "$d/libcuda.so" ]; then
			STUBS="-L$d"
			break
		fi
	done
	# The shared-cudart build carries its libcudart beside it ($ORIGIN), so
	# build/gpu/ also runs where no toolkit is installed.
	for d in "$CUDA_DIR/lib64" "$CUDA_DIR/lib" "$CUDA_DIR"/targets/*/lib; do
		if ls "$d"/libcudart.so.[0-9]* >/dev/null 2>&1; then
			cp -L "$d"/libcudart.so.[0-9]* "$OUT"/ 2>/dev/null
			break
		fi
	done
	FLAGS="-O2 -I include $GENCODE"
	pids=""
	for p in $PROGS; do
		# shellcheck disable=SC2016 # $ORIGIN is for the linker
		case $p in
		driver_api | packing) src=$p.cu extra="$STUBS -lcuda" ;;
		cudart_shared) src=cudart.cu extra='-cudart shared -DGG_CUDART=shared -Xlinker -rpath=$ORIGIN' ;;
		cudart_static) src=cudart.cu extra='-cudart static -DGG_CUDART=static' ;;
		*) src=$p.cu extra="" ;;
		esac
		# shellcheck disable=SC2086 # word splitting of the flag lists is meant
		("$NVCC" $FLAGS $extra -o "$OUT/$p.new" "$SRC/$src" -ldl >"$OUT/$p.build.log" 2>&1 &&
			mv -f "$OUT/$p.new" "$OUT/$p") &
		pids="$pids $!"
	done
	# shellcheck disable=SC2086
	set -- $PROGS
	for pid in $pids; do
		if ! wait "$pid"; then
			if [ -x "$OUT/$1" ]; then
				echo "note: $1 did not build (see $OUT/$1.build.log); using the binary already there"
			else
				NOBUILD="$NOBUILD $1"
				row "$1" - - - - FAIL "build failed"
				echo "---- $1: build failed"
				tail -n 20 "$OUT/$1.build.log"
				echo "----"
			fi
		fi
		shift
	done
elif want programs; then
	echo "note: nvcc not found (PATH, \$CUDA_HOME, /usr/local/cuda)"
fi
if [ -n "${GG_GPU_BUILD_ONLY:-}" ]; then
	[ -n "$NVCC" ] || { echo "check-gpu: GG_GPU_BUILD_ONLY: no nvcc" >&2; exit 1; }
	echo "built into $OUT:$(for p in $PROGS; do [ -x "$OUT/$p" ] && printf ' %s' "$p"; done)"
	[ -z "$NOBUILD" ]
	exit
fi
want programs || PROGS=
for p in $PROGS; do
	case " $NOBUILD " in *" $p "*) continue ;; esac
	if [ -x "$OUT/$p" ]; then
		BUILT="$BUILT $p"
	else
		row "$p" n/a n/a n/a n/a SKIP "no nvcc, no prebuilt binary"
	fi
done

# ---- run them ------------------------------------------------------------
for p in $BUILT; do
	echo "== $p"
	log=$LOGS/$p.log
	# packing measures the bare driver (what the card holds) against the
	# charge rule it compiles in: no preload
	pre="$LIB${LD_PRELOAD:+:$LD_PRELOAD}"
	[ "$p" = packing ] && pre=${LD_PRELOAD:-}
	if [ $have_timeout = 1 ]; then
		timeout -k 10 "$TMO" env LD_PRELOAD="$pre" GPUGUARD_LIMIT=4Gi "$OUT/$p" >"$log" 2>&1
	else
		env LD_PRELOAD="$pre" GPUGUARD_LIMIT=4Gi "$OUT/$p" >"$log" 2>&1
	fi
	rc=$?
	grep -E '^(GGINFO|GGFAIL) ' "$log"
	judge "$p" "$rc" "$log"
done

# ---- the real-library programs of make check (tests/reallib/) -----------
# The same binaries the simulator runs, now on the card, under a 2Gi ceiling:
# their GGINFO line is what the card says of itself, to set beside the
# simulator's answers. Built by `make check-gpu` into build/reallib/.
want reallib || REALLIB_NAMES=" "
for p in ${REALLIB_NAMES:-rl_cudart_shared rl_cudart_static rl_cudart_ptds rl_libs}; do
	bin=$ROOT/build/reallib/$p
	if [ ! -x "$bin" ]; then
		row "reallib/$p" n/a n/a n/a n/a SKIP "not built (no nvcc)"
		continue
	fi
	echo "== reallib/$p"
	log=$LOGS/reallib-$p.log
	if [ $have_timeout = 1 ]; then
		timeout -k 10 "$TMO" env LD_PRELOAD="$LIB" GPUGUARD_LIMIT=2Gi "$bin" >"$log" 2>&1
	else
		env LD_PRELOAD="$LIB" GPUGUARD_LIMIT=2Gi "$bin" >"$log" 2>&1
	fi
	rc=$?
	grep -E '^(GGINFO|FAIL|skip) ' "$log"
	line=$(grep '^harness: ' "$log" | tail -n 1)
	if [ "$rc" = 0 ] && [ -n "$line" ]; then
		row "reallib/$p" "yes (2Gi)" "yes (2Gi)" cudaErrorMemoryAllocation yes PASS "${line#harness: }"
	else
		row "reallib/$p" - - - - FAIL "exit status $rc, ${line:-no harness line}"
		tail -n 25 "$log"
	fi
done

# run_py NAME SCRIPT ARGS...: runs a Python check under the time limit and
# turns its GGRESULT lines into table rows (one failed row if it gave none).
run_py() {
	name=$1 script=$2
	shift 2
	log=$LOGS/$name.log
	if [ $have_timeout = 1 ]; then
		timeout -k 10 "$TORCH_TMO" python3 "$SRC/$script" "$@" >"$log" 2>&1
	else
		python3 "$SRC/$script" "$@" >"$log" 2>&1
	fi
	rc=$?
	grep -E '^(GGINFO|GGFAIL) ' "$log"
	if ! grep -q '^GGRESULT ' "$log"; then
		judge "$name" "$rc" "$log"
		return
	fi
	grep '^GGRESULT ' "$log" | while IFS= read -r line; do
		res=$(field result "$line")
		[ "$res" = PASS ] || [ "$res" = SKIP ] || res=FAIL
		row "$(field program "$line")" "$(field ceiling "$line")" "$(field meminfo "$line")" \
			"$(field refusal "$line")" "$(field working "$line")" "$res" "$(field reason "$line")"
	done
	if [ "$rc" != 0 ] && ! grep -q '^GGRESULT .* result=FAIL' "$log"; then
		row "$name" - - - - FAIL "$script exit status $rc"
		tail -n 25 "$log"
	fi
}

# ---- PyTorch -------------------------------------------------------------
want torch && echo "== torch"
TORCH_CONFIGS="native expandable_segments cudaMallocAsync"
if ! want torch; then
	:
elif ! command -v python3 >/dev/null 2>&1; then
	for c in $TORCH_CONFIGS; do
		row "torch_$c" n/a n/a n/a n/a SKIP "no python3"
	done
else
	run_py torch torch_check.py --lib "$LIB"
fi

# ---- PyTorch OOM -> dump -> gpuguard report -------------------------------
want torch_dump && echo "== torch_dump"
TORCH_DUMP_CONFIGS=${GG_TORCH_DUMP_CONFIGS:-"native cudaMallocAsync"}
if [ ! -x "$GG_BIN" ] && [ -z "${GG_GPUGUARD:-}" ] && command -v make >/dev/null 2>&1; then
	make build/bin/gpuguard >/dev/null 2>&1
fi
if ! want torch_dump; then
	:
elif ! command -v python3 >/dev/null 2>&1; then
	for c in $TORCH_DUMP_CONFIGS; do
		row "torch_dump_$c" n/a n/a n/a n/a SKIP "no python3"
	done
else
	run_py torch_dump torch_dump.py --lib "$LIB" --gpuguard "$GG_BIN" --configs "$TORCH_DUMP_CONFIGS"
fi

# ---- PyTorch pod scope: two processes share one budget --------------------
want torch_pod && echo "== torch_pod"
if ! want torch_pod; then
	:
elif ! command -v python3 >/dev/null 2>&1; then
	row torch_pod n/a n/a n/a n/a SKIP "no python3"
else
	run_py torch_pod torch_pod.py --lib "$LIB"
fi

# ---- three pods on the card (issue 22) ------------------------------------
if want pods; then
	echo "== pods"
	LIB="$LIB" GG_BIN="$GG_BIN" LOGS="$LOGS" ROWS="$ROWS" BIN="$OUT" REALLIB="$ROOT/build/reallib" \
		tmo "$PODS_TMO" sh "$SRC/pods.sh" 2>&1 | tee "$LOGS/pods.log"
	# tee's status is the pipe's; pods.sh writes its rows itself, and one
	# killed by the time limit has written none for the rounds it did not end
	for r in ${GG_GPU_POD_ROUNDS:-lazy eager kill}; do
		grep -q "^pods_$r|" "$ROWS" || row "pods_$r" - - - - FAIL "no verdict (pods.sh timed out after $PODS_TMO s?)"
	done
fi

# fold NAME ROW...: the rows named become one (FAIL if one failed, naming
# it; else PASS if one passed; else SKIP), so a measurement run bare and
# governed, or under LAZY and EAGER, is one line of the summary
fold() {
	fname=$1 fres=SKIP fnote=''
	shift
	for r in "$@"; do
		l=$(grep "^$r|" "$ROWS" | tail -n 1)
		rres=$(printf '%s\n' "$l" | cut -d'|' -f6)
		rnote=$(printf '%s\n' "$l" | cut -d'|' -f7)
		case $rres in
		FAIL)
			[ $fres = FAIL ] || fnote="$r: $rnote"
			fres=FAIL
			;;
		PASS) [ $fres = SKIP ] && fres=PASS && fnote='' ;;
		*) [ $fres = SKIP ] && [ -z "$fnote" ] && fnote=$rnote ;;
		esac
		grep -v "^$r|" "$ROWS" >"$ROWS.tmp"
		mv -f "$ROWS.tmp" "$ROWS"
	done
	row "$fname" n/a n/a n/a n/a "$fres" "$fnote"
}

# run_measure NAME LOG COMMAND...: a measuring program under the time limit,
# its GG lines shown, its verdict a row (SKIP with exit status 77)
run_measure() {
	name=$1 log=$2
	shift 2
	tmo "$TMO" "$@" >"$log" 2>&1
	rc=$?
	grep -E '^(GGINFO|GGFAIL|GGNVML|GGSTACK) ' "$log"
	judge "$name" "$rc" "$log"
}

# ---- what the card holds beyond the allocation calls (issue 22) -----------
if want overhead; then
	echo "== overhead"
	COSTS=$LOGS/costs.txt
	: >"$COSTS"
	for m in LAZY EAGER; do
		if [ -x "$OUT/card" ]; then
			run_measure "overhead_$m" "$LOGS/overhead-$m.log" env CUDA_MODULE_LOADING=$m "$OUT/card" overhead
			sed -n "s/^GG\(COST\|STACK\) /$m &/p" "$LOGS/overhead-$m.log" >>"$COSTS"
		else
			row "overhead_$m" n/a n/a n/a n/a SKIP "no $OUT/card (make check-gpu builds it with nvcc)"
		fi
		if have_py; then
			run_measure "torch_overhead_$m" "$LOGS/torch-overhead-$m.log" \
				env CUDA_MODULE_LOADING=$m "$PY" "$SRC/torch_costs.py" overhead
			sed -n "s/^GGCOST /$m &/p" "$LOGS/torch-overhead-$m.log" >>"$COSTS"
		else
			row "torch_overhead_$m" n/a n/a n/a n/a SKIP "no python3"
		fi
	done
	fold torch_overhead torch_overhead_LAZY torch_overhead_EAGER
	echo
	echo "== device memory each stage takes (MiB): NVML's figure for the process / the card's used / cuMemGetInfo's free"
	awk '$2 == "GGCOST" {
		for (i = 3; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		k = f["stage"]; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
		v[k, $1] = sprintf("%s / %s / %s", mib(f["nvml"]), mib(f["card"]), mib(f["meminfo"]))
	}
	function mib(x) { return x ~ /^-?[0-9]+$/ ? sprintf("%.1f", x / 1048576) : "-" }
	END {
		printf "%-14s | %-26s | %-26s\n", "stage", "LAZY", "EAGER"
		for (i = 1; i <= n; i++)
			printf "%-14s | %-26s | %-26s\n", order[i], (order[i], "LAZY") in v ? v[order[i], "LAZY"] : "n/a",
				(order[i], "EAGER") in v ? v[order[i], "EAGER"] : "n/a"
	}' "$COSTS"
	echo
	echo "== local memory: cuCtxSetLimit(CU_LIMIT_STACK_SIZE), measured (cuMemGetInfo) against stack x threads/SM x SMs"
	awk '$2 == "GGSTACK" {
		for (i = 3; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		nv = (f["nvml"] + 0 >= 0) ? sprintf("%.1f MiB", f["nvml"] / 1048576) : "-"
		printf "%-6s %6s -> %-6s at the call %8.1f MiB (NVML %s), after a launch %8.1f MiB, formula %8.1f MiB, ratio %s / %s\n",
			$1, f["from"], f["to"], f["measured"] / 1048576, nv, f["launched"] / 1048576, f["formula"] / 1048576,
			f["ratio"], f["ratio_launched"]
	}' "$COSTS"
	echo
fi

# ---- the time of one allocate+free pair, bare and governed (issue 24) -----
if want pairs; then
	echo "== pairs"
	PAIRS=$LOGS/pairs.txt
	: >"$PAIRS"
	# shellcheck disable=SC2086 # two numbers
	set -- ${GG_GPU_PAIRS:-2000 15}
	pn=$1 pr=$2
	for v in bare default accounting; do
		case $v in
		bare) pre='' opts='' ;;
		default) pre=$LIB opts='' ;;
		accounting) pre=$LIB opts="GPUGUARD_STACK_DEPTH=0 GPUGUARD_HISTORY=0" ;;
		esac
		if [ -x "$OUT/pairs" ]; then
			# shellcheck disable=SC2086 # opts are NAME=VALUE words
			run_measure "pairs_$v" "$LOGS/pairs-$v.log" env LD_PRELOAD="$pre" GPUGUARD_LIMIT=4Gi $opts "$OUT/pairs" "$pn" "$pr"
			sed -n "s/^GGPAIR /$v &/p" "$LOGS/pairs-$v.log" >>"$PAIRS"
		else
			row "pairs_$v" n/a n/a n/a n/a SKIP "no $OUT/pairs (make check-gpu builds it with nvcc)"
		fi
		for c in native cudaMallocAsync; do
			if ! have_py; then
				row "torch_pairs_${c}_$v" n/a n/a n/a n/a SKIP "no python3"
				continue
			fi
			conf=
			[ $c = cudaMallocAsync ] && conf=backend:cudaMallocAsync
			# shellcheck disable=SC2086
			run_measure "torch_pairs_${c}_$v" "$LOGS/torch-pairs-$c-$v.log" env LD_PRELOAD="$pre" GPUGUARD_LIMIT=4Gi \
				$opts PYTORCH_CUDA_ALLOC_CONF="$conf" "$PY" "$SRC/torch_costs.py" pairs
			sed -n "s/^GGPAIR /$v &/p" "$LOGS/torch-pairs-$c-$v.log" >>"$PAIRS"
		done
	done
	fold pairs pairs_bare pairs_default pairs_accounting
	fold torch_pairs_native torch_pairs_native_bare torch_pairs_native_default torch_pairs_native_accounting
	fold torch_pairs_async torch_pairs_cudaMallocAsync_bare torch_pairs_cudaMallocAsync_default \
		torch_pairs_cudaMallocAsync_accounting
	echo
	echo "== one allocate+free pair, median ns (4 KiB, 1k live beside it), bare and under the preload"
	awk '$2 == "GGPAIR" {
		for (i = 3; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		k = f["name"]; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
		t[k, $1] = f["ns"]
	}
	function cell(k, v) {
		if (!((k, v) in t)) return "n/a"
		if (v == "bare" || !((k, "bare") in t)) return t[k, v]
		return sprintf("%s (%+d)", t[k, v], t[k, v] - t[k, "bare"])
	}
	END {
		printf "%-40s | %-8s | %-18s | %-18s\n", "pair", "bare", "shipped defaults", "accounting only"
		for (i = 1; i <= n; i++)
			printf "%-40s | %-8s | %-18s | %-18s\n", order[i], cell(order[i], "bare"), cell(order[i], "default"),
				cell(order[i], "accounting")
	}' "$PAIRS"
	echo
fi

# ---- the cached current context (hook_cuda.c) ----------------------------
# The hooks keep each thread's current context and ask the driver every 256
# allocations; an answer that shows a change no hook of ours saw is said in
# one warning, and the cache is off from then on. On the card, with the real
# cudart, cuBLAS and PyTorch, no run may say it: it would mean a path to the
# current context that only the real driver has.
unseen=$(grep -l 'changed through a path gpuguard does not wrap' "$LOGS"/*.log 2>/dev/null | tr '\n' ' ')
if [ -n "$unseen" ]; then
	row "current-context cache" - - - - FAIL "a change no hook saw, in: $unseen"
else
	row "current-context cache" - - - - PASS "no run saw the current context change behind the hooks"
fi

# ---- summary -------------------------------------------------------------
echo
fmt='| %-26s | %-13s | %-25s | %-28s | %-13s | %-6s |\n'
# shellcheck disable=SC2059 # the format is ours
printf "$fmt" "program/config" "ceiling holds" "mem_get_info reports 4 GiB" "refusal type" "keeps working" "result"
# shellcheck disable=SC2059
printf "$fmt" "--------------------------" "-------------" "-------------------------" \
	"----------------------------" "-------------" "------"
pass=0 fail=0 skip=0
while IFS='|' read -r n c m r w res note; do
	# shellcheck disable=SC2059
	printf "$fmt" "$n" "$c" "$m" "$r" "$w" "$res"
	[ -n "$note" ] && [ "$note" != - ] && printf '|   %s\n' "$note"
	case $res in
	PASS) pass=$((pass + 1)) ;;
	SKIP) skip=$((skip + 1)) ;;
	*) fail=$((fail + 1)) ;;
	esac
done <"$ROWS"
echo
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
