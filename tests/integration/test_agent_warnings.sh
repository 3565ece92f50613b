#!/usr/bin/env bash
# A whole node's worth of processes whose binaries the agent cannot open
# (gone before their maps were read, or something odd at the path) costs at
# most one summary line per interval, with the counts, not one line per
# process and maps re-read: an exec storm of 1,000/s once logged 47 lines in
# 10 s. Opening a binary through /proc/PID/ fails deterministically here:
# without CAP_SYS_ADMIN the agent opens /proc/PID/root/PATH, and a
# chrooted process's PATH (its maps name it from the host's root) leads to
# a FIFO, refused (see test_fifo_inputs.sh) every time it is tried: once at
# each process's first sample and at each once-a-second maps re-read.
source "$(dirname "$0")/lib.sh"

require_root_live
here=$(dirname "$0")
root=$TEST_TMP/root
mkdir -p "$root/bin" "$root$root/bin"
cc -static -O1 -o "$root/bin/spin" "$here/../workloads/hot_cold.c"
mkfifo "$root$root/bin/spin"
pids=()
for _ in 1 2 3 4; do
	chroot "$root" /bin/spin 100000000000 >/dev/null &
	track_pid $!
	pids+=(--pid $!)
done
timeout 120 setpriv --bounding-set -sys_admin,-checkpoint_restore --inh-caps=-all \
	"$EDGEPROF" agent "${pids[@]}" --interval 1 --duration 4 -o "$TEST_TMP/a.prof" \
	--log-level info 2>"$TEST_TMP/agent.err"
check "agent: exit 0" test $? -eq 0
lines=$(grep -c 'root.*/bin/spin: is a FIFO' "$TEST_TMP/agent.err")
per_process=$(grep -cE '^edgeprof: warn: /proc/[0-9]+/' "$TEST_TMP/agent.err")
echo "# $lines lines name the failure, $per_process of them one process's"
grep 'could not be opened' "$TEST_TMP/agent.err" | sed 's/^/# /'
check "no line per process (${per_process})" test "$per_process" -eq 0
check "at most one summary line per 1 s interval (${lines} in 4 s)" test "$lines" -ge 1 -a "$lines" -le 5
total=$(sed -n 's/.*could not be opened in the last interval, \([0-9]*\) in all.*/\1/p' "$TEST_TMP/agent.err" | tail -1)
check "the final summary counts every failed open (${total:-0} >= 4)" test "${total:-0}" -ge 4

# Processes gone before their maps were read are a counter in the profile's
# stats (streamed with every batch), not lines: 300 runs of /bin/true, most
# of them over before the agent reads their exec event, while a
# whole-machine agent samples. It is stopped once they are done.
"$EDGEPROF" agent --interval 1 -o "$TEST_TMP/storm.prof" --log-level info 2>"$TEST_TMP/storm.err" &
agent=$!
track_pid "$agent"
wait_agent_sampling "$TEST_TMP/storm.err"
for _ in $(seq 300); do /bin/true; done
kill -TERM "$agent"
wait "$agent"
check "exec storm: the agent exits 0" test $? -eq 0
gone=$("$EDGEPROF" export "$TEST_TMP/storm.prof" --format json | jq .stats.processes_gone)
said=$(sed -n 's/.* \([0-9]*\) processes gone before their maps were read.*/\1/p' "$TEST_TMP/storm.err")
echo "# exec storm: stats.processes_gone ${gone:-null}, summary says ${said:-?}"
check "exec storm: the profile counts processes gone before their maps were read (${gone:-null})" \
	test "${gone:-0}" -ge 1 -a "${gone:-0}" = "${said:-x}"
check "exec storm: no line per process" \
	test "$(grep -cE '^edgeprof: warn: /proc/[0-9]+/' "$TEST_TMP/storm.err")" -eq 0
finish
