# Sourced by integration tests: TAP-like "ok - name" / "not ok - name" lines
# that tests/run.sh counts. Every process a test starts is tracked by PID and
# killed on exit.
set -u
: "${EDGEPROF:=$PWD/build/edgeprof}"
: "${EDGEPROF_ASAN:=$PWD/build/edgeprof-asan}"
: "${FIXTURES:=${EDGEPROF_FIXTURES:-$PWD/tests/data/lbr}}"
# the recordings travel with the repository: a test without them fails
# naming what is missing, rather than on a vague error deep inside
[ -f "$FIXTURES/test.lbr" ] ||
	echo "not ok - test data missing: $FIXTURES/test.lbr (tests/data/lbr, or EDGEPROF_FIXTURES)"
TEST_TMP=$(mktemp -d)
_pids=()
_status=0
track_pid() { _pids+=("$1"); }
_cleanup() {
	for p in "${_pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
	rm -rf "$TEST_TMP"
}
trap _cleanup EXIT

ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; _status=1; }
# check NAME CMD...: runs CMD, ok when it exits 0
check() {
	local name=$1
	shift
	if "$@"; then ok "$name"; else not_ok "$name"; fi
}
finish() { exit "$_status"; }
# wait_agent_sampling ERRFILE: until the agent writing ERRFILE says it samples
# (IPs or branch stacks), at most 60 s: workloads started before then would
# run unsampled on a loaded machine
wait_agent_sampling() {
	for _ in $(seq 600); do
		grep -q 'sampling IPs\|branch stacks on' "$1" && return 0
		sleep 0.1
	done
	return 1
}
# require_root_live: live collection needs CAP_BPF and CAP_PERFMON (CI runs as
# root); elsewhere the test says it skipped and passes
require_root_live() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "# skipped: live collection needs root (CAP_BPF, CAP_PERFMON)"
		finish
	fi
}
# build_workload NAME: tests/workloads/NAME.c built with symbols as $TEST_TMP/NAME
build_workload() {
	cc -O1 -g -o "$TEST_TMP/$1" "$(dirname "${BASH_SOURCE[0]}")/../workloads/$1.c"
}
# start_busy NAME: $TEST_TMP/NAME running (for hours) in the background,
# tracked; its PID in BUSY_PID
start_busy() {
	"$TEST_TMP/$1" 100000000000 >/dev/null &
	BUSY_PID=$!
	track_pid "$BUSY_PID"
}
# check_sampled_vs_exact DIR NAME: DIR/NAME.json (a sampled profile's JSON
# export of program DIR/NAME) reconstructs without inconsistent gaps and
# overlaps the exact counts in DIR/NAME.exact.json at >= 0.95
check_sampled_vs_exact() {
	local w=$1 name=$2 ov
	check "$name: samples reconstruct without inconsistent gaps" \
		test "$(jq .stats.gaps_inconsistent "$w/$name.json")" -eq 0
	ov=$(python3 "$(dirname "${BASH_SOURCE[0]}")/overlap.py" "$w/$name.json" \
		"$w/$name.exact.json" "$w/$name")
	echo "# $name: overlap with the exact counts $ov ($(jq .stats.samples "$w/$name.json") samples)"
	check "$name: profile overlaps the exact counts >= 0.95" \
		python3 -c "import sys; sys.exit(float('$ov') < 0.95)"
}
