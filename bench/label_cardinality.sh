#!/usr/bin/env bash
# Label cardinality (issue 32, item 5): one binary with BENCH_LABEL_SETS
# (1,000,000) label sets, as a cluster's pod churn leaves them, posted as
# agents do (zstd-compressed Batch protobuf, 10,000 label sets a batch, by
# tests/integration/label_sets_gen.py) to a collector on SQLite; then each
# read is asked BENCH_LABEL_RUNS (5) times:
#   label_sets_load_seconds           posting them all
#   label_sets_<read>_ms              median wall time of the answer (curl)
#   label_sets_<read>_cpu_ms          the collector's CPU per answer (/proc:
#                                     steadier than wall time on a busy machine)
#   label_sets_<read>_bytes           the answer's size
#   label_sets_collector_peak_rss_kib the collector's peak RSS over all of it
# reads: binaries (/v1/binaries), index (the UI's /), binaries_filtered
# (/v1/binaries?namespace=ns-1: a seventh of them). The goal: /v1/binaries
# under 1 s with 1 M label sets stored.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
edgeprof=$PWD/$build/edgeprof
sets=${BENCH_LABEL_SETS:-1000000}
runs=${BENCH_LABEL_RUNS:-5}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-labelbench.XXXXXX")
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

"$edgeprof" collector --store "sqlite:$tmp/c.db" --listen 127.0.0.1:0 --port-file "$tmp/port" \
	>"$tmp/collector.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
url=http://127.0.0.1:$(cat "$tmp/port")
t0=$(date +%s.%N)
python3 tests/integration/label_sets_gen.py "$url" --label-sets "$sets" --per-batch 10000 \
	--agent-id bench >"$tmp/gen.out"
echo "label_sets_stored: $sets"
printf 'label_sets_load_seconds: %.1f\n' "$(echo "$(date +%s.%N) - $t0" | bc -l)"

cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$pid/stat"; } # 100 ticks a second
read_one() { # NAME PATH
	local ms=() cpu=() i a b
	for ((i = 0; i < runs; i++)); do
		a=$(cpu_ms)
		ms+=("$(curl -s -o "$tmp/$1.out" -w '%{time_total}' "$url$2" | awk '{printf "%.0f", $1 * 1000}')")
		b=$(cpu_ms)
		cpu+=("$((b - a))")
	done
	echo "label_sets_$1_ms: $(printf '%s\n' "${ms[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")"
	echo "label_sets_$1_cpu_ms: $(printf '%s\n' "${cpu[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")"
	echo "label_sets_$1_bytes: $(stat -c %s "$tmp/$1.out")"
}
read_one binaries /v1/binaries
read_one index /
read_one binaries_filtered "/v1/binaries?namespace=ns-1"
got=$(jq '.binaries[0].label_sets' "$tmp/binaries.out")
[ "$got" = "$sets" ] || { echo "bench: /v1/binaries says $got label sets, not $sets" >&2; exit 1; }
echo "label_sets_collector_peak_rss_kib: $(awk '/VmHWM/ {print $2}' "/proc/$pid/status")"
