#!/usr/bin/env bash
# An overloaded collector answers 429 or 503 with Retry-After (no room for
# bodies, too many connections from one address); the agent waited only its
# own backoff (--retry-max-ms) and came back sooner, to be refused again.
# Here a proxy in front of a real collector refuses the first batch with
# 503 and Retry-After: 3 while the agent's backoff is at most 200 ms: its
# next batch comes 3 s later or more, and every batch is still stored.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

perf="$FIXTURES/propeller_sample_1.perfdata1"
bin="$FIXTURES/propeller_sample_1.bin"
start_collector c --store "sqlite:$TEST_TMP/c.db" --listen 127.0.0.1:0 || exit 1
python3 "$(dirname "$0")/retry_after_proxy.py" "http://127.0.0.1:$COLLECTOR_PORT" \
	"$TEST_TMP/proxy.port" "$TEST_TMP/proxy.log" 1 3 &
proxy=$!
track_pid "$proxy"
for _ in $(seq 300); do [ -s "$TEST_TMP/proxy.port" ] && break; sleep 0.1; done
"$EDGEPROF" agent --replay "$perf" --binary "$bin" --batch-samples 4000 \
	--collector "http://127.0.0.1:$(cat "$TEST_TMP/proxy.port")" --spool "$TEST_TMP/spool" \
	--retry-max-ms 200 --flush-timeout 60 >"$TEST_TMP/agent.log" 2>&1
check "the agent gets every batch stored through the busy collector, exit 0" test $? -eq 0
sed 's/^/# proxy: /' "$TEST_TMP/proxy.log" | head -3
read -r t1 s1 < <(sed -n 1p "$TEST_TMP/proxy.log")
read -r t2 s2 < <(sed -n 2p "$TEST_TMP/proxy.log")
check "the first batch was refused with 503 ($s1), the next one stored ($s2)" \
	test "$s1" = 503 -a "$s2" = 200
gap=$(awk -v a="$t1" -v b="$t2" 'BEGIN {printf "%.2f", b - a}')
check "the agent came back after the 3 s asked, not its 200 ms backoff ($gap s)" \
	awk -v g="$gap" 'BEGIN {exit !(g >= 2.95)}'
check "its summary counts the wait" \
	grep -q "send attempts failed (1 then waited as the collector's Retry-After asked)" \
	"$TEST_TMP/agent.log"
stop_pid "$proxy"
stop_pid "$COLLECTOR_PID"
finish
