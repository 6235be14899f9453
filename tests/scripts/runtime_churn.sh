#!/bin/sh
# gpuguard: members killed with a runtime charge leave none of it (issue 22).
# The soak (soak.sh) once saw dead members' runtime stay in the pod region's
# summed word: 176 MiB of a 300 MiB budget. Here, deterministically, on the
# simulator's shared card (SIMGPU_SHARED: a context costs SIMGPU_CONTEXT on
# the card, and NVML lists every process, so each member charges a runtime):
# a survivor holds 100 MiB; four more members each charge their runtime and
# 50 MiB, and are killed with SIGKILL. After the sweep the pod's runtime and
# used (gpuguard metrics) are the survivor's own again, to the byte, and a
# new member is granted the whole ceiling less the survivor's charge and its
# own runtime, and refused one step more. The members are tests/tools/
# podclient, driven line by line through FIFOs.
. "$(dirname "$0")/lib.sh"
CLIENT="$GG_TEST_BUILD/tests/tools/podclient"
GG="$GG_TEST_BUILD/bin/gpuguard"
BAD_LINES=12
if [ ! -w /dev/shm ]; then
	skip "runtime-churn: no /dev/shm for the simulator's shared card"
	finish
fi
CARD_NAME="gg-churn-$$"
MIB=1048576
CEIL_MIB=1024
pids=
on_exit() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*
}
rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*

# lines FILE N: waits (20 s at most) until FILE has N lines
lines() {
	i=0
	while [ "$(wc -l <"$1" 2>/dev/null || echo 0)" -lt "$2" ] && [ $i -lt 400 ]; do
		sleep 0.05
		i=$((i + 1))
	done
}

# start NAME FD: a member of the pod on the shared card, its stdin on FD
start() {
	mkfifo "$TMP/$1.in"
	: >"$TMP/$1.out"
	env LD_PRELOAD="$GG_TEST_PRELOAD" LD_LIBRARY_PATH="$GG_TEST_SIMDIR" SIMGPU_SHARED="$CARD_NAME" \
		SIMGPU_MEMORY=8Gi SIMGPU_CONTEXT=64Mi GPUGUARD_SHARED="$TMP/pod" GPUGUARD_LIMIT="${CEIL_MIB}Mi" \
		GPUGUARD_DUMP_MAX=0 GPUGUARD_DUMP_DIR="$TMP" GPUGUARD_TERMINATION_LOG= \
		"$CLIENT" <"$TMP/$1.in" >"$TMP/$1.out" 2>"$TMP/$1.err" &
	echo $! >"$TMP/$1.pid"
	pids="$pids $!"
	eval "exec $2>\"$TMP/$1.in\""
	lines "$TMP/$1.out" 1
}

# figures NAME: the pod's used and runtime, from gpuguard metrics
figures() {
	"$GG" metrics --region "$TMP/pod" >"$TMP/$1.metrics" 2>&1
	used=$(sed -n 's/^gpuguard_device_used_bytes{[^}]*} \([0-9]*\)$/\1/p' "$TMP/$1.metrics")
	rt=$(sed -n 's/^gpuguard_device_runtime_bytes{[^}]*} \([0-9]*\)$/\1/p' "$TMP/$1.metrics")
}

# the survivor: its runtime and 100 MiB
start s 3
echo "a 100" >&3
lines "$TMP/s.out" 2
figures s
used_s=${used:-0} rt_s=${rt:-0}
echo "survivor: used $used_s, runtime $rt_s"
if [ "$(sed -n 2p "$TMP/s.out")" = "alloc ok" ] && [ "$rt_s" -gt 0 ] && [ "$used_s" -eq $((100 * MIB + rt_s)) ]; then
	ok
else
	bad "churn-survivor: wanted 100 MiB granted and a runtime charged (used ${used:-?}, runtime ${rt:-?})" \
		"$TMP/s.out" "$TMP/s.err" "$TMP/s.metrics"
fi

# four members, each with its runtime and 50 MiB
fd=4
for m in m1 m2 m3 m4; do
	start $m $fd
	eval "echo 'a 50' >&$fd"
	lines "$TMP/$m.out" 2
	fd=$((fd + 1))
done
figures full
if [ "${rt:-0}" -ge $((5 * rt_s)) ] && [ "${used:-0}" -eq $((used_s + 4 * 50 * MIB + ${rt:-0} - rt_s)) ]; then
	ok
else
	bad "churn-members: wanted five runtimes and 300 MiB charged (used ${used:-?}, runtime ${rt:-?}; the survivor's runtime $rt_s)" \
		"$TMP/full.metrics" "$TMP/m1.out" "$TMP/m1.err"
fi

# kill -9 all four, then the survivor's memory query sweeps their slots
for m in m1 m2 m3 m4; do
	kill -9 "$(cat "$TMP/$m.pid")"
	wait "$(cat "$TMP/$m.pid")" 2>/dev/null
done
exec 4>&- 5>&- 6>&- 7>&-
echo i >&3
lines "$TMP/s.out" 4
figures swept
if [ "${rt:-x}" = "$rt_s" ] && [ "${used:-x}" = "$used_s" ]; then
	ok
else
	bad "churn-swept: after the kills the pod holds used ${used:-?} and runtime ${rt:-?}, wanted the survivor's own: used $used_s, runtime $rt_s" \
		"$TMP/swept.metrics"
fi

# a new member: the whole ceiling less the survivor's charge and its own
# runtime (a context like the survivor's), to the MiB, and not one step more
start t 8
figures newcomer
if [ "${used:-x}" = $((used_s + rt_s)) ]; then
	ok
else
	bad "churn-newcomer: with the new member the pod holds ${used:-?}, wanted the survivor's $used_s and one runtime $rt_s" \
		"$TMP/newcomer.metrics" "$TMP/t.out" "$TMP/t.err"
fi
room=$(((CEIL_MIB * MIB - used_s - rt_s) / MIB))
printf 'a %s\na 1\nq\n' "$room" >&8
exec 8>&-
lines "$TMP/t.out" 3
got=$(sed -n '2,3p' "$TMP/t.out" | tr '\n' ',')
if [ "$got" = "alloc ok,alloc refused 2," ]; then
	ok
else
	figures room
	bad "churn-room: wanted $room MiB granted and 1 MiB more refused, got $got (then used ${used:-?}, runtime ${rt:-?})" "$TMP/t.out" "$TMP/t.err"
fi
wait "$(cat "$TMP/t.pid")" 2>/dev/null
echo q >&3
exec 3>&-
wait "$(cat "$TMP/s.pid")" 2>/dev/null
finish
