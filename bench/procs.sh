# Sourced by the bench scripts that start servers (after `cd` to the
# repository): TEST_TMP and track_pid, which the tests/integration helpers
# (clickhouse.sh) want, and on exit every tracked process stopped (TERM,
# then KILL after 10 s) and TEST_TMP removed. $1: a word for TEST_TMP's name.
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-${1:-bench}.XXXXXX")
pids=()
track_pid() { pids+=("$1"); }
cleanup() {
	for p in "${pids[@]:-}"; do
		[ -n "$p" ] || continue
		kill "$p" 2>/dev/null
		for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$TEST_TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
