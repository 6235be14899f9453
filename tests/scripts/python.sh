#!/bin/sh
# gpuguard: Python frames in the stacks (issue 27), on every installed
# CPython 3.9-3.13 (the pyenv builds, found at fixed paths, no shims) and
# Debian's /usr/bin/python3.11 (the interpreter linked into the executable):
#  1. the header comparison: tests/python/offsets.c compiled against each
#     version's internal headers agrees with interpose/pystack_layout.h
#     (and, on 3.13, with the _Py_DebugOffsets the interpreter publishes);
#  2. tests/python/serve.py allocates from two functions into a 1Gi ceiling,
#     through ctypes.CDLL (GIL released) and ctypes.PyDLL (GIL held), from
#     the main thread and a threading.Thread: the report names both
#     functions with their file:line as two call sites, in text, --json,
#     --folded and HTML, and the --torch-snapshot pickle holds the fields
#     torch documents (tests/python/check_snapshot.py, with that Python);
#  3. hostile stacks (tests/python/hostile.py): generator, coroutine, a
#     1,000-deep recursion cut at the depth limit, a sub-interpreter, an
#     allocation while finalising, 8 threads at once: no crash, and the
#     frames named;
#  4. tests/python/embed.c: libpython dlopen'ed after our init, used before
#     Py_Initialize, from a native thread with no Python state, and after
#     Py_FinalizeEx.
# A version that is not installed is skipped by name.
ROOT=$(pwd)
B="${GG_TEST_BUILD:-$ROOT/build}"
GG="$B/bin/gpuguard"
CC="${CC:-cc}"
. "$(dirname "$0")/lib.sh"
export LD_LIBRARY_PATH="$B/sim"
export SIMGPU_MEMORY=16Gi
unset GPUGUARD_LIMIT LD_PRELOAD GPUGUARD_STACK_DEPTH
[ -n "$SAN_RUNTIME" ] && export LD_PRELOAD="$SAN_RUNTIME" ASAN_OPTIONS="${ASAN_OPTIONS}:verify_asan_link_order=0"
PYENV="${GG_PYENV_ROOT:-${PYENV_ROOT:-/root/.pyenv}}"
[ -d "$PYENV/versions" ] || PYENV="$HOME/.pyenv"

# The interpreters: "name python libpython include-dir".
: >"$TMP/pythons"
for m in 9 10 11 12 13; do
	d=$(ls -d "$PYENV"/versions/3.$m.* 2>/dev/null | grep -v 't$' | tail -n 1)
	if [ -n "$d" ] && [ -x "$d/bin/python3.$m" ] && [ -f "$d/lib/libpython3.$m.so.1.0" ]; then
		echo "3.$m $d/bin/python3.$m $d/lib/libpython3.$m.so.1.0 $d/include/python3.$m $d/lib" >>"$TMP/pythons"
	else
		skip "CPython 3.$m: not installed under $PYENV/versions"
	fi
done
if [ -x /usr/bin/python3.11 ] && [ -f /usr/include/python3.11/internal/pycore_frame.h ]; then
	echo "debian-3.11 /usr/bin/python3.11 $(ls /usr/lib/*/libpython3.11.so.1.0 2>/dev/null | head -n 1) /usr/include/python3.11 -" >>"$TMP/pythons"
else
	skip "Debian's python3.11 (with its headers): not installed"
fi

# Each run its own pod region, so no other process (another test, another
# checkout's run) shares its budget.
nreg=0
region() {
	nreg=$((nreg + 1))
	GPUGUARD_SHARED="$TMP/region-$nreg"
	export GPUGUARD_SHARED
}

line_of() { grep -n "$1" "$ROOT/tests/python/serve.py" | head -n 1 | cut -d: -f1; }
LW=$(line_of LINE_WEIGHTS)
LK=$(line_of LINE_KV)

# Frame pointers kept: the TSan build walks them (stack.c), and -O1 omits
# them on x86-64, which sent the walk from native_alloc into the stack.
"$CC" -O1 -g -fno-omit-frame-pointer -rdynamic -o "$TMP/embed" "$ROOT/tests/python/embed.c" -L"$B/sim" -lcuda -ldl -lpthread ||
	bad "tests/python/embed.c does not compile"

while read -r name py lib inc libdir; do
	FAIL_PREFIX="$name: "
	m=${inc##*python}
	# 1. The header comparison.
	if [ "$libdir" = - ]; then link="-lpython$m"; else link="-L$libdir -lpython$m -Wl,-rpath,$libdir"; fi
	# shellcheck disable=SC2086
	if "$CC" -o "$TMP/off" "$ROOT/tests/python/offsets.c" -I"$inc" -I"$inc/internal" $link 2>"$TMP/cc.err"; then
		if "$TMP/off" >"$TMP/off.out" 2>&1; then ok; else
			bad "the layout row differs from the $name headers:" "$TMP/off.out"
			grep DIFFERENT "$TMP/off.out"
		fi
	else
		bad "tests/python/offsets.c does not compile against the $name headers" "$TMP/cc.err"
	fi
	# 2. Two call sites, four ways.
	for how in "cdll main" "pydll main" "cdll thread" "pydll thread"; do
		FAIL_PREFIX="$name $how: "
		rm -rf "$TMP/d" && mkdir "$TMP/d"
		region
		# shellcheck disable=SC2086
		timeout 120 "$GG" run --limit 1Gi --dump-dir "$TMP/d" -- "$py" "$ROOT/tests/python/serve.py" $how \
			>"$TMP/run.log" 2>&1
		rc=$?
		dump=$(ls "$TMP"/d/gpuguard-*.jsonl 2>/dev/null | head -n 1)
		if [ $rc -ne 0 ] || [ -z "$dump" ]; then
			bad "serve.py exited $rc, dump '${dump}'" "$TMP/run.log"
			continue
		fi
		"$GG" report "$dump" >"$TMP/r.txt" 2>&1 || bad "report failed" "$TMP/r.txt"
		grep -q "call site #1 .*serve.py:$LK in grow_kv_cache" "$TMP/r.txt" && ok ||
			bad "no call site #1 at serve.py:$LK in grow_kv_cache" "$TMP/r.txt"
		grep -q "call site #2 .*serve.py:$LW in load_weights" "$TMP/r.txt" && ok ||
			bad "no call site #2 at serve.py:$LW in load_weights"
		"$GG" report --folded "$dump" >"$TMP/f.txt" 2>&1
		[ "$(grep -c "serve.py:$LK in grow_kv_cache" "$TMP/f.txt")" -ge 1 ] &&
			grep -q "serve.py:$LW in load_weights" "$TMP/f.txt" && ok || bad "--folded lacks the lines" "$TMP/f.txt"
		"$GG" report --json "$dump" >"$TMP/r.json" 2>&1
		grep -q "\"py\":\"[^\"]*tests/python/serve.py\",\"l\":$LK" "$TMP/r.json" && ok ||
			bad "--json lacks py and l of the KV frame"
		"$GG" report --html "$TMP/r.html" "$dump" >/dev/null 2>&1
		grep -q "serve.py:$LK in grow_kv_cache" "$TMP/r.html" && ok || bad "HTML lacks the KV line"
		# The torch-snapshot pickle, read by this interpreter's pickle.
		if "$GG" report --torch-snapshot "$TMP/snap.pickle" "$dump" >"$TMP/snap.err" 2>&1 &&
			"$py" "$ROOT/tests/python/check_snapshot.py" "$TMP/snap.pickle" "$dump" "$LK" >"$TMP/snap.out" 2>&1; then
			ok
		else
			bad "--torch-snapshot" "$TMP/snap.err" "$TMP/snap.out"
		fi
	done
	# 3. Hostile stacks.
	for mode in gen coro deep subinterp finalize threads reuse; do
		FAIL_PREFIX="$name hostile $mode: "
		rm -rf "$TMP/d" && mkdir "$TMP/d"
		region
		GPUGUARD_DUMP_AT_EXIT=1 GPUGUARD_STACK_DEPTH=64 timeout 120 "$GG" run --dump-dir "$TMP/d" -- \
			"$py" "$ROOT/tests/python/hostile.py" $mode >"$TMP/run.log" 2>&1
		rc=$?
		dump=$(ls "$TMP"/d/gpuguard-*.jsonl 2>/dev/null | head -n 1)
		if [ $rc -ne 0 ] || [ -z "$dump" ] || ! grep -q "^done $mode" "$TMP/run.log"; then
			bad "exited $rc, dump '${dump}'" "$TMP/run.log"
			continue
		fi
		"$GG" report --folded "$dump" >"$TMP/f.txt" 2>&1 || bad "report failed" "$TMP/f.txt"
		case $mode in
		gen) want="in gen_alloc;.*hostile.py:[0-9]* in alloc" ;;
		coro) want="in coro_alloc;.*hostile.py:[0-9]* in alloc" ;;
		threads) want="in threaded_alloc;.*hostile.py:[0-9]* in alloc" ;;
		deep) want="in recurse;.*hostile.py:[0-9]* in recurse;.*hostile.py:[0-9]* in alloc" ;;
		*) want="hostile.py:[0-9]* in alloc" ;;
		esac
		grep -q "$want" "$TMP/f.txt" && ok || bad "no '$want' in the stacks" "$TMP/f.txt"
		if [ $mode = threads ]; then
			# Every one of the 400 blocks under threaded_alloc.
			sum=$(grep "in threaded_alloc;" "$TMP/f.txt" | awk '{ s += $NF } END { print s + 0 }')
			[ "$sum" = 419430400 ] && ok || bad "threaded_alloc holds $sum bytes, not 400 MiB" "$TMP/f.txt"
		fi
		if [ $mode = reuse ]; then
			# beta's code object at the address alpha's had: each
			# block under its own function, none under the other's.
			if grep -q "^reused" "$TMP/run.log"; then
				for fn in alpha beta; do
					n=$(grep -c "reuse_$fn.py:2 in $fn;.* 1048576\$" "$TMP/f.txt")
					[ "$n" = 1 ] && ok || bad "$n blocks under $fn, not 1 (a stale name?)" "$TMP/f.txt"
				done
			else
				skip "$name hostile reuse: no code object was made at a freed one's address"
			fi
		fi
		if [ $mode = deep ]; then
			# Cut at the depth limit (64 frames), not walked to 1,000.
			n=$(grep "in recurse" "$TMP/f.txt" | head -n 1 | awk '{ $NF = ""; print }' | tr ';' '\n' | grep -c .)
			[ "$n" -ge 40 ] && [ "$n" -le 64 ] && ok || bad "the deep stack has $n frames, not 40 to 64"
		fi
	done
	# 4. Embedded, loaded late.
	FAIL_PREFIX="$name embedded: "
	rm -rf "$TMP/d" && mkdir "$TMP/d"
	region
	GPUGUARD_DUMP_AT_EXIT=1 timeout 120 "$GG" run --dump-dir "$TMP/d" -- "$TMP/embed" "$lib" >"$TMP/run.log" 2>&1
	rc=$?
	dump=$(ls "$TMP"/d/gpuguard-*.jsonl 2>/dev/null | head -n 1)
	if [ $rc -ne 0 ] || [ -z "$dump" ]; then
		bad "exited $rc, dump '${dump}'" "$TMP/run.log"
		continue
	fi
	"$GG" report --folded "$dump" >"$TMP/f.txt" 2>&1
	grep -q "<string>:[0-9]* in embedded_alloc" "$TMP/f.txt" && ok || bad "no Python frame in the embedded stack" "$TMP/f.txt"
	grep -q "native_thread_alloc;native_alloc" "$TMP/f.txt" && ok || bad "the native thread lost its stack" "$TMP/f.txt"
	[ "$(grep -c "main;native_alloc 1048576" "$TMP/f.txt")" -ge 1 ] && ok || bad "no native stack outside Python" "$TMP/f.txt"
done <"$TMP/pythons"
FAIL_PREFIX=
finish
