#!/bin/sh
# gpuguard: the pod region counts what metrics export beside the books
# (issue 13): requests the driver refused below the ceiling (the card was
# full) and the dumps the pod's processes wrote.
. "$(dirname "$0")/lib.sh"
mkdir "$TMP/dumps"
# A member on a 1 GiB card under a 4 GiB ceiling, kept alive while the
# region is read (a region nobody is attached to starts afresh): 2000 MiB
# is refused by the driver, which writes a dump.
mkfifo "$TMP/in"
: >"$TMP/out"
env LD_PRELOAD="$GG_TEST_PRELOAD" LD_LIBRARY_PATH="$GG_TEST_SIMDIR" SIMGPU_MEMORY=1Gi GPUGUARD_SHARED="$TMP/pod" \
	GPUGUARD_LIMIT=4Gi GPUGUARD_CONTEXT_RESERVE=0 GPUGUARD_DUMP_DIR="$TMP/dumps" \
	"$GG_TEST_BUILD/tests/tools/podclient" <"$TMP/in" >"$TMP/out" 2>&1 &
pid=$!
exec 3>"$TMP/in"
echo "a 2000" >&3
i=0
while { [ "$(wc -l <"$TMP/out")" -lt 3 ] || [ -z "$(ls "$TMP/dumps")" ]; } && [ $i -lt 200 ]; do
	sleep 0.05
	i=$((i + 1))
done
sleep 0.2 # the dump's writer counts it after its rename
"$GG_TEST_BUILD/bin/gpuguard" metrics --region "$TMP/pod" >"$TMP/m" 2>&1
echo q >&3
exec 3>&-
wait $pid
check() { # WHAT LINE-REGEX
	if grep -q "$2" "$TMP/m"; then
		ok
	else
		bad "pod-counters-$1: no line matching $2"
		grep -v '^#' "$TMP/m" | head -8 | sed 's/^/    /'
		sed 's/^/    /' "$TMP/out" | head -6
	fi
}
check driver-oom '^gpuguard_device_driver_oom_total{kind="CUDA",.*} 1$'
check dumps "^gpuguard_dumps_written_total 1$"
finish
