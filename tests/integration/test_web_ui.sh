#!/usr/bin/env bash
# The collector's web UI (issue 13) in a real browser: a collector filled by
# the real LBR fixtures (agent --replay, which also sends the binary's code)
# and by `edgeprof upload`; headless Chromium loads every view, and the
# rendered DOM is checked against the profile's JSON export and an
# objdump-based count of each function's blocks and edges
# (cfg_oracle.py). Screenshots go to BUILD/ui-screenshots. The collector
# serving the browser is the ASan+UBSan build: its log must stay clean
# (LeakSanitizer at exit included). Sign-in is checked with curl on a
# collector with a token.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

ID=572ac72487ae1966
BIN=$FIXTURES/propeller_sample_1.bin
shots=$(dirname "$EDGEPROF")/ui-screenshots
mkdir -p "$shots"
if ! command -v chromium >/dev/null; then
	not_ok "chromium is installed (scripts/setup-deps.sh)"
	finish
fi

# browser URL [chromium options...]: the DOM after the page loaded
browser() {
	local url=$1
	shift
	timeout -k 5 180 chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
		--user-data-dir="$TEST_TMP/chrome" --no-first-run --disable-extensions \
		--disable-background-networking "$@" "$url" 2>>"$TEST_TMP/chromium.log"
}
dom() { browser "$1" --dump-dom >"$2"; }
commas() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; } # 1234567 -> 1,234,567
shot() { browser "$1" --window-size=1400,"$3" --screenshot="$2" >/dev/null; }

COLLECTOR_BIN=$EDGEPROF_ASAN
start_collector ui --store "sqlite:$TEST_TMP/ui.db" --listen 127.0.0.1:0 || finish
ui_pid=$COLLECTOR_PID
URL=http://127.0.0.1:$COLLECTOR_PORT

# --- filled by the fixtures: the agent sends the binary it read, once
"$EDGEPROF" agent --replay "$FIXTURES/propeller_sample_1.perfdata1" --binary "$BIN" \
	--collector "$URL" --spool "$TEST_TMP/spool1" >"$TEST_TMP/agent1.log" 2>&1
check "the agent replays the fixture into the collector" grep -q '1 acknowledged' "$TEST_TMP/agent1.log"
check "the agent sent the binary's code" grep -q "binaries for the collector's UI: 1 sent" "$TEST_TMP/agent1.log"
check "the collector keeps it (GET /v1/images/ID)" \
	test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/images/$ID")" = 200
"$EDGEPROF" agent --replay "$FIXTURES/propeller_sample_1.perfdata1" --binary "$BIN" \
	--collector "$URL" --spool "$TEST_TMP/spool2" >"$TEST_TMP/agent2.log" 2>&1
check "a second agent asks first and sends nothing" \
	grep -q "UI: 0 sent, 1 it had" "$TEST_TMP/agent2.log"
"$EDGEPROF" agent --replay "$FIXTURES/test.lbr" --binary "$FIXTURES/test.binary" \
	--collector "$URL" --spool "$TEST_TMP/spool3" >"$TEST_TMP/agent3.log" 2>&1

# --- edgeprof upload: checked here and at the collector
"$EDGEPROF" upload "$BIN" --collector "$URL" >"$TEST_TMP/up1.log" 2>&1
check "upload of a build-id an agent sent: replaces the agent's provisional code, exit 0" \
	grep -q "in place of an agent's provisional image" "$TEST_TMP/up1.log"
"$EDGEPROF" upload "$BIN" --collector "$URL" >"$TEST_TMP/up1b.log" 2>&1
check "upload of a build-id the collector has trusted code for: said, exit 0" \
	grep -q 'has it already' "$TEST_TMP/up1b.log"
"$EDGEPROF" upload /etc/passwd --collector "$URL" >"$TEST_TMP/up2.log" 2>&1
rc=$?
check "upload of a file that is not ELF: exit 1 with the reason" \
	bash -c "[ $rc = 1 ] && grep -q 'not an ELF file' '$TEST_TMP/up2.log'"
"$EDGEPROF" upload "$FIXTURES/test.binary" --collector "$URL" >"$TEST_TMP/up3.log" 2>&1
check "upload of an ELF without a build-id note: refused, saying so" grep -q 'no GNU build-id note' "$TEST_TMP/up3.log"
code=$(curl -s -o "$TEST_TMP/mismatch" -w '%{http_code}' --data-binary "@$BIN" \
	"$URL/v1/images?build_id=00112233&path=x")
check "the collector refuses code sent under another build-id (400, both named)" \
	bash -c "[ $code = 400 ] && grep -q '00112233' '$TEST_TMP/mismatch' && grep -q $ID '$TEST_TMP/mismatch'"
code=$(curl -s -o /dev/null -w '%{http_code}' --data-binary 'garbage' "$URL/v1/images?path=x")
check "the collector refuses a body that is no ELF (400)" test "$code" = 400

curl -s "$URL/v1/profile?build_id=$ID&format=json" >"$TEST_TMP/p.json"
samples=$(curl -s "$URL/v1/binaries" | jq -r ".binaries[] | select(.build_id == \"$ID\") | .samples")

# --- the binaries page
dom "$URL/" "$TEST_TMP/index.html"
check "/: the binary is listed with its build-id and samples" \
	grep -q "data-build-id=\"$ID\" data-samples=\"$samples\"" "$TEST_TMP/index.html"
check "/: its name links to its page" \
	grep -q "href=\"/binary?build_id=$ID\"><b>propeller_sample_1.bin.gen</b>" "$TEST_TMP/index.html"
check "/: its code is kept" grep -q '>kept<' "$TEST_TMP/index.html"
check "/: the binary without a build-id is listed, without a page" \
	grep -q 'no build-id: exports only' "$TEST_TMP/index.html"
dom "$URL/?window=3600&process=nosuchprocess" "$TEST_TMP/filtered.html"
check "/: a label filter that matches nothing lists nothing" \
	grep -q 'No binary has counts under this filter' "$TEST_TMP/filtered.html"
dom "$URL/?window=3600" "$TEST_TMP/window.html"
check "/: the last hour holds the replayed counts" grep -q "data-build-id=\"$ID\"" "$TEST_TMP/window.html"

# --- the binary's page: each function's branch executions as the export counts them
dom "$URL/binary?build_id=$ID" "$TEST_TMP/binary.html"
for fn in main compute_flag; do
	read -r start size < <(jq -r ".profiles[0].functions[] | select(.name == \"$fn\") | \"\(.start) \(.size)\"" "$TEST_TMP/p.json")
	read -r blocks hot branches < <(python3 "$(dirname "$0")/cfg_oracle.py" "$BIN" "$TEST_TMP/p.json" "$ID" "$start" "$size")
	check "/binary: $fn's branch executions equal the export's ($branches)" \
		grep -q "data-name=\"$fn\" data-branches=\"$branches\"" "$TEST_TMP/binary.html"
	# --- the function's page: blocks and edges as objdump and the export say
	dom "$URL/function?build_id=$ID&addr=$start" "$TEST_TMP/fn_$fn.html"
	check "/function $fn: its name is the heading" grep -q "id=\"function-name\">$fn</h1>" "$TEST_TMP/fn_$fn.html"
	check "/function $fn: $blocks blocks, as objdump finds them" \
		test "$(grep -c '<g id="bb_' "$TEST_TMP/fn_$fn.html")" = "$blocks"
	check "/function $fn: $hot edges with counts, as the export has them" \
		test "$(grep -c 'class="edge cfg-edge hot' "$TEST_TMP/fn_$fn.html")" = "$hot"
	check "/function $fn: the page says the same numbers" \
		grep -q "data-blocks=\"$blocks\" data-edges=\"[0-9]*\" data-hot-edges=\"$hot\"" "$TEST_TMP/fn_$fn.html"
done
call=$(jq -r '[.profiles[0].branches[] | select(.from == "0x1967" and .taken == true) | .count] | add' "$TEST_TMP/p.json")
check "/binary: the hottest branch's counts are the export's (main+0x47, a call, $call taken)" \
	grep -q "data-from=\"0x1967\" data-taken=\"$call\" data-not-taken=\"0\"" "$TEST_TMP/binary.html"
check "/binary: export links for fdata, preagg, afdo and json" \
	test "$(grep -o "href=\"/v1/profile?build_id=$ID&amp;format=[a-z]*\"" "$TEST_TMP/binary.html" | sort -u | wc -l)" = 4
# the disassembly: a branch's taken / not-taken counts, an instruction's executions
read -r je_t je_n < <(jq -r '[.profiles[0].branches[] | select(.from == "0x19de")] |
	"\(map(select(.taken == true) | .count) | add) \(map(select(.taken != true) | .count) | add)"' "$TEST_TMP/p.json")
check "/function main: the je at 0x19de shows its taken ($je_t) and not-taken ($je_n) counts" \
	grep -q "taken <b>$(commas "$je_t")</b> · not taken <b>$(commas "$je_n")</b>" "$TEST_TMP/fn_main.html"
check "/function main: the cold block at main+0x0 is drawn cold" \
	grep -q 'id="bb_1920" class="node block cold"' "$TEST_TMP/fn_main.html"

# --- screenshots, for people to look at
shot "$URL/" "$shots/binaries.png" 700
shot "$URL/binary?build_id=$ID" "$shots/binary.png" 1000
shot "$URL/function?build_id=$ID&addr=0x1920" "$shots/function.png" 1800
for f in binaries binary function; do
	check "screenshot $f.png written" bash -c "file '$shots/$f.png' | grep -q 'PNG image data, 1400'"
done

# --- a diff of two builds of one program ("prog"): each function's share of
# branch executions on each side, as the two JSON exports give them
mkdir -p "$TEST_TMP/run"
W=$(dirname "$0")/../workloads
cc -O1 -Wl,--build-id -o "$TEST_TMP/prog1" "$W/hot_cold.c"
cc -O1 -Wl,--build-id -o "$TEST_TMP/prog2" "$W/random_branches.c"
for b in prog1 prog2; do
	cp "$TEST_TMP/$b" "$TEST_TMP/run/prog"
	"$EDGEPROF" record --emulate --collector "$URL" --spool "$TEST_TMP/spool-$b" \
		-o "$TEST_TMP/$b.prof" -- "$TEST_TMP/run/prog" 300000 >"$TEST_TMP/$b.log" 2>&1
	rm "$TEST_TMP/run/prog"
done
id1=$(readelf -n "$TEST_TMP/prog1" | awk '/Build ID/ {print $3}')
id2=$(readelf -n "$TEST_TMP/prog2" | awk '/Build ID/ {print $3}')
check "/binary: a link compares with the other build of the same program" \
	grep -q "href=\"/diff?build_id=$id2&amp;base=$id1\">vs build ${id1:0:12}<" <(curl -s "$URL/binary?build_id=$id2")
dom "$URL/diff?build_id=$id2&base=$id1" "$TEST_TMP/diff.html"
curl -s "$URL/v1/profile?build_id=$id2&format=json" >"$TEST_TMP/p2.json"
curl -s "$URL/v1/profile?build_id=$id1&format=json" >"$TEST_TMP/p1.json"
check "/diff: every function's share now and before is the exports'" python3 - "$TEST_TMP/p2.json" "$TEST_TMP/p1.json" "$TEST_TMP/diff.html" <<'PY'
import json, re, sys
def shares(path):
    p = json.load(open(path))["profiles"][0]
    # a local is NAME/N on the page, as in profiles and fdata
    fns = [(int(f["start"], 16), int(f["size"]),
            f["name"] + ("/%d" % f["local_index"] if f.get("local_index") else ""))
           for f in p["functions"]]
    per, total = {}, 0
    for e in p["branches"]:
        if e["kind"] == "fallthrough" or e.get("from_external"):
            continue
        total += e["count"]
        a = int(e["from"], 16)
        for s, n, name in fns:
            if s <= a < s + max(n, 1):
                per[name] = per.get(name, 0) + e["count"]
                break
    return {k: v / total for k, v in per.items()}
now, before = shares(sys.argv[1]), shares(sys.argv[2])
rows = {m[0]: (float(m[1]), float(m[2])) for m in re.findall(
    r'class="fn-diff" data-name="([^"]*)" data-now="([0-9.]*)" data-before="([0-9.]*)"',
    open(sys.argv[3]).read())}
want = {k: (now.get(k, 0.0), before.get(k, 0.0)) for k in set(now) | set(before)}
ok = set(rows) == set(want) and all(abs(rows[k][0] - want[k][0]) < 1e-5 and
                                     abs(rows[k][1] - want[k][1]) < 1e-5 for k in want)
if not ok:
    print("# page", rows, "\n# exports", want)
sys.exit(0 if ok else 1)
PY
# cold_loop is static: named as BOLT and the fdata export name it
check "/diff: a function only in the old build is marked gone" grep -qE 'cold_loop/1(</a>)? *<span class="colder">gone' "$TEST_TMP/diff.html"
shot "$URL/diff?build_id=$id2&base=$id1" "$shots/diff.png" 700

# --- a function too big to lay out whole (an interpreter's dispatch loop):
# its hottest executed blocks are drawn, as many as fit, the rest listed
cc -O1 -Wl,--build-id -o "$TEST_TMP/big_switch" "$W/big_switch.c"
"$EDGEPROF" record --emulate --collector "$URL" --spool "$TEST_TMP/spool-big" \
	-o "$TEST_TMP/big.prof" -- "$TEST_TMP/big_switch" 400000 >"$TEST_TMP/big.log" 2>&1
idb=$(readelf -n "$TEST_TMP/big_switch" | awk '/Build ID/ {print $3}')
"$EDGEPROF" upload "$TEST_TMP/big_switch" --collector "$URL" >"$TEST_TMP/up-big.log" 2>&1
addr=0x$(nm "$TEST_TMP/big_switch" | awk '$3 == "dispatch" {print $1}' | sed 's/^0*//')
dom "$URL/function?build_id=$idb&addr=$addr" "$TEST_TMP/fn_big.html"
check "/function dispatch (~1,000 blocks): the hottest executed blocks are drawn, the rest listed" \
	python3 - "$TEST_TMP/fn_big.html" <<'PY'
import re, sys
page = open(sys.argv[1]).read()
m = re.search(r'data-blocks="(\d+)" data-edges="\d+" data-hot-edges="\d+" data-hot-blocks="(\d+)"', page)
part = re.search(r'id="cfg-partial" data-shown-blocks="(\d+)" data-shown-edges="(\d+)"', page)
if not m or not part:
    print("# no block counts or no partial-graph note on the page"); sys.exit(1)
blocks, executed, shown = int(m[1]), int(m[2]), int(part[1])
heads = {int(a, 16): int(c) for a, c in re.findall(r'class="blockhead[^"]*" id="b([0-9a-f]+)" data-count="(\d+)"', page)}
drawn = [int(a, 16) for a in re.findall(r'<g id="bb_([0-9a-f]+)" class="node', page)]
edges = len(re.findall(r'class="edge cfg-edge', page))
ok = blocks > 400 and len(heads) == blocks and shown == min(executed, 400) == len(drawn)
ok = ok and edges == int(part[2]) and all(heads[a] > 0 for a in drawn)
rest = [c for a, c in heads.items() if a not in set(drawn)]
ok = ok and min(heads[a] for a in drawn) >= max(rest)
print(f"# {blocks} blocks, {executed} executed, {len(drawn)} drawn, {edges} edges drawn")
sys.exit(0 if ok else 1)
PY

# --- errors are pages that say why
code=$(curl -s -o "$TEST_TMP/e1" -w '%{http_code}' "$URL/binary?build_id=ffff")
check "/binary of an unknown build-id: 404 saying so" bash -c "[ $code = 404 ] && grep -q 'has no counts' '$TEST_TMP/e1'"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/function?build_id=$ID&addr=nope")
check "/function with a bad address: 400" test "$code" = 400

# --- the fleet: a live agent (whole machine, streaming every second) and a
# session started from the page's form, on a program of ours
cc -O1 -g -o "$TEST_TMP/hot_cold" "$(dirname "$0")/../workloads/hot_cold.c"
"$TEST_TMP/hot_cold" 100000000000 >/dev/null &
work=$!
track_pid "$work"
"$EDGEPROF" agent --interval 1 --retry-max-ms 1000 --collector "$URL" --node ui-node \
	--spool "$TEST_TMP/spool-live" 2>"$TEST_TMP/live.err" &
agent=$!
track_pid "$agent"
fleet_has() { # PATTERN: until /fleet shows it (60 s)
	for _ in $(seq 300); do
		curl -s "$URL/fleet" | grep -q "$1" && return 0
		sleep 0.2
	done
	return 1
}
check "/fleet: the live agent's node reports" fleet_has 'data-node="ui-node".*<span class="ok">yes</span>'
if grep -q 'no branch-stack PMU' "$TEST_TMP/live.err"; then
	dom "$URL/fleet" "$TEST_TMP/fleet.html"
	check "/fleet: a node without a branch-stack PMU is said plainly" \
		grep -q 'no branch-stack PMU: IP samples only' "$TEST_TMP/fleet.html"
fi
hdr=$(curl -s -o /dev/null -D - --data "kind=pid&target=$work&node=ui-node&duration_s=3&mode=edges&cycles=1" "$URL/fleet/start")
sid=$(sed -n 's/^[Ll]ocation: \/fleet?started=\([0-9a-f]*\).*/\1/p' <<<"$hdr")
check "/fleet/start: the form starts a session (303 to /fleet?started=ID)" test -n "$sid"
check "/fleet: the session runs and is done" fleet_has "data-id=\"$sid\" data-state=\"done\""
check "  asking for cycles too, as the form's box said" \
	test "$(curl -s "$URL/v1/sessions/$sid" | jq .cycles)" = true
check "the session's counts are listed on /?session=ID" \
	grep -q 'hot_cold' <(curl -s "$URL/?session=$sid")
code=$(curl -s -o "$TEST_TMP/e3" -w '%{http_code}' --data "kind=pid&target=1&duration_s=100000" "$URL/fleet/start")
check "/fleet/start: a duration over the maximum is refused, saying so" \
	bash -c "[ $code = 400 ] && grep -q 'duration' '$TEST_TMP/e3'"
shot "$URL/fleet" "$shots/fleet.png" 800
stop_pid "$agent"
stop_pid "$work"

stop_pid "$ui_pid"
check "the ASan collector behind the browser stayed clean (no sanitizer report, no leak)" \
	bash -c "! grep -q 'Sanitizer' '$TEST_TMP/ui.log'"

# --- sign-in with the token: a form, a cookie, never a URL or a log line
token="ui-$RANDOM$RANDOM$RANDOM"
echo "$token" >"$TEST_TMP/token"
chmod 600 "$TEST_TMP/token"
COLLECTOR_BIN=$EDGEPROF
start_collector sec --store "sqlite:$TEST_TMP/ui.db" --listen 127.0.0.1:0 --token-file "$TEST_TMP/token" || finish
S=http://127.0.0.1:$COLLECTOR_PORT
hdr=$(curl -s -o /dev/null -D - "$S/")
check "without the token, / sends to the sign-in page" grep -qi '^location: /signin' <<<"$hdr"
check "without the token, /v1/binaries is 401" test "$(curl -s -o /dev/null -w '%{http_code}' "$S/v1/binaries")" = 401
check "the style sheet needs no token" test "$(curl -s -o /dev/null -w '%{http_code}' "$S/ui/style.css")" = 200
code=$(curl -s -o /dev/null -w '%{http_code}' --data-urlencode "token=wrong" "$S/signin")
check "a wrong token is refused (401)" test "$code" = 401
hdr=$(curl -s -o /dev/null -D - -c "$TEST_TMP/jar" --data-urlencode "token=$token" "$S/signin")
check "the right token: a cookie, HttpOnly and SameSite=Strict, and back to /" \
	bash -c "grep -qi '^set-cookie: edgeprof_token=.*HttpOnly; SameSite=Strict' <<<'$hdr' && grep -qi '^location: /\s*$' <<<'$hdr'"
check "with the cookie, / lists the binaries" \
	grep -q "data-build-id=\"$ID\"" <(curl -s -b "$TEST_TMP/jar" "$S/")
check "with the cookie, the export links work" \
	test "$(curl -s -o /dev/null -w '%{http_code}' -b "$TEST_TMP/jar" "$S/v1/profile?build_id=$ID&format=fdata")" = 200
curl -s -o /dev/null -b "$TEST_TMP/jar" -c "$TEST_TMP/jar" "$S/signout"
check "after sign-out, / sends to the sign-in page again" \
	grep -qi '^location: /signin' <(curl -s -o /dev/null -D - -b "$TEST_TMP/jar" "$S/")
stop_pid "$COLLECTOR_PID"
check "the token is in no log line" bash -c "! grep -rq '$token' '$TEST_TMP'/*.log"
finish
