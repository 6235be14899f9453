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
echo "harness: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
