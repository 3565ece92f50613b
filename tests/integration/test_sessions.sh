#!/usr/bin/env bash
# On-demand sessions on this PMU-less VM (as root): a whole-machine agent
# streams its continuous profile; `edgeprof profile` asks the collector for a
# session on one container (a cgroup named the way podman names its own) or
# one pid; the agent samples only that target at a higher rate, and the
# session's profile holds only its program while the continuous profile is
# left exactly as the agent counted it. Errors (unknown container, silent
# node, old agent, duration too long) say what is wrong; a collector SIGKILLed
# mid-session and an agent restarted mid-session still end the session done.
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
	not_ok "sessions: no writable cgroup v2 hierarchy to make a container cgroup in"
	finish
fi
build_workload hot_cold
build_workload random_branches
"$TEST_TMP/hot_cold" 100000000000 >/dev/null &
outside=$!
track_pid "$outside"
"$TEST_TMP/random_branches" 100000000000 >/dev/null &
inside=$!
track_pid "$inside"
id=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
slice=$root/edgeprof-sess-$$.slice
ct=$slice/libpod-$id.scope
mkdir -p "$ct"
echo "$inside" >"$ct/cgroup.procs"
cleanup_cgroup() {
	echo "$inside" >"$root/cgroup.procs" 2>/dev/null
	rmdir "$ct" "$slice" 2>/dev/null
}

start_collector c --store "sqlite:$TEST_TMP/c.db" --listen 127.0.0.1:0 --max-session-s 60 \
	--session-pickup-s 60 --node-silent-s 30 || exit 1
port=$COLLECTOR_PORT
url="http://127.0.0.1:$port"
start_agent() { # NAME [BINARY]: a whole-machine agent streaming every second as node-a
	ASAN_OPTIONS=detect_leaks=1 "${2:-$EDGEPROF}" agent --interval 1 --retry-max-ms 1000 --collector "$url" --node node-a \
		--spool "$TEST_TMP/spool" -o "$TEST_TMP/$1.prof" 2>"$TEST_TMP/$1.err" &
	agent=$!
	track_pid "$agent"
}
wait_reporting() { # AGENT_ID (or any): until GET /v1/nodes shows node-a reporting
	local until=$((SECONDS + 30))
	while [ "$SECONDS" -lt "$until" ]; do
		curl -s "$url/v1/nodes" | jq -e --arg a "$1" \
			'.nodes[] | select(.name == "node-a" and .reporting and .sessions and
				($a == "any" or .agent_id == $a))' >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}
agent_id_of() { # NAME: its id, once its log says it (the log is made by the agent's shell)
	local until=$((SECONDS + 30)) id=
	while [ "$SECONDS" -lt "$until" ]; do
		id=$(sed -n 's/.*streaming to .* as agent \([0-9a-f]*\) on node.*/\1/p' "$TEST_TMP/$1.err" 2>/dev/null)
		[ -n "$id" ] && break
		sleep 0.1
	done
	echo "$id"
}
agent1_start=$(date +%s)
start_agent agent1
check "GET /v1/nodes: the agent's node reports, able to run sessions" wait_reporting any

"$EDGEPROF" profile --container "${id:0:12}" --duration 3 --collector "$url" \
	-o "$TEST_TMP/s1.prof" 2>"$TEST_TMP/s1.err"
check "profile --container: exits 0 once the session is done" test $? -eq 0
sid=$(sed -n 's/.*session \([0-9a-f]\{16\}\): done.*/\1/p' "$TEST_TMP/s1.err")
check "  and says it is done with its sample count" grep -Eq "session $sid: done on node node-a, [1-9][0-9]* samples" "$TEST_TMP/s1.err"
paths=$("$EDGEPROF" export "$TEST_TMP/s1.prof" --format json |
	jq -r '[.profiles[] | select(.samples > 0) | .path] | unique | join(" ")')
check "the session's profile holds only the container's program ($paths)" \
	test "$paths" = "$TEST_TMP/random_branches"
samples=$("$EDGEPROF" export "$TEST_TMP/s1.prof" --format json | jq .stats.samples)
# the continuous rate of the same program, from the agent's own file
cont_now=$("$EDGEPROF" export "$TEST_TMP/agent1.prof" --format json |
	jq --arg p "$TEST_TMP/random_branches" '[.profiles[] | select(.path == $p) | .samples] | add // 0')
elapsed=$(($(date +%s) - agent1_start))
echo "# session $sid: $samples samples in 3 s; continuous: $cont_now samples of the same program in $elapsed s"
check "the session samples its target more often than the continuous profile (>2x per second)" \
	test "$((samples * elapsed))" -gt "$((2 * cont_now * 3))"
main_p=$(sed -n 's/.*no branch-stack PMU.*every \([0-9]*\) +-.*/\1/p' "$TEST_TMP/agent1.err" | head -1)
sess_p=$(grep "session $sid: sampling" "$TEST_TMP/agent1.err" | sed -n 's/.*every \([0-9]*\) +-.*/\1/p')
check "  at a quarter of the agent's period ($sess_p ns vs $main_p ns)" \
	test "${main_p:-0}" -gt 0 -a "$((${main_p:-0} / 4 - ${sess_p:-0}))" -ge -1000 -a "$((${main_p:-0} / 4 - ${sess_p:-0}))" -le 1000
curl -s "$url/v1/binaries?session=$sid" >"$TEST_TMP/s1.bin.json"
check "its counts are labelled with the session, the container id and its cgroup" \
	test "$(jq -r '[.binaries[].labels[] | "\(.session_id) \(.container_id) \(.cgroup)"] | unique | join(",")' "$TEST_TMP/s1.bin.json")" = \
	"$sid $id /$(basename "$slice")/libpod-$id.scope"
curl -s "$url/v1/sessions/$sid" >"$TEST_TMP/s1.json"
check "GET /v1/sessions/ID: done, on node-a, with its samples" \
	test "$(jq -r '"\(.state) \(.node) \(.samples > 0)"' "$TEST_TMP/s1.json")" = "done node-a true"

"$EDGEPROF" profile --pid "$outside" --duration 2 --collector "$url" -o "$TEST_TMP/s2.json" \
	--format json 2>"$TEST_TMP/s2.err"
check "profile --pid: exits 0, export written" test $? -eq 0
check "  only the targeted process's program" \
	test "$(jq -r '[.profiles[] | select(.samples > 0) | .path] | unique | join(" ")' "$TEST_TMP/s2.json")" = "$TEST_TMP/hot_cold"

# --cycles: the session's target alone gets a cycles event (cpu-clock
# nanoseconds on a machine without one), the agent keeps running without
"$EDGEPROF" profile --pid "$outside" --duration 2 --cycles --collector "$url" \
	-o "$TEST_TMP/s5.json" --format json 2>"$TEST_TMP/s5.err"
check "profile --cycles: exits 0, export written" test $? -eq 0
sid5=$(sed -n 's/.*session \([0-9a-f]\{16\}\): done.*/\1/p' "$TEST_TMP/s5.err")
check "  the session records that it asked for cycles" \
	test "$(curl -s "$url/v1/sessions/$sid5" | jq .cycles)" = true
check "  the agent opened a cycles event for it and said so" \
	grep -q "session $sid5: sampling .*--cycles: " "$TEST_TMP/agent1.err"
hot_time=$(jq '[.profiles[].cpi.functions[]? | select(.name == "hot_loop") | (.ip_cycles // 0) + (.cycles // 0)] | add // 0' "$TEST_TMP/s5.json")
unit=$(jq -r '.config.cycles_unit' "$TEST_TMP/s5.json")
check "  its profile gives the target's hot function time ($hot_time $unit)" \
	test "${hot_time:-0}" -gt 0 -a -n "$unit"
check "  a session without --cycles has none" \
	test "$(jq '[.profiles[].ips[]? | select(.cycles > 0)] | length' "$TEST_TMP/s2.json")" = 0

# errors name the problem and exit 1
"$EDGEPROF" profile --container deadbeefdead00 --duration 2 --collector "$url" 2>"$TEST_TMP/e1.err"
check "unknown container: exit 1, the id and 'no such container' named" \
	bash -c "[ $? -eq 1 ] && grep -q 'failed: container deadbeefdead00 is on none of the 1 nodes' '$TEST_TMP/e1.err'"
"$EDGEPROF" profile --container "${id:0:12}" --node nosuch --duration 2 --collector "$url" 2>"$TEST_TMP/e2.err"
check "silent node: refused at once, the node named" \
	bash -c "[ $? -eq 1 ] && grep -q 'HTTP 409): node nosuch has not sent a batch' '$TEST_TMP/e2.err'"
"$EDGEPROF" profile --container "${id:0:12}" --duration 61 --collector "$url" 2>"$TEST_TMP/e3.err"
check "duration over the maximum: refused, the maximum named" \
	bash -c "[ $? -eq 1 ] && grep -q \"HTTP 400): duration 61 s is over this collector's maximum of 60 s\" '$TEST_TMP/e3.err'"
# a period no kernel would sample at: 1 (~2e9 samples/s per CPU), and -1
# (strtoull once made it 2^64-1)
for p in "1:period 1: " "-1:period '-1': not a number of events"; do
	want=${p#*:}
	p=${p%%:*}
	code=$(curl -s -o "$TEST_TMP/p.txt" -w '%{http_code}' -X POST \
		"$url/v1/sessions?container_id=${id:0:12}&duration_s=2&period=$p")
	echo "# period=$p: HTTP $code $(cat "$TEST_TMP/p.txt")"
	check "period=$p: refused (400), the period named" \
		bash -c '[ "$1" = 400 ] && grep -qF -- "$2" "$3"' _ "$code" "$want" "$TEST_TMP/p.txt"
done
"$EDGEPROF" agent --replay "$FIXTURES/propeller_sample_1.perfdata1" --binary "$FIXTURES/propeller_sample_1.bin" --collector "$url" \
	--node old-node --spool "$TEST_TMP/old-spool" 2>/dev/null
"$EDGEPROF" profile --container "${id:0:12}" --node old-node --duration 2 --collector "$url" 2>"$TEST_TMP/e4.err"
check "an agent that cannot run sessions: refused, 'too old' said" \
	bash -c "[ $? -eq 1 ] && grep -q 'the agent on node old-node (edgeprof .*) is too old' '$TEST_TMP/e4.err'"
"$EDGEPROF" profile --pod default/web --duration 2 --collector "$url" 2>"$TEST_TMP/e5.err"
check "--pod on an agent without API access: failed (not 'on no node'), and why" \
	bash -c "[ $? -eq 1 ] && grep -q 'failed: node .*: pod default/web: pod names need API access: this agent has no Kubernetes API' '$TEST_TMP/e5.err'"

# the collector is SIGKILLed while a session runs, and restarted on its port
new_session() { # ARGS: query; prints the session id
	curl -s -X POST "$url/v1/sessions?$1" | jq -r .id
}
state_of() { curl -s "$url/v1/sessions/$1" | jq -r .state 2>/dev/null; }
wait_state() { # ID STATE SECONDS (of wall time: a loaded machine slows the polls too)
	local until=$((SECONDS + $3))
	while [ "$SECONDS" -lt "$until" ]; do
		[ "$(state_of "$1")" = "$2" ] && return 0
		sleep 0.2
	done
	[ "$(state_of "$1")" = "$2" ]
}
s3=$(new_session "container_id=${id:0:12}&duration_s=15")
check "POST /v1/sessions answers with a session id" test -n "$s3" -a "$s3" != null
check "  which the agent takes (running)" wait_state "$s3" running 30
kill -9 "$COLLECTOR_PID"
wait "$COLLECTOR_PID" 2>/dev/null
sleep 2
# the restarted collector and agent are the ASan+UBSan builds: the session
# code runs under them (resumed sessions, hand-over, shutdown)
ASAN_OPTIONS=detect_leaks=1 COLLECTOR_BIN=$EDGEPROF_ASAN \
	start_collector c --store "sqlite:$TEST_TMP/c.db" --listen "127.0.0.1:$port" --max-session-s 60 \
	--session-pickup-s 60 --node-silent-s 30 || exit 1
check "collector SIGKILLed and restarted mid-session: the session still ends done" \
	wait_state "$s3" done 60
wait_reporting any
s3samples=$("$EDGEPROF" export --collector "$url" --session "$s3" --format json | jq .stats.samples)
check "  with its counts stored ($s3samples samples)" test "${s3samples:-0}" -gt 0

# the agent is stopped mid-session; the next agent on the node runs the rest
s4=$(new_session "container_id=${id:0:12}&duration_s=40")
wait_state "$s4" running 30
first_agent=$(curl -s "$url/v1/sessions/$s4" | jq -r .agent_id)
echo "# session $s4 is $(state_of "$s4") on agent $first_agent; stopping that agent"
stop_pid "$agent"
check "  the stopping agent leaves the session running" grep -q "session $s4: left running for the next agent" "$TEST_TMP/agent1.err"
start_agent agent2 "$EDGEPROF_ASAN"
wait_reporting "$(agent_id_of agent2)"
check "agent restarted mid-session: the new agent finishes it (done)" wait_state "$s4" done 60
check "  run by the new agent" \
	bash -c "[ \"\$(curl -s '$url/v1/sessions/$s4' | jq -r .agent_id)\" != '$first_agent' ]"
if grep -q "session $s4: resumed by agent" "$TEST_TMP/c.log"; then
	ok "  the collector logged the hand-over"
else
	not_ok "  the collector logged the hand-over"
	sed 's/^/#   collector: /' "$TEST_TMP/c.log"
	sed 's/^/#   agent2: /' "$TEST_TMP/agent2.err"
	grep session "$TEST_TMP/agent1.err" | sed 's/^/#   agent1: /'
fi

# the continuous profile is exactly what the agents counted: no session's
# counts in it, and the refused sessions changed nothing
stop_pid "$agent"
# by build-id: tests running beside this one build the same programs (the
# same build-ids) in their own directories, and the whole-machine agents
# sample those too, so the path a build-id is listed under is whichever was
# seen first
ids=$(for f in "$TEST_TMP"/*; do
	[ -f "$f" ] && [ -x "$f" ] && readelf -n "$f" 2>/dev/null | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p'
done | sort -u | jq -R . | jq -sc .)
samples_of_ids='[.profiles[] | select(.build_id as $b | $ids | index($b)) | .samples] | add'
cont=$("$EDGEPROF" export --collector "$url" --format json 2>"$TEST_TMP/cont.err" |
	jq --argjson ids "$ids" "$samples_of_ids")
local_sum=$(for a in agent1 agent2; do "$EDGEPROF" export "$TEST_TMP/$a.prof" --format json |
	jq --argjson ids "$ids" "$samples_of_ids"; done |
	awk '{s += $1} END {print s}')
echo "# continuous samples of the test's programs: collector $cont, agents' own files $local_sum"
if [ "${cont:-x}" = "${local_sum:-y}" ]; then
	ok "the continuous profile equals the agents' own counts (no session counts in it)"
else
	not_ok "the continuous profile equals the agents' own counts (no session counts in it)"
	# what the agents and the collector said of batches and sessions
	grep -hiE 'warn|error|refus|drop|lost|spool|session' "$TEST_TMP/agent1.err" "$TEST_TMP/agent2.err" |
		sed 's/^/#   agents: /' | tail -40
	grep -iE 'warn|error|refus|drop' "$TEST_TMP/c.log" | sed 's/^/#   collector: /' | tail -20
fi
sed 's/^/# /' "$TEST_TMP/cont.err"
stop_pid "$COLLECTOR_PID"
check "the agents and the collector exited cleanly, no sanitizer report or error line" \
	bash -c "! grep -E 'error:|Sanitizer|runtime error' '$TEST_TMP/agent1.err' '$TEST_TMP/agent2.err' '$TEST_TMP/c.log'"
cleanup_cgroup
finish
