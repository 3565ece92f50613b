#!/usr/bin/env bash
# `make run`: the main job end to end on this machine. A collector with its
# embedded SQLite store on loopback; agents streaming into it; a bundled
# workload; a report read back from the collector. Where the machine has a
# branch-stack PMU the live agent samples the workload's branches; where it
# has none (our VMs) the script says so, the live agent sends what it can
# (IP samples), and the edges come from the LBR emulator running the same
# workload and from a replay of a bundled recording made on Skylake.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
ep=$build/edgeprof
data=tests/data/lbr
out=$build/demo
rm -rf "$out"
mkdir -p "$out"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

echo "== collector: sqlite:$out/store.db on 127.0.0.1"
"$ep" collector --store "sqlite:$out/store.db" --listen 127.0.0.1:0 --port-file "$out/port" \
	2>"$out/collector.log" &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$out/port" ] && break; sleep 0.1; done
[ -s "$out/port" ] || { cat "$out/collector.log"; exit 1; }
url="http://127.0.0.1:$(cat "$out/port")"
echo "   listening at $url"
stream=(--collector "$url" --spool "$out/spool" --flush-timeout 30)

echo "== workload: tests/workloads/hot_cold.c"
cc -O1 -g -o "$out/hot_cold" tests/workloads/hot_cold.c

pmu=no
if [ "$(id -u)" -eq 0 ]; then
	"$out/hot_cold" 100000000000 >/dev/null &
	work=$!
	pids+=("$work")
	echo "== live agent on the workload (pid $work), streaming every second"
	"$ep" agent --pid "$work" --interval 1 "${stream[@]}" 2>"$out/agent.log" &
	agent=$!
	pids+=("$agent")
	for _ in $(seq 1 100); do
		curl -s "$url/v1/nodes" | jq -e '.nodes[] | select(.reporting and .sessions)' >/dev/null 2>&1 && break
		sleep 0.1
	done
	echo "== on demand: edgeprof profile --pid $work --duration 2 (4x the agent's rate, through the collector)"
	"$ep" profile --pid "$work" --duration 2 --collector "$url" -o "$out/session.prof" \
		2>"$out/session.log" || true
	grep -E "session" "$out/session.log" | sed 's/^/   /'
	kill "$agent" 2>/dev/null || true
	wait "$agent" 2>/dev/null || true
	kill "$work" 2>/dev/null || true
	grep -q "no branch-stack PMU" "$out/agent.log" || pmu=yes
	grep -E "no branch-stack PMU|sampling|streamed" "$out/agent.log" | sed 's/^/   /'
else
	echo "== not root: the live agent (BPF) is skipped"
fi
if [ "$pmu" = no ]; then
	echo "== no branch-stack PMU here: edges come from the LBR emulator (the same workload)"
	echo "   and from a replay of a recording made with a real LBR ($data)"
	"$ep" record --emulate -o "$out/hot_cold.prof" "${stream[@]}" -- "$out/hot_cold" 20000000 \
		2>"$out/record.log" >/dev/null
	grep -E "samples|streamed" "$out/record.log" | sed 's/^/   /'
	"$ep" agent --replay "$data/propeller_sample_1.perfdata1" --binary "$data/propeller_sample_1.bin" \
		--batch-samples 1000 "${stream[@]}" 2>"$out/replay.log"
	grep -E "replayed|streamed" "$out/replay.log" | sed 's/^/   /'
fi

echo
echo "== what the collector holds ($url/v1/binaries)"
curl -s "$url/v1/binaries" | jq -r '.binaries[] | "   \(.build_id)  \(.samples) samples  \(.paths | join(" "))"'
echo
echo "== edgeprof report --collector $url"
"$ep" report --collector "$url" --top 8
id=$(curl -s "$url/v1/binaries" | jq -r --arg p "$PWD/$out/hot_cold" \
	'[.binaries[] | select(.paths | index($p))][0].build_id // empty')
if [ -n "$id" ]; then
	for f in json fdata preagg afdo; do
		"$ep" export --collector "$url" --build-id "$id" --format "$f" -o "$out/hot_cold.$f"
	done
	echo
	echo "== exports of the workload from the collector: $(cd "$out" && ls hot_cold.json hot_cold.fdata hot_cold.preagg hot_cold.afdo | tr '\n' ' ')(in $out)"
	echo "   feed to BOLT: llvm-bolt-16 $out/hot_cold -o hot_cold.bolt -data $out/hot_cold.fdata"
fi

# The store outlives this script: the UI can be opened on it again at any time.
reopen="$ep collector --store sqlite:$out/store.db --listen 127.0.0.1:7070"
echo
if [ -t 0 ] && [ -t 1 ] && [ "${EDGEPROF_DEMO_KEEP:-1}" != 0 ]; then
	echo "== the web UI on this data: $url/  (the collector stays up until Ctrl-C)"
	echo "   later, on the same data: $reopen, then http://127.0.0.1:7070/"
	trap 'echo; echo "== collector stopped"; cleanup; exit 0' INT TERM
	wait "${pids[0]}"
else
	echo "== the web UI on this data: run  $reopen"
	echo "   and open http://127.0.0.1:7070/ (the demo's own collector stops with it)"
fi
