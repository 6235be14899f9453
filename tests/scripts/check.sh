#!/bin/sh
# gpuguard check, the startup probe that makes a pod fail closed (issue 13):
# exit 0 only for a process that runs with the library and a valid
# GPUGUARD_LIMIT; otherwise exit 2 with one line saying why. Each case is a
# `sleep` started the way a container's main process would be.
. "$(dirname "$0")/lib.sh"
PIDS=
on_exit() { for p in $PIDS; do kill $p 2>/dev/null; done; }
TOOL="$GG_TEST_BUILD/bin/gpuguard"
# The sanitizer runtime, where there is one, stays first in the preload.
RUNTIME=${GG_TEST_PRELOAD%"$GG_TEST_LIB"}

# case NAME WANT-RC WANT-TEXT ENV...: starts `sleep 30` with ENV, checks it
case_() {
	name=$1 want=$2 text=$3
	shift 3
	env "$@" sleep 30 >/dev/null 2>&1 &
	pid=$!
	PIDS="$PIDS $pid"
	# wait until it is sleep (the shell's fork, then env, exec in turn) and
	# the loader is done: preloads are mapped before the program's own
	# libraries, so libc's mapping means they are in
	i=0
	while { [ "$(cat /proc/$pid/comm 2>/dev/null)" != sleep ] || ! grep -q "/libc[.-]" /proc/$pid/maps 2>/dev/null; } &&
		[ $i -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	"$TOOL" check $pid >"$TMP/$name.out" 2>&1
	rc=$?
	kill $pid 2>/dev/null
	if [ $rc -eq "$want" ] && grep -qF "$text" "$TMP/$name.out" && [ "$(wc -l <"$TMP/$name.out")" -eq 1 ]; then
		ok
	else
		bad "check-$name: exit $rc (want $want), wanted one line with: $text"
		sed 's/^/    /' "$TMP/$name.out"
	fi
}
case_ loaded 0 "runs with libgpuguard, GPUGUARD_LIMIT=20Gi" LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_LIMIT=20Gi GPUGUARD_SHARED="$TMP/pod"
case_ list 0 "GPUGUARD_LIMIT=0=20Gi,*=8Gi" LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_LIMIT="0=20Gi,*=8Gi" GPUGUARD_SHARED="$TMP/pod"
case_ not-loaded 2 "does not run with libgpuguard: LD_PRELOAD is not set in it" GPUGUARD_LIMIT=20Gi
case_ missing-file 2 "LD_PRELOAD names $TMP/gone/libgpuguard.so, which does not exist, so the loader ignored it" \
	LD_PRELOAD="${RUNTIME}$TMP/gone/libgpuguard.so" GPUGUARD_LIMIT=20Gi
case_ bad-limit 2 'GPUGUARD_LIMIT="20 gigs" is not valid' LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_LIMIT="20 gigs"
case_ no-limit 2 "GPUGUARD_LIMIT is not set in it: no ceiling is enforced" LD_PRELOAD="$GG_TEST_PRELOAD"
# Pod scope: a region there but broken (each process would keep a ceiling
# of its own) fails the probe; none yet, or process scope, does not.
printf 'not a region' >"$TMP/broken.region"
case_ broken-region 2 "its pod region is not usable" \
	LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_LIMIT=20Gi GPUGUARD_SHARED="$TMP/broken.region"
case_ region-not-yet 0 "runs with libgpuguard" \
	LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_LIMIT=20Gi GPUGUARD_SHARED="$TMP/none.region"
case_ broken-region-process-scope 0 "runs with libgpuguard" \
	LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_LIMIT=20Gi GPUGUARD_SHARED="$TMP/broken.region" GPUGUARD_SCOPE=process
# behind an init (a shell as PID 1 of the container): its child counts
sh -c "env LD_PRELOAD='$GG_TEST_PRELOAD' GPUGUARD_LIMIT=4Gi sleep 30 >/dev/null 2>&1; :" &
pid=$!
PIDS="$PIDS $pid"
i=0
while ! "$TOOL" check $pid >"$TMP/init.out" 2>&1 && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
if grep -q "runs with libgpuguard, GPUGUARD_LIMIT=4Gi" "$TMP/init.out"; then
	ok
else
	bad "check-behind-init: the shell's child with the library was not found"
	sed 's/^/    /' "$TMP/init.out"
fi
pkill -P $pid 2>/dev/null
"$TOOL" check 1 2 >"$TMP/usage.out" 2>&1
if [ $? -eq 1 ]; then ok; else bad "check-usage: two PIDs not a usage error"; fi
finish
