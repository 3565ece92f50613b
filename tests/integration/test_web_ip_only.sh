#!/usr/bin/env bash
# A live IP-only profile (issue 36; needs root, as CI runs): on this
# PMU-less VM the agent sends cpu-clock IP samples and no branch stacks.
# The collector's (ASan+UBSan) pages then show where the samples are: the
# function page says it has IP samples only, colours the blocks by them and
# gives each instruction its samples, in sums equal to the binary page's
# and the JSON export's; C++ and Rust names are shown as c++filt demangles
# them (the raw ones kept for exports); samples in no symbol (a symbol
# objcopy stripped) are an [unknown] row whose link shows that code; every
# link on the binary page answers. Exports that need branches refuse, with
# exit status 2 and the reason, and so does /v1/profile.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

require_root_live
bin=$TEST_TMP/ip_names
g++ -O1 -g -o "$bin.full" "$(dirname "$0")/../workloads/ip_names.cc"
objcopy --strip-symbol=strip_me "$bin.full" "$bin"
check "objcopy stripped strip_me's symbol" bash -c "! nm '$bin' | grep -q strip_me"
"$bin" 1000000000 >/dev/null &
busy=$!
track_pid "$busy"

COLLECTOR_BIN=$EDGEPROF_ASAN ASAN_OPTIONS=detect_leaks=1 \
	start_collector ipo --store "sqlite:$TEST_TMP/ipo.db" --listen 127.0.0.1:0 --commit-ms 100 ||
	exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"
"$EDGEPROF" agent --pid "$busy" --duration 3 --interval 1 --drain-ms 50 --upload-max-mib 0 \
	--collector "$url" --spool "$TEST_TMP/spool" -o "$TEST_TMP/ip.prof" 2>"$TEST_TMP/agent.err"
check "agent --collector exits 0" test $? -eq 0
id=$(readelf -n "$bin" | awk '/Build ID/ {print $3}')
# before its code is at the collector: the [unknown] row's link still answers
ulink=$(curl -sf "$url/binary?build_id=$id" | grep -o '<tr class="function unknown"[^>]*><td[^>]*><a href="[^"]*"' |
	sed 's/.*href="//; s/"$//; s/&amp;/\&/g; s/#.*//')
code=$(curl -s -o "$TEST_TMP/nocode.html" -w '%{http_code}' "$url${ulink:-/none}")
check "/function in no symbol, its code not sent: 200, its samples, how to send it ($code)" \
	bash -c "[ $code = 200 ] && grep -q 'data-kind=\"ip-samples\" data-samples=\"[1-9]' '$TEST_TMP/nocode.html' &&
		grep -q 'code is not at the collector' '$TEST_TMP/nocode.html'"
"$EDGEPROF" upload "$bin" --collector "$url" >"$TEST_TMP/upload.log" 2>&1
check "the binary's code is uploaded" test $? -eq 0
curl -sf "$url/v1/profile?format=json&build_id=$id" >"$TEST_TMP/p.json"
branches=$(jq '[.profiles[] | (.branches // []) | length] | add' "$TEST_TMP/p.json")
samples=$(jq '[.profiles[] | (.ips // [])[] | .count] | add // 0' "$TEST_TMP/p.json")
if [ "${branches:-0}" != 0 ]; then
	echo "# skipped: this machine has branch stacks ($branches branches): the test is of IP-only"
	finish
fi
check "the collector has IP samples of the workload ($samples) and no branches" \
	test "${samples:-0}" -gt 100

# --- the binary's page: names, [unknown], shares, links
curl -sf "$url/binary?build_id=$id" >"$TEST_TMP/binary.html"
rows() { # name samples, per function row
	sed -n 's/.*<tr class="function[^"]*" data-name="\([^"]*\)" data-branches="[0-9]*" data-samples="\([0-9]*\)".*/\1 \2/p' \
		"$TEST_TMP/binary.html"
}
rows | sed 's/^/# row: /'
check "/binary: the rows' IP samples, [unknown] with them, add up to the export's ($samples)" \
	test "$(rows | awk '{s += $2} END {print s}')" = "$samples"
unknown=$(rows | awk '$1 == "[unknown]" {print $2}')
check "/binary: an [unknown] row holds the stripped code's samples (${unknown:-none})" \
	test "${unknown:-0}" -gt 0
for raw in _ZN2ep8hot_workEmi _RNvCs15kBYyAo9fc_7mycrate7example \
	_ZN7mycrate6legacy17h0123456789abcdefE; do
	# c++filt prints Rust's crate and symbol hashes; the page leaves them out
	want=$(c++filt "$raw" | sed -E 's/\[[0-9a-f]+\]//g; s/::h[0-9a-f]{16}$//')
	got=$(grep -o "title=\"$raw\">[^<]*<" "$TEST_TMP/binary.html" | head -1 |
		sed 's/.*">//; s/<$//; s/&lt;/</g; s/&gt;/>/g; s/&amp;/\&/g')
	check "/binary: $raw shown as c++filt names it ($want), the raw name its data-name" \
		bash -c "[ '$got' = '$want' ] && grep -q 'data-name=\"$raw\"' '$TEST_TMP/binary.html'"
done
check "/binary: offers the JSON export only, saying why" \
	bash -c "grep -q 'id=\"exports-ip-only\"' '$TEST_TMP/binary.html' &&
		! grep -q 'format=fdata' '$TEST_TMP/binary.html'"
bad=0
for link in $(grep -o 'href="/function?[^"]*"' "$TEST_TMP/binary.html" | sed 's/^href="//; s/"$//; s/&amp;/\&/g; s/#.*//' | sort -u); do
	code=$(curl -s -o /dev/null -w '%{http_code}' "$url$link")
	[ "$code" = 200 ] || { echo "# $link: $code"; bad=$((bad + 1)); }
done
check "/binary: every function link answers 200 ($bad did not)" test "$bad" = 0

# --- the hot function's page: IP samples as heat, the same sums
hot=$(jq -r '.profiles[].functions[] | select(.name == "_ZN2ep8hot_workEmi") | .start' "$TEST_TMP/p.json" | head -1)
hot_samples=$(rows | awk '$1 == "_ZN2ep8hot_workEmi" {print $2}')
curl -sf "$url/function?build_id=$id&addr=$hot" >"$TEST_TMP/hot.html"
check "/function: says it has IP samples only, no branch-stack PMU" \
	grep -q 'data-kind="ip-samples" data-samples="'"$hot_samples"'">IP samples only: .*no branch-stack PMU' \
	"$TEST_TMP/hot.html"
check "/function: its heading is the demangled name" \
	grep -q 'data-symbol="_ZN2ep8hot_workEmi" id="function-name">ep::hot_work(unsigned long, int)</h1>' \
	"$TEST_TMP/hot.html"
check "/function: the graph's blocks are labelled with the demangled name" \
	grep -q '>ep::hot_work(unsigned long, int)+0x0</text>' "$TEST_TMP/hot.html"
insn_sum=$(grep -o '<tr class="insn[^"]*" id="i[0-9a-f]*" data-count="[0-9]*" data-samples="[0-9]*"' \
	"$TEST_TMP/hot.html" | sed 's/.*data-samples="//; s/"//' | awk '{s += $1} END {print s + 0}')
check "/function: its instructions' IP samples add up to /binary's ($insn_sum = ${hot_samples:-?})" \
	test "$insn_sum" = "${hot_samples:--1}"
sampled=$(grep -c 'class="node block hot sampled"' "$TEST_TMP/hot.html")
check "/function: blocks with samples are coloured ($sampled), not all grey" test "$sampled" -gt 0
check "/function: the page counts them as blocks with IP samples" \
	grep -q "data-sampled-blocks=\"$sampled\"" "$TEST_TMP/hot.html"

# --- in a browser: the page parses whole (every instruction's samples in
# the DOM), and a screenshot for people
if command -v chromium >/dev/null; then
	shots=$(dirname "$EDGEPROF")/ui-screenshots
	mkdir -p "$shots"
	browser() {
		timeout -k 5 180 chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
			--user-data-dir="$TEST_TMP/chrome" --no-first-run --disable-extensions \
			--disable-background-networking "$@" 2>>"$TEST_TMP/chromium.log"
	}
	browser --dump-dom "$url/function?build_id=$id&addr=$hot" >"$TEST_TMP/hot.dom"
	dom_sum=$(grep -o '<tr class="insn[^"]*" id="i[0-9a-f]*" data-count="[0-9]*" data-samples="[0-9]*"' \
		"$TEST_TMP/hot.dom" | sed 's/.*data-samples="//; s/"//' | awk '{s += $1} END {print s + 0}')
	check "Chromium: the rendered page has every instruction's samples ($dom_sum) and the line" \
		bash -c "[ '$dom_sum' = '$insn_sum' ] && grep -q 'id=\"data-kind\"' '$TEST_TMP/hot.dom'"
	browser --window-size=1400,900 --screenshot="$shots/function-ip-only.png" \
		"$url/function?build_id=$id&addr=$hot" >/dev/null
	browser --window-size=1400,700 --screenshot="$shots/binary-ip-only.png" \
		"$url/binary?build_id=$id" >/dev/null
	check "screenshots written" test -s "$shots/function-ip-only.png"
fi

# --- the code in no symbol
ulink=$(grep -o '<tr class="function unknown"[^>]*><td[^>]*><a href="[^"]*"' "$TEST_TMP/binary.html" |
	sed 's/.*href="//; s/"$//; s/&amp;/\&/g; s/#.*//')
curl -s -o "$TEST_TMP/unknown.html" -w '%{http_code}\n' "$url$ulink" >"$TEST_TMP/unknown.code"
strip_at=$(nm "$bin.full" | awk '$3 == "strip_me" {print $1}' | sed 's/^0*//')
check "/function at an address in no symbol: 200, named func_0x$strip_at (where objcopy's stripped symbol began)" \
	bash -c "[ \"\$(cat '$TEST_TMP/unknown.code')\" = 200 ] && grep -q 'id=\"function-name\">func_0x$strip_at</h1>' '$TEST_TMP/unknown.html'"
check "/function in no symbol: its IP samples are the [unknown] row's" \
	grep -q "data-kind=\"ip-samples\" data-samples=\"$unknown\"" "$TEST_TMP/unknown.html"

# --- exports that need branches refuse
for fmt in fdata preagg afdo profgen; do
	"$EDGEPROF" export "$TEST_TMP/ip.prof" --build-id "$id" --format "$fmt" -o "$TEST_TMP/out.$fmt" \
		2>"$TEST_TMP/export.err"
	rc=$?
	check "export --format $fmt of an IP-only profile: exit 2, one line saying why, no file" \
		bash -c "[ $rc = 2 ] && [ \$(wc -l <'$TEST_TMP/export.err') = 1 ] &&
			grep -q '$TEST_TMP/ip.prof: IP samples only (no branch stacks): $fmt needs taken branches' '$TEST_TMP/export.err' &&
			[ ! -e '$TEST_TMP/out.$fmt' ]"
done
"$EDGEPROF" export "$TEST_TMP/ip.prof" --format json -o "$TEST_TMP/out.json"
check "export --format json of it still works" test $? -eq 0
code=$(curl -s -o "$TEST_TMP/v1.err" -w '%{http_code}' "$url/v1/profile?build_id=$id&format=fdata")
check "/v1/profile?format=fdata: 422 with the reason ($code)" \
	bash -c "[ $code = 422 ] && grep -q 'IP samples only (no branch stacks): fdata needs' '$TEST_TMP/v1.err'"

stop_pid "$COLLECTOR_PID"
check "the collector (ASan+UBSan) reports no leak or error" \
	bash -c "! grep -q 'Sanitizer\|runtime error' '$TEST_TMP/ipo.log'"
finish
