#!/usr/bin/env bash
# CPU hotplug during a live run: CPU 1 is taken offline and brought back
# while the agent samples the whole machine. The agent must log both
# changes (one line each), close the event of the CPU that left, open one on
# the CPU that came back, and sample it again afterwards (records carry
# their CPU); it exits cleanly, with no leak (ASan agent). CPU 1 is always
# put back online, whatever happens.
# tests/run.sh: alone (it takes CPU 1 offline, which every other suite would see)
source "$(dirname "$0")/lib.sh"

cpu1=/sys/devices/system/cpu/cpu1/online
if [ "$(id -u)" -ne 0 ]; then
	echo "# skipped: CPU hotplug needs root"
	finish
fi
if [ ! -w "$cpu1" ]; then
	echo "# skipped: $cpu1 is not writable here (no second CPU, or hotplug not allowed)"
	finish
fi
if [ "$(cat "$cpu1")" != 1 ]; then
	echo "# skipped: CPU 1 is offline before the test: not ours to bring up"
	finish
fi
restore_cpu1() { echo 1 >"$cpu1" 2>/dev/null; }
trap 'restore_cpu1; _cleanup' EXIT

here=$(dirname "$0")
cc -O1 -g -o "$TEST_TMP/hot_cold" "$here/../workloads/hot_cold.c"
# one busy process per CPU, so CPU 1 has something to sample when it is back
busy=()
for i in 1 2; do
	"$TEST_TMP/hot_cold" 100000000000 >/dev/null &
	track_pid $!
	busy+=($!)
done
# Every step waits for what it needs, within a generous bound (a loaded
# machine, an ASan agent): the agent runs until it is told to stop.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$EDGEPROF_ASAN" agent --duration 600 \
	-o "$TEST_TMP/hp.prof" --log-level info 2>"$TEST_TMP/hp.err" &
agent=$!
track_pid "$agent"
# wait_log PATTERN SECONDS: until the agent's log has a line matching
# PATTERN; 1 when the bound passes or the agent is gone
wait_log() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		grep -q "$1" "$TEST_TMP/hp.err" && return 0
		kill -0 "$agent" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# CPU time of a process, in clock ticks (utime + stime)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# the change must come once the agent samples (its start takes seconds
# under ASan on a loaded machine): the mode line says it does
wait_log 'on [0-9]* CPUs' 60
if ! echo 0 >"$cpu1" 2>"$TEST_TMP/off.err"; then
	echo "# skipped: CPU 1 cannot be taken offline here: $(cat "$TEST_TMP/off.err")"
	kill -TERM "$agent"
	wait "$agent"
	finish
fi
# the agent looks at the online CPUs once a second: back online once it saw
# the CPU leave
wait_log 'CPU 1 went offline' 60 || echo "# the agent did not log CPU 1 going offline in 60 s"
restore_cpu1
# perf may refuse a CPU for a while after sysfs lists it online: the agent
# keeps trying; then CPU 1 gets one busy process to itself for a second of
# CPU time, so that it has samples to count
if wait_log 'CPU 1 came online: sampling it' 120; then
	taskset -p -c 1 "${busy[0]}" >/dev/null
	taskset -p -c 0 "${busy[1]}" >/dev/null
	start=$(cpu_ticks "${busy[0]}")
	for ((i = 0; i < 1200; i++)); do
		[ $(($(cpu_ticks "${busy[0]}") - start)) -ge "$(getconf CLK_TCK)" ] && break
		sleep 0.1
	done
else
	echo "# the agent did not sample CPU 1 again within 120 s"
fi
kill -TERM "$agent"
wait "$agent"
rc=$?
check "agent across CPU hotplug (ASan): exit 0, no sanitizer report" \
	bash -c "[ $rc -eq 0 ] && ! grep -qE 'Sanitizer|runtime error' '$TEST_TMP/hp.err'"
check "CPU 1 in the online list again after the test" grep -q '^0-1$\|^0-' /sys/devices/system/cpu/online
grep -E 'CPU [0-9]+ (went|came)' "$TEST_TMP/hp.err" | sed 's/^/# /'
check "logs CPU 1 going offline, once" test "$(grep -c 'CPU 1 went offline' "$TEST_TMP/hp.err")" -eq 1
check "logs CPU 1 coming back online, once" \
	test "$(grep -c 'CPU 1 came online: sampling it' "$TEST_TMP/hp.err")" -eq 1
per_cpu=$(sed -n 's/.*samples per online CPU (since it came online):\([^;]*\);.*/\1/p' "$TEST_TMP/hp.err")
after=$(tr ' ' '\n' <<<"$per_cpu" | sed -n 's/^1://p')
echo "# samples per CPU at the end (CPU 1 counted from its return): $per_cpu"
before0=$(tr ' ' '\n' <<<"$per_cpu" | sed -n 's/^0://p')
check "CPU 1 is sampled again after it came back (${after:-0} samples)" test "${after:-0}" -gt 100
# its count restarted when it came back: fewer than CPU 0's, which never left
check "CPU 1's samples are counted from its return (${after:-0} < ${before0:-0})" \
	test "${after:-0}" -lt "${before0:-0}"
check "the profile is complete" bash -c "'$EDGEPROF' report '$TEST_TMP/hp.prof' >/dev/null"
finish
