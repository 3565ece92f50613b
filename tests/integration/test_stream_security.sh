#!/usr/bin/env bash
# Bearer token and mTLS: requests without valid credentials are refused,
# an agent with them streams; a world-readable token file stops the
# collector at start. Certificates are made here with openssl.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

perf="$FIXTURES/propeller_sample_1.perfdata1"
bin="$FIXTURES/propeller_sample_1.bin"
t=$TEST_TMP
umask 077
echo "s3cret-$RANDOM$RANDOM" >"$t/token"
echo "wrong-token" >"$t/wrong"

# --- bearer token over plain http
cp "$t/token" "$t/open-token"
chmod 644 "$t/open-token"
"$EDGEPROF" collector --store "sqlite:$t/x.db" --listen 127.0.0.1:0 --token-file "$t/open-token" \
	>"$t/open.log" 2>&1 &
p=$!
track_pid "$p"
sleep 1
if kill -0 "$p" 2>/dev/null; then not_ok "a world-readable token file is refused"; else
	ok "a world-readable token file is refused"
fi
check "  naming the file and the fix" grep -q "open-token is accessible to every user.*chmod o-rw" "$t/open.log"

start_collector tok --store "sqlite:$t/tok.db" --listen 127.0.0.1:0 --token-file "$t/token" || exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
check "no token: 401" test "$(code "$url/v1/binaries")" = 401
check "wrong token: 401" test "$(code -H "Authorization: Bearer wrong-token" "$url/v1/binaries")" = 401
check "ingest without token: 401" test "$(code -X POST --data-binary x "$url/v1/ingest")" = 401
check "right token: 200" test "$(code -H "Authorization: Bearer $(cat "$t/token")" "$url/v1/binaries")" = 200
check "probes need no token" test "$(code "$url/healthz")" = 200
"$EDGEPROF" agent --replay "$perf" --binary "$bin" --collector "$url" --spool "$t/s1" \
	--token-file "$t/wrong" --flush-timeout 2 --retry-max-ms 200 >"$t/a1.log" 2>&1
check "an agent with the wrong token gets nothing stored" test "$?" -eq 1
check "  and says why (HTTP 401)" grep -q "HTTP 401" "$t/a1.log"
"$EDGEPROF" agent --replay "$perf" --binary "$bin" --collector "$url" --spool "$t/s1" \
	--token-file "$t/token" --flush-timeout 30 >"$t/a2.log" 2>&1
check "with the right token it streams, spooled batches included" test "$?" -eq 0
check "unauthorized requests counted" test "$(metric "$url" edgeprof_http_unauthorized_total)" -ge 4
stop_pid "$COLLECTOR_PID"

# --- mTLS: a CA, a server certificate for 127.0.0.1, a client certificate,
# and a client certificate from another CA
mkcert() { # NAME CN [CA]
	openssl req -newkey rsa:2048 -nodes -keyout "$t/$1.key" -subj "/CN=$2" -out "$t/$1.csr" \
		2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1\n' >"$t/$1.ext"
	openssl x509 -req -in "$t/$1.csr" -CA "$t/$3.pem" -CAkey "$t/$3.key" -CAcreateserial \
		-days 2 -extfile "$t/$1.ext" -out "$t/$1.pem" 2>/dev/null
}
for ca in ca rogue; do
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$t/$ca.key" -subj "/CN=edgeprof $ca" \
		-days 2 -out "$t/$ca.pem" 2>/dev/null
done
mkcert server 127.0.0.1 ca
mkcert client agent-1 ca
mkcert intruder agent-x rogue
check "test certificates made with openssl" test -s "$t/client.pem" -a -s "$t/intruder.pem"

start_collector tls --store "sqlite:$t/tls.db" --listen 127.0.0.1:0 --token-file "$t/token" \
	--tls-cert "$t/server.pem" --tls-key "$t/server.key" --client-ca "$t/ca.pem" || exit 1
surl="https://127.0.0.1:$COLLECTOR_PORT"
auth=(-H "Authorization: Bearer $(cat "$t/token")")
refused() { [ "$1" = 403 ] || [ "$1" = 000 ]; } # 000: the TLS handshake itself failed
c=$(code --cacert "$t/ca.pem" "${auth[@]}" "$surl/v1/binaries")
check "https without a client certificate: refused ($c)" refused "$c"
c=$(code --cacert "$t/ca.pem" --cert "$t/intruder.pem" --key "$t/intruder.key" "${auth[@]}" \
	"$surl/v1/binaries")
check "a certificate from another CA: refused ($c)" refused "$c"
check "the right client certificate but no token: 401" \
	test "$(code --cacert "$t/ca.pem" --cert "$t/client.pem" --key "$t/client.key" "$surl/v1/binaries")" = 401
check "client certificate and token: 200" \
	test "$(code --cacert "$t/ca.pem" --cert "$t/client.pem" --key "$t/client.key" "${auth[@]}" "$surl/v1/binaries")" = 200
check "plain http to the TLS port fails" bash -c "! curl -sf 'http://127.0.0.1:$COLLECTOR_PORT/healthz' -o /dev/null"
"$EDGEPROF" agent --replay "$perf" --binary "$bin" --collector "$surl" --spool "$t/s2" \
	--token-file "$t/token" --cacert "$t/ca.pem" --cert "$t/client.pem" --key "$t/client.key" \
	--flush-timeout 30 >"$t/a3.log" 2>&1
check "an agent with its client certificate streams over mTLS" test "$?" -eq 0
"$EDGEPROF" report --collector "$surl" --token-file "$t/token" --cacert "$t/ca.pem" \
	--cert "$t/client.pem" --key "$t/client.key" >"$t/report.txt" 2>&1
check "report --collector over mTLS" grep -q "hottest functions" "$t/report.txt"
# the web UI behind mTLS: the same certificate gates it, the sign-in form
# gives a Secure cookie (https only), and with it the pages load
mtls=(--cacert "$t/ca.pem" --cert "$t/client.pem" --key "$t/client.key")
c=$(code --cacert "$t/ca.pem" "$surl/")
check "UI: / without a client certificate is refused ($c)" refused "$c"
hdr=$(curl -s -o /dev/null -D - "${mtls[@]}" -c "$t/jar" --data-urlencode "token=$(cat "$t/token")" \
	"$surl/signin")
check "UI: sign-in over mTLS sets a Secure, HttpOnly, SameSite=Strict cookie" \
	grep -qi '^set-cookie: edgeprof_token=.*HttpOnly; SameSite=Strict; Secure' <<<"$hdr"
check "UI: with the certificate and the cookie, / lists the streamed binary" \
	grep -q 'data-build-id=' <(curl -s "${mtls[@]}" -b "$t/jar" "$surl/")
c=$(code --cacert "$t/ca.pem" --cert "$t/intruder.pem" --key "$t/intruder.key" -b "$t/jar" "$surl/")
check "UI: the cookie without the right certificate is refused ($c)" refused "$c"
stop_pid "$COLLECTOR_PID"
finish
