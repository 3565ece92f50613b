#!/usr/bin/env bash
# A FIFO (or any other file that is not a regular one) given as an input is
# refused in one line naming it, at once: open() of a FIFO with no writer
# blocks forever, so `import FIFO`, `--binary FIFO`, a token file, and the
# agent's /proc/PID/root/PATH fallback used to hang there. `timeout` only
# turns such a hang into a failure; every run here ends by itself at once.
source "$(dirname "$0")/lib.sh"

fx=$FIXTURES
prop=$fx/propeller_sample_1.perfdata1
here=$(dirname "$0")
mkfifo "$TEST_TMP/in.fifo"

# refused NAME CMD...: CMD ends (no hang) with exit 1 or 2 and one error line
# naming the FIFO
refused() {
	local name=$1
	shift
	timeout 30 "$@" >/dev/null 2>"$TEST_TMP/err"
	local rc=$?
	if [ "$rc" -eq 124 ]; then
		not_ok "$name: hung (killed after 30 s)"
	elif [ "$rc" -ne 1 ] && [ "$rc" -ne 2 ]; then
		not_ok "$name: exit code $rc"
		tail -3 "$TEST_TMP/err"
	elif ! grep -q "^edgeprof: error: .*$TEST_TMP/in.fifo: is a FIFO, not a regular file" "$TEST_TMP/err"; then
		not_ok "$name: no one-line refusal naming the FIFO"
		tail -3 "$TEST_TMP/err"
	else
		ok "$name: refused at once"
	fi
}
refused "import FIFO" "$EDGEPROF" import "$TEST_TMP/in.fifo"
refused "import --binary FIFO" "$EDGEPROF" import "$prop" --binary "$TEST_TMP/in.fifo"
refused "trace --binary FIFO" "$EDGEPROF" trace "$prop" --binary "$TEST_TMP/in.fifo"
refused "agent --replay FIFO" "$EDGEPROF" agent --replay "$TEST_TMP/in.fifo" -o "$TEST_TMP/r.prof"
refused "export --collector --token-file FIFO" "$EDGEPROF" export --collector http://127.0.0.1:9 \
	--token-file "$TEST_TMP/in.fifo" --build-id ab --format json

if [ "$(id -u)" -ne 0 ]; then
	echo "# skipped the agent's case: live collection needs root"
	finish
fi
# The agent's fallback: without CAP_SYS_ADMIN (and CAP_CHECKPOINT_RESTORE)
# it cannot open /proc/PID/map_files/ and opens /proc/PID/root/PATH, PATH as
# /proc/PID/maps names it. A chrooted process's maps name its binary from
# the host's root (ROOT/bin/spin), so the agent opens ROOT/ROOT/bin/spin,
# where a FIFO waits: a process can put anything at the path the agent opens.
root=$TEST_TMP/root
mkdir -p "$root/bin" "$root$root/bin"
cc -static -O1 -o "$root/bin/spin" "$here/../workloads/hot_cold.c"
mkfifo "$root$root/bin/spin"
chroot "$root" /bin/spin 100000000000 >/dev/null &
spin=$!
track_pid "$spin"
timeout 120 setpriv --bounding-set -sys_admin,-checkpoint_restore --inh-caps=-all \
	"$EDGEPROF" agent --pid "$spin" --duration 2 -o "$TEST_TMP/a.prof" 2>"$TEST_TMP/agent.err"
rc=$?
check "agent, a FIFO at /proc/PID/root/PATH: no hang, exit 0 (exit $rc)" test "$rc" -eq 0
check "agent, a FIFO at /proc/PID/root/PATH: one line names it" \
	grep -q "/proc/$spin/root$root/bin/spin: is a FIFO, not a regular file" "$TEST_TMP/agent.err"
samples=$("$EDGEPROF" export "$TEST_TMP/a.prof" --format json | jq .stats.samples)
check "agent, a FIFO at /proc/PID/root/PATH: the process is still sampled (${samples:-0})" \
	test "${samples:-0}" -gt 100
finish
