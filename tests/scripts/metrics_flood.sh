#!/bin/sh
# gpuguard: `gpuguard metrics --listen` under a slow-client flood, on
# 127.0.0.1 only: 1000 idle connections and 20 that drip a request head one
# byte every 100 ms stay open while tests/tools/flood times full scrapes.
# Each must be a whole, valid Prometheus answer in under 1 s, with every
# connection held (the default cap) and with a cap of 64 that evicts the
# oldest unanswered ones. Bounded: the client gives up after 5 s a stage.
ROOT=$(pwd)
B="${GG_TEST_BUILD:-$ROOT/build}"
GG="$B/bin/gpuguard"
MK="$B/tests/tools/mkregion"
FL="$B/tests/tools/flood"
HC="$B/tests/tools/httpc"
. "$(dirname "$0")/lib.sh"
srv=
on_exit() {
	[ -n "$srv" ] && kill "$srv" 2>/dev/null
}
for x in "$GG" "$MK" "$FL" "$HC"; do
	[ -x "$x" ] || {
		bad "$x is missing (make all)"
		finish
	}
done
unset GPUGUARD_SHARED
IDLE=1000
SLOW=20
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt $((IDLE + SLOW + 100)) ]; then
	skip "the flood: the hard descriptor limit is $hard, under $((IDLE + SLOW + 100))"
	finish
fi

R="$TMP/pod"
"$MK" "$R" limit=20Gi dev=0:cuda:8f2a1c3d4e5f60718293a4b5c6d7e8f9:21474836480:3221225472:4294967296:85899345920:1:7:1048576 \
	proc=0:1234:python3:1700000000000:0=1610612736 proc=7:99:vllm:0:0=1610612736 || bad "mkregion failed"
"$GG" metrics --region "$R" >"$TMP/want.txt" || bad "gpuguard metrics"

# serve ARGS...: starts the server on a free loopback port into $port.
serve() {
	"$GG" metrics --region "$R" --listen 127.0.0.1:0 "$@" 2>"$TMP/srv.err" &
	srv=$!
	wait_file "$TMP/srv.err" "serving metrics on"
	port=$(sed -n 's|^gpuguard: serving metrics on http://127\.0\.0\.1:\([0-9]*\)/metrics$|\1|p' "$TMP/srv.err")
	[ -n "$port" ] || {
		bad "metrics --listen $* did not start: $(cat "$TMP/srv.err")"
		finish
	}
}

stop() {
	kill -0 "$srv" 2>/dev/null && ok || bad "$1: the server died under the flood"
	kill -TERM "$srv"
	wait "$srv"
	rc=$?
	srv=
	[ "$rc" -eq 0 ] && ok || bad "$1: exit $rc after SIGTERM, want 0"
}

# flood NAME: three timed scrapes under the flood; each under 1000 ms, the
# last answer a 200 whose body is what `gpuguard metrics` prints.
flood() {
	"$FL" "$port" $IDLE $SLOW 3 >"$TMP/resp" 2>"$TMP/flood.err"
	frc=$?
	sed 's/^/    /' "$TMP/flood.err"
	[ "$frc" -eq 0 ] && ok || bad "$1: flood client exit $frc (3: a scrape timed out)"
	grep -q "^flood: $((IDLE + SLOW)) of $((IDLE + SLOW)) connections established" "$TMP/flood.err" && ok ||
		bad "$1: not every idle and slow connection was established"
	n=0
	for ms in $(sed -n 's/^scrape [0-9]*: \([0-9]*\) ms.*/\1/p' "$TMP/flood.err"); do
		n=$((n + 1))
		[ "$ms" -lt 1000 ] && ok || bad "$1: scrape $n took $ms ms, want under 1000"
	done
	[ "$n" -eq 3 ] && ok || bad "$1: $n scrapes completed, want 3"
	tr -d '\r' <"$TMP/resp" | head -n 1 | grep -qx "HTTP/1.1 200 OK" && ok || bad "$1: status '$(head -n 1 "$TMP/resp")'"
	awk 'b { print; next } /^\r?$/ { b = 1 }' "$TMP/resp" >"$TMP/body"
	cmp -s "$TMP/body" "$TMP/want.txt" && ok || bad "$1: the scraped body differs from gpuguard metrics"
	# Valid Prometheus text: comments or NAME{LABELS} VALUE, nothing else.
	awk '/^# (HELP|TYPE) / { next }
	$0 !~ /^[a-z_]+(\{([a-zA-Z_]+="([^"\\]|\\.)*",?)*\})? [0-9]+(\.[0-9]+)?$/ { print "bad line: " $0; bad = 1 }
	END { exit bad }' "$TMP/body" && [ -s "$TMP/body" ] && ok || bad "$1: not Prometheus text"
	if command -v promtool >/dev/null 2>&1; then
		promtool check metrics <"$TMP/body" >"$TMP/promtool.out" 2>&1 && ok ||
			bad "$1: promtool: $(cat "$TMP/promtool.out")"
	fi
}

# 1. The default cap holds every connection open; no client waits on another.
serve --timeout 5s
flood "default cap"
printf 'GET /metrics HTTP/1.1\r\n\r\n' | "$HC" 127.0.0.1 "$port" 5 | head -n 1 | grep -q "^HTTP/1.1 200 OK" && ok ||
	bad "default cap: a plain request after the flood"
stop "default cap"

# 2. A cap of 64: the flood is over it 16 times; new connections close the
# oldest unanswered ones, and the scrape (the newest) is answered.
serve --timeout 5s --max-connections 64
flood "cap 64"
stop "cap 64"

# 3. The cap's usage errors.
for v in 0 4097 x -1; do
	"$GG" metrics --region "$R" --listen 127.0.0.1:0 --max-connections "$v" >/dev/null 2>&1
	rc=$?
	[ "$rc" -eq 1 ] && ok || bad "--max-connections $v: exit $rc, want 1"
done

finish
