#!/usr/bin/env bash
# The top-functions view (issue 36): a selection's functions ranked across
# all its binaries, on /top, on / when a selection is active, and as JSON
# (/v1/top). A collector (ASan+UBSan) gets one batch (top_gen.py): two
# binaries with symbols under two pods, the web pod's hottest function in its
# less sampled binary. The expected ranking is computed here with jq from the
# collector's own JSON export (/v1/profile?format=json), not from the code
# under test; the filter is typed as the pages show the values (a prefix of
# the pod, a container id's first 12 digits); every link of the pages keeps
# it; and from / with the pod selected, the hottest function is one click
# away (the links followed as a browser would). Headless Chromium renders /.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

COLLECTOR_BIN=$EDGEPROF_ASAN
start_collector top --store "sqlite:$TEST_TMP/top.db" --listen 127.0.0.1:0 || finish
URL=http://127.0.0.1:$COLLECTOR_PORT
python3 "$(dirname "$0")/top_gen.py" "$URL" >"$TEST_TMP/gen.log" 2>&1
check "the batch is stored" grep -q 'batches: 1' "$TEST_TMP/gen.log"

POD=shop/web-7d9f8-x2k4q # what / lists; the filter below is the prefix a user types
SEL='pod=shop/web-7d9f8'
# the export's own count: per function (name, build-id) its branch executions
# (branches leaving it, less derived fall-throughs and arrivals from other
# binaries), hottest first
expected() {
	jq -r 'def hex: ltrimstr("0x") | explode | reduce .[] as $c (0; . * 16 +
			(if $c >= 97 then $c - 87 elif $c >= 65 then $c - 55 else $c - 48 end));
		[.profiles[] | .build_id as $b
		 | [.branches[] | select(.kind != "fallthrough" and (.from_external | not))] as $br
		 | .functions[] | (.start | hex) as $s | .size as $z
		 | {b: $b, name, n: ([$br[] | (.from | hex) as $f
			| select($f >= $s and $f < $s + $z) | .count] | add // 0)}]
		| sort_by(-.n) | .[] | "\(.n) \(.name) \(.b)"'
}
curl -s "$URL/v1/profile?format=json&pod=$POD" | expected >"$TEST_TMP/expected"
read -r top_n top_name top_b <"$TEST_TMP/expected"
check "the export has the pod's two binaries" \
	test "$(awk '{print $3}' "$TEST_TMP/expected" | sort -u | wc -l)" = 2
curl -s "$URL/v1/top?$SEL&n=1000" >"$TEST_TMP/top.json"
check "/v1/top: the hottest function across both binaries is the export's ($top_name, $top_n)" \
	test "$(jq -r '.functions[0] | "\(.branches) \(.name) \(.build_id)"' "$TEST_TMP/top.json")" = "$top_n $top_name $top_b"
check "/v1/top: every function ranked as the export counts it" \
	diff <(jq -r '.functions[] | select(.unknown | not) | "\(.branches) \(.name) \(.build_id)"' "$TEST_TMP/top.json") \
	"$TEST_TMP/expected"
check "/v1/top: the hottest is not in the binary with the most samples" \
	test "$top_b" != "$(curl -s "$URL/v1/binaries?pod=$POD" | jq -r '.binaries | max_by(.samples) | .build_id')"
check "/v1/top: its name demangled beside the raw one" \
	test "$(jq -r '.functions[0].demangled' "$TEST_TMP/top.json")" = "shop::Cache::lookup(unsigned long)"
check "/v1/top: an [unknown] row for the branches in no symbol (40)" \
	test "$(jq -r '[.functions[] | select(.unknown)] | map(.branches) | add' "$TEST_TMP/top.json")" = 40
check "/v1/top: the rows' branch executions and IP samples add up to the totals" \
	test "$(jq '(([.functions[].branches] | add) == .total_branches) and (([.functions[].samples] | add) == .total_samples)' "$TEST_TMP/top.json")" = true
check "/v1/top: the shares of branch executions and of IP samples each add up to 1" \
	test "$(jq '[.functions[].branch_share] | add | . > 0.999 and . < 1.001' "$TEST_TMP/top.json")$(jq '[.functions[].sample_share] | add | . > 0.999 and . < 1.001' "$TEST_TMP/top.json")" = truetrue
cid=$(jq -r '.binaries[0].label_values.container_id.values[0].value' <(curl -s "$URL/v1/binaries?pod=$POD"))
check "/v1/top: the container's first 12 digits (as / shows it) find the pod's ranking" \
	test "$(curl -s "$URL/v1/top?container_id=${cid:0:12}&n=1000" | jq -c .functions)" = "$(jq -c .functions "$TEST_TMP/top.json")"
check "/v1/top: without the filter, another pod's function is the hottest" \
	test "$(curl -s "$URL/v1/top?n=1" | jq -r '.functions[0].name')" = checksum
check "/v1/top: n=1 says more follow" test "$(curl -s "$URL/v1/top?$SEL&n=1" | jq -c '[(.functions | length), .more]')" = '[1,true]'
check "/v1/top: a selection with no counts ranks nothing (200, no rows)" \
	test "$(curl -s "$URL/v1/top?pod=nosuchpod" | jq -c '[.functions, .binaries]')" = '[[],0]'
check "/ with a selection with no counts: says so" \
	grep -q 'No function has counts in this selection' <(curl -s "$URL/?pod=nosuchpod")
check "/v1/top: n=0 is refused (400)" test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/top?n=0")" = 400

# --- the pages: ranked rows, shares, chips, and links that keep the filter
curl -s "$URL/top?$SEL" >"$TEST_TMP/top.html"
check "/top: the first row is the export's hottest function" \
	grep -q "class=\"top-fn\" data-build-id=\"$top_b\" data-addr=\"[^\"]*\" data-branches=\"$top_n\"" <(grep -m1 'class="top-fn' "$TEST_TMP/top.html")
total=$(grep -o 'data-total-branches="[0-9]*"' "$TEST_TMP/top.html" | grep -o '[0-9]*')
check "/top: the rows' branch executions add up to the selection's ($total)" \
	test "$(grep -o 'class="top-fn[^"]*" [^>]*data-branches="[0-9]*"' "$TEST_TMP/top.html" | grep -o 'data-branches="[0-9]*"' | grep -o '[0-9]*' | paste -sd+ | bc)" = "$total"
check "/top?window=3600: the time is a chip, in UTC" \
	grep -q 'data-label="time">time: <b>from 20[0-9-]* [0-9:]* UTC</b>' <(curl -s "$URL/top?$SEL&window=3600")
check "/top: the filter is a chip" grep -q 'class="chip" data-label="pod">pod: <b>shop/web-7d9f8</b>' "$TEST_TMP/top.html"
# every link to a view or an export keeps the filter: all but the header's
# and the chips' own (which drop it)
links_keep() { # FILE: prints the links that drop the filter
	sed 's#<header>.*</header>##' "$1" | grep -o '<a [^>]*href="[^"]*"' | grep -v 'class="unchip"' |
		grep -o 'href="[^"]*"' | grep -v "pod=shop/web-7d9f8"
}
check "/top: every link keeps the filter" test -z "$(links_keep "$TEST_TMP/top.html")"
bin_href=$(grep -o 'class="binlink" href="[^"]*"' "$TEST_TMP/top.html" | head -1 | sed 's/.*href="//;s/"$//;s/&amp;/\&/g')
curl -s "$URL$bin_href" >"$TEST_TMP/binary.html"
check "/binary (from /top): every link keeps the filter (functions, exports, diffs, home)" \
	test -z "$(links_keep "$TEST_TMP/binary.html")"
check "/binary: the filter is a chip" grep -q 'class="chip" data-label="pod"' "$TEST_TMP/binary.html"
# the diff of the binary with itself, under the filter (the binary's own
# diff links, kept above, compare windows the batch is not in)
curl -s "$URL/diff?build_id=$top_b&base=$top_b&$SEL" >"$TEST_TMP/diff.html"
check "/diff: reached" grep -q 'What changed' "$TEST_TMP/diff.html"
check "/diff: every link keeps the filter" test -z "$(links_keep "$TEST_TMP/diff.html")"
check "/diff: the filter is a chip" grep -q 'class="chip" data-label="pod"' "$TEST_TMP/diff.html"

# --- the journey: from / with the pod selected, to its hottest function
curl -s "$URL/?$SEL" >"$TEST_TMP/index.html"
check "/ with a selection: its top functions first" grep -q 'id="top-functions"' "$TEST_TMP/index.html"
href=$(grep -o 'class="fnlink" href="[^"]*"' "$TEST_TMP/index.html" | head -1 | sed 's/.*href="//;s/"$//;s/&amp;/\&/g')
curl -s "$URL$href" >"$TEST_TMP/fn.html"
check "/ -> one click -> the pod's hottest function across binaries ($top_name)" \
	grep -q "data-symbol=\"$top_name\" id=\"function-name\">shop::Cache::lookup(unsigned long)</h1>" "$TEST_TMP/fn.html"
check "/function (from /): every link keeps the filter" test -z "$(links_keep "$TEST_TMP/fn.html")"
check "/function: the filter is a chip" grep -q 'class="chip" data-label="pod"' "$TEST_TMP/fn.html"
check "/function: its counts are the pod's (the export's $top_n branch executions)" \
	grep -q "$(sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$top_n")" "$TEST_TMP/fn.html"
check "/ without a selection: no top functions (a fleet's sum answers no one's question)" \
	bash -c "! curl -s '$URL/' | grep -q 'id=\"top-functions\"'"

# --- rendered by a browser, as users see it
if command -v chromium >/dev/null; then
	shots=$(dirname "$EDGEPROF")/ui-screenshots
	mkdir -p "$shots"
	browser() {
		timeout -k 5 180 chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
			--user-data-dir="$TEST_TMP/chrome" --no-first-run --disable-extensions \
			--disable-background-networking "$@" 2>>"$TEST_TMP/chromium.log"
	}
	browser --dump-dom "$URL/?$SEL" >"$TEST_TMP/index.dom"
	check "chromium: / renders the top functions, the hottest first" \
		grep -q "data-build-id=\"$top_b\" data-addr=\"0x2000\" data-branches=\"$top_n\"" <(grep -m1 'class="top-fn' "$TEST_TMP/index.dom")
	check "chromium: the chip is rendered" grep -q 'class="chip" data-label="pod"' "$TEST_TMP/index.dom"
	browser --window-size=1400,900 --screenshot="$shots/top.png" "$URL/top?$SEL" >/dev/null
	check "chromium: a screenshot of /top" test -s "$shots/top.png"
else
	not_ok "chromium is installed (scripts/setup-deps.sh)"
fi

stop_pid "$COLLECTOR_PID"
check "the collector (ASan+UBSan) reports no leak or error" \
	bash -c "! grep -q 'Sanitizer\|runtime error' '$TEST_TMP/top.log'"
finish
