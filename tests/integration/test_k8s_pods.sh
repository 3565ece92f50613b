#!/usr/bin/env bash
# Pod names from the Kubernetes API server, against a fake one on loopback
# (python3 http.server) that checks the bearer token and the node's
# fieldSelector like an API server with the DaemonSet's RBAC would. A
# container cgroup named the way podman names its own holds a busy program;
# the fake API lists that container in pod shop/web-7d9f. A whole-machine
# agent (ASan+UBSan build) streams to a collector: the container's counts
# carry the pod and namespace, the collector filters on them, `edgeprof
# profile --pod` samples that pod only, a pod elsewhere is "not on this
# node", and with the API gone the agent warns once and keeps streaming.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

require_root_live
root=""
for r in /sys/fs/cgroup/unified /sys/fs/cgroup; do
	if [ -f "$r/cgroup.procs" ] && [ -w "$r" ]; then
		root=$r
		break
	fi
done
if [ -z "$root" ]; then
	not_ok "k8s pods: no writable cgroup v2 hierarchy to make a container cgroup in"
	finish
fi
here=$(dirname "$0")
id=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
# build-ids of this run only: a binary is named by the first path seen with
# its build-id, and another run of this test beside this one (a CI run)
# would otherwise lend its copies' paths
cc -O1 -g -Wl,--build-id=0x${id:0:40} -o "$TEST_TMP/hot_cold" "$here/../workloads/hot_cold.c"
cc -O1 -g -Wl,--build-id=0x${id:24:40} -o "$TEST_TMP/random_branches" "$here/../workloads/random_branches.c"
"$TEST_TMP/hot_cold" 100000000000 >/dev/null &
track_pid $!
"$TEST_TMP/random_branches" 100000000000 >/dev/null &
inside=$!
track_pid "$inside"
# the kubelet's layout (systemd driver): the pod's slice, named after its
# uid, holds the container's scope
uid=$(cat /proc/sys/kernel/random/uuid)
slice=$root/edgeprof-k8s-$$.slice
podcg=$slice/kubepods-pod${uid//-/_}.slice
ct=$podcg/libpod-$id.scope
mkdir -p "$ct"
echo "$inside" >"$ct/cgroup.procs"
cleanup_cgroup() {
	echo "$inside" >"$root/cgroup.procs" 2>/dev/null
	rmdir "$ct" "$podcg" "$slice/libpod-$late_id.scope" "$slice" 2>/dev/null
}

# the fake API server: 403 without the token, 400 without a fieldSelector,
# this node's PodList otherwise; every request logged as
# "UA<TAB>token-ok<TAB>fieldSelector"
late_id=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export LATE_ID=$late_id LATE_FLAG=$TEST_TMP/late-listed
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$token" >"$TEST_TMP/k8s-token"
chmod 600 "$TEST_TMP/k8s-token"
cat >"$TEST_TMP/fake_api.py" <<'EOF'
import http.server, json, os, sys, urllib.parse
token, cid, uid, portfile, log = sys.argv[1:6]
cert = sys.argv[6] if len(sys.argv) > 6 else None
pods = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": [
    {"metadata": {"name": "web-7d9f", "namespace": "shop",
                  "uid": uid},
     "spec": {"nodeName": "node-a"},
     "status": {"phase": "Running",
                "initContainerStatuses": [{"name": "init", "containerID": "containerd://" + "1" * 64}],
                "containerStatuses": [{"name": "web", "containerID": "containerd://" + cid},
                                      {"name": "proxy", "state": {"waiting": {}}}]}},
    {"metadata": {"name": "db-0", "namespace": "data",
                  "uid": "0a1b2c3d-0000-4000-8000-000000000001"},
     "status": {"containerStatuses": [{"name": "db", "containerID": "cri-o://" + "2" * 64}]}}]}
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        sel = urllib.parse.parse_qs(u.query).get("fieldSelector", [""])[0]
        auth = self.headers.get("Authorization") == "Bearer " + token
        with open(log, "a") as f:
            f.write("%s\t%s\t%s\t%s\n" % (self.headers.get("User-Agent", "-"),
                                          "token-ok" if auth else "no-token", u.path, sel))
        if not auth:
            code, body = 403, {"kind": "Status", "reason": "Forbidden"}
        elif u.path != "/api/v1/pods" or not sel:
            code, body = 400, {"kind": "Status", "reason": "BadRequest"}
        else:
            node = sel.split("=", 1)[1] if sel.startswith("spec.nodeName=") else ""
            items = list(pods["items"])
            if os.path.exists(os.environ["LATE_FLAG"]):  # a pod the kubelet has just reported
                items.append({"metadata": {"name": "late-1", "namespace": "shop",
                                           "uid": "0a1b2c3d-0000-4000-8000-000000000002"},
                              "status": {"containerStatuses": [
                                  {"name": "late", "containerID": "containerd://" + os.environ["LATE_ID"]}]}})
            code, body = 200, dict(pods, items=[p for p in items if node == "node-a"])
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
if cert:  # as in a cluster: https, the server's certificate signed by the CA given to the agent
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert + ".crt", cert + ".key")
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
open(portfile, "w").write(str(s.server_address[1]))
s.serve_forever()
EOF
start_api() { # LOG [CERT]: the fake API server, in the background; sets api and api_port
	rm -f "$TEST_TMP/api.port"
	python3 "$TEST_TMP/fake_api.py" "$token" "$id" "$uid" "$TEST_TMP/api.port" "$@" 2>>"$TEST_TMP/api.err" &
	api=$!
	track_pid "$api"
	for _ in $(seq 1 200); do [ -s "$TEST_TMP/api.port" ] && break; sleep 0.1; done
	api_port=$(cat "$TEST_TMP/api.port" 2>/dev/null)
	[ -n "$api_port" ] && return 0
	echo "# the fake API server did not start:"
	sed 's/^/#   /' "$TEST_TMP/api.err"
	return 1
}
start_api "$TEST_TMP/api.log" || not_ok "fake API server started"
api_url="http://127.0.0.1:$api_port"
check "fake API: 403 without the token" \
	test "$(curl -s -A probe -o /dev/null -w '%{http_code}' "$api_url/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a")" = 403
check "fake API: 400 without a fieldSelector" \
	test "$(curl -s -A probe -H "Authorization: Bearer $token" -o /dev/null -w '%{http_code}' "$api_url/api/v1/pods")" = 400

start_collector c --store "sqlite:$TEST_TMP/c.db" --listen 127.0.0.1:0 --max-session-s 60 \
	--session-pickup-s 20 --node-silent-s 20 || exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"
ASAN_OPTIONS=detect_leaks=1 "$EDGEPROF_ASAN" agent --interval 1 --retry-max-ms 1000 --collector "$url" \
	--node node-a --spool "$TEST_TMP/spool" --k8s-api "$api_url" --k8s-token-file "$TEST_TMP/k8s-token" \
	2>"$TEST_TMP/agent.err" &
agent=$!
track_pid "$agent"

labelled() { # until /v1/binaries shows the container's program with its pod
	local until=$((SECONDS + 40))
	while [ "$SECONDS" -lt "$until" ]; do
		curl -s "$url/v1/binaries" >"$TEST_TMP/bin.json"
		jq -e --arg p "$TEST_TMP/random_branches" --arg id "$id" '.binaries[] |
			select(.paths | index($p)) | .labels[] |
			select(.container_id == $id and .pod == "web-7d9f" and .namespace == "shop")' \
			"$TEST_TMP/bin.json" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	return 1
}
check "the container's program is labelled pod web-7d9f, namespace shop, and its container id" labelled
check "  the program outside the container has no pod label" \
	test "$(jq -r --arg p "$TEST_TMP/hot_cold" '[.binaries[] | select(.paths | index($p)) | .labels[] |
		select(.pod != "" or .namespace != "")] | length' "$TEST_TMP/bin.json")" = 0
check "  the agent said how many pods it read" grep -q "kubernetes: 2 pods, 3 containers on this node" "$TEST_TMP/agent.err"

# a container whose first process runs before the API server lists it (the
# kubelet reports a container's id once it started): labelled with its
# container id first, with its pod once the API lists it
ct2=$slice/libpod-$late_id.scope
mkdir -p "$ct2"
cc -O1 -g -Wl,--build-id=0x${late_id:0:40} -o "$TEST_TMP/late_prog" "$here/../workloads/random_branches.c"
sh -c "echo \$\$ >'$ct2/cgroup.procs' && exec '$TEST_TMP/late_prog' 100000000000" >/dev/null &
late=$!
track_pid "$late"
label_of_late() { # the label sets of the late container's counts: "pod" or "-"
	curl -s "$url/v1/binaries" | jq -r --arg id "$late_id" \
		'[.binaries[].labels[] | select(.container_id == $id) | if .pod == "" then "-" else .pod end] | unique | join(",")'
}
wait_label() { # WANT
	local until=$((SECONDS + 30))
	while [ "$SECONDS" -lt "$until" ]; do
		[ "$(label_of_late)" = "$1" ] && return 0
		sleep 0.5
	done
	return 1
}
check "a container not listed yet: its counts carry its container id, no pod" wait_label "-"
touch "$LATE_FLAG"
check "  once the API lists it, its new counts carry the pod (shop/late-1)" wait_label "-,late-1"
kill "$late"
wait "$late" 2>/dev/null
rm -f "$LATE_FLAG"
# the paths as JSON, so that an empty one shows; polled, since the pod's counts reach the
# collector with the agent's next batch
pod_paths() {
	curl -s "$url/v1/profile?namespace=shop&pod=web-7d9f&format=json" |
		jq -c '[.profiles[] | select(.samples > 0) | .path] | unique'
}
until=$((SECONDS + 30))
while paths=$(pod_paths) && [ "$paths" != "[\"$TEST_TMP/random_branches\"]" ] && [ "$SECONDS" -lt "$until" ]; do
	sleep 0.5
done
check "/v1/profile?namespace=shop&pod=web-7d9f holds only the pod's program ($paths)" \
	test "$paths" = "[\"$TEST_TMP/random_branches\"]"

"$EDGEPROF" profile --pod shop/web-7d9f --duration 2 --collector "$url" -o "$TEST_TMP/s1.prof" 2>"$TEST_TMP/s1.err"
if [ $? -eq 0 ] && grep -Eq 'session [0-9a-f]+: done on node node-a, [1-9][0-9]* samples' "$TEST_TMP/s1.err"; then
	ok "profile --pod shop/web-7d9f: done"
else
	not_ok "profile --pod shop/web-7d9f: done"
	sed 's/^/#   profile: /' "$TEST_TMP/s1.err"
	grep -i 'session\|kubernetes' "$TEST_TMP/agent.err" | sed 's/^/#   agent: /'
fi
paths=$("$EDGEPROF" export "$TEST_TMP/s1.prof" --format json |
	jq -c '[.profiles[] | select(.samples > 0) | .path] | unique')
check "  its profile holds only the pod's program ($paths)" test "$paths" = "[\"$TEST_TMP/random_branches\"]"
sid=$(sed -n 's/.*session \([0-9a-f]\{16\}\): done.*/\1/p' "$TEST_TMP/s1.err")
check "  its counts are labelled with the session, the pod and its namespace" \
	test "$(curl -s "$url/v1/binaries?session=$sid" |
		jq -r '[.binaries[].labels[] | "\(.session_id) \(.namespace)/\(.pod)"] | unique | join(",")')" = "$sid shop/web-7d9f"
check "  GET /v1/sessions/ID names the pod" \
	test "$(curl -s "$url/v1/sessions/$sid" | jq -r '"\(.pod) \(.state)"')" = "shop/web-7d9f done"
check "  the agent sampled the pod's cgroup (found from its uid), not one container's" \
	grep -q "session $sid: sampling pod shop/web-7d9f, cgroup /$(basename "$slice")/$(basename "$podcg") for" "$TEST_TMP/agent.err"
"$EDGEPROF" profile --pod shop/nope --duration 2 --collector "$url" 2>"$TEST_TMP/s2.err"
check "profile --pod shop/nope: fails, 'not on this node'" \
	bash -c "[ $? -eq 1 ] && grep -q 'failed: pod shop/nope is on none of the 1 nodes reporting (node node-a: pod shop/nope: not on this node)' '$TEST_TMP/s2.err'"
"$EDGEPROF" profile --pod shop --duration 2 --collector "$url" 2>"$TEST_TMP/s3.err"
check "profile --pod without a namespace: refused, exit 2" \
	bash -c "[ $? -eq 2 ] && grep -q \"pod: 'shop' is not NAMESPACE/NAME\" '$TEST_TMP/s3.err'"
check "POST /v1/sessions?pod=shop: 400 naming the pod" \
	bash -c "curl -s -w ' %{http_code}' -X POST '$url/v1/sessions?pod=shop&duration_s=2' | tr -d '\\n' | grep -q \"pod 'shop': expected NAMESPACE/NAME 400\""

grep -v '^probe' "$TEST_TMP/api.log" >"$TEST_TMP/agent-requests.log"
n=$(wc -l <"$TEST_TMP/agent-requests.log")
check "the agent's $n requests to the API server: all with the token, all for pods of node node-a" \
	test "$n" -ge 2 -a "$(grep -vc "	token-ok	/api/v1/pods	spec.nodeName=node-a$" "$TEST_TMP/agent-requests.log")" = 0

# the API server goes away: one warning, the agent goes on streaming
stop_pid "$api"
sleep 6 # past the rate limit on reading the list again for a pod it does not hold
"$EDGEPROF" profile --pod shop/other --duration 2 --collector "$url" 2>"$TEST_TMP/s4.err"
check "API unreachable: profile --pod of an unlisted pod fails, 'pod names need API access'" \
	bash -c "[ $? -eq 1 ] && grep -q 'node node-a: pod shop/other: pod names need API access: GET $api_url/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a: ' '$TEST_TMP/s4.err'"
"$EDGEPROF" profile --pod shop/other2 --duration 2 --collector "$url" 2>"$TEST_TMP/s5.err"
check "  and again, still without a second warning" grep -q 'pod names need API access' "$TEST_TMP/s5.err"
before=$(metric "$url" 'edgeprof_ingest_batches_total{result="stored"}')
until=$((SECONDS + 30))
while after=$(metric "$url" 'edgeprof_ingest_batches_total{result="stored"}') &&
	[ "${after:-0}" -le "${before:-0}" ] && [ "$SECONDS" -lt "$until" ]; do
	sleep 0.5
done
check "  the agent keeps streaming (stored batches $before -> $after)" test "${after:-0}" -gt "${before:-0}"
warnings=$(grep -c "kubernetes: GET $api_url/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a: .*labelling with container ids only" "$TEST_TMP/agent.err")
check "  and logged one warning naming the URL ($warnings)" test "$warnings" = 1
stop_pid "$agent"
stop_pid "$COLLECTOR_PID"

# in-cluster configuration: the API's address from KUBERNETES_SERVICE_HOST
# and _PORT, https checked against the CA, the node from NODE_NAME
for n in api other; do
	openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 -keyout "$TEST_TMP/$n.key" -out "$TEST_TMP/$n.crt" 2>/dev/null
done
start_api "$TEST_TMP/api-tls.log" "$TEST_TMP/api" || not_ok "fake API server (https) started"
tls_port=$api_port
in_cluster() { # CA NAME: a short agent run with the in-cluster environment
	KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$tls_port NODE_NAME=node-a \
		"$EDGEPROF" agent --duration 2 -o "$TEST_TMP/$2.prof" --k8s-token-file "$TEST_TMP/k8s-token" \
		--k8s-ca "$1" 2>"$TEST_TMP/$2.err"
}
in_cluster "$TEST_TMP/api.crt" incluster
check "in-cluster: https://\$KUBERNETES_SERVICE_HOST:\$KUBERNETES_SERVICE_PORT, the CA checked, NODE_NAME's pods read" \
	grep -q "kubernetes: 2 pods, 3 containers on this node (https://127.0.0.1:$tls_port/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a)" "$TEST_TMP/incluster.err"
in_cluster "$TEST_TMP/other.crt" wrongca
check "in-cluster with a CA that did not sign the server's certificate: one warning naming the URL, exit 0" \
	bash -c "[ $? -eq 0 ] && [ \$(grep -c 'warn: kubernetes: GET https://127.0.0.1:$tls_port/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a: .*certificate' '$TEST_TMP/wrongca.err') = 1 ]"
"$EDGEPROF" agent --duration 1 -o "$TEST_TMP/outside.prof" 2>"$TEST_TMP/outside.err"
check "outside a cluster (no KUBERNETES_SERVICE_HOST, no --k8s-api): pod names off, nothing said" \
	bash -c "[ $? -eq 0 ] && ! grep -qi kubernetes '$TEST_TMP/outside.err'"
KUBERNETES_SERVICE_HOST=127.0.0.1 "$EDGEPROF" agent --duration 1 -o "$TEST_TMP/nonode.prof" 2>"$TEST_TMP/nonode.err"
check "in a cluster without a node name: it profiles, and one warning says what is missing" \
	bash -c "[ $? -eq 0 ] && grep -q 'warn: kubernetes: pod names need this node.s name (--node, or NODE_NAME' '$TEST_TMP/nonode.err'"
"$EDGEPROF" agent --duration 1 -o "$TEST_TMP/badurl.prof" --k8s-api ftp://x --node n 2>"$TEST_TMP/badurl.err"
check "--k8s-api of another scheme: exit 2 naming it" \
	bash -c "[ $? -eq 2 ] && grep -q 'k8s-api ftp://x: expected an http:// or https:// URL' '$TEST_TMP/badurl.err'"
check "the agent and the collector exited cleanly, no sanitizer report or error line" \
	bash -c "! grep -E 'error:|Sanitizer|runtime error|leak' '$TEST_TMP/agent.err' '$TEST_TMP/c.log'"
cleanup_cgroup
check "the test's cgroup is gone" test ! -d "$slice"
finish
