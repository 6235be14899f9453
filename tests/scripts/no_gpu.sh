#!/bin/sh
# gpuguard: a process that never touches a GPU is unaffected by the preload:
# same output, same exit status, nothing on stderr, also with a ceiling set.
passed=0
failed=0
check() {
	name=$1
	shift
	want_out=$("$@" 2>/dev/null)
	want_rc=$?
	got_out=$(env LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_LIMIT=4Gi "$@" 2>/tmp/gg-nogpu-err.$$)
	got_rc=$?
	err=$(cat /tmp/gg-nogpu-err.$$)
	rm -f /tmp/gg-nogpu-err.$$
	if [ "$want_out" = "$got_out" ] && [ "$want_rc" = "$got_rc" ] && [ -z "$err" ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL $name: rc $want_rc vs $got_rc, stderr: $err"
	fi
}
check ls ls -1 /
check sh-exit-status sh -c 'exit 3'
check sh-pipeline sh -c 'echo hello | tr a-z A-Z'
check sort sh -c 'printf "b\na\n" | sort'
# Nothing loaded at start-up (issue 10, finding 13): libunwind and liblzma,
# which the dump's stacks use, come in at the first governed allocation only.
maps=$(env LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_LIMIT=4Gi cat /proc/self/maps)
if echo "$maps" | grep -q libgpuguard && ! echo "$maps" | grep -q -E 'libunwind|liblzma'; then
	passed=$((passed + 1))
else
	failed=$((failed + 1))
	echo "FAIL nothing-loaded: a process without a GPU has libunwind or liblzma mapped (or no libgpuguard):"
	echo "$maps" | grep -E 'libunwind|liblzma|libgpuguard' | sed 's/^/    /'
fi
# No exit dump from a process that never reached a GPU (issue 10, finding
# 12), while one that did still writes its leak report.
dir=$(mktemp -d)
env LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_DUMP_AT_EXIT=1 GPUGUARD_DUMP_DIR="$dir" sh -c 'ls / >/dev/null; cat /dev/null'
n=$(find "$dir" -type f | wc -l)
if [ "$n" -eq 0 ]; then
	passed=$((passed + 1))
else
	failed=$((failed + 1))
	echo "FAIL exit-dump-no-gpu: $n files written by processes without a GPU:"
	find "$dir" -type f | sed 's/^/    /'
fi
rm -rf "$dir"
dir=$(mktemp -d)
env LD_PRELOAD="$GG_TEST_PRELOAD" LD_LIBRARY_PATH="$GG_TEST_SIMDIR" GPUGUARD_DUMP_AT_EXIT=1 GPUGUARD_DUMP_DIR="$dir" \
	"$GG_TEST_BUILD/examples/kvcache" >/dev/null 2>&1
n=$(find "$dir" -type f -name '*.json*' | wc -l)
if [ "$n" -ge 1 ]; then
	passed=$((passed + 1))
else
	failed=$((failed + 1))
	echo "FAIL exit-dump-gpu: a process that used the GPU wrote no exit dump in $dir ($(ls "$dir"))"
fi
rm -rf "$dir"
echo "harness: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
