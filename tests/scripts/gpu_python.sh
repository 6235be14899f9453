#!/bin/sh
# gpuguard: what make check-gpu's Python checks (tests/gpu/*.py) can be held
# to on a machine with no GPU. They run only where a card is, so a mistake in
# them shows first on the card: torch_check.py's hand-typed copy of struct
# gpuguard_device_stats went stale when the struct grew, and on the first
# real GPU the library wrote 16 bytes past the Python object, which crashed
# every configuration after its refusal. Here:
#   1. every script compiles;
#   2. the layout gg_torch.stats_fields() reads from include/gpuguard.h has
#      the size and last offset the C compiler gives the struct;
#   3. the preloaded library, called through ctypes with that layout, writes
#      inside it and no further (a canary after the struct stays whole).
. "$(dirname "$0")/lib.sh"
BUILD=${GG_TEST_BUILD:-build}
LIB=${GG_TEST_LIB:-$BUILD/lib/libgpuguard.so}
CC=${CC:-cc}

if ! command -v python3 >/dev/null 2>&1; then
	skip "gpu_python: no python3"
	finish
fi

# 1
for f in tests/gpu/*.py; do
	if python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f" 2>"$TMP/err"; then
		ok
	else
		bad "gpu_python: $f does not compile" "$TMP/err"
	fi
done

# 2
cat >"$TMP/size.c" <<'EOF'
#include <stddef.h>
#include <stdio.h>
#include "gpuguard.h"
int main(void)
{
	printf("%zu %zu\n", sizeof(struct gpuguard_device_stats), offsetof(struct gpuguard_device_stats, process_used));
	return 0;
}
EOF
if ! $CC -Iinclude -o "$TMP/size" "$TMP/size.c" 2>"$TMP/err"; then
	bad "gpu_python: the layout probe does not build" "$TMP/err"
	finish
fi
c_layout=$("$TMP/size")
py_layout=$(cd tests/gpu && python3 -c '
import ctypes, gg_torch
class S(ctypes.Structure):
    _fields_ = gg_torch.stats_fields()
print(ctypes.sizeof(S), S.process_used.offset)' 2>"$TMP/err")
if [ -n "$py_layout" ] && [ "$py_layout" = "$c_layout" ]; then
	echo "ok   gpu_python: struct gpuguard_device_stats is $c_layout (size, offset of process_used) in C and in the Python checks"
	ok
else
	bad "gpu_python: struct gpuguard_device_stats is '$c_layout' in C, '$py_layout' in gg_torch.stats_fields()" "$TMP/err"
fi

# 3: the sanitizer runtimes are not for preloading into python3
if [ "${GG_TEST_PRELOAD:-$LIB}" != "$LIB" ]; then
	skip "gpu_python: the canary check runs in the plain build only (a sanitizer runtime is preloaded)"
	finish
fi
if ! got=$(cd tests/gpu && LD_PRELOAD="$LIB" GPUGUARD_LIMIT=4Gi python3 -c '
import ctypes, gg_torch
class S(ctypes.Structure):
    _fields_ = gg_torch.stats_fields()
size, canary = ctypes.sizeof(S), 64
buf = ctypes.create_string_buffer(b"\xa5" * (size + canary), size + canary)
fn = ctypes.CDLL(None).gpuguard_device_stats
fn.argtypes = [ctypes.c_int, ctypes.c_void_p]
rc = fn(0, buf)
s = S.from_buffer_copy(buf.raw[:size])
print(rc, s.limit, buf.raw[size:] == b"\xa5" * canary)' 2>"$TMP/err"); then
	bad "gpu_python: calling gpuguard_device_stats from python3 under the preload failed" "$TMP/err"
elif [ "$got" = "0 4294967296 True" ]; then
	echo "ok   gpu_python: gpuguard_device_stats fills the Python layout (limit 4 GiB) and writes nothing after it"
	ok
else
	bad "gpu_python: gpuguard_device_stats through ctypes: '$got', expected '0 4294967296 True' (rc, limit, canary intact)" "$TMP/err"
fi
finish
