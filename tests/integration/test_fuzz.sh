#!/usr/bin/env bash
# The ingest fuzz target (tests/fuzz/fuzz_ingest.c, issue 18): a short,
# deterministic libFuzzer run (-seed=1, 20,000 inputs) from the committed
# corpus, decoded, checked and merged as the collector does, must end without
# a sanitizer report or a broken invariant (counts within wire.h's bounds,
# sums saturating, never wrapping). `make fuzz` runs it longer.
source "$(dirname "$0")/lib.sh"

build=$(dirname "$EDGEPROF")
if ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
	clang -fsanitize=fuzzer -x c - -o "$TEST_TMP/probe" 2>/dev/null; then
	echo "# skipped: clang's libFuzzer (clang -fsanitize=fuzzer) is not installed"
	finish
fi
if ! make -s BUILD="$build" "$build/fuzz/fuzz_ingest"; then
	not_ok "the ingest fuzz target builds"
	finish
fi
ok "the ingest fuzz target builds"
mkdir -p "$TEST_TMP/corpus"
cp tests/fuzz/corpus/ingest/* "$TEST_TMP/corpus/"
# fuzz LOG ARGS...: runs the target, its output in LOG; on failure shows why
fuzz() {
	local log=$1
	shift
	"$build/fuzz/fuzz_ingest" -artifact_prefix="$TEST_TMP/" "$@" >"$log" 2>&1 && return 0
	grep -m5 'fuzz_ingest:\|ERROR\|SUMMARY' "$log"
	return 1
}
# the committed corpus alone first (every regression input), then mutations
check "every committed corpus input passes" \
	fuzz "$TEST_TMP/corpus.log" -runs=0 tests/fuzz/corpus/ingest
check "20,000 fuzzed batches: no sanitizer report, no broken invariant" \
	fuzz "$TEST_TMP/fuzz.log" -runs=20000 -seed=1 -max_len=4096 -timeout=10 \
	-dict=tests/fuzz/ingest.dict "$TEST_TMP/corpus"
grep -m1 'DONE' "$TEST_TMP/fuzz.log" | sed 's/^/# /'
finish
