#!/usr/bin/env bash
# Bounds on one batch (issue 32, item 3): a batch of 4 M distinct edges
# (7 MB compressed, 64 MB unpacked) took the collector to 1.27 GiB. Now each
# batch is counted from its bytes before it is unpacked: past a bound
# (--max-batch KIND=N: binaries, edges, ranges, ips, functions, label-sets;
# and each string's length, common/wire/wire.h) it is refused with 400 naming the count and the bound, which the agent
# drops rather than resends (agent/stream/streamer.c), and counted in
# /metrics by bound; what batches in flight hold is bounded too
# (--ingest-memory-mib: a batch needing more alone gets 413, others wait).
# The collector runs in a 1 GiB memory cgroup (the Deployment's limit)
# while six agents post batches of a million edges at once.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"
source "$(dirname "$0")/memcg.sh"

gen=$(dirname "$0")/label_sets_gen.py
post() { # FILE [URL]: HTTP status out, the answer in $TEST_TMP/answer
	curl -s -m 300 -o "$TEST_TMP/answer" -w '%{http_code}' -H 'Content-Encoding: zstd' \
		--data-binary "@$1" "${2:-$url}/v1/ingest"
}
batch() { # NAME ARGS...: one batch's bytes as $TEST_TMP/NAME.zst
	mkdir -p "$TEST_TMP/$1" && python3 "$gen" x --dump "$TEST_TMP/$1" --agent-id "$1" "${@:2}" \
		>/dev/null && mv "$TEST_TMP/$1/batch-000001.zst" "$TEST_TMP/$1.zst"
}
answered() { # FILE CODE TEXT: FILE posted is answered CODE, the answer naming TEXT
	[ "$(post "$1")" = "$2" ] && grep -qF -- "$3" "$TEST_TMP/answer"
}
refused() { # METRIC-BOUND: refusals counted
	metric "$url" "edgeprof_ingest_refused_total{bound=\"$1\"}"
}

# --- small bounds, each passed by one
COLLECTOR_BIN=$EDGEPROF_ASAN
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
start_collector small --store "sqlite:$TEST_TMP/small.db" --listen 127.0.0.1:0 \
	--max-batch edges=1000 --max-batch label-sets=50 --max-batch binaries=80 \
	--max-batch mib=2 --ingest-memory-mib 16
check "a collector starts with --max-batch and --ingest-memory-mib" kill -0 "$COLLECTOR_PID"
url="http://127.0.0.1:${COLLECTOR_PORT:-1}"
small_pid=$COLLECTOR_PID
batch at-edges --label-sets 1 --edges 1000
check "a batch of 1,000 edges, the bound: stored (200)" test "$(post "$TEST_TMP/at-edges.zst")" = 200
batch over-edges --label-sets 1 --edges 1001
check "1,001 edges: refused (400)" test "$(post "$TEST_TMP/over-edges.zst")" = 400
check "  naming the count and the bound" \
	grep -q '1001 edges in one batch: more than the 1000 a batch may hold (collector --max-batch edges=N)' "$TEST_TMP/answer"
check "  counted in /metrics" test "$(refused edges)" = 1
batch over-sets --label-sets 51 --per-batch 51
check "51 label sets: refused (400), naming the bound" \
	answered "$TEST_TMP/over-sets.zst" 400 'more than 50 distinct label sets'
check "  counted in /metrics" test "$(refused label_sets)" = 1
batch at-sets --label-sets 50 --per-batch 50
check "50 label sets: stored (200)" test "$(post "$TEST_TMP/at-sets.zst")" = 200
# 81 binaries under the 50 label sets: binaries counted apart from label sets
batch over-binaries --label-sets 81 --per-batch 81 --binaries 81
check "81 binaries: refused (400)" \
	answered "$TEST_TMP/over-binaries.zst" 400 '81 binaries (BinaryDelta) in one batch: more than the 80'
# 2.3 MB once decompressed: past --max-batch mib=2 before it is counted
batch big-plain --label-sets 200 --per-batch 200 --edges 900
check "over --max-batch mib=2 once decompressed: refused (413)" \
	answered "$TEST_TMP/big-plain.zst" 413 'more than 2097152 bytes once decompressed'
# 200,000 IPs: within every count, 1.6 MB, but 17 MB once unpacked: more
# than the 12 MiB a 16 MiB ingest keeps for unpacking
batch many-ips --label-sets 1 --ips 200000
check "what unpacking a batch takes past --ingest-memory-mib: refused (413)" \
	answered "$TEST_TMP/many-ips.zst" 413 'more than the 12 MiB batches in flight may hold'
check "  counted in /metrics" test "$(refused memory)" = 1
check "the bounds are in /metrics" test "$(metric "$url" 'edgeprof_ingest_bound{bound="edges"}')" = 1000
# strings: a label value or a node name is stored and listed; each has a
# bound (common/wire/wire.h), here a container id and a node of 300 bytes
long=$(printf 'x%.0s' $(seq 300))
batch long-label --label-sets 1 --prefix "$long"
check "a 300-byte container id: refused (400), the field and the bound named" \
	answered "$TEST_TMP/long-label.zst" 400 'labels.container_id of binaries[0]: more than 256 bytes'
batch long-node --label-sets 1 --node "$long"
check "a 300-byte node name: refused (400), the field and the bound named" \
	answered "$TEST_TMP/long-node.zst" 400 'agent.node: more than 256 bytes'
check "  counted in /metrics" test "$(refused strings)" = 2
stop_pid "$small_pid"
check "the collector (ASan) exits cleanly, no leak" \
	bash -c "! grep -q 'ERROR: \(Address\|Leak\)Sanitizer\|runtime error' '$TEST_TMP/small.log'"

# --- the issue's batch, and six agents' million edges at once, in 1 GiB
cg=$(memcg_create collector 1024) || cg=
if [ -n "$cg" ]; then
	memcg_start "$cg" big_pid "$EDGEPROF" collector --store "sqlite:$TEST_TMP/big.db" \
		--listen 127.0.0.1:0 --port-file "$TEST_TMP/big.port"
	for _ in $(seq 100); do [ -s "$TEST_TMP/big.port" ] && break; sleep 0.1; done
	url="http://127.0.0.1:$(cat "$TEST_TMP/big.port")"
else
	start_collector big --store "sqlite:$TEST_TMP/big.db" --listen 127.0.0.1:0 || exit 1
	url="http://127.0.0.1:$COLLECTOR_PORT"
fi
batch four-m --label-sets 1 --edges 4000000
check "4 M distinct edges in one batch: refused (400) at the default bound" \
	answered "$TEST_TMP/four-m.zst" 400 '4000000 edges in one batch: more than the 1048576'
mkdir -p "$TEST_TMP/six"
python3 "$gen" x --dump "$TEST_TMP/six" --agent-id m --agents 6 --label-sets 1 \
	--edges 1000000 >/dev/null
posts=()
for f in "$TEST_TMP"/six/*.zst; do
	{ post "$f"; echo; } >"$TEST_TMP/code.$(basename "$f")" &
	posts+=($!)
done
wait "${posts[@]}"
check "six batches of 1 M edges at once: all stored ($(cat "$TEST_TMP"/code.* | xargs))" \
	test "$(cat "$TEST_TMP"/code.* | sort -u | xargs)" = 200
check "their 6 M edges are counted" \
	test "$(metric "$url" 'edgeprof_ingest_rows_total{kind="edges"}')" = 6000000
check "the collector still answers /healthz" curl -sf "$url/healthz" -o /dev/null
if [ -n "$cg" ]; then
	echo "# collector's peak memory: $(memcg_peak_mib "$cg") MiB of 1024"
	check "no OOM kill in the collector's 1 GiB" test "$(memcg_oom_kills "$cg")" = 0
fi
finish
