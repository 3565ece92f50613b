#!/usr/bin/env bash
# `make fuzz`: runs each libFuzzer target SECONDS seconds from a copy of its
# committed corpus (tests/fuzz/corpus/NAME) with its dictionary
# (tests/fuzz/NAME.dict) when there is one, niced (the machine is shared),
# and prints one line per target:
#   fuzz_NAME: N execs, M crashes, E edges, C corpus inputs, R exec/s,
#     peak RSS P of B MiB (LOG)
# New inputs stay in BUILD/fuzz/corpus/NAME, a crash in
# BUILD/fuzz/crashes/NAME/. Exits 1 when any target crashed. FUZZ_RUNS=N
# also ends a target once it has run N inputs, so a long run for a goal in
# executions gives its core back as soon as the goal is met. FUZZ_JOBS=J
# runs J processes of each target at once on its one corpus (each takes up
# the others' new inputs, libFuzzer's -reload), one per core: the line then
# sums their executions and rates (FUZZ_RUNS is shared among them), and
# each keeps its own log, NAME.K.log.
# Each target runs with libFuzzer's -rss_limit_mb and -malloc_limit_mb at
# the memory budget of the process it models (tests/fuzz/budget.sh: agent
# 256 MiB, collector 1 GiB), so a memory bomb is a finding too; the line
# says the peak RSS it reached.
# usage: [FUZZ_RUNS=N] [FUZZ_JOBS=J] tests/fuzz/run.sh BUILD SECONDS [NAME...]
set -u
build=${1:?usage: run.sh BUILD SECONDS [NAME...]}
seconds=${2:?usage: run.sh BUILD SECONDS [NAME...]}
shift 2
cd "$(dirname "$0")/../.."
targets=("$@")
jobs=${FUZZ_JOBS:-1}
case $jobs in '' | *[!0-9]* | 0) echo "run.sh: FUZZ_JOBS must be a count of processes, not '$jobs'" >&2 && exit 2 ;; esac
if [ ${#targets[@]} -eq 0 ]; then
	for f in tests/fuzz/fuzz_*.c; do
		t=${f#tests/fuzz/fuzz_}
		targets+=("${t%.c}")
	done
fi
source tests/fuzz/budget.sh
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
	mkdir -p "$corpus" "$crashes"
	[ -d "tests/fuzz/corpus/$t" ] && cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null
	mem=$(ep_fuzz_budget "$t")
	args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=30 -rss_limit_mb="$mem"
		-malloc_limit_mb="$mem" -artifact_prefix="$crashes/")
	[ -f "tests/fuzz/$t.dict" ] && args+=(-dict="tests/fuzz/$t.dict")
	[ -n "${FUZZ_RUNS:-}" ] && args+=(-runs="$(((FUZZ_RUNS + jobs - 1) / jobs))")
	# libFuzzer also writes its slowest input there (slow-unit-*, over
	# 10 s, which a loaded machine makes of an ordinary one): not a finding
	findings() { find "$crashes" -type f ! -name 'slow-unit-*' | wc -l; }
	before=$(findings)
	logs=() pids=()
	for ((k = 1; k <= jobs; k++)); do
		log=$build/fuzz/$t.log
		[ "$jobs" -gt 1 ] && log=$build/fuzz/$t.$k.log
		logs+=("$log")
		nice -n 10 "$bin" "${args[@]}" "$corpus" >"$log" 2>&1 &
		pids+=($!)
	done
	died=0
	for k in "${!pids[@]}"; do
		# stopped by the operator (SIGINT, SIGTERM), libFuzzer says so
		# and exits non-zero: not a crash
		wait "${pids[$k]}" || grep -aq 'libFuzzer: run interrupted' "${logs[$k]}" || died=1
	done
	found=$(($(findings) - before))
	[ "$died" -ne 0 ] && [ "$found" -eq 0 ] && found=1 # died before writing its input
	execs=0 rate=0 edges=0
	for log in "${logs[@]}"; do
		n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
		r=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
		e=$(grep -ao 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
		execs=$((execs + ${n:-0})) rate=$((rate + ${r:-0}))
		[ "${e:-0}" -gt "$edges" ] && edges=$e
	done
	log=${logs[*]}
	inputs=$(find "$corpus" -type f | wc -l)
	peak=0
	for log in "${logs[@]}"; do
		p=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
		[ "${p:-0}" -gt "$peak" ] && peak=$p
	done
	echo "fuzz_$t: $execs execs, $found crashes, $edges edges," \
		"$inputs corpus inputs, $rate exec/s, peak RSS $peak of $mem MiB ($log)"
	if [ "$found" -ne 0 ]; then
		grep -a -m3 'ERROR\|SUMMARY\|^fuzz_' "${logs[@]}" | sed 's/^/  /'
		status=1
	fi
done
exit $status
