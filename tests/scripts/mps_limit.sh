#!/bin/sh
# gpuguard: the driver's own limit (issue 22, MPS v3 memory partitioning).
# On the simulator's shared card a cgroup may carry a hard limit that the
# driver enforces over all its processes' device memory (SIMGPU_DMEM_MAX;
# the cgroup: SIMGPU_CGROUP for the sim, GPUGUARD_CGROUP for the library),
# reported by nvmlDeviceGetMemoryLimits_v1. gpuguard must keep its ceiling
# at min(GPUGUARD_LIMIT, the room the cgroup leaves) and refuse first:
# - GPUGUARD_LIMIT above the hard limit: the ceiling is the hard limit,
#   cuMemGetInfo says so, the fill is refused by gpuguard (its dump and
#   termination message name the driver's limit), never by the driver;
# - no GPUGUARD_LIMIT: the hard limit is adopted, said once;
# - GPUGUARD_LIMIT below it: ours stands;
# - two processes in one cgroup: the second's ceiling is the room the first
#   left (hard - currentUsed of the others), and grows back at a refusal
#   once the first frees;
# - no limit set (hard = MAX), or an NVML without the function: nothing
#   changes.
# The members are tests/tools/podclient, fed their commands on stdin.
. "$(dirname "$0")/lib.sh"
CLIENT="$GG_TEST_BUILD/tests/tools/podclient"
if [ ! -w /dev/shm ]; then
	skip "mps-limit: no /dev/shm for the simulator's shared card"
	finish
fi
CARD_NAME="gg-mps-$$"
on_exit() {
	[ -n "${apid:-}" ] && kill -9 "$apid" 2>/dev/null
	rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*
}
MIB=1048576
BAD_LINES=12

# client NAME CGROUP [VAR=VALUE...]: podclient under the library on the
# shared card (8 GiB, 64 MiB contexts), in CGROUP, process scope; stdin is
# the caller's; output in $TMP/NAME.out, .err, dumps in $TMP/NAME/.
client() {
	name=$1 cg=$2
	shift 2
	mkdir -p "$TMP/$name"
	: >"$TMP/$name/term"
	env -u GPUGUARD_LIMIT LD_LIBRARY_PATH="$GG_TEST_SIMDIR" SIMGPU_SHARED="$CARD_NAME" SIMGPU_MEMORY=8Gi SIMGPU_CONTEXT=64Mi \
		SIMGPU_CGROUP="$cg" GPUGUARD_CGROUP="$cg" SIMGPU_DMEM_MIN= SIMGPU_NVML_NO_MEMORY_LIMITS= \
		LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_SCOPE=process GPUGUARD_DUMP_DIR="$TMP/$name" \
		GPUGUARD_TERMINATION_LOG="$TMP/$name/term" "$@" \
		"$CLIENT" >"$TMP/$name.out" 2>"$TMP/$name.err"
}

# expect NAME PATTERN WHAT: a line of NAME's output matches PATTERN
expect() {
	grep -q "$2" "$TMP/$1.out" && ok || bad "$1: $3" "$TMP/$1.out" "$TMP/$1.err"
}
expect_err() {
	grep -q "$2" "$TMP/$1.err" && ok || bad "$1: $3" "$TMP/$1.err"
}
no_err() {
	grep -q "$2" "$TMP/$1.err" && bad "$1: $3" "$TMP/$1.err" || ok
}
# refused_by_us NAME: its dump counts a refusal at the ceiling and none by
# the driver
refused_by_us() {
	d=$(cat "$TMP/$1"/gpuguard-*.jsonl 2>/dev/null | grep '"t":"device"')
	case $d in
	*'"refused_ceiling":0'* | '') bad "$1: no refusal at gpuguard's ceiling in its dump" "$TMP/$1.out" ;;
	*'"refused_driver":0'*) ok ;;
	*) bad "$1: the driver refused (the card's own out-of-memory)" "$TMP/$1.out" ;;
	esac
}
card_gone() {
	rm -f "/dev/shm/simgpu-cuda-$CARD_NAME"*
}

# 1. GPUGUARD_LIMIT=4Gi over a 1 GiB hard limit: 64 MiB context + 32 MiB
# headroom + 3 x 256 MiB = 864 MiB fit, a fourth 256 MiB is ours to refuse
# (the driver would too, at 1088 MiB), then 64 MiB fit and 128 MiB more is
# refused by us (the driver would take it: 1024 MiB exactly).
card_gone
printf 'i\nn\na 256\na 256\na 256\na 256\na 64\na 128\nq\n' |
	client binds /pods/a SIMGPU_DMEM_MAX=1Gi GPUGUARD_LIMIT=4Gi
expect binds "^info [0-9]* $((1024 * MIB))\$" "cuMemGetInfo's total is not the driver's 1 GiB limit"
expect binds "^nvml [0-9]* $((1024 * MIB))\$" "NVML's memory info total is not the driver's 1 GiB limit"
[ "$(grep -c '^alloc ok' "$TMP/binds.out")" -eq 4 ] && ok || bad "binds: not 4 grants" "$TMP/binds.out"
[ "$(grep -c '^alloc refused 2' "$TMP/binds.out")" -eq 2 ] && ok || bad "binds: not 2 refusals" "$TMP/binds.out"
refused_by_us binds
expect_err binds "driver memory limit on device 0: hard 1.0 GiB, soft 0 B (cgroup /sys/fs/cgroup/pods/a); gpuguard's ceiling is 1.0 GiB (the driver's limit binds" "the driver's limit was not said"
grep -q "refused at the ceiling set by the driver's limit" "$TMP/binds/term" && ok ||
	bad "binds: the termination message does not name the driver's limit" "$TMP/binds/term"
d=$(grep -h '"t":"device"' "$TMP/binds"/gpuguard-*.jsonl 2>/dev/null)
case $d in
*"\"driver_limit\":$((1024 * MIB)),"*"\"own_limit\":$((4096 * MIB))"*) ok ;;
*) bad "binds: the dump's device record lacks the driver's limit: $d" ;;
esac
"$GG_TEST_BUILD/bin/gpuguard" report "$TMP/binds"/gpuguard-*.jsonl >"$TMP/binds.report" 2>&1
grep -q "is the driver's limit" "$TMP/binds.report" && ok || bad "binds: the report does not say the ceiling is the driver's" "$TMP/binds.report"
grep -q "a higher GPUGUARD_LIMIT alone changes nothing" "$TMP/binds.report" && ok ||
	bad "binds: the report advises a higher GPUGUARD_LIMIT alone" "$TMP/binds.report"

# 2. No GPUGUARD_LIMIT: the hard limit is adopted.
card_gone
printf 'i\na 256\na 256\na 256\na 256\nq\n' | client adopt /pods/a SIMGPU_DMEM_MAX=1Gi
expect adopt "^info [0-9]* $((1024 * MIB))\$" "cuMemGetInfo's total is not the adopted 1 GiB"
[ "$(grep -c '^alloc ok' "$TMP/adopt.out")" -eq 3 ] && ok || bad "adopt: not 3 grants" "$TMP/adopt.out"
refused_by_us adopt
expect_err adopt "no GPUGUARD_LIMIT: the driver's limit" "the adoption was not said"
[ "$(grep -c 'driver memory limit on device' "$TMP/adopt.err")" -eq 1 ] && ok || bad "adopt: said more than once" "$TMP/adopt.err"

# 3. GPUGUARD_LIMIT below the hard limit: ours stands.
card_gone
printf 'i\na 256\na 256\nq\n' | client below /pods/a SIMGPU_DMEM_MAX=1Gi GPUGUARD_LIMIT=512Mi
expect below "^info [0-9]* $((512 * MIB))\$" "cuMemGetInfo's total is not GPUGUARD_LIMIT's 512 MiB"
expect below "^alloc ok" "the first 256 MiB was refused"
expect below "^alloc refused 2" "the second 256 MiB passed 512 MiB"
expect_err below "gpuguard's ceiling is 512.0 MiB (GPUGUARD_LIMIT binds)" "the log does not say ours binds"
grep -q "driver's limit" "$TMP/below/term" && bad "below: the refusal blames the driver's limit" "$TMP/below/term" || ok

# 4. Two processes in one cgroup: A holds 64 MiB context + 512 MiB; B's
# ceiling is 1024 - 576 = 448 MiB; 256 MiB fit beside its context and
# headroom, 128 MiB more do not (ours to refuse); once A frees, B's next
# request past its old ceiling reads the room again and is granted.
card_gone
mkfifo "$TMP/a.in"
client twoA /pods/b SIMGPU_DMEM_MAX=1Gi <"$TMP/a.in" &
apid=$!
exec 3>"$TMP/a.in"
echo 'a 512' >&3
if wait_file "$TMP/twoA.out" '^alloc ok' 20; then
	mkfifo "$TMP/b.in"
	: >"$TMP/twoB.out"
	client twoB /pods/b GPUGUARD_LIMIT=4Gi <"$TMP/b.in" &
	bpid=$!
	exec 4>"$TMP/b.in"
	printf 'i\na 256\na 128\n' >&4
	lines "$TMP/twoB.out" 4
	expect twoB "^info [0-9]* $((448 * MIB))\$" "cuMemGetInfo's total is not the room A left (448 MiB)"
	[ "$(sed -n 3p "$TMP/twoB.out")" = "alloc ok" ] && ok || bad "twoB: 256 MiB beside A's refused" "$TMP/twoB.out"
	[ "$(sed -n 4p "$TMP/twoB.out")" = "alloc refused 2" ] && ok || bad "twoB: 128 MiB past A's room granted" "$TMP/twoB.out"
	refused_by_us twoB
	echo f >&3
	wait_file "$TMP/twoA.out" '^free ok' 20
	echo 'a 128' >&4
	lines "$TMP/twoB.out" 5
	[ "$(sed -n 5p "$TMP/twoB.out")" = "alloc ok" ] && ok || bad "twoB: the room A gave back was not seen" "$TMP/twoB.out"
	echo q >&4
	exec 4>&-
	wait "$bpid"
else
	bad "twoA: 512 MiB under a 1 GiB limit refused" "$TMP/twoA.out" "$TMP/twoA.err"
fi
echo q >&3
exec 3>&-
wait "$apid"
apid=

# 4b. Pod scope: two members of one pod in one limited cgroup share the
# ceiling; A holds 512 MiB, B's 256 MiB fit (960 MiB charged with two
# contexts and headrooms), a second 256 MiB is ours to refuse.
card_gone
mkfifo "$TMP/pa.in"
client podA /pods/d SIMGPU_DMEM_MAX=1Gi GPUGUARD_SCOPE=pod GPUGUARD_SHARED="$TMP/pod.region" <"$TMP/pa.in" &
apid=$!
exec 3>"$TMP/pa.in"
echo 'a 512' >&3
if wait_file "$TMP/podA.out" '^alloc ok' 20; then
	printf 'i\na 256\na 256\nq\n' | client podB /pods/d GPUGUARD_SCOPE=pod GPUGUARD_SHARED="$TMP/pod.region"
	expect podB "^info [0-9]* $((1024 * MIB))\$" "the pod's cuMemGetInfo total is not the driver's 1 GiB"
	[ "$(sed -n 3p "$TMP/podB.out")" = "alloc ok" ] && ok || bad "podB: 256 MiB beside A's refused" "$TMP/podB.out"
	[ "$(sed -n 4p "$TMP/podB.out")" = "alloc refused 2" ] && ok || bad "podB: 256 MiB past the limit granted" "$TMP/podB.out"
	refused_by_us podB
else
	bad "podA: 512 MiB under a 1 GiB limit refused" "$TMP/podA.out" "$TMP/podA.err"
fi
echo q >&3
exec 3>&-
wait "$apid"
apid=

# 5. No limit on the cgroup (hard = MAX): GPUGUARD_LIMIT alone, nothing said.
card_gone
printf 'i\na 512\na 512\na 512\na 512\nq\n' | client nolimit /pods/c GPUGUARD_LIMIT=2Gi
expect nolimit "^info [0-9]* $((2048 * MIB))\$" "cuMemGetInfo's total is not GPUGUARD_LIMIT's"
[ "$(grep -c '^alloc ok' "$TMP/nolimit.out")" -eq 3 ] && ok || bad "nolimit: not 3 grants" "$TMP/nolimit.out"
no_err nolimit "driver memory limit" "a limit was said where none is set"

# 6. An NVML without the function (an older driver): nothing changes; the
# driver's limit then refuses inside the driver, as before.
card_gone
printf 'i\na 256\na 256\na 256\na 256\nq\n' |
	client oldnvml /pods/a SIMGPU_DMEM_MAX=1Gi GPUGUARD_LIMIT=4Gi SIMGPU_NVML_NO_MEMORY_LIMITS=1
expect oldnvml "^info [0-9]* $((4096 * MIB))\$" "cuMemGetInfo's total is not GPUGUARD_LIMIT's"
no_err oldnvml "driver memory limit" "a limit was said without the function"

# 7. A GPUGUARD_CGROUP that is not an absolute path: said, with the syntax,
# and nothing read.
card_gone
printf 'i\nq\n' | client badcg /pods/a SIMGPU_DMEM_MAX=1Gi GPUGUARD_LIMIT=4Gi GPUGUARD_CGROUP=pods/a
expect badcg "^info [0-9]* $((4096 * MIB))\$" "cuMemGetInfo's total is not GPUGUARD_LIMIT's"
expect_err badcg "GPUGUARD_CGROUP=pods/a is not valid; accepted: an absolute cgroup v2 path" "the bad value was not named"
card_gone
finish
