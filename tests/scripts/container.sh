#!/bin/sh
# A real container run, without a Docker engine (issue 23). The application
# image is a Debian 11 root (glibc 2.31, older than this machine's), built by
# debootstrap and cached outside the clone (tests/container/rootfs.sh). As a
# pod would get it:
#  - gpuguard's image is built from `make image-context` as its Dockerfile
#    builds it (image-stage), and the init step (its install.sh, as uid
#    65532, with the arguments the policy gives it) stages it into an
#    emptyDir, with the ld.so.preload file;
#  - the container: a mount, PID and UTS namespace (unshare), the image's root as
#    an overlay made read-only (readOnlyRootFilesystem), the policy's volumes
#    and /etc/ld.so.preload mounted where the policy mounts them
#    (deploy/preview injects tests/container/pod.yaml under each way in;
#    tests/container/podspec.py reads what it prints), the simulated driver
#    injected as the NVIDIA container toolkit injects libcuda.so.1, then
#    chroot and setpriv to uid 65532 with no capability and no_new_privs,
#    with exactly the policy's environment;
#  - the application (tests/container/app.py, Python through ctypes)
#    allocates under and past GPUGUARD_LIMIT=1Gi (the pod's annotation):
#    under each of the three ways in, the library is mapped,
#    the second allocation refused, a dump written; `gpuguard check` as the
#    startup probe runs it (in the container's namespaces and root) passes;
#  - once more with the image's own LD_PRELOAD (tests/container/imgpreload.c):
#    both libraries load, the ceiling holds, the probe passes;
#  - and without the /etc/ld.so.preload mount, or with one naming a library
#    that is not there: the probe must fail, saying which.
# Skipped by name where root, unshare, overlayfs, debootstrap or its mirror,
# or node and npm (deploy/preview) are missing.
. "$(dirname "$0")/lib.sh"
FAIL_PREFIX=container- BAD_LINES=20
ROOT=$(pwd)
PIDS=
on_exit() { for p in $PIDS; do kill -KILL $p 2>/dev/null; done; }

if [ -n "${SAN:-}" ]; then
	skip "container: under SAN=$SAN (the image is the shipped build; the plain run checks it)"
	finish
fi
for t in unshare chroot setpriv nsenter cc python3; do
	command -v $t >/dev/null 2>&1 || {
		skip "container: no $t on this machine"
		finish
	}
done
if [ "$(id -u)" != 0 ]; then
	skip "container: needs root (namespaces, mounts, chroot)"
	finish
fi
if ! unshare --mount --pid --uts --fork --propagation private true 2>/dev/null; then
	skip "container: unshare --mount --pid --uts is refused here"
	finish
fi
PY=
for p in python3 /usr/bin/python3; do
	"$p" -c "import yaml" 2>/dev/null && PY=$p && break
done
[ -n "$PY" ] || {
	skip "container: no python3 with PyYAML (python3-yaml) to read the policy"
	finish
}

# --- the application image: Debian 11, cached ------------------------------
RF=$(sh tests/container/rootfs.sh 2>"$TMP/rootfs.err")
case $? in
0) ok ;;
2)
	skip "container: cannot build the bullseye root here: $(cat "$TMP/rootfs.err")"
	finish
	;;
*)
	bad "tests/container/rootfs.sh failed" "$TMP/rootfs.err"
	finish
	;;
esac
libc=$(ls "$RF"/lib/*-linux-gnu/libc-2.*.so 2>/dev/null | head -n 1)
case $libc in
*/libc-2.31.so) ok ;;
*) bad "the image's glibc is not 2.31: ${libc:-none}" ;;
esac
ma=$(basename "$(dirname "$libc")")
mkdir -p "$TMP/ovl/l" "$TMP/ovl/m"
if ! unshare --mount --propagation private sh -c 'mount -t tmpfs tmpfs "$1/l" && mkdir "$1/l/u" "$1/l/w" &&
	mount -t overlay overlay -o "lowerdir=$2,upperdir=$1/l/u,workdir=$1/l/w" "$1/m"' sh "$TMP/ovl" "$RF" 2>"$TMP/ovl.err"; then
	skip "container: no overlayfs mount here (the image's root is a read-only lower layer): $(cat "$TMP/ovl.err")"
	finish
fi

# --- gpuguard's image, as its Dockerfile builds it --------------------------
chmod 0755 "$TMP"
IC="$TMP/ic"
if ! env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s image-context IMAGE_CONTEXT="$IC" >"$TMP/ic.log" 2>&1 ||
	! (cd "$IC/src" && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u SAN -u CFLAGS \
		nice -n 10 make -s -j2 BUILD="$TMP/img-build" image-stage DESTDIR="$TMP/stage") >>"$TMP/ic.log" 2>&1; then
	bad "building gpuguard's image" "$TMP/ic.log"
	finish
fi
IMG="$TMP/stage/opt/gpuguard"

# --- what the node and the image bring: the driver, the image's preload ----
# built here for glibc 2.31 as NVIDIA's driver is built for old glibc
OLD="-std=gnu11 -O2 -Iinclude -iquote interpose -pthread -fPIC -shared -include tests/container/old_glibc.h"
OLDLIBS="-Wl,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0 -l:librt.so.1"
mkdir -p "$TMP/driver" "$TMP/app"
# the simulator's sources, as the Makefile lists them, and the library's
# stat calls as system calls (glibc_compat.h makes stat, fstat and lstat
# those: stat is a function only since 2.33)
SIMSRC="$(sed -n 's/^SIM_CUDA_SRCS := //p' Makefile) $(sed -n 's/^SIM_SRCS := //p' Makefile) interpose/compat.c"
# shellcheck disable=SC2086 # flags and sources are words
if ! cc $OLD -Wl,-soname,libcuda.so.1 -o "$TMP/driver/libcuda.so.1" $SIMSRC $OLDLIBS >"$TMP/cc.log" 2>&1 ||
	! cc $OLD -o "$TMP/app/libimgpreload.so" tests/container/imgpreload.c $OLDLIBS >>"$TMP/cc.log" 2>&1; then
	bad "building the driver and the image's preload" "$TMP/cc.log"
	finish
fi
cp tests/container/app.py "$TMP/app/"
chmod -R a+rX "$TMP/driver" "$TMP/app" "$TMP/stage"
# what each needs of glibc, against the image's 2.31
for f in "$IMG/lib/libgpuguard.so" "$TMP/driver/libcuda.so.1" "$TMP/app/libimgpreload.so"; do
	v=$(objdump -T "$f" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
	if [ "$(printf '%s\n2.31\n' "$v" | sort -V | tail -n 1)" = 2.31 ]; then ok; else
		bad "$(basename "$f") needs GLIBC_$v, newer than the image's 2.31"
	fi
done
readelf -l "$IMG/bin/gpuguard" | grep -q 'program interpreter' &&
	bad "the image's gpuguard is dynamic: the probe would need the image's glibc to match"

# --- the pod, as the policy injects it ------------------------------------
# deploy/preview: the same model tests/scripts/deploy.sh checks; each way in
if ! sh deploy/preview tests/container/pod.yaml >"$TMP/preview.yaml" 2>"$TMP/preview.err"; then
	if grep -q 'needs node and npm\|npm ci failed' "$TMP/preview.err"; then
		skip "container: deploy/preview cannot run here: $(tail -n 1 "$TMP/preview.err")"
	else
		bad "deploy/preview tests/container/pod.yaml" "$TMP/preview.err"
	fi
	finish
fi
WAYS=$("$PY" tests/container/podspec.py ways "$TMP/preview.yaml")
[ "$(echo "$WAYS" | wc -w)" -ge 3 ] && ok || bad "deploy/preview gave fewer than three ways in: $WAYS"
for w in $WAYS; do
	"$PY" tests/container/podspec.py spec "$TMP/preview.yaml" "$w" server >"$TMP/spec.$w" 2>&1 ||
		bad "reading $w's pod" "$TMP/spec.$w"
done
FIRST=$(echo "$WAYS" | head -n 1)
SPEC="$TMP/spec.$FIRST"
POD="$TMP/pod"
FSG=$(sed -n 's/^group //p' "$SPEC")
for v in $(sed -n 's/^volume \([^ ]*\) emptyDir$/\1/p' "$SPEC"); do
	mkdir -p "$POD/$v"
	# the kubelet makes an emptyDir 0777, group-owned by the fsGroup (setgid)
	if [ -n "$FSG" ]; then
		chgrp "$FSG" "$POD/$v"
		chmod 2777 "$POD/$v"
	else
		chmod 0777 "$POD/$v"
	fi
done
read -r _ BIN MNT <<INIT
$(grep '^init ' "$SPEC")
INIT
[ -n "$BIN" ] && [ -d "$POD/$BIN" ] && ok || bad "the injected pod has no gpuguard-install filling an emptyDir" "$SPEC"
# the init container: the image's install.sh, as its securityContext's uid
# 65532 with the pod's fsGroup, into the emptyDir
if setpriv --reuid=65532 --regid=65532 --groups="${FSG:-65532}" --inh-caps=-all --bounding-set=-all --no-new-privs \
	env -i PATH=/usr/bin:/bin GPUGUARD_IMAGE_ROOT="$IMG" sh "$IC/install.sh" "$POD/$BIN" "$MNT" >"$TMP/init.log" 2>&1; then
	ok
else
	bad "the init step (install.sh as uid 65532)" "$TMP/init.log"
fi
[ "$(cat "$POD/$BIN/ld.so.preload" 2>/dev/null)" = "$MNT/lib/libgpuguard.so" ] && ok ||
	bad "the init step wrote no ld.so.preload naming $MNT/lib/libgpuguard.so" "$TMP/init.log"

# The container runtime, inside unshare --mount --pid: the image's root as
# an overlay (mount points are made in its upper layer, as a runtime makes
# them in the container's), the volumes, the driver, /proc and /dev, then
# the root read-only, chroot, uid 65532. Arguments: the spec file, then
# NAME=VALUE of the image's own environment.
cat >"$TMP/runtime.sh" <<'RUNTIME'
set -eu
spec=$1 rf=$2 pod=$3 drv=$4 app=$5 layer=$6 ma=$7 nopreload=$8 groups=$9
shift 9
M=$layer/merged
hostname vllm-0 # the kubelet names a pod's host after the pod
mkdir -p "$layer"
mount -t tmpfs -o mode=0755 tmpfs "$layer"
mkdir -p "$layer/upper" "$layer/work" "$M"
mount -t overlay overlay -o "lowerdir=$rf,upperdir=$layer/upper,workdir=$layer/work" "$M"
bindro() { # SRC DST
	mount --bind "$1" "$2"
	mount -o remount,bind,ro "$2"
}
while read -r kind vol path mode sub; do
	[ "$kind" = mount ] || continue
	[ "$path" = /etc/ld.so.preload ] && [ "$nopreload" = 1 ] && continue
	src=$pod/$vol${sub:+/$sub}
	# 2: a preload file naming a library that is not there
	[ "$path" = /etc/ld.so.preload ] && [ "$nopreload" = 2 ] && src=$pod/stale.preload
	if [ -d "$src" ]; then mkdir -p "$M$path"; else mkdir -p "$(dirname "$M$path")" && : >"$M$path"; fi
	if [ "$mode" = ro ]; then bindro "$src" "$M$path"; else mount --bind "$src" "$M$path"; fi
done <"$spec"
# the driver, where the NVIDIA container toolkit puts it, and its ldconfig
: >"$M/usr/lib/$ma/libcuda.so.1"
bindro "$drv/libcuda.so.1" "$M/usr/lib/$ma/libcuda.so.1"
mkdir -p "$M/app"
bindro "$app" "$M/app"
chroot "$M" /sbin/ldconfig
mount -t proc proc "$M/proc"
mount -t tmpfs -o mode=0755,nosuid tmpfs "$M/dev"
for d in null zero full random urandom; do
	: >"$M/dev/$d"
	mount --bind "/dev/$d" "$M/dev/$d"
done
mkdir -p "$M/dev/shm"
mount -t tmpfs -o mode=1777 tmpfs "$M/dev/shm"
# readOnlyRootFilesystem
mount -o remount,bind,ro "$M"
env=$(sed -n 's/^env \([^ ]*\) \(.*\)$/\1=\2/p' "$spec")
# shellcheck disable=SC2086 # one NAME=VALUE a line, no spaces in them
exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/ chroot "$M" \
	/usr/bin/setpriv --reuid=65532 --regid=65532 --groups="$groups" --inh-caps=-all --bounding-set=-all --no-new-privs \
	/usr/bin/env $env "$@" /usr/bin/python3 /app/app.py
RUNTIME

# run NAME SPEC NOPRELOAD [NAME=VALUE...]: the container of SPEC's pod (no
# /etc/ld.so.preload mount with NOPRELOAD 1, a stale one with 2); its
# PID 1 (the application) in $app_pid, its output in $TMP/NAME.out and .err;
# waits for "ready" (60 s at most)
run() {
	name=$1 spec=$2 nopre=$3
	shift 3
	unshare --mount --pid --uts --fork --propagation private sh "$TMP/runtime.sh" "$spec" "$RF" "$POD" "$TMP/driver" \
		"$TMP/app" "$TMP/layer-$name" "$ma" "$nopre" "${FSG:-65532}" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
	u=$!
	PIDS="$PIDS $u"
	app_pid=
	i=0
	while [ $i -lt 600 ] && kill -0 $u 2>/dev/null && ! grep -q '^ready: True' "$TMP/$name.out"; do
		sleep 0.1
		i=$((i + 1))
	done
	app_pid=$(cat /proc/$u/task/$u/children 2>/dev/null | awk '{print $1}')
	[ -n "$app_pid" ] && PIDS="$PIDS $app_pid"
	grep -q '^ready: True' "$TMP/$name.out" || bad "$name: the application did not start" "$TMP/$name.out" "$TMP/$name.err"
}
# probe NAME: gpuguard check as the startup probe runs it: in the
# container's namespaces and root, as its user; exit status in prc
probe() {
	nsenter --target "$app_pid" --mount --pid --root --wd env -i PATH=/usr/bin:/bin \
		/usr/bin/setpriv --reuid=65532 --regid=65532 --groups="${FSG:-65532}" --inh-caps=-all --bounding-set=-all --no-new-privs \
		/opt/gpuguard/bin/gpuguard check >"$TMP/$1.probe" 2>&1
	prc=$?
}
stop() {
	kill -KILL "$app_pid" 2>/dev/null
	wait 2>/dev/null
}
has() { # NAME LINE
	grep -qx -- "$2" "$TMP/$1.out" && ok || bad "$1: want '$2'" "$TMP/$1.out" "$TMP/$1.err"
}

# 1. each way's container, the image with no LD_PRELOAD of its own
for w in $WAYS; do
	rm -f "$POD"/gpuguard-dumps/*.jsonl "$POD/gpuguard-region/pod"
	n=plain-$w
	run "$n" "$TMP/spec.$w" 0
	has "$n" 'uid: 65532'
	has "$n" 'pid: 1'
	has "$n" 'gpuguard mapped: True'
	has "$n" 'root writable: False'
	has "$n" 'cuInit: 0'
	has "$n" 'cuCtxCreate: 0'
	has "$n" 'alloc 512 MiB: 0'
	has "$n" 'alloc 768 MiB more: 2'
	probe "$n"
	[ "$prc" -eq 0 ] && grep -q '^gpuguard check: process 1 (python3) runs with libgpuguard, GPUGUARD_LIMIT=1Gi$' "$TMP/$n.probe" &&
		ok || bad "$n: the probe (exit $prc)" "$TMP/$n.probe"
	# the refusal's dump, in the dumps volume; the region, in its own
	ls "$POD"/gpuguard-dumps/*.jsonl >/dev/null 2>&1 && ok || bad "$n: no dump in the dumps volume" "$TMP/$n.err"
	"$GG_TEST_BUILD/bin/gpuguard" metrics --region "$POD/gpuguard-region/pod" >"$TMP/$n.metrics" 2>&1
	grep -q '^gpuguard_device_refused_total{kind="CUDA",UUID="GPU-[0-9a-f-]*"} 1$' "$TMP/$n.metrics" &&
		grep -q '^gpuguard_device_limit_bytes{kind="CUDA",UUID="GPU-[0-9a-f-]*"} 1073741824$' "$TMP/$n.metrics" &&
		grep -q '^gpuguard_region_info{.*limit="1Gi"} 1$' "$TMP/$n.metrics" &&
		ok || bad "$n: the pod region" "$TMP/$n.metrics"
	stop
done

# 2. an image with its own LD_PRELOAD (its ENV): both load
rm -f "$POD"/gpuguard-dumps/*.jsonl "$POD/gpuguard-region/pod"
run chained "$SPEC" 0 LD_PRELOAD=/app/libimgpreload.so
has chained 'LD_PRELOAD: /app/libimgpreload.so'
has chained 'gpuguard mapped: True'
has chained 'image preload mapped: True'
has chained 'image preload answers: 42'
has chained 'alloc 512 MiB: 0'
has chained 'alloc 768 MiB more: 2'
grep -q '^imgpreload: loaded$' "$TMP/chained.err" && ok || bad "chained: the image's preload never ran" "$TMP/chained.err"
probe chained
[ "$prc" -eq 0 ] && ok || bad "chained: the probe (exit $prc)" "$TMP/chained.probe"
stop

# 3. without the /etc/ld.so.preload mount: no library, and the probe says so
rm -f "$POD"/gpuguard-dumps/*.jsonl "$POD/gpuguard-region/pod"
run bare "$SPEC" 1
has bare 'gpuguard mapped: False'
has bare 'alloc 768 MiB more: 0'
probe bare
[ "$prc" -ne 0 ] && grep -q 'does not run with libgpuguard: LD_PRELOAD is not set in it, and its /etc/ld.so.preload names no libgpuguard' "$TMP/bare.probe" && ok ||
	bad "bare: the probe passed a container without the library (exit $prc)" "$TMP/bare.probe"
stop

# 4. /etc/ld.so.preload naming a library that is not there: the loader
# warns and runs on; the probe names the file
rm -f "$POD"/gpuguard-dumps/*.jsonl "$POD/gpuguard-region/pod"
echo "$MNT/lib/libgpuguard-gone.so" >"$POD/stale.preload"
run stale "$SPEC" 2
has stale 'gpuguard mapped: False'
probe stale
[ "$prc" -ne 0 ] && grep -q "/etc/ld.so.preload names $MNT/lib/libgpuguard-gone.so, which does not exist" "$TMP/stale.probe" &&
	ok || bad "stale: the probe's word on a preload file naming a missing library (exit $prc)" "$TMP/stale.probe"
stop
finish
