#!/usr/bin/env bash
# The collector fetches binaries' code it was not sent from debuginfod
# (--debuginfod URL, Debian's libdebuginfod client), tested against Debian's
# debuginfod server on loopback over a directory holding the fixture's
# binary: the function page draws its CFG, and the code is kept afterwards.
# A build-id no server has: the page says the code is missing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

if ! command -v debuginfod >/dev/null; then
	not_ok "debuginfod is installed (scripts/setup-deps.sh)"
	finish
fi
ID=572ac72487ae1966
mkdir -p "$TEST_TMP/bins"
cp "$FIXTURES/propeller_sample_1.bin" "$TEST_TMP/bins/"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
debuginfod -F "$TEST_TMP/bins" -p "$port" -d "$TEST_TMP/debuginfod.sqlite" -t 1 \
	>"$TEST_TMP/debuginfod.log" 2>&1 &
dpid=$!
track_pid "$dpid"
served() {
	for _ in $(seq 600); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/buildid/$ID/executable")" = 200 ] && return 0
		sleep 0.1
	done
	return 1
}
check "debuginfod on loopback serves the fixture's binary by build-id" served

COLLECTOR_BIN=$EDGEPROF_ASAN
export DEBUGINFOD_CACHE_PATH=$TEST_TMP/cache
start_collector d --store "sqlite:$TEST_TMP/d.db" --listen 127.0.0.1:0 \
	--debuginfod "http://127.0.0.1:$port" || finish
URL=http://127.0.0.1:$COLLECTOR_PORT
# the agent sends no code (--upload-max-mib 0): only debuginfod has it
"$EDGEPROF" agent --replay "$FIXTURES/propeller_sample_1.perfdata1" --binary "$FIXTURES/propeller_sample_1.bin" \
	--upload-max-mib 0 --collector "$URL" --spool "$TEST_TMP/spool" >"$TEST_TMP/agent.log" 2>&1
check "before any page, the collector has no code for it" \
	test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/images/$ID")" = 404
check "the function page draws main's CFG from debuginfod's copy (14 blocks)" \
	grep -q 'data-blocks="14"' <(curl -s "$URL/function?build_id=$ID&addr=0x1920")
check "the code is kept afterwards" \
	test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/images/$ID")" = 200
check "the collector says where the code came from" grep -q "binary $ID: code from debuginfod" "$TEST_TMP/d.log"

# a binary debuginfod does not have (the emulator's run of a program of ours,
# its code not sent): the page says so, twice (the miss is remembered)
cc -O1 -Wl,--build-id -o "$TEST_TMP/hot_cold" "$(dirname "$0")/../workloads/hot_cold.c"
"$EDGEPROF" record --emulate --upload-max-mib 0 --collector "$URL" --spool "$TEST_TMP/spool2" \
	-o "$TEST_TMP/hc.prof" -- "$TEST_TMP/hot_cold" 100000 >"$TEST_TMP/record.log" 2>&1
hid=$(readelf -n "$TEST_TMP/hot_cold" | awk '/Build ID/ {print $3}')
addr=0x$(nm "$TEST_TMP/hot_cold" | awk '$3 == "hot_loop" {print $1}')
for n in 1 2; do
	check "a build-id debuginfod lacks: the page says the code is missing ($n)" \
		grep -q 'code is not at the collector' <(curl -s "$URL/function?build_id=$hid&addr=$addr")
done
stop_pid "$COLLECTOR_PID"
check "the ASan collector stayed clean" bash -c "! grep -q 'Sanitizer' '$TEST_TMP/d.log'"

# --- an agent's code is provisional (issue 32 item 7): a planted file sent
# by an agent (another binary's code under this build-id) is replaced by
# debuginfod's copy the first time a page needs it
plant=$(dirname "$0")/plant_code.py
mkdir -p "$TEST_TMP/planted"
python3 "$plant" "$FIXTURES/propeller_sample_1.bin" "$TEST_TMP/planted/propeller_sample_1.bin" 0x1920
start_collector r --store "sqlite:$TEST_TMP/r.db" --listen 127.0.0.1:0 \
	--debuginfod "http://127.0.0.1:$port" || finish
URL=http://127.0.0.1:$COLLECTOR_PORT
"$EDGEPROF" agent --replay "$FIXTURES/propeller_sample_1.perfdata1" \
	--binary "$TEST_TMP/planted/propeller_sample_1.bin" --collector "$URL" \
	--spool "$TEST_TMP/spool3" >"$TEST_TMP/agent3.log" 2>&1
check "an agent sent planted code: kept as provisional" \
	test "$(curl -s "$URL/v1/images/$ID")" = "$ID: kept, provisional"
check "the function page draws debuginfod's copy in its place (14 blocks, no int3)" \
	bash -c "curl -s '$URL/function?build_id=$ID&addr=0x1920' >'$TEST_TMP/r.html' &&
		 grep -q 'data-blocks=\"14\"' '$TEST_TMP/r.html' && ! grep -q int3 '$TEST_TMP/r.html'"
check "  kept as trusted from now on" test "$(curl -s "$URL/v1/images/$ID")" = "$ID: kept, trusted"
stop_pid "$COLLECTOR_PID"

# --- issue 32 item 8: a cache planted where the collector looks by default,
# $TMPDIR/edgeprof-debuginfod-UID, holding another binary's code under this
# build-id. libdebuginfod answers from its cache without asking a server, and
# the collector used the directory whoever owned it: the planted file was
# stored as the binary's code. Open to all (0777), then another owner's
# (nobody's, when this runs as root): refused with one line, a fresh private
# directory is used (and removed at the end), the planted file is not read.
unset DEBUGINFOD_CACHE_PATH
mkdir -p "$TEST_TMP/tmp"
cache=$TEST_TMP/tmp/edgeprof-debuginfod-$(id -u)
mkdir -p "$cache/$ID"
python3 "$plant" "$FIXTURES/propeller_sample_1.bin" "$cache/$ID/executable" 0x1920
sum=$(md5sum <"$cache/$ID/executable")
for how in open nobody; do
	if [ "$how" = open ]; then
		chmod -R 0777 "$cache"
	elif [ "$(id -u)" -eq 0 ]; then
		chmod -R 0700 "$cache"
		chown -R nobody "$cache"
	else
		echo "# not root: no cache of another owner"
		continue
	fi
	TMPDIR=$TEST_TMP/tmp start_collector "p-$how" --store "sqlite:$TEST_TMP/p-$how.db" \
		--listen 127.0.0.1:0 --debuginfod "http://127.0.0.1:$port" || finish
	URL=http://127.0.0.1:$COLLECTOR_PORT
	"$EDGEPROF" agent --replay "$FIXTURES/propeller_sample_1.perfdata1" --binary "$FIXTURES/propeller_sample_1.bin" \
		--upload-max-mib 0 --collector "$URL" --spool "$TEST_TMP/spool-$how" >"$TEST_TMP/agent-$how.log" 2>&1
	check "planted cache ($how): refused in one line naming it" \
		grep -q "debuginfod cache $cache refused (.*): using a fresh private directory" \
		"$TEST_TMP/p-$how.log"
	check "  the function page draws the server's copy, not the planted file (14 blocks, no int3)" \
		bash -c "curl -s '$URL/function?build_id=$ID&addr=0x1920' >'$TEST_TMP/p-$how.html' &&
			 grep -q 'data-blocks=\"14\"' '$TEST_TMP/p-$how.html' && ! grep -q int3 '$TEST_TMP/p-$how.html'"
	check "  counted (edgeprof_debuginfod_cache_refused 1)" \
		test "$(metric "$URL" edgeprof_debuginfod_cache_refused)" = 1
	stop_pid "$COLLECTOR_PID"
	check "  the planted directory is left as it was, the fresh one removed" \
		bash -c "[ \"\$(md5sum <'$cache/$ID/executable')\" = '$sum' ] &&
			 ! ls -d '$cache'-* 2>/dev/null | grep -q ."
done
check "the ASan collectors stayed clean" bash -c "! grep -q 'Sanitizer' '$TEST_TMP'/r.log '$TEST_TMP'/p-*.log"
finish
