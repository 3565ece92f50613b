#!/usr/bin/env bash
# What sampling costs a busy program, as its user feels it (part of
# `make bench`): a fixed amount of work (tests/workloads/interp.c, an
# interpreter loop) is timed by the CPU time it needs, alone, while the agent
# samples the whole machine at its default rate and at 4x, and while the
# peer, `perf record -a`, samples at the same rates. Runs are interleaved,
# ROUNDS times (BENCH_OVERHEAD_ROUNDS, default 5), and the medians compared:
#   workload_slowdown_pct_{agent,perf_record}[_4x]  CPU time over the alone median, %
#   agent_cpu_pct_of_core      the agent's own CPU while the workload runs, from
#                              BENCH_OVERHEAD_SETTLE_S (2) after it started sampling
#   agent_cpu_us_per_sample    the same per sample taken
#   workload_slowdown_pct_agent_cycles, agent_cycles_cpu_pct_of_core  the same with
#                              agent --cycles at its default rate (a second event
#                              per CPU: cpu-clock where there is no cycles event)
# Without a branch-stack PMU (VMs) both sample IPs on cpu-clock; with one,
# the agent samples branch stacks every --period branches and perf records
# `-b -e branches -c PERIOD`. Needs root.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
rounds=${BENCH_OVERHEAD_ROUNDS:-5}
settle=${BENCH_OVERHEAD_SETTLE_S:-2}
source bench/sampling_lib.sh
sampling_bench_setup overhead
ep=$build/edgeprof
cc -O2 -o "$tmp/work" tests/workloads/interp.c
ncpus=$(nproc)

# cpu_of CMD...: CPU seconds (user + sys) the command took, via GNU time
cpu_of() {
	/usr/bin/time -f '%U %S' -o "$tmp/time" "$@" >/dev/null
	awk '{ printf "%.3f\n", $1 + $2 }' "$tmp/time"
}
# pid_cpu PID: CPU seconds the process's threads have run so far, to the
# nanosecond (schedstat; /proc/PID/stat counts in 10 ms ticks)
pid_cpu() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.6f\n", s / 1e9 }'
}

# about 1.5 s of CPU alone
n=200000000
t=$(cpu_of "$tmp/work" "$n")
if [ -z "$t" ]; then
	echo "bench: overhead: the workload did not run ($tmp/work)" >&2
	exit 1
fi
n=$(echo "$n * 1.5 / ($t + 0.001)" | bc)

default_period=1000003
if perf record -b -e branches -c "$default_period" -o "$tmp/probe.data" -- true >/dev/null 2>&1; then
	pmu=1
	agent_args() { echo "--period $(($1 == 1 ? default_period : default_period / 4))"; }
	perf_args() { echo "-b -e branches -c $(($1 == 1 ? default_period : default_period / 4))"; }
else
	pmu=0
	note "no branch-stack PMU: agent and perf record both sample IPs on cpu-clock"
	agent_args() { echo "--ip-hz $((997 * $1))"; }
	perf_args() { echo "-e cpu-clock -F $((997 * $1))"; }
fi

# start_sampler KIND RATE: the sampler runs until stopped; returns once it
# samples (the agent has logged how it samples; perf has opened its file)
start_sampler() {
	local kind=$1 rate=$2
	rm -f "$tmp/s.err" "$tmp/s.data"
	if [ "$kind" = agent ] || [ "$kind" = agentc ]; then
		local cycles=
		[ "$kind" = agentc ] && cycles=--cycles
		# shellcheck disable=SC2046
		"$ep" agent $(agent_args "$rate") $cycles -o "$tmp/s.prof" --log-level info \
			2>"$tmp/s.err" &
		sampler=$!
		for _ in $(seq 600); do
			grep -q 'sampling IPs\|branch stacks on' "$tmp/s.err" 2>/dev/null && break
			sleep 0.05
		done
		# start-up is not over when sampling starts: the first drains read
		# the maps and binaries of every process running. The agent's
		# steady state is measured after it (BENCH_OVERHEAD_SETTLE_S).
		sleep "$settle"
	else
		# shellcheck disable=SC2046
		perf record -a $(perf_args "$rate") -o "$tmp/s.data" 2>"$tmp/s.err" >/dev/null &
		sampler=$!
		for _ in $(seq 600); do
			[ -s "$tmp/s.data" ] && break
			sleep 0.05
		done
	fi
}
stop_sampler() {
	kill -INT "$sampler" 2>/dev/null || true
	wait "$sampler" 2>/dev/null || true
	sampler=
}

declare -A cpu
modes="alone agent:1 perf:1 agent:4 perf:4 agentc:1"
for r in $(seq "$rounds"); do
	for m in $modes; do
		if [ "$m" = alone ]; then
			cpu[$m]+="$(cpu_of "$tmp/work" "$n") "
			continue
		fi
		start_sampler "${m%%:*}" "${m#*:}"
		a0=$(pid_cpu "$sampler")
		w0=$(date +%s%N)
		cpu[$m]+="$(cpu_of "$tmp/work" "$n") "
		w1=$(date +%s%N)
		a1=$(pid_cpu "$sampler")
		stop_sampler
		if [ "$m" = agent:1 ]; then
			rate=$(sed -n 's/.*sampling cost: \([0-9.]*\) samples\/s per CPU.*/\1/p' "$tmp/s.err")
			wall=$(echo "($w1 - $w0) / 1000000000" | bc -l)
			agent_cpu+="$(echo "$a1 - $a0" | bc -l) "
			agent_wall+="$wall "
			agent_rate+="${rate:-0} "
		elif [ "$m" = agentc:1 ]; then
			agentc_cpu+="$(echo "$a1 - $a0" | bc -l) "
			agentc_wall+="$(echo "($w1 - $w0) / 1000000000" | bc -l) "
		fi
	done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
alone=$(median <<<"${cpu[alone]}")
slowdown() { echo "(($(median <<<"${cpu[$1]}") / $alone) - 1) * 100" | bc -l; }
printf 'workload_cpu_seconds_alone: %.3f\n' "$alone"
printf 'workload_slowdown_pct_agent: %.2f\n' "$(slowdown agent:1)"
printf 'workload_slowdown_pct_perf_record: %.2f\n' "$(slowdown perf:1)"
printf 'workload_slowdown_pct_agent_4x: %.2f\n' "$(slowdown agent:4)"
printf 'workload_slowdown_pct_perf_record_4x: %.2f\n' "$(slowdown perf:4)"
# the agent's steady state, from the default-rate runs (medians over rounds)
cpu_s=$(median <<<"$agent_cpu")
wall_s=$(median <<<"$agent_wall")
rate=$(median <<<"$agent_rate")
printf 'agent_cpu_pct_of_core: %.3f\n' "$(echo "$cpu_s / $wall_s * 100" | bc -l)"
if [ "$(echo "$rate > 0" | bc)" -eq 1 ]; then
	printf 'agent_cpu_us_per_sample: %.2f\n' \
		"$(echo "$cpu_s * 1000000 / ($rate * $ncpus * $wall_s)" | bc -l)"
fi
printf 'workload_slowdown_pct_agent_cycles: %.2f\n' "$(slowdown agentc:1)"
printf 'agent_cycles_cpu_pct_of_core: %.3f\n' \
	"$(echo "$(median <<<"$agentc_cpu") / $(median <<<"$agentc_wall") * 100" | bc -l)"
echo "overhead_rounds: $rounds"
echo "overhead_branch_stack_pmu: $pmu"
