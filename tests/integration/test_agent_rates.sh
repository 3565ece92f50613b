#!/usr/bin/env bash
# Sampling rates have upper bounds tied to the kernel's
# perf_event_max_sample_rate (interrupts per second per CPU it allows), and
# the ring buffer a size cap: an agent asked for more refuses at start-up, in
# one line naming the option and the limit, before it samples anything.
# `--ip-hz 99999999` once set a 10 ns period and a 1 GiB ring (mapped twice:
# 2 GB RSS) and spent 4.4 s of system CPU in a 2 s run.
source "$(dirname "$0")/lib.sh"

require_root_live
max=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
echo "# perf_event_max_sample_rate: $max"

# refused NAME PATTERN ARGS...: the agent exits 1 or 2 with one error line
# matching PATTERN and never says it samples
refused() {
	local name=$1 pattern=$2
	shift 2
	"$EDGEPROF" agent --pid $$ --duration 1 -o "$TEST_TMP/r.prof" "$@" >/dev/null 2>"$TEST_TMP/err"
	local rc=$?
	if [ "$rc" -ne 1 ] && [ "$rc" -ne 2 ]; then
		not_ok "$name: exit code $rc"
		tail -3 "$TEST_TMP/err"
	elif [ "$(grep -cE "^edgeprof: error: .*$pattern" "$TEST_TMP/err")" -ne 1 ]; then
		not_ok "$name: no one-line refusal matching '$pattern'"
		tail -3 "$TEST_TMP/err"
	elif grep -q 'sampling IPs\|branch stacks on' "$TEST_TMP/err"; then
		not_ok "$name: refused only after sampling started"
	else
		ok "$name: refused with the reason"
	fi
}
refused "--ip-hz 99999999" "--ip-hz 99999999.*perf_event_max_sample_rate \\($max per second" \
	--ip-hz 99999999
refused "--ip-hz $((max + 1))" "--ip-hz $((max + 1)).*perf_event_max_sample_rate" \
	--ip-hz $((max + 1))
refused "--period 1000" "period 1000: expected [0-9]+ to .*perf_event_max_sample_rate" --period 1000 --jitter 10
refused "--ring-kib 1048576" "--ring-kib.*1-262144" --ring-kib 1048576

# the limits themselves are allowed
"$EDGEPROF" agent --pid $$ --duration 1 --ip-hz "$max" --period 20000 --jitter 1000 \
	-o "$TEST_TMP/ok.prof" 2>"$TEST_TMP/ok.err"
check "--ip-hz $max (the kernel's limit) --period 20000: runs, exit 0" test $? -eq 0
finish
