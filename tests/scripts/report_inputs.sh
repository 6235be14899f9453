#!/bin/sh
# gpuguard: every input path of `gpuguard report` is opened without hanging
# and only as a regular file (issue 25, finding 8: `mkfifo f; gpuguard report
# f` never returned). A FIFO, a directory, a device and a socket-like special
# file are refused with one line and exit code 2, within a bound; a
# symbolic link to a dump is followed, as a user expects.
ROOT=$(pwd)
B="${GG_TEST_BUILD:-$ROOT/build}"
GG="$B/bin/gpuguard"
. "$(dirname "$0")/lib.sh"
DUMP="$ROOT/tests/golden/ceiling_steady.jsonl"

# refused NAME WANT ARGS...: report ARGS exits 2 within 10 s, saying WANT.
refused() {
	name=$1 want=$2
	shift 2
	timeout -k 2 10 "$GG" report "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
	rc=$?
	if [ "$rc" -eq 2 ] && grep -q "$want" "$TMP/err" && [ "$(wc -l <"$TMP/err")" -eq 1 ]; then
		ok
	else
		bad "report-input-$name: exit $rc (124: it hung), wanted 2 and one line with '$want'" "$TMP/err"
	fi
}

mkfifo "$TMP/fifo"
refused fifo "fifo: not a regular file (a FIFO)" "$TMP/fifo"
refused fifo-json "not a regular file (a FIFO)" --json "$TMP/fifo"
refused fifo-second "not a regular file (a FIFO)" "$DUMP" "$TMP/fifo"
refused fifo-diff "not a regular file (a FIFO)" --diff "$DUMP" "$TMP/fifo"
refused fifo-html "not a regular file (a FIFO)" --html "$TMP/page.html" "$TMP/fifo"
[ ! -e "$TMP/page.html" ] && ok || bad "report-input-fifo-html: a page was left for an input that was refused"
mkdir "$TMP/dir"
refused directory "not a regular file (a directory)" "$TMP/dir"
refused device "not a regular file (a device)" /dev/null
refused missing "No such file" "$TMP/none"
ln -s "$DUMP" "$TMP/link.jsonl"
if timeout -k 2 10 "$GG" report "$TMP/link.jsonl" >"$TMP/out" 2>"$TMP/err" && grep -q "ceiling reached" "$TMP/out"; then
	ok
else
	bad "report-input-symlink: a symbolic link to a dump was not read" "$TMP/err"
fi
finish
