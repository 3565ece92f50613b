#!/usr/bin/env bash
# The collector's route table (routes[] in collector/server/server.c) and the
# endpoint table of docs/collector.md are the same lines, and a collector
# does what each line says: every route tried without the token (401, or the
# sign-in page for the UI's), with the wrong method (405), with a body where
# it takes none (400) or past its bound (413), and counted under its
# endpoint in edgeprof_http_requests_total.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)

# "METHOD PATH ACCESS BODY ENDPOINT" per route, words joined by '_'
python3 - "$root" >"$TEST_TMP/tables" <<'EOF'
import re, sys
root = sys.argv[1]
access = {'OPEN': 'open', 'TOKEN': 'token', 'TOKEN_OR_UPLOAD': 'token_or_upload_token',
          'SIGNED_IN': 'signed_in'}
body = {'NO_BODY': 'none', 'BATCH_BODY': 'batch', 'IMAGE_BODY': 'image', 'FORM_BODY': 'form'}
src = open(root + '/collector/server/server.c').read()
table = src[src.index('static const struct route routes[] = {'):]
table = table[:table.index('};')]
code = []
for m in re.finditer(r'\{"(GET|POST)", "([^"]+)", (\w+), (\w+), E_(\w+), \w+\}', table):
    method, path, acc, bod, end = m.groups()
    path = path + 'ID' if path.endswith('/') and len(path) > 1 else path
    code.append(' '.join([method, path, access[acc], body[bod], end.lower()]))
doc = open(root + '/docs/collector.md').read()
doc = doc[doc.index('## HTTP API'):]
doc = doc[:doc.index('\n## ', 5)]
docs = []
for line in doc.split('\n'):
    cols = [c.strip().strip('`') for c in line.strip().strip('|').split('|')]
    if len(cols) >= 5 and cols[0] in ('GET', 'POST'):
        docs.append(' '.join([cols[0], cols[1], cols[2].replace(' ', '_'), cols[3], cols[4]]))
for l in code:
    print('code ' + l)
for l in docs:
    print('docs ' + l)
EOF
code=$(sed -n 's/^code //p' "$TEST_TMP/tables")
docs=$(sed -n 's/^docs //p' "$TEST_TMP/tables")
n=$(wc -l <<<"$code")
check "server.c's route table has its $n routes" test "$n" -ge 20
if [ "$code" = "$docs" ]; then
	ok "docs/collector.md's endpoint table is the route table, line for line"
else
	not_ok "docs/collector.md's endpoint table is the route table, line for line"
	diff <(echo "$code") <(echo "$docs") | sed 's/^/#   /'
fi

umask 077
echo "fleet-$RANDOM$RANDOM" >"$TEST_TMP/token"
echo "upload-$RANDOM$RANDOM" >"$TEST_TMP/upload-token"
start_collector c --store "sqlite:$TEST_TMP/c.db" --listen 127.0.0.1:0 \
	--token-file "$TEST_TMP/token" --upload-token-file "$TEST_TMP/upload-token" \
	--max-body 4096 --max-binary-mib 1 || exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"
auth=(-H "Authorization: Bearer $(cat "$TEST_TMP/token")")
head -c 8192 /dev/zero >"$TEST_TMP/8k"
head -c $((2 << 20)) /dev/zero >"$TEST_TMP/2m"

status() { # curl ARGS...: the HTTP status
	curl -s -o "$TEST_TMP/answer" -w '%{http_code}' "$@"
}
requests() { # ENDPOINT: edgeprof_http_requests_total{endpoint=ENDPOINT}
	metric "$url" "edgeprof_http_requests_total{endpoint=\"$1\"}"
}

bad=()
while read -r method path access body endpoint; do
	p=${path/%ID/0123456789abcdef}
	other=POST
	[ "$method" = POST ] && other=GET
	before=$(requests "$endpoint")
	st=$(status -X "$method" "$url$p")
	after=$(requests "$endpoint")
	want=1
	[ "$endpoint" = metrics ] && want=2 # the read of the counter counts too
	[ $((after - before)) = "$want" ] || bad+=("$method $path: counted $((after - before)) under $endpoint")
	case $access in
	token | token_or_upload_token) [ "$st" = 401 ] || bad+=("$method $path without the token: $st, not 401") ;;
	signed_in)
		[ "$st" = 303 ] && grep -q 'signin' "$TEST_TMP/answer" ||
			bad+=("$method $path without the token: $st, not 303 to /signin")
		;;
	open) # POST /signin answers 401 itself for a wrong token; the route does not ask
		! grep -q 'missing or wrong bearer token' "$TEST_TMP/answer" ||
			bad+=("$method $path (open): $st, asked for the token") ;;
	esac
	# the same path with the other method, unless a route takes it
	if ! grep -q "^$other $path " <<<"$code"; then
		st=$(status -X "$other" "${auth[@]}" "$url$p")
		[ "$st" = 405 ] || bad+=("$other $path: $st, not 405")
	fi
	st=$(status -X PUT "${auth[@]}" "$url$p")
	[ "$st" = 405 ] || bad+=("PUT $path: $st, not 405")
	case $body in
	none) st=$(status -X "$method" "${auth[@]}" --data-binary x "$url$p")
		[ "$st" = 400 ] || bad+=("$method $path with a body: $st, not 400") ;;
	form | batch) st=$(status -X "$method" "${auth[@]}" --data-binary "@$TEST_TMP/8k" "$url$p")
		[ "$st" = 413 ] || bad+=("$method $path with 8 KiB: $st, not 413") ;;
	image) st=$(status -X "$method" "${auth[@]}" --data-binary "@$TEST_TMP/2m" "$url$p")
		[ "$st" = 413 ] || bad+=("$method $path with 2 MiB: $st, not 413") ;;
	esac
done <<<"$code"
check "every route: counted under its endpoint, its access, its method, its body bound (${#bad[@]} wrong)" \
	test "${#bad[@]}" = 0
for b in "${bad[@]}"; do echo "#   $b"; done

before=$(requests other)
code=$(status "${auth[@]}" "$url/v1/nope")
check "a path in no route: 404, counted as other ($code)" \
	test "$code" = 404 -a "$(requests other)" = $((before + 1))
code=$(status -X POST -H "Authorization: Bearer $(cat "$TEST_TMP/upload-token")" "$url/v1/binaries")
check "the upload token opens /v1/images only: /v1/binaries is 401 ($code)" test "$code" = 401
code=$(status -H "Authorization: Bearer $(cat "$TEST_TMP/upload-token")" "$url/v1/images/00112233")
check "  and GET /v1/images/ID answers it ($code)" test "$code" = 404
code=$(status -I "${auth[@]}" "$url/healthz")
check "HEAD takes a GET route ($code)" test "$code" = 200
stop_pid "$COLLECTOR_PID"
finish
