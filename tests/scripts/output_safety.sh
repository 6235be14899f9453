#!/bin/sh
# gpuguard: the command's own output. `report --html FILE` never writes
# through a symlink or into anything but a regular file, replaces FILE whole
# (or not at all) with the umask's mode, and leaves no temporary behind.
# Every text output (report, folded, HTML, diff, top, messages quoting
# input) carries no C0, DEL or C1 control (U+009B CSI as UTF-8 C2 9B or as
# a raw 0x9B byte), and is valid UTF-8; JSON escapes them.
ROOT=$(pwd)
B="${GG_TEST_BUILD:-$ROOT/build}"
GG="$B/bin/gpuguard"
MK="$B/tests/tools/mkregion"
G="$ROOT/tests/golden"
. "$(dirname "$0")/lib.sh"
for x in "$GG" "$MK"; do
	[ -x "$x" ] || {
		bad "$x is missing (make all)"
		finish
	}
done
unset GPUGUARD_SHARED
D="$G/hostile_controls.jsonl"
ESC=$(printf '\033')
C1=$(printf '\302[\200-\237]') # U+0080..U+009F in UTF-8
C0=$(printf '[\001-\010\013-\037\177]')

# clean NAME FILE: FILE is valid UTF-8 with no C0 control but newline (and
# tab), no DEL, no C1 control.
clean() {
	if ! iconv -f UTF-8 -t UTF-8 <"$2" >/dev/null 2>&1; then
		bad "$1: not valid UTF-8 (a raw byte such as 0x9B got through)"
	elif LC_ALL=C grep -q "$C0" "$2"; then
		bad "$1: a C0 control or DEL got through: $(LC_ALL=C grep -n "$C0" "$2" | head -n 2 | od -c | head -n 4)"
	elif LC_ALL=C grep -q "$C1" "$2"; then
		bad "$1: a C1 control got through: $(LC_ALL=C grep -n "$C1" "$2" | head -n 2 | od -c | head -n 4)"
	else
		ok
	fi
}

# 1. A dump full of controls: C1 as \u009b and as raw C2 9B, ESC, BEL, DEL,
# NEL, in the host, command line, configuration and frames.
"$GG" report "$D" >"$TMP/r.txt" 2>"$TMP/r.err" && ok || bad "report of hostile_controls: $(cat "$TMP/r.err")"
clean "text report" "$TMP/r.txt"
grep -Fq "  command: srv?]0;pwned? raw?31m del? nel?x ok é中" "$TMP/r.txt" && ok ||
	bad "text report: controls not shown as '?', or UTF-8 lost: $(grep command "$TMP/r.txt")"
"$GG" report --folded "$D" >"$TMP/r.folded" 2>/dev/null
clean "folded" "$TMP/r.folded"
"$GG" report --html "$TMP/r.html" "$D" 2>/dev/null && ok || bad "--html of hostile_controls"
clean "html" "$TMP/r.html"
"$GG" report --diff "$D" "$D" >"$TMP/r.diff" 2>/dev/null
clean "diff" "$TMP/r.diff"
"$GG" report --json "$D" >"$TMP/r.json" 2>/dev/null
clean "json" "$TMP/r.json"
grep -Fq '"host":"node\u009b2J"' "$TMP/r.json" && grep -Fq 'del\u007f' "$TMP/r.json" &&
	grep -Fq 'srv\u001b]0;pwned\u0007' "$TMP/r.json" && ok || bad "json: controls not written as \\u escapes"
if command -v jq >/dev/null 2>&1; then
	[ "$(jq -r .dump.host "$TMP/r.json" | od -An -tx1 | tr -d ' \n')" = "6e6f6465c29b324a0a" ] && ok ||
		bad "json: the host does not read back as node U+009B 2J"
fi

# 2. A raw 0x9B byte (and ESC) in a dump's file name: text says '?', JSON
# says \ufffd (not UTF-8) and \u001b, and stays valid JSON.
RAW="$TMP/c$(printf '\233')s$(printf '\033')e.jsonl"
cp "$G/leak.jsonl" "$RAW"
"$GG" report "$RAW" >"$TMP/raw.txt" 2>&1
clean "text report of a raw 0x9B file name" "$TMP/raw.txt"
head -n 1 "$TMP/raw.txt" | grep -Fq "/c?s?e.jsonl" && ok || bad "raw 0x9B name: '$(head -n 1 "$TMP/raw.txt")'"
"$GG" report --json "$RAW" >"$TMP/raw.json" 2>&1
clean "json of a raw 0x9B file name" "$TMP/raw.json"
grep -Fq 'c\ufffds\u001be.jsonl"' "$TMP/raw.json" && ok || bad "json: the raw byte is not \\ufffd"
command -v jq >/dev/null 2>&1 && { jq -e .gpuguard_report "$TMP/raw.json" >/dev/null 2>&1 && ok || bad "json with a raw byte: not valid JSON"; }

# 3. Messages quoting input: a bad dump named with controls, a field value
# with CSI quoted in the error, a truncated dump's warning, usage errors.
BADN="$TMP/b$(printf '\302\233')d$(printf '\233').jsonl"
{ head -n 1 "$G/leak.jsonl"; printf '%s\n' '{"t":"request","api":"x","size":1,"dev":0,"tid":1,"stack":0,"outcome":"\u009b2J\u001b[31m\u0090"}'; } >"$BADN"
"$GG" report "$BADN" >/dev/null 2>"$TMP/bad.err"
rc=$?
[ "$rc" -eq 2 ] && grep -q 'unknown value "?2J?\[31m?"' "$TMP/bad.err" && ok || bad "an error quoting a value: exit $rc, $(cat "$TMP/bad.err")"
clean "error message" "$TMP/bad.err"
head -n 3 "$G/leak.jsonl" >"$BADN"
"$GG" report "$BADN" >/dev/null 2>"$TMP/warn.err"
grep -q "^gpuguard: warning: .*/b?d?.jsonl: " "$TMP/warn.err" && ok || bad "a warning naming the dump: $(cat "$TMP/warn.err")"
clean "warning message" "$TMP/warn.err"
"$GG" report "--x$(printf '\302\233\033')y" "$D" >/dev/null 2>"$TMP/usage.err"
clean "usage error" "$TMP/usage.err"
"$GG" report /nonexistent/"$(printf '\233\033')" 2>"$TMP/nf.err"
clean "missing file" "$TMP/nf.err"
"$GG" metrics --listen "$(printf '\302\233')1:80" 2>"$TMP/listen.err"
clean "--listen error" "$TMP/listen.err"

# 4. top and metrics: a process name with C1 (as UTF-8 and raw) and ESC.
"$MK" "$TMP/pod" limit=1Gi dev=0:cuda:00000000000000000000000000000001:1:2:3:4:5:6:7 \
	"proc=0:1:a$(printf '\302\233')b$(printf '\233')c$(printf '\033'):0:0=1" || bad "mkregion"
"$GG" top --once --region "$TMP/pod" >"$TMP/top.txt" 2>&1
clean "top" "$TMP/top.txt"
"$GG" metrics --region "$TMP/pod" >"$TMP/m.txt" 2>&1
clean "metrics" "$TMP/m.txt"
"$GG" top --once --region "$TMP/pod$(printf '\233')" >"$TMP/top2.txt" 2>&1
clean "top's error" "$TMP/top2.txt"

# 5. --html FILE and what may already be at FILE.
W="$TMP/w"
mkdir "$W"
# only_page DIR NAME...: DIR holds exactly NAME... (no temporary left).
only() {
	dir=$1
	shift
	want=$(printf '%s\n' "$@" | sort)
	got=$(ls -A "$dir" | sort)
	[ "$got" = "$want" ] && ok || bad "in $dir: '$(echo $got)', want '$(echo $want)'"
}
echo precious >"$W/victim"
ln -s "$W/victim" "$W/page.html"
"$GG" report --html "$W/page.html" "$D" 2>"$TMP/h.err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "page.html: is a symbolic link; not writing through it" "$TMP/h.err" && ok ||
	bad "--html onto a symlink: exit $rc, '$(cat "$TMP/h.err")'"
[ "$(cat "$W/victim")" = precious ] && [ -L "$W/page.html" ] && ok || bad "--html wrote through the planted symlink"
only "$W" page.html victim
rm "$W/page.html"
# A dangling symlink: following it would create its target.
ln -s "$W/created" "$W/page.html"
"$GG" report --html "$W/page.html" "$D" 2>/dev/null
rc=$?
[ "$rc" -eq 2 ] && [ ! -e "$W/created" ] && ok || bad "--html onto a dangling symlink: exit $rc, or it created the target"
rm "$W/page.html"
# A FIFO (opening it would block), a directory, a device.
mkfifo "$W/fifo"
timeout 10 "$GG" report --html "$W/fifo" "$D" 2>"$TMP/h.err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "fifo: exists and is not a regular file" "$TMP/h.err" && [ -p "$W/fifo" ] && ok ||
	bad "--html onto a FIFO: exit $rc, '$(cat "$TMP/h.err")'"
mkdir "$W/dir"
"$GG" report --html "$W/dir" "$D" 2>/dev/null
[ $? -eq 2 ] && [ -d "$W/dir" ] && ok || bad "--html onto a directory"
"$GG" report --html /dev/null "$D" 2>"$TMP/h.err"
[ $? -eq 2 ] && grep -q "not a regular file" "$TMP/h.err" && ok || bad "--html onto /dev/null: '$(cat "$TMP/h.err")'"
only "$W" dir fifo victim
rm -r "$W/fifo" "$W/dir"
# A hard link to another file: FILE is replaced, the other name keeps its
# contents.
ln "$W/victim" "$W/page.html"
"$GG" report --html "$W/page.html" "$D" 2>/dev/null && ok || bad "--html over a hard link"
[ "$(cat "$W/victim")" = precious ] && head -c 15 "$W/page.html" | grep -q '<!DOCTYPE html>' && ok ||
	bad "--html over a hard link changed the other name"
# A regular file is replaced; the mode is 0666 less the umask.
for m in 022:644 077:600 002:664; do
	rm -f "$W/page.html"
	(umask "${m%%:*}" && "$GG" report --html "$W/page.html" "$D") 2>/dev/null
	[ "$(stat -c %a "$W/page.html")" = "${m#*:}" ] && ok ||
		bad "--html under umask ${m%%:*}: mode $(stat -c %a "$W/page.html"), want ${m#*:}"
done
echo old >"$W/page.html"
"$GG" report --html "$W/page.html" "$D" 2>/dev/null && grep -q '</html>' "$W/page.html" && ok || bad "--html over a regular file"
only "$W" page.html victim
# A dump that cannot be read: FILE stays as it was, nothing left behind.
echo old >"$W/page.html"
"$GG" report --html "$W/page.html" "$G/bad_syntax.jsonl" 2>/dev/null
[ $? -eq 2 ] && [ "$(cat "$W/page.html")" = old ] && ok || bad "--html with a bad dump replaced FILE"
only "$W" page.html victim
# A directory that does not exist: one clear line.
"$GG" report --html "$W/none/page.html" "$D" 2>"$TMP/h.err"
[ $? -eq 2 ] && [ "$(wc -l <"$TMP/h.err")" -eq 1 ] && grep -q "none/page.html: cannot create a file beside it: No such file or directory" "$TMP/h.err" &&
	ok || bad "--html into a missing directory: '$(cat "$TMP/h.err")'"
# A relative name in the working directory.
(cd "$W" && "$GG" report --html rel.html "$D") 2>/dev/null && [ -f "$W/rel.html" ] && ok || bad "--html with a relative name"
only "$W" page.html rel.html victim

# Stopped mid-report (SIGTERM while it waits for the dump on a FIFO that
# we hold open and never write, given as its standard input: a FIFO named
# as a dump is refused, see report_inputs.sh): the temporary is removed,
# FILE is not created, the exit is by the signal.
mkfifo "$TMP/slow.jsonl"
"$GG" report --html "$W/stopped.html" /dev/stdin <"$TMP/slow.jsonl" 2>/dev/null &
sp=$!
exec 3>"$TMP/slow.jsonl"
i=0
while ! ls -A "$W" | grep -q '^\.stopped\.html\..*\.tmp$' && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
[ $i -lt 100 ] && ok || bad "no temporary appeared beside stopped.html"
kill -TERM "$sp"
wait "$sp"
rc=$?
exec 3>&-
[ "$rc" -eq 143 ] && ok || bad "report stopped by SIGTERM: exit $rc, want 143"
only "$W" page.html rel.html victim

finish
