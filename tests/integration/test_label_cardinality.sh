#!/usr/bin/env bash
# Label cardinality and bounded lists (issue 32, item 5): one binary with
# LABEL_SETS (300,000) label sets, as a cluster's pod churn leaves them, and
# 250 other binaries. /v1/binaries answers one page (limit, cursor), each
# binary's labels summarised past N (their number, the most sampled N, and
# per dimension the number of values and the most sampled); following
# "next" lists every binary exactly once; /v1/profile without a build-id
# pages the same way and `edgeprof export --collector` follows it; the UI's
# first page is a page too. The collector runs in a 1 GiB memory cgroup (the
# Deployment's limit), and twelve concurrent reads leave it alive. Counts
# are asserted here; bench/label_cardinality.sh times the same at 1 M.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"
source "$(dirname "$0")/memcg.sh"

sets=${LABEL_SETS:-300000}
gen=$(dirname "$0")/label_sets_gen.py
cg=$(memcg_create collector 1024) || cg=
if [ -n "$cg" ]; then
	memcg_start "$cg" COLLECTOR_PID "$EDGEPROF" collector --store "sqlite:$TEST_TMP/c.db" \
		--listen 127.0.0.1:0 --port-file "$TEST_TMP/c.port"
	for _ in $(seq 100); do [ -s "$TEST_TMP/c.port" ] && break; sleep 0.1; done
	COLLECTOR_PORT=$(cat "$TEST_TMP/c.port")
else
	start_collector c --store "sqlite:$TEST_TMP/c.db" --listen 127.0.0.1:0 || exit 1
fi
url="http://127.0.0.1:$COLLECTOR_PORT"

python3 "$gen" "$url" --label-sets "$sets" --per-batch 10000 --agent-id big \
	>"$TEST_TMP/gen1.out" 2>&1
check "$sets label sets on one binary are stored" grep -q '^batches:' "$TEST_TMP/gen1.out"
python3 "$gen" "$url" --label-sets 250 --binaries 250 --base 1 --agent-id many --prefix m \
	>"$TEST_TMP/gen2.out" 2>&1
check "250 more binaries are stored" grep -q '^batches:' "$TEST_TMP/gen2.out"
big=$(printf '%040x' $((0xe0e0000000)))

# --- one page, labels summarised
curl -s -o "$TEST_TMP/b.json" -w '%{size_download}\n' "$url/v1/binaries?limit=5" >"$TEST_TMP/b.size"
check "/v1/binaries?limit=5: 5 binaries and where the next page starts" \
	test "$(jq '(.binaries | length), (.next | type)' "$TEST_TMP/b.json" | xargs)" = "5 string"
check "  in $(cat "$TEST_TMP/b.size") bytes (< 256 KB)" test "$(cat "$TEST_TMP/b.size")" -lt 262144
jq ".binaries[] | select(.build_id == \"$big\")" "$TEST_TMP/b.json" >"$TEST_TMP/big.json"
check "the big binary: label_sets = $sets, exactly" test "$(jq .label_sets "$TEST_TMP/big.json")" = "$sets"
check "  100 label sets listed (the most sampled), labels_truncated" \
	test "$(jq '(.labels | length), .labels_truncated' "$TEST_TMP/big.json" | xargs)" = "100 true"
dim() { jq -r ".label_values.$1 | \"\(.distinct) \(.summarized) \(.values | length)\"" "$TEST_TMP/big.json"; }
read -r d s v < <(dim container_id)
check "  containers: $d distinct (within 2% of $sets), summarised, 100 values" \
	bash -c "[ $s = true ] && [ $v = 100 ] && [ $d -ge $((sets * 98 / 100)) ] && [ $d -le $((sets * 102 / 100)) ]"
check "  namespaces: 7 distinct, listed whole" test "$(dim namespace)" = "7 false 7"
check "  their samples add up to the binary's" \
	test "$(jq '[.label_values.namespace.values[].samples] | add' "$TEST_TMP/big.json")" = "$sets"
check "  processes: 5 distinct, listed whole" test "$(dim process)" = "5 false 5"

# --- every page: each binary once
cursor= pages=0
: >"$TEST_TMP/ids"
while :; do
	curl -s "$url/v1/binaries?limit=17${cursor:+&cursor=$cursor}" >"$TEST_TMP/page.json"
	jq -r '.binaries[] | "\(.build_id) \(.samples)"' "$TEST_TMP/page.json" >>"$TEST_TMP/ids"
	pages=$((pages + 1))
	cursor=$(jq -r '.next // empty' "$TEST_TMP/page.json")
	[ -n "$cursor" ] && [ "$pages" -lt 100 ] || break
done
check "following next: 251 binaries in $pages pages, each once" \
	test "$(wc -l <"$TEST_TMP/ids") $(cut -d' ' -f1 "$TEST_TMP/ids" | sort -u | wc -l) $pages" = "251 251 15"
check "  their samples add up to every batch's ($((sets + 250)))" \
	test "$(awk '{s += $2} END {print s}' "$TEST_TMP/ids")" = "$((sets + 250))"
check "a page larger than --max-page: 400 naming the bound" \
	bash -c "[ \"\$(curl -s -o '$TEST_TMP/400' -w '%{http_code}' '$url/v1/binaries?limit=100000')\" = 400 ] && grep -q 'expected 1 to 1000' '$TEST_TMP/400'"

# --- /v1/nodes pages the same way
python3 "$gen" "$url" --label-sets 1 --agents 5 --agent-id nodes --node pager >/dev/null 2>&1
cursor= pages=0
: >"$TEST_TMP/nodes"
while :; do
	curl -s "$url/v1/nodes?limit=2${cursor:+&cursor=$cursor}" >"$TEST_TMP/nodes.json"
	jq -r '.nodes[].name' "$TEST_TMP/nodes.json" >>"$TEST_TMP/nodes"
	pages=$((pages + 1))
	cursor=$(jq -r '.next // empty' "$TEST_TMP/nodes.json")
	[ -n "$cursor" ] && [ "$pages" -lt 20 ] || break
done
check "/v1/nodes?limit=2: 6 nodes in 3 pages, each once" \
	test "$(wc -l <"$TEST_TMP/nodes") $(sort -u "$TEST_TMP/nodes" | wc -l) $pages" = "6 6 3"

# --- the profile of every binary: pages too, and the CLI follows them
hdr=$(curl -s -D - -o /dev/null "$url/v1/profile?format=proto&limit=17" | tr -d '\r' |
	awk -F': ' 'tolower($1) == "edgeprof-next-cursor" {print $2}')
check "/v1/profile without a build-id: one page, Edgeprof-Next-Cursor says the next" test -n "$hdr"
"$EDGEPROF" export --collector "$url" --format json -o "$TEST_TMP/all.json" >"$TEST_TMP/export.log" 2>&1
check "edgeprof export --collector: every page, 251 binaries" \
	test "$(jq '.profiles | length' "$TEST_TMP/all.json" 2>/dev/null)" = 251

# --- the UI's first page: the hottest 50, and a link to the next
curl -s "$url/" >"$TEST_TMP/index.html"
check "/: 50 binaries listed of 251, the big one first with its label sets" \
	bash -c "[ \$(grep -c 'class=\"binary\"' '$TEST_TMP/index.html') = 50 ] && grep -q '<b>251</b> binaries' '$TEST_TMP/index.html' && grep -q 'data-label-sets=\"$sets\"' '$TEST_TMP/index.html'"
check "  and a link to the colder ones" grep -q 'href="/?page=2' "$TEST_TMP/index.html"

# --- twelve reads at once, within the Deployment's 1 GiB
readers=()
for i in 1 2 3 4 5 6; do
	curl -s -m 120 -o /dev/null -w '%{http_code}\n' "$url/v1/binaries" >"$TEST_TMP/code.b$i" &
	readers+=($!)
	curl -s -m 120 -o /dev/null -w '%{http_code}\n' "$url/" >"$TEST_TMP/code.i$i" &
	readers+=($!)
done
wait "${readers[@]}"
cat "$TEST_TMP"/code.* >"$TEST_TMP/codes"
check "twelve concurrent reads: all 200" test "$(sort -u "$TEST_TMP/codes" | xargs)" = 200
check "the collector still answers /healthz" curl -sf "$url/healthz" -o /dev/null
if [ -n "$cg" ]; then
	echo "# collector's peak memory: $(memcg_peak_mib "$cg") MiB of 1024"
	check "no OOM kill in the collector's 1 GiB" test "$(memcg_oom_kills "$cg")" = 0
fi
cat "$TEST_TMP/export.log" | sed "s/^/# /"
finish
