#!/bin/sh
# gpuguard: a MIG instance is a card of its own (issue 22). On the
# simulator's shared card with GPU 0 split in two (SIMGPU_MIG=2: two 4 GiB
# instances), a pod on each instance (CUDA_VISIBLE_DEVICES=MIG-…), each
# under a ceiling of its instance less a margin, fills until refused: every
# refusal gpuguard's, never the driver's, and NVML (nvml_watch, without the
# library) never sees a process above its pod's ceiling. NVML's memory info
# on an instance's handle shows the pod's ceiling; the other instance's and
# the parent GPU's are left as the driver says (this process is not on
# them), in pod and process scope. A third process on instance A in A's pod
# shares A's budget and not B's. Where the driver gives no per-process
# figure on MIG (SIMGPU_MIG_NO_PROC_MEM=1), GPUGUARD_CONTEXT_RESERVE stands
# in and says so exactly once; a GPUGUARD_LIMIT above the instance's memory
# is reported and counted in metrics.
. "$(dirname "$0")/lib.sh"
PC="$GG_TEST_BUILD/tests/tools/podclient"
WATCH="$GG_TEST_SIMDIR/nvml_watch"
GG="$GG_TEST_BUILD/bin/gpuguard"
if [ ! -w /dev/shm ]; then
	skip "mig: no /dev/shm for the simulator's shared card"
	finish
fi
CARD_NAME="gg-mig-$$"
pids=
on_exit() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*
}
MIB=1048576
GPU=$((8192 * MIB))     # SIMGPU_MEMORY below
INST=$((4096 * MIB))    # each of SIMGPU_MIG=2's instances
CONTEXT=$((526 * MIB))  # the simulator's context on a shared card
HEADROOM=$((32 * MIB))  # GPUGUARD_RUNTIME_HEADROOM's default
STEP=64                 # MiB a fill asks at a time
CEIL=$((INST - 64 * MIB)) # each pod's ceiling: its instance less a margin

# sim [VAR=VALUE...] CMD...: on the shared card, MIG on; run in a subshell
# only (in the background or a pipeline): it becomes CMD, so $! is its PID
sim() {
	exec env LD_LIBRARY_PATH="$GG_TEST_SIMDIR" SIMGPU_SHARED="$CARD_NAME" SIMGPU_MEMORY=8Gi SIMGPU_MIG=2 "$@"
}

# pod NAME REGION UUID FD [VAR=VALUE...]: a podclient under gpuguard on
# instance UUID in pod REGION, its commands written to file descriptor FD
pod() {
	name=$1 region=$2 uuid=$3 fd=$4
	shift 4
	mkfifo "$TMP/$name.in"
	sim CUDA_VISIBLE_DEVICES="$uuid" LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_SHARED="$TMP/$region.region" \
		GPUGUARD_LIMIT="$CEIL" GPUGUARD_DUMP_DIR="$TMP" GPUGUARD_DUMP_MAX=0 GPUGUARD_TERMINATION_LOG= "$@" \
		"$PC" <"$TMP/$name.in" >"$TMP/$name.out" 2>"$TMP/$name.err" &
	echo $! >"$TMP/$name.pid"
	pids="$pids $!"
	eval "exec $fd>\"$TMP/$name.in\""
	wait_file "$TMP/$name.out" '^ready' 30 || bad "$name: never started" "$TMP/$name.out" "$TMP/$name.err"
}

# ask NAME FD COMMAND PATTERN: sends COMMAND, waits for a new line matching
# PATTERN, and prints the last such line
ask() {
	n0=$(grep -c "$4" "$TMP/$1.out")
	echo "$3" >&"$2"
	i=0
	while [ "$(grep -c "$4" "$TMP/$1.out")" -le "$n0" ] && [ $i -lt 1200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	grep "$4" "$TMP/$1.out" | tail -n 1
}

# metric REGION NAME: the sum of NAME's samples for the pod region
metric() {
	"$GG" metrics --region "$TMP/$1.region" 2>/dev/null | awk -v m="$2" 'index($0, m "{") == 1 { s += $2 } END { print s + 0 }'
}

# in NAME LO HI VALUE WHAT: LO <= VALUE <= HI
in_range() {
	if [ -n "$4" ] && [ "$4" -ge "$2" ] && [ "$4" -le "$3" ]; then ok; else bad "$1: $5 is ${4:-?}, not in [$2, $3]" "$TMP/$1.out" "$TMP/$1.err"; fi
}

# the instances' UUIDs, as NVML names them (no library)
printf 'M 0\nM 1\nq\n' | sim "$PC" --nvml >"$TMP/uuids" 2>&1
A=$(awk '$1 == "mig" && NR == 2 { print $2 }' "$TMP/uuids")
B=$(awk '$1 == "mig" && NR == 3 { print $2 }' "$TMP/uuids")
case "$A:$B" in
MIG-*:MIG-*) ok ;;
*)
	bad "mig: NVML names no MIG instances" "$TMP/uuids"
	finish
	;;
esac

sim "$WATCH" -i 5 -t 120 -o "$TMP/w.watch" >/dev/null 2>"$TMP/w.err" &
w=$!
pids="$pids $w"
sleep 0.2 # the watcher's first poll

# a and c: pod pa on instance A; b: pod pb on instance B
pod a pa "$A" 4
pod c pa "$A" 5
r=$(ask a 4 "F $STEP" '^filled ')
set -- $r
a_filled=${2:-}
[ "${4:-}" = 2 ] && ok || bad "a: the fill did not end in out-of-memory: $r" "$TMP/a.out"
# a and c share A's budget: two contexts in it, the headroom, less a step
# (and a headroom each: each process holds its own)
in_range a $((CEIL - 2 * CONTEXT - 2 * HEADROOM - STEP * MIB)) $((CEIL - 2 * CONTEXT)) "$a_filled" "what a filled"
r=$(ask c 5 "a $STEP" '^alloc ')
[ "$r" = "alloc refused 2" ] && ok || bad "c: pod pa is full, yet: $r" "$TMP/c.out" "$TMP/c.err"
pod b pb "$B" 6
r=$(ask b 6 "F $STEP" '^filled ')
set -- $r
b_filled=${2:-}
[ "${4:-}" = 2 ] && ok || bad "b: the fill did not end in out-of-memory: $r" "$TMP/b.out"
# b's budget is its own: only its context, not a's and c's
in_range b $((CEIL - CONTEXT - HEADROOM - STEP * MIB)) $((CEIL - CONTEXT)) "$b_filled" "what b filled"

# NVML's memory info: the instance's handle shows the pod's ceiling (v2 and
# v1); the other instance and the parent GPU are the driver's
for q in "a 4 $A $CEIL" "c 5 $A $CEIL" "b 6 $B $CEIL" "a 4 $B $INST" "b 6 $A $INST"; do
	set -- $q
	r=$(ask "$1" "$2" "N $3" '^nvmlu ')
	set -- $r "$4" "$1"
	if [ "${3:-}" = "$6" ] && [ "${5:-}" = "$6" ] && [ "${2:-0}" -le "$6" ]; then ok; else bad "$7: NVML's total for $q is not $6: $r" "$TMP/$7.out"; fi
done
for q in "a 4" "b 6"; do
	set -- $q
	r=$(ask "$1" "$2" n '^nvml ')
	[ "${r#nvml * }" = "$GPU" ] && ok || bad "$1: the parent GPU's total is not the card's $GPU: $r" "$TMP/$1.out"
done
# the card itself (no library): each instance holds at most its pod's ceiling
for u in "$A" "$B"; do
	r=$(printf 'N %s\nq\n' "$u" | sim "$PC" --nvml 2>&1 | grep '^nvmlu ')
	set -- $r
	used=$((${3:-0} - ${2:-0}))
	in_range a $((CEIL - CONTEXT - HEADROOM - STEP * MIB)) "$CEIL" "$used" "instance ${u}'s used memory"
done
# every refusal gpuguard's, none the driver's
for rg in pa pb; do
	refused=$(metric $rg gpuguard_device_refused_total)
	driver=$(metric $rg gpuguard_device_driver_oom_total)
	if [ "$refused" -ge 1 ] && [ "$driver" = 0 ]; then ok; else bad "$rg: refused $refused at the ceiling, $driver by the driver"; fi
done
# the per-process figure is there: no fallback, and no ceiling over the card
for n in a b c; do
	if grep -q 'GPUGUARD_CONTEXT_RESERVE\|more than the card' "$TMP/$n.err"; then bad "$n: a warning it should not give" "$TMP/$n.err"; else ok; fi
done
exec 4>&- 5>&- 6>&-
for n in a b c; do wait "$(cat "$TMP/$n.pid")" 2>/dev/null; done
kill "$w" 2>/dev/null
wait "$w"
for n in a b c; do
	max=$(awk -v p="$(cat "$TMP/$n.pid")" '$1 == "max" && $3 == p { print $4 }' "$TMP/w.watch")
	in_range "$n" $((CONTEXT)) "$CEIL" "${max:-}" "the most NVML saw it use"
done

# process scope: the instance's handle shows this process's ceiling, the
# parent GPU is left alone
pod p px "$A" 4 GPUGUARD_SCOPE=process
ask p 4 "a $STEP" '^alloc ' >/dev/null
r=$(ask p 4 "N $A" '^nvmlu ')
set -- $r
[ "${3:-}" = "$CEIL" ] && ok || bad "p: process scope, NVML's total for its instance is not $CEIL: $r" "$TMP/p.out"
r=$(ask p 4 n '^nvml ')
[ "${r#nvml * }" = "$GPU" ] && ok || bad "p: process scope, the parent GPU's total is not $GPU: $r" "$TMP/p.out"
exec 4>&-
wait "$(cat "$TMP/p.pid")" 2>/dev/null

# no per-process figure on MIG: GPUGUARD_CONTEXT_RESERVE stands in, said once
rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*
pod d pd "$A" 4 SIMGPU_MIG_NO_PROC_MEM=1 GPUGUARD_CONTEXT_RESERVE=600Mi
ask d 4 "a $STEP" '^alloc ' >/dev/null
r=$(ask d 4 "F $STEP" '^filled ')
set -- $r
in_range d $((CEIL - 600 * MIB - 2 * STEP * MIB)) $((CEIL - 600 * MIB - STEP * MIB)) "${2:-}" "what d filled after a step"
ask d 4 "a $STEP" '^alloc ' >/dev/null
said=$(grep -c 'GPUGUARD_CONTEXT_RESERVE' "$TMP/d.err")
[ "$said" = 1 ] && ok || bad "d: the fallback was said $said times, not once" "$TMP/d.err"
r=$(printf 'N %s\nq\n' "$A" | sim "$PC" --nvml 2>&1 | grep '^nvmlu ')
set -- $r
in_range d 0 "$CEIL" $((${3:-0} - ${2:-0})) "instance A's used memory"
[ "$(metric pd gpuguard_device_driver_oom_total)" = 0 ] && ok || bad "d: the driver refused a request"
exec 4>&-
wait "$(cat "$TMP/d.pid")" 2>/dev/null

# a ceiling above the instance's memory (but not the GPU's): reported once, counted
pod e pe "$B" 4 GPUGUARD_LIMIT=6Gi
ask e 4 "a $STEP" '^alloc ' >/dev/null
said=$(grep -c 'more than the card can hold' "$TMP/e.err")
[ "$said" = 1 ] && ok || bad "e: a 6 GiB ceiling on a 4 GiB instance was reported $said times, not once" "$TMP/e.err"
[ "$(metric pe gpuguard_device_ceiling_over_card)" = 1 ] && ok || bad "e: gpuguard_device_ceiling_over_card is not 1"
exec 4>&-
wait "$(cat "$TMP/e.pid")" 2>/dev/null
rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*
finish
