#!/usr/bin/env bash
# Trustworthy binaries at the collector (issue 32 item 7). A build-id note is
# only bytes: a process in any container can map a file that carries another
# binary's build-id with other code, and its agent sends that file. It was
# kept for ever ("first upload wins") and `edgeprof upload` of the real
# binary was answered "already there". Now an agent's code is provisional
# (said so by GET /v1/images/ID and the UI) and an authenticated upload
# replaces it; the agent's copy never comes back. With --upload-token-file
# only that token's holder uploads trusted code, and it opens nothing else.
# Every upload is filed under the build-id and arch it names, checked
# against the file, and --max-binary-mib bounds it: refused naming the size
# and the bound, counted, the collector unharmed.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

ID=572ac72487ae1966
bin=$FIXTURES/propeller_sample_1.bin
perf=$FIXTURES/propeller_sample_1.perfdata1
t=$TEST_TMP
umask 077
echo "fleet-$RANDOM$RANDOM" >"$t/token"
echo "ci-$RANDOM$RANDOM" >"$t/ci-token"
fleet=(-H "Authorization: Bearer $(cat "$t/token")")
mkdir -p "$t/planted"
python3 "$(dirname "$0")/plant_code.py" "$bin" "$t/planted/propeller_sample_1.bin" 0x1920
check "a planted copy: the binary's build-id note, int3 at main" \
	test "$(readelf -n "$t/planted/propeller_sample_1.bin" | awk '/Build ID/ {print $3}')" = "$ID"
code() { curl -s -o "$t/answer" -w '%{http_code}' "$@"; }
kept() { curl -s "${fleet[@]}" "$1/v1/images/$ID"; }
# page URL NAME: the function page of main, signed in with the fleet token
page() { curl -s -b "edgeprof_token=$(cat "$t/token")" "$1/function?build_id=$ID&addr=0x1920" >"$t/$2.html"; }
# agent URL NAME: an agent reading the planted file (its process mapped it)
agent() {
	"$EDGEPROF" agent --replay "$perf" --binary "$t/planted/propeller_sample_1.bin" \
		--collector "$1" --token-file "$t/token" --spool "$t/spool-$2" >"$t/$2.log" 2>&1
}

COLLECTOR_BIN=$EDGEPROF_ASAN
start_collector a --store "sqlite:$t/a.db" --listen 127.0.0.1:0 --token-file "$t/token" || finish
url=http://127.0.0.1:$COLLECTOR_PORT
agent "$url" agent1
check "the agent sends the planted file it read" \
	grep -q "binaries for the collector's UI: 1 sent" "$t/agent1.log"
check "kept as provisional (GET /v1/images/ID)" test "$(kept "$url")" = "$ID: kept, provisional"
page "$url" planted
check "the function page draws it, saying it is an agent's and not verified" \
	bash -c "grep -q 'id=\"code-provisional\"' '$t/planted.html' && grep -q 'int3' '$t/planted.html'"
check "the binary's page says so too" \
	grep -q 'id="code-provisional"' <(curl -s "${fleet[@]}" -b "edgeprof_token=$(cat "$t/token")" \
		"$url/binary?build_id=$ID")
"$EDGEPROF" upload "$bin" --collector "$url" --token-file "$t/token" >"$t/up1.log" 2>&1
rc=$?
check "edgeprof upload of the real binary replaces it (exit $rc; before: 'already there')" \
	bash -c "[ $rc = 0 ] && grep -q 'stored, trusted, in place of an agent.s provisional image' '$t/up1.log'"
check "kept as trusted now" test "$(kept "$url")" = "$ID: kept, trusted"
page "$url" real
check "the function page draws the real code: main's 14 blocks, no int3, no warning" \
	bash -c "grep -q 'data-blocks=\"14\"' '$t/real.html' && ! grep -q 'int3\|code-provisional' '$t/real.html'"
agent "$url" agent2
check "an agent with the planted file again sends nothing (the collector has trusted code)" \
	grep -q "UI: 0 sent, 1 it had" "$t/agent2.log"
c=$(code "${fleet[@]}" --data-binary "@$t/planted/propeller_sample_1.bin" \
	"$url/v1/images?build_id=$ID&arch=x86_64&source=agent&path=x")
check "planted code POSTed as an agent's: 200, the trusted code kept ($c)" \
	bash -c "[ $c = 200 ] && grep -q 'already here, kept the one stored' '$t/answer'"
page "$url" real2
check "  and the page still draws the real code" grep -q 'data-blocks="14"' "$t/real2.html"
# what an upload claims is checked against the file
c=$(code "${fleet[@]}" --data-binary "@$bin" "$url/v1/images?build_id=00112233&source=upload")
check "filed under another build-id: 400 naming both ($c)" \
	bash -c "[ $c = 400 ] && grep -q 00112233 '$t/answer' && grep -q $ID '$t/answer'"
c=$(code "${fleet[@]}" --data-binary "@$bin" "$url/v1/images?build_id=$ID&arch=aarch64&source=upload")
check "said to be aarch64 but x86_64: 400 naming both ($c)" \
	bash -c "[ $c = 400 ] && grep -q 'sent as arch aarch64 but the ELF file is x86_64' '$t/answer'"
c=$(code "${fleet[@]}" --data-binary "@$bin" "$url/v1/images?source=upload")
check "filed under no build-id: 400 ($c)" \
	bash -c "[ $c = 400 ] && grep -q 'no build_id=' '$t/answer'"
c=$(code "${fleet[@]}" --data-binary "@$bin" "$url/v1/images?build_id=$ID&source=debuginfod")
check "a source the server does not take from clients: 400 ($c)" test "$c" = 400
check "counted: 1 stored, 1 replaced, 1 kept, 4 refused" \
	bash -c "curl -s '$url/metrics' | grep -q '^edgeprof_images_total{result=\"replaced\"} 1$' &&
		 curl -s '$url/metrics' | grep -q '^edgeprof_images_total{result=\"refused\"} 4$'"
stop_pid "$COLLECTOR_PID"
check "the ASan collector stayed clean" bash -c "! grep -q 'Sanitizer' '$t/a.log'"

# --- a dedicated upload token: the fleet token (every node's) sends
# provisional code only
start_collector b --store "sqlite:$t/b.db" --listen 127.0.0.1:0 --token-file "$t/token" \
	--upload-token-file "$t/ci-token" || finish
url=http://127.0.0.1:$COLLECTOR_PORT
agent "$url" agent3
check "with --upload-token-file: the agent's planted file is provisional" \
	test "$(kept "$url")" = "$ID: kept, provisional"
"$EDGEPROF" upload "$bin" --collector "$url" --token-file "$t/token" >"$t/up2.log" 2>&1
rc=$?
check "edgeprof upload with the fleet token: refused, naming the upload token (exit $rc)" \
	bash -c "[ $rc = 1 ] && grep -q 'needs this collector.s upload token' '$t/up2.log'"
check "  counted as forbidden" \
	bash -c "curl -s '$url/metrics' | grep -q '^edgeprof_images_total{result=\"forbidden\"} 1$'"
"$EDGEPROF" upload "$bin" --collector "$url" --token-file "$t/ci-token" >"$t/up3.log" 2>&1
rc=$?
check "with the upload token: the real code replaces the agent's (exit $rc)" \
	bash -c "[ $rc = 0 ] && grep -q 'in place of an agent.s provisional image' '$t/up3.log'"
check "kept as trusted" test "$(kept "$url")" = "$ID: kept, trusted"
ci=(-H "Authorization: Bearer $(cat "$t/ci-token")")
check "the upload token opens nothing else: /v1/binaries 401" \
	test "$(code "${ci[@]}" "$url/v1/binaries")" = 401
check "  /v1/ingest 401" test "$(code "${ci[@]}" -X POST --data-binary x "$url/v1/ingest")" = 401
stop_pid "$COLLECTOR_PID"

# --- the upload bound: --max-binary-mib 1, a 3 MiB body with and without
# Content-Length (chunked); test_binaries checks an image over it
start_collector c --store "sqlite:$t/c.db" --listen 127.0.0.1:0 --max-binary-mib 1 || finish
url=http://127.0.0.1:$COLLECTOR_PORT
head -c $((3 << 20)) /dev/zero >"$t/big"
c=$(code --data-binary "@$t/big" "$url/v1/images?build_id=$ID&source=agent")
check "a 3 MiB upload over --max-binary-mib 1: 413 naming the bound ($c)" \
	bash -c "[ $c = 413 ] && grep -q 'larger than 1048576 bytes (--max-binary-mib)' '$t/answer'"
c=$(code -H 'Transfer-Encoding: chunked' --data-binary "@$t/big" \
	"$url/v1/images?build_id=$ID&source=agent")
check "  sent chunked (no Content-Length): 413 too ($c)" test "$c" = 413
check "  both counted as too_large, the collector answers" \
	bash -c "curl -s '$url/metrics' | grep -q '^edgeprof_images_total{result=\"too_large\"} 2$' &&
		 [ \"\$(curl -s '$url/healthz')\" = ok ]"
check "  and nothing is kept" test "$(code "$url/v1/images/$ID")" = 404
stop_pid "$COLLECTOR_PID"
finish
