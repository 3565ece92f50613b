#!/usr/bin/env bash
# Runs every test: the cmocka unit tests (normal and ASan+UBSan builds) and the
# integration scripts, then prints one closing line "N passed, N failed".
#
# Suites run side by side, EDGEPROF_TEST_JOBS at a time (default: the CPUs
# online). A script whose
# header has the line "# tests/run.sh: alone" changes what the whole machine
# sees (CPU hotplug) and runs after the others, by itself; suites with the
# same "# tests/run.sh: group NAME" line run one at a time. Each suite's
# output is printed whole when it ends, then a table of the slowest suites.
# EDGEPROF_TEST_ONLY=REGEX runs the suites whose names match.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
jobs=${EDGEPROF_TEST_JOBS:-$(nproc)}
only=${EDGEPROF_TEST_ONLY:-}
passed=0
failed=0
failures=()

log_dir=$(mktemp -d)
running=()
cleanup() {
	for p in "${running[@]:-}"; do [ -n "$p" ] && kill -- -"$p" 2>/dev/null; done
	rm -rf "$log_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export EDGEPROF="$PWD/$build/edgeprof"
export EDGEPROF_ASAN="$PWD/$build/edgeprof-asan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1

# suites: "kind name command..." lines, the longest scripts first so the
# long ones do not start last (a script's length stands for its run time)
suites=()
for flavour in rel asan; do
	for t in "$build/$flavour/tests/"test_*; do
		[ -x "$t" ] && [[ "$t" != *.d ]] || continue
		suites+=("cmocka $flavour/$(basename "$t") $t")
	done
done
alone=()
while read -r _ s; do
	if grep -q '^# tests/run.sh: alone' "$s"; then
		alone+=("tap $s bash $s")
	else
		suites+=("tap $s bash $s")
	fi
done < <(for s in tests/integration/test_*.sh; do [ -f "$s" ] && echo "$(wc -c <"$s") $s"; done | sort -rn)
if [ -n "$only" ]; then
	keep() { local out=() x; for x in "$@"; do [[ "$(cut -d' ' -f2 <<<"$x")" =~ $only ]] && out+=("$x"); done; printf '%s\n' "${out[@]}"; }
	mapfile -t suites < <(keep "${suites[@]}")
	mapfile -t alone < <(keep "${alone[@]:-}")
	[ -n "${suites[*]}" ] || suites=()
	[ -n "${alone[*]}" ] || alone=()
fi

# count KIND NAME LOG RC: adds a finished suite's passes and failures
count() {
	local kind=$1 name=$2 out=$3 rc=$4 p f
	if [ "$kind" = cmocka ]; then
		p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
		f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
	else
		p=$(grep -c '^ok ' "$out")
		f=$(grep -c '^not ok ' "$out")
	fi
	p=${p:-0}
	f=${f:-0}
	# crashed (sanitizer report, signal) or exited non-zero before counting
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	passed=$((passed + p))
	failed=$((failed + f))
	[ "$f" -ne 0 ] && failures+=("$name")
}

declare -A started kind_of name_of log_of
times=()
nlaunched=0
# reap: waits for one running suite to end, prints and counts it
reap() {
	local pid rc i
	wait -n -p pid "${running[@]}"
	rc=$?
	local log=${log_of[$pid]}
	cat "$log"
	local secs=$((SECONDS - started[$pid]))
	echo "# $(printf '%4d' "$secs") s  ${name_of[$pid]}"
	times+=("$secs ${name_of[$pid]}")
	count "${kind_of[$pid]}" "${name_of[$pid]}" "$log" "$rc"
	local g=${group_of[${name_of[$pid]}]:-}
	[ -n "$g" ] && unset 'busy[$g]'
	for i in "${!running[@]}"; do [ "${running[$i]}" = "$pid" ] && unset 'running[i]'; done
	running=("${running[@]}")
}
# launch "KIND NAME CMD...": starts a suite in a process group of its own
launch() {
	local kind name
	read -r kind name _ <<<"$1"
	nlaunched=$((nlaunched + 1))
	local log=$log_dir/$nlaunched.log
	# shellcheck disable=SC2086
	setsid ${1#* * } >"$log" 2>&1 </dev/null &
	local pid=$!
	log_of[$pid]=$log
	running+=("$pid")
	started[$pid]=$SECONDS
	kind_of[$pid]=$kind
	name_of[$pid]=$name
}

# group_of SUITE: the group named by the script's "# tests/run.sh: group NAME"
# line: suites of one group never run together (each ClickHouse suite starts
# servers that want most of a 2-core machine)
declare -A group_of busy
for s in "${suites[@]}"; do
	read -r kind name _ <<<"$s"
	group_of[$name]=
	[ "$kind" = tap ] && group_of[$name]=$(sed -n 's/^# tests\/run.sh: group \([a-z_]*\).*/\1/p' "$name" | head -1)
done

start=$SECONDS
pending=("${suites[@]}")
while [ "${#pending[@]}" -gt 0 ] || [ "${#running[@]}" -gt 0 ]; do
	next=-1
	if [ "${#running[@]}" -lt "$jobs" ]; then
		for i in "${!pending[@]}"; do
			read -r _ name _ <<<"${pending[$i]}"
			g=${group_of[$name]}
			if [ -z "$g" ] || [ -z "${busy[$g]:-}" ]; then next=$i; break; fi
		done
	fi
	if [ "$next" -ge 0 ]; then
		read -r _ name _ <<<"${pending[$next]}"
		g=${group_of[$name]}
		[ -n "$g" ] && busy[$g]=$name
		launch "${pending[$next]}"
		unset 'pending[next]'
		pending=("${pending[@]}")
	else
		reap
	fi
done
for s in "${alone[@]}"; do
	launch "$s"
	reap
done

echo "# slowest suites (of $((SECONDS - start)) s, $jobs at a time):"
printf '%s\n' "${times[@]}" | sort -rn | head -8 | sed 's/^/#   /'
[ ${#failures[@]} -ne 0 ] && echo "failing: ${failures[*]}"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
