#!/usr/bin/env bash
# -o replaces its target by renaming a new file over it: every command that
# writes a profile that way (import, agent, record, profile), and every
# other file written (export -o, record --exact-out, --exact-profile and
# --perf-data, collector --port-file), refuses a target that is not a
# regular file (a FIFO, a device node, a symbolic link), says so in one line
# naming it, and leaves it as it was: export -o once followed a symbolic link
# and blocked on a FIFO. The device node is made here (mknod, as root),
# never a real one.
source "$(dirname "$0")/lib.sh"

fx=$FIXTURES
prop=$fx/propeller_sample_1.perfdata1
bin=$fx/propeller_sample_1.bin
here=$(dirname "$0")
cc -O1 -o "$TEST_TMP/hot_cold" "$here/../workloads/hot_cold.c"

"$EDGEPROF" import "$prop" --binary "$bin" -o "$TEST_TMP/good.prof" 2>/dev/null
mkfifo "$TEST_TMP/fifo"
echo keep >"$TEST_TMP/real.prof"
ln -s "$TEST_TMP/real.prof" "$TEST_TMP/link.prof"
targets=("fifo:p:a FIFO" "link.prof:L:a symbolic link")
if mknod "$TEST_TMP/null" c 1 3 2>/dev/null; then
	targets+=("null:c:a character device")
else
	echo "# no mknod here: the device node case is skipped"
fi

# refused CMD_NAME TARGET TYPE_TEST WHAT CMD...: CMD fails with one line
# naming TARGET and what it is, and TARGET keeps its type
refused() {
	local name=$1 target=$2 type=$3 what=$4
	shift 4
	"$@" >/dev/null 2>"$TEST_TMP/err"
	local rc=$?
	if [ "$rc" -eq 0 ] || [ "$rc" -gt 2 ]; then
		not_ok "$name $what: exit code $rc"
		tail -3 "$TEST_TMP/err"
	elif ! grep -q "^edgeprof: error: \([a-z]* -*[a-z-]*: \)\?$target: is $what.*not a regular file: refusing to replace it$" \
		"$TEST_TMP/err"; then
		not_ok "$name $what: no one-line refusal naming it"
		tail -3 "$TEST_TMP/err"
	elif ! test "-$type" "$target"; then
		not_ok "$name $what: the target was replaced"
	else
		ok "$name $what: refused, left alone"
	fi
}

for t in "${targets[@]}"; do
	IFS=: read -r file type what <<<"$t"
	target=$TEST_TMP/$file
	refused "import -o" "$target" "$type" "$what" \
		"$EDGEPROF" import "$prop" --binary "$bin" -o "$target"
	if [ "$(id -u)" -eq 0 ]; then
		refused "agent -o" "$target" "$type" "$what" \
			"$EDGEPROF" agent --pid $$ --duration 1 -o "$target"
	fi
	refused "record -o" "$target" "$type" "$what" \
		"$EDGEPROF" record --emulate -o "$target" -- "$TEST_TMP/hot_cold" 1000
	for opt in --exact-out --exact-profile --perf-data; do
		refused "record $opt" "$target" "$type" "$what" "$EDGEPROF" record --emulate \
			-o "$TEST_TMP/r.prof" "$opt" "$target" -- "$TEST_TMP/hot_cold" 1000
	done
	refused "export -o" "$target" "$type" "$what" \
		"$EDGEPROF" export "$TEST_TMP/good.prof" --format json -o "$target"
	refused "profile -o" "$target" "$type" "$what" "$EDGEPROF" profile --pid 1 --duration 1 \
		--collector http://127.0.0.1:9 -o "$target" --format fdata
	refused "collector --port-file" "$target" "$type" "$what" \
		"$EDGEPROF" collector --store "sqlite:$TEST_TMP/c.db" --listen 127.0.0.1:0 \
		--port-file "$target"
done
check "the file behind the symbolic link is unchanged" test "$(cat "$TEST_TMP/real.prof")" = keep

# export -o, --exact-out and --perf-data replace a regular file whole (a new
# file renamed over it), and leave nothing else behind
echo old >"$TEST_TMP/out.json"
"$EDGEPROF" export "$TEST_TMP/good.prof" --format json -o "$TEST_TMP/out.json"
check "export -o over a file: replaced by the export" \
	bash -c "jq -e '.profiles | length > 0' '$TEST_TMP/out.json' >/dev/null"
"$EDGEPROF" record --emulate -o "$TEST_TMP/r.prof" --exact-out "$TEST_TMP/exact.json" \
	--perf-data "$TEST_TMP/r.data" -- "$TEST_TMP/hot_cold" 1000 >/dev/null 2>&1
check "record --exact-out and --perf-data written" \
	test -s "$TEST_TMP/exact.json" -a -s "$TEST_TMP/r.data"
check "  perf.data readable" "$EDGEPROF" dump "$TEST_TMP/r.data" >/dev/null 2>&1
check "no temporary file left beside them" test -z "$(ls "$TEST_TMP" | grep '\.tmp\.')"

# An -o that cannot be written (its directory missing, or a file where a
# directory should be) is refused at start-up, before any sampling, reading
# or running: the agent used to find out at its first write, an interval of
# samples later, and say so again every interval.
# early NAME TARGET MARK CMD...: CMD fails with one line naming TARGET and
# logs nothing matching MARK (what it would print once it had started)
early() {
	local name=$1 target=$2 mark=$3
	shift 3
	"$@" >/dev/null 2>"$TEST_TMP/err"
	local rc=$?
	if [ "$rc" -eq 0 ] || [ "$rc" -gt 2 ]; then
		not_ok "$name: exit code $rc"
		tail -3 "$TEST_TMP/err"
	elif ! grep -q "^edgeprof: error: $target: cannot write the profile there: " "$TEST_TMP/err"; then
		not_ok "$name: no one-line refusal naming it"
		tail -3 "$TEST_TMP/err"
	elif grep -qE "$mark" "$TEST_TMP/err"; then
		not_ok "$name: refused only after it had started"
		grep -E "$mark" "$TEST_TMP/err" | head -2
	else
		ok "$name: refused at start-up"
	fi
}
for target in "$TEST_TMP/no-such-dir/a.prof" "$TEST_TMP/real.prof/a.prof"; do
	what=${target#"$TEST_TMP"/}
	if [ "$(id -u)" -eq 0 ]; then
		early "agent -o $what" "$target" 'sampling IPs|branch stacks on' \
			"$EDGEPROF" agent --pid $$ --duration 2 -o "$target"
	fi
	early "agent --replay -o $what" "$target" 'samples' \
		"$EDGEPROF" agent --replay "$prop" --binary "$bin" -o "$target"
	early "import -o $what" "$target" 'samples' \
		"$EDGEPROF" import "$prop" --binary "$bin" -o "$target"
	rm -f "$TEST_TMP/ran"
	early "record -o $what" "$target" 'samples|ran' \
		"$EDGEPROF" record --emulate -o "$target" -- /usr/bin/touch "$TEST_TMP/ran"
	check "record -o $what: the program was not run" test ! -e "$TEST_TMP/ran"
	# no collector listens there: refused before asking one
	early "profile -o $what" "$target" 'collector|session' \
		"$EDGEPROF" profile --pid 1 --duration 1 --collector http://127.0.0.1:9 -o "$target"
done
finish
