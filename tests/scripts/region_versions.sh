#!/bin/sh
# gpuguard: the runtime category in the pod region, version 4 and 3 (issue
# 22). Version 4 keeps each slot's runtime charge in a word of its own (the
# runtime table, include/gpuguard/region.h): `gpuguard metrics` sums the
# live slots' words, so an exited member's runtime is gone at once and the
# entry's snapshot word is not what counts. The tools still read version 3
# files, an older library's, whose runtime is the entry's summed word.
# Regions written by tests/tools/mkregion; slot 0's lock held as an attached
# process holds it, slot 7's not (its holder exited).
ROOT=$(pwd)
B="${GG_TEST_BUILD:-$ROOT/build}"
GG="$B/bin/gpuguard"
MK="$B/tests/tools/mkregion"
. "$(dirname "$0")/lib.sh"
pids=
on_exit() {
	for p in $pids; do kill "$p" 2>/dev/null; done
}
for x in "$GG" "$MK"; do
	[ -x "$x" ] || {
		bad "$x is missing (make all)"
		finish
	}
done
unset GPUGUARD_SHARED
MIB=1048576

# region PATH [SPEC...]: a pod on one CUDA device with a 1 GiB ceiling;
# slot 0 holds 300 MiB of which 100 MiB runtime, slot 7 200 MiB of which
# 50 MiB; the entry's runtime word says 999 bytes
region() {
	p=$1
	shift
	"$MK" "$p" limit=1Gi \
		dev=0:cuda:8f2a1c3d4e5f60718293a4b5c6d7e8f9:1073741824:$((500 * MIB)):$((500 * MIB)):8589934592:0:0:0 \
		devruntime=0:999 \
		proc=0:1234:python3:0:0=$((300 * MIB)) procruntime=0:0=$((100 * MIB)) \
		proc=7:99:vllm:0:0=$((200 * MIB)) procruntime=7:0=$((50 * MIB)) "$@" || bad "mkregion $p failed"
}
# metric FILE NAME: the device series' value
metric() {
	sed -n "s/^$2{[^}]*} \\([0-9]*\\)\$/\\1/p" "$1"
}

region "$TMP/v4"
region "$TMP/v3" hostile=v3
for v in v4 v3; do
	rm -f "$TMP/hold.out"
	"$MK" --hold 0 "$TMP/$v" >"$TMP/hold.out" 2>&1 &
	holder=$!
	pids="$pids $holder"
	i=0
	while ! grep -q held "$TMP/hold.out" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	"$GG" metrics --region "$TMP/$v" >"$TMP/$v.metrics" 2>"$TMP/$v.err"
	rc=$?
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	up=$(sed -n 's/^gpuguard_up \([0-9]*\)$/\1/p' "$TMP/$v.metrics")
	used=$(metric "$TMP/$v.metrics" gpuguard_device_used_bytes)
	rt=$(metric "$TMP/$v.metrics" gpuguard_device_runtime_bytes)
	# version 4: the live slot's word alone; version 3: the entry's word
	want_rt=$((100 * MIB))
	[ $v = v3 ] && want_rt=999
	if [ $rc -eq 0 ] && [ "$up" = 1 ] && [ "$used" = $((300 * MIB)) ] && [ "$rt" = "$want_rt" ]; then
		ok
	else
		bad "region-$v: metrics exit $rc, up ${up:-?}, used ${used:-?} (want $((300 * MIB))), runtime ${rt:-?} (want $want_rt)" \
			"$TMP/$v.err" "$TMP/$v.metrics"
	fi
done

# A version 3 file the library finds left over (nobody attached) is
# extended and written afresh as the current version; one still in use is refused
# with one message, and the process keeps a ceiling of its own.
if [ -x "$B/tests/tools/podclient" ] && [ -n "${GG_TEST_PRELOAD:-}" ]; then
	client() {
		printf 'a 10\nq\n' | env LD_PRELOAD="$GG_TEST_PRELOAD" LD_LIBRARY_PATH="${GG_TEST_SIMDIR:-$B/sim}" \
			GPUGUARD_SHARED="$1" GPUGUARD_LIMIT=1Gi GPUGUARD_DUMP_MAX=0 GPUGUARD_DUMP_DIR="$TMP" \
			GPUGUARD_TERMINATION_LOG= "$B/tests/tools/podclient"
	}
	region "$TMP/left" hostile=v3
	chmod 600 "$TMP/left"
	client "$TMP/left" >"$TMP/left.out" 2>"$TMP/left.err"
	size=$(wc -c <"$TMP/left")
	if [ "$(sed -n 2p "$TMP/left.out")" = "alloc ok" ] && [ ! -s "$TMP/left.err" ] &&
		[ "$size" -gt "$(wc -c <"$TMP/v3")" ] && "$GG" metrics --region "$TMP/left" >/dev/null 2>&1; then
		ok
	else
		bad "region-v3-left-over: wanted it written afresh as the current version (size $size)" "$TMP/left.out" "$TMP/left.err"
	fi
	region "$TMP/busy" hostile=v3
	chmod 600 "$TMP/busy"
	rm -f "$TMP/hold.out"
	"$MK" --hold 0 "$TMP/busy" >"$TMP/hold.out" 2>&1 &
	holder=$!
	pids="$pids $holder"
	i=0
	while ! grep -q held "$TMP/hold.out" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	client "$TMP/busy" >"$TMP/busy.out" 2>"$TMP/busy.err"
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	if [ "$(sed -n 2p "$TMP/busy.out")" = "alloc ok" ] && [ "$(grep -c 'older gpuguard (region version 3)' "$TMP/busy.err")" = 1 ]; then
		ok
	else
		bad "region-v3-in-use: wanted one message and a ceiling of its own" "$TMP/busy.out" "$TMP/busy.err"
	fi
else
	skip "region-v3-left-over: no podclient or no preload (GG_TEST_PRELOAD)"
fi
finish
