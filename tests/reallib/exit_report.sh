#!/bin/sh
# gpuguard: the exit dump of a real-cudart program (shared and static
# cudart) and its report: the live allocation is charged to the program's own
# function, through cudart's frames. Run by tests/run.sh with the program
# directory in REALLIB_DIR.
# Env: GG_TEST_PRELOAD, GG_TEST_SIMDIR, GG_TEST_BUILD (tests/run.sh).
TOOL="$GG_TEST_BUILD/bin/gpuguard"
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in rl_cudart_shared rl_cudart_static; do
	d="$tmp/$n"
	mkdir -p "$d"
	LD_LIBRARY_PATH="$GG_TEST_SIMDIR" LD_PRELOAD="$GG_TEST_PRELOAD" GPUGUARD_LIMIT=2Gi SIMGPU_MEMORY=8Gi \
		GPUGUARD_DUMP_AT_EXIT=1 GPUGUARD_DUMP_DIR="$d" GPUGUARD_SHARED="$d/pod" "$REALLIB_DIR/$n" exit-dump
	rc=$?
	dump=$(ls "$d"/gpuguard-*.jsonl 2>/dev/null | head -n 1)
	if [ "$rc" -ne 0 ] || [ -z "$dump" ]; then
		echo "FAIL $n: exit $rc, dump: ${dump:-none}"
		failed=$((failed + 1))
		continue
	fi
	"$TOOL" report "$dump" >"$d/report.txt" 2>&1
	# one live allocation of 256Mi, named by its caller
	if grep -q 'rl_load_weights' "$d/report.txt" && grep -q '256' "$d/report.txt"; then
		echo "ok   $n: the exit dump's report names rl_load_weights"
		passed=$((passed + 1))
	else
		echo "FAIL $n: the report does not name rl_load_weights"
		sed 's/^/    /' "$d/report.txt" | head -n 40
		failed=$((failed + 1))
	fi
done
echo "harness: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
