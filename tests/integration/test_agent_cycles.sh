#!/usr/bin/env bash
# agent --cycles on this PMU-less VM (needs root, as CI runs): the hardware
# cycles event cannot be opened, the agent says so in one line and samples
# cpu-clock instead, on its own ring buffer; the profile says its cycles are
# nanoseconds of CPU time (config.cycles_source cpu_clock, cycles_unit ns),
# and they are (within the workload's CPU time, not 2-3x it as cycles would
# be); report --cpi labels them and gives the busy workload's hot function
# the most time; the cycles ring's lost-record metric exists and agrees with
# the kernel's count; the cycles event's periods are P +- D, re-armed like
# the branch event's; an asked-for rate past the kernel's limit is refused;
# no leak under ASan. tests/hw/cycles.sh covers a machine with a PMU.
source "$(dirname "$0")/lib.sh"

require_root_live
here=$(dirname "$0")
build_workload hot_cold
start_busy hot_cold
a=$BUSY_PID

max=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
# CPU time of pid in ns (utime + stime, clock ticks)
cpu_ns() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.0f", ($14 + $15) * 1e9 / hz}' "/proc/$1/stat"; }

before=$(cpu_ns "$a")
"$EDGEPROF" agent --pid "$a" --duration 4 --drain-ms 50 --cycles -o "$TEST_TMP/c.prof" \
	--log-level info 2>"$TEST_TMP/c.err"
rc=$?
after=$(cpu_ns "$a")
check "agent --cycles runs and exits 0" test "$rc" -eq 0
if grep -q -- '--cycles: the cycles event' "$TEST_TMP/c.err"; then
	echo "# this machine has a hardware cycles event: tests/hw/cycles.sh is the test for it"
	finish
fi
grep -- '--cycles' "$TEST_TMP/c.err" | sed 's/^/# /'
check "says in one line that there is no hardware cycles event and cpu-clock stands in" \
	test "$(grep -c -- '--cycles: no hardware cycles event on this machine (.*): cpu-clock stands in.*the profile.s cycles are nanoseconds of CPU time, not cycles' "$TEST_TMP/c.err")" -eq 1
check "and no other line about the cycles source" \
	test "$(grep -c -- '--cycles:' "$TEST_TMP/c.err")" -eq 1
"$EDGEPROF" export "$TEST_TMP/c.prof" --format json -o "$TEST_TMP/c.json"
check "the profile says its cycles are cpu-clock nanoseconds, and at what period" \
	test "$(jq -r '.config | "\(.cycles_source) \(.cycles_unit) \(.cycles_period > 0) \(.cycles_jitter > 0) \(.cycles_scale)"' "$TEST_TMP/c.json")" = "cpu_clock ns true true 1"

# The time is the workload's CPU time while sampled: at most what it used
# over the agent's whole run (load and start-up included), and most of it.
total=$(jq '[.profiles[].ips[].cycles // 0] | add // 0' "$TEST_TMP/c.json")
echo "# ${total:-0} ns in the profile, the workload used $((after - before)) ns over the agent's run"
check "the profile's ns are the workload's CPU time (40-110% of its run's), not cycles" \
	python3 -c "import sys; t, c = $total, $((after - before)); sys.exit(not (0.4 * c <= t <= 1.1 * c))"

"$EDGEPROF" report "$TEST_TMP/c.prof" --cpi >"$TEST_TMP/cpi.txt"
head -1 "$TEST_TMP/cpi.txt" | sed 's/^/# /'
check "report --cpi says nanoseconds from cpu-clock, not cycles" \
	grep -q '^nanoseconds per instruction from cpu-clock IP samples (this machine had no hardware cycles event' "$TEST_TMP/cpi.txt"
read -r _ share _ _ _ hottest < <(sed -n '/^functions by ns:/{n;n;p;q}' "$TEST_TMP/cpi.txt")
echo "# report --cpi: hottest function $hottest with $share of the time"
check "the busy workload's hot function gets the most time (${share:-?})" \
	bash -c "[ '$hottest' = hot_loop ] && python3 -c 'import sys; sys.exit(not float(\"${share%\%}\") > 90)'"

# the lost-record metric: in the profile's stats and the summary line,
# which agree with each other and with what the kernel sent
read -r sent received lost < <(sed -n 's/.*cycles event: \([0-9]*\) IP samples sent by the kernel, \([0-9]*\) received (.* \([0-9]*\) lost: its ring buffer full.*/\1 \2 \3/p' "$TEST_TMP/c.err")
read -r samples plost < <(jq -r '.stats | "\(.cycles_samples) \(.cycles_lost_records)"' "$TEST_TMP/c.json")
echo "# cycles event: ${sent:-?} sent, ${received:-?} received, ${lost:-?} lost; profile: ${samples:-?} samples, ${plost:-?} lost"
check "the cycles ring's lost records are counted (profile stats and summary agree: ${plost:-?} = ${lost:-?})" \
	test "${plost:-x}" = "${lost:-y}"
check "every IP sample the kernel sent was received or counted lost (${sent:-?} = ${received:-?} + ${lost:-?})" \
	test "${sent:-0}" -gt 1000 -a "${sent:-0}" -eq $((${received:-0} + ${lost:-0}))
check "the profile holds every received sample (${samples:-?})" test "${samples:-x}" = "${received:-y}"

# A stalled consumer: the agent is stopped (SIGSTOP) until the kernel side,
# sampling cpu-clock as fast as the kernel allows, fails to reserve in the
# cycles ring (its counter, read from the agent's own BPF map); the loss is
# counted in the profile and said in a warning, and nothing sent is missed.
counters_map() { # PID: the id of that agent's counters map, from its descriptors
	local f id
	for f in /proc/"$1"/fdinfo/*; do
		id=$(sed -n 's/^map_id:\s*//p' "$f" 2>/dev/null)
		[ -n "$id" ] && [ "$(bpftool -j map show id "$id" | jq -r .name)" = counters ] &&
			echo "$id" && return 0
	done
	return 1
}
# EP_BPF_CYCLES_RESERVE_FAILED (bpf/edgeprof.bpf.c) over every CPU
cycles_lost_now() { bpftool -j map lookup id "$1" key 12 0 0 0 | jq '[.formatted.values[].value] | add'; }
fastest=$(((6000000000 + max - 1) / max))
"$EDGEPROF" agent --pid "$a" --duration 600 --cycles --cycles-period "$fastest" \
	-o "$TEST_TMP/stall.prof" --log-level info 2>"$TEST_TMP/stall.err" &
agent=$!
track_pid "$agent"
wait_agent_sampling "$TEST_TMP/stall.err"
map=$(counters_map "$agent")
kill -STOP "$agent"
for _ in $(seq 600); do
	[ "$(cycles_lost_now "${map:-0}" 2>/dev/null || echo 0)" -gt 0 ] && break
	sleep 0.1
done
kill -CONT "$agent"
kill -TERM "$agent"
wait "$agent"
check "stalled consumer: the agent recovers and exits 0" test $? -eq 0
read -r sent received lost < <(sed -n 's/.*cycles event: \([0-9]*\) IP samples sent by the kernel, \([0-9]*\) received (.* \([0-9]*\) lost: its ring buffer full.*/\1 \2 \3/p' "$TEST_TMP/stall.err")
plost=$("$EDGEPROF" export "$TEST_TMP/stall.prof" --format json | jq .stats.cycles_lost_records)
echo "# stalled consumer (map ${map:-?}): ${sent:-?} sent, ${received:-?} received, ${lost:-?} lost; profile: ${plost:-?} lost"
check "stalled consumer: the cycles ring's losses counted in the profile, as the kernel counted them" \
	test "${plost:-0}" -gt 0 -a "${plost:-0}" = "${lost:-x}"
check "stalled consumer: said in a warning, and every record sent was received" \
	bash -c "grep -q '^edgeprof: warn: cycles event: .* ${lost:-x} lost: its ring buffer full' '$TEST_TMP/stall.err' && [ '${sent:-x}' = '${received:-y}' ]"

# the cycles event's periods: drawn like the branch event's, P +- D at every drain
read -r p d < <(sed -n 's/.*cpu-clock stands in, an IP sample every \([0-9]*\) +- \([0-9]*\) ns.*/\1 \2/p' "$TEST_TMP/c.err")
stats=$(sed -n 's/.*cycles event periods: \(.*\)/\1/p' "$TEST_TMP/c.err")
drawn=$(sed -n 's/.*cycles event: .*, \([0-9]*\) periods drawn.*/\1/p' "$TEST_TMP/c.err")
echo "# asked: ${p:-?} +- ${d:-?} ns; measured: $stats; ${drawn:-?} periods drawn"
check "cycles event periods: mean, range and spread of a uniform draw of P +- D, re-armed" \
	python3 "$here/uniform_period.py" "${p:-0}" "${d:-0}" "${stats:-n=0 mean=0 min=0 max=0 stddev=0}" \
	"${drawn:-0}" rearm "$(nproc)"

# without --cycles: no cycles event, no cycles in the profile
"$EDGEPROF" agent --pid "$a" --duration 1 -o "$TEST_TMP/n.prof" --log-level info 2>"$TEST_TMP/n.err"
check "without --cycles: no line about it, no cycles event" \
	bash -c "! grep -q -- '--cycles\|cycles event' '$TEST_TMP/n.err'"
check "without --cycles: the profile has no cycles source and no cycles" \
	test "$("$EDGEPROF" export "$TEST_TMP/n.prof" --format json | jq -r '"\(.config.cycles_source)|\([.profiles[].ips[] | select(.cycles)] | length)"')" = "|0"

# a rate past the kernel's limit is refused before anything is sampled
"$EDGEPROF" agent --pid "$a" --duration 1 --cycles --cycles-period 1000 -o "$TEST_TMP/r.prof" \
	2>"$TEST_TMP/r.err"
check "--cycles-period 1000: refused with the reason" \
	bash -c "[ $? -eq 1 ] && grep -q -- 'error: --cycles-period 1000: expected [0-9]* to .*perf_event_max_sample_rate, $max per second' '$TEST_TMP/r.err' && ! grep -q 'sampling IPs' '$TEST_TMP/r.err'"

# the agent runs for months: no leak, no undefined behaviour (ASan+UBSan)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$EDGEPROF_ASAN" agent --pid "$a" --duration 2 \
	--cycles -o "$TEST_TMP/asan.prof" 2>"$TEST_TMP/asan.err"
check "ASan+UBSan agent --cycles: clean exit, no sanitizer report, cycles in the profile" \
	bash -c "[ $? -eq 0 ] && ! grep -qE 'Sanitizer|runtime error' '$TEST_TMP/asan.err' && [ \"\$('$EDGEPROF' export '$TEST_TMP/asan.prof' --format json | jq '.stats.cycles_samples')\" -gt 100 ]"
grep -E 'Sanitizer|runtime error' "$TEST_TMP/asan.err" | head -5
finish
