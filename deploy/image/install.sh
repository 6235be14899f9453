#!/bin/sh
# gpuguard's copy step, the init container's command: copies the library and
# the command from the image (/opt/gpuguard, or GPUGUARD_IMAGE_ROOT) into DEST
# (an emptyDir the application containers mount at MOUNT, /opt/gpuguard by
# default), writes DEST/ld.so.preload naming the library at MOUNT (each GPU
# container mounts that one file at /etc/ld.so.preload: the loader preloads
# it into every process, beside any LD_PRELOAD of the image's own), then
# checks what it copied: the library must load and the command must run.
# Any failure exits non-zero, so the pod does not start (failing closed).
set -eu
src=${GPUGUARD_IMAGE_ROOT:-/opt/gpuguard}
dest=${1:?usage: install.sh DEST [MOUNT]}
mnt=${2:-/opt/gpuguard}
case $mnt in /*) ;; *) echo "gpuguard install: MOUNT must be an absolute path, not \"$mnt\"" >&2; exit 2 ;; esac
mkdir -p "$dest/lib" "$dest/bin"
cp "$src/lib/libgpuguard.so" "$dest/lib/libgpuguard.so"
# optional: the unwinder dumps use, found beside the library first
[ -f "$src/lib/libunwind.so.8" ] && cp "$src/lib/libunwind.so.8" "$dest/lib/libunwind.so.8"
cp "$src/bin/gpuguard" "$dest/bin/gpuguard"
chmod 0755 "$dest/lib/libgpuguard.so" "$dest/bin/gpuguard"
# The loader only warns about a preload it cannot load, and runs on.
out=$(LD_PRELOAD="$dest/lib/libgpuguard.so" /bin/true 2>&1)
if [ -n "$out" ]; then
	echo "gpuguard install: $dest/lib/libgpuguard.so does not load: $out" >&2
	exit 1
fi
printf '%s\n' "$mnt/lib/libgpuguard.so" >"$dest/ld.so.preload"
chmod 0644 "$dest/ld.so.preload"
version=$("$dest/bin/gpuguard" version) || {
	echo "gpuguard install: $dest/bin/gpuguard does not run" >&2
	exit 1
}
echo "gpuguard install: $version into $dest"
