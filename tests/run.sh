#!/usr/bin/env bash
# Runs every test: the cmocka unit tests (normal and ASan+UBSan builds) and the
# integration scripts, then prints one closing line "N passed, N failed".
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
passed=0
failed=0
failures=()

count_cmocka() { # $1 = name, $2 = output file, $3 = exit code
	local p f
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$2" | tail -1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$2" | tail -1)
	p=${p:-0}
	f=${f:-0}
	if [ "$3" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1 # crashed (sanitizer report, signal) before cmocka could count
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	[ "$f" -ne 0 ] && failures+=("$1")
}

log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT

for flavour in rel asan; do
	for t in "$build/$flavour/tests/"test_*; do
		[ -x "$t" ] || continue
		[[ "$t" == *.d ]] && continue
		name="$flavour/$(basename "$t")"
		out="$log_dir/$(basename "$t").$flavour.log"
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
			"$t" >"$out" 2>&1
		rc=$?
		cat "$out"
		count_cmocka "$name" "$out" "$rc"
	done
done

export EDGEPROF="$PWD/$build/edgeprof"
export EDGEPROF_ASAN="$PWD/$build/edgeprof-asan"
for s in tests/integration/test_*.sh; do
	[ -f "$s" ] || continue
	out="$log_dir/$(basename "$s").log"
	bash "$s" >"$out" 2>&1
	rc=$?
	cat "$out"
	p=$(grep -c '^ok ' "$out")
	f=$(grep -c '^not ok ' "$out")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	passed=$((passed + p))
	failed=$((failed + f))
	[ "$f" -ne 0 ] && failures+=("$s")
done

[ ${#failures[@]} -ne 0 ] && echo "failing: ${failures[*]}"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
