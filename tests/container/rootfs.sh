#!/bin/sh
# gpuguard: the "application image" of the container run (issue 23,
# tests/scripts/container.sh): a Debian 11 (bullseye, glibc 2.31) root
# filesystem made by debootstrap, cached OUTSIDE the clone so a fresh CI
# clone on the same machine reuses it. Prints the root's path on stdout.
#
# Built atomically: into a temporary directory beside the cache, the marker
# .gpuguard-rootfs-complete written last, then renamed into place; a root
# without the marker, or with another version's (an interrupted build, an
# older package list), is never used. One builder at a time (flock), so two CI runs do not race.
#
#   GG_ROOTFS_CACHE  the cache directory (/var/cache/gpuguard)
#   GG_DEBIAN_MIRROR the mirror (default: the first Debian URI apt uses here)
# Exit 0: built or cached; 2: this machine cannot build it (no debootstrap,
# not root, no mirror reachable), the reason on stderr; 1: the build failed.
set -eu
suite=bullseye
# what the image holds: a shell, its libc, and python3 (the application the
# test runs is a Python program, as most GPU applications are). Bump the
# version when this changes: a root of another version is rebuilt.
packages=python3-minimal,libpython3.9-stdlib
version="$suite-2 $packages"
cache=${GG_ROOTFS_CACHE:-/var/cache/gpuguard}
root=$cache/rootfs-$suite
marker=.gpuguard-rootfs-complete
complete() { [ -f "$root/$marker" ] && [ "$(head -n 1 "$root/$marker")" = "$version" ]; }

if complete; then
	echo "$root"
	exit 0
fi
command -v debootstrap >/dev/null 2>&1 || {
	echo "no debootstrap (apt-get install debootstrap)" >&2
	exit 2
}
[ "$(id -u)" = 0 ] || {
	echo "debootstrap needs root" >&2
	exit 2
}
command -v flock >/dev/null 2>&1 || {
	echo "no flock (util-linux)" >&2
	exit 2
}

# The mirror apt itself uses (deb822 "URIs:" or a one-line "deb" entry), so
# a machine that reaches only its own mirror builds from it.
mirror=${GG_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
	mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
		sed -n -e 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)\/\{0,1\}$/\1/p' \
			-e 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\/debian\)\/\{0,1\}[[:space:]].*/\2/p' |
		head -n 1)
	mirror=${mirror:-http://deb.debian.org/debian}
fi

mkdir -p "$cache"
exec 9>"$cache/.rootfs-$suite.lock"
flock 9
# another builder may have finished while we waited
if complete; then
	echo "$root"
	exit 0
fi
# Under the lock, anything half-built is from a builder that died: remove it
# (and a root that lacks its marker).
rm -rf "$cache/.rootfs-$suite.tmp."* "$root"
tmp=$(mktemp -d "$cache/.rootfs-$suite.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log=$cache/.rootfs-$suite.log
echo "gpuguard: building the $suite root filesystem in $cache from $mirror (once; about a minute)" >&2
if ! timeout 900 debootstrap --variant=minbase --include="$packages" "$suite" "$tmp" "$mirror" >"$log" 2>&1; then
	if grep -q -i -e "Failed getting release file" -e "Could not resolve" -e "unable to fetch" "$log"; then
		echo "the mirror $mirror cannot be reached ($log)" >&2
		exit 2
	fi
	echo "debootstrap $suite failed ($log):" >&2
	tail -n 5 "$log" >&2
	exit 1
fi
# what the test needs of the image
for f in bin/sh usr/bin/python3 usr/bin/setpriv sbin/ldconfig; do
	[ -x "$tmp/$f" ] || {
		echo "debootstrap made no /$f in $tmp" >&2
		exit 1
	}
done
rm -rf "$tmp/var/cache/apt/archives/"*.deb
printf '%s\n%s %s\n' "$version" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$mirror" >"$tmp/$marker"
mv -T "$tmp" "$root"
trap - EXIT
echo "$root"
