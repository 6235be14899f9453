#!/bin/sh
# gpuguard: the whole suite, plainly and under AddressSanitizer,
# UndefinedBehaviorSanitizer and ThreadSanitizer (each its own build in
# build/san-<name>/), then the unit, simulator and preload tests cross-built
# for aarch64 and run under qemu-user (tests/aarch64.sh, build/aarch64/),
# closing on one "N passed, N failed" line for all five and the format check.
MAKE=${MAKE:-make}
total_p=0
total_f=0
total_s=0

# count OUTPUT: adds a variant's closing "N passed, N failed[, N skipped]"
# line to the totals; no such line is one failure.
count() {
	last=$(echo "$1" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
	p=$(echo "$last" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
	f=$(echo "$last" | sed -n 's/^[0-9]* passed, \([0-9]*\) failed.*/\1/p')
	s=$(echo "$last" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
	[ -z "$last" ] && f=1
	total_p=$((total_p + ${p:-0}))
	total_f=$((total_f + ${f:-0}))
	total_s=$((total_s + ${s:-0}))
}

# The format check first (make format-check, clang-format's --dry-run of
# every C file): one test, passed or failed, in the totals.
echo "=== format"
if out=$($MAKE --no-print-directory -s format-check 2>&1); then
	echo "ok   format-check: every C file is as clang-format writes it"
	total_p=$((total_p + 1))
else
	echo "$out" | head -n 40
	echo "FAIL format-check: run make format"
	total_f=$((total_f + 1))
fi

for san in "" address undefined thread; do
	label=${san:-plain}
	echo "=== $label"
	if ! $MAKE --no-print-directory -s all SAN=$san >/tmp/gpuguard-build-$$.log 2>&1; then
		cat /tmp/gpuguard-build-$$.log
		echo "build failed: $label"
		total_f=$((total_f + 1))
		continue
	fi
	out=$($MAKE --no-print-directory -s check SAN=$san 2>&1)
	echo "$out" | grep -v '^make'
	count "$out"
done
rm -f /tmp/gpuguard-build-$$.log

out=$(MAKE=$MAKE sh tests/aarch64.sh 2>&1)
echo "$out" | grep -v '^make'
count "$out"

echo
echo "all variants (format check, plain, address, undefined, thread, aarch64):"
if [ "$total_s" -gt 0 ]; then
	echo "$total_p passed, $total_f failed, $total_s skipped"
else
	echo "$total_p passed, $total_f failed"
fi
[ "$total_f" -eq 0 ]
