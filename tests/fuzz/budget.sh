# Sourced by tests/fuzz/run.sh and tests/integration/test_fuzz.sh: the
# memory each libFuzzer target may use, in MiB, given to libFuzzer as
# -rss_limit_mb and -malloc_limit_mb, so an input that makes one allocation
# past it, or grows the process past it, is a finding (an "out-of-memory"
# crash, its input kept like any other). It is the budget of the process
# whose code the target drives (issue 32; deploy/k8s sets the same limits):
#   agent, 256 MiB: elf (the binaries of every sampled process), bat (their
#     BOLT address translation tables, read by export), perf_data,
#     import and emu (recordings through the agent's pipeline, as agent
#     --replay and record do), proc_maps, proc_cgroup, k8s_pods;
#   collector, 1024 MiB: http (its HTTP front, ingest and store), ingest;
#   1024 MiB too: profile (report and export, whose --profile-max-mib is
#     1024 by default; no daemon reads profiles).
# A target not listed gets the agent's budget, the smaller one.
# ASan's quarantine of freed memory (256 MiB by default) counts in the RSS
# libFuzzer watches, so it is held to 32 MiB: what the code holds is what is
# measured. FUZZ_MEM_MB=N overrides every budget.
ep_fuzz_budget() {
	if [ -n "${FUZZ_MEM_MB:-}" ]; then
		echo "$FUZZ_MEM_MB"
		return
	fi
	case $1 in
	http | ingest | profile) echo 1024 ;;
	*) echo 256 ;;
	esac
}
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=32}
