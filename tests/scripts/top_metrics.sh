#!/bin/sh
# gpuguard: `gpuguard top` and `gpuguard metrics` over pod regions written by
# tests/tools/mkregion: exact values, live and exited processes (a held slot
# lock), the Prometheus format (promtool where installed), hostile and
# truncated files (exit 2 and one message, never a crash), and the HTTP
# server (tests/tools/httpc, a raw client): answers, limits, deadline, stop.
ROOT=$(pwd)
B="${GG_TEST_BUILD:-$ROOT/build}"
GG="$B/bin/gpuguard"
MK="$B/tests/tools/mkregion"
HC="$B/tests/tools/httpc"
. "$(dirname "$0")/lib.sh"
pids=
on_exit() {
	for p in $pids; do kill "$p" 2>/dev/null; done
}
for x in "$GG" "$MK" "$HC"; do
	[ -x "$x" ] || {
		bad "$x is missing (make all)"
		finish
	}
done
unset GPUGUARD_SHARED
ESC=$(printf '\033')

# The pod: a CUDA device with a ceiling, a HIP one without, a device known
# by ordinal only, one entry still being claimed; three processes, one slot
# with an unknown state.
R="$TMP/pod"
now_ms=$(($(date +%s) * 1000))
"$MK" "$R" limit=20Gi created=$((now_ms - 3723000)) \
	dev=0:cuda:8f2a1c3d4e5f60718293a4b5c6d7e8f9:21474836480:3221225472:4294967296:85899345920:1:7:1048576 \
	dev=2:hip:00112233445566778899aabbccddeeff:none:1024:2048:0:0:0:0 \
	dev=5:ordinal:3:1000:2000:0:0:0:0:0 \
	dev=7:cuda:ffffffffffffffffffffffffffffffff:1:1:1:1:1:1:1 devstate=7:claiming devwait=0:90812345678 \
	proc=0:1234:python3:$((now_ms - 125000)):0=1610612736:2=1024 \
	prochost=0:$((now_ms - 300)):3221225472:15032385536:17179869184:3:6 \
	proc=7:99:vllm:0:0=1610612736 \
	proc=9:1234:worker:$((now_ms - 7200000)):5=2000 \
	proc=12:5:ghost:0:0=1 procstate=12:7 || bad "mkregion failed"

# 1. Live and exited: slots 0 and 9 are held, as attached processes hold them.
"$MK" --hold 0,9 "$R" >"$TMP/hold.out" 2>&1 &
holder=$!
pids="$pids $holder"
wait_file "$TMP/hold.out" held || bad "the lock holder did not start: $(cat "$TMP/hold.out")"

"$GG" top --once --region "$R" >"$TMP/top.txt" 2>"$TMP/top.err"
rc=$?
[ "$rc" -eq 0 ] && [ ! -s "$TMP/top.err" ] && ok || bad "top --once: exit $rc, $(cat "$TMP/top.err")"
# has LINE: the exact line is in top's output.
has() {
	grep -Fxq -- "$1" "$TMP/top.txt" && ok || bad "top --once lacks the line '$1'"
}
has "gpuguard top: $R"
has "  pod budget GPUGUARD_LIMIT=20Gi, created 1h02m ago; processes: 2 live, 1 exited"
has "  dev  kind     uuid          limit       used        peak        free         waiters  refused  reclaimed"
# Device 0's snapshot says 3 GiB, but the slots are the books: slot 7's
# holder has exited, so its 1.5 GiB shows free before any sweep (issue 9,
# finding 4); slot 0's 1.5 GiB is what remains used.
has "  0    CUDA     GPU-8f2a1c3d  20.00 GiB   1.50 GiB    4.00 GiB    18.50 GiB          1        7  1.00 MiB"
has "  2    HIP      HIP-00112233  none        1.00 KiB    2.00 KiB    -                  0        0  0 B"
has "  5    ordinal  ordinal-3     1000 B      1.95 KiB    0 B         0 B                0        0  0 B"
has "  slot  pid        comm             age      state    dev 0       dev 2       dev 5"
has "  7     99         vllm             -        exited   1.50 GiB    0 B         0 B"
has "  9     1234       worker           2h00m    live     0 B         0 B         1.95 KiB"
grep -q "^  0     1234       python3          2m0[5-9]s    live     1.50 GiB    1.00 KiB    0 B$" "$TMP/top.txt" && ok ||
	bad "top --once: process in slot 0"
! grep -q "ghost\|^  12 \|GPU-ffffffff" "$TMP/top.txt" && ok ||
	bad "top shows a claiming device entry or a slot in an unknown state"
grep -q "$ESC" "$TMP/top.txt" && bad "top --once writes terminal control codes" || ok

"$GG" metrics --region "$R" >"$TMP/m-live.txt" 2>"$TMP/m.err"
rc=$?
[ "$rc" -eq 0 ] && [ ! -s "$TMP/m.err" ] && ok || bad "metrics: exit $rc, $(cat "$TMP/m.err")"
# mhas LINE: the exact line is in the metrics.
mhas() {
	grep -Fxq -- "$1" "$TMP/m-live.txt" && ok || bad "metrics lack the line '$1'"
}
# UUID: dcgm-exporter's label for an NVIDIA card, for on(UUID) joins, the
# one join key (issue 23): no second uuid, no device (the region's index),
# no gpu (the host's index, unknown in a container)
U0='kind="CUDA",UUID="GPU-8f2a1c3d-4e5f-6071-8293-a4b5c6d7e8f9"'
U2='kind="HIP",UUID="HIP-00112233-4455-6677-8899-aabbccddeeff"'
U5='kind="ordinal",UUID="ordinal-3"'
mhas "gpuguard_region_info{path=\"$R\",limit=\"20Gi\"} 1"
mhas "gpuguard_region_created_time_seconds $((now_ms / 1000 - 3723)).000"
mhas "gpuguard_device_limit_bytes{$U0} 21474836480"
mhas "gpuguard_device_limit_bytes{$U5} 1000"
mhas "gpuguard_device_free_bytes{$U0} 19864223744"
mhas "gpuguard_device_free_bytes{$U5} 0"
mhas "gpuguard_device_used_bytes{$U0} 1610612736"
mhas "gpuguard_device_used_bytes{$U2} 1024"
mhas "gpuguard_device_peak_bytes{$U0} 4294967296"
mhas "gpuguard_device_physical_bytes{$U0} 85899345920"
mhas "gpuguard_device_waiters{$U0} 1"
mhas "gpuguard_device_refused_total{$U0} 7"
mhas "gpuguard_device_reclaimed_bytes_total{$U0} 1048576"
mhas "gpuguard_device_wait_seconds_total{$U0} 90.812"
mhas "gpuguard_device_wait_seconds_total{$U2} 0.000"
mhas 'gpuguard_processes{state="live"} 2'
mhas 'gpuguard_processes{state="exited"} 1'
mhas 'gpuguard_processes{state="unknown"} 0'
mhas 'gpuguard_process_info{slot="0",pid="1234",comm="python3",state="live"} 1'
mhas 'gpuguard_process_info{slot="7",pid="99",comm="vllm",state="exited"} 1'
mhas "gpuguard_process_start_time_seconds{slot=\"9\",pid=\"1234\",comm=\"worker\"} $((now_ms / 1000 - 7200)).000"
mhas "gpuguard_process_used_bytes{slot=\"0\",pid=\"1234\",comm=\"python3\",UUID=\"GPU-8f2a1c3d-4e5f-6071-8293-a4b5c6d7e8f9\"} 1610612736"
mhas "gpuguard_process_used_bytes{slot=\"9\",pid=\"1234\",comm=\"worker\",UUID=\"ordinal-3\"} 2000"
! grep -q '[{,]\(uuid\|device\|gpu\)="' "$TMP/m-live.txt" && ok || bad "metrics: a uuid, device or gpu label beside UUID"
# the host figures a process last sampled: working set (not page cache), usage, limit; its refusals
mhas 'gpuguard_process_host_working_set_bytes{slot="0",pid="1234",comm="python3"} 3221225472'
mhas 'gpuguard_process_host_usage_bytes{slot="0",pid="1234",comm="python3"} 15032385536'
mhas 'gpuguard_process_host_limit_bytes{slot="0",pid="1234",comm="python3"} 17179869184'
mhas 'gpuguard_process_refused_total{slot="0",pid="1234",comm="python3"} 3'
mhas 'gpuguard_process_refused_total{slot="9",pid="1234",comm="worker"} 0'
! grep -q '^gpuguard_process_host_working_set_bytes{slot="9"' "$TMP/m-live.txt" && ok ||
	bad "metrics show host figures for a process that took no sample"
# No ceiling: no limit or free sample; nothing from entry 7 or slot 12.
! grep -q "gpuguard_device_\(limit\|free\)_bytes{$U2}" "$TMP/m-live.txt" && ok || bad "metrics: a limit for a device without one"
[ "$(grep -c '^gpuguard_device_used_bytes{' "$TMP/m-live.txt")" -eq 3 ] && ! grep -q 'slot="12"\|ghost' "$TMP/m-live.txt" && ok ||
	bad "metrics: a claiming device or an unknown slot"
[ "$(grep -c '^gpuguard_process_used_bytes' "$TMP/m-live.txt")" -eq 9 ] && ok || bad "metrics: want 3 processes x 3 devices"
# Without device=, two entries with one UUID (a forged region: the pods
# write it) would be two series alike, and Prometheus drops such a scrape
# whole: the first entry is shown, once.
"$MK" "$TMP/dup-uuid" proc=0:1:a:0:0=5:1=6 \
	dev=0:cuda:8f2a1c3d4e5f60718293a4b5c6d7e8f9:100:5:5:1000:0:0:0 \
	dev=1:cuda:8f2a1c3d4e5f60718293a4b5c6d7e8f9:200:6:6:1000:0:0:0 >/dev/null || bad "mkregion dup-uuid failed"
"$GG" metrics --region "$TMP/dup-uuid" >"$TMP/m-dup.txt" 2>&1
[ "$(grep -c '^gpuguard_device_limit_bytes{' "$TMP/m-dup.txt")" -eq 1 ] &&
	[ "$(grep -c '^gpuguard_process_used_bytes{' "$TMP/m-dup.txt")" -eq 1 ] &&
	grep -qx 'gpuguard_device_limit_bytes{kind="CUDA",UUID="GPU-8f2a1c3d-4e5f-6071-8293-a4b5c6d7e8f9"} 100' "$TMP/m-dup.txt" &&
	ok || bad "metrics: two entries with one UUID must show the first, once" "$TMP/m-dup.txt"

# format_ok FILE: every sample's family has # HELP and # TYPE before it,
# counters end in _total and nothing else does, no series twice, and every
# line is a comment or NAME{LABELS} VALUE.
format_ok() {
	awk '
	/^# HELP / { help[$3] = 1; next }
	/^# TYPE / { if (!($3 in help)) { print "TYPE without HELP: " $3; bad = 1 }
		type[$3] = $4
		if (($4 == "counter") != ($3 ~ /_total$/)) { print "counter naming: " $3; bad = 1 }
		next }
	/^#/ { next }
	{ name = $0; sub(/[{ ].*/, "", name)
	  if (!(name in type)) { print "no HELP/TYPE for " name; bad = 1 }
	  series = $0; sub(/ [^ ]*$/, "", series)
	  if (series in seen) { print "duplicate series " series; bad = 1 }
	  seen[series] = 1
	  if ($0 !~ /^[a-z_]+(\{([a-zA-Z_]+="([^"\\]|\\.)*",?)*\})? [0-9]+(\.[0-9]+)?$/) { print "bad line: " $0; bad = 1 } }
	END { exit bad }' "$1"
}
format_ok "$TMP/m-live.txt" && ok || bad "metrics format (above)"
if command -v promtool >/dev/null 2>&1; then
	promtool check metrics <"$TMP/m-live.txt" >"$TMP/promtool.out" 2>&1 && ok ||
		bad "promtool check metrics: $(cat "$TMP/promtool.out")"
else
	skip "promtool check metrics (promtool not installed: Debian package prometheus)"
fi

# The holder goes: its processes now read as exited.
kill "$holder"
wait "$holder" 2>/dev/null
"$GG" metrics --region "$R" >"$TMP/m.txt" 2>&1
grep -Fxq 'gpuguard_processes{state="live"} 0' "$TMP/m.txt" && grep -Fxq 'gpuguard_processes{state="exited"} 3' "$TMP/m.txt" &&
	grep -Fxq 'gpuguard_process_info{slot="9",pid="1234",comm="worker",state="exited"} 1' "$TMP/m.txt" && ok ||
	bad "after the holder exited, its processes are not shown as exited"
"$GG" top --once --region "$R" | grep -q "processes: 0 live, 3 exited" && ok || bad "top after the holder exited"

# GPUGUARD_SHARED names the region; --region wins over it.
GPUGUARD_SHARED="$R" "$GG" metrics | cmp -s - "$TMP/m.txt" && ok || bad "GPUGUARD_SHARED is not read"
GPUGUARD_SHARED=/nonexistent "$GG" metrics --region "$R" | cmp -s - "$TMP/m.txt" && ok || bad "--region does not win"

# 1b. The pod's recent deaths (issue 11, finding 2): newest first in top,
# one series each in metrics, with the verdict; entries whose seq is 0 or
# names another place in the ring are not shown.
D="$TMP/deaths"
"$MK" "$D" limit=1Gi dev=0:cuda:8f2a1c3d4e5f60718293a4b5c6d7e8f9:1073741824:0:0:0:0:0:0 \
	death=0:17:4242:vllm:$((now_ms - 90000)):$((now_ms - 90400)):1048576000:1073741824:0:none:16965120819:17179869184:6 \
	death=1:18:77:trainer:$((now_ms - 30000)):$((now_ms - 30200)):536870912:1073741824:3:200:1073741824:17179869184:6 \
	death=2:19:99:sidecar:$((now_ms - 5000)):$((now_ms - 5100)):0:none:0:none:1932735283:17179869184:6 \
	death=3:99:13:bogus:1:1:1:1:1:1:1:1:6 death=4:0:14:empty:1:1:1:1:1:1:1:1:6 \
	death=5:22:15:nohost:$((now_ms - 1000)):$((now_ms - 1000)):5:none:0:none:0:0:0 || bad "mkregion deaths failed"
"$GG" top --once --region "$D" >"$TMP/top.txt" 2>&1
has "RECENT DEATHS (pod members that died without exiting: SIGKILL, the OOM killer, a crash)"
has "  pid        comm             ago      gpu used / ceiling      working set / limit     refused  verdict"
grep -q "^  4242       vllm             1m3[0-9]s    1000.00 MiB / 1.00 GiB  15.80 GiB / 16.00 GiB   0        likely OOMKilled (working set 15.80 GiB of 16.00 GiB)$" "$TMP/top.txt" && ok ||
	bad "top: the OOM-killed member's obituary"
grep -q "^  77         trainer          3[0-9]s      512.00 MiB / 1.00 GiB   1.00 GiB / 16.00 GiB    3        GPU refusals before death$" "$TMP/top.txt" && ok ||
	bad "top: the refused member's obituary"
grep -q "^  99         sidecar          [0-9]s       0 B / none              1.80 GiB / 16.00 GiB    0        killed while within GPU and host limits (not an OOM)$" "$TMP/top.txt" && ok ||
	bad "top: the page-cache member's obituary"
grep -q "^  15         nohost           [0-9]s       5 B / none              -                       0        killed while within GPU limits (host memory not known)$" "$TMP/top.txt" && ok ||
	bad "top: the member without host figures"
[ "$(sed -n '/^RECENT DEATHS/,$p' "$TMP/top.txt" | sed -n '3p;6p' | awk '{print $1}' | tr '\n' ' ')" = "15 4242 " ] && ok ||
	bad "top: deaths not newest first"
! grep -q "bogus\|empty" "$TMP/top.txt" && ok || bad "top shows a death entry in the wrong place or empty"
"$GG" metrics --region "$D" >"$TMP/m-live.txt" 2>&1
mhas 'gpuguard_death_info{n="17",pid="4242",comm="vllm",verdict="host_oom"} 1'
mhas 'gpuguard_death_info{n="18",pid="77",comm="trainer",verdict="gpu_refusals"} 1'
mhas 'gpuguard_death_info{n="19",pid="99",comm="sidecar",verdict="not_oom"} 1'
mhas "gpuguard_death_time_seconds{n=\"18\",pid=\"77\",comm=\"trainer\"} $((now_ms / 1000 - 30)).000"
mhas 'gpuguard_death_gpu_used_bytes{n="17",pid="4242",comm="vllm"} 1048576000'
mhas 'gpuguard_death_working_set_bytes{n="19",pid="99",comm="sidecar"} 1932735283'
mhas 'gpuguard_death_refused_requests{n="18",pid="77",comm="trainer"} 3'
[ "$(grep -c '^gpuguard_death_info{' "$TMP/m-live.txt")" -eq 4 ] && ok || bad "metrics: want 4 deaths"
format_ok "$TMP/m-live.txt" && ok || bad "metrics format with deaths (above)"

# 2. Files that are not a region: exit 2 and one line naming the path and the
# reason; nothing on stdout; never a crash.
# refused NAME PATH PATTERN: both commands refuse PATH with PATTERN.
refused() {
	for cmd in "top --once" metrics; do
		# shellcheck disable=SC2086
		timeout 10 "$GG" $cmd --region "$2" >"$TMP/r.out" 2>"$TMP/r.err"
		rc=$?
		if [ "$rc" -gt 128 ] || [ "$rc" -eq 124 ]; then
			bad "$1 ($cmd): crashed or hung, exit $rc"
		elif [ "$rc" -eq 2 ] && [ ! -s "$TMP/r.out" ] && [ "$(wc -l <"$TMP/r.err")" -eq 1 ] &&
			grep -q "^gpuguard: error: $2: .*$3" "$TMP/r.err"; then
			ok
		else
			bad "$1 ($cmd): exit $rc, stderr '$(cat "$TMP/r.err")', want 2 and '$3'"
		fi
	done
}
for h in truncate=0:truncated truncate=100:truncated truncate=511:truncated \
	truncate=4096:"truncated or extended" truncate=53247:"truncated or extended" extend:"truncated or extended" \
	magic:"bad magic" version:"unsupported version" header-size:"size field" size-field:"size field" \
	devlayout:"device table layout" proclayout:"process table layout" deathlayout:"deaths table layout" limit-unterminated:"not terminated"; do
	mode=${h%%:*}
	"$MK" "$TMP/h-$mode" dev=0:cuda:00000000000000000000000000000001:1:2:3:4:5:6:7 proc=0:1:a:0 hostile="$mode"
	refused "$mode" "$TMP/h-$mode" "${h#*:}"
done
head -c 53248 /dev/urandom >"$TMP/urandom"
refused "random bytes" "$TMP/urandom" "bad magic"
refused "missing file" "$TMP/none" "no process in this pod has attached yet"
mkdir "$TMP/dir"
refused "a directory" "$TMP/dir" "not a regular file"
mkfifo "$TMP/fifo" && refused "a FIFO" "$TMP/fifo" "not a regular file"
ln -s "$R" "$TMP/link"
refused "a symbolic link" "$TMP/link" "symbolic link"
refused "/dev/zero" /dev/zero "not a regular file"

# Valid headers over hostile contents: a table, escaped, and valid metrics.
for mode in huge comm-unterminated random=1 random=2 random-ready=3 random-ready=4 random-ready=5; do
	"$MK" "$TMP/c-$mode" proc=0:1:a:0:0=1 dev=0:hip:00000000000000000000000000000001:1:2:3:4:5:6:7 hostile="$mode"
	"$GG" top --once --region "$TMP/c-$mode" >"$TMP/c.top" 2>&1
	rc1=$?
	"$GG" metrics --region "$TMP/c-$mode" >"$TMP/c.m" 2>&1
	rc2=$?
	if [ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && ! grep -q "$ESC" "$TMP/c.top" && format_ok "$TMP/c.m"; then
		ok
	else
		bad "hostile contents $mode: exits $rc1, $rc2 (want 0), or escapes/format"
	fi
	if command -v promtool >/dev/null 2>&1; then
		promtool check metrics <"$TMP/c.m" >"$TMP/promtool.out" 2>&1 && ok ||
			bad "promtool on hostile contents $mode: $(head -c 300 "$TMP/promtool.out")"
	fi
done
"$GG" metrics --region "$TMP/c-comm-unterminated" | grep -Fq 'comm="\\x1b[2J\"\\x5c\\x0a\\xff\\xfe{}=,\\x09%"' && ok ||
	bad "an unterminated comm: not cut at 15 bytes and escaped"

# 3. Usage and help.
check_rc 1 "$GG" top --bogus
check_rc 1 "$GG" top --interval 0
check_rc 1 "$GG" top --interval fast
check_rc 1 "$GG" top --region
check_rc 1 "$GG" metrics --timeout -1s
for a in 127.0.0.1 1.2.3:80 "[::1]80" 127.0.0.1:65536 example.com:80 ::1:80 127.0.0.1:-1; do
	check_rc 1 "$GG" metrics --region "$R" --listen "$a"
done
for c in top metrics; do
	"$GG" help "$c" | grep -q "^SYNOPSIS" && ok || bad "help $c has no SYNOPSIS"
	check_rc 0 "$GG" "$c" --help
	"$GG" help | grep -q "^  $c " && ok || bad "gpuguard help does not list $c"
done
check_rc 0 "$GG" top --once --interval=250ms --region="$R"

# 4. top's refreshing table: redraws, and stops cleanly on SIGTERM.
"$GG" top --region "$R" --interval 50ms >"$TMP/top-live.txt" 2>&1 &
tp=$!
pids="$pids $tp"
sleep 0.4
kill -TERM "$tp"
wait "$tp"
rc=$?
frames=$(grep -c "gpuguard top: $R" "$TMP/top-live.txt")
[ "$rc" -eq 0 ] && [ "$frames" -ge 2 ] && grep -q "${ESC}\[H${ESC}\[2J" "$TMP/top-live.txt" && ok ||
	bad "top: exit $rc after SIGTERM, $frames frames"

# 5. The HTTP server.
"$GG" metrics --region "$R" --listen 127.0.0.1:0 --timeout 1s 2>"$TMP/srv.err" &
srv=$!
pids="$pids $srv"
if ! wait_file "$TMP/srv.err" "serving metrics on"; then
	bad "metrics --listen did not start: $(cat "$TMP/srv.err")"
	finish
fi
port=$(sed -n 's|^gpuguard: serving metrics on http://127\.0\.0\.1:\([0-9]*\)/metrics$|\1|p' "$TMP/srv.err")
[ -n "$port" ] && ok || bad "no port in '$(cat "$TMP/srv.err")'"
# get NAME REQUEST: sends REQUEST (printf format), the answer goes to
# $TMP/NAME.resp, its head (no CRs) to .head, its body to .body.
get() {
	# shellcheck disable=SC2059 # the request is a printf format, for its escapes
	printf "$2" | "$HC" 127.0.0.1 "$port" 5 >"$TMP/$1.resp"
	hrc=$?
	tr -d '\r' <"$TMP/$1.resp" | sed '/^$/q' >"$TMP/$1.head"
	awk 'b { print; next } /^\r?$/ { b = 1 }' "$TMP/$1.resp" >"$TMP/$1.body"
	return $hrc
}
status() { head -n 1 "$TMP/$1.head"; }
"$GG" metrics --region "$R" >"$TMP/want.txt"
get ok 'GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n'
[ "$(status ok)" = "HTTP/1.1 200 OK" ] && ok || bad "GET /metrics: '$(status ok)'"
grep -Fxq "Content-Type: text/plain; version=0.0.4; charset=utf-8" "$TMP/ok.head" && ok || bad "GET /metrics: content type"
grep -Fxq "Content-Length: $(wc -c <"$TMP/want.txt" | tr -d ' ')" "$TMP/ok.head" && ok || bad "GET /metrics: content length"
cmp -s "$TMP/ok.body" "$TMP/want.txt" && ok || bad "GET /metrics: body differs from gpuguard metrics"
get root 'GET /?x=1 HTTP/1.0\n\n'
[ "$(status root)" = "HTTP/1.1 200 OK" ] && cmp -s "$TMP/root.body" "$TMP/want.txt" && ok || bad "GET / (HTTP/1.0, LF only)"
get head 'HEAD /metrics HTTP/1.1\r\n\r\n'
[ "$(status head)" = "HTTP/1.1 200 OK" ] && [ ! -s "$TMP/head.body" ] && ok || bad "HEAD /metrics: '$(status head)'"
get nf 'GET /other HTTP/1.1\r\n\r\n'
[ "$(status nf)" = "HTTP/1.1 404 Not Found" ] && ok || bad "GET /other: '$(status nf)'"
get post 'POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n'
[ "$(status post)" = "HTTP/1.1 405 Method Not Allowed" ] && grep -q "^Allow: GET, HEAD" "$TMP/post.head" && ok ||
	bad "POST: '$(status post)'"
get junk '\001\002garbage\377 with no version\r\n\r\n'
[ "$(status junk)" = "HTTP/1.1 400 Bad Request" ] && ok || bad "garbage: '$(status junk)'"
{
	printf 'GET /metrics HTTP/1.1\r\nX-Big: '
	head -c 9000 /dev/zero | tr '\0' a
	printf '\r\n\r\n'
} >"$TMP/big.req"
"$HC" 127.0.0.1 "$port" 5 <"$TMP/big.req" | head -n 1 | tr -d '\r' >"$TMP/big.status"
[ "$(cat "$TMP/big.status")" = "HTTP/1.1 431 Request Header Fields Too Large" ] && ok ||
	bad "oversize request: '$(cat "$TMP/big.status")'"
# A slow client neither stalls the others nor stays past the deadline.
(
	printf 'GET /met'
	sleep 3
) | "$HC" 127.0.0.1 "$port" 5 >"$TMP/slow.resp" 2>&1 &
slow=$!
pids="$pids $slow"
sleep 0.2
get during 'GET /metrics HTTP/1.1\r\n\r\n'
[ "$(status during)" = "HTTP/1.1 200 OK" ] && ok || bad "a request beside a slow client: '$(status during)'"
wait "$slow"
src=$?
head -n 1 "$TMP/slow.resp" | grep -q "^HTTP/1.1 408 " && [ "$src" -eq 0 ] && ok ||
	bad "slow client: exit $src, '$(head -n 1 "$TMP/slow.resp")', want a 408 and a close at the deadline"
# The region goes away: 200 with gpuguard_up 0 and the reason (never 503:
# the target is up before any process attached), and back.
mv "$R" "$R.away"
get gone 'GET /metrics HTTP/1.1\r\n\r\n'
[ "$(status gone)" = "HTTP/1.1 200 OK" ] && grep -qx "gpuguard_up 0" "$TMP/gone.body" &&
	grep -qx 'gpuguard_region_error{reason="missing"} 1' "$TMP/gone.body" &&
	ok || bad "missing region while serving: '$(status gone)', want 200 with gpuguard_up 0"
if command -v promtool >/dev/null 2>&1; then
	promtool check metrics <"$TMP/gone.body" >/dev/null 2>&1 && ok || bad "gpuguard_up 0 body fails promtool check metrics"
fi
mv "$R.away" "$R"
get back 'GET /metrics HTTP/1.1\r\n\r\n'
[ "$(status back)" = "HTTP/1.1 200 OK" ] && ok || bad "region back: '$(status back)'"
if command -v curl >/dev/null 2>&1; then
	curl -sf "http://127.0.0.1:$port/metrics" | cmp -s - "$TMP/want.txt" && ok || bad "curl: body differs"
else
	skip "curl GET (curl not installed)"
fi
# The port is taken: a second server says so.
check_rc 2 "$GG" metrics --region "$R" --listen "127.0.0.1:$port"
kill -0 "$srv" 2>/dev/null && ok || bad "the server died during the tests"
kill -TERM "$srv"
wait "$srv"
rc=$?
[ "$rc" -eq 0 ] && ok || bad "server: exit $rc after SIGTERM, want 0"

# IPv6 loopback, where the machine has it.
"$GG" metrics --region "$R" --listen "[::1]:0" 2>"$TMP/srv6.err" &
srv6=$!
pids="$pids $srv6"
if wait_file "$TMP/srv6.err" "serving metrics on http://\[::1\]:"; then
	port=$(sed -n 's|^gpuguard: serving metrics on http://\[::1\]:\([0-9]*\)/metrics$|\1|p' "$TMP/srv6.err")
	printf 'GET /metrics HTTP/1.1\r\n\r\n' | "$HC" ::1 "$port" 5 | head -n 1 | grep -q "^HTTP/1.1 200 OK" && ok ||
		bad "GET over IPv6"
else
	skip "IPv6 listen (no ::1 here: $(cat "$TMP/srv6.err"))"
fi
kill -INT "$srv6" 2>/dev/null
wait "$srv6"

# 6. A region the library itself wrote (the two share only region.h): a
# process under `gpuguard run` on the simulated GPU is live with its 256 MiB;
# killed with -9 it has not detached, so it reads as exited, still charged.
if [ -f "$B/lib/libgpuguard.so" ] && [ -f "$B/sim/libcuda.so.1" ] &&
	${CC:-cc} -std=gnu11 -Iinclude -o "$TMP/sleeper" tests/e2e/sleeper.c -L"$B/sim" -lcuda 2>"$TMP/cc.log"; then
	(
		export LD_LIBRARY_PATH="$B/sim" SIMGPU_MEMORY=16Gi GPUGUARD_SHARED="$TMP/e2e-pod" GPUGUARD_DUMP_DIR="$TMP"
		unset GPUGUARD_LIMIT
		# A sanitizer's runtime must come first in LD_PRELOAD.
		[ -n "$SAN_RUNTIME" ] && export LD_PRELOAD="$SAN_RUNTIME" ASAN_OPTIONS="${ASAN_OPTIONS}:verify_asan_link_order=0"
		exec "$GG" run --limit 4Gi -- "$TMP/sleeper" 64 10
	) >"$TMP/sleeper.out" 2>&1 &
	sl=$!
	pids="$pids $sl"
	if wait_file "$TMP/sleeper.out" ready; then
		"$GG" metrics --region "$TMP/e2e-pod" >"$TMP/e2e.txt" 2>&1
		grep -q "^gpuguard_process_info{slot=\"[0-9]*\",pid=\"$sl\",comm=\"sleeper\",state=\"live\"} 1$" "$TMP/e2e.txt" &&
			grep -q "^gpuguard_process_used_bytes{.*pid=\"$sl\".*,UUID=\"GPU-[0-9a-f-]\{36\}\"} 268435456$" "$TMP/e2e.txt" &&
			grep -q '^gpuguard_device_limit_bytes{kind="CUDA",UUID="GPU-.*"} 4294967296$' "$TMP/e2e.txt" &&
			grep -q '^gpuguard_device_used_bytes{kind="CUDA",UUID="GPU-.*"} 268435456$' "$TMP/e2e.txt" &&
			grep -Fxq 'gpuguard_region_info{path="'"$TMP/e2e-pod"'",limit="4Gi"} 1' "$TMP/e2e.txt" && ok ||
			bad "library-written region: $(grep -v '^#' "$TMP/e2e.txt" | head -n 20)"
		kill -KILL "$sl"
		wait "$sl" 2>/dev/null
		"$GG" top --once --region "$TMP/e2e-pod" >"$TMP/e2e.top" 2>&1
		grep -q "^  [0-9]*  *$sl  *sleeper  *[0-9]*s  *exited   256.00 MiB$" "$TMP/e2e.top" &&
			grep -q "processes: 0 live, 1 exited" "$TMP/e2e.top" && ok ||
			bad "a process killed with -9 is not shown as exited: $(cat "$TMP/e2e.top")"
	else
		bad "sleeper under gpuguard run did not start: $(cat "$TMP/sleeper.out")"
	fi
else
	skip "library-written region (no library, simulator or compiler: $(cat "$TMP/cc.log" 2>/dev/null))"
fi

finish
