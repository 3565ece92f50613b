#!/usr/bin/env bash
# A FIFO (or any other file that is not a regular one) given as an input is
# refused in one line naming it, at once: open() of a FIFO with no writer
# blocks forever, so `import FIFO`, `--binary FIFO`, a token file, and the
# agent's /proc/PID/root/PATH fallback used to hang there, and `report FIFO`,
# `export -o FIFO` and the TLS files still did. Every file option of every
# command is tried, found in the commands' own usage (an option whose value
# is F, FILE, PROFILE, OUT, DIR or PERF.DATA), so a new one cannot be
# missed; so is each command's file operand. `timeout` only turns a hang
# into a failure; every run here ends by itself at once.
source "$(dirname "$0")/lib.sh"

fx=$FIXTURES
prop=$fx/propeller_sample_1.perfdata1
here=$(dirname "$0")
fifo=$TEST_TMP/in.fifo
mkfifo "$fifo"

# refused NAME CMD...: CMD ends (no hang) with exit 1 or 2 and one error line
# naming the FIFO and what it is
refused() {
	local name=$1
	shift
	timeout 30 "$@" >/dev/null 2>"$TEST_TMP/err" </dev/null
	local rc=$?
	if [ "$rc" -eq 124 ]; then
		not_ok "$name: hung (killed after 30 s)"
	elif [ "$rc" -ne 1 ] && [ "$rc" -ne 2 ]; then
		not_ok "$name: exit code $rc"
		tail -3 "$TEST_TMP/err"
	elif ! grep -q "^edgeprof: error: .*$fifo: is a FIFO, not a \(regular file\|directory\)" \
		"$TEST_TMP/err"; then
		not_ok "$name: no one-line refusal naming the FIFO"
		tail -3 "$TEST_TMP/err"
	else
		ok "$name: refused at once"
	fi
}
refused "import --binary FIFO (with a recording)" "$EDGEPROF" import "$prop" --binary "$fifo"
refused "agent --replay FIFO -o" "$EDGEPROF" agent --replay "$fifo" -o "$TEST_TMP/r.prof"
refused "export --collector --token-file FIFO" "$EDGEPROF" export --collector http://127.0.0.1:9 \
	--token-file "$fifo" --build-id ab --format json

# every command edgeprof lists, every file option its usage names
commands=$("$EDGEPROF" --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
cases=0
for cmd in $commands; do
	[ "$cmd" = version ] && continue
	"$EDGEPROF" "$cmd" --help >"$TEST_TMP/usage" 2>&1
	for opt in $(grep -oE -- '(--[a-z0-9-]+|-o) (F|FILE|PROFILE|OUT|DIR|PERF\.DATA)\b' \
		"$TEST_TMP/usage" | cut -d' ' -f1 | sort -u); do
		refused "$cmd $opt FIFO" "$EDGEPROF" "$cmd" "$opt" "$fifo"
		cases=$((cases + 1))
	done
	# the file operand of its first usage line, with what that line requires
	# (options outside [...]: a choice's first word, a URL nothing answers)
	line=$(sed -n '1s/^usage: edgeprof [a-z]* //p' "$TEST_TMP/usage")
	operand=${line%% *}
	operand=${operand%...}
	case $operand in PROFILE | PERF.DATA | BINARY) ;; *) continue ;; esac
	while [[ "$line" == *"["* ]]; do line=$(sed 's/\[[^][]*\]//g' <<<"$line"); done
	extra=()
	for word in ${line#"$operand"}; do
		case $word in
		...) ;;
		--*) extra+=("$word") ;;
		URL*) extra+=(http://127.0.0.1:9) ;;
		*) extra+=("${word%%|*}") ;;
		esac
	done
	refused "$cmd FIFO${extra[*]:+ ${extra[*]}}" "$EDGEPROF" "$cmd" "$fifo" "${extra[@]}"
	cases=$((cases + 1))
done
check "the usages named 30 file options and operands or more ($cases)" test "$cases" -ge 30
# the program record runs: QEMU would block opening it
chmod +x "$fifo"
refused "record -- FIFO" "$EDGEPROF" record --emulate -o "$TEST_TMP/r.prof" -- "$fifo"
chmod -x "$fifo"
# --symfs DIR holding a FIFO where the recording names its binary: not
# waited on, counted as code not found
mkdir -p "$TEST_TMP/symfs/$(dirname "$(strings "$prop" | grep -m1 '^/build/.*propeller_sample_1.bin.gen$')")"
mkfifo "$TEST_TMP/symfs/$(strings "$prop" | grep -m1 '^/build/.*propeller_sample_1.bin.gen$')"
timeout 30 "$EDGEPROF" import "$prop" --symfs "$TEST_TMP/symfs" >/dev/null 2>"$TEST_TMP/err"
rc=$?
check "import --symfs DIR with a FIFO at the binary's path: no hang (exit $rc)" \
	test "$rc" -ne 124
check "  the FIFO named" grep -q "propeller_sample_1.bin.gen: is a FIFO, not a regular file" \
	"$TEST_TMP/err"

# the collector's SQLite store: SQLite opened a FIFO and said only "disk I/O
# error" at its first read
mkfifo "$TEST_TMP/store.fifo"
timeout 60 "$EDGEPROF" collector --store "sqlite:$TEST_TMP/store.fifo" --listen 127.0.0.1:0 \
	2>"$TEST_TMP/err"
rc=$?
check "collector --store sqlite:FIFO: refused at once, exit $rc" test "$rc" -ne 0 -a "$rc" -ne 124
check "  the FIFO named" grep -q "store.fifo: is a FIFO, not a regular file" "$TEST_TMP/err"

if [ "$(id -u)" -ne 0 ]; then
	echo "# skipped the agent's case: live collection needs root"
	finish
fi
# The agent's fallback: without CAP_SYS_ADMIN (and CAP_CHECKPOINT_RESTORE)
# it cannot open /proc/PID/map_files/ and opens /proc/PID/root/PATH, PATH as
# /proc/PID/maps names it. A chrooted process's maps name its binary from
# the host's root (ROOT/bin/spin), so the agent opens ROOT/ROOT/bin/spin,
# where a FIFO waits: a process can put anything at the path the agent opens.
root=$TEST_TMP/root
mkdir -p "$root/bin" "$root$root/bin"
cc -static -O1 -o "$root/bin/spin" "$here/../workloads/hot_cold.c"
mkfifo "$root$root/bin/spin"
chroot "$root" /bin/spin 100000000000 >/dev/null &
spin=$!
track_pid "$spin"
timeout 120 setpriv --bounding-set -sys_admin,-checkpoint_restore --inh-caps=-all \
	"$EDGEPROF" agent --pid "$spin" --duration 2 -o "$TEST_TMP/a.prof" 2>"$TEST_TMP/agent.err"
rc=$?
check "agent, a FIFO at /proc/PID/root/PATH: no hang, exit 0 (exit $rc)" test "$rc" -eq 0
check "agent, a FIFO at /proc/PID/root/PATH: one line names it" \
	grep -q "/proc/$spin/root$root/bin/spin: is a FIFO, not a regular file" "$TEST_TMP/agent.err"
samples=$("$EDGEPROF" export "$TEST_TMP/a.prof" --format json | jq .stats.samples)
check "agent, a FIFO at /proc/PID/root/PATH: the process is still sampled (${samples:-0})" \
	test "${samples:-0}" -gt 100
finish
