#!/bin/sh
# gpuguard: a GPUGUARD_LIMIT list too long for the pod region's field is never
# shared cut short (issue 9, finding 5: `13=1024Mi` became a 1024-byte
# ceiling); each process says so, naming the variable, and keeps its whole
# ceiling as a per-process one.
. "$(dirname "$0")/lib.sh"
L="0=4Gi"
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14; do L="$L,$i=4096Mi"; done
L="$L,15=1024Mi,*=4Gi" # 152 characters; the region holds 127
run() {
	env LD_PRELOAD="$GG_TEST_PRELOAD" LD_LIBRARY_PATH="$GG_TEST_SIMDIR" GPUGUARD_SHARED="$TMP/pod" \
		GPUGUARD_LIMIT="$L" "$GG_TEST_BUILD/examples/kvcache" >"$TMP/out.$1" 2>&1
}
run 1
run 2
for i in 1 2; do
	if grep -q "GPUGUARD_LIMIT is 152 characters, too long to share (at most 127)" "$TMP/out.$i"; then
		ok
	else
		bad "long-limit-message: process $i did not refuse to share the long GPUGUARD_LIMIT:"
		head -3 "$TMP/out.$i" | sed 's/^/    /'
	fi
	# its own ceiling is whole: device 0 reports 4 GiB, not a cut list's
	if grep -q 'cuMemGetInfo says total 4.00 GiB' "$TMP/out.$i"; then
		ok
	else
		bad "long-limit-ceiling: process $i did not see its 4 GiB ceiling:"
		grep cuMemGetInfo "$TMP/out.$i" | sed 's/^/    /'
	fi
done
finish
