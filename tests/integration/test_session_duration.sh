#!/usr/bin/env bash
# A session's duration_s is parsed with overflow checks (issue 18, defect 6):
# values whose seconds or milliseconds do not fit 64 bits used to wrap into
# a short session that passed the maximum-duration check, and the
# multiplication by 60 was a signed overflow (UBSan). Each is refused with
# 400 naming the collector's real maximum, never accepted as something else.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

COLLECTOR_BIN=$EDGEPROF_ASAN
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
start_collector c --store "sqlite:$TEST_TMP/store.db" --listen 127.0.0.1:0 --max-session-s 600 ||
	exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"

# a node whose agent can run sessions: one batch saying so
printf 'wire_version: 1 agent { node: "n1" agent_id: "a1" version: "t" } sequence: 1\n%s\n' \
	'capabilities: "profile-session"' |
	protoc-c --encode=edgeprof.v1.Batch --proto_path=proto proto/ingest.proto |
	zstd -q -c >"$TEST_TMP/hello" # with its checksum, as agents send
check "an agent able to run sessions reports (200)" test "$(curl -s -o /dev/null -w '%{http_code}' \
	-X POST -H 'Content-Encoding: zstd' --data-binary "@$TEST_TMP/hello" "$url/v1/ingest")" = 200

session() { # session DURATION -> HTTP status, body in $TEST_TMP/body
	curl -s -o "$TEST_TMP/body" -w '%{http_code}' -X POST -G \
		--data-urlencode container_id=0123456789ab --data-urlencode "duration_s=$1" \
		"$url/v1/sessions"
}

# 2^64 / 60 / 1000 and friends: each wrapped to a few seconds before
for d in 307445734561825861m 18446744073709552 18446744073709552s 99999999999999999999 \
	18446744073709551615 18446744073709551616 9223372036854775807m; do
	status=$(session "$d")
	check "duration_s=$d: refused (400, got $status)" test "$status" = 400
	check "  the message names the maximum of 600 s" \
		grep -q "duration_s '$d' is over this collector's maximum of 600 s" "$TEST_TMP/body"
done
for d in 601:601 11m:660 18446744073709551:18446744073709551; do
	status=$(session "${d%%:*}")
	check "duration_s=${d%%:*}: refused (400, got $status)" test "$status" = 400
	check "  the message names ${d#*:} s and the maximum of 600 s" \
		grep -q "duration ${d#*:} s is over this collector's maximum of 600 s" "$TEST_TMP/body"
done
for d in abc 10x -5 "" 1.5 " 5" +5 5mm; do
	status=$(session "$d")
	check "duration_s='$d': refused as malformed (400, got $status)" test "$status" = 400
	check "  the message says what is expected" grep -q "expected seconds" "$TEST_TMP/body"
done
for d in 600 10m 30s 1; do
	status=$(session "$d")
	check "duration_s=$d: accepted (201, got $status)" test "$status" = 201
done
check "the collector is still up" curl -sf "$url/healthz" -o /dev/null
stop_pid "$COLLECTOR_PID"
check "the collector (ASan+UBSan) reports no overflow and no leak" \
	bash -c "! grep -q 'ERROR: \(Address\|Leak\)Sanitizer\|runtime error' '$TEST_TMP/c.log'"
finish
