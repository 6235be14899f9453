#!/bin/sh
# gpuguard: checks the pod reservation protocol (tests/model/pod.pml) with
# spin. The protocol must pass; the old protocol, each swapped order and the
# old summed runtime word (issue 22) must be caught (the model can fail);
# so must the credit's wrong orders, a refuser that does not take the
# credits back (a false refusal) and a release into the credit (issue 24).
# Two processes: exhaustive (the mixed sizes: a supertrace). Three: a
# supertrace (bitstate) search, which covers most but not provably all
# states. SKIPs where spin or a C compiler is missing.
ROOT=$(pwd)
MODEL="$ROOT/tests/model/pod.pml"
if ! command -v spin >/dev/null 2>&1; then
	echo "SKIP: spin is not installed (tests/deps.sh installs the Debian package spin)"
	echo "harness: 0 passed, 0 failed, 1 skipped"
	exit 0
fi
CC=${CC:-cc}
. "$(dirname "$0")/lib.sh"
# check NAME WANT(pass|fail) PANFLAGS CCFLAGS DEFINES...
check() {
	name=$1 want=$2 panflags=$3 ccflags=$4
	shift 4
	d="$TMP/$name"
	mkdir -p "$d"
	{
		for def in "$@"; do echo "#define $def"; done
		cat "$MODEL"
	} >"$d/m.pml"
	(cd "$d" && spin -a m.pml >spin.out 2>&1 && $CC -O2 -w -DSAFETY $ccflags -o pan pan.c >cc.out 2>&1 &&
		timeout ${GG_MODEL_TIME:-180} ./pan $panflags >pan.out 2>&1)
	errs=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$d/pan.out")
	states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$d/pan.out")
	if [ -z "$errs" ]; then
		bad "$name: spin did not finish"
		cat "$d/spin.out" "$d/cc.out" "$d/pan.out" | tail -n 20
	elif { [ "$want" = pass ] && [ "$errs" = 0 ]; } || { [ "$want" = fail ] && [ "$errs" != 0 ]; }; then
		ok
		echo "ok   $name: $states states, errors: $errs (want $want)"
	else
		bad "$name: errors: $errs, want $want"
		grep -E "assertion violated|invalid end" "$d/pan.out" | head -n 3
	fi
}
EX="-m1000000"
# Credit (issue 24) needs room for one request and a refill: LIMIT 2. Its
# runs go past 1M steps deep, and hash-compaction (HC4) keeps them within
# MEMLIM; the mixed sizes take a supertrace.
CR="-m3000000"
check two-procs-limit1 pass "$EX" "-DMEMLIM=1024" TWO "LIMIT 1"
check two-procs-credit pass "$CR" "-DMEMLIM=1024 -DHC4" TWO "LIMIT 2"
check two-procs-mixed-supertrace pass "-w${GG_MODEL_BITS:-24} $CR" "-DBITSTATE" TWO "LIMIT 2" MIXED
check old-protocol-over-reclaims fail "$EX" "-DMEMLIM=1024" TWO "LIMIT 1" OLD_PROTOCOL
check read-used-first-passes-ceiling fail "$EX" "-DMEMLIM=1024" TWO "LIMIT 1" READ_USED_FIRST
check commit-claim-first-passes-ceiling fail "$EX" "-DMEMLIM=1024" TWO "LIMIT 1" COMMIT_CLAIM_FIRST
check old-runtime-word-keeps-the-dead fail "$EX" "-DMEMLIM=1024" TWO "LIMIT 2" OLD_RUNTIME
check credit-cas-first-passes-ceiling fail "$CR" "-DMEMLIM=1024 -DHC4" TWO "LIMIT 2" CREDIT_GRANT_CAS_FIRST
check credit-no-steal-refuses-falsely fail "$CR" "-DMEMLIM=1024 -DHC4" TWO "LIMIT 2" NO_STEAL
check credit-fast-release-passes-ceiling fail "$CR" "-DMEMLIM=1024 -DHC4" TWO "LIMIT 2" CREDIT_FAST_RELEASE
check three-procs-supertrace pass "-w${GG_MODEL_BITS:-23} -m200000" "-DBITSTATE" "LIMIT 2"
finish
