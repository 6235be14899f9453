#!/bin/sh
# gpuguard: the library's face to the host process. Its dynamic symbols must be
# exactly the names interpose/hooks.h's rows list (the build writes them into
# exports.txt beside the library, from tests/exports.c), so a leaked helper or
# a hook without its row fails the suite; and it may need only libc-level
# libraries, so it loads into images with no CUDA toolkit.
LIB=${GG_TEST_LIB:-build/lib/libgpuguard.so}
EXPECTED=$(dirname "$LIB")/exports.txt

. "$(dirname "$0")/lib.sh"
got="$TMP/got"

if [ ! -f "$LIB" ] || [ ! -s "$EXPECTED" ]; then
	echo "tests/scripts/exports.sh: no library at $LIB or no list at $EXPECTED (make all)"
	failed=2
	finish
fi

# 1. exported symbols (names only; nm may append @VERSION)
nm -D --defined-only "$LIB" | awk 'NF >= 3 { print $NF }' | sed 's/@.*//' |
	grep -v -x -e _init -e _fini | LC_ALL=C sort -u >"$got"
if diff -u "$EXPECTED" "$got"; then
	echo "ok   exports: $(wc -l <"$got") symbols match interpose/hooks.h's rows"
	ok
else
	bad "exports: $LIB differs from interpose/hooks.h's rows (- a row's name not exported, + exported without a row)"
fi

# 2. NEEDED: glibc only; a sanitizer build (make check SAN=...) adds its runtime.
bad=
for lib in $(readelf -d "$LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p'); do
	case $lib in
	libc.so.6 | libdl.so.2 | libpthread.so.0 | ld-linux-x86-64.so.2 | ld-linux-aarch64.so.1) ;;
	libasan.so.* | libubsan.so.* | libtsan.so.*) [ -n "$SAN" ] || bad="$bad $lib" ;;
	*) bad="$bad $lib" ;;
	esac
done
if [ -z "$bad" ]; then
	echo "ok   needed: $(readelf -d "$LIB" | grep -c '(NEEDED)') libraries, all allowed"
	ok
else
	bad "needed: $LIB depends on$bad (only libc, libdl, libpthread, ld-linux allowed)"
fi

# 3. Symbol versions: nothing newer than glibc 2.17, so the library loads into
# old images (CentOS 7, UBI 8, Ubuntu 20.04; interpose/glibc_compat.h). A
# preloaded library whose versions the loader cannot meet stops every process
# of the container, shells included. Under a sanitizer its runtime's own
# needs come on top, so only the plain build is held to this.
if [ -n "$SAN" ]; then
	echo "ok   glibc: not checked under SAN=$SAN"
	ok
else
	vers=$(readelf -V --wide "$LIB" | sed -n 's/.*Name: \(GLIBC_[0-9.]*\).*/\1/p' | sort -u)
	newest=$(printf '%s\n' $vers | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n -k3,3n | tail -n 1)
	too_new=$(printf '%s\n' $vers | sed 's/GLIBC_//' | awk -F. '$1 > 2 || ($1 == 2 && $2 > 17)')
	if [ -n "$newest" ] && [ -z "$too_new" ]; then
		echo "ok   glibc: highest symbol version needed is GLIBC_$newest (<= 2.17)"
		ok
	else
		bad "glibc: needs GLIBC_$(echo $too_new | tr ' ' ','), newer than 2.17:"
		for v in $too_new; do
			objdump -T "$LIB" | grep -F "(GLIBC_$v)" | awk '{ print "    " $NF " (GLIBC_'"$v"')" }'
		done
	fi
fi

# 4. The environment is read with secure_getenv only: a program running with
# AT_SECURE (setuid, file capabilities) gets no options from its caller.
if nm -D --undefined-only "$LIB" | awk '{ print $NF }' | sed 's/@.*//' | grep -q -x getenv; then
	bad "getenv: $LIB imports getenv; read options with secure_getenv"
else
	echo "ok   getenv: not imported (options come through secure_getenv)"
	ok
fi

finish
