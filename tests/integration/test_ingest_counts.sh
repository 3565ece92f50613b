#!/usr/bin/env bash
# Counts are range-checked at ingest (issue 18, defect 1): a batch whose
# counts are more than its samples allow (common/wire/wire.h,
# ep_wire_check_counts) is refused with 400 naming the count, counted in
# /metrics, and stores nothing; one binary's huge counts never make another's
# listing or profile fail, and never wrap anyone's counts.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

COLLECTOR_BIN=$EDGEPROF_ASAN
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
start_collector c --store "sqlite:$TEST_TMP/store.db" --listen 127.0.0.1:0 || exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"

# batch SEQ BUILD_ID POD SAMPLES EDGE_COUNT [STATS_SAMPLES]: posted as plain
# protobuf; HTTP status out, body in $TEST_TMP/body
batch() {
	protoc-c --encode=edgeprof.v1.Batch --proto_path=proto proto/ingest.proto >"$TEST_TMP/b" <<TXT
wire_version: 1
agent { node: "n1" agent_id: "agent-$2" version: "t" }
sequence: $1
window_end_ns: 1700000000000000000
config { chop: 32 entries: 32 }
stats { samples: ${6:-$4} }
binaries {
  profile {
    build_id: "$2" arch: "x86_64" paths: "/bin/$2" samples: $4
    edges { from: 4096 to: 4160 taken: true count: $5 kind: BRANCH_CONDITIONAL }
    ranges { start: 4160 end: 4200 count: $5 }
    ips { ip: 4164 count: 1 }
  }
  labels { pod: "$3" }
}
TXT
	zstd -q -f "$TEST_TMP/b" -o "$TEST_TMP/b.zst" # with its checksum, as agents send
	curl -s -o "$TEST_TMP/body" -w '%{http_code}' -X POST -H 'Content-Encoding: zstd' \
		--data-binary "@$TEST_TMP/b.zst" "$url/v1/ingest"
}
status() { curl -s -o "$TEST_TMP/out" -w '%{http_code}' "$url$1"; }

check "a plausible batch of binary bb is stored (200)" test "$(batch 1 bb pod-1 10 100)" = 200
# the issue's batches: samples 2^63 - 1 under one label set, 1 under another
check "samples = 2^63 - 1: refused (400)" test "$(batch 1 aa pod-1 9223372036854775807 5)" = 400
check "  naming the samples and the limit" \
	grep -q "9223372036854775807 samples in one batch: more than the 4294967296 allowed" "$TEST_TMP/body"
check "binary samples over the batch's: refused (400)" test "$(batch 1 cc pod-1 50 5 10)" = 400
check "  naming the binary" grep -q "binaries\[0\] (build-id cc): samples 50 is more than the batch's" "$TEST_TMP/body"
check "the next batch of aa (samples 1) is stored (200)" test "$(batch 3 aa pod-2 1 5)" = 200
# 2^64 - 150 added to 100 was served as 2^64 - 50
check "an edge count of 2^64 - 150: refused (400)" test "$(batch 2 bb pod-1 10 18446744073709551466)" = 400
check "  naming the edge, its count and the bound" \
	grep -q "edge 0x1000->0x1040 count 18446744073709551466 (mispredicted 0): out of range for a batch of 10 samples counting at most 32 branches each (config.chop 32)" "$TEST_TMP/body"
check "a count of exactly samples x chop is accepted (200)" test "$(batch 3 bb pod-1 10 320)" = 200
check "one more is refused (400)" test "$(batch 4 bb pod-1 10 321)" = 400
check "refusals counted in /metrics (4)" \
	test "$(metric "$url" edgeprof_ingest_counts_out_of_range_total)" = 4
check "  as bad requests too" \
	test "$(metric "$url" 'edgeprof_ingest_batches_total{result="bad_request"}')" = 4

check "GET /v1/binaries: 200" test "$(status /v1/binaries)" = 200
check "  bb's samples are its own (20)" \
	test "$(jq -r '.binaries[] | select(.build_id == "bb") | .samples' "$TEST_TMP/out")" = 20
check "  aa's are 1" test "$(jq -r '.binaries[] | select(.build_id == "aa") | .samples' "$TEST_TMP/out")" = 1
check "GET /v1/profile?build_id=bb: 200" test "$(status '/v1/profile?build_id=bb&format=json')" = 200
check "  bb's edge count is 100 + 320, nothing of the refused batches" \
	test "$(jq -r '.profiles[0].branches[0].count' "$TEST_TMP/out")" = 420
check "GET /v1/profile (every binary): 200" test "$(status '/v1/profile?format=json')" = 200

# SQLite's heap is shown, so RSS growth can be told from its page cache
# filling (bounded by cache_size, 64 MiB)
mem=$(metric "$url" edgeprof_store_memory_bytes)
check "/metrics shows the SQLite store's heap, above 0 and within its cache's bound ($mem bytes)" \
	test "${mem:-0}" -gt 0 -a "${mem:-0}" -lt $((80 << 20))
heap=$(metric "$url" edgeprof_process_heap_bytes)
check "  and the heap in use (the sanitizer's books in this build), SQLite's within it ($heap bytes)" \
	test "${heap:-0}" -gt "${mem:-0}"
stop_pid "$COLLECTOR_PID"
check "the collector (ASan) exits cleanly, no leak" \
	bash -c "! grep -q 'ERROR: \(Address\|Leak\)Sanitizer\|runtime error' '$TEST_TMP/c.log'"
# the plain build reads glibc's books instead, on the same store
COLLECTOR_BIN=$EDGEPROF start_collector plain --store "sqlite:$TEST_TMP/store.db" \
	--listen 127.0.0.1:0 || exit 1
check "/v1/profile from the plain build: 200" \
	test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$COLLECTOR_PORT/v1/profile")" = 200
mem=$(metric "http://127.0.0.1:$COLLECTOR_PORT" edgeprof_store_memory_bytes)
heap=$(metric "http://127.0.0.1:$COLLECTOR_PORT" edgeprof_process_heap_bytes)
check "  its heap in use (glibc's mallinfo2) holds SQLite's ($heap > $mem bytes)" \
	test "${mem:-0}" -gt 0 -a "${heap:-0}" -gt "${mem:-0}"
stop_pid "$COLLECTOR_PID"
finish
