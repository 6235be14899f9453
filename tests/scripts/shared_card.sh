#!/bin/sh
# gpuguard: three pods on one card (issue 22). On the simulator's shared card
# (SIMGPU_SHARED: contexts, modules and local memory cost device memory, and
# NVML lists every process), three processes, each a pod of its own under a
# ceiling, the ceilings adding up to the card less the three contexts, each
# allocate until refused: through the driver API, the real libcudart
# (shared and static), cuBLAS (create + a GEMM workspace) and NCCL (a
# one-rank init). A fourth process without the library reads NVML all the
# while (build/sim/nvml_watch). It must see no process above its pod's
# ceiling; every refusal must be gpuguard's (none the driver's), and each
# process must have reached its ceiling less only the headroom. Under
# CUDA_MODULE_LOADING LAZY and EAGER, and with NVML's PIDs not getpid()'s
# (SIMGPU_NVML_PID_OFFSET: our PID is found around our first context). Then
# a kill -9: the card and the pod region get its memory back, and the next
# process of that pod takes its whole ceiling again.
. "$(dirname "$0")/lib.sh"
FILL_SHARED="${GG_TEST_REALLIB:-build/reallib}/rl_fill_shared"
FILL_STATIC="${GG_TEST_REALLIB:-build/reallib}/rl_fill_static"
WATCH="$GG_TEST_SIMDIR/nvml_watch"
GG="$GG_TEST_BUILD/bin/gpuguard"
if [ ! -x "$FILL_SHARED" ] || [ ! -x "$FILL_STATIC" ]; then
	skip "shared-card: no $FILL_SHARED (no CUDA toolkit: nvcc)"
	finish
fi
if [ ! -w /dev/shm ]; then
	skip "shared-card: no /dev/shm for the simulator's shared card"
	finish
fi
CARD_NAME="gg-share-$$"
on_exit() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*
}
MIB=1048576
CONTEXT=$((526 * MIB))        # the simulator's context on a shared card
HEADROOM=$((32 * MIB))        # GPUGUARD_RUNTIME_HEADROOM's default
CARD=$((8192 * MIB))          # SIMGPU_MEMORY below
CEIL=$(((CARD - 3 * CONTEXT) / 3 / MIB / 2 * 2 * MIB)) # three equal ceilings: the card less the contexts
SLACK=$((HEADROOM + 4 * MIB)) # what a full pod may stay below its ceiling: the headroom and a step
pids=

# watch_max FILE PID: the largest used memory the watcher saw for PID
watch_max() {
	awk -v p="$2" '$1 == "max" && $3 == p { print $4 }' "$1"
}

# run TAG PID_OFFSET LOADING NAME:shared|static:MODE...: three pods and a
# watcher, checked.
run() {
	tag=$1 offset=$2 loading=$3
	shift 3
	rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*
	env LD_LIBRARY_PATH="$GG_TEST_SIMDIR" SIMGPU_SHARED="$CARD_NAME" SIMGPU_MEMORY=8Gi \
		"$WATCH" -i 5 -t 120 -o "$TMP/$tag.watch" >/dev/null 2>"$TMP/$tag.watch.err" &
	w=$!
	sleep 0.2 # the watcher's first poll
	names=
	fd=4
	for spec in "$@"; do
		name=$tag-${spec%%:*}
		rest=${spec#*:}
		bin=$FILL_SHARED
		[ "${rest%%:*}" = static ] && bin=$FILL_STATIC
		mode=${rest#*:}
		mkfifo "$TMP/$name.in"
		env LD_LIBRARY_PATH="$GG_TEST_SIMDIR" SIMGPU_SHARED="$CARD_NAME" SIMGPU_MEMORY=8Gi \
			SIMGPU_NVML_PID_OFFSET="$offset" CUDA_MODULE_LOADING="$loading" SIMGPU_CONTEXT_DELAY_MS="${TOGETHER:-0}" \
			LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_RUNTIME=1 GPUGUARD_SHARED="$TMP/$name.region" GPUGUARD_LIMIT="$CEIL" \
			GPUGUARD_DUMP_DIR="$TMP" GPUGUARD_DUMP_MAX=0 GPUGUARD_TERMINATION_LOG= \
			"$bin" "$mode" hold <"$TMP/$name.in" >"$TMP/$name.out" 2>"$TMP/$name.err" &
		echo $! >"$TMP/$name.pid"
		pids="$pids $!"
		eval "exec $fd>\"$TMP/$name.in\""
		fd=$((fd + 1))
		names="$names $name"
		# NVML's PIDs not ours: each finds its PID as the one new entry
		# around its first context. Here the pods start one after
		# another; with TOGETHER (ms) they start at once and each
		# context takes that long before and after the card shows it,
		# so each sees all three appear, and tells its own apart by its
		# allocations (footprint.c's probe).
		if [ "$offset" != 0 ] && [ -z "${TOGETHER:-}" ] && ! wait_file "$TMP/$name.out" '^started ' 60; then
			bad "$name: never started" "$TMP/$name.out" "$TMP/$name.err"
		fi
	done
	for name in $names; do
		if wait_file "$TMP/$name.out" '^filled ' 60; then ok; else bad "$name: never filled" "$TMP/$name.out" "$TMP/$name.err"; fi
	done
	sleep 0.3 # the watcher sees every pod full
	exec 4>&- 5>&- 6>&-
	for name in $names; do
		wait "$(cat "$TMP/$name.pid")" 2>/dev/null
	done
	kill "$w" 2>/dev/null
	wait "$w"
	for name in $names; do
		set -- $(grep '^filled ' "$TMP/$name.out")
		# filled BYTES err CODE ceiling_refusals N driver_refusals N
		if [ "${4:-}" = 2 ] && [ "${6:-0}" -ge 1 ] && [ "${8:-1}" = 0 ]; then
			ok
		else
			bad "$name: not refused by gpuguard alone (err ${4:-?}, ceiling ${6:-?}, driver ${8:-?})" "$TMP/$name.out" "$TMP/$name.err"
		fi
		nvpid=$(($(cat "$TMP/$name.pid") + offset))
		max=$(watch_max "$TMP/$tag.watch" "$nvpid")
		if [ -z "$max" ]; then
			bad "$name: NVML never listed pid $nvpid" "$TMP/$tag.watch"
		elif [ "$max" -gt "$CEIL" ]; then
			bad "$name: NVML saw $max bytes, over its ceiling $CEIL" "$TMP/$tag.watch"
		elif [ "$max" -lt $((CEIL - SLACK)) ]; then
			bad "$name: NVML saw at most $max bytes, short of its ceiling $CEIL less $SLACK" "$TMP/$tag.watch" "$TMP/$name.err"
		else
			ok
		fi
	done
	if grep -q '^errors 0$' "$TMP/$tag.watch"; then ok; else bad "$tag: the watcher's NVML calls failed" "$TMP/$tag.watch"; fi
	[ -n "${TOGETHER:-}" ] || return 0
	for name in $names; do
		if grep -q 'made their contexts at the same moment' "$TMP/$name.err" &&
			grep -q "our process is PID $(($(cat "$TMP/$name.pid") + offset)) on the card" "$TMP/$name.err"; then
			ok
		else
			bad "$name: did not tell its PID from its neighbours' (or the contexts were not made together)" "$TMP/$name.err"
		fi
	done
}

run lazy 0 LAZY a:shared:driver b:static:cudart c:shared:cublas
run eager 0 EAGER a:shared:cudart b:shared:nccl c:static:cublas
run nspid 100000 LAZY a:static:driver b:shared:cudart c:static:cudart
TOGETHER=1500 run together 100000 EAGER a:shared:driver b:static:cudart c:shared:cudart

# kill -9: pods a and b full; a dies; the card and a's region give its
# memory back, and a new process of a's pod fills a's whole ceiling again
rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*
for name in ka kb; do
	mkfifo "$TMP/$name.in"
	env LD_LIBRARY_PATH="$GG_TEST_SIMDIR" SIMGPU_SHARED="$CARD_NAME" SIMGPU_MEMORY=8Gi \
		LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_RUNTIME=1 GPUGUARD_SHARED="$TMP/$name.region" GPUGUARD_LIMIT="$CEIL" \
		GPUGUARD_DUMP_DIR="$TMP" GPUGUARD_DUMP_MAX=0 GPUGUARD_TERMINATION_LOG= \
		"$FILL_SHARED" cudart hold <"$TMP/$name.in" >"$TMP/$name.out" 2>"$TMP/$name.err" &
	echo $! >"$TMP/$name.pid"
	pids="$pids $!"
done
exec 7>"$TMP/ka.in" 8>"$TMP/kb.in"
wait_file "$TMP/ka.out" '^filled ' 60 && wait_file "$TMP/kb.out" '^filled ' 60 && ok || bad "kill: pods never filled" "$TMP/ka.out" "$TMP/kb.out"
ka_filled=$(awk '/^filled /{print $2}' "$TMP/ka.out")
kill -9 "$(cat "$TMP/ka.pid")"
wait "$(cat "$TMP/ka.pid")" 2>/dev/null
exec 7>&-
# a's pod: the next process sweeps the dead slot and takes the whole ceiling
mkfifo "$TMP/kc.in"
env LD_LIBRARY_PATH="$GG_TEST_SIMDIR" SIMGPU_SHARED="$CARD_NAME" SIMGPU_MEMORY=8Gi \
	LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_RUNTIME=1 GPUGUARD_SHARED="$TMP/ka.region" GPUGUARD_LIMIT="$CEIL" \
	GPUGUARD_DUMP_DIR="$TMP" GPUGUARD_DUMP_MAX=0 GPUGUARD_TERMINATION_LOG= \
	"$FILL_STATIC" driver hold <"$TMP/kc.in" >"$TMP/kc.out" 2>"$TMP/kc.err" &
echo $! >"$TMP/kc.pid"
pids="$pids $!"
exec 7>"$TMP/kc.in"
if wait_file "$TMP/kc.out" '^filled ' 60; then
	kc_filled=$(awk '/^filled /{print $2}' "$TMP/kc.out")
	set -- $(grep '^filled ' "$TMP/kc.out")
	if [ "$kc_filled" -ge $((ka_filled - 4 * MIB)) ] && [ "${8:-1}" = 0 ]; then
		ok
	else
		bad "kill: the dead pod's successor got $kc_filled bytes, its predecessor $ka_filled" "$TMP/kc.out" "$TMP/kc.err"
	fi
	# the region: the dead process's charge was swept, the successor's is all it holds
	"$GG" metrics --region "$TMP/ka.region" >"$TMP/ka.metrics" 2>&1
	used=$(awk '/^gpuguard_device_used_bytes\{/{print $2}' "$TMP/ka.metrics")
	if [ -n "$used" ] && [ "$used" -le "$CEIL" ] && [ "$used" -ge "$kc_filled" ]; then
		ok
	else
		bad "kill: a's region holds ${used:-?} bytes (the successor filled $kc_filled, the ceiling is $CEIL)" "$TMP/ka.metrics"
	fi
else
	bad "kill: the dead pod's successor never filled" "$TMP/kc.out" "$TMP/kc.err"
fi
exec 7>&- 8>&-
for name in kb kc; do wait "$(cat "$TMP/$name.pid")" 2>/dev/null; done

# A reading taken while a grant is in flight: the books hold the 65 MiB
# before the driver does, so the driver's figure less the books reads 65 MiB
# low. Such a reading (here the tick, every 64 MiB and 100 ms) must not
# lower the runtime charge: under TSan's timing it gave that room to the
# fill, which passed its ceiling on the card by as much. After the context
# and 65 MiB, the ceiling's free is at most the ceiling less both.
rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*
(
	sleep 0.3
	echo "a 65"
	sleep 0.1
	echo i
	echo q
) | env LD_LIBRARY_PATH="$GG_TEST_SIMDIR" SIMGPU_SHARED="$CARD_NAME" SIMGPU_MEMORY=8Gi \
	LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_RUNTIME=1 GPUGUARD_SHARED="$TMP/tick.region" GPUGUARD_LIMIT=2Gi \
	GPUGUARD_DUMP_DIR="$TMP" GPUGUARD_DUMP_MAX=0 GPUGUARD_TERMINATION_LOG= \
	"$GG_TEST_BUILD/tests/tools/podclient" >"$TMP/tick.out" 2>"$TMP/tick.err"
free=$(awk '$1 == "info" { print $2 }' "$TMP/tick.out")
most=$((2048 * MIB - 65 * MIB - CONTEXT))
if [ -n "$free" ] && [ "$free" -le "$most" ] && grep -q '^alloc ok' "$TMP/tick.out"; then
	ok
else
	bad "tick: free ${free:-?} after the context and 65 MiB, more than the ceiling less both ($most)" \
		"$TMP/tick.out" "$TMP/tick.err"
fi
rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*
finish
