# gpuguard: what the shell suites share, sourced (never run by tests/run.sh:
# it prints no harness line of its own). Sets passed, failed and skipped to 0
# and TMP to a fresh directory that goes at exit; a script with more to undo
# (servers to stop, a mount) defines on_exit, which runs first. Each script
# ends with finish, whose "harness: N passed, N failed[, N skipped]" line
# tests/run.sh parses.
passed=0
failed=0
skipped=0
TMP=$(mktemp -d)
on_exit() { :; }
trap 'on_exit; rm -rf "$TMP"' EXIT

ok() { passed=$((passed + 1)); }

# bad MESSAGE [FILE...]: one failure, its message after FAIL and $FAIL_PREFIX,
# then the first $BAD_LINES (5) lines of each file given, indented.
bad() {
	failed=$((failed + 1))
	echo "FAIL ${FAIL_PREFIX:-}$1"
	shift
	for f in "$@"; do
		[ -n "$f" ] && sed 's/^/    /' "$f" | head -n "${BAD_LINES:-5}"
	done
	return 0
}

# skip WHY: a check this machine cannot make, counted and said.
skip() {
	skipped=$((skipped + 1))
	echo "skip $*"
}

# lines FILE N: waits (10 s at most) until FILE has N lines.
lines() {
	i=0
	while [ "$(wc -l <"$1" 2>/dev/null || echo 0)" -lt "$2" ] && [ $i -lt 200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
}

# wait_file FILE PATTERN [SECONDS]: up to SECONDS (5) for a line matching
# PATTERN in FILE; the status says whether one came.
wait_file() {
	i=0
	while ! grep -q "$2" "$1" 2>/dev/null && [ $i -lt $((${3:-5} * 20)) ]; do
		sleep 0.05
		i=$((i + 1))
	done
	grep -q "$2" "$1" 2>/dev/null
}

# ok_lines FILE [PREFIX]: a checker's output, each "ok ..." line a check
# passed, each other line one failed (said with PREFIX before it).
ok_lines() {
	while IFS= read -r l; do
		case $l in
		ok\ *) ok ;;
		*) bad "${2:-}$l" ;;
		esac
	done <"$1"
}

# check_rc WANT CMD...: CMD (its output dropped) must exit WANT.
check_rc() {
	want=$1
	shift
	"$@" >/dev/null 2>&1
	got=$?
	[ "$got" -eq "$want" ] && ok || bad "$*: exit $got, want $want"
}

# The harness line, then exit 0 only if nothing failed.
finish() {
	if [ "$skipped" -gt 0 ]; then
		echo "harness: $passed passed, $failed failed, $skipped skipped"
	else
		echo "harness: $passed passed, $failed failed"
	fi
	[ "$failed" -eq 0 ]
	exit
}
