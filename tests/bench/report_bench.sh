#!/bin/sh
# gpuguard benchmark: `gpuguard report` on a dump of 1 million live
# allocations plus 1 million history events, against jq computing the same
# top-sites table (live bytes grouped by stack id). Targets (issue 4): the
# text report under 2 s, and at least 10x faster than jq.
# Appends to $BUILD/bench.txt. N=... changes the size.
set -eu
BUILD=${BUILD:-build}
N=${N:-1000000}
GG="$BUILD/bin/gpuguard"
GEN="$BUILD/tests/bench/gen_dump"
OUT="$BUILD/bench.txt"
DUMP="$BUILD/tests/bench/bench_dump.jsonl"
[ -x "$GG" ] || { echo "report_bench: $GG is missing; run 'make bench'" >&2; exit 1; }
mkdir -p "$(dirname "$GEN")"
${CC:-cc} -O2 -Iinclude -o "$GEN" tests/bench/gen_dump.c
[ -f "$DUMP" ] && [ "$(head -c 300 "$DUMP" | grep -c "\"history_capacity\":$N}")" -eq 1 ] || "$GEN" "$N" >"$DUMP"

now() { date +%s.%N; }
secs() { echo "$1 $2" | awk '{ printf "%.2f", $2 - $1 }'; }

best=
for i in 1 2 3; do
	t0=$(now)
	"$GG" report "$DUMP" >/dev/null
	t1=$(now)
	s=$(secs "$t0" "$t1")
	if [ -z "$best" ]; then best=$s; else best=$(echo "$best $s" | awk '{ print ($2 < $1) ? $2 : $1 }'); fi
done
json_t0=$(now)
"$GG" report --json "$DUMP" >/dev/null
json_s=$(secs "$json_t0" "$(now)")

jq_s=n/a
ratio=n/a
if command -v jq >/dev/null 2>&1; then
	t0=$(now)
	jq -cn 'reduce (inputs | select(.t == "a")) as $a ({}; .[$a.st | tostring] += $a.s)
		| to_entries | sort_by(-.value) | .[:10]' "$DUMP" >/dev/null
	jq_s=$(secs "$t0" "$(now)")
	ratio=$(echo "$jq_s $best" | awk '{ printf "%.1f", $1 / ($2 > 0.001 ? $2 : 0.001) }')
fi
size=$(wc -c <"$DUMP")
{
	echo
	echo "gpuguard report: $N live allocations + $N history events ($size bytes)"
	echo "  gpuguard report (text, best of 3): ${best}s   (target < 2 s)"
	echo "  gpuguard report --json:            ${json_s}s"
	echo "  jq top-sites table:                ${jq_s}s   (gpuguard ${ratio}x faster; target >= 10x)"
} | tee -a "$OUT"
