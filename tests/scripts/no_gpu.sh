#!/bin/sh
# gpuguard: a process that never touches a GPU is unaffected by the preload:
# same output, same exit status, nothing on stderr, also with a ceiling set.
. "$(dirname "$0")/lib.sh"
# check NAME [VAR=value...] -- COMMAND...: COMMAND's output, status and
# silence on stderr under the preload with those options (GPUGUARD_LIMIT=4Gi
# when none are given).
check() {
	name=$1
	shift
	opts=
	case " $* " in *" -- "*)
		while [ "$1" != -- ]; do
			opts="$opts $1"
			shift
		done
		shift ;;
	esac
	[ -n "$opts" ] || opts=GPUGUARD_LIMIT=4Gi
	want_out=$("$@" 2>/dev/null)
	want_rc=$?
	# shellcheck disable=SC2086 # opts is a list of words
	got_out=$(env LD_PRELOAD="$GG_TEST_PRELOAD" $opts "$@" 2>/tmp/gg-nogpu-err.$$)
	got_rc=$?
	err=$(cat /tmp/gg-nogpu-err.$$)
	rm -f /tmp/gg-nogpu-err.$$
	if [ "$want_out" = "$got_out" ] && [ "$want_rc" = "$got_rc" ] && [ -z "$err" ]; then
		ok
	else
		bad "$name: rc $want_rc vs $got_rc, stderr: $err"
	fi
}
check ls ls -1 /
check sh-exit-status sh -c 'exit 3'
check sh-pipeline sh -c 'echo hello | tr a-z A-Z'
check sort sh -c 'printf "b\na\n" | sort'
# Nothing printed without a GPU call (issue 10, finding 14): a bad value is
# reported at the first GPU call, not by every shell and probe of the
# container; nor is the verbose configuration.
check bad-limit-true GPUGUARD_LIMIT=20GB -- true
check bad-limit-ls GPUGUARD_LIMIT=20GB -- ls -1 /
check bad-values-sh GPUGUARD_LIMIT=20GB GPUGUARD_ON_LIMIT=retry GPUGUARD_TABLE_SLOTS=lots -- sh -c 'echo hi; exit 4'
check verbose-true GPUGUARD_VERBOSE=1 GPUGUARD_LIMIT=4Gi -- true
# ... while a process that reaches the GPU hears it once, at its first
# call, and the bad ceiling fails closed (refusals counted in its books).
out=$(env LD_PRELOAD="$GG_TEST_PRELOAD" LD_LIBRARY_PATH="$GG_TEST_SIMDIR" GPUGUARD_LIMIT=20GB GPUGUARD_SCOPE=process \
	"$GG_TEST_BUILD/examples/kvcache" 2>/tmp/gg-nogpu-err.$$)
err=$(cat /tmp/gg-nogpu-err.$$)
rm -f /tmp/gg-nogpu-err.$$
n=$(printf '%s\n' "$err" | grep -c 'GPUGUARD_LIMIT="20GB" is not valid')
if [ "$n" -eq 1 ] && printf '%s\n' "$out" | grep -q 'do not fit: CUDA_ERROR_OUT_OF_MEMORY'; then
	ok
else
	bad "bad-limit-gpu: wanted the message once and a refusal, got $n messages:"
	printf '%s\n%s\n' "$err" "$out" | head -8 | sed 's/^/    /'
fi
# Nothing loaded at start-up (issue 10, finding 13): libunwind and liblzma,
# which the dump's stacks use, come in at the first governed allocation only.
maps=$(env LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_LIMIT=4Gi cat /proc/self/maps)
if echo "$maps" | grep -q libgpuguard && ! echo "$maps" | grep -q -E 'libunwind|liblzma'; then
	ok
else
	bad "nothing-loaded: a process without a GPU has libunwind or liblzma mapped (or no libgpuguard):"
	echo "$maps" | grep -E 'libunwind|liblzma|libgpuguard' | sed 's/^/    /'
fi
# No exit dump from a process that never reached a GPU (issue 10, finding
# 12), while one that did still writes its leak report.
dir=$(mktemp -d)
env LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_DUMP_AT_EXIT=1 GPUGUARD_DUMP_DIR="$dir" sh -c 'ls / >/dev/null; cat /dev/null'
n=$(find "$dir" -type f | wc -l)
if [ "$n" -eq 0 ]; then
	ok
else
	bad "exit-dump-no-gpu: $n files written by processes without a GPU:"
	find "$dir" -type f | sed 's/^/    /'
fi
rm -rf "$dir"
dir=$(mktemp -d)
env LD_PRELOAD="$GG_TEST_PRELOAD" LD_LIBRARY_PATH="$GG_TEST_SIMDIR" GPUGUARD_DUMP_AT_EXIT=1 GPUGUARD_DUMP_DIR="$dir" \
	"$GG_TEST_BUILD/examples/kvcache" >/dev/null 2>&1
n=$(find "$dir" -type f -name '*.json*' | wc -l)
if [ "$n" -ge 1 ]; then
	ok
else
	bad "exit-dump-gpu: a process that used the GPU wrote no exit dump in $dir ($(ls "$dir"))"
fi
rm -rf "$dir"
finish
