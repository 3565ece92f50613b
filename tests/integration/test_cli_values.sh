#!/usr/bin/env bash
# Option values at their edges, as the README states them: `profile
# --period` takes 20,000 to 4,294,967,294 (it stopped at 2^31 once), and
# --build-id takes hex only, refused in one line before anything is asked
# of a collector.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

start_collector c --store "sqlite:$TEST_TMP/c.db" --listen 127.0.0.1:0 || exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"

# run NAME CMD...: CMD's exit code in RC, its stderr in $TEST_TMP/err
run() {
	"$@" >/dev/null 2>"$TEST_TMP/err"
	RC=$?
}
# the collector refuses these sessions for want of an agent, after checking
# the period itself: a refusal that does not name the period is past it
for p in 20000 2147483648 2147483649 4294967294; do
	run "$EDGEPROF" profile --pid 1 --duration 1 --period "$p" --collector "$url"
	check "profile --period $p: taken (exit $RC, the collector's answer: no agent)" \
		test "$RC" -eq 1 -a -n "$(grep 'refused the session' "$TEST_TMP/err")" \
		-a -z "$(grep -i 'period' "$TEST_TMP/err")"
done
for p in 19999 4294967295 4294967296 18446744073709551616 -1; do
	run "$EDGEPROF" profile --pid 1 --duration 1 --period "$p" --collector "$url"
	check "profile --period $p: refused (exit $RC), the bounds named" \
		test "$RC" -eq 2 -a -n "$(grep "^edgeprof: error: profile --period: '$p' is not a number in 20000-4294967294" "$TEST_TMP/err")"
done

# --build-id: a build-id or its first digits, hex; a whole one at a collector
for cmd in "export --format json" report; do
	for id in xyz 12-4 "$(printf 'a%.0s' {1..129})"; do
		# shellcheck disable=SC2086 # cmd is a command and its options
		run "$EDGEPROF" $cmd --collector "$url" --build-id "$id"
		check "${cmd%% *} --build-id ${id:0:12}: refused (exit $RC), naming it" \
			test "$RC" -eq 2 -a -n "$(grep "^edgeprof: error: ${cmd%% *} --build-id: build-id '${id:0:40}" "$TEST_TMP/err")"
	done
	run "$EDGEPROF" $cmd --collector "$url" --build-id abc
	check "${cmd%% *} --build-id abc at a collector: refused (exit $RC), an odd count" \
		test "$RC" -eq 2 -a -n "$(grep "build-id 'abc' (3 characters): an odd number of hex digits" "$TEST_TMP/err")"
	run "$EDGEPROF" $cmd --collector "$url" --build-id 00FF
	check "${cmd%% *} --build-id 00FF at a collector: asked for 00ff (exit $RC: none stored)" \
		test "$RC" -eq 1 -a -n "$(grep "HTTP 404" "$TEST_TMP/err")"
done
"$EDGEPROF" import "$FIXTURES/propeller_sample_1.perfdata1" --binary "$FIXTURES/propeller_sample_1.bin" \
	-o "$TEST_TMP/p.prof" 2>/dev/null
run "$EDGEPROF" export "$TEST_TMP/p.prof" --format fdata --build-id 572AC7
check "export PROFILE --build-id 572AC7 (a prefix, uppercase): exported (exit $RC)" test "$RC" -eq 0
finish
