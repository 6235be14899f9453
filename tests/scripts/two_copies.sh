#!/bin/sh
# gpuguard: one governing copy per process (issue 9, finding 7). A second
# copy of the library, preloaded beside the first or dlopened by a plugin,
# finds the first and stays inert: nothing is charged twice, it says so
# once, and unloading it leaves no handler behind (the old copy's dump
# handler stayed installed and the next dump signal crashed the process).
. "$(dirname "$0")/lib.sh"
mkdir "$TMP/a" "$TMP/b" "$TMP/dumps"
cp "$GG_TEST_LIB" "$TMP/a/libgpuguard.so"
cp "$GG_TEST_LIB" "$TMP/b/libgpuguard.so"
CLIENT="$GG_TEST_BUILD/tests/tools/podclient"
# The sanitizer runtime, where there is one, stays first in the preload.
RUNTIME=${GG_TEST_PRELOAD%"$GG_TEST_LIB"}
client() { # PRELOAD: a pod member with a 1 GiB ceiling (charged twice, the pod would see it)
	exec env LD_PRELOAD="$1" LD_LIBRARY_PATH="$GG_TEST_SIMDIR" GPUGUARD_SHARED="$TMP/pod" GPUGUARD_LIMIT=1Gi \
		GPUGUARD_CONTEXT_RESERVE=0 GPUGUARD_DUMP_DIR="$TMP/dumps" "$CLIENT"
}
check() { # NAME CONDITION-RESULT FILE
	if [ "$2" = yes ]; then
		ok
	else
		bad "$1"
		sed 's/^/    /' "$3" | head -8
	fi
}
yes_if() { if "$@"; then echo yes; else echo no; fi; }

# Preloaded twice: 600 MiB is granted once (charged twice it would not fit),
# a second 600 is refused, and free says 424 MiB.
printf 'a 600\na 600\ni\nq\n' | client "${RUNTIME}$TMP/a/libgpuguard.so:$TMP/b/libgpuguard.so" >"$TMP/two.out" 2>"$TMP/two.err"
got=$(sed -n '2,4p' "$TMP/two.out" | tr '\n' ',')
check "two-preloads-books: wanted ok,refused,free 424 MiB; got $got" \
	"$(yes_if [ "$got" = "alloc ok,alloc refused 2,info 444596224 1073741824," ])" "$TMP/two.out"
n=$(grep -c "two copies of libgpuguard are loaded: $TMP/a/libgpuguard.so governs this process; this copy ($TMP/b/libgpuguard.so)" "$TMP/two.err")
check "two-preloads-said: the second copy said so $n times, wanted once" "$(yes_if [ "$n" -eq 1 ])" "$TMP/two.err"

# Two copies in a process that never reaches a GPU: nothing printed (the
# inert copy speaks at the first call through it, issue 10, finding 14).
env LD_PRELOAD="${RUNTIME}$TMP/a/libgpuguard.so:$TMP/b/libgpuguard.so" GPUGUARD_SHARED="$TMP/pod" true >"$TMP/quiet.out" 2>&1
check "two-preloads-quiet: a process without a GPU printed something" "$(yes_if [ ! -s "$TMP/quiet.out" ])" "$TMP/quiet.out"

# A plugin's own copy, dlopened RTLD_GLOBAL before the first allocation
# (so the preload's lookup of the driver behind it finds the copy), then
# unloaded: nothing was charged twice, the dump signal still reaches the
# preload, which writes a dump, and the process lives.
mkfifo "$TMP/in"
: >"$TMP/plugin.out"
client "$GG_TEST_PRELOAD" <"$TMP/in" >"$TMP/plugin.out" 2>"$TMP/plugin.err" &
pid=$!
exec 3>"$TMP/in"
printf 'g %s\na 600\na 600\nu\n' "$TMP/b/libgpuguard.so" >&3
i=0
while [ "$(wc -l <"$TMP/plugin.out")" -lt 5 ] && [ $i -lt 200 ]; do
	sleep 0.05
	i=$((i + 1))
done
kill -USR2 $pid 2>/dev/null
i=0
while [ -z "$(ls "$TMP/dumps")" ] && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
printf 'i\nq\n' >&3
exec 3>&-
wait $pid
rc=$?
got=$(sed -n '2,6p' "$TMP/plugin.out" | tr '\n' ',')
check "plugin-books: wanted load ok,ok,refused,unload ok,free 424 MiB; got $got" \
	"$(yes_if [ "$got" = "load ok,alloc ok,alloc refused 2,unload ok,info 444596224 1073741824," ])" "$TMP/plugin.out"
check "plugin-alive: after the plugin's copy was unloaded, the dump signal ended the process ($rc)" \
	"$(yes_if [ $rc -eq 0 ])" "$TMP/plugin.err"
check "plugin-dump: the preload wrote no dump for the signal" "$(yes_if [ -n "$(ls "$TMP/dumps")" ])" "$TMP/plugin.err"
n=$(grep -c "two copies of libgpuguard are loaded" "$TMP/plugin.err")
# it speaks only if a call passes through it (here the preload's calls
# reach the driver without it): at most once
check "plugin-said: the plugin's copy said so $n times, wanted at most once" "$(yes_if [ "$n" -le 1 ])" "$TMP/plugin.err"
finish
