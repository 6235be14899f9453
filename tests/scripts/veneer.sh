#!/bin/sh
# gpuguard: every exported hook is one of veneer.h's frames (issue 24). In
# each interpose/ file that includes veneer.h: no exported function written
# by hand (a line `GG_EXPORT ... name(`) but those veneer.h exempts by name,
# each with its reason (its `veneer-exempt:` lines); no frame macro of its
# own (GG_EXPORT inside a #define); no GG_VENEER_REAL outside veneer.h. A
# failure names the file, the line and the hook.
#   GG_VENEER_SRC=DIR   the sources (default: interpose)
SRC=${GG_VENEER_SRC:-interpose}

. "$(dirname "$0")/lib.sh"

# the exempt names: after "veneer-exempt:", up to two spaces
awk '/veneer-exempt:/ { sub(/.*veneer-exempt: */, ""); sub(/  .*/, ""); print }' "$SRC/veneer.h" |
	tr ' ' '\n' | sed '/^$/d' | LC_ALL=C sort -u >"$TMP/exempt"
if [ -s "$TMP/exempt" ]; then
	ok
else
	bad "exempt: no veneer-exempt: line in $SRC/veneer.h (the check would have nothing to go by)"
fi

files=$(grep -l '^#include "veneer.h"' "$SRC"/*.c)
if [ -n "$files" ]; then
	ok
else
	bad "files: no file of $SRC includes veneer.h"
fi

: >"$TMP/byhand"
: >"$TMP/macros"
: >"$TMP/real"
for f in $files; do
	# hand-written exported definitions: GG_EXPORT at the start of a line,
	# the name before the first '('
	grep -n '^GG_EXPORT .*(' "$f" | sed 's/^\([0-9]*\):GG_EXPORT [^(]*[ *]\([A-Za-z_][A-Za-z_0-9]*\)(.*/\2 \1/' |
		while read -r name line; do
			grep -qx "$name" "$TMP/exempt" || echo "    $f:$line: $name" >>"$TMP/byhand"
		done
	grep -n 'GG_EXPORT.*\\$' "$f" | sed "s|^|    $f:|" >>"$TMP/macros"
	grep -n 'GG_VENEER_REAL(' "$f" | sed "s|^|    $f:|" >>"$TMP/real"
done

if [ -s "$TMP/byhand" ]; then
	bad "by hand: exported hooks written outside veneer.h's frames (use a GG_VENEER* macro, or exempt the name in veneer.h with its reason):" "$TMP/byhand"
else
	ok
fi
if [ -s "$TMP/macros" ]; then
	bad "frame macros: a hook frame defined outside veneer.h (add it to veneer.h):" "$TMP/macros"
else
	ok
fi
if [ -s "$TMP/real" ]; then
	bad "GG_VENEER_REAL outside veneer.h (a frame written by hand):" "$TMP/real"
else
	ok
fi
echo "veneer: $(echo $files | wc -w) files, exempt: $(tr '\n' ' ' <"$TMP/exempt")"
finish
