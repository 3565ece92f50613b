#!/usr/bin/env bash
# What agent --stacks costs (no branch-stack PMU: IP samples on cpu-clock),
# beside its peer `perf record -g` at the same rate. A fixed amount of work
# (tests/workloads/call_chain.c built with frame pointers: main -> outer ->
# inner, 5 frames deep with libc's) is timed by its CPU time alone, and
# while each sampler samples the whole machine at 4x the default rate (3988
# Hz per CPU: the differences stand out of the noise): the agent without
# and with --stacks, perf record without and with -g. Runs interleaved,
# ROUNDS times (BENCH_STACKS_ROUNDS, default 3), medians compared:
#   workload_slowdown_pct_{agent,agent_stacks,perf_record,perf_record_g}
#   agent_stacks_vs_perf_record_g_workload_cpu   the workload's CPU ratio
#   {agent,agent_stacks,perf_record_g}_cpu_us_per_sample  the sampler's own
#                               CPU (schedstat) over the samples it took
#   agent_stacks_vs_agent_cpu_per_sample, agent_stacks_vs_perf_record_g_cpu_per_sample
#   bpf_ns_per_sample_{plain,stacks}  the BPF program's own time per run
#                               (kernel.bpf_stats_enabled, on while measured)
# Needs root.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
rounds=${BENCH_STACKS_ROUNDS:-3}
settle=${BENCH_STACKS_SETTLE_S:-1}
source bench/sampling_lib.sh
sampling_bench_setup stacks
ep=$build/edgeprof
cc -O1 -fno-omit-frame-pointer -o "$tmp/work" tests/workloads/call_chain.c
hz=$((997 * 4))
stats0=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)
restore_stats() { sysctl -qw kernel.bpf_stats_enabled="$stats0" 2>/dev/null || true; }
trap 'restore_stats; sampling_bench_cleanup' EXIT
sysctl -qw kernel.bpf_stats_enabled=1 2>/dev/null || note "no kernel.bpf_stats_enabled: no bpf_ns figures"

cpu_of() {
	/usr/bin/time -f '%U %S' -o "$tmp/time" "$@" >/dev/null
	awk '{ printf "%.3f\n", $1 + $2 }' "$tmp/time"
}
pid_cpu() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.6f\n", s / 1e9 }'
}
# about 1.5 s of CPU alone
n=100000000
t=$(cpu_of "$tmp/work" "$n" 1)
n=$(echo "$n * 1.5 / ($t + 0.001)" | bc)

start_sampler() {
	rm -f "$tmp/s.err" "$tmp/s.data"
	case $1 in
	agent | agents)
		local stacks=
		[ "$1" = agents ] && stacks=--stacks
		"$ep" agent --ip-hz "$hz" $stacks -o "$tmp/s.prof" --log-level info 2>"$tmp/s.err" &
		sampler=$!
		for _ in $(seq 600); do
			grep -q 'sampling IPs\|branch stacks on' "$tmp/s.err" 2>/dev/null && break
			sleep 0.05
		done
		sleep "$settle"
		;;
	*)
		local g=
		[ "$1" = perfg ] && g=-g
		perf record -a -e cpu-clock -F "$hz" $g -o "$tmp/s.data" 2>"$tmp/s.err" >/dev/null &
		sampler=$!
		for _ in $(seq 600); do
			[ -s "$tmp/s.data" ] && break
			sleep 0.05
		done
		;;
	esac
}
# bpf_run: "RUN_NS RUN_CNT" of the agent's on_overflow program
bpf_run() {
	bpftool prog show -j 2>/dev/null |
		jq -r '[.[] | select(.name == "on_overflow")][0] | "\(.run_time_ns // 0) \(.run_cnt // 0)"'
}
stop_sampler() {
	kill -INT "$sampler" 2>/dev/null || true
	wait "$sampler" 2>/dev/null || true
	sampler=
}
# samples the sampler took: the agent's profile, perf's header
samples_of() {
	if [ "${1#agent}" != "$1" ]; then
		"$ep" export "$tmp/s.prof" --format json | jq .stats.samples
	else
		perf report -i "$tmp/s.data" --stats 2>/dev/null |
			awk '/SAMPLE events:/ { print $3; exit }'
	fi
}

declare -A cpu own nsamp bpf_ns bpf_cnt
modes="alone agent agents perf perfg"
for _ in $(seq "$rounds"); do
	for m in $modes; do
		if [ "$m" = alone ]; then
			cpu[$m]+="$(cpu_of "$tmp/work" "$n" 1) "
			continue
		fi
		start_sampler "$m"
		b0=$(bpf_run || echo "0 0")
		a0=$(pid_cpu "$sampler")
		cpu[$m]+="$(cpu_of "$tmp/work" "$n" 1) "
		a1=$(pid_cpu "$sampler")
		b1=$(bpf_run || echo "0 0")
		stop_sampler
		own[$m]=$(echo "${own[$m]:-0} + $a1 - $a0" | bc -l)
		nsamp[$m]=$((${nsamp[$m]:-0} + $(samples_of "$m")))
		if [ "${m#agent}" != "$m" ]; then
			read -r ns0 c0 <<<"$b0"
			read -r ns1 c1 <<<"$b1"
			bpf_ns[$m]=$((${bpf_ns[$m]:-0} + ns1 - ns0))
			bpf_cnt[$m]=$((${bpf_cnt[$m]:-0} + c1 - c0))
		fi
	done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
alone=$(median <<<"${cpu[alone]}")
med() { median <<<"${cpu[$1]}"; }
slowdown() { echo "(($(med "$1") / $alone) - 1) * 100" | bc -l; }
# the sampler's CPU while the workload ran, over every sample it took in the
# run (its start-up and settling excluded from both only approximately: the
# samples of the settling second count, so this is a lower bound)
per_sample() { echo "${own[$1]} * 1000000 / (${nsamp[$1]} + 0.001)" | bc -l; }
printf 'workload_cpu_seconds_alone: %.3f\n' "$alone"
printf 'workload_slowdown_pct_agent: %.2f\n' "$(slowdown agent)"
printf 'workload_slowdown_pct_agent_stacks: %.2f\n' "$(slowdown agents)"
printf 'workload_slowdown_pct_perf_record: %.2f\n' "$(slowdown perf)"
printf 'workload_slowdown_pct_perf_record_g: %.2f\n' "$(slowdown perfg)"
printf 'agent_stacks_vs_perf_record_g_workload_cpu: %.3f\n' "$(echo "$(med agents) / $(med perfg)" | bc -l)"
printf 'agent_cpu_us_per_sample: %.2f\n' "$(per_sample agent)"
printf 'agent_stacks_cpu_us_per_sample: %.2f\n' "$(per_sample agents)"
printf 'perf_record_g_cpu_us_per_sample: %.2f\n' "$(per_sample perfg)"
printf 'agent_stacks_vs_agent_cpu_per_sample: %.3f\n' \
	"$(echo "$(per_sample agents) / ($(per_sample agent) + 0.000001)" | bc -l)"
printf 'agent_stacks_vs_perf_record_g_cpu_per_sample: %.3f\n' \
	"$(echo "$(per_sample agents) / ($(per_sample perfg) + 0.000001)" | bc -l)"
if [ "${bpf_cnt[agent]:-0}" -gt 0 ] && [ "${bpf_cnt[agents]:-0}" -gt 0 ]; then
	printf 'bpf_ns_per_sample_plain: %.0f\n' "$(echo "${bpf_ns[agent]} / ${bpf_cnt[agent]}" | bc -l)"
	printf 'bpf_ns_per_sample_stacks: %.0f\n' "$(echo "${bpf_ns[agents]} / ${bpf_cnt[agents]}" | bc -l)"
fi
echo "stacks_rounds: $rounds"
