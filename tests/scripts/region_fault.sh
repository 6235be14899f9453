#!/bin/sh
# gpuguard: a pod region that cannot crash its users (issue 9, finding 2).
# - truncated or shrunk under a running member: no SIGBUS; the member says
#   so once and goes on under its own ceiling, with what it holds counted;
# - truncated, then written afresh by a process that starts since: the same;
# - created on a full filesystem (a tmpfs this test mounts, as root only):
#   one message and a per-process ceiling, no SIGBUS, and no sparse file
#   left for the next process to write into.
# The members are tests/tools/podclient, driven line by line through a FIFO.
. "$(dirname "$0")/lib.sh"
MNT=
on_exit() {
	[ -n "$MNT" ] && umount "$MNT" 2>/dev/null
}
CLIENT="$GG_TEST_BUILD/tests/tools/podclient"
MSG="truncated, shrunk or written afresh while in use"
BAD_LINES=8

member() { # DIR: a member of the pod in DIR, 1 GiB ceiling
	env LD_PRELOAD="$GG_TEST_PRELOAD" LD_LIBRARY_PATH="$GG_TEST_SIMDIR" GPUGUARD_SHARED="$1/pod" \
		GPUGUARD_LIMIT=1Gi GPUGUARD_CONTEXT_RESERVE=0 GPUGUARD_DUMP_DIR="$1" "$CLIENT"
}

# under DIR NAME HOW: a member holds 300 MiB when HOW happens to its region;
# then 300 MiB more must be granted, 500 refused and 400 granted (its own
# 1 GiB ceiling, with the 600 it holds), and it must exit 0 having said so
# once.
under() {
	dir=$1 name=$2 how=$3
	rm -f "$dir/pod" "$TMP/$name.in"
	mkfifo "$TMP/$name.in"
	: >"$TMP/$name.out"
	member "$dir" <"$TMP/$name.in" >"$TMP/$name.out" 2>"$TMP/$name.err" &
	pid=$!
	exec 3>"$TMP/$name.in"
	echo "a 300" >&3
	lines "$TMP/$name.out" 2
	case $how in
	truncate) truncate -s 0 "$dir/pod" ;;
	shrink) truncate -s 4096 "$dir/pod" ;;
	afresh)
		truncate -s 0 "$dir/pod"
		printf 'a 100\nq\n' | member "$dir" >"$TMP/$name.b.out" 2>"$TMP/$name.b.err"
		if [ "$(sed -n 2p "$TMP/$name.b.out")" = "alloc ok" ] && [ ! -s "$TMP/$name.b.err" ]; then
			ok
		else
			bad "region-$name-newcomer: the process that wrote the region afresh did not work quietly" \
				"$TMP/$name.b.out" "$TMP/$name.b.err"
		fi
		;;
	esac
	printf 'a 300\na 500\na 400\nq\n' >&3
	exec 3>&-
	wait $pid
	rc=$?
	if [ $rc -eq 0 ]; then ok; else bad "region-$name-alive: the member exited $rc (135 is SIGBUS)" "$TMP/$name.err"; fi
	got=$(sed -n '2,5p' "$TMP/$name.out" | tr '\n' ',')
	if [ "$got" = "alloc ok,alloc ok,alloc refused 2,alloc ok," ]; then
		ok
	else
		bad "region-$name-books: wanted ok,ok,refused,ok after the region went, got $got" "$TMP/$name.out"
	fi
	n=$(grep -c "$MSG" "$TMP/$name.err")
	if [ "$n" -eq 1 ]; then ok; else bad "region-$name-said: the member said it $n times, wanted once" "$TMP/$name.err"; fi
}

under "$TMP" truncate truncate
under "$TMP" shrink shrink
under "$TMP" afresh afresh

# A full filesystem: a tmpfs of our own, as root.
if [ "$(id -u)" = 0 ] && mkdir "$TMP/mnt" && mount -t tmpfs -o size=1m,mode=0755 none "$TMP/mnt" 2>/dev/null; then
	MNT="$TMP/mnt"
	dd if=/dev/zero of="$MNT/fill" bs=4k 2>/dev/null
	printf 'a 300\na 500\na 400\nq\n' | member "$MNT" >"$TMP/full.out" 2>"$TMP/full.err"
	rc=$?
	got=$(sed -n '2,4p' "$TMP/full.out" | tr '\n' ',')
	if [ $rc -eq 0 ] && [ "$got" = "alloc ok,alloc ok,alloc refused 2," ]; then
		ok
	else
		bad "region-full-alive: on a full tmpfs the member exited $rc with $got" "$TMP/full.out" "$TMP/full.err"
	fi
	n=$(grep -c "cannot allocate the file's blocks (is the filesystem full?)" "$TMP/full.err")
	if [ "$n" -eq 1 ]; then ok; else bad "region-full-said: said $n times, wanted once" "$TMP/full.err"; fi
	size=$(stat -c %s "$MNT/pod" 2>/dev/null || echo absent)
	if [ "$size" = 0 ] || [ "$size" = absent ]; then
		ok
	else
		bad "region-full-file: a failed creation left a file of $size bytes for the next process to write into"
	fi
	# room again: the next process makes the region whole and attaches
	rm -f "$MNT/fill"
	printf 'a 300\nq\n' | member "$MNT" >"$TMP/room.out" 2>"$TMP/room.err"
	blocks=$(stat -c '%s %b %B' "$MNT/pod" | awk '{ print ($2 * $3 >= $1) ? "whole" : "sparse" }')
	if [ "$(sed -n 2p "$TMP/room.out")" = "alloc ok" ] && [ ! -s "$TMP/room.err" ] && [ "$blocks" = whole ]; then
		ok
	else
		bad "region-full-after: with room again the region was not made whole ($blocks) or the member complained" \
			"$TMP/room.out" "$TMP/room.err"
	fi
	under "$MNT" tmpfs-truncate truncate
else
	skip "region-full: needs root to mount a tmpfs of its own"
fi
finish
