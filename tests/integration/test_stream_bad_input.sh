#!/usr/bin/env bash
# Garbage on the wire: each bad request gets the right status and a reason,
# is counted in /metrics, and leaves the stored data unchanged. A replayed
# (agent id, sequence) is acknowledged as a duplicate and not counted twice.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

perf="$FIXTURES/propeller_sample_1.perfdata1"
bin="$FIXTURES/propeller_sample_1.bin"
COLLECTOR_BIN=$EDGEPROF_ASAN
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
start_collector c --store "sqlite:$TEST_TMP/store.db" --listen 127.0.0.1:0 --max-body 1000000 ||
	exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"

# real batches: an agent whose collector is down keeps them in its spool
"$EDGEPROF" agent --replay "$perf" --binary "$bin" --batch-samples 1000 \
	--collector http://127.0.0.1:1 --spool "$TEST_TMP/spool" --flush-timeout 1 \
	>"$TEST_TMP/agent.log" 2>&1
mapfile -t batches < <(ls "$TEST_TMP/spool"/*.batch)
check "an agent without its collector keeps its batches (${#batches[@]}) in the spool" \
	test "${#batches[@]}" -ge 4

post() { # post FILE [ENCODING] -> HTTP status, body in $TEST_TMP/body
	curl -s -o "$TEST_TMP/body" -w '%{http_code}' -X POST \
		-H "Content-Encoding: ${2:-zstd}" --data-binary "@$1" "$url/v1/ingest"
}
check "a real batch is stored (200)" test "$(post "${batches[0]}")" = 200
check "the same batch again is acknowledged (200) as a duplicate" \
	test "$(post "${batches[0]}")" = 200
check "duplicates are counted" test "$(metric "$url" 'edgeprof_ingest_batches_total{result="duplicate"}')" = 1
curl -sf "$url/v1/profile?format=json" | edge_table >"$TEST_TMP/before"
check "stored counts are there" test -s "$TEST_TMP/before"

head -c 5000 /dev/urandom >"$TEST_TMP/garbage"
check "garbage: 400" test "$(post "$TEST_TMP/garbage")" = 400
check "  with the reason (not a zstd stream)" grep -q "zstd" "$TEST_TMP/body"
# a body that is not one checksummed zstd frame carries nothing that would
# tell a damaged batch from another: refused, saying why (all were stored)
check "a batch sent unencoded (identity): 415" test "$(post "${batches[1]}" identity)" = 415
check "  naming what is expected" grep -q "expected zstd (one frame with a content checksum" \
	"$TEST_TMP/body"
check "a batch without Content-Encoding: 415" test "$(curl -s -o "$TEST_TMP/body" \
	-w '%{http_code}' -X POST --data-binary "@${batches[1]}" "$url/v1/ingest")" = 415
zstd -q -d -c "${batches[1]}" | zstd -q -c --no-check >"$TEST_TMP/unchecked"
check "a zstd frame without a checksum: 400" test "$(post "$TEST_TMP/unchecked")" = 400
check "  naming the missing checksum" grep -q "zstd frame without a content checksum" \
	"$TEST_TMP/body"
cat "${batches[1]}" "$TEST_TMP/unchecked" >"$TEST_TMP/two"
check "a checked frame followed by another: 400" test "$(post "$TEST_TMP/two")" = 400
check "  naming the bytes after the frame" grep -q "bytes after the zstd frame" "$TEST_TMP/body"
size=$(stat -c %s "${batches[1]}")
head -c $((size / 2)) "${batches[1]}" >"$TEST_TMP/truncated"
check "a truncated batch: 400" test "$(post "$TEST_TMP/truncated")" = 400
check "  with the reason (truncated)" grep -q "truncated" "$TEST_TMP/body"
head -c 2000000 /dev/zero >"$TEST_TMP/big"
check "a body over --max-body: 413" test "$(post "$TEST_TMP/big")" = 413
# a zstd bomb: 200 MB of zeros in a few KB, over the decompressed limit
head -c 200000000 /dev/zero | zstd -q -c >"$TEST_TMP/bomb.zst"
check "a decompression bomb: 413" test "$(post "$TEST_TMP/bomb.zst")" = 413
# one bit flipped in the middle of a spooled batch (the frame's checksum
# covers its content): refused, saying so, nothing stored
cp "${batches[1]}" "$TEST_TMP/flipped"
size=$(stat -c %s "$TEST_TMP/flipped")
byte=$(od -An -tu1 -j $((size / 2)) -N1 "$TEST_TMP/flipped" | tr -d ' ')
printf "$(printf '\\%03o' $((byte ^ 16)))" |
	dd of="$TEST_TMP/flipped" bs=1 seek=$((size / 2)) conv=notrunc status=none
check "a spooled batch with one flipped bit: 400" test "$(post "$TEST_TMP/flipped")" = 400
check "  with the reason (zstd checksum mismatch)" grep -q "zstd checksum mismatch" "$TEST_TMP/body"
printf '\x08\x63' | zstd -q -c >"$TEST_TMP/v99" # Batch{wire_version: 99}
check "wire_version 99: 400" test "$(post "$TEST_TMP/v99")" = 400
check "  naming both versions" grep -q "wire_version 99 not supported: this collector speaks 1..1" \
	"$TEST_TMP/body"
printf '\x08\x01' | zstd -q -c >"$TEST_TMP/anon" # Batch{wire_version: 1} without agent or sequence
check "a batch without identity: 400" test "$(post "$TEST_TMP/anon")" = 400
# a build-id is the key counts are stored under: lowercase hex or none
printf 'wire_version: 1 agent { agent_id: "x" } sequence: 9 binaries { profile { %s } }\n' \
	'build_id: "../../etc/passwd" samples: 1' |
	protoc-c --encode=edgeprof.v1.Batch --proto_path=proto proto/ingest.proto |
	zstd -q -c >"$TEST_TMP/badid"
check "a batch whose build-id is not hex: 400" test "$(post "$TEST_TMP/badid")" = 400
check "  naming it" grep -q "binaries\[0\]: build-id '../../etc/passwd' (16 characters): not lowercase hex" \
	"$TEST_TMP/body"
check "an unknown Content-Encoding: 415" test "$(post "${batches[1]}" gzip)" = 415
check "GET on ingest: 405" test "$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/ingest")" = 405
check "an unknown path: 404" test "$(curl -s -o /dev/null -w '%{http_code}' "$url/nope")" = 404

curl -sf "$url/v1/profile?format=json" | edge_table >"$TEST_TMP/after"
check "stored data unchanged by the bad requests" cmp -s "$TEST_TMP/before" "$TEST_TMP/after"
check "bad requests counted in /metrics (8)" \
	test "$(metric "$url" 'edgeprof_ingest_batches_total{result="bad_request"}')" = 8
check "too large counted in /metrics (2)" \
	test "$(metric "$url" 'edgeprof_ingest_batches_total{result="too_large"}')" = 2
check "unsupported encodings counted (3)" \
	test "$(metric "$url" 'edgeprof_ingest_batches_total{result="unsupported_encoding"}')" = 3
check "one batch stored" test "$(metric "$url" 'edgeprof_ingest_batches_total{result="stored"}')" = 1
check "/healthz answers" curl -sf "$url/healthz" -o /dev/null
check "/readyz answers (store reachable)" curl -sf "$url/readyz" -o /dev/null
check "unknown build-id: 404" test "$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/profile?build_id=00ff")" = 404
for id in 00FF xyz 0f0 "$(printf 'a%.0s' {1..130})"; do
	check "build_id=${id:0:12}: 400, naming it" test "$(curl -s -o "$TEST_TMP/body" -w '%{http_code}' \
		"$url/v1/profile?build_id=$id")" = 400 -a -n "$(grep "build-id '${id:0:40}" "$TEST_TMP/body")"
	check "/v1/images/${id:0:12}: 400" test "$(curl -s -o /dev/null -w '%{http_code}' \
		"$url/v1/images/$id")" = 400
done
check "unknown format: 400" test "$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/profile?format=xml")" = 400

# the rest of the batches: the store ends up with the whole recording
for b in "${batches[@]}"; do post "$b" >/dev/null; done
"$EDGEPROF" import "$perf" --binary "$bin" -o "$TEST_TMP/local.prof" 2>/dev/null
"$EDGEPROF" export "$TEST_TMP/local.prof" --format json | edge_table >"$TEST_TMP/local"
curl -sf "$url/v1/profile?format=json" | edge_table >"$TEST_TMP/all"
check "all spooled batches (one sent twice) sum to the local import" cmp -s "$TEST_TMP/local" "$TEST_TMP/all"

stop_pid "$COLLECTOR_PID"
wait "$COLLECTOR_PID" 2>/dev/null
check "the collector (ASan) exits cleanly on SIGTERM, no leak" \
	bash -c "! grep -q 'ERROR: \(Address\|Leak\)Sanitizer\|runtime error' '$TEST_TMP/c.log'"
finish
