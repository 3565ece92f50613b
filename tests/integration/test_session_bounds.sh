#!/usr/bin/env bash
# Pending sessions are bounded (issue 32, item 9): every session asked for
# was kept, stored and handed out in the answer to every batch of its node's
# agent (after 4,000, each answer carried 144 KB of instructions). Now at
# most --max-sessions are pending or running (past it: 429 with Retry-After,
# the bound named, edgeprof_sessions_refused_total counted), and an answer
# carries at most 16 of them (EP_SESSIONS_PER_ANSWER), the node's own first:
# the rest go with the agent's next batches. Agents here are
# session_agent.py, which sends a batch as an agent that runs sessions does.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

start_collector c --store "sqlite:$TEST_TMP/c.db" --listen 127.0.0.1:0 --max-sessions 30 \
	--session-pickup-s 120 || finish
url=http://127.0.0.1:$COLLECTOR_PORT
agent() { # NODE SEQ: one batch of that node's agent; its answer on stdout
	python3 "$(dirname "$0")/session_agent.py" "$url" --node "$1" --seq "$2"
}
agent node-a 1 >"$TEST_TMP/a1" && agent node-b 1 >"$TEST_TMP/b1"
check "two agents that run sessions report" \
	bash -c "grep -qx 'status 200' '$TEST_TMP/a1' && grep -qx 'status 200' '$TEST_TMP/b1'"

# 20 for node-a, then 20 for any node: 30 are taken, 10 refused
codes=()
for i in $(seq 1 40); do
	node=node-a
	[ "$i" -gt 20 ] && node=
	codes+=("$(curl -s -o "$TEST_TMP/s$i" -D "$TEST_TMP/h$i" -w '%{http_code}' -X POST \
		"$url/v1/sessions?pid=$((1000 + i))&duration_s=30&node=$node")")
done
created=$(printf '%s\n' "${codes[@]}" | grep -cx 201)
refused=$(printf '%s\n' "${codes[@]}" | grep -cx 429)
check "40 requests: 30 sessions created, 10 refused with 429 (created $created, refused $refused)" \
	test "$created" = 30 -a "$refused" = 10
check "  the refusal names the bound and the option" \
	grep -q '30 sessions are pending or running.*--max-sessions 30' "$TEST_TMP/s40"
check "  and says when to retry (Retry-After: the pickup time)" \
	grep -qi '^retry-after: 120' "$TEST_TMP/h40"
m() { metric "$url" "$1"; }
check "/metrics: edgeprof_sessions_refused_total{reason=\"too_many\"} $(m 'edgeprof_sessions_refused_total{reason="too_many"}'), open $(m edgeprof_sessions_open) of $(m edgeprof_sessions_open_max)" \
	test "$(m 'edgeprof_sessions_refused_total{reason="too_many"}')" = 10 -a \
	"$(m edgeprof_sessions_open)" = 30 -a "$(m edgeprof_sessions_open_max)" = 30

# node-a's answers: its own 20 first, 16 at a time, then the 10 for any node
agent node-a 2 >"$TEST_TMP/a2"
agent node-a 3 >"$TEST_TMP/a3"
agent node-a 4 >"$TEST_TMP/a4"
n() { grep -c '^session ' "$1"; }
bytes() { awk '$1 == "bytes" {print $2}' "$1"; }
check "node-a's answers carry 16, 14, 0 sessions ($(n "$TEST_TMP/a2"), $(n "$TEST_TMP/a3"), $(n "$TEST_TMP/a4")): at most 16 each" \
	test "$(n "$TEST_TMP/a2")" = 16 -a "$(n "$TEST_TMP/a3")" = 14 -a "$(n "$TEST_TMP/a4")" = 0
own=$(sed -n 's/^session //p' "$TEST_TMP/a2" | while read -r id; do
	curl -s "$url/v1/sessions/$id" | jq -r .node; done | grep -cx node-a)
check "  the first answer holds node-a's own sessions only ($own of 16)" test "$own" = 16
echo "# answer sizes: $(bytes "$TEST_TMP/a2") and $(bytes "$TEST_TMP/a3") bytes"
check "  an answer stays small (first one $(bytes "$TEST_TMP/a2") bytes, under 4 KiB)" \
	test "$(bytes "$TEST_TMP/a2")" -lt 4096
agent node-b 2 >"$TEST_TMP/b2"
check "node-b gets the 10 sessions for any node, none of node-a's ($(n "$TEST_TMP/b2"))" \
	test "$(n "$TEST_TMP/b2")" = 10
stop_pid "$COLLECTOR_PID"

# nodes: a token holder naming a new node in every batch grew the list (and
# the store's) without end; past --max-nodes a batch is stored, its node
# neither listed nor offered sessions, and that is counted
start_collector n --store "sqlite:$TEST_TMP/n.db" --listen 127.0.0.1:0 --max-nodes 3 || finish
url=http://127.0.0.1:$COLLECTOR_PORT
codes=$(for i in 1 2 3 4 5; do agent "node-$i" 1 | sed -n 's/^status //p'; done | tr '\n' ' ')
check "five nodes' batches past --max-nodes 3: all stored ($codes)" test "$codes" = "200 200 200 200 200 "
listed=$(curl -s "$url/v1/nodes" | jq -r '[.nodes[].name] | join(" ")')
check "  the first three nodes listed, no more ($listed)" test "$listed" = "node-1 node-2 node-3"
check "  /metrics: 2 batches of unlisted nodes, 3 nodes of 3" \
	test "$(m edgeprof_nodes_untracked_batches_total)" = 2 -a "$(m edgeprof_nodes)" = 3 -a \
	"$(m edgeprof_nodes_max)" = 3
check "  said once, naming the bound" \
	test "$(grep -c 'node node-4: not listed, and offered no session: this collector keeps 3 nodes (--max-nodes)' "$TEST_TMP/n.log")" = 1
check "  and not again within the minute (node-5)" bash -c "! grep -q 'node node-5' '$TEST_TMP/n.log'"
stop_pid "$COLLECTOR_PID"
finish
