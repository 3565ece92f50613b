#!/usr/bin/env bash
# The agent's own CPU for the processes a node starts (part of `make bench`):
# on a busy node the agent's steady state is mostly new processes (each
# exec's maps, files and cgroup are read while it lives), not samples. The
# agent samples the whole machine at its default rate while a churn program
# fork()s and exec()s a small dynamically linked program N times; the peer,
# `perf record -a` at the same rate, follows the same execs (its kernel
# writes their COMM and MMAP records, perf copies them out). Each sampler's
# CPU (its threads' schedstat, to the nanosecond: load does not inflate it
# the way it does wall time) during the churn, less its CPU rate measured
# just before without churn, divided by N:
#   agent_cpu_us_per_exec, perf_record_cpu_us_per_exec   medians over rounds
#   agent_cpu_us_per_exec_vs_perf_record                 their ratio
#   agent_idle_cpu_pct_of_core                           the agent without our churn
#   agent_cpu_us_per_exec_in_container                   the same churn run in a cgroup
#     named the way podman names a container's, so every process is labelled
#     with the container (where cgroup v2 is writable; the agent's extra work
#     per labelled process shows here)
# (BENCH_AGENT_CPU_ROUNDS, default 3; BENCH_AGENT_CPU_EXECS, default 2000.)
# Other processes on the machine add their execs to both; that noise is
# small next to N. Needs root.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
rounds=${BENCH_AGENT_CPU_ROUNDS:-3}
execs=${BENCH_AGENT_CPU_EXECS:-2000}
source bench/sampling_lib.sh
sampling_bench_setup agent-cpu
ep=$build/edgeprof
cat >"$tmp/churn.c" <<'EOF'
/* fork and exec ARGV[2] ARGV[1] times, one after the other */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	long n = atol(argv[1]);
	for (long i = 0; i < n; i++) {
		pid_t p = fork();
		if (p == 0) {
			execv(argv[2], argv + 2);
			_exit(127);
		}
		if (p < 0 || waitpid(p, NULL, 0) != p)
			return 1;
	}
	return 0;
}
EOF
cc -O2 -o "$tmp/churn" "$tmp/churn.c"

# a container's cgroup for the churn, where cgroup v2 lets us make one
container_cg=
for r in /sys/fs/cgroup/unified /sys/fs/cgroup; do
	if [ -f "$r/cgroup.procs" ] && [ -w "$r" ]; then
		container_cg=$r/edgeprof-bench-$$.slice/libpod-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n').scope
		mkdir -p "$container_cg" || container_cg=
		break
	fi
done
remove_container_cg() {
	[ -n "$container_cg" ] || return 0
	rmdir "$container_cg" "$(dirname "$container_cg")" 2>/dev/null || true
}
trap 'sampling_bench_cleanup; remove_container_cg' EXIT

pid_cpu() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.9f\n", s / 1e9 }'
}
now() { date +%s%N; }

start_sampler() {
	rm -f "$tmp/s.err" "$tmp/s.data"
	if [ "$1" = agent ]; then
		"$ep" agent -o "$tmp/s.prof" --log-level info 2>"$tmp/s.err" &
		sampler=$!
		for _ in $(seq 600); do
			grep -q 'sampling IPs\|branch stacks on' "$tmp/s.err" 2>/dev/null && break
			sleep 0.05
		done
	else
		perf record -a -F 997 -o "$tmp/s.data" 2>"$tmp/s.err" >/dev/null &
		sampler=$!
		for _ in $(seq 600); do
			[ -s "$tmp/s.data" ] && break
			sleep 0.05
		done
	fi
	# past start-up: the first drains read every running process
	sleep 1
}
stop_sampler() {
	kill -INT "$sampler" 2>/dev/null || true
	wait "$sampler" 2>/dev/null || true
	sampler=
}

# measure KIND: "IDLE_PCT US_PER_EXEC" for one round
measure() {
	start_sampler "$1"
	local c0 t0 c1 t1 c2 t2
	c0=$(pid_cpu "$sampler")
	t0=$(now)
	sleep 2
	c1=$(pid_cpu "$sampler")
	t1=$(now)
	if [ "${2:-}" = container ]; then
		# the churn and its children live in the container's cgroup
		sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$container_cg" \
			"$tmp/churn" "$execs" /bin/true
	else
		"$tmp/churn" "$execs" /bin/true
	fi
	c2=$(pid_cpu "$sampler")
	t2=$(now)
	stop_sampler
	echo "$c0 $t0 $c1 $t1 $c2 $t2" | awk -v n="$execs" '{
		idle = ($3 - $1) / (($4 - $2) / 1e9)
		churn = ($5 - $3) - idle * (($6 - $4) / 1e9)
		printf "%.4f %.2f\n", idle * 100, churn / n * 1e6 }'
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
agent_us='' perf_us='' agent_idle='' container_us=''
for _ in $(seq "$rounds"); do
	read -r idle us < <(measure agent)
	agent_idle+="$idle "
	agent_us+="$us "
	if [ -n "$container_cg" ]; then
		read -r _ us < <(measure agent container)
		container_us+="$us "
	fi
	read -r _ us < <(measure perf)
	perf_us+="$us "
done
a=$(median <<<"$agent_us")
p=$(median <<<"$perf_us")
echo "agent_cpu_us_per_exec: $a"
echo "perf_record_cpu_us_per_exec: $p"
awk -v a="$a" -v p="$p" 'BEGIN { if (p > 0) printf "agent_cpu_us_per_exec_vs_perf_record: %.2f\n", a / p }'
echo "agent_idle_cpu_pct_of_core: $(median <<<"$agent_idle")"
[ -z "$container_us" ] || echo "agent_cpu_us_per_exec_in_container: $(median <<<"$container_us")"
echo "agent_cpu_rounds: $rounds"
