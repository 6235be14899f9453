#!/bin/sh
# gpuguard: `gpuguard run`'s flags come from the option rows
# (include/gpuguard/options.h). Every flag its help lists sets the variable
# the help names, in both forms, and docs/report.md's synopsis of `gpuguard run`
# lists the same flags in the same order, each for an option README's table
# has (issue 12 step 4).
ROOT=$(pwd)
GG="${GG_TEST_BUILD:-$ROOT/build}/bin/gpuguard"
. "$(dirname "$0")/lib.sh"
if [ ! -x "$GG" ]; then
	bad "$GG is missing (make all)"
	finish
fi
# The child runs with the library preloaded; under a sanitizer the
# (instrumented) library needs its runtime preloaded too (golden.sh).
PRE=${SAN_RUNTIME:-}
[ -n "$PRE" ] && export ASAN_OPTIONS="${ASAN_OPTIONS}:verify_asan_link_order=0"

"$GG" run --help >"$TMP/help" || bad "run --help exits $?"
# "    --dump-dir D" and, on the next line, "sets GPUGUARD_DUMP_DIR ...".
awk '/^OPTIONS/ { on = 1; next } /^[A-Z]/ { on = 0 }
	on && /^    --[a-z-]+ [A-Z]+$/ { flag = $1; meta = $2; next }
	on && flag != "" { if (match($0, /sets GPUGUARD_[A-Z_]+/)) print flag, meta, substr($0, RSTART + 5, RLENGTH - 5); flag = "" }' \
	"$TMP/help" >"$TMP/flags"
[ -s "$TMP/flags" ] && ok || bad "run --help lists no flag that sets a variable"

while read -r flag meta var; do
	out=$(LD_PRELOAD="$PRE" "$GG" run "$flag=x-$meta" -- sh -c "printf %s \"\$$var\"")
	[ "$out" = "x-$meta" ] && ok || bad "run $flag=x-$meta: $var is '$out'"
	out=$(LD_PRELOAD="$PRE" "$GG" run "$flag" "y-$meta" -- sh -c "printf %s \"\$$var\"")
	[ "$out" = "y-$meta" ] && ok || bad "run $flag y-$meta: $var is '$out'"
	grep -q "^| \`$var\` |" README.md && ok || bad "$flag sets $var, which README.md's options table lacks"
	echo "[$flag $meta]" >>"$TMP/want"
done <"$TMP/flags"

# docs/report.md: `gpuguard run [--limit Q] ... [--] CMD…`, perhaps over lines.
tr '\n' ' ' <docs/report.md | grep -o '`gpuguard run \[--[^`]*`' | head -n 1 | grep -o '\[--[a-z-]* [A-Z]*\]' >"$TMP/readme"
if cmp -s "$TMP/want" "$TMP/readme"; then
	ok
else
	bad "docs/report.md's synopsis of gpuguard run differs from its help (want, then README):"
	paste -d '|' "$TMP/want" "$TMP/readme" | sed 's/^/  /'
fi
# The help's own synopsis, too.
sed -n '/^SYNOPSIS/,/^$/p' "$TMP/help" | tr '\n' ' ' | grep -o '\[--[a-z-]* [A-Z]*\]' >"$TMP/synopsis"
cmp -s "$TMP/want" "$TMP/synopsis" && ok || bad "run --help's synopsis and OPTIONS list different flags"

finish
