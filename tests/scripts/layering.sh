#!/bin/sh
# gpuguard: the library's core is layered (issue 12, step 3). From the built
# objects, each object's undefined symbols are resolved to the object that
# defines them, which gives the call graph between interpose/ files (or
# GG_LAYERS_SRC's: tools_layering.sh checks tools/ the same way). It must
# have no circle, and each object may call only objects of the layers below
# its own in tests/layers.txt, where every object has its place. A failure
# names the circle or the call.
#   GG_LAYERS_OBJ=DIR   the objects to read (default: $GG_TEST_BUILD/obj)
#   GG_LAYERS_GRAPH=1   print the graph (caller callee symbol) and stop
#   GG_LAYERS_SRC=DIR   the sources the objects are built from (default: interpose)
#   GG_LAYERS_FILE=F    the layers (default: tests/layers.txt)
OBJ=${GG_LAYERS_OBJ:-${GG_TEST_BUILD:-build}/obj}
LAYERS=${GG_LAYERS_FILE:-tests/layers.txt}
SRC=${GG_LAYERS_SRC:-interpose}

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

# 1. No circle. Tarjan's algorithm gives the groups of objects that reach
# each other (each group one or more circles); then one circle in each.
groups=$(awk '
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
	END { for (v in node) if (!(v in index_)) connect(v) }' "$TMP/pairs")
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
awk '!/^#/ && NF >= 2 { for (i = 2; i <= NF; i++) print $i, NR, $1 }' "$LAYERS" | LC_ALL=C sort >"$TMP/rank"
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

finish
