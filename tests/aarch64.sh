#!/bin/sh
# gpuguard on aarch64 (GH200, Grace): the library, the simulated GPU and the
# unit, simulator and preload tests, cross-built with Debian's
# gcc-aarch64-linux-gnu into build/aarch64/ and run under qemu-user. Closes on
# tests/run.sh's "N passed, N failed" line. Where the cross compiler or qemu
# is missing, or aarch64 binaries cannot be run (no binfmt_misc), it says so
# and reports the run as skipped, never as passed.
#
# Binaries are started through binfmt_misc, so that the tests' own fork and
# exec of themselves work too: as root, this registers Debian's qemu-aarch64
# handler when it is not there yet. QEMU_LD_PREFIX points qemu at the cross
# sysroot for the loader and libc.
MAKE=${MAKE:-make}
CROSS=${GG_CROSS_CC:-aarch64-linux-gnu-gcc}
SYSROOT=${GG_CROSS_SYSROOT:-/usr/aarch64-linux-gnu}
BUILD=build/aarch64
BINFMT=/proc/sys/fs/binfmt_misc

skip_all() {
	echo "skip aarch64: $1"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
}

command -v "$CROSS" >/dev/null 2>&1 || skip_all "no $CROSS (Debian: gcc-aarch64-linux-gnu)"
[ -d "$SYSROOT/lib" ] || skip_all "no $SYSROOT (Debian: libc6-dev-arm64-cross)"
command -v qemu-aarch64-static >/dev/null 2>&1 || skip_all "no qemu-aarch64-static (Debian: qemu-user-static)"

if [ ! -e "$BINFMT/qemu-aarch64" ] && [ "$(id -u)" = 0 ]; then
	[ -e "$BINFMT/register" ] || mount -t binfmt_misc binfmt_misc "$BINFMT" 2>/dev/null
	conf=/usr/lib/binfmt.d/qemu-aarch64.conf
	[ -e "$BINFMT/register" ] && [ -f "$conf" ] && cat "$conf" >"$BINFMT/register" 2>/dev/null
fi
QEMU_LD_PREFIX=$SYSROOT
export QEMU_LD_PREFIX

echo "=== aarch64 ($CROSS, qemu-user)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# REALLIB_BINS= : the nvcc programs are x86-64 only.
if ! $MAKE --no-print-directory -s all CC="$CROSS" BUILD=$BUILD REALLIB_BINS= >"$log" 2>&1; then
	cat "$log"
	echo "build failed: aarch64"
	echo "0 passed, 1 failed"
	exit 1
fi
probe=$BUILD/tests/sim_test
# A binary this machine cannot start fails with ENOEXEC (126 from sh).
"$probe" >/dev/null 2>&1
[ $? -eq 126 ] && skip_all "this machine cannot run aarch64 binaries (no binfmt_misc for qemu-aarch64)"

BUILD=$BUILD GG_TEST_GROUPS="unit sim preload exports" GG_TEST_TIMEOUT=${GG_TEST_TIMEOUT:-900} sh tests/run.sh
