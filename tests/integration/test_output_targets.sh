#!/usr/bin/env bash
# -o replaces its target by renaming a new file over it: every command that
# writes a profile that way (import, agent, record) refuses a target that is
# not a regular file (a FIFO, a device node, a symbolic link), says so in one
# line naming it, and leaves it as it was. The device node is made here
# (mknod, as root), never a real one.
source "$(dirname "$0")/lib.sh"

fx=$FIXTURES
prop=$fx/propeller_sample_1.perfdata1
bin=$fx/propeller_sample_1.bin
here=$(dirname "$0")
cc -O1 -o "$TEST_TMP/hot_cold" "$here/../workloads/hot_cold.c"

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
		not_ok "$name -o $what: exit code $rc"
		tail -3 "$TEST_TMP/err"
	elif ! grep -q "^edgeprof: error: $target: is $what.*not a regular file: refusing to replace it$" \
		"$TEST_TMP/err"; then
		not_ok "$name -o $what: no one-line refusal naming it"
		tail -3 "$TEST_TMP/err"
	elif ! test "-$type" "$target"; then
		not_ok "$name -o $what: the target was replaced"
	else
		ok "$name -o $what: refused, left alone"
	fi
}

for t in "${targets[@]}"; do
	IFS=: read -r file type what <<<"$t"
	target=$TEST_TMP/$file
	refused import "$target" "$type" "$what" \
		"$EDGEPROF" import "$prop" --binary "$bin" -o "$target"
	if [ "$(id -u)" -eq 0 ]; then
		refused agent "$target" "$type" "$what" \
			"$EDGEPROF" agent --pid $$ --duration 1 -o "$target"
	fi
	refused record "$target" "$type" "$what" \
		"$EDGEPROF" record --emulate -o "$target" -- "$TEST_TMP/hot_cold" 1000
done
check "the file behind the symbolic link is unchanged" test "$(cat "$TEST_TMP/real.prof")" = keep
finish
