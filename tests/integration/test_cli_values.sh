#!/usr/bin/env bash
# Option values at their edges, as the README states them: `profile
# --period` takes 20,000 to 4,294,967,294 (it stopped at 2^31 once).
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
finish
