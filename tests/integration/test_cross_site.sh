#!/usr/bin/env bash
# Cross-site request forgery (issue 32, item 9): with no token, any web page
# a user of the collector opened could make the browser POST /v1/sessions or
# the UI's /fleet/start form (a form needs no script and no permission), and
# the collector ran the session. Now a request that changes state is refused
# (403, counted in edgeprof_http_cross_site_refused_total) when the browser
# says it comes from another site: Sec-Fetch-Site other than same-origin or
# none, or, from browsers without it, an Origin that is not the Host. The
# UI's own forms (same-origin) and clients that are not browsers (agents,
# the CLI, curl: neither header) pass. Checked with curl sending what
# browsers send, and with headless Chromium on a page of another origin
# that submits both on load.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

start_collector c --store "sqlite:$TEST_TMP/c.db" --listen 127.0.0.1:0 || finish
url=http://127.0.0.1:$COLLECTOR_PORT
cpid=$COLLECTOR_PID
python3 "$(dirname "$0")/session_agent.py" "$url" --node node-a >/dev/null
check "an agent that runs sessions reports (node-a)" \
	bash -c "curl -s '$url/v1/nodes' | jq -e '.nodes[] | select(.name == \"node-a\" and .sessions)' >/dev/null"
post() { # PATH DATA HEADERS...: the status of a POST
	local path=$1 data=$2
	shift 2
	curl -s -o "$TEST_TMP/answer" -w '%{http_code}' -X POST --data "$data" "$@" "$url$path"
}
api=/v1/sessions?pid=4242\&duration_s=5\&node=node-a
form="kind=pid&target=4243&duration_s=5&node=node-a&mode=edges"
open_sessions() { curl -s "$url/fleet" | grep -c '<tr class="session"'; }
refused() { metric "$url" edgeprof_http_cross_site_refused_total; }

code=$(post "$api" "" -H 'Origin: https://evil.example' -H 'Sec-Fetch-Site: cross-site')
check "POST /v1/sessions from another site's page: 403 ($code)" test "$code" = 403
check "  saying why" grep -q 'cross-site request refused (Origin https://evil.example)' "$TEST_TMP/answer"
code=$(post "$api" "" -H 'Origin: https://evil.example')
check "  from a browser that sends Origin only: 403 ($code)" test "$code" = 403
code=$(post "$api" "" -H 'Origin: http://127.0.0.1:1' -H 'Sec-Fetch-Site: same-site')
check "  from another port of the same host (same-site, not same-origin): 403 ($code)" test "$code" = 403
code=$(post /fleet/start "$form" -H 'Origin: https://evil.example' -H 'Sec-Fetch-Site: cross-site')
check "POST /fleet/start (the UI's form) from another site: 403 ($code)" test "$code" = 403
code=$(post /fleet/start "$form" -H 'Origin: null')
check "  from a sandboxed page (Origin: null): 403 ($code)" test "$code" = 403
check "no session was created (open: $(open_sessions)); refusals counted: $(refused)" \
	test "$(open_sessions)" = 0 -a "$(refused)" = 5

code=$(post /fleet/start "$form" -H "Origin: $url" -H 'Sec-Fetch-Site: same-origin')
check "the UI's own form (same-origin, as a browser sends it) starts a session: 303 ($code)" \
	test "$code" = 303
code=$(post /fleet/start "$form" -H "Origin: $url")
check "  so does it from a browser without Sec-Fetch-Site (Origin = Host): 303 ($code)" \
	test "$code" = 303
code=$(post "$api" "")
check "POST /v1/sessions from a client that is not a browser (no Origin): 201 ($code)" \
	test "$code" = 201
check "  three sessions open ($(open_sessions))" test "$(open_sessions)" = 3

# with a token: the UI's sign-in cookie (SameSite=Strict) is one layer, the
# same check the other: a cookie a browser did send cross-site opens nothing
umask 077
echo "s3cret-$RANDOM$RANDOM" >"$TEST_TMP/token"
start_collector t --store "sqlite:$TEST_TMP/t.db" --listen 127.0.0.1:0 \
	--token-file "$TEST_TMP/token" || finish
turl=http://127.0.0.1:$COLLECTOR_PORT
curl -s -o /dev/null -c "$TEST_TMP/jar" --data-urlencode "token=$(cat "$TEST_TMP/token")" "$turl/signin"
code=$(curl -s -o /dev/null -w '%{http_code}' -b "$TEST_TMP/jar" --data "$form" \
	-H 'Origin: https://evil.example' -H 'Sec-Fetch-Site: cross-site' "$turl/fleet/start")
check "signed in with the cookie, /fleet/start from another site: 403 ($code)" test "$code" = 403
code=$(curl -s -o /dev/null -w '%{http_code}' -b "$TEST_TMP/jar" --data "$form" \
	-H "Origin: $turl" -H 'Sec-Fetch-Site: same-origin' "$turl/fleet/start")
check "  from the UI's own page it passes (409 here: no agent reports to this one) ($code)" \
	test "$code" = 409
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Origin: https://evil.example' \
	-H "Authorization: Bearer $(cat "$TEST_TMP/token")" "$turl$api")
check "  a bearer token sent from another site's page is refused too: 403 ($code)" test "$code" = 403
stop_pid "$COLLECTOR_PID"

# a real browser: a page of another origin whose forms post on load, into
# two frames (both requests go out)
if ! command -v chromium >/dev/null; then
	not_ok "chromium is installed (scripts/setup-deps.sh)"
	finish
fi
mkdir "$TEST_TMP/evil"
cat >"$TEST_TMP/evil/index.html" <<EOF
<!doctype html><html><body onload="document.forms[0].submit(); document.forms[1].submit()">
<iframe name="a"></iframe><iframe name="b"></iframe>
<form method="post" target="a" action="$url$api"><input name="x" value="1"></form>
<form method="post" target="b" action="$url/fleet/start">
<input name="kind" value="pid"><input name="target" value="4244"><input name="duration_s" value="5">
<input name="node" value="node-a"><input name="mode" value="edges"></form>
</body></html>
EOF
python3 -c '
import http.server, functools, sys
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
s = http.server.HTTPServer(("127.0.0.2", 0), h)
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()' "$TEST_TMP/evil" "$TEST_TMP/evil.port" 2>/dev/null &
track_pid "$!"
for _ in $(seq 100); do [ -s "$TEST_TMP/evil.port" ] && break; sleep 0.1; done
before=$(refused)
timeout -k 5 120 chromium --headless=new --no-sandbox --disable-gpu --user-data-dir="$TEST_TMP/chrome" \
	--no-first-run --disable-extensions --disable-background-networking \
	--virtual-time-budget=5000 --dump-dom "http://127.0.0.2:$(cat "$TEST_TMP/evil.port")/" \
	>/dev/null 2>>"$TEST_TMP/chromium.log"
for _ in $(seq 50); do
	[ "$(refused)" = $((before + 2)) ] && break
	sleep 0.1
done
check "Chromium on another origin's page: both POSTs refused ($before -> $(refused))" \
	test "$(refused)" = $((before + 2))
check "  no session created by them (open: $(open_sessions))" test "$(open_sessions)" = 3
finish
