#!/usr/bin/env bash
# Connection exhaustion without a token (issue 18, defect 2): 520 clients
# that send one header line every second and never end their header (from
# 40 loopback addresses, 13 each), and 48 more from a single address, used
# to hold every one of the collector's 512 connections, so /healthz and
# every agent were shut out. Now a request header must be complete within
# --header-timeout-s (10), an address holds at most --max-client-conns (32)
# connections that have not shown the token, and connections that have not
# are at most 3/4 of the slots (past either bound the oldest goes):
# /healthz still answers, an agent with the token still streams, and every
# slow client is cut.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

perf="$FIXTURES/propeller_sample_1.perfdata1"
bin="$FIXTURES/propeller_sample_1.bin"
umask 077
echo "s3cret-$RANDOM$RANDOM" >"$TEST_TMP/token"
start_collector c --store "sqlite:$TEST_TMP/store.db" --listen 127.0.0.1:0 \
	--token-file "$TEST_TMP/token" || exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"

plan=()
for i in $(seq 10 49); do plan+=("127.0.0.${i}x13"); done
plan+=("127.0.0.200x48")
python3 "$(dirname "$0")/slow_clients.py" "$COLLECTOR_PORT" "$TEST_TMP/slow" 1 "${plan[@]}" &
slow=$!
track_pid "$slow"
stat() { awk -v k="$1" '$1 == k {print $2}' "$TEST_TMP/slow" 2>/dev/null; }
# until every client has connected (the collector may already have cut some)
for _ in $(seq 1 600); do
	[ "$(($(stat connected) + 0 + $(stat closed) + 0))" -ge 568 ] 2>/dev/null && break
	kill -0 "$slow" 2>/dev/null || break
	sleep 0.1
done
check "568 slow clients connected or were cut ($(stat connected) connected, $(stat closed) cut)" \
	test "$(($(stat connected) + $(stat closed)))" -ge 568
check "  while they wait: /healthz answers 200" \
	test "$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 "$url/healthz")" = 200
check "  /healthz from the address that holds 32 slow ones answers too (its oldest goes)" \
	test "$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 --interface 127.0.0.200 \
		"$url/healthz")" = 200
"$EDGEPROF" agent --replay "$perf" --binary "$bin" --collector "$url" --spool "$TEST_TMP/spool" \
	--token-file "$TEST_TMP/token" --flush-timeout 30 >"$TEST_TMP/agent.log" 2>&1
check "  an agent with the token streams every batch" test "$?" -eq 0
sed 's/^/# agent: /' "$TEST_TMP/agent.log" | tail -2
check "  its counts are stored" bash -c "curl -sf -H 'Authorization: Bearer $(cat "$TEST_TMP/token")' \
	'$url/v1/binaries' | jq -e '.binaries | length == 1' >/dev/null"
# the client sees the collector's closes when its loop next reads them
for _ in $(seq 100); do
	[ "$(stat open_127.0.0.200)" -le 32 ] 2>/dev/null && break
	sleep 0.1
done
check "one address keeps at most 32 connections without the token (open: $(stat open_127.0.0.200))" \
	test "$(stat open_127.0.0.200)" -le 32
# the header deadline: every slow client is cut, none lives much past 10 s
for _ in $(seq 1 600); do
	[ "$(stat open)" = 0 ] && break
	sleep 0.1
done
check "every slow client was cut ($(stat open) still open)" test "$(stat open)" = 0
check "  none lived past the header deadline plus 5 s (longest: $(stat longest) s)" \
	python3 -c "import sys; sys.exit(float('$(stat longest)') > 15)"
m() { metric "$url" "edgeprof_http_connections_closed_total{reason=\"$1\"}"; }
check "cuts counted in /metrics: header_timeout $(m header_timeout), per_address $(m per_address), evicted $(m evicted)" \
	test "$(($(m header_timeout) + 0))" -gt 0 -a "$(($(m per_address) + 0))" -ge 17 -a "$(($(m evicted) + 0))" -gt 0
stop_pid "$slow"
stop_pid "$COLLECTOR_PID"
finish
