#!/usr/bin/env bash
# The agent's spool is read back from disk, so what lies there is input
# too: a batch file damaged to 1 GiB, a FIFO, a symbolic link, an empty
# file, and thousands of tiny files, found by an agent held to its
# manifest's 256 MiB (a memory cgroup), are refused or dropped in one line
# each kind, counted, and the agent still sends the real batches and exits
# cleanly. Before, the 1 GiB file was read whole into memory (OOM-killed in
# 256 MiB) and the FIFO blocked the sender, and with it the agent's exit,
# for ever.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"
source "$(dirname "$0")/memcg.sh"

perf="$FIXTURES/propeller_sample_1.perfdata1"
bin="$FIXTURES/propeller_sample_1.bin"
# one real batch: an agent whose collector is down keeps it
"$EDGEPROF" agent --replay "$perf" --binary "$bin" --collector http://127.0.0.1:1 \
	--spool "$TEST_TMP/real" --flush-timeout 1 >/dev/null 2>&1
real=$(ls "$TEST_TMP/real"/*.batch | head -1)
check "a real batch to send" test -s "$real"
start_collector c --store "sqlite:$TEST_TMP/c.db" --listen 127.0.0.1:0 || exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"
if ! cg=$(memcg_create agent 256); then
	not_ok "a memory cgroup for the agent (256 MiB)"
	finish
fi
name() { printf '%s/%020d.batch' "$spool" "$1"; }
# agent NAME SPOOL_MIB: a replay streaming through the spool, in the
# cgroup, until it ends (bounded: a hung sender is a failure, not a hang)
agent() {
	memcg_start "$cg" pid timeout -s KILL 120 "$EDGEPROF" agent --replay "$perf" \
		--binary "$bin" --collector "$url" --spool "$spool" --spool-max-mib "$2" \
		--flush-timeout 60 --retry-max-ms 200 2>"$TEST_TMP/$1.err"
	wait "$pid"
	rc=$?
	grep spool "$TEST_TMP/$1.err" | head -4 | sed 's/^/# /'
}

spool=$TEST_TMP/spool1
mkdir -p "$spool"
truncate -s 1G "$(name 1)" # damaged: 1 GiB (sparse, no disk)
mkfifo "$(name 2)"
ln -s "$real" "$(name 3)"
: >"$(name 4)"
cp "$real" "$(name 5)"
agent a1 2048 # a spool that could hold the 1 GiB: only the batch bound refuses it
check "damaged files: the agent exits 0, everything sent (exit $rc)" test "$rc" -eq 0
check "  not OOM-killed in 256 MiB (peak $(memcg_peak_mib "$cg") MiB)" \
	test "$(memcg_oom_kills "$cg")" = 0
check "  the files that are no batch refused in one line" \
	grep -q "spool $spool: 4 files that are no batch removed" "$TEST_TMP/a1.err"
check "  refusals counted in its summary" grep -q " 4 spool files refused" "$TEST_TMP/a1.err"
check "  the spool is empty" test -z "$(ls -A "$spool")"
samples=$(curl -s "$url/v1/profile?format=json" | jq '[.profiles[].samples] | add // 0')
check "  the real batches reached the collector ($samples samples)" test "${samples:-0}" -gt 0

# 3,000 tiny files, oldest first, in a 1 MiB spool: it holds 2,048 files
spool=$TEST_TMP/spool2
mkdir -p "$spool"
for i in $(seq 1 3000); do echo tiny-batch >"$(name "$i")"; done
agent a2 1
check "3,000 tiny files: the agent exits 0 (exit $rc)" test "$rc" -eq 0
check "  the oldest dropped past 2,048 files, in one line" \
	grep -q "spool $spool: full (limit 2048 files): dropped the 952 oldest" \
	"$TEST_TMP/a2.err"
check "  not OOM-killed" test "$(memcg_oom_kills "$cg")" = 0
check "the collector still answers" curl -sf "$url/healthz" -o /dev/null
finish
