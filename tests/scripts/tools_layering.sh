#!/bin/sh
# gpuguard: tools/ is layered too (issue 24). Each tools/*.c is compiled on
# its own into a scratch directory, and layering.sh reads the objects' call
# graph as it reads interpose/'s: no circle, every object placed in
# tests/tools_layers.txt, every call going down. (The host compiler is used
# whatever the build: the graph is the same on every target.) Its headers
# are held to the include checks too, except that tool.h, which every file
# includes, still declares the whole of tools/ (splitting it is left).
. "$(dirname "$0")/lib.sh"

CC_HOST=${GG_HOST_CC:-cc}
for c in tools/*.c; do
	n=$(basename "$c" .c)
	if ! $CC_HOST -std=gnu11 -Iinclude -pthread -c "$c" -o "$TMP/$n.o" 2>"$TMP/cc.err"; then
		bad "compile $c" "$TMP/cc.err"
		finish
	fi
done
GG_LAYERS_OBJ=$TMP GG_LAYERS_SRC=tools GG_LAYERS_API_HEADERS=tool.h GG_LAYERS_FILE=tests/tools_layers.txt sh "$(dirname "$0")/layering.sh" >"$TMP/out"
rc=$?
cat "$TMP/out"
# layering.sh's own harness line says what passed; this script adds none
tail -n 1 "$TMP/out" | grep -q '^harness:' || { echo "harness: 0 passed, 1 failed"; exit 1; }
exit $rc
