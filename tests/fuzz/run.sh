#!/usr/bin/env bash
# `make fuzz`: runs each libFuzzer target SECONDS seconds from a copy of its
# committed corpus (tests/fuzz/corpus/NAME) with its dictionary
# (tests/fuzz/NAME.dict) when there is one, niced (the machine is shared),
# and prints one line per target:
#   fuzz_NAME: N execs, M crashes, E edges, C corpus inputs, R exec/s (LOG)
# New inputs stay in BUILD/fuzz/corpus/NAME, a crash in
# BUILD/fuzz/crashes/NAME/. Exits 1 when any target crashed. FUZZ_RUNS=N
# also ends a target once it has run N inputs, so a long run for a goal in
# executions gives its core back as soon as the goal is met.
# usage: [FUZZ_RUNS=N] tests/fuzz/run.sh BUILD SECONDS [NAME...]
set -u
build=${1:?usage: run.sh BUILD SECONDS [NAME...]}
seconds=${2:?usage: run.sh BUILD SECONDS [NAME...]}
shift 2
cd "$(dirname "$0")/../.."
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	for f in tests/fuzz/fuzz_*.c; do
		t=${f#tests/fuzz/fuzz_}
		targets+=("${t%.c}")
	done
fi
status=0
for t in "${targets[@]}"; do
	bin=$build/fuzz/fuzz_$t
	if [ ! -x "$bin" ]; then
		echo "fuzz_$t: 0 execs, 0 crashes (not built: $bin)"
		status=1
		continue
	fi
	corpus=$build/fuzz/corpus/$t
	crashes=$build/fuzz/crashes/$t
	log=$build/fuzz/$t.log
	mkdir -p "$corpus" "$crashes"
	[ -d "tests/fuzz/corpus/$t" ] && cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null
	args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=30 -rss_limit_mb=2048
		-artifact_prefix="$crashes/")
	[ -f "tests/fuzz/$t.dict" ] && args+=(-dict="tests/fuzz/$t.dict")
	[ -n "${FUZZ_RUNS:-}" ] && args+=(-runs="$FUZZ_RUNS")
	before=$(find "$crashes" -type f | wc -l)
	nice -n 10 "$bin" "${args[@]}" "$corpus" >"$log" 2>&1
	rc=$?
	found=$(($(find "$crashes" -type f | wc -l) - before))
	[ "$rc" -ne 0 ] && [ "$found" -eq 0 ] && found=1 # died before writing its input
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	edges=$(grep -ao 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	inputs=$(find "$corpus" -type f | wc -l)
	echo "fuzz_$t: ${execs:-0} execs, $found crashes, ${edges:-0} edges," \
		"$inputs corpus inputs, ${rate:-0} exec/s ($log)"
	if [ "$found" -ne 0 ]; then
		grep -a -m3 'ERROR\|SUMMARY\|^fuzz_' "$log" | sed 's/^/  /'
		status=1
	fi
done
exit $status
