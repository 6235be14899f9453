#!/bin/sh
# gpuguard: a pod member killed with SIGKILL holds nothing in the memory
# other members are shown (issue 9, finding 4): within 1 s cuMemGetInfo and
# NVML give its memory back as free, without any allocation to trigger the
# sweep (the old books kept it "used" for as long as nobody allocated).
. "$(dirname "$0")/lib.sh"
on_exit() { kill -9 $pa 2>/dev/null; }
CLIENT="$GG_TEST_BUILD/tests/tools/podclient"
member() { # always run with &: exec makes $! the member itself
	exec env LD_PRELOAD="$GG_TEST_PRELOAD" LD_LIBRARY_PATH="$GG_TEST_SIMDIR" GPUGUARD_SHARED="$TMP/pod" \
		GPUGUARD_LIMIT=1Gi GPUGUARD_CONTEXT_RESERVE=0 GPUGUARD_DUMP_DIR="$TMP" "$CLIENT"
}
GIB=1073741824
HELD=$((GIB - 500 * 1048576))

# check WHAT CMD: B asks (cuMemGetInfo "i" or NVML "n") until free is the
# whole GiB, for 2 s at most, and passes if that took at most 1 s
check() {
	what=$1 cmd=$2
	mkfifo "$TMP/a.$cmd" "$TMP/b.$cmd"
	: >"$TMP/a.$cmd.out"
	: >"$TMP/b.$cmd.out"
	member <"$TMP/a.$cmd" >"$TMP/a.$cmd.out" 2>&1 &
	pa=$!
	exec 3>"$TMP/a.$cmd"
	echo "a 500" >&3
	lines "$TMP/a.$cmd.out" 2
	member <"$TMP/b.$cmd" >"$TMP/b.$cmd.out" 2>&1 &
	pb=$!
	exec 4>"$TMP/b.$cmd"
	echo "$cmd" >&4
	lines "$TMP/b.$cmd.out" 2
	before=$(sed -n 2p "$TMP/b.$cmd.out" | cut -d' ' -f2)
	kill -9 $pa
	wait $pa 2>/dev/null
	exec 3>&-
	n=2 t=0 free=
	while [ $t -lt 20 ]; do
		echo "$cmd" >&4
		n=$((n + 1))
		lines "$TMP/b.$cmd.out" $n
		free=$(sed -n "${n}p" "$TMP/b.$cmd.out" | cut -d' ' -f2)
		[ "$free" = $GIB ] && break
		sleep 0.1
		t=$((t + 1))
	done
	echo q >&4
	exec 4>&-
	wait $pb
	if [ "$before" = $HELD ]; then
		ok
	else
		bad "dead-$what-before: with 500 MiB held by another member, free was $before, wanted $HELD"
	fi
	# t counts 100 ms sleeps after the kill: 10 is 1 s (plus the queries)
	if [ "$free" = $GIB ] && [ $t -le 10 ]; then
		ok
		echo "    $what: the dead member's 500 MiB was free after $t x 100 ms"
	else
		bad "dead-$what: 2 s after the kill $what still says free $free, wanted $GIB"
		sed 's/^/    /' "$TMP/b.$cmd.out" | head -5
	fi
}
check cuMemGetInfo i
check nvml n
finish
