#!/bin/sh
# gpuguard: a post-mortem after a kill (issue 11, findings 2 and 3). Pod
# members under fixture cgroups (GPUGUARD_TEST_CGROUP_DIR) are killed with
# SIGKILL; another member's sweep moves each one's last record to the pod's
# deaths ring, and `gpuguard top`, `metrics` and `report` then show it with
# its verdict: the OOM killer's (working set 15.8 of 16 GiB), not an OOM
# (15.8 GiB used, 14 GiB of it inactive page cache: no false alarm), GPU
# refusals before death. The ring survives the region being written afresh
# by the next process to attach. A refusal appends one line to the
# termination log when the file exists, and never creates it.
ROOT=$(pwd)
B="${GG_TEST_BUILD:-$ROOT/build}"
GG="$B/bin/gpuguard"
CLIENT="$B/tests/tools/podclient"
GG_TEST_PRELOAD="${GG_TEST_PRELOAD:-$B/lib/libgpuguard.so}"
GG_TEST_SIMDIR="${GG_TEST_SIMDIR:-$B/sim}"
. "$(dirname "$0")/lib.sh"
pids=
on_exit() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
}
trap '' PIPE # a member that died early fails its checks, not the script
POD="$TMP/pod"
GIB=1073741824

# cgroup DIR CURRENT MAX INACTIVE: a cgroup v2 directory of fixture files
cgroup() {
	mkdir -p "$1"
	echo "$2" >"$1/memory.current"
	echo "$3" >"$1/memory.max"
	printf 'oom_kill 0\n' >"$1/memory.events"
	printf 'anon 1000\nfile 2000\ninactive_anon 0\nactive_anon 1000\ninactive_file %s\nactive_file 0\n' "$4" \
		>"$1/memory.stat"
}
cgroup "$TMP/cg-oom" 16965120819 17179869184 0                 # 15.8 of 16 GiB, no page cache
cgroup "$TMP/cg-cache" 16965120819 17179869184 15032385536     # the same, 14 GiB of it page cache
cgroup "$TMP/cg-small" 1073741824 17179869184 0                # 1 of 16 GiB

# member NAME ENV...: a pod member reading commands from fifo $TMP/NAME,
# writing $TMP/NAME.out; its pid in $NAME_pid
member() {
	name=$1
	shift
	mkfifo "$TMP/$name"
	: >"$TMP/$name.out"
	(exec env LD_PRELOAD="$GG_TEST_PRELOAD" LD_LIBRARY_PATH="$GG_TEST_SIMDIR" GPUGUARD_SHARED="$POD" \
		GPUGUARD_LIMIT=1Gi GPUGUARD_CONTEXT_RESERVE=0 GPUGUARD_DUMP_DIR="$TMP/dumps" "$@" \
		"$CLIENT" <"$TMP/$name" >"$TMP/$name.out" 2>&1) &
	eval "${name}_pid=$!"
	pids="$pids $!"
}
mkdir -p "$TMP/dumps"
: >"$TMP/termlog"
: >"$TMP/quietlog"

# The witness: stays attached, and sweeps when asked for memory info.
member w
exec 3>"$TMP/w"
lines "$TMP/w.out" 1
wn=1
sweep() { # until top shows N deaths, 3 s at most
	t=0
	while [ $t -lt 30 ]; do
		echo i >&3
		wn=$((wn + 1))
		lines "$TMP/w.out" $wn
		n=$("$GG" metrics --region "$POD" 2>/dev/null | grep -c '^gpuguard_death_info{')
		[ "$n" -ge "$1" ] && return 0
		sleep 0.1
		t=$((t + 1))
	done
	return 1
}

# kill_after NAME CMD...: sends the commands, waits for their answers, kills
kill_after() {
	name=$1
	shift
	exec 4>"$TMP/$name"
	lines "$TMP/$name.out" 1
	n=1
	for c in "$@"; do
		echo "$c" >&4
		n=$((n + 1))
		lines "$TMP/$name.out" $n
	done
	eval "p=\$${name}_pid"
	kill -9 "$p"
	wait "$p" 2>/dev/null
	exec 4>&-
}

member oom GPUGUARD_TEST_CGROUP_DIR="$TMP/cg-oom" GPUGUARD_TERMINATION_LOG="$TMP/quietlog"
kill_after oom "a 300"
# Before any sweep, top already shows what the exited slot left behind.
"$GG" top --once --region "$POD" >"$TMP/top.txt" 2>&1
grep "^  $oom_pid " "$TMP/top.txt" | grep -q " exited .*likely OOMKilled (working set 15.80 GiB of 16.00 GiB)" && ok ||
	bad "top before the sweep: no obituary for the exited slot: $(cat "$TMP/top.txt")"
sweep 1 || bad "no death recorded 3 s after the first kill"
member cache GPUGUARD_TEST_CGROUP_DIR="$TMP/cg-cache" GPUGUARD_TERMINATION_LOG="$TMP/quietlog"
kill_after cache "a 200"
sweep 2 || bad "no second death recorded"
member gpu GPUGUARD_TEST_CGROUP_DIR="$TMP/cg-small" GPUGUARD_TERMINATION_LOG="$TMP/termlog"
kill_after gpu "a 400" "a 900" "a 900"
grep -q "alloc refused" "$TMP/gpu.out" && ok || bad "the third member was not refused: $(cat "$TMP/gpu.out")"
sweep 3 || bad "no third death recorded"

"$GG" top --once --region "$POD" >"$TMP/top.txt" 2>&1
"$GG" metrics --region "$POD" >"$TMP/metrics.txt" 2>&1
check_views() { # WHEN
	grep -q "^RECENT DEATHS" "$TMP/top.txt" && ok || bad "$1: top has no RECENT DEATHS section"
	grep "^  $oom_pid " "$TMP/top.txt" | grep -q "likely OOMKilled (working set 15.80 GiB of 16.00 GiB)" && ok ||
		bad "$1: top: the OOM member's verdict: $(grep "^  $oom_pid " "$TMP/top.txt")"
	grep "^  $oom_pid " "$TMP/top.txt" | grep -q "300.00 MiB / 1.00 GiB" && ok ||
		bad "$1: top: the OOM member's last GPU use against the ceiling"
	grep "^  $cache_pid " "$TMP/top.txt" | grep -q "killed while within GPU and host limits (not an OOM)" && ok ||
		bad "$1: top: page cache counted as working set: $(grep "^  $cache_pid " "$TMP/top.txt")"
	grep "^  $gpu_pid " "$TMP/top.txt" | grep -q "GPU refusals before death" && ok ||
		bad "$1: top: the refused member's verdict: $(grep "^  $gpu_pid " "$TMP/top.txt")"
	grep "^gpuguard_death_info{" "$TMP/metrics.txt" | grep "pid=\"$oom_pid\"" | grep -q 'verdict="host_oom"' && ok ||
		bad "$1: metrics: no host_oom death for $oom_pid"
	grep "^gpuguard_death_info{" "$TMP/metrics.txt" | grep "pid=\"$cache_pid\"" | grep -q 'verdict="not_oom"' &&
		ok || bad "$1: metrics: no not_oom death for $cache_pid"
	grep "^gpuguard_death_info{" "$TMP/metrics.txt" | grep "pid=\"$gpu_pid\"" | grep -q 'verdict="gpu_refusals"' &&
		ok || bad "$1: metrics: no gpu_refusals death for $gpu_pid"
	grep "^gpuguard_death_working_set_bytes{" "$TMP/metrics.txt" | grep "pid=\"$cache_pid\"" | grep -q '} 1932735283$' &&
		ok || bad "$1: metrics: the page-cache member's working set is not usage less inactive_file"
	grep "^gpuguard_death_refused_requests{" "$TMP/metrics.txt" | grep "pid=\"$gpu_pid\"" | grep -q '} 2$' && ok ||
		bad "$1: metrics: the refused member's 2 refusals"
}
check_views "after the kills"
if command -v promtool >/dev/null 2>&1; then
	promtool check metrics <"$TMP/metrics.txt" >/dev/null 2>&1 && ok || bad "promtool rejects the metrics"
fi

# The termination log: one line for two refusals, none without a refusal,
# and a missing file is never created.
[ "$(wc -l <"$TMP/termlog")" = 1 ] && ok || bad "termination log: want 1 line, got: $(cat "$TMP/termlog")"
grep -q "refused at the ceiling" "$TMP/termlog" && grep -q "of 900.0 MiB" "$TMP/termlog" && ok ||
	bad "termination log line: $(cat "$TMP/termlog")"
[ ! -s "$TMP/quietlog" ] && ok || bad "termination log written without a refusal: $(cat "$TMP/quietlog")"
member absent GPUGUARD_TERMINATION_LOG="$TMP/nolog"
exec 4>"$TMP/absent"
lines "$TMP/absent.out" 1
echo "a 2000" >&4
lines "$TMP/absent.out" 2
echo q >&4
exec 4>&-
wait "$absent_pid"
grep -q "alloc refused" "$TMP/absent.out" && [ ! -e "$TMP/nolog" ] && ok ||
	bad "termination log created, or no refusal: $(cat "$TMP/absent.out")"

# The witness leaves; the next process finds nobody attached and writes
# the region afresh: the deaths stay, and its dump reports them.
echo q >&3
exec 3>&-
wait "$w_pid"
before=$("$GG" metrics --region "$POD" | grep '^gpuguard_region_created_time_seconds ')
sleep 0.1
member fresh GPUGUARD_DUMP_AT_EXIT=1 GPUGUARD_TEST_CGROUP_DIR="$TMP/cg-small"
exec 4>"$TMP/fresh"
lines "$TMP/fresh.out" 1
echo "a 10" >&4
lines "$TMP/fresh.out" 2
"$GG" top --once --region "$POD" >"$TMP/top.txt" 2>&1
"$GG" metrics --region "$POD" >"$TMP/metrics.txt" 2>&1
echo q >&4
exec 4>&-
wait "$fresh_pid"
after=$(grep '^gpuguard_region_created_time_seconds ' "$TMP/metrics.txt")
[ "$before" != "$after" ] && ok || bad "the region was not written afresh ($before): the check below proves nothing"
check_views "after a fresh attach"
dump=$(ls "$TMP"/dumps/gpuguard-*-"$fresh_pid"-*.jsonl 2>/dev/null | head -1)
if [ -n "$dump" ]; then
	"$GG" report "$dump" >"$TMP/report.txt" 2>&1
	grep -q "^RECENT DEATHS IN THE POD" "$TMP/report.txt" && ok || bad "report: no RECENT DEATHS section"
	grep -q "pid $oom_pid (podclient), found dead .*: likely OOMKilled (working set 15.80 GiB of 16.00 GiB)" \
		"$TMP/report.txt" && ok || bad "report: the OOM member's obituary"
	grep -q "pid $cache_pid (podclient), .*(not an OOM)" "$TMP/report.txt" && ok || bad "report: the page-cache member"
	grep -q "pid $gpu_pid (podclient), .*GPU refusals before death" "$TMP/report.txt" && ok ||
		bad "report: the refused member"
	"$GG" report --html "$TMP/report.html" "$dump" >/dev/null 2>&1
	grep -q "Recent deaths in the pod" "$TMP/report.html" && grep -q "likely OOMKilled" "$TMP/report.html" && ok ||
		bad "report --html: no deaths table"
	"$GG" report --json "$dump" >"$TMP/report.json" 2>&1
	grep -q '"verdict":"host_oom"' "$TMP/report.json" && ok || bad "report json: no host_oom death"
else
	bad "the fresh member wrote no exit dump: $(cat "$TMP/fresh.out")"
fi
finish
