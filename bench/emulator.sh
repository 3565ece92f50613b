#!/usr/bin/env bash
# What the LBR emulator's plugin costs (part of `make bench`), against its
# peer in the same run: the same qemu-x86_64 without the plugin, on a tight
# loop (tests/workloads/hot_cold.c: one 8-instruction block per iteration)
# and an interpreter (tests/workloads/interp.c: an indirect jump per
# bytecode). The plugin runs as `record --emulate` runs it (event=branches,
# period 10007, jitter P/16).
#   emulator_plugin_insns_ratio_<workload>  host instructions with the plugin
#     over without, per extra unit of work: callgrind's count (valgrind) of
#     two sizes of each run, subtracted, so start-up and translation cancel.
#     Deterministic, the figure to compare across changes on a busy machine.
#   emulator_plugin_cpu_ratio_<workload>  CPU time (user + sys) with the
#     plugin over without, medians of ROUNDS interleaved runs
#     (BENCH_EMULATOR_ROUNDS, default 5).
# EDGEPROF_LBR_PLUGIN=FILE measures another build of the plugin (an older one).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
rounds=${BENCH_EMULATOR_ROUNDS:-5}
note() { echo "bench: note: $*" >&2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-emubench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
plugin=${EDGEPROF_LBR_PLUGIN:-$build/edgeprof-lbr.so}
if ! command -v qemu-x86_64 >/dev/null || [ ! -f "$plugin" ]; then
	note "no qemu-x86_64 or no $plugin: the emulator figures are skipped"
	exit 0
fi
args=out=$tmp/stream,event=branches,period=10007,jitter=625,seed=1

# with|without WORKLOAD ARG [TOOL...]: runs the workload under qemu, the
# plugin loaded or not, under TOOL
with() {
	local w=$1 n=$2
	shift 2
	"$@" qemu-x86_64 -plugin "$plugin,$args" "$tmp/$w" "$n" >/dev/null
}
without() {
	local w=$1 n=$2
	shift 2
	"$@" qemu-x86_64 "$tmp/$w" "$n" >/dev/null
}
# ir MODE WORKLOAD ARG: host instructions of the run (callgrind)
ir() {
	"$1" "$2" "$3" valgrind --tool=callgrind --callgrind-out-file=/dev/null 2>"$tmp/cg.err"
	sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/cg.err"
}
# cpu MODE WORKLOAD ARG: CPU seconds of the run
cpu() {
	"$1" "$2" "$3" /usr/bin/time -f '%U %S' -o "$tmp/time"
	awk '{ printf "%.3f\n", $1 + $2 }' "$tmp/time"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# workload, a short and a long size for callgrind, a size for CPU time
for spec in hot_cold:2000000:6000000:100000000 interp:100000:300000:3000000; do
	IFS=: read -r w small large timed <<<"$spec"
	cc -O1 -o "$tmp/$w" "tests/workloads/$w.c"
	if command -v valgrind >/dev/null; then
		a=$(($(ir with "$w" "$large") - $(ir with "$w" "$small")))
		b=$(($(ir without "$w" "$large") - $(ir without "$w" "$small")))
		printf 'emulator_plugin_insns_ratio_%s: %.2f\n' "$w" "$(echo "$a / $b" | bc -l)"
	else
		note "no valgrind: emulator_plugin_insns_ratio_$w skipped"
	fi
	: >"$tmp/with" && : >"$tmp/without"
	for ((r = 0; r < rounds; r++)); do
		cpu with "$w" "$timed" >>"$tmp/with"
		cpu without "$w" "$timed" >>"$tmp/without"
	done
	printf 'emulator_plugin_cpu_ratio_%s: %.2f\n' "$w" \
		"$(echo "$(median <"$tmp/with") / $(median <"$tmp/without")" | bc -l)"
done
