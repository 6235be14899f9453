#!/bin/sh
# gpuguard: the library's core is layered (issue 12, step 3), in its calls
# and in its includes (issue 24). From the built objects, each object's
# undefined symbols are resolved to the object that defines them, which
# gives the call graph between interpose/ files. It must have no circle, and
# each object may call only objects of the layers below its own in
# tests/layers.txt, where every object has its place. From the sources, each
# interpose/ header has a layer too (X.h that of X.c; any other is named in
# tests/layers.txt): a .c may include (the compiler's -MM list, so what its
# headers include too) only headers of its own layer or below, a header
# likewise (its #include "..." lines), the headers include each other in no
# circle, each X.c includes its own X.h first of ours, and each header
# compiles alone. A failure names the circle, the call or the include.
#   GG_LAYERS_OBJ=DIR   the objects to read (default: $GG_TEST_BUILD/obj)
#   GG_LAYERS_SRC=DIR   the sources (default: interpose)
#   GG_LAYERS_GRAPH=1   print the graph (caller callee symbol) and stop
#   GG_LAYERS_API_HEADERS="X.h ..."  headers that declare a whole directory's
#                       functions (tools/tool.h), left out of check 8 only
OBJ=${GG_LAYERS_OBJ:-${GG_TEST_BUILD:-build}/obj}
SRC=${GG_LAYERS_SRC:-interpose}
LAYERS=${GG_LAYERS_FILE:-tests/layers.txt}
CC=${CC:-cc}

. "$(dirname "$0")/lib.sh"

if ! ls "$OBJ"/*.o >/dev/null 2>&1; then
	echo "tests/scripts/layering.sh: no objects in $OBJ (make lib)"
	failed=3
	finish
fi

# symbol object: who defines what (global symbols, code and data alike),
# then who needs what; joined, they are the edges "caller callee symbol".
# (an object whose source is gone, left over in a build directory, is
# not part of the library)
for o in "$OBJ"/*.o; do
	n=$(basename "$o" .o)
	[ -f "$SRC/$n.c" ] || continue
	nm --defined-only "$o" | awk -v o="$n" 'NF == 3 && $2 ~ /^[A-Z]$/ { print $3, o }'
done | LC_ALL=C sort >"$TMP/defs"
for o in "$OBJ"/*.o; do
	n=$(basename "$o" .o)
	[ -f "$SRC/$n.c" ] || continue
	nm -u "$o" | awk -v o="$n" '{ print $NF, o }'
done | LC_ALL=C sort >"$TMP/uses"
LC_ALL=C join "$TMP/uses" "$TMP/defs" | awk '$2 != $3 { print $2, $3, $1 }' | LC_ALL=C sort -u >"$TMP/edges"
if [ -n "$GG_LAYERS_GRAPH" ]; then
	cat "$TMP/edges"
	exit 0
fi
awk '{ print $1, $2 }' "$TMP/edges" | LC_ALL=C sort -u >"$TMP/pairs"

# circles FILE: the groups of nodes that reach each other in the graph FILE
# ("from to" lines), one line each, by Tarjan's algorithm.
circles() {
	awk '
		{ adj[$1] = adj[$1] " " $2; node[$1] = 1; node[$2] = 1 }
		function connect(v,   n, i, w, x, g, c) {
			index_[v] = low[v] = ++counter
			stack[++sp] = v
			on[v] = 1
			n = split(adj[v], w, " ")
			for (i = 1; i <= n; i++) {
				if (!(w[i] in index_)) {
					connect(w[i])
					if (low[w[i]] < low[v]) low[v] = low[w[i]]
				} else if (on[w[i]] && index_[w[i]] < low[v])
					low[v] = index_[w[i]]
			}
			if (low[v] == index_[v]) {
				g = ""
				c = 0
				do {
					x = stack[sp--]
					on[x] = 0
					g = g " " x
					c++
				} while (x != v)
				if (c > 1) print substr(g, 2)
			}
		}
		END { for (v in node) if (!(v in index_)) connect(v) }' "$1"
}

# 1. No circle. circles gives the groups of objects that reach each other
# (each group one or more circles); then one circle in each.
groups=$(circles "$TMP/pairs")
if [ -z "$groups" ]; then
	echo "ok   acyclic: $(wc -l <"$TMP/pairs") calls between $(ls "$SRC"/*.c | wc -l) objects, no circle"
	ok
else
	echo "FAIL acyclic: objects that call each other round a circle, by group:"
	echo "$groups" | while read -r g; do
		# the shortest way back to the group's first object, by breadth
		awk -v g="$g" '
			BEGIN { n = split(g, m, " "); for (i = 1; i <= n; i++) in_g[m[i]] = 1 }
			in_g[$1] && in_g[$2] { adj[$1] = adj[$1] " " $2 }
			END {
				s = m[1]; q[1] = s; h = 1; t = 1; seen[s] = 1
				while (h <= t) {
					v = q[h++]
					k = split(adj[v], w, " ")
					for (i = 1; i <= k; i++) {
						if (w[i] == s) {
							p = s
							for (x = v; x != s; x = from[x]) p = x " -> " p
							print "    {" g "}: " s " -> " p
							exit
						}
						if (!seen[w[i]]) { seen[w[i]] = 1; from[w[i]] = v; q[++t] = w[i] }
					}
				}
			}' "$TMP/pairs"
	done
	failed=$((failed + 1))
fi

# 2. Every object has a layer, and every layer's object exists.
awk '!/^#/ && NF >= 2 { for (i = 2; i <= NF; i++) if ($i !~ /\.h$/) print $i, NR, $1 }' "$LAYERS" | LC_ALL=C sort >"$TMP/rank"
missing=
for c in "$SRC"/*.c; do
	n=$(basename "$c" .c)
	grep -q "^$n " "$TMP/rank" || missing="$missing $n"
done
stale=
for n in $(awk '{ print $1 }' "$TMP/rank"); do
	[ -f "$OBJ/$n.o" ] || stale="$stale $n"
done
if [ -z "$missing$stale" ]; then
	echo "ok   placed: every object has one layer in $LAYERS"
	ok
else
	[ -n "$missing" ] && echo "FAIL placed: no layer in $LAYERS for:$missing (add each to the layer it belongs to)"
	[ -n "$stale" ] && echo "FAIL placed: $LAYERS names objects that are not built:$stale"
	failed=$((failed + 1))
fi

# 3. Calls go down only: a caller's layer is above its callee's.
up=$(LC_ALL=C join "$TMP/edges" "$TMP/rank" | awk '{ print $2, $1, $3, $4, $5 }' | LC_ALL=C sort |
	LC_ALL=C join - "$TMP/rank" |
	awk '$6 >= $4 { k = $2 " (" $5 ") -> " $1 " (" $7 ")"; n[k]++; if (n[k] <= 3) s[k] = s[k] " " $3 }
		END { for (k in n) print "    " k ":" s[k] (n[k] > 3 ? " and " n[k] - 3 " more" : "") }' | LC_ALL=C sort)
if [ -z "$up" ]; then
	echo "ok   downward: every call goes to a lower layer"
	ok
else
	echo "FAIL downward: calls to the caller's own layer or one above it ($LAYERS):"
	echo "$up"
	failed=$((failed + 1))
fi

# 4. Every header has a layer: X.h that of X.c, any other its own place in
# $LAYERS (and every header named there exists). "name rank layer" lines,
# the .c files' too, for the include checks.
awk '!/^#/ && NF >= 2 { for (i = 2; i <= NF; i++) if ($i ~ /\.h$/) print $i, NR, $1 }' "$LAYERS" | LC_ALL=C sort >"$TMP/hrank"
awk '{ print $1 ".c", $2, $3 }' "$TMP/rank" >"$TMP/files"
missing=
for h in "$SRC"/*.h; do
	n=$(basename "$h")
	if [ -f "$SRC/${n%.h}.c" ]; then
		grep "^${n%.h} " "$TMP/rank" | awk -v h="$n" '{ print h, $2, $3 }' >>"$TMP/files"
	elif grep -q "^$n " "$TMP/hrank"; then
		grep "^$n " "$TMP/hrank" >>"$TMP/files"
	else
		missing="$missing $n"
	fi
done
stale=
for n in $(awk '{ print $1 }' "$TMP/hrank"); do
	[ -f "$SRC/$n" ] || stale="$stale $n"
done
LC_ALL=C sort -u -o "$TMP/files" "$TMP/files"
if [ -z "$missing$stale" ]; then
	echo "ok   headers placed: each of $(ls "$SRC"/*.h | wc -l) headers has a layer (X.h: X.c's)"
	ok
else
	[ -n "$missing" ] && echo "FAIL headers placed: no X.c and no layer in $LAYERS for:$missing (name it on its layer's line)"
	[ -n "$stale" ] && echo "FAIL headers placed: $LAYERS names headers that do not exist:$stale"
	failed=$((failed + 1))
fi

# 5. Includes go down (or stay level): "includer included" pairs. A .c's are
# the compiler's (-MM: what its headers include too), a header's its own
# #include "..." lines that name a file of $SRC.
: >"$TMP/incs"
: >"$TMP/hincs"
for c in "$SRC"/*.c; do
	n=$(basename "$c")
	if ! $CC -MM -Iinclude -iquote "$SRC" "$c" >"$TMP/mm" 2>"$TMP/mm.err"; then
		bad "includes: $CC -MM $c failed" "$TMP/mm.err"
		continue
	fi
	tr -s ' \\' '\n\n' <"$TMP/mm" | sed -n "s|^$SRC/\([^/]*\.h\)\$|\1|p" | awk -v c="$n" '{ print c, $1 }' >>"$TMP/incs"
done
for h in "$SRC"/*.h; do
	n=$(basename "$h")
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$h" | while read -r i; do
		[ -f "$SRC/$i" ] && echo "$n $i"
	done >>"$TMP/hincs"
done
cat "$TMP/hincs" >>"$TMP/incs"
up=$(LC_ALL=C sort -u "$TMP/incs" | LC_ALL=C join - "$TMP/files" | awk '{ print $2, $1, $3, $4 }' | LC_ALL=C sort |
	LC_ALL=C join - "$TMP/files" | awk '$5 > $3 { print "    " $2 " (" $4 ") includes " $1 " (" $6 ")" }' | LC_ALL=C sort)
unplaced=$(LC_ALL=C sort -u "$TMP/incs" | awk '{ print $2 }' | LC_ALL=C sort -u | LC_ALL=C join -v 1 - "$TMP/files")
if [ -z "$up$unplaced" ]; then
	echo "ok   includes: $(LC_ALL=C sort -u "$TMP/incs" | wc -l) includes of $SRC/ headers, each of its includer's layer or below"
	ok
else
	echo "FAIL includes: headers of a layer above their includer's ($LAYERS):"
	[ -n "$up" ] && echo "$up"
	[ -n "$unplaced" ] && echo "    with no layer:" $unplaced
	failed=$((failed + 1))
fi

# 6. No circle among the headers (a level include could close one).
groups=$(circles "$TMP/hincs")
if [ -z "$groups" ]; then
	echo "ok   header circles: $(wc -l <"$TMP/hincs") includes between headers, no circle"
	ok
else
	echo "FAIL header circles: headers that include each other round a circle:"
	echo "$groups" | sed 's/^/    /'
	failed=$((failed + 1))
fi

# 7. Each X.c with an X.h includes it first of ours, so that X.h is seen
# to stand on its own; and every header compiles alone (its static inlines
# unused there: clang, compiling a header as the file, would say so).
first=
for c in "$SRC"/*.c; do
	n=$(basename "$c" .c)
	[ -f "$SRC/$n.h" ] || continue
	f=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$c" | head -n 1)
	[ "$f" = "$n.h" ] || first="$first $n.c($f)"
done
if [ -z "$first" ]; then
	echo "ok   own header first: each X.c's first #include \"...\" is its X.h"
	ok
else
	echo "FAIL own header first: these include another header before their own (the first named):$first"
	failed=$((failed + 1))
fi
# (GCC's -aux-info, where the compiler has it, keeps each header's
# declarations for check 8.)
aux=
$CC -fsyntax-only -aux-info "$TMP/aux" -x c /dev/null >/dev/null 2>&1 && aux=1
alone=
for h in "$SRC"/*.h; do
	# shellcheck disable=SC2046 # no words, or the two of -aux-info
	if ! $CC -std=gnu11 -Wall -Wextra -Werror -Wno-unused-function -Wno-unused-const-variable -fsyntax-only \
		-Iinclude -iquote "$SRC" $([ -n "$aux" ] && echo "-aux-info $TMP/aux.$(basename "$h")") -x c "$h" >"$TMP/alone" 2>&1; then
		alone="$alone $(basename "$h")"
		sed 's/^/    /' "$TMP/alone" | head -n 5 >>"$TMP/alone.all"
	fi
done
if [ -z "$alone" ]; then
	echo "ok   self-contained: each header compiles alone"
	ok
else
	echo "FAIL self-contained: headers that do not compile alone:$alone"
	cat "$TMP/alone.all"
	failed=$((failed + 1))
fi


# 8. Each function X.h declares is defined by X.c, and one a header with
# no .c of its name declares, by an object of the header's layer: a
# declaration lives in the header of the file that defines it, so a
# header's layer is its functions' (GCC's -aux-info lists the declarations
# a header makes; the library's own symbols only, libc's are not ours).
if [ -n "$aux" ]; then
	elsewhere=
	for h in "$SRC"/*.h; do
		n=$(basename "$h" .h)
		case " ${GG_LAYERS_API_HEADERS:-} " in
		*" $n.h "*) continue ;; # a whole directory's API, declared at its bottom
		esac
		if [ -f "$SRC/$n.c" ]; then
			owners=$n
		else
			r=$(awk -v h="$n.h" '$1 == h { print $2 }' "$TMP/files")
			[ -n "$r" ] || continue
			owners=$(awk -v r="$r" '$2 == r { print $1 }' "$TMP/rank")
		fi
		[ -f "$TMP/aux.$n.h" ] || continue
		grep -F "/* $h:" "$TMP/aux.$n.h" | grep ':NC \*/ extern ' | sed 's/ *(.*//; s/.*[ *]//' | LC_ALL=C sort -u |
			LC_ALL=C join - "$TMP/defs" >"$TMP/decl"
		undef=$(awk -v own=" $(echo $owners) " 'index(own, " " $2 " ") == 0 { print $1 "(" $2 ")" }' "$TMP/decl" | tr '\n' ' ')
		[ -n "$undef" ] && elsewhere="$elsewhere
    $n.h: $undef"
	done
	if [ -z "$elsewhere" ]; then
		echo "ok   declared where defined: each header declares only its own layer's functions (X.h: X.c's)"
		ok
	else
		echo "FAIL declared where defined: functions declared in a header but defined elsewhere (the definer named):$elsewhere"
		failed=$((failed + 1))
	fi
else
	skip "declared where defined: $CC has no -aux-info (GCC's)"
fi

finish
