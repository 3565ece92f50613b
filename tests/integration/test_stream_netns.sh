#!/usr/bin/env bash
# Three agents in three network namespaces stream to one collector in a
# fourth; the link of one is cut (ip link down) for a while and restored.
# Afterwards the collector holds exactly three times the local import:
# nothing lost, nothing doubled. Needs root (network namespaces).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
	echo "# skipped: network namespaces need root and iproute2"
	finish
fi
perf="$FIXTURES/propeller_sample_1.perfdata1"
bin="$FIXTURES/propeller_sample_1.bin"
tag=$$
nsc=epc$tag
namespaces=("$nsc")
cleanup_ns() { for n in "${namespaces[@]}"; do ip netns del "$n" 2>/dev/null; done; }
trap '_cleanup; cleanup_ns' EXIT
ip netns add "$nsc" && ip -n "$nsc" link set lo up
for i in 1 2 3; do
	ns=epa$i-$tag
	namespaces+=("$ns")
	ip netns add "$ns"
	ip link add "vc$i-$tag" type veth peer name "va$i-$tag"
	ip link set "vc$i-$tag" netns "$nsc"
	ip link set "va$i-$tag" netns "$ns"
	ip -n "$nsc" addr add "10.201.$i.1/24" dev "vc$i-$tag"
	ip -n "$ns" addr add "10.201.$i.2/24" dev "va$i-$tag"
	ip -n "$nsc" link set "vc$i-$tag" up
	ip -n "$ns" link set "va$i-$tag" up
	ip -n "$ns" link set lo up
done
check "four network namespaces with veth links" test "$(ip netns list | grep -c "$tag")" -eq 4

# the collector listens inside its namespace only
ip netns exec "$nsc" "$EDGEPROF" collector --store "sqlite:$TEST_TMP/store.db" \
	--listen 0.0.0.0:7070 --commit-ms 100 --port-file "$TEST_TMP/c.port" >"$TEST_TMP/c.log" 2>&1 &
cpid=$!
track_pid "$cpid"
for _ in $(seq 1 100); do [ -s "$TEST_TMP/c.port" ] && break; sleep 0.1; done
check "collector up in its namespace" test -s "$TEST_TMP/c.port"

agents=()
for i in 1 2 3; do
	ip netns exec "epa$i-$tag" "$EDGEPROF" agent --replay "$perf" --binary "$bin" \
		--batch-samples 40 --collector "http://10.201.$i.1:7070" --node "node$i" \
		--spool "$TEST_TMP/spool$i" --retry-max-ms 300 --flush-timeout 120 \
		>"$TEST_TMP/agent$i.log" 2>&1 &
	agents+=($!)
	track_pid "$!"
done
sleep 1.5
ip -n "epa2-$tag" link set "va2-$tag" down
echo "# link of agent 2 down"
# longer than the agent's 10 s stall limit: the request in flight is given
# up and resent, and new connections fail until the link is back
sleep 12
check "agent 2 has batches waiting while its link is down" \
	test -n "$(ls -A "$TEST_TMP/spool2")"
ip -n "epa2-$tag" link set "va2-$tag" up
echo "# link of agent 2 up"
for i in 1 2 3; do
	wait "${agents[$((i - 1))]}"
	check "agent $i: every batch acknowledged (exit 0)" test $? -eq 0
done
grep -h "streamed" "$TEST_TMP"/agent*.log | sed 's/^/# /'
check "agent 2 saw failed sends during the cut" \
	grep -Eq "[1-9][0-9]* send attempts failed" "$TEST_TMP/agent2.log"

"$EDGEPROF" import "$perf" --binary "$bin" -o "$TEST_TMP/local.prof" 2>/dev/null
"$EDGEPROF" export "$TEST_TMP/local.prof" --format json | edge_table |
	awk '{ $5 = $5 * 3; print }' >"$TEST_TMP/expected"
ip netns exec "$nsc" curl -sf "http://127.0.0.1:7070/v1/profile?format=json" | edge_table \
	>"$TEST_TMP/got"
check "collector holds exactly 3x the local import ($(wc -l <"$TEST_TMP/expected") edges)" \
	bash -c "[ -s '$TEST_TMP/expected' ] && cmp -s '$TEST_TMP/expected' '$TEST_TMP/got'"
ip netns exec "$nsc" curl -sf "http://127.0.0.1:7070/v1/binaries" >"$TEST_TMP/binaries.json"
check "the binary is listed once with 3x the samples" \
	test "$(jq '.binaries | length' "$TEST_TMP/binaries.json")" -eq 1 -a \
	"$(jq '.binaries[0].samples' "$TEST_TMP/binaries.json")" -eq \
	"$(("$("$EDGEPROF" export "$TEST_TMP/local.prof" --format json | jq '[.profiles[].samples] | add')" * 3))"
stop_pid "$cpid"
finish
