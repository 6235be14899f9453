#!/bin/sh
# gpuguard: the dump schema (include/gpuguard/schema.h) against what reads
# and writes dumps. The library's dumps from the stand-in servers and the
# benchmark's generated dump must follow the list exactly (types in order,
# keys in order); the golden dumps, written by hand, must use only its keys.
# Writer -> loader round trip: `gpuguard report` reads each library dump
# with no warning (no skipped record, the trailer's count agreeing).
. "$(dirname "$0")/lib.sh"
CHECK="$GG_TEST_BUILD/tests/tools/schemacheck"
GG="$GG_TEST_BUILD/bin/gpuguard"
FAIL_PREFIX=schema-
# A ceiling the servers pass, so each writes a refusal dump and an exit dump.
for s in vllm_like torch_like jax_like trtllm_like nvml_sized plain_c; do
	mkdir "$TMP/$s"
	env LD_PRELOAD="$GG_TEST_PRELOAD" LD_LIBRARY_PATH="$GG_TEST_SIMDIR" GPUGUARD_SHARED="$TMP/$s/region" \
		GPUGUARD_DUMP_DIR="$TMP/$s" GPUGUARD_DUMP_AT_EXIT=1 GPUGUARD_LIMIT=2Gi GPUGUARD_TERMINATION_LOG= \
		"$GG_TEST_BUILD/tests/servers/$s" >"$TMP/$s.log" 2>&1
	n=0
	for d in "$TMP/$s"/gpuguard-*.jsonl; do
		[ -f "$d" ] || continue
		n=$((n + 1))
		if "$CHECK" "$d" >"$TMP/out" 2>&1; then ok; else bad "writer-$s" "$TMP/out"; fi
		if "$GG" report "$d" >/dev/null 2>"$TMP/err" && [ ! -s "$TMP/err" ]; then
			ok
		else
			bad "roundtrip-$s" "$TMP/err"
		fi
	done
	if [ $n -ge 2 ]; then ok; else echo "    $s wrote $n dumps" >"$TMP/out" && bad "dumps-$s" "$TMP/out"; fi
done
"$GG_TEST_BUILD/tests/bench/gen_dump" 300 >"$TMP/gen.jsonl"
if "$CHECK" "$TMP/gen.jsonl" >"$TMP/out" 2>&1; then ok; else bad generator "$TMP/out"; fi
if "$GG" report "$TMP/gen.jsonl" >/dev/null 2>"$TMP/err" && [ ! -s "$TMP/err" ]; then ok; else bad gen-load "$TMP/err"; fi
for g in tests/golden/*.jsonl; do
	case $g in */bad_* | */truncated.jsonl) continue ;; esac
	if "$CHECK" -u "$g" >"$TMP/out" 2>&1; then ok; else bad "golden-$(basename "$g" .jsonl)" "$TMP/out"; fi
done
finish
