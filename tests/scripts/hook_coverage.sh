#!/bin/sh
# gpuguard: every entry point the vendor headers declare is classified, and
# every one that can allocate, free or run allocation nodes has a hook row
# (issue 25, item 3: cuGraphInstantiate_v2 had none, and a graph's memory
# escaped). Reads cuda.h (three ways: plain, per-thread default stream, the
# driver's own legacy names), cudaTypedefs.h (the ABI versions of each name)
# and HIP's hip_runtime_api.h; the real cudart's lookups
# (tests/abi/cudart13-lookups.txt); the rows of interpose/hooks.h; and the
# classification tests/abi/entry_points.txt. Fails on:
#   - an entry point no rule classifies;
#   - one classified `alloc` with no hook row;
#   - a governed name that cuGetProcAddress can be asked for, at a version
#     cudaTypedefs.h or cudart names, with no row serving that version (a
#     legacy ABI below every row must be classified `gap`).
# Where a header is missing, that part is skipped by name.
# Env: CC, CUDA_INC (or CUDA_HOME), HIP_INC, HOOKS_DIR.
CC=${CC:-cc}
ROOT=$(pwd)
RULES=$ROOT/tests/abi/entry_points.txt
HOOKS_DIR=${HOOKS_DIR:-$ROOT/interpose} # where hooks.h is (another, to show the test fails on it)
LOOKUPS=$ROOT/tests/abi/cudart13-lookups.txt
. "$ROOT/tests/abi/lib.sh"
T=$TMP

# The hook rows, one per line: "name base min below ptsz" (ptsz "-" where
# the row has none), through the preprocessor, as hook_cuda.c expands them.
cat >"$T/rows.c" <<'C'
#include "hooks.h"
#define H(n, b, min, below, shape, api) ROW n b min below - ;
#define HP(n, p, b, min, below, shape, api) ROW n b min below p ;
GG_CUDA_HOOKS(H, HP)
GG_CUDA_HOOKS_ELSEWHERE(H)
#define HH(n, shape, api) HIPROW n ;
GG_HIP_HOOKS(HH)
C
if ! $CC -E -P -I"$HOOKS_DIR" "$T/rows.c" >"$T/rows.i" 2>"$T/rows.err"; then
	fail "hooks.h does not expand"
	sed 's/^/    /' "$T/rows.err"
	exit 1
fi
tr ';' '\n' <"$T/rows.i" | sed -n 's/^ *ROW \([^ ]*\) \([^ ]*\) \([0-9]*\) \([0-9]*\) \([^ ]*\) *$/\1 \2 \3 \4 \5/p' >"$T/rows"
tr ';' '\n' <"$T/rows.i" | sed -n 's/^ *HIPROW \([^ ]*\) *$/\1/p' >"$T/hiprows"
# every symbol a row wraps (a row's name and its ptsz variant)
{
	awk '{ print $1; if ($5 != "-") print $5 }' "$T/rows"
	cat "$T/hiprows"
} | sort -u >"$T/hooked"
[ -s "$T/rows" ] && [ -s "$T/hiprows" ] || {
	fail "no hook rows read from hooks.h"
	exit 1
}

# classify NAME: the class and the line of the first rule matching NAME
# exactly (rules: "class regex reason..."), or nothing.
classify_all() { # stdin: names; stdout: "name class"
	awk -v rules="$RULES" '
		BEGIN {
			n = 0
			while ((getline line < rules) > 0) {
				if (line ~ /^[ \t]*(#|$)/) continue
				split(line, f, /[ \t]+/)
				cls[n] = f[1]; re[n] = "^(" f[2] ")$"; n++
			}
		}
		{
			c = "-"
			for (i = 0; i < n; i++) if ($1 ~ re[i]) { c = cls[i]; break }
			print $1, c
		}'
}

# check_names RUNTIME FILE: every name in FILE is classified; `alloc` ones
# are hooked. `gap` ones are listed (what README's limits name).
check_names() {
	rt=$1
	classify_all <"$2" >"$T/$rt.cls"
	unclassified=$(awk '$2 == "-" { printf " %s", $1 }' "$T/$rt.cls")
	if [ -n "$unclassified" ]; then
		fail "$rt: entry points no rule in tests/abi/entry_points.txt classifies:$unclassified"
	else
		ok "$rt: all $(wc -l <"$2" | tr -d ' ') declared entry points classified"
	fi
	unhooked=$(awk '$2 == "alloc" { print $1 }' "$T/$rt.cls" | while read -r n; do
		grep -qx "$n" "$T/hooked" || printf ' %s' "$n"
	done)
	if [ -n "$unhooked" ]; then
		fail "$rt: entry points that can allocate, free or run allocation nodes, with no hook row:$unhooked"
	else
		ok "$rt: every allocating entry point has a hook row ($(awk '$2 == "alloc"' "$T/$rt.cls" | wc -l | tr -d ' '))"
	fi
	gaps=$(awk '$2 == "gap" { printf " %s", $1 }' "$T/$rt.cls")
	[ -n "$gaps" ] && echo "     $rt: not governed, by decision (README \"Not governed\"):$gaps"
	# a row must wrap something the header declares (else it is a typo)
	stale=$(awk '$2 != "-"' "$T/$rt.cls" >/dev/null; for n in $(cat "$T/$rt.rows"); do
		grep -q "^$n " "$T/$rt.cls" || printf ' %s' "$n"
	done)
	if [ -n "$stale" ]; then
		fail "$rt: hook rows for names the header does not declare:$stale"
	else
		ok "$rt: every hook row names a declared entry point"
	fi
}

# declared FLAGS...: the function names cuda.h declares under FLAGS.
declared_cuda() {
	$CC -E -P -I"$cuda_inc" "$@" -x c "$cuda_inc/cuda.h" 2>/dev/null | tr '\n' ' ' |
		grep -oE '\bcu[A-Z][A-Za-z0-9_]*[ ]*\(' | tr -d ' ('
}

# --- CUDA --------------------------------------------------------------------
cuda_inc=$(cuda_headers cudaTypedefs.h)
if [ -z "$cuda_inc" ]; then
	skip "cuda: no cuda.h and cudaTypedefs.h (set CUDA_INC)"
else
	{
		declared_cuda
		declared_cuda -DCUDA_API_PER_THREAD_DEFAULT_STREAM
		declared_cuda -D__CUDA_API_VERSION_INTERNAL
	} | sort -u >"$T/cuda.names"
	# rows that wrap CUDA names, minus those that are not the driver's
	# (cuGetProcAddress is in cuda.h too)
	cut -d' ' -f1 "$T/rows" >"$T/cuda.rows"
	awk '$5 != "-" { print $5 }' "$T/rows" >>"$T/cuda.rows"
	check_names cuda "$T/cuda.names"

	# Versions. Each ABI of a name is a typedef PFN_<name>_v<version>[_ptsz]
	# in cudaTypedefs.h; cuGetProcAddress(name, v) hands out the newest ABI
	# at or below v. For each name a row governs, every ABI version and
	# every version cudart asks must find a row with min <= version, a
	# different row for each ABI, and one with a ptsz variant where the
	# ABI has one.
	sed -n 's/.*(CUDAAPI \*PFN_\(cu[A-Za-z0-9_]*\)_v\([0-9][0-9]*\)\(_ptsz\)*).*/\1 \2 \3/p' "$cuda_inc/cudaTypedefs.h" |
		sort -u >"$T/abis"
	awk '{ print $2 }' "$T/rows" | sort -u >"$T/bases"
	bad=
	while read -r base; do
		vs=$(awk -v b="$base" '$1 == b && $3 == "" { print $2 }' "$T/abis" | sort -n -u)
		[ -n "$vs" ] || continue # not a cuGetProcAddress name (none of ours today)
		asked=$(awk -v b="$base" '$1 == b { print $2 }' "$LOOKUPS" | sort -n -u)
		prev=
		for v in $vs $asked; do
			row=$(awk -v b="$base" -v v="$v" '$2 == b && ($4 == 0 || v < $4) { print; exit }' "$T/rows")
			min=$(echo "$row" | cut -d' ' -f3)
			if [ -z "$row" ] || [ "$v" -lt "$min" ]; then
				# below every row: a legacy ABI, handed out unwrapped
				legacy=$(awk -v b="$base" -v v="$v" '$1 == b && $2 <= v { n = $2 } END { print n }' "$T/abis")
				cls=$(echo "$base" | classify_all | cut -d' ' -f2)
				[ "$cls" = gap ] || bad="$bad $base@$v(no row; the legacy ABI of $legacy is not classified gap)"
				continue
			fi
			ptsz=$(awk -v b="$base" -v v="$v" '$1 == b && $2 <= v && $3 == "_ptsz" { p = 1 } END { print p + 0 }' "$T/abis")
			if [ "$ptsz" = 1 ] && [ "$(echo "$row" | cut -d' ' -f5)" = - ]; then
				bad="$bad $base@$v(the ABI has a _ptsz variant, the row none)"
			fi
		done
		# one row per ABI: consecutive ABIs must not share a row
		prow=
		for v in $vs; do
			row=$(awk -v b="$base" -v v="$v" '$2 == b && ($4 == 0 || v < $4) { print $1; exit }' "$T/rows")
			min=$(awk -v b="$base" -v v="$v" '$2 == b && ($4 == 0 || v < $4) { print $3; exit }' "$T/rows")
			[ -n "$row" ] && [ "$v" -ge "${min:-0}" ] || { prow=; continue; }
			[ -n "$prow" ] && [ "$row" = "$prow" ] && bad="$bad $base@$v(ABI $v served by the row of an older ABI, $row)"
			prow=$row
		done
	done <"$T/bases"
	if [ -n "$bad" ]; then
		fail "cuda: cuGetProcAddress versions with no row of their own:$bad"
	else
		ok "cuda: every ABI version in cudaTypedefs.h and cudart's lookups of a governed name finds its row"
	fi
	# every name cudart looks up is classified too
	awk '!/^#/ && $1 != "\"\"" { print $1 }' "$LOOKUPS" | sort -u >"$T/cudart.names"
	miss=$(classify_all <"$T/cudart.names" | awk '$2 == "-" { printf " %s", $1 }')
	if [ -n "$miss" ]; then
		fail "cudart: looked-up names no rule classifies:$miss"
	else
		ok "cudart: all $(wc -l <"$T/cudart.names" | tr -d ' ') names cudart 13 looks up classified"
	fi
fi

# --- HIP ---------------------------------------------------------------------
hip_inc=${HIP_INC:-/usr/include}
if [ ! -f "$hip_inc/hip/hip_runtime_api.h" ]; then
	skip "hip: no $hip_inc/hip/hip_runtime_api.h (install libamdhip64-dev or set HIP_INC)"
else
	$CC -E -P -D__HIP_PLATFORM_AMD__ -I"$hip_inc" -x c "$hip_inc/hip/hip_runtime_api.h" 2>/dev/null | tr '\n' ' ' |
		grep -oE '\bhip[A-Z][A-Za-z0-9_]*[ ]*\(' | tr -d ' (' | sort -u >"$T/hip.names"
	cp "$T/hiprows" "$T/hip.rows"
	check_names hip "$T/hip.names"
fi

finish
