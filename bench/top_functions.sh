#!/usr/bin/env bash
# Top functions (issue 36): what a selection's ranking across binaries costs
# beside the listing it starts from, in the same run. BENCH_TOP_SETS (100,000;
# BENCH_QUICK: 2,000) label sets over 25 binaries (20 edges, 5 IPs each,
# tests/integration/label_sets_gen.py), on SQLite; each read's median warm
# wall time of BENCH_TOP_RUNS (3):
#   top_listing_ms        /v1/binaries?limit=50 (the peer: a listing)
#   top_listing_ns_ms     /v1/binaries?limit=50&namespace=ns-1 (a seventh)
#   top_all_ms            /v1/top (every label set, the 20 hottest binaries)
#   top_ns_ms             /v1/top?namespace=ns-1
#   top_pod_ms            /v1/top?pod=pod-1234 (a prefix: 11 label sets)
#   top_prefix_all_ms     /v1/top?container_id=c-0000000000 (12 characters
#                         every generated container id starts with: the
#                         prefix that matches every label set)
#   top_index_pod_ms      /?pod=pod-1234 (the UI's / with a selection: the
#                         listing and the top 10)
#   top_collector_peak_rss_kib
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
case $build in /*) ;; *) build=$PWD/$build ;; esac
sets=${BENCH_TOP_SETS:-$([ -n "${BENCH_QUICK:-}" ] && echo 2000 || echo 100000)}
runs=${BENCH_TOP_RUNS:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-topbench.XXXXXX")
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
"$build/edgeprof" collector --store "sqlite:$tmp/c.db" --listen 127.0.0.1:0 \
	--port-file "$tmp/port" --retention-days 0 >"$tmp/collector.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
url=http://127.0.0.1:$(cat "$tmp/port")
python3 tests/integration/label_sets_gen.py "$url" --label-sets "$sets" --binaries 25 \
	--edges 20 --ips 5 >&2
echo "top_label_sets: $sets"
read_ms() { # NAME PATH: the median warm wall time of runs reads, after one cold
	local name=$1 path=$2 t
	curl -sf -o /dev/null "$url$path" || { echo "bench: $path failed" >&2; exit 1; }
	for _ in $(seq 1 "$runs"); do
		t=$(curl -sf -o /dev/null -w '%{time_total}' "$url$path")
		echo "$t"
	done | sort -n | awk -v n="$name" '{v[NR] = $1} END {printf "%s: %.0f\n", n, 1000 * v[int((NR + 1) / 2)]}'
}
read_ms top_listing_ms "/v1/binaries?limit=50"
read_ms top_listing_ns_ms "/v1/binaries?limit=50&namespace=ns-1"
read_ms top_all_ms "/v1/top"
read_ms top_ns_ms "/v1/top?namespace=ns-1"
read_ms top_pod_ms "/v1/top?pod=pod-1234"
read_ms top_prefix_all_ms "/v1/top?container_id=c-0000000000"
read_ms top_index_pod_ms "/?pod=pod-1234"
echo "top_collector_peak_rss_kib: $(awk '/VmHWM/ {print $2}' "/proc/$pid/status")"
