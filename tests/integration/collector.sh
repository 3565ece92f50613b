# Sourced by the streaming tests (after lib.sh): start and stop collectors
# by PID, on loopback unless a network namespace is given.

# start_collector NAME ARGS...: starts `edgeprof collector ARGS --port-file`,
# waits until it listens; sets COLLECTOR_PID and COLLECTOR_PORT. Logs go to
# $TEST_TMP/NAME.log. Returns 1 when it did not come up.
start_collector() {
	local name=$1
	shift
	rm -f "$TEST_TMP/$name.port"
	"${COLLECTOR_BIN:-$EDGEPROF}" collector "$@" --port-file "$TEST_TMP/$name.port" \
		>>"$TEST_TMP/$name.log" 2>&1 &
	COLLECTOR_PID=$!
	track_pid "$COLLECTOR_PID"
	for _ in $(seq 1 100); do
		if [ -s "$TEST_TMP/$name.port" ]; then
			COLLECTOR_PORT=$(cat "$TEST_TMP/$name.port")
			return 0
		fi
		kill -0 "$COLLECTOR_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "# collector $name did not start:"
	sed 's/^/#   /' "$TEST_TMP/$name.log"
	return 1
}

# stop_pid PID: TERM, then KILL if it is still there after 60 s. An agent
# writes its profile and flushes its batches on TERM: under ASan, on a
# machine running other suites, that took over 10 s, and a KILL then lost
# the profile the test was about to compare. Said when it comes to KILL.
stop_pid() {
	local pid=$1
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 600); do
		kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
		sleep 0.1
	done
	echo "# pid $pid still running 60 s after SIGTERM: killed"
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}

# metric URL NAME{LABELS}: one value from /metrics
metric() {
	curl -s "$1/metrics" | awk -v m="$2" '$1 == m {print $2}'
}

# edge_table: "from to taken count" per edge of every binary, sorted, from a
# JSON export on stdin
edge_table() {
	jq -r '.profiles[] | .build_id as $b | .branches[] |
		"\($b) \(.from) \(.to) \(.taken // false) \(.count)"' | sort
}
# with the branch records' cycles (0 where the source has none)
range_table() {
	jq -r '.profiles[] | .build_id as $b | .ranges[] |
		"\($b) \(.start) \(.end) \(.count) \(.cycles) \(.cycled_instructions)"' | sort
}
