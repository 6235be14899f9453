#!/bin/sh
# gpuguard: whom `gpuguard dump PID` signals. Behind a forwarding init (a
# shell that passes SIGUSR2 on, as tini and dumb-init do) nothing is sent and
# the processes under it with the library are named; a process with the
# library gets its dump; a rate-limited one is told apart from a missing
# library; GPUGUARD_DUMP_SIGNAL is read as the library reads it (one list of
# names through both parsers); messages quoting a process name are escaped.
ROOT=$(pwd)
B="${GG_TEST_BUILD:-$ROOT/build}"
GG="$B/bin/gpuguard"
SN="$B/tests/tools/signame"
SP="$B/tests/tools/sigprobe"
LIBSO="${GG_TEST_LIB:-$B/lib/libgpuguard.so}"
. "$(dirname "$0")/lib.sh"
pids=
on_exit() {
	for p in $pids; do kill "$p" 2>/dev/null; done
}
for x in "$GG" "$SN" "$SP" "$LIBSO"; do
	[ -e "$x" ] || {
		bad "$x is missing (make all)"
		finish
	}
done
export LD_LIBRARY_PATH="$B/sim" SIMGPU_MEMORY=16Gi GPUGUARD_SHARED="$TMP/pod"
unset GPUGUARD_LIMIT GPUGUARD_DUMP_SIGNAL GPUGUARD_DUMP_MAX GPUGUARD_DUMP_INTERVAL LD_PRELOAD
# Under a sanitizer its runtime must come first in LD_PRELOAD.
PRE=${SAN_RUNTIME:-}
[ -n "$PRE" ] && export ASAN_OPTIONS="${ASAN_OPTIONS}:verify_asan_link_order=0"
LIBPRE="${PRE:+$PRE }$LIBSO"
if ! ${CC:-cc} -std=gnu11 -Iinclude -o "$TMP/sleeper" tests/e2e/sleeper.c -L"$B/sim" -lcuda 2>"$TMP/cc.log"; then
	bad "building tests/e2e/sleeper.c: $(cat "$TMP/cc.log")"
	finish
fi

# 1. A forwarding init without the library, its child a plain process: the
# init is not signalled, so the child (whose SIGUSR2 would kill it) lives.
sh -c 'trap "kill -USR2 \$c" USR2; sleep 30 & c=$!; echo "$c" >"$1.tmp"; mv "$1.tmp" "$1"; wait "$c"; wait "$c"' sh "$TMP/child1" &
init1=$!
pids="$pids $init1"
wait_file "$TMP/child1" . || bad "the forwarding init did not start"
child1=$(cat "$TMP/child1")
pids="$pids $child1"
err=$("$GG" dump --timeout 2 "$init1" 2>&1 >/dev/null)
rc=$?
sleep 0.2
[ "$rc" -eq 2 ] && ok || bad "dump of a forwarding init: exit $rc, want 2"
kill -0 "$child1" 2>/dev/null && ok || bad "dump of a forwarding init killed its child (the signal was sent): '$err'"
echo "$err" | grep -q "process $init1 (sh) does not have libgpuguard loaded; not signalling it.*no process under it has the library" &&
	[ "$(echo "$err" | wc -l)" -eq 1 ] && ok || bad "forwarding init, no library anywhere: '$err'"
kill "$child1" "$init1" 2>/dev/null

# 2. The same init with the server under the library: the init is still not
# signalled; the message names the server, and dumping the server works.
mkdir "$TMP/d"
# (under a sanitizer its runtime goes to `run` in LD_PRELOAD; `run` keeps it first)
sh -c 'trap "kill -USR2 \$c" USR2; LD_PRELOAD="$5" "$2" run --dump-dir "$3" -- "$4" 64 20 >"$1.out" 2>&1 & c=$!; echo "$c" >"$1.tmp"; mv "$1.tmp" "$1"; wait "$c"; wait "$c"' \
	sh "$TMP/child2" "$GG" "$TMP/d" "$TMP/sleeper" "$PRE" &
init2=$!
pids="$pids $init2"
wait_file "$TMP/child2" . || bad "the second init did not start"
srv=$(cat "$TMP/child2")
pids="$pids $srv"
wait_file "$TMP/child2.out" ready || bad "the sleeper under gpuguard run did not start: $(cat "$TMP/child2.out")"
err=$("$GG" dump --timeout 2 "$init2" 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 2 ] && [ -z "$(ls "$TMP/d")" ] && ok || bad "dump of an init over a server: exit $rc, dumps: $(ls "$TMP/d")"
echo "$err" | grep -q "process $init2 (sh) does not have libgpuguard loaded; not signalling it.*processes under it with libgpuguard: $srv (sleeper): run gpuguard dump on that one" &&
	ok || bad "the init's message does not name the server $srv: '$err'"
path=$("$GG" dump --timeout 5 "$srv")
rc=$?
[ "$rc" -eq 0 ] && [ -f "$path" ] && case $path in "$TMP/d/gpuguard-"*"-$srv-"*.jsonl) true ;; *) false ;; esac && ok ||
	bad "dump of the server: exit $rc, '$path'"

# 3. Asked again at once: the library caught the signal but its rate limit
# (GPUGUARD_DUMP_INTERVAL, 10 s by default) suppressed the dump. The message
# says so, and is not the one for a missing library.
err=$("$GG" dump --timeout 1 "$srv" 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "process $srv (sleeper) has libgpuguard loaded and caught signal 12, but wrote no new dump in $TMP/d within 1 s: rate-limited: its last dump here, $path, is [0-9.]* s old and GPUGUARD_DUMP_INTERVAL is 10s" &&
	ok || bad "a rate-limited dump: exit $rc, '$err'"
kill -0 "$srv" 2>/dev/null && ok || bad "the server died"
kill "$srv" "$init2" 2>/dev/null
wait "$init2" 2>/dev/null

# GPUGUARD_DUMP_MAX=1 (interval 0): the second is refused by the count.
mkdir "$TMP/d3"
GPUGUARD_DUMP_MAX=1 GPUGUARD_DUMP_INTERVAL=0 GPUGUARD_DUMP_SIGNAL=PWR LD_PRELOAD="$PRE" \
	"$GG" run --dump-dir "$TMP/d3" -- "$TMP/sleeper" 64 20 >"$TMP/s3.out" 2>&1 &
s3=$!
pids="$pids $s3"
wait_file "$TMP/s3.out" ready || bad "sleeper 3 did not start: $(cat "$TMP/s3.out")"
# SIGPWR by name: the library's name, sent as the library reads it.
path=$("$GG" dump --timeout 5 "$s3")
rc=$?
[ "$rc" -eq 0 ] && [ -f "$path" ] && ok || bad "dump with GPUGUARD_DUMP_SIGNAL=PWR: exit $rc, '$path'"
err=$("$GG" dump --timeout 1 "$s3" 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "caught signal 30, but wrote no new dump .*rate-limited: it has written 1 dumps here and GPUGUARD_DUMP_MAX is 1" &&
	ok || bad "GPUGUARD_DUMP_MAX reached: exit $rc, '$err'"
kill "$s3" 2>/dev/null
wait "$s3" 2>/dev/null

# 4. One list of GPUGUARD_DUMP_SIGNAL values through both parsers: the
# library's (its verbose configuration line says whether it accepted the
# value; sigprobe says which signal its handler is on) and the command's.
n=0
while IFS= read -r v; do
	n=$((n + 1))
	out=$(LD_PRELOAD="$LIBPRE" GPUGUARD_DUMP_SIGNAL="$v" GPUGUARD_VERBOSE=1 GPUGUARD_DUMP_DIR="$TMP" "$SP" 2>&1)
	if echo "$out" | grep -q "GPUGUARD_DUMP_SIGNAL=.* (environment (invalid))"; then
		lib=invalid
	elif echo "$out" | grep -q "GPUGUARD_DUMP_SIGNAL=.* (environment)$"; then
		lib=$(echo "$out" | sed -n 's/^dump-signal \(.*\)$/\1/p')
		[ "$lib" = none ] && lib=0
	else
		lib="no verbose line: $out"
	fi
	tool=$("$SN" "$v")
	[ "$lib" = "$tool" ] && ok || bad "GPUGUARD_DUMP_SIGNAL='$v': the library reads '$lib', gpuguard dump '$tool'"
done <<'EOF'
SIGHUP
HUP
INT
SIGINT
QUIT
USR1
SIGUSR1
USR2
SIGUSR2
PIPE
ALRM
TERM
CHLD
CONT
TSTP
TTIN
TTOU
URG
XCPU
XFSZ
VTALRM
SIGVTALRM
PROF
WINCH
SIGWINCH
IO
SIGIO
PWR
SIGPWR
SYS
SIGSYS
RTMIN+0
SIGRTMIN+1
RTMIN+3
SIGRTMIN+30
RTMIN+31
RTMIN+1x
RTMIN+
RTMIN
SIGRTMAX
RTMAX-1
0
1
10
012
31
64
65
9
19
-1
+5
10x
usr1
SIGusr1
 USR1
USR1 
SIGKILL
KILL
STOP
SIG
SIGSIGUSR1
CLD
IOT
POLL
STKFLT
EOF
[ "$n" -ge 60 ] && ok || bad "only $n signal values were compared"

# 5. A process name with control characters is escaped in the message.
ln -s "$(command -v sleep)" "$TMP/x$(printf '\033')[2Jz"
"$TMP/x$(printf '\033')[2Jz" 5 &
p5=$!
pids="$pids $p5"
sleep 0.2
"$GG" dump --timeout 1 "$p5" >/dev/null 2>"$TMP/e5"
rc=$?
[ "$rc" -eq 2 ] && grep -q "process $p5 (x?\[2Jz) does not have libgpuguard" "$TMP/e5" && ! grep -q "$(printf '\033')" "$TMP/e5" && ok ||
	bad "a name with ESC in dump's message: exit $rc, '$(od -c "$TMP/e5" | head -n 3)'"
kill "$p5" 2>/dev/null

finish
