#!/usr/bin/env bash
# Bad input gets a clear one-line error naming the input, a non-zero exit,
# no crash (the ASan+UBSan build runs here), and what was read stays usable.
source "$(dirname "$0")/lib.sh"

ep=$EDGEPROF_ASAN
fx=$FIXTURES
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
prop=$fx/propeller_sample_1.perfdata1
bin=$fx/propeller_sample_1.bin

# expect_fail NAME PATTERN CMD...: CMD exits 1 or 2 (not a crash) and stderr
# matches PATTERN
expect_fail() {
	local name=$1 pattern=$2
	shift 2
	"$@" >"$TEST_TMP/out" 2>"$TEST_TMP/err"
	local rc=$?
	if [ "$rc" -ne 1 ] && [ "$rc" -ne 2 ]; then
		not_ok "$name (exit code $rc)"
		cat "$TEST_TMP/err"
	elif ! grep -qE -- "$pattern" "$TEST_TMP/err"; then
		not_ok "$name (message does not match '$pattern')"
		cat "$TEST_TMP/err"
	elif grep -q 'Sanitizer' "$TEST_TMP/err"; then
		not_ok "$name (sanitizer report)"
		cat "$TEST_TMP/err"
	else
		ok "$name"
	fi
}

size=$(stat -c %s "$prop")
head -c $((size / 2)) "$prop" >"$TEST_TMP/truncated.data"
expect_fail "truncated perf.data: error names the file and byte offset" \
	"truncated.data: byte [0-9]+" \
	"$ep" import "$TEST_TMP/truncated.data" --binary "$bin" -o "$TEST_TMP/trunc.prof"
check "truncated perf.data: the profile of what was read is written" test -s "$TEST_TMP/trunc.prof"
samples=$("$EDGEPROF" export "$TEST_TMP/trunc.prof" --format json | jq .stats.samples)
echo "# truncated at $((size / 2)) of $size bytes: $samples samples kept"
check "truncated perf.data: samples before the cut are kept" test "${samples:-0}" -gt 1000 -a "${samples:-0}" -lt 3740

head -c 4096 /dev/urandom >"$TEST_TMP/garbage.data"
expect_fail "garbage file: not a perf.data file" "garbage.data.*not a perf.data file" \
	"$ep" import "$TEST_TMP/garbage.data"
: >"$TEST_TMP/empty.data"
expect_fail "empty file: clear error" "empty.data" "$ep" import "$TEST_TMP/empty.data"
expect_fail "missing perf.data: clear error" "no-such.data" "$ep" import "$TEST_TMP/no-such.data"
expect_fail "missing binary: error names it" "/nonexistent/prog" \
	"$ep" import "$prop" --binary /nonexistent/prog
expect_fail "binary that is not ELF: error names it" "garbage.data" \
	"$ep" import "$prop" --binary "$TEST_TMP/garbage.data"
expect_fail "wrong binary: nothing matched, says to pass the right one" "--binary" \
	"$ep" import "$prop" --binary "$fx/test.binary"
printf 'not a profile' >"$TEST_TMP/bad.prof"
expect_fail "export of a file that is no profile" "bad.prof" \
	"$ep" export "$TEST_TMP/bad.prof" --format json
expect_fail "unknown export format" "format" "$ep" export "$TEST_TMP/bad.prof" --format xml
expect_fail "bad --chop" "chop" "$ep" import "$prop" --chop -3
finish
