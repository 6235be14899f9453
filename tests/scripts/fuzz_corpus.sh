#!/bin/sh
# gpuguard: regression run of the report fuzz target (tests/fuzz/) over the
# golden dumps and any crash inputs kept in tests/fuzz/corpus/. Needs clang
# with libFuzzer; where it is absent the check is reported as skipped.
# `make fuzz` is the real fuzzing run.
ROOT=$(pwd)
OUT="${GG_TEST_BUILD:-$ROOT/build}/fuzz"
BIN="$OUT/fuzz_report_check"
if ! command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1; then
	echo "harness: 0 passed, 0 failed, 1 skipped"
	exit 0
fi
mkdir -p "$OUT"
# Rebuild only when a source changed: the compile is most of the cost.
if [ ! -x "$BIN" ] || [ -n "$(find tools tests/fuzz/fuzz_report.c include -newer "$BIN" -name '*.[ch]' 2>/dev/null)" ]; then
	# shellcheck disable=SC2046
	"${FUZZ_CC:-clang}" -std=gnu11 -g -O1 -Iinclude -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined -o "$BIN" tests/fuzz/fuzz_report.c \
		$(ls tools/*.c | grep -v 'tools/main.c') || {
		echo "FAIL: building the fuzz target"
		echo "harness: 0 passed, 1 failed"
		exit 1
	}
fi
n=0
for f in tests/golden/*.jsonl tests/fuzz/corpus/*; do
	[ -f "$f" ] && n=$((n + 1))
done
if ASAN_OPTIONS=detect_leaks=1 "$BIN" tests/golden/*.jsonl $(ls tests/fuzz/corpus/* 2>/dev/null) >"$OUT/check.log" 2>&1; then
	echo "harness: $n passed, 0 failed"
else
	tail -n 30 "$OUT/check.log"
	echo "harness: 0 passed, 1 failed"
	exit 1
fi
