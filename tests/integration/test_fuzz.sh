#!/usr/bin/env bash
# The libFuzzer targets (tests/fuzz/fuzz_*.c, issue 12): each builds, and
# replays its committed corpus (tests/fuzz/corpus/NAME: seeds and every
# input that once crashed it, kept as regression inputs) without a sanitizer
# report, a broken invariant or an allocation past the memory budget of the
# process it models (tests/fuzz/budget.sh); then a short deterministic run
# of each (-seed=1) mutates from there, the ingest target longer (20,000 batches:
# counts within wire.h's bounds, sums saturating, never wrapping). `make
# fuzz FUZZ_S=N` runs them for real.
source "$(dirname "$0")/lib.sh"

build=$(dirname "$EDGEPROF")
if ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
	clang -fsanitize=fuzzer -x c - -o "$TEST_TMP/probe" 2>/dev/null; then
	echo "# skipped: clang's libFuzzer (clang -fsanitize=fuzzer) is not installed"
	finish
fi
if ! make -s -j2 BUILD="$build" fuzz-build >"$TEST_TMP/build.log" 2>&1; then
	tail -20 "$TEST_TMP/build.log"
	not_ok "the fuzz targets build"
	finish
fi
ok "the fuzz targets build"
source tests/fuzz/budget.sh
# fuzz NAME LOG ARGS...: runs target NAME under its memory budget
# (tests/fuzz/budget.sh: a memory bomb is a failure), its output in LOG; on
# failure shows why
fuzz() {
	local name=$1 log=$2 mem
	shift 2
	mem=$(ep_fuzz_budget "$name")
	"$build/fuzz/fuzz_$name" -artifact_prefix="$TEST_TMP/$name-" -rss_limit_mb="$mem" \
		-malloc_limit_mb="$mem" "$@" >"$log" 2>&1 && return 0
	grep -m5 "fuzz_$name:\|ERROR\|SUMMARY\|Test unit written" "$log"
	return 1
}
# short runs: a few seconds each on a loaded machine, at each target's pace
declare -A runs=([ingest]=20000 [http]=300 [elf]=300 [import]=100)
for src in tests/fuzz/fuzz_*.c; do
	name=${src#tests/fuzz/fuzz_}
	name=${name%.c}
	# the committed corpus alone first (every regression input), then mutations
	check "fuzz_$name: every committed corpus input passes" \
		fuzz "$name" "$TEST_TMP/$name-corpus.log" -runs=0 "tests/fuzz/corpus/$name"
	mkdir -p "$TEST_TMP/corpus-$name"
	cp "tests/fuzz/corpus/$name"/* "$TEST_TMP/corpus-$name/"
	dict=()
	[ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
	check "fuzz_$name: ${runs[$name]:-2000} mutated inputs, no sanitizer report, broken invariant or memory bomb" \
		fuzz "$name" "$TEST_TMP/$name-fuzz.log" -runs="${runs[$name]:-2000}" -seed=1 \
		-max_len=8192 -timeout=60 "${dict[@]}" "$TEST_TMP/corpus-$name"
	grep -m1 'DONE' "$TEST_TMP/$name-fuzz.log" | sed "s/^/# fuzz_$name: /"
done
finish
