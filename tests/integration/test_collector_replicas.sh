#!/usr/bin/env bash
# Several collectors, one store (issue 16): three collectors on one
# clickhouse-server on loopback behave as one.
#  - an on-demand session asked for at collector 1 is run by a live agent
#    that talks to collector 3 only, and reads the same (state, counts) from
#    all three;
#  - a batch stored through one collector and resent to another is answered
#    and counted once;
#  - a dozen agents replay the real recording, all given the same list of
#    three URLs, and spread over them (each node's home replica picked by its
#    name), while collector 2 is SIGKILLed mid-stream and restarted:
#    every agent fails over and gets every batch acknowledged, and the stored
#    totals equal the local imports exactly;
#  - /v1/nodes, /v1/binaries and the session answer the same from all three.
# With EP_REPLICAS_SHARDS=N (test_collector_cluster.sh) the store is a
# ClickHouse cluster of N shards (N servers on 127.0.0.1..N), shard 2 is
# restarted mid-stream as well, and each binary's rows are on one shard.
# tests/run.sh: group heavy (ClickHouse servers, or a load run: one such suite at a time)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/clickhouse.sh"
source "$(dirname "$0")/collector.sh"

if [ ! -x /usr/sbin/clickhouse-server ]; then
	not_ok "clickhouse-server is installed (scripts/setup-deps.sh installs it)"
	finish
fi
SHARDS=${EP_REPLICAS_SHARDS:-1}
database=replicas_$$
if [ "$SHARDS" -gt 1 ]; then
	clickhouse_start_cluster "$SHARDS" || {
		not_ok "$SHARDS clickhouse-servers start on loopback as one cluster"
		finish
	}
	ok "$SHARDS clickhouse-servers start on loopback as cluster $CLICKHOUSE_CLUSTER ($CLICKHOUSE_URL ...)"
	store="clickhouse:$CLICKHOUSE_URL/?database=$database&cluster=$CLICKHOUSE_CLUSTER"
	err=$("$EDGEPROF" collector --store "clickhouse:$CLICKHOUSE_URL/?database=$database&cluster=nope" \
		--listen 127.0.0.1:0 2>&1 >/dev/null)
	check "a cluster the server does not know: refused, saying so ($err)" \
		bash -c 'grep -q "has no cluster .nope." <<<"$1"' _ "$err"
else
	clickhouse_start || { not_ok "clickhouse-server starts on loopback"; finish; }
	ok "clickhouse-server starts on loopback ($CLICKHOUSE_URL)"
	store="clickhouse:$CLICKHOUSE_URL/?database=$database"
fi
perf="$FIXTURES/propeller_sample_1.perfdata1"
bin="$FIXTURES/propeller_sample_1.bin"
AGENTS=12

declare -a cpid cport url
# start_replica I [BINARY]: collector I on the shared store (on its old port
# when it had one)
start_replica() {
	ASAN_OPTIONS=detect_leaks=1 COLLECTOR_BIN=${2:-$EDGEPROF} \
		start_collector "c$1" --store "$store" --listen "127.0.0.1:${cport[$1]:-0}" \
		--commit-ms 100 --max-session-s 60 --session-pickup-s 60 --node-silent-s 30 || return 1
	cpid[$1]=$COLLECTOR_PID
	cport[$1]=$COLLECTOR_PORT
	url[$1]="http://127.0.0.1:$COLLECTOR_PORT"
}
# the replica that hands the session over runs the ASan+UBSan build
start_replica 1 && start_replica 2 && start_replica 3 "$EDGEPROF_ASAN" || {
	not_ok "three collectors start on one ClickHouse store"
	finish
}
ok "three collectors start on one ClickHouse store (${url[*]})"
stored() { metric "${url[$1]}" 'edgeprof_ingest_batches_total{result="stored"}'; }
duplicates() { metric "${url[$1]}" 'edgeprof_ingest_batches_total{result="duplicate"}'; }

# --- a session asked for at collector 1, run by an agent that talks to 3
if [ "$(id -u)" -eq 0 ]; then
	cc -O1 -g -o "$TEST_TMP/hot_cold" "$(dirname "$0")/../workloads/hot_cold.c"
	"$TEST_TMP/hot_cold" 100000000000 >/dev/null &
	work=$!
	track_pid "$work"
	# its own continuous profile is of the workload alone (other
	# build-ids than the recording's); it lists collector 3 first
	ASAN_OPTIONS=detect_leaks=1 "$EDGEPROF_ASAN" agent --pid "$work" --interval 1 \
		--retry-max-ms 1000 --collector "${url[3]},${url[1]}" --collector "${url[2]}" \
		--collector-order listed --node live-node --spool "$TEST_TMP/live-spool" 2>"$TEST_TMP/live.err" &
	live=$!
	track_pid "$live"
	node_reporting() { # URL NODE
		curl -s "$1/v1/nodes" | jq -e --arg n "$2" \
			'.nodes[] | select(.name == $n and .reporting and .sessions)' >/dev/null 2>&1
	}
	until=$((SECONDS + 60))
	until node_reporting "${url[1]}" live-node || [ "$SECONDS" -ge "$until" ]; do sleep 0.2; done
	check "collector 1 lists the live agent's node as reporting (it reports to collector 3)" \
		node_reporting "${url[1]}" live-node
	# the CLI fails over too: nothing listens on the first URL
	"$EDGEPROF" profile --pid "$work" --duration 3 \
		--collector "http://127.0.0.1:1,${url[1]}" -o "$TEST_TMP/s.prof" 2>"$TEST_TMP/s.err"
	rc=$?
	sid=$(sed -n 's/.*session \([0-9a-f]\{16\}\): done.*/\1/p' "$TEST_TMP/s.err")
	check "profile --collector <nothing>,<collector 1>: the session ends done ($sid)" \
		test "$rc" -eq 0 -a -n "$sid"
	[ "$rc" -eq 0 ] || sed 's/^/#   profile: /' "$TEST_TMP/s.err"
	check "  run by the live agent" grep -q "session $sid: sampling" "$TEST_TMP/live.err"
	check "  which sent nothing to collectors 1 and 2" \
		test "$(stored 1)" = 0 -a "$(stored 2)" = 0
	check "  collector 3 handed it over and followed it; collector 1 only recorded it" \
		bash -c "grep -q 'session $sid: running on node live-node' '$TEST_TMP/c3.log' &&
			grep -q 'session $sid: container\|session $sid: pid' '$TEST_TMP/c1.log' &&
			! grep -q 'session $sid: running' '$TEST_TMP/c1.log'"
	for i in 1 2 3; do
		curl -s "${url[$i]}/v1/sessions/$sid" >"$TEST_TMP/session.$i.json"
		"$EDGEPROF" export --collector "${url[$i]}" --session "$sid" --format json \
			2>/dev/null | jq .stats.samples >"$TEST_TMP/session.$i.samples"
	done
	echo "# session $sid: $(jq -c '{state, node, samples}' "$TEST_TMP/session.1.json")," \
		"stored samples $(cat "$TEST_TMP/session.1.samples")"
	check "the session reads the same from all three collectors, done with its samples" \
		bash -c "cmp -s '$TEST_TMP/session.1.json' '$TEST_TMP/session.2.json' &&
			cmp -s '$TEST_TMP/session.1.json' '$TEST_TMP/session.3.json' &&
			[ \"\$(jq -r '\"\(.state) \(.node) \(.samples > 0)\"' '$TEST_TMP/session.1.json')\" = 'done live-node true' ]"
	check "  and so do its stored counts" \
		bash -c "cmp -s '$TEST_TMP/session.1.samples' '$TEST_TMP/session.2.samples' &&
			cmp -s '$TEST_TMP/session.1.samples' '$TEST_TMP/session.3.samples' &&
			[ \"\$(cat '$TEST_TMP/session.1.samples')\" -gt 0 ]"
	stop_pid "$live"
	kill "$work" 2>/dev/null
	check "the live agent exited cleanly, no sanitizer report or error line" \
		bash -c "! grep -E 'error:|Sanitizer|runtime error' '$TEST_TMP/live.err'"
else
	echo "# skipped the live session: live collection needs root (CAP_BPF, CAP_PERFMON)"
fi

# --- a batch stored through one collector and resent to another
"$EDGEPROF" agent --replay "$perf" --binary "$bin" --batch-samples 400 \
	--collector http://127.0.0.1:1 --spool "$TEST_TMP/spool-dup" --node dup-node \
	--flush-timeout 1 --upload-max-mib 0 >"$TEST_TMP/agent-dup.log" 2>&1
mapfile -t spooled < <(ls "$TEST_TMP/spool-dup"/*.batch)
post() { # FILE URL: the HTTP status
	curl -s -o /dev/null -w '%{http_code}\n' -X POST -H "Content-Encoding: zstd" \
		--data-binary "@$1" "$2/v1/ingest"
}
d2=$(duplicates 2)
d3=$(duplicates 3)
codes="$(post "${spooled[0]}" "${url[1]}") $(post "${spooled[0]}" "${url[2]}") $(post "${spooled[0]}" "${url[3]}")"
check "a batch stored at collector 1, resent to 2 and 3: acknowledged by each ($codes)" \
	test "$codes" = "200 200 200"
check "  and counted as a duplicate by 2 and 3" \
	test "$(duplicates 2)" = "$((d2 + 1))" -a "$(duplicates 3)" = "$((d3 + 1))"
# the rest at once, each to two collectors: counted once all the same
codes=$(for k in "${!spooled[@]}"; do
	a=$((k % 3 + 1))
	b=$(((k + 1) % 3 + 1))
	post "${spooled[$k]}" "${url[$a]}" &
	post "${spooled[$k]}" "${url[$b]}" &
done | sort | uniq -c | xargs)
check "all ${#spooled[@]} spooled batches sent to two collectors at once: all 200 ($codes)" \
	test "$codes" = "$((2 * ${#spooled[@]})) 200"

# --- a dozen agents with one list of all three URLs; collector 2
# is SIGKILLed mid-stream and restarted
t0=$SECONDS
dup_before=$(($(duplicates 1) + $(duplicates 3)))
declare -a apid
# one list for all, as a DaemonSet's: each node's home replica is picked
# by its name, so the load spreads over the three
order="${url[1]},${url[2]},${url[3]}"
for i in $(seq 1 "$AGENTS"); do
	# 40 samples a batch: ~94 batches each, acknowledged after their group
	# commits, so the stream lasts long enough for the kill to land in it
	"$EDGEPROF" agent --replay "$perf" --binary "$bin" --batch-samples 40 \
		--collector "$order" --node "replay-$i" --spool "$TEST_TMP/spool-$i" \
		--retry-max-ms 400 --flush-timeout 300 >"$TEST_TMP/agent-$i.log" 2>&1 &
	apid[$i]=$!
	track_pid "${apid[$i]}"
done
before=$(stored 2)
until=$((SECONDS + 120))
while [ "$(stored 2)" -lt "$((${before:-0} + 20))" ] && [ "$SECONDS" -lt "$until" ]; do
	sleep 0.1
done
spread="$(stored 1) $(stored 2) $(stored 3)"
check "one list for all agents: every collector stores batches ($spread)" \
	test "$(stored 1)" -gt 0 -a "$(stored 2)" -gt 0 -a "$(stored 3)" -gt 0
at_kill=$(($(stored 1) + $(stored 2) + $(stored 3)))
kill -9 "${cpid[2]}"
wait "${cpid[2]}" 2>/dev/null
echo "# collector 2 SIGKILLed after $at_kill batches stored in all ($((SECONDS - t0)) s)"
store_errors() { echo $(($(metric "${url[1]}" 'edgeprof_ingest_batches_total{result="store_error"}') + $(metric "${url[3]}" 'edgeprof_ingest_batches_total{result="store_error"}'))); }
if [ "$SHARDS" -gt 1 ]; then
	# every commit writes its batch rows to every shard: with shard 2 down
	# each one fails (503), the agents keep their batches and retry
	errors_before=$(store_errors)
	clickhouse_stop_pid "${CLICKHOUSE_SHARD_PIDS[2]}"
	until=$((SECONDS + 60))
	while [ "$(store_errors)" -eq "$errors_before" ] && [ "$SECONDS" -lt "$until" ]; do
		sleep 0.1
	done
	check "shard 2 stopped mid-stream: commits fail, answered 503 ($(($(store_errors) - errors_before)) batches)" \
		test "$(store_errors)" -gt "$errors_before"
	clickhouse_restart_shard 2 || { not_ok "shard 2 restarts on its data"; finish; }
	ok "shard 2 restarted on its data"
fi
# back once the other two stored 200 more without it
until=$((SECONDS + 120))
while [ "$(($(stored 1) + $(stored 3)))" -lt "$((at_kill + 200))" ] && [ "$SECONDS" -lt "$until" ]; do
	sleep 0.2
done
start_replica 2 || { not_ok "collector 2 restarts on its port"; finish; }
ok "collector 2 SIGKILLed mid-stream and restarted on its port"
bad=0
for i in $(seq 1 "$AGENTS"); do
	wait "${apid[$i]}" || {
		bad=$((bad + 1))
		tail -3 "$TEST_TMP/agent-$i.log" | sed "s/^/#   agent $i: /"
	}
done
elapsed=$((SECONDS - t0))
check "all $AGENTS agents got every batch acknowledged and exited 0" test "$bad" -eq 0
failovers=$(cat "$TEST_TMP"/agent-*.log | grep -c "; sending to http")
failed=$(cat "$TEST_TMP"/agent-*.log | sed -n 's/.* \([0-9]*\) send attempts failed.*/\1/p' |
	awk '{s += $1} END {print s + 0}')
check "agents that were sending to collector 2 moved to the next URL ($failovers said so, $failed attempts failed)" \
	test "$failovers" -gt 0 -a "$failed" -gt 0
left=$(cat "$TEST_TMP"/spool-[0-9]*/*.batch 2>/dev/null | wc -c)
check "every agent's spool is empty afterwards" test "$left" -eq 0
sent=$(cat "$TEST_TMP"/agent-*.log | sed -n 's/.*streamed \([0-9]*\) batches.*/\1/p' |
	awk '{s += $1} END {print s + 0}')
dup_after=$(($(duplicates 1) + $(duplicates 3) - dup_before))
echo "# $AGENTS agents, $sent batches in $elapsed s ($((sent / (elapsed > 0 ? elapsed : 1))) batches/s," \
	"3 collectors, one of them ASan, on a shared 2-core machine); collectors 1 and 3 answered" \
	"$dup_after resends as already stored"

# --- the stored totals equal the local imports: $AGENTS replays and the
# spooled one, nothing lost and nothing counted twice
copies=$((AGENTS + 1))
"$EDGEPROF" import "$perf" --binary "$bin" -o "$TEST_TMP/local.prof" 2>/dev/null
"$EDGEPROF" export "$TEST_TMP/local.prof" --format json >"$TEST_TMP/local.json"
jq -r '.profiles[].build_id' "$TEST_TMP/local.json" | sort -u >"$TEST_TMP/ids"
times() { awk -v k="$copies" '{$NF = $NF * k; print}'; }
edge_table <"$TEST_TMP/local.json" | times >"$TEST_TMP/local.edges"
jq -r '.profiles[] | .build_id as $b | .ranges[] | "\($b) \(.start) \(.end) \(.count)"' \
	"$TEST_TMP/local.json" | sort | times >"$TEST_TMP/local.ranges"
local_samples=$(jq '[.profiles[].samples] | add' "$TEST_TMP/local.json")
ids=$(jq -R . "$TEST_TMP/ids" | jq -s .)
for i in 1 2 3; do
	# the recording's binaries only: the live agent's workload is stored too
	curl -sf "${url[$i]}/v1/profile?format=json" |
		jq --argjson ids "$ids" \
			'{profiles: [.profiles[] | select(.build_id as $b | $ids | index($b))]}' \
			>"$TEST_TMP/ours.$i.json"
	edge_table <"$TEST_TMP/ours.$i.json" >"$TEST_TMP/collector.$i.edges"
	jq -r '.profiles[] | .build_id as $b | .ranges[] | "\($b) \(.start) \(.end) \(.count)"' \
		"$TEST_TMP/ours.$i.json" | sort >"$TEST_TMP/collector.$i.ranges"
done
n=$(wc -l <"$TEST_TMP/local.edges")
stored_samples=$(jq '[.profiles[].samples] | add' "$TEST_TMP/ours.1.json")
echo "# $n edges, $(wc -l <"$TEST_TMP/local.ranges") ranges; samples: stored $stored_samples," \
	"local $local_samples x $copies = $((local_samples * copies))"
check "stored edge counts equal $copies local imports exactly, read at any collector ($n edges)" \
	bash -c "[ $n -gt 0 ] && for i in 1 2 3; do cmp -s '$TEST_TMP/local.edges' \"$TEST_TMP/collector.\$i.edges\" || exit 1; done"
check "stored range counts equal them exactly too" \
	bash -c "for i in 1 2 3; do cmp -s '$TEST_TMP/local.ranges' \"$TEST_TMP/collector.\$i.ranges\" || exit 1; done"
check "stored samples equal them" test "$stored_samples" = "$((local_samples * copies))"

if [ "$SHARDS" -gt 1 ]; then
	on_shard() { # K QUERY
		curl -sf "$(clickhouse_shard_url "$1")/?database=$database" --data-binary "$2"
	}
	# each build-id's rows, in every count and metadata table, on one shard:
	# the one FNV-1a of the build-id picks (collector/store/store_clickhouse.c)
	for k in $(seq 1 "$SHARDS"); do
		on_shard "$k" "SELECT DISTINCT build_id FROM (SELECT build_id FROM samples UNION ALL
			SELECT build_id FROM edges UNION ALL SELECT build_id FROM ranges UNION ALL
			SELECT build_id FROM ips UNION ALL SELECT build_id FROM functions UNION ALL
			SELECT build_id FROM paths) ORDER BY build_id" | sed "s/$/ $k/"
	done >"$TEST_TMP/placement"
	echo "# build-ids by shard: $(awk '{print $2 ":" substr($1, 1, 8)}' "$TEST_TMP/placement" | xargs)"
	check "every binary's rows are on exactly one shard, the one its build-id hashes to" \
		python3 -c 'import sys
rows = [l.split() for l in open(sys.argv[1])]
n = int(sys.argv[2])
def shard(b):
    h = 1469598103934665603
    for c in b.encode():
        h = ((h ^ c) * 1099511628211) % 2**64
    return h % n + 1
ids = [b for b, _ in rows]
sys.exit(not rows or len(ids) != len(set(ids)) or any(shard(b) != int(k) for b, k in rows))' \
		"$TEST_TMP/placement" "$SHARDS"
	batches=$(for k in $(seq 1 "$SHARDS"); do on_shard "$k" "SELECT count() FROM (SELECT DISTINCT agent_id, sequence FROM batches)"; done | xargs)
	check "every shard holds every stored batch's row ($batches)" \
		bash -c '[ "$(tr " " "\n" <<<"$1" | sort -u | wc -l)" = 1 ] && [ "${1%% *}" -gt 0 ]' _ "$batches"
fi

# --- every collector answers the same about nodes and binaries (the live
# node turns silent meanwhile: compare until three answers in a row agree)
same_answers() { # PATH
	local until=$((SECONDS + 30))
	while [ "$SECONDS" -lt "$until" ]; do
		for i in 1 2 3; do curl -s "${url[$i]}$1" >"$TEST_TMP/answer.$i"; done
		cmp -s "$TEST_TMP/answer.1" "$TEST_TMP/answer.2" &&
			cmp -s "$TEST_TMP/answer.1" "$TEST_TMP/answer.3" && return 0
		sleep 0.5
	done
	diff "$TEST_TMP/answer.1" "$TEST_TMP/answer.2" | head -5 | sed 's/^/#   /'
	diff "$TEST_TMP/answer.1" "$TEST_TMP/answer.3" | head -5 | sed 's/^/#   /'
	return 1
}
check "/v1/nodes: the same answer from all three collectors" same_answers /v1/nodes
nodes=$(jq -r '[.nodes[].name] | join(" ")' "$TEST_TMP/answer.1")
echo "# nodes: $nodes"
want=$( (for i in $(seq 1 "$AGENTS"); do echo "replay-$i"; done
	echo dup-node
	[ "$(id -u)" -eq 0 ] && echo live-node) | sort | xargs)
check "  every agent's node, each reported once: $want" \
	test "$(jq -r '[.nodes[].name] | sort | join(" ")' "$TEST_TMP/answer.1")" = "$want"
check "/v1/binaries: the same answer from all three collectors" same_answers /v1/binaries
check "  listing the recording's binary" \
	bash -c 'jq -e --arg b "$1" ".binaries[] | select(.paths[] | endswith(\$b))" "$2" >/dev/null' \
	_ "$(basename "$bin")" "$TEST_TMP/answer.1"
build_id=$(jq -r '.profiles[0].build_id' "$TEST_TMP/local.json")
codes=$(for i in 1 2 3; do curl -s -o /dev/null -w '%{http_code} ' "${url[$i]}/v1/images/$build_id"; done)
check "the recording's binary, uploaded once by the agents, is kept for every collector ($codes)" \
	test "$codes" = "200 200 200 "
if [ -n "${sid:-}" ]; then
	check "/v1/sessions/$sid: the same answer from all three collectors still" \
		same_answers "/v1/sessions/$sid"
fi

if [ "$SHARDS" -gt 1 ]; then
	# a Distributed table that lacks a column its local tables have (one a
	# later version added) gets it when a collector starts
	ns_column() {
		curl -sf "$CLICKHOUSE_URL/" --data-binary "SELECT count() FROM system.columns WHERE
			database = '$database' AND table = 'ips_all' AND name = 'ns'"
	}
	curl -sf "$CLICKHOUSE_URL/?database=$database" --data-binary "ALTER TABLE ips_all DROP COLUMN ns"
	before=$(ns_column)
	start_replica 4 || not_ok "a fourth collector starts on the cluster"
	check "a collector starting adds a column missing from a Distributed table (columns named ns: $before, then $(ns_column))" \
		test "$before" = 0 -a "$(ns_column)" = 1
	stop_pid "${cpid[4]}"
fi
for i in 1 2 3; do stop_pid "${cpid[$i]}"; done
check "the collectors exited cleanly (collector 3: ASan+UBSan), no sanitizer report" \
	bash -c "! grep -E 'Sanitizer|runtime error' '$TEST_TMP/c1.log' '$TEST_TMP/c2.log' '$TEST_TMP/c3.log'"
clickhouse_stop
finish
