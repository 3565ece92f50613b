#!/usr/bin/env bash
# Lockout by a token holder (issue 32, item 6): connections that showed the
# token were never closed, so 512 of them, re-requesting every 25 s, held
# every slot: /healthz and every agent timed out for as long as they were
# held. Now one address holds at most --max-token-conns (16) of them (past
# it its longest idle one goes), an idle one is closed after
# --idle-timeout-s, and when the slots run short the longest idle one of
# the address holding the most is closed, so a newcomer always gets in.
# Here: 200 connections from one address, and 32 addresses x 16 (each
# within the bound) that come back a second after each close, all
# re-requesting every second; then the issue's 512, from 32 addresses,
# that idle 25 s between requests.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

perf="$FIXTURES/propeller_sample_1.perfdata1"
bin="$FIXTURES/propeller_sample_1.bin"
umask 077
echo "s3cret-$RANDOM$RANDOM" >"$TEST_TMP/token"
start_collector c --store "sqlite:$TEST_TMP/store.db" --listen 127.0.0.1:0 \
	--token-file "$TEST_TMP/token" --idle-timeout-s 4 || finish
url="http://127.0.0.1:$COLLECTOR_PORT"
clients() { # STATUS INTERVAL OPTIONS PLAN...: token holders, in the background
	local status=$1 interval=$2 opts=$3
	shift 3
	# shellcheck disable=SC2086 # OPTIONS: words
	python3 "$(dirname "$0")/slow_clients.py" --token-file "$TEST_TMP/token" $opts \
		"$COLLECTOR_PORT" "$TEST_TMP/$status" "$interval" "$@" &
	track_pid "$!"
}
stat() { # FILE KEY: a number from a client's status, 0 before it has one
	local v
	v=$(awk -v k="$2" '$1 == k {print $2}' "$TEST_TMP/$1" 2>/dev/null)
	echo "${v:-0}"
}
reason() { metric "$url" "edgeprof_http_connections_closed_total{reason=\"$1\"}"; }

clients one 1 "" 127.0.0.20x200
one=$!
plan=()
for i in $(seq 30 61); do plan+=("127.0.0.${i}x16"); done
clients many 1 "--reconnect 1" "${plan[@]}"
many=$!
for _ in $(seq 300); do
	[ "$(($(stat one answered) + 0))" -ge 200 ] && [ "$(($(stat many answered) + 0))" -ge 512 ] &&
		[ "$(($(stat one connected) + $(stat many connected)))" -ge 712 ] && break
	sleep 0.1
done
echo "# one address: $(stat one connected) connected, $(stat one answered) answers; 32 addresses: $(stat many connected) connected, $(stat many answered) answers"
t=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 10 "$url/healthz")
check "while 712 token holders re-request: /healthz answers 200 at once ($t s)" \
	python3 -c "import sys; c, t = '$t'.split(); sys.exit(c != '200' or float(t) > 2)"
start=$SECONDS
timeout 60 "$EDGEPROF" agent --replay "$perf" --binary "$bin" --collector "$url" \
	--spool "$TEST_TMP/spool" --token-file "$TEST_TMP/token" --flush-timeout 30 \
	>"$TEST_TMP/agent.log" 2>&1
rc=$?
sed 's/^/# agent: /' "$TEST_TMP/agent.log" | tail -1
check "  an agent with the token streams every batch (exit $rc, $((SECONDS - start)) s)" \
	test "$rc" -eq 0 -a $((SECONDS - start)) -le 30
check "  the address with 200 keeps at most 16 of them (open: $(stat one open))" \
	test "$(stat one open)" -le 16
check "  counted: token_per_address $(reason token_per_address), idle_evicted $(reason idle_evicted)" \
	test "$(($(reason token_per_address) + 0))" -gt 0 -a "$(($(reason idle_evicted) + 0))" -gt 0
kill "$one" "$many" 2>/dev/null
wait "$one" "$many" 2>/dev/null

# the issue's attack: 512 that re-request every 25 s, 16 from each address
closed() { # every connection the collector closed, for any reason
	curl -s "$url/metrics" | awk '/^edgeprof_http_connections_closed_total/ {n += $2} END {print n + 0}'
}
before=$(closed)
idle_before=$(reason idle_timeout)
plan=()
for i in $(seq 70 101); do plan+=("127.0.0.${i}x16"); done
clients idle 25 "" "${plan[@]}"
for _ in $(seq 300); do
	[ "$(($(stat idle answered) + $(stat idle closed)))" -ge 512 ] && break
	sleep 0.1
done
t=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 10 "$url/healthz")
check "512 token holders idle 25 s between requests: /healthz answers 200 at once ($t s)" \
	python3 -c "import sys; c, t = '$t'.split(); sys.exit(c != '200' or float(t) > 2)"
for _ in $(seq 150); do
	[ "$(stat idle closed)" = 512 ] && break
	sleep 0.1
done
check "  every one is closed within the idle limit (closed $(stat idle closed), longest lived $(stat idle longest) s)" \
	awk '$1 == "closed" {n = $2} $1 == "longest" {t = $2} END {exit !(n == 512 && t > 3 && t < 8)}' \
	"$TEST_TMP/idle"
check "  counted: closed by the collector $before -> $(closed), of them idle_timeout $idle_before -> $(reason idle_timeout)" \
	test $(($(closed) - before)) -ge 512 -a $(($(reason idle_timeout) - idle_before)) -gt 0
stop_pid "$COLLECTOR_PID"
finish
