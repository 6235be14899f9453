#!/bin/sh
# gpuguard: end to end on the simulated GPU: `gpuguard run` a program into
# its ceiling, then `gpuguard report` the dump the library wrote; and
# `gpuguard dump PID` on a live process. Checks that the analyzer reads what
# the recorder writes (the two only share include/gpuguard/dump.h).
ROOT=$(pwd)
B="${GG_TEST_BUILD:-$ROOT/build}"
GG="$B/bin/gpuguard"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() {
	failed=$((failed + 1))
	echo "FAIL $*"
}
export LD_LIBRARY_PATH="$B/sim"
export SIMGPU_MEMORY=16Gi
unset GPUGUARD_LIMIT LD_PRELOAD
# The library is put first in LD_PRELOAD by `gpuguard run`; a sanitizer
# runtime, where there is one, must come first instead.
[ -n "$SAN_RUNTIME" ] && export LD_PRELOAD="$SAN_RUNTIME" ASAN_OPTIONS="${ASAN_OPTIONS}:verify_asan_link_order=0"

# 1. A server that runs into its 4 GiB ceiling: the dump is reported.
mkdir "$TMP/d1"
"$GG" run --limit 4Gi --dump-dir "$TMP/d1" -- "$B/examples/kvcache" >"$TMP/run.log" 2>&1
dump=$(ls "$TMP"/d1/gpuguard-*.jsonl 2>/dev/null | head -n 1)
if [ -z "$dump" ]; then
	bad "gpuguard run: no dump in the dump directory"
	tail -n 5 "$TMP/run.log"
else
	ok
	if "$GG" report "$dump" >"$TMP/r.txt" 2>"$TMP/r.err" && ! grep -q . "$TMP/r.err"; then ok; else
		bad "report of a real dump failed:"
		cat "$TMP/r.err"
	fi
	grep -q "^  ceiling reached" "$TMP/r.txt" && ok || bad "real dump: no 'ceiling reached' diagnosis"
	grep -q "GPUGUARD_LIMIT=4Gi (environment)" "$TMP/r.txt" && ok || bad "real dump: configuration not shown"
	grep -q "kvcache" "$TMP/r.txt" && ok || bad "real dump: no call site in kvcache"
	"$GG" report --json "$dump" >"$TMP/r.json" && ok || bad "--json of a real dump"
	if command -v jq >/dev/null 2>&1; then
		[ "$(jq -r '.diagnoses[0].kind' "$TMP/r.json")" = ceiling_reached ] && ok || bad "--json: first diagnosis"
	fi
	"$GG" report --html "$TMP/r.html" "$dump" && ok || bad "--html of a real dump"
	"$GG" report --folded "$dump" | grep -q ' [0-9][0-9]*$' && ok || bad "--folded of a real dump"
fi

# 2. gpuguard dump PID on a live process under the library.
mkdir "$TMP/d2" "$TMP/bin"
if ${CC:-cc} -std=gnu11 -Iinclude -o "$TMP/bin/sleeper" tests/e2e/sleeper.c -L"$B/sim" -lcuda 2>"$TMP/cc.log"; then
	"$GG" run --limit 2Gi --dump-dir "$TMP/d2" -- "$TMP/bin/sleeper" 64 10 >"$TMP/sleeper.out" 2>&1 &
	pid=$!
	i=0
	while ! grep -q ready "$TMP/sleeper.out" && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	path=$("$GG" dump --timeout 5 "$pid")
	rc=$?
	if [ "$rc" -eq 0 ] && [ -f "$path" ]; then
		ok
		"$GG" report "$path" >"$TMP/s.txt" 2>&1 && grep -q "trigger: signal" "$TMP/s.txt" && ok ||
			bad "report of the signalled dump"
		grep -q "256.00 MiB live in 4 allocations" "$TMP/s.txt" && ok || bad "signalled dump: live allocations"
	else
		bad "gpuguard dump: exit $rc, printed '$path'"
		cat "$TMP/sleeper.out"
	fi
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
else
	bad "building tests/e2e/sleeper.c"
	cat "$TMP/cc.log"
fi

echo "harness: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
