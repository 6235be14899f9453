#!/bin/sh
# gpuguard: golden tests of `gpuguard report` (tests/golden/): each dump beside
# its expected text (.txt), JSON (.json) and folded (.folded) reports, and,
# where the tool complains, its exit status and stderr (.err). Also the HTML
# page's escaping, --diff, exit codes, and the run and dump subcommands.
# GG_GOLDEN_UPDATE=1 rewrites the expected files from the current tool.
ROOT=$(pwd)
GG="${GG_TEST_BUILD:-$ROOT/build}/bin/gpuguard"
DIR="$ROOT/tests/golden"
. "$(dirname "$0")/lib.sh"
if [ ! -x "$GG" ]; then
	bad "$GG is missing (make all)"
	finish
fi

# expect NAME EXPECTED_FILE ACTUAL_FILE
expect() {
	if [ -n "$GG_GOLDEN_UPDATE" ]; then
		if [ -s "$3" ] || [ -f "$2" ]; then cp "$3" "$2"; fi
		ok
	elif [ ! -f "$2" ] && [ ! -s "$3" ]; then
		ok
	elif [ -f "$2" ] && cmp -s "$2" "$3"; then
		ok
	else
		bad "$1: output differs from $(basename "$2"):"
		diff -u "$2" "$3" 2>&1 | head -n 30
	fi
}

cd "$DIR" || exit 1
for dump in *.jsonl; do
	n=${dump%.jsonl}
	"$GG" report "$dump" >"$TMP/$n.txt" 2>"$TMP/$n.stderr"
	rc=$?
	{ [ "$rc" -ne 0 ] || [ -s "$TMP/$n.stderr" ]; } && { echo "exit $rc"; cat "$TMP/$n.stderr"; } >"$TMP/$n.err"
	touch "$TMP/$n.err"
	expect "$n (exit status, stderr)" "$n.err" "$TMP/$n.err"
	[ "$rc" -eq 0 ] || continue
	expect "$n (text)" "$n.txt" "$TMP/$n.txt"
	"$GG" report --json "$dump" >"$TMP/$n.json" 2>/dev/null
	expect "$n (json)" "$n.json" "$TMP/$n.json"
	if command -v jq >/dev/null 2>&1; then
		if jq -e .gpuguard_report "$TMP/$n.json" >/dev/null 2>&1; then ok; else bad "$n: --json is not valid JSON"; fi
	fi
	"$GG" report --folded "$dump" >"$TMP/$n.folded" 2>/dev/null
	expect "$n (folded)" "$n.folded" "$TMP/$n.folded"
	# HTML: one self-contained page; nothing from the dump becomes markup.
	if "$GG" report --html "$TMP/$n.html" "$dump" 2>/dev/null && head -c 15 "$TMP/$n.html" | grep -q '<!DOCTYPE html>' &&
		! grep -qi '<script\|<img\|https\?:' "$TMP/$n.html" && grep -q '</html>' "$TMP/$n.html"; then
		ok
	else
		bad "$n: --html page missing, unfinished, or with scripts, images or links"
	fi
done
if grep -q '&lt;script&gt;alert(1)&lt;/script&gt;' "$TMP/hostile_strings.html" &&
	grep -q 'f;g&lt;b&gt;&amp;amp;' "$TMP/hostile_strings.html"; then ok; else bad "hostile_strings: dump strings not HTML-escaped"; fi

# The HTML page has the text report's sections too (issue 11, finding 6).
for h in "Failing request" "Top call sites by count" "At the GPU peak" "Host" "Configuration"; do
	grep -q "<h2>$h" "$TMP/sizing_vllm.html" && ok || bad "sizing_vllm: --html has no \"$h\" section"
done

# The timeline draws the ceiling and shows wall-clock time (UTC).
grep -q 'ceiling 4.00 GiB</text>' "$TMP/ceiling_steady.html" && grep -q '08:2[0-9]:[0-9.]*Z</text>' "$TMP/ceiling_steady.html" &&
	ok || bad "ceiling_steady: --html timeline lacks the ceiling line or wall-clock time"

# The trailer's loss counters are reported when not zero, and a bad one is
# an error like any field's.
sed 's/^{"t":"end",\(.*\)}$/{"t":"end",\1,"signal_refused":3,"history_dropped":7,"log_dropped":2}/' \
	ceiling_steady.jsonl >"$TMP/lossy.jsonl"
"$GG" report "$TMP/lossy.jsonl" >"$TMP/lossy.txt" 2>&1
grep -q '^  3 allocations refused inside signal handlers' "$TMP/lossy.txt" &&
	grep -q '^  7 history events lost' "$TMP/lossy.txt" && grep -q '^  2 log lines dropped' "$TMP/lossy.txt" &&
	! grep -q 'refused inside signal handlers' "$TMP/ceiling_steady.txt" &&
	ok || bad "ceiling_steady with loss counters: the report does not show them"
"$GG" report --json "$TMP/lossy.jsonl" | grep -q '"signal_refused":3,"history_dropped":7,"log_dropped":2}' &&
	ok || bad "ceiling_steady with loss counters: --json lacks them"
"$GG" report --html "$TMP/lossy.html" "$TMP/lossy.jsonl" 2>/dev/null && grep -q '<br>7 history events lost' "$TMP/lossy.html" &&
	ok || bad "ceiling_steady with loss counters: --html lacks them"
sed 's/"log_dropped":2/"log_dropped":-2/' "$TMP/lossy.jsonl" >"$TMP/lossy_bad.jsonl"
"$GG" report "$TMP/lossy_bad.jsonl" >/dev/null 2>"$TMP/lossy_bad.err"
[ $? -eq 2 ] && grep -q 'field "log_dropped": expected a non-negative integer' "$TMP/lossy_bad.err" &&
	ok || bad "a negative log_dropped: want exit 2 naming the field, got: $(cat "$TMP/lossy_bad.err")"

# Folded stacks also in speedscope's JSON format, with a bytes unit.
"$GG" report --speedscope leak.jsonl >"$TMP/leak.speedscope" 2>&1
expect "leak (speedscope)" "leak.speedscope" "$TMP/leak.speedscope"
if command -v jq >/dev/null 2>&1; then
	[ "$(jq -r '.profiles[0].unit' "$TMP/leak.speedscope" 2>/dev/null)" = bytes ] &&
		[ "$(jq '.profiles[0].weights | add' "$TMP/leak.speedscope")" = "$(jq '.profiles[0].endValue' "$TMP/leak.speedscope")" ] &&
		ok || bad "leak: --speedscope is not speedscope JSON with unit bytes and weights summing to the live bytes"
fi

"$GG" report --diff leak_old.jsonl leak.jsonl >"$TMP/diff_leak.txt" 2>&1
expect "diff leak_old -> leak" "diff_leak.txt" "$TMP/diff_leak.txt"
"$GG" report --diff --json leak_old.jsonl leak.jsonl >"$TMP/diff_leak.json" 2>&1
expect "diff leak_old -> leak (json)" "diff_leak.json" "$TMP/diff_leak.json"

# Several dumps in one run; the first bad one stops it with status 2.
"$GG" report leak.jsonl host_pressure.jsonl >/dev/null 2>&1 && ok || bad "two dumps: exit $?"
"$GG" report leak.jsonl bad_syntax.jsonl >/dev/null 2>&1
[ $? -eq 2 ] && ok || bad "a good then a bad dump: want exit 2"

# Exit statuses: 1 for usage errors, 2 for unreadable input.
check_rc 1 "$GG"
check_rc 1 "$GG" frobnicate
check_rc 1 "$GG" report
check_rc 1 "$GG" report --bogus leak.jsonl
check_rc 1 "$GG" report --diff leak.jsonl
check_rc 1 "$GG" report --json --folded leak.jsonl
check_rc 2 "$GG" report /nonexistent/dump.jsonl
check_rc 2 "$GG" report /dev/null
check_rc 0 "$GG" --help
check_rc 0 "$GG" version
for c in report run dump; do
	check_rc 0 "$GG" help "$c"
	check_rc 0 "$GG" "$c" --help
	"$GG" help "$c" | grep -q "^SYNOPSIS" && ok || bad "help $c has no SYNOPSIS"
done
"$GG" help report | grep -q "external .*largest free block" && ok || bad "help report lacks the fragmentation definitions"

# Reading from a pipe, and random bytes: a clean error, never a crash.
cat leak.jsonl | "$GG" report /dev/stdin >/dev/null 2>&1 && ok || bad "report from a pipe"
head -c 100000 /dev/urandom >"$TMP/random.jsonl"
"$GG" report "$TMP/random.jsonl" >/dev/null 2>&1
[ $? -eq 2 ] && ok || bad "random bytes: want exit 2"

# A record over the 1 MiB line limit, with or without its newline, is an
# error (bounded memory); a short partial last line is a truncation warning.
{ head -n 1 leak.jsonl; printf '{"t":"config","name":"x","value":"'; head -c 2000000 /dev/zero | tr '\0' a; printf '","source":"s"}\n'; } >"$TMP/long.jsonl"
err=$("$GG" report "$TMP/long.jsonl" 2>&1 >/dev/null)
[ $? -eq 2 ] && echo "$err" | grep -q "long.jsonl:2: record longer than" && ok || bad "a 2 MB record: '$err'"
{ head -n 1 leak.jsonl; printf '{"t":"config","name":"x","value":"'; head -c 2000000 /dev/zero | tr '\0' a; } >"$TMP/long2.jsonl"
"$GG" report "$TMP/long2.jsonl" >/dev/null 2>"$TMP/long2.err"
[ $? -eq 2 ] && grep -q "record longer than" "$TMP/long2.err" && ok || bad "a 2 MB partial last line"
{ head -n 3 leak.jsonl; printf '{"t":"config","name":"x","val'; } >"$TMP/cut.jsonl"
"$GG" report "$TMP/cut.jsonl" >/dev/null 2>"$TMP/cut.err"
[ $? -eq 0 ] && grep -q "line 4 is cut short" "$TMP/cut.err" && ok || bad "a partial last line: $(cat "$TMP/cut.err")"

# run: the library goes first in LD_PRELOAD (after a sanitizer runtime, which
# must stay first), the variables are set. Under a sanitizer the
# (instrumented) library needs its runtime preloaded too.
cd "$ROOT" || exit 1
PRE=${SAN_RUNTIME:-}
[ -n "$PRE" ] && export ASAN_OPTIONS="${ASAN_OPTIONS}:verify_asan_link_order=0"
out=$(LD_PRELOAD="$PRE" "$GG" run --limit 3Gi --dump-dir /tmp/x -- sh -c 'echo "$LD_PRELOAD|$GPUGUARD_LIMIT|$GPUGUARD_DUMP_DIR"')
case $out in
${PRE:+$PRE:}*/lib/libgpuguard.so\|3Gi\|/tmp/x) ok ;;
*) bad "run: environment is '$out'" ;;
esac
out=$(LD_PRELOAD="$PRE" "$GG" run --scope process --shared=/tmp/r --on-limit wait:2s --context-reserve=300Mi -- \
	sh -c 'echo "$GPUGUARD_SCOPE|$GPUGUARD_SHARED|$GPUGUARD_ON_LIMIT|$GPUGUARD_CONTEXT_RESERVE"')
[ "$out" = "process|/tmp/r|wait:2s|300Mi" ] && ok || bad "run: pod options give '$out'"
out=$(LD_PRELOAD="${PRE:+$PRE:}libc.so.6" "$GG" run -- sh -c 'echo "$LD_PRELOAD"')
case $out in
${PRE:+$PRE:}*/lib/libgpuguard.so:libc.so.6) ok ;;
*) bad "run: LD_PRELOAD not prepended: '$out'" ;;
esac
n=$(LD_PRELOAD="$PRE" "$GG" run -- sh -c 'grep -c libgpuguard /proc/$$/maps')
[ "${n:-0}" -ge 1 ] && ok || bad "run: the library is not loaded in the child"
check_rc 127 "$GG" run -- /nonexistent/program
check_rc 1 "$GG" run
check_rc 2 env GPUGUARD_LIB=/nonexistent.so "$GG" run -- true

# dump: a stand-in process that writes a dump named like the library's on
# SIGUSR2; and one that catches it but writes nothing, for the time-out.
# Both have the library mapped (preloaded into the shell; it never arms
# there, the shell's trap catches the signal): dump signals nothing else.
# tests/scripts/dump_target.sh tests the real library and the refusals.
LIBSO="${GG_TEST_LIB:-${GG_TEST_BUILD:-$ROOT/build}/lib/libgpuguard.so}"
LIBPRE="${PRE:+$PRE }$LIBSO"
mkdir -p "$TMP/dumps"
# wait_for FILE: up to 5 s, for a stand-in to say it has set its trap.
wait_for() {
	i=0
	while [ ! -f "$1" ] && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}
LD_PRELOAD="$LIBPRE" GPUGUARD_DUMP_DIR="$TMP/dumps" sh -c 'trap "cp tests/golden/leak.jsonl \"\$GPUGUARD_DUMP_DIR/gpuguard-h-$$-1-1.jsonl\"" USR2
	: >"$GPUGUARD_DUMP_DIR/../ready1"
	i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done' &
pid=$!
wait_for "$TMP/ready1"
out=$("$GG" dump --timeout 5 "$pid")
rc=$?
[ "$rc" -eq 0 ] && [ "$out" = "$TMP/dumps/gpuguard-h-$pid-1-1.jsonl" ] && ok || bad "dump: exit $rc, printed '$out'"
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
LD_PRELOAD="$LIBPRE" sh -c 'trap : USR2; : >"$1"; i=0; while [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done' sh "$TMP/ready2" &
pid=$!
wait_for "$TMP/ready2"
err=$("$GG" dump --timeout 1 "$pid" 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "caught signal 12, but wrote no new dump" && ok || bad "dump time-out: exit $rc, '$err'"
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
# A process without the library, or with it but no handler yet, is not
# killed by the signal: it is never sent.
sleep 5 &
pid=$!
err=$("$GG" dump --timeout 1 "$pid" 2>&1 >/dev/null)
rc=$?
kill -0 "$pid" 2>/dev/null && [ "$rc" -eq 2 ] && echo "$err" | grep -q "does not have libgpuguard loaded" && ok ||
	bad "dump of a process without the library: exit $rc, '$err'"
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
LD_PRELOAD="$LIBPRE" sleep 5 &
pid=$!
i=0
while ! grep -q libgpuguard "/proc/$pid/maps" 2>/dev/null && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
err=$("$GG" dump --timeout 1 "$pid" 2>&1 >/dev/null)
rc=$?
kill -0 "$pid" 2>/dev/null && [ "$rc" -eq 2 ] && echo "$err" | grep -q "has libgpuguard loaded but no handler for signal 12" && ok ||
	bad "dump of a process with the library but no handler: exit $rc, '$err'"
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
check_rc 2 "$GG" dump 999999999
check_rc 1 "$GG" dump notapid

finish
