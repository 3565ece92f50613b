#!/usr/bin/env bash
# Every JSON the collector writes stays valid JSON when agents send bytes
# that are not UTF-8 (issue 18, defect 7): any user can run a binary named
# with bytes 0xFF 0xFE, and its path, its process name and the node name
# reach /v1/binaries, /v1/profile?format=json, /v1/nodes and /v1/sessions as
# they came. Checked with python3's json, which refuses invalid UTF-8.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

COLLECTOR_BIN=$EDGEPROF_ASAN
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
start_collector c --store "sqlite:$TEST_TMP/store.db" --listen 127.0.0.1:0 || exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"

# \377\376 = 0xFF 0xFE; \300\257 an overlong "/"; \355\240\200 a surrogate; \364\220\200\200 past U+10FFFF
cat >"$TEST_TMP/batch.txt" <<'TXT'
wire_version: 1
agent { node: "node-\377\376" agent_id: "a1" version: "v\376" }
sequence: 1
window_end_ns: 1700000000000000000
capabilities: "profile-session"
binaries {
  profile {
    build_id: "abcd"
    paths: "/tmp/\377\376"
    paths: "/tmp/x\300\257y\355\240\200z\364\220\200\200\303"
    arch: "x86_64"
    samples: 3
    edges { from: 4096 to: 4160 taken: true count: 5 kind: BRANCH_CONDITIONAL }
    functions { name: "f\377\376" start: 4096 size: 128 }
  }
  labels { process: "\377\376" cgroup: "/x\377" }
}
TXT
protoc-c --encode=edgeprof.v1.Batch --proto_path=proto proto/ingest.proto \
	<"$TEST_TMP/batch.txt" >"$TEST_TMP/batch" 2>/dev/null # it warns of the invalid UTF-8 it was asked for
check "a batch naming a binary with bytes 0xFF 0xFE is stored (200)" \
	test "$(zstd -q -c "$TEST_TMP/batch" | curl -s -o /dev/null -w '%{http_code}' -X POST \
		-H 'Content-Encoding: zstd' --data-binary @- "$url/v1/ingest")" = 200

valid_json() { # valid_json FILE: strict UTF-8, then JSON
	python3 -c 'import json, sys; json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))' "$1"
}
for path in /v1/binaries "/v1/profile?format=json" "/v1/profile?build_id=abcd&format=json" /v1/nodes; do
	curl -sf "$url$path" -o "$TEST_TMP/out.json"
	check "GET $path: valid JSON" valid_json "$TEST_TMP/out.json"
done
curl -sf "$url/v1/binaries" -o "$TEST_TMP/bin.json"
check "  the path's invalid bytes are replaced by U+FFFD, the rest kept" \
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1], encoding="utf-8"))
p = d["binaries"][0]["paths"]; assert "/tmp/\ufffd\ufffd" in p, p' "$TEST_TMP/bin.json"

curl -s -X POST "$url/v1/sessions?container_id=%ff%fe0123456789&duration_s=30" -o "$TEST_TMP/s.json"
check "POST /v1/sessions with a container id of bytes 0xFF 0xFE: valid JSON" valid_json "$TEST_TMP/s.json"
id=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1], "rb"))["id"])' "$TEST_TMP/s.json" 2>/dev/null)
curl -s "$url/v1/sessions/$id" -o "$TEST_TMP/s2.json"
check "GET /v1/sessions/ID: valid JSON" valid_json "$TEST_TMP/s2.json"

"$EDGEPROF" export --collector "$url" --build-id abcd --format json -o "$TEST_TMP/export.json" 2>/dev/null
check "edgeprof export --collector --format json: valid JSON" valid_json "$TEST_TMP/export.json"

stop_pid "$COLLECTOR_PID"
check "the collector (ASan) exits cleanly, no leak" \
	bash -c "! grep -q 'ERROR: \(Address\|Leak\)Sanitizer\|runtime error' '$TEST_TMP/c.log'"
finish
