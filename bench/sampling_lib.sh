# shellcheck shell=bash
# Sourced by the benchmarks that sample the whole machine with a background
# agent or perf (overhead.sh, agent_cpu.sh): they need root, a scratch folder,
# and the sampler stopped however the script ends, since a sampler left
# running would skew every later figure on the machine.
#   sampling_bench_setup WHAT: skips the figures (exit 0) when not root, else
#   sets tmp (removed at exit) and sampler (the PID to stop at exit, if set)
note() { echo "bench: note: $*" >&2; }
sampling_bench_setup() {
	if [ "$(id -u)" -ne 0 ]; then
		note "not root: the $1 figures are skipped"
		exit 0
	fi
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-$1.XXXXXX")
	sampler=
	trap sampling_bench_cleanup EXIT
}
# shellcheck disable=SC2317 # called by the EXIT trap
sampling_bench_cleanup() {
	if [ -n "$sampler" ]; then kill -INT "$sampler" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
