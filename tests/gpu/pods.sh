#!/bin/sh
# gpuguard: three pods on one real card (issue 22), the check
# tests/scripts/shared_card.sh makes on the simulator's shared card. Called by
# tests/gpu/run.sh, which sets LIB, GG_BIN, LOGS, ROWS, BIN (build/gpu) and
# REALLIB (build/reallib); adds rows pods_lazy, pods_eager and pods_kill to
# ROWS and prints each pod's figures side by side.
#
# The card is made the size the check needs: a bare context is measured
# (build/gpu/card ctx), and a ballast process without the library takes all
# but three pods of GG_GPU_POD_MIB (4096) MiB each plus three contexts, so
# the test runs in seconds on an 80 GB H100 or a 141 GB H200 alike. The three
# ceilings add up to what the ballast leaves less three contexts. Three
# processes (tests/reallib/rl_fill: driver API, cudart shared and static,
# cuBLAS create + a GEMM workspace, a one-rank NCCL init), each a pod of its
# own (GPUGUARD_SHARED), allocate until refused, under CUDA_MODULE_LOADING
# LAZY, then EAGER. A fourth process, without the library, reads NVML
# (nvml_watch, every 20 ms) and `nvidia-smi --query-compute-apps` (every
# 200 ms) all the while; gpuguard's own figure for each pod is read from its
# region (`gpuguard metrics`). A pod passes when NVML never showed it above
# its ceiling, nor nvidia-smi; every refusal was gpuguard's, none the
# driver's; and NVML saw it reach its ceiling less GG_GPU_POD_SLACK_MIB (128
# on a card, 36 on the simulator). NVML's PID for a pod is getpid() where
# NVML lists that, else the one new PID its start made appear (a container's
# PID namespace); where neither is found, the card's total is checked
# instead. Then kill -9 of a full pod: the card lists it no more and gets
# its memory back, and its successor in the same region fills the whole
# ceiling again.
#
# Test only: GG_GPU_PODS_FAULT=nolib runs pod b without the library, and
# =overcommit gives every pod half a ceiling more than the card holds; each
# must FAIL (tests/scripts/gpu_selftest.sh). GG_GPU_POD_ROUNDS picks rounds
# (default "lazy eager kill").
: "${LIB:?}" "${LOGS:?}" "${ROWS:?}"
BIN=${BIN:-build/gpu}
REALLIB=${REALLIB:-build/reallib}
GG=${GG_BIN:-build/bin/gpuguard}
MIB=1048576
POD_MIB=${GG_GPU_POD_MIB:-4096}
ROUNDS=${GG_GPU_POD_ROUNDS:-lazy eager kill}
FAULT=${GG_GPU_PODS_FAULT:-}
WAIT=${GG_GPU_POD_WAIT:-60} # seconds for a pod to start or fill
D=$LOGS/pods
rm -rf "$D"
mkdir -p "$D" || exit 1
if [ -n "${GG_GPU_SIM:-}" ]; then SLACK_MIB=36; else SLACK_MIB=128; fi
SLACK=$((${GG_GPU_POD_SLACK_MIB:-$SLACK_MIB} * MIB))

row() { printf '%s|%s|%s|%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" >>"$ROWS"; }
skip_all() {
	for r in $ROUNDS; do row "pods_$r" n/a n/a n/a n/a SKIP "$1"; done
	echo "pods: skipped: $1"
	exit 0
}
case $FAULT in '' | nolib | overcommit) ;; *)
	echo "pods: GG_GPU_PODS_FAULT=$FAULT: expected nolib or overcommit" >&2
	exit 2
	;;
esac
for f in "$REALLIB/rl_fill_shared" "$REALLIB/rl_fill_static" "$BIN/card" "$BIN/nvml_watch" "$GG"; do
	[ -x "$f" ] || skip_all "no $f (make check-gpu builds it; rl_fill and card need nvcc)"
done
SMI=nvidia-smi
command -v nvidia-smi >/dev/null 2>&1 || SMI=

pids=
# shellcheck disable=SC2317 # run by the trap
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	rm -f "$D"/*.in # FIFOs: nothing to keep, and no copy of build/ wants them
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# wait_file FILE PATTERN SECONDS [PID]: no longer than PID lives
wait_file() {
	wi=0
	while ! grep -q "$2" "$1" 2>/dev/null && [ $wi -lt $(($3 * 10)) ]; do
		if [ -n "${4:-}" ] && ! kill -0 "$4" 2>/dev/null; then break; fi
		sleep 0.1
		wi=$((wi + 1))
	done
	grep -q "$2" "$1" 2>/dev/null
}
# the PIDs NVML lists now, one a line, sorted
nvml_pids() { "$BIN/nvml_watch" -n 1 -v 2>/dev/null | awk '$1 == "proc" { print $4 }' | sort -u; }
# the card's used bytes now (NVML v2, device 0)
card_used() { "$BIN/nvml_watch" -n 1 -v -d 0 2>/dev/null | awk '$1 == "sample" { print $9; exit }'; }
# the value of a gpuguard metric in a region, first device
metric() { "$GG" metrics --region "$1" 2>/dev/null | awk -v m="$2" 'index($1, m "{") == 1 { print $2; exit }'; }

# ---- the card's size for the test ------------------------------------------
timeout -k 5 60 "$BIN/card" ctx >"$D/ctx.out" 2>&1
# shellcheck disable=SC2046 # the line's words
set -- $(grep '^ctx ' "$D/ctx.out")
if [ "${1:-}" != ctx ] || [ "${2:-0}" -le 0 ]; then
	cat "$D/ctx.out"
	for r in $ROUNDS; do row "pods_$r" - - - - FAIL "no bare context figure (card ctx)"; done
	exit 1
fi
CTX=$2
FREE0=$(($4 + CTX)) # free with nobody on it but its neighbours
BUDGET=$((3 * (CTX + POD_MIB * MIB)))
BALLAST=0
if [ "$BUDGET" -lt "$FREE0" ]; then BALLAST=$((FREE0 - CTX - BUDGET)); fi
[ "$BALLAST" -ge $((64 * MIB)) ] || BALLAST=0
CARD_FREE=$FREE0
if [ "$BALLAST" -gt 0 ]; then
	mkfifo "$D/ballast.in"
	"$BIN/card" ballast "$BALLAST" <"$D/ballast.in" >"$D/ballast.out" 2>&1 &
	bpid=$!
	pids="$pids $bpid"
	exec 3>"$D/ballast.in"
	if ! wait_file "$D/ballast.out" '^holding ' "$WAIT" "$bpid"; then
		cat "$D/ballast.out"
		for r in $ROUNDS; do row "pods_$r" - - - - FAIL "the ballast did not take $BALLAST bytes"; done
		exit 1
	fi
	CARD_FREE=$(awk '/^holding /{print $4}' "$D/ballast.out")
fi
CEIL=$(((CARD_FREE - 3 * CTX) / 3 / (2 * MIB) * (2 * MIB)))
RUN_CEIL=$CEIL
[ "$FAULT" = overcommit ] && RUN_CEIL=$((CEIL * 3 / 2 / (2 * MIB) * (2 * MIB)))
echo "GGINFO pods: bare context $((CTX / MIB)) MiB; card free $((FREE0 / MIB)) MiB; ballast $((BALLAST / MIB)) MiB;" \
	"left to the pods $((CARD_FREE / MIB)) MiB; three ceilings of $((RUN_CEIL / MIB)) MiB; slack $((SLACK / MIB)) MiB"
[ "$CEIL" -gt $((512 * MIB)) ] || skip_all "the card leaves $((CARD_FREE / MIB)) MiB: too little for three pods"

# ---- one round: three pods and the watchers ---------------------------------
# start_pod NAME BIN MODE LOADING FD [nolib]: started, with NVML's PID for it
# in $D/NAME.nvpid (empty if none could be told)
start_pod() {
	n=$1
	before=$(nvml_pids)
	pre=$LIB
	[ "${6:-}" = nolib ] && pre=
	mkfifo "$D/$n.in"
	env LD_PRELOAD="$pre" CUDA_MODULE_LOADING="$4" GPUGUARD_RUNTIME=1 GPUGUARD_SHARED="$D/$n.region" \
		GPUGUARD_LIMIT="$RUN_CEIL" GPUGUARD_DUMP_DIR="$D" GPUGUARD_DUMP_MAX=0 GPUGUARD_TERMINATION_LOG= \
		"$2" "$3" hold <"$D/$n.in" >"$D/$n.out" 2>"$D/$n.err" &
	echo $! >"$D/$n.pid"
	pids="$pids $!"
	eval "exec $5>\"$D/$n.in\""
	if ! wait_file "$D/$n.out" '^started ' "$WAIT" "$(cat "$D/$n.pid")"; then
		: >"$D/$n.nvpid"
		return 1
	fi
	after=$(nvml_pids)
	me=$(cat "$D/$n.pid")
	if printf '%s\n' "$after" | grep -qx "$me"; then
		echo "$me" >"$D/$n.nvpid"
	else
		new=$(printf '%s\n' "$after" | grep -vxF "$(printf '%s\n' "$before")")
		if [ "$(printf '%s\n' "$new" | grep -c .)" = 1 ]; then echo "$new" >"$D/$n.nvpid"; else : >"$D/$n.nvpid"; fi
	fi
	return 0
}

start_watch() { # TAG
	"$BIN/nvml_watch" -i 20 -t 900 -o "$D/$1.watch" >/dev/null 2>"$D/$1.watch.err" &
	W=$!
	pids="$pids $W"
	S=
	if [ -n "$SMI" ]; then
		(while :; do
			"$SMI" --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>&1
			sleep 0.2
		done) >"$D/$1.smi" &
		S=$!
		pids="$pids $S"
	fi
	sleep 0.3
}
stop_watch() {
	kill "$W" 2>/dev/null
	wait "$W" 2>/dev/null
	[ -n "$S" ] && kill "$S" 2>/dev/null && wait "$S" 2>/dev/null
}

# judge NAME TAG: one pod's checks, failures appended to $D/TAG.fail, its
# figures to $D/TAG.table
judge() {
	n=$1 t=$2
	# shellcheck disable=SC2046 # the line's words
	set -- $(grep '^filled ' "$D/$n.out")
	filled=${2:--} err=${4:--} cref=${6:--} dref=${8:--}
	nvpid=$(cat "$D/$n.nvpid" 2>/dev/null)
	nvmax=-
	[ -n "$nvpid" ] && nvmax=$(awk -v p="$nvpid" '$1 == "max" && $3 == p { print $4 }' "$D/$t.watch")
	[ -n "$nvmax" ] || nvmax=-
	smimax=-
	if [ -n "$SMI" ] && [ -n "$nvpid" ]; then
		smimax=$(awk -F', *' -v p="$nvpid" '$1 == p && $2 + 0 > m { m = $2 + 0 } END { if (m != "") print m }' "$D/$t.smi")
		[ -n "$smimax" ] || smimax=-
	fi
	used=$(metric "$D/$n.region" gpuguard_device_used_bytes)
	rt=$(metric "$D/$n.region" gpuguard_device_runtime_bytes)
	printf '%-10s %-8s %10s %10s %10s %10s %10s %10s %s/%s\n' "$n" "${nvpid:--}" "$((RUN_CEIL / MIB))" \
		"$(mib "$filled")" "$(mib "${used:--}")" "$(mib "${rt:--}")" "$(mib "$nvmax")" "$smimax" "$cref" "$dref" \
		>>"$D/$t.table"
	if [ "$filled" = - ]; then
		echo "$n never filled: $(tail -q -n 1 "$D/$n.out" "$D/$n.err" 2>/dev/null | tr '\n|' '  ' | cut -c1-120)" >>"$D/$t.fail"
		return
	fi
	[ "$err" = 2 ] && [ "$cref" -ge 1 ] && [ "$dref" = 0 ] ||
		echo "$n: not refused by gpuguard alone (err $err, gpuguard $cref, driver $dref)" >>"$D/$t.fail"
	if [ "$nvmax" = - ]; then
		[ -n "$nvpid" ] || echo "$n: NVML's PID for it not found; the card's total is checked instead" >>"$D/$t.note"
		[ -n "$nvpid" ] && echo "$n: NVML never listed pid $nvpid" >>"$D/$t.fail"
	elif [ "$nvmax" -gt "$RUN_CEIL" ]; then
		echo "$n: NVML saw $nvmax bytes, over its ceiling $RUN_CEIL" >>"$D/$t.fail"
	elif [ "$nvmax" -lt $((RUN_CEIL - SLACK)) ]; then
		echo "$n: NVML saw at most $nvmax bytes, short of its ceiling $RUN_CEIL less $SLACK" >>"$D/$t.fail"
	fi
	if [ -n "$SMI" ] && [ "$smimax" = - ]; then
		echo "$n: nvidia-smi never listed pid ${nvpid:-?}" >>"$D/$t.smi_note"
	elif [ "$smimax" != - ] && [ $((smimax * MIB)) -gt $((RUN_CEIL + MIB)) ]; then
		echo "$n: nvidia-smi saw $smimax MiB, over its ceiling $((RUN_CEIL / MIB)) MiB" >>"$D/$t.fail"
	fi
}
mib() { case $1 in '' | - | *[!0-9]*) echo - ;; *) echo $(($1 / MIB)) ;; esac; }

# round TAG LOADING NAME:shared|static:MODE...
round() {
	t=$1 loading=$2
	shift 2
	: >"$D/$t.fail"
	: >"$D/$t.note"
	: >"$D/$t.smi_note"
	printf '%-10s %-8s %10s %10s %10s %10s %10s %10s %s\n' pod nvml-pid "ceil MiB" filled "gg used" "gg rt" \
		"NVML max" "smi max" "refused gg/drv" >"$D/$t.table"
	base=$(card_used)
	start_watch "$t"
	names='' fd=4 podno=0
	for spec in "$@"; do
		n=$t-${spec%%:*}
		rest=${spec#*:}
		bin=$REALLIB/rl_fill_shared
		[ "${rest%%:*}" = static ] && bin=$REALLIB/rl_fill_static
		nolib=
		podno=$((podno + 1))
		[ "$FAULT" = nolib ] && [ $podno = 2 ] && nolib=nolib
		start_pod "$n" "$bin" "${rest#*:}" "$loading" $fd $nolib ||
			echo "$n never started: $(tail -q -n 1 "$D/$n.out" "$D/$n.err" 2>/dev/null | tr '\n|' '  ' | cut -c1-120)" >>"$D/$t.fail"
		names="$names $n"
		fd=$((fd + 1))
	done
	for n in $names; do wait_file "$D/$n.out" '^filled ' "$WAIT" "$(cat "$D/$n.pid")"; done
	sleep 0.5 # the watchers see every pod full
	stop_watch
	for n in $names; do judge "$n" "$t"; done
	exec 4>&- 5>&- 6>&-
	for n in $names; do wait "$(cat "$D/$n.pid")" 2>/dev/null; done
	# the card as a whole, where a pod's NVML PID was not found
	if [ -s "$D/$t.note" ]; then
		top=$(awk '$1 == "card" && $2 == 0 { print $8 }' "$D/$t.watch")
		if [ -n "$top" ] && [ -n "$base" ] && [ $((top - base)) -gt $((3 * RUN_CEIL)) ]; then
			echo "the card's used grew by $((top - base)) bytes, over the three ceilings $((3 * RUN_CEIL))" >>"$D/$t.fail"
		fi
	fi
	grep -q '^errors 0$' "$D/$t.watch" 2>/dev/null || echo "the NVML watcher failed (see $t.watch.err)" >>"$D/$t.fail"
	report "$t" "CUDA_MODULE_LOADING=$loading" "3 pods"
}

# report TAG WHAT NOTE: the figures, and one row
report() {
	echo "== pods_$1 ($2; sizes in MiB)"
	cat "$D/$1.table"
	sed 's/^/note: /' "$D/$1.note" "$D/$1.smi_note" 2>/dev/null
	sed 's/^/GGFAIL pods: /' "$D/$1.fail"
	if [ -s "$D/$1.fail" ]; then
		row "pods_$1" - n/a - - FAIL "$(head -n 1 "$D/$1.fail" | tr '|' ' ')"
	else
		nv=yes
		[ -s "$D/$1.note" ] && nv="card total"
		smi=", nvidia-smi agrees"
		[ -n "$SMI" ] || smi=", no nvidia-smi"
		[ -s "$D/$1.smi_note" ] && smi=", $(head -n 1 "$D/$1.smi_note")"
		row "pods_$1" "$nv (NVML)" n/a "gpuguard's" n/a PASS "$3, ceiling $((RUN_CEIL / MIB)) MiB$smi"
	fi
}

# ---- kill -9: a full pod dies; the card and its region give its memory back
kill_round() {
	t='kill'
	: >"$D/$t.fail"
	: >"$D/$t.note"
	: >"$D/$t.smi_note"
	printf '%-10s %-8s %10s %10s %10s %10s %10s %10s %s\n' pod nvml-pid "ceil MiB" filled "gg used" "gg rt" \
		"NVML max" "smi max" "refused gg/drv" >"$D/$t.table"
	start_watch "$t"
	start_pod kill-a "$REALLIB/rl_fill_shared" cudart LAZY 7 || echo "kill-a never started" >>"$D/$t.fail"
	start_pod kill-b "$REALLIB/rl_fill_static" driver LAZY 8 || echo "kill-b never started" >>"$D/$t.fail"
	wait_file "$D/kill-a.out" '^filled ' "$WAIT" "$(cat "$D/kill-a.pid")"
	wait_file "$D/kill-b.out" '^filled ' "$WAIT" "$(cat "$D/kill-b.pid")"
	a_filled=$(awk '/^filled /{print $2}' "$D/kill-a.out")
	a_nv=$(cat "$D/kill-a.nvpid")
	before=$(card_used)
	kill -9 "$(cat "$D/kill-a.pid")"
	wait "$(cat "$D/kill-a.pid")" 2>/dev/null
	exec 7>&-
	# the driver takes a moment to tear a dead process down
	i=0
	while [ $i -lt 100 ]; do
		if [ -n "$a_nv" ]; then nvml_pids | grep -qx "$a_nv" || break; fi
		[ -z "$a_nv" ] && [ $((before - $(card_used))) -ge "${a_filled:-0}" ] && break
		sleep 0.1
		i=$((i + 1))
	done
	after=$(card_used)
	if [ -z "$a_filled" ]; then
		echo "kill-a never filled" >>"$D/$t.fail"
	elif [ $((before - after)) -lt "$a_filled" ]; then
		echo "after kill -9 the card gave back $((before - after)) bytes of the $a_filled kill-a held" >>"$D/$t.fail"
	fi
	# its pod's next process sweeps the dead one and takes the whole ceiling
	n=kill-c
	mkfifo "$D/$n.in"
	env LD_PRELOAD="$LIB" GPUGUARD_RUNTIME=1 GPUGUARD_SHARED="$D/kill-a.region" GPUGUARD_LIMIT="$RUN_CEIL" \
		GPUGUARD_DUMP_DIR="$D" GPUGUARD_DUMP_MAX=0 GPUGUARD_TERMINATION_LOG= \
		"$REALLIB/rl_fill_shared" cudart hold <"$D/$n.in" >"$D/$n.out" 2>"$D/$n.err" &
	echo $! >"$D/$n.pid"
	pids="$pids $!"
	exec 7>"$D/$n.in"
	cp "$D/kill-a.nvpid" "$D/$n.nvpid" # judged by the card's total below
	if wait_file "$D/$n.out" '^filled ' "$WAIT" "$(cat "$D/$n.pid")"; then
		# shellcheck disable=SC2046 # the line's words
		set -- $(grep '^filled ' "$D/$n.out")
		if [ "$2" -lt $((${a_filled:-0} - SLACK)) ] || [ "${8:-1}" != 0 ]; then
			echo "kill-c in the dead pod's region got $2 bytes (driver refusals ${8:-?}), kill-a had $a_filled" >>"$D/$t.fail"
		fi
		used=$(metric "$D/kill-a.region" gpuguard_device_used_bytes)
		if [ -z "$used" ] || [ "$used" -gt "$RUN_CEIL" ] || [ "$used" -lt "$2" ]; then
			echo "the dead pod's region holds ${used:-?} bytes (kill-c filled $2, ceiling $RUN_CEIL)" >>"$D/$t.fail"
		fi
	else
		echo "kill-c never filled: $(tail -n 1 "$D/$n.err" 2>/dev/null | tr '|' ' ')" >>"$D/$t.fail"
	fi
	stop_watch
	judge kill-b "$t"
	exec 7>&- 8>&-
	for n in kill-b kill-c; do wait "$(cat "$D/$n.pid")" 2>/dev/null; done
	report "$t" "kill -9 of a full pod, then its successor" "the card gave back $(((before - after) / MIB)) MiB, the successor filled $(($(awk '/^filled /{print $2}' "$D/kill-c.out") / MIB)) MiB"
}

for r in $ROUNDS; do
	case $r in
	lazy) round lazy LAZY a:shared:driver b:static:cudart c:shared:cublas ;;
	eager) round eager EAGER a:shared:cudart b:shared:nccl c:static:cublas ;;
	kill) kill_round ;;
	*) row "pods_$r" - - - - FAIL "GG_GPU_POD_ROUNDS: no round '$r' (lazy, eager, kill)" ;;
	esac
done
exec 3>&-
exit 0
