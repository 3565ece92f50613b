#!/usr/bin/env bash
# `make bench`: prints "name: value" lines (notes go to stderr). Speed is
# compared with a peer in the same run (ratios), since these machines are noisy.
#  - import: `edgeprof import` vs BOLT 16's perf2bolt (and vs `perf script`
#    alone) on the same perf.data: propeller_sample_1's recording repeated
#    BENCH_COPIES times (default 268, about 1,000,000 samples of 32 entries);
#    each tool is timed the same way, best wall time of BENCH_RUNS (3) runs;
#  - every program in BUILD/bench/ (built from bench/*.c) prints its own lines;
#  - bench/ui_views.sh: the web UI's views on a binary with 10,000+ edges;
#  - bench/label_cardinality.sh: /v1/binaries and / with 1 M label sets stored;
#  - bench/top_functions.sh: /v1/top and / with a selection, beside /v1/binaries.
#  BENCH_QUICK=1 runs every part on small inputs (a few minutes): what
#  make test does, so that a bench that no longer runs fails CI; its figures
#  are not measurements.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	: "${BENCH_COPIES:=2}" "${BENCH_RUNS:=1}" "${BENCH_AGENT_CPU_EXECS:=200}"
	: "${BENCH_AGENT_CPU_ROUNDS:=1}" "${BENCH_CHURN_PROGRAMS:=20}" "${BENCH_EMULATOR_ROUNDS:=1}"
	: "${BENCH_LABEL_RUNS:=1}" "${BENCH_LABEL_SETS:=20000}" "${BENCH_OVERHEAD_ROUNDS:=1}"
	: "${BENCH_UI_RUNS:=1}" "${ACCURACY_SAMPLES:=2000}"
	export BENCH_COPIES BENCH_RUNS BENCH_AGENT_CPU_EXECS BENCH_AGENT_CPU_ROUNDS \
		BENCH_CHURN_PROGRAMS BENCH_EMULATOR_ROUNDS BENCH_LABEL_RUNS BENCH_LABEL_SETS \
		BENCH_OVERHEAD_ROUNDS BENCH_UI_RUNS ACCURACY_SAMPLES
fi
copies=${BENCH_COPIES:-268}
runs=${BENCH_RUNS:-3}
perf2bolt=${PERF2BOLT:-/usr/lib/llvm-16/bin/perf2bolt}

fx=${EDGEPROF_FIXTURES:-tests/data/lbr}
data_in=$fx/propeller_sample_1.perfdata1
binary=$fx/propeller_sample_1.bin
# the name the recording gives the binary; perf2bolt looks for it
recorded_name=propeller_sample_1.bin.gen

note() { echo "bench: note: $*" >&2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-bench.XXXXXX")
child=
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	# a measured command runs in its own session: end it with all it started
	if [ -n "$child" ]; then kill -TERM -- "-$child" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

gnu_time=
if [ -x /usr/bin/time ] && /usr/bin/time -f %M -o /dev/null true 2>/dev/null; then
	gnu_time=/usr/bin/time
else
	note "GNU time (Debian package 'time') is missing: no peak RSS lines"
fi

# cpu_now: seconds of CPU used by this shell's reaped children (user + sys).
# `times` must run in this shell itself: a $(...) subshell has no children.
children_cpu() {
	times >"$tmp/times"
	# its second line: "0m1.234s 0m0.056s", the children's user and sys
	cpu_now=$(tail -1 "$tmp/times" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] } printf "%.3f", s }')
}

# measure NAME CMD...: runs CMD once in its own session, output to
# $tmp/NAME.out (or $m_stdout) and $tmp/NAME.err; sets m_wall, m_cpu (user+sys, children included),
# m_rss (peak RSS in KiB of its largest process, "" without GNU time).
measure() {
	local name=$1 t0 t1 c0 c1 rc=0
	shift
	children_cpu
	c0=$cpu_now
	t0=$(date +%s%N)
	if [ -n "$gnu_time" ]; then
		setsid -w "$gnu_time" -f %M -o "$tmp/$name.rss" "$@" >"${m_stdout:-$tmp/$name.out}" 2>"$tmp/$name.err" &
	else
		setsid -w "$@" >"${m_stdout:-$tmp/$name.out}" 2>"$tmp/$name.err" &
	fi
	child=$!
	wait "$child" || rc=$?
	child=
	t1=$(date +%s%N)
	children_cpu
	c1=$cpu_now
	if [ "$rc" -ne 0 ]; then
		echo "bench: $name failed (exit $rc): $*" >&2
		tail -5 "$tmp/$name.err" >&2
		return 1
	fi
	m_wall=$(echo "($t1 - $t0) / 1000000000" | bc -l)
	m_cpu=$(echo "$c1 - $c0" | bc -l)
	m_rss=
	[ -n "$gnu_time" ] && m_rss=$(tail -1 "$tmp/$name.rss")
	return 0
}

# best NAME CMD...: the run with the best wall time of $runs; sets b_wall,
# b_cpu (of that run) and b_rss (the largest of all runs)
best() {
	local name=$1 i
	shift
	b_wall='' b_cpu='' b_rss=''
	for ((i = 0; i < runs; i++)); do
		measure "$name" "$@" || return 1
		if [ -z "$b_wall" ] || [ "$(echo "$m_wall < $b_wall" | bc -l)" -eq 1 ]; then
			b_wall=$m_wall b_cpu=$m_cpu
		fi
		if [ -n "$m_rss" ] && { [ -z "$b_rss" ] || [ "$m_rss" -gt "$b_rss" ]; }; then b_rss=$m_rss; fi
	done
}

ratio() { echo "$1 / $2" | bc -l | xargs printf '%.1f'; }

# --- the input ---------------------------------------------------------------
big=$tmp/big.data
python3 bench/replicate_perfdata.py "$data_in" "$big" "$copies"
echo "import_input_copies: $copies"
echo "import_input_bytes: $(stat -c %s "$big")"

# --- edgeprof import (one thread) --------------------------------------------
best import "$build/edgeprof" import "$big" --binary "$binary" -o "$tmp/big.prof" --jobs 1
# "edgeprof: info: FILE: N samples (N with branch stacks), N entries (...)"
info=$(grep -o '[0-9]* samples ([0-9]* with branch stacks), [0-9]* entries' "$tmp/import.err" | tail -1)
samples=$(echo "$info" | awk '{ print $1 }')
entries=$(echo "$info" | awk '{ print $7 }')
if [ -z "$samples" ] || [ "$samples" -eq 0 ]; then
	echo "bench: edgeprof import reported no samples" >&2
	exit 1
fi
import_wall=$b_wall import_cpu=$b_cpu
echo "import_input_samples: $samples"
printf 'import_input_entries_per_sample: %.2f\n' "$(echo "$entries / $samples" | bc -l)"
printf 'import_seconds: %.3f\n' "$import_wall"
printf 'import_cpu_seconds: %.3f\n' "$import_cpu"
printf 'import_samples_per_sec: %.0f\n' "$(echo "$samples / $import_wall" | bc -l)"
# per core: the import runs on one thread, and CPU time is what this loaded
# machine measures least noisily
printf 'import_samples_per_cpu_sec: %.0f\n' "$(echo "$samples / $import_cpu" | bc -l)"
[ -n "$b_rss" ] && echo "import_peak_rss_kib: $b_rss"

# --- edgeprof import on every CPU: each thread counts a share of the samples
# (and reads the whole file); the same profile, byte for byte --------------------
jobs=$(getconf _NPROCESSORS_ONLN)
if [ "$jobs" -gt 1 ]; then
	best import_jobs "$build/edgeprof" import "$big" --binary "$binary" -o "$tmp/big_jobs.prof" --jobs "$jobs"
	if ! cmp -s "$tmp/big.prof" "$tmp/big_jobs.prof"; then
		echo "bench: import --jobs $jobs wrote a profile other than --jobs 1's" >&2
		exit 1
	fi
	echo "import_jobs: $jobs"
	printf 'import_jobs_seconds: %.3f\n' "$b_wall"
	printf 'import_jobs_cpu_seconds: %.3f\n' "$b_cpu"
	# wall time on a machine others load is noisy: best of $runs each
	echo "import_jobs_wall_speedup: $(echo "$import_wall / $b_wall" | bc -l | xargs printf '%.2f')"
	[ -n "$b_rss" ] && echo "import_jobs_peak_rss_kib: $b_rss"
fi

# --- instructions per sample (callgrind-free: cachegrind without cache
# simulation): deterministic where time is not. The difference of two sizes
# leaves start-up and the profile's writing out. ------------------------------------
if command -v valgrind >/dev/null; then
	ir_of() { # copies -> instructions of a one-thread import
		python3 bench/replicate_perfdata.py "$data_in" "$tmp/ir.data" "$1"
		valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$tmp/ir.out" \
			"$build/edgeprof" import "$tmp/ir.data" --binary "$binary" -o "$tmp/ir.prof" --jobs 1 \
			>/dev/null 2>"$tmp/ir.err" || return 1
		grep '^summary:' "$tmp/ir.out" | awk '{ print $2 }'
	}
	ir10=$(ir_of 10) && ir30=$(ir_of 30) && per_copy=$(grep -o '[0-9]* samples ([0-9]* with' "$tmp/ir.err" | tail -1 | awk '{ print $1 / 30 }')
	if [ -n "${ir30:-}" ] && [ -n "${per_copy:-}" ]; then
		printf 'import_instructions_per_sample: %.0f\n' "$(echo "($ir30 - $ir10) / (20 * $per_copy)" | bc -l)"
	else
		note "valgrind could not count the import's instructions"
	fi
	rm -f "$tmp/ir.data"
else
	note "valgrind not found: no import_instructions_per_sample line"
fi

# --- a short process's cost in the pipeline, in a container or not: the
# instructions its fork, exec, exit and forget add (cachegrind, as above), per
# process, while a busy process's real samples flow -------------------------
if command -v valgrind >/dev/null; then
	churn_ir() { # MODE CHILDREN -> instructions
		valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$tmp/churn.out" \
			"$build/bench/pipeline_churn_bench" "$fx/test.lbr" "$fx/test.binary" "$1" "$2" \
			>"$tmp/churn.txt" 2>/dev/null || return 1
		grep '^summary:' "$tmp/churn.out" | awk '{ print $2 }'
	}
	per_process() { # MODE -> instructions per process
		local none some samples
		none=$(churn_ir "$1" 0) && some=$(churn_ir "$1" 4) &&
			samples=$(awk '/^samples:/ { print $2 }' "$tmp/churn.txt") &&
			echo "($some - $none) / (4 * $samples)" | bc -l | xargs printf '%.0f'
	}
	if plain=$(per_process plain) && in_ct=$(per_process container); then
		echo "pipeline_instructions_per_process: $plain"
		echo "pipeline_instructions_per_process_in_container: $in_ct"
		echo "pipeline_instructions_per_process_in_container_vs_plain: $(echo "$in_ct / $plain" | bc -l | xargs printf '%.2f')"
	else
		note "valgrind could not count the pipeline's instructions per process"
	fi
fi

# --- perf2bolt ---------------------------------------------------------------
# perf2bolt runs `perf script` (several jobs at once) and reads its text, so
# its time includes perf's: that is what a user pays.
p2b_dir=$tmp/p2b
mkdir -p "$p2b_dir"
cp "$binary" "$p2b_dir/$recorded_name"
p2b_bin=$p2b_dir/$recorded_name
fdata_lines() { if [ -s "$1" ]; then wc -l <"$1"; else echo 0; fi; }
if ! [ -x "$perf2bolt" ] || ! command -v perf >/dev/null; then
	note "perf2bolt ($perf2bolt) or perf not found: no perf2bolt lines"
	p2b_bin=
else
	# BOLT 16 takes a PIE's load address from the first PT_LOAD whose page-aligned
	# file offset equals the mmap's offset; for this binary that is the read-only
	# segment at address 0 (the executable one also starts in file page 0, at
	# 0x1740), so every address lands 0x1000 off and the fdata comes out empty.
	# No perf2bolt option sets the base. If that happens, give perf2bolt a copy
	# whose non-executable PT_LOAD headers are turned into PT_NULL (code, symbols
	# and build-id unchanged).
	"$perf2bolt" -p "$data_in" -o "$tmp/probe.fdata" "$p2b_bin" >"$tmp/probe.log" 2>&1 || true
	if [ "$(fdata_lines "$tmp/probe.fdata")" -eq 0 ]; then
		python3 - "$p2b_bin" <<'EOF'
import struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    elf = bytearray(f.read())
    phoff, = struct.unpack_from("<Q", elf, 32)
    phentsize, phnum = struct.unpack_from("<HH", elf, 54)
    for i in range(phnum):
        off = phoff + i * phentsize
        p_type, p_flags = struct.unpack_from("<II", elf, off)
        if p_type == 1 and not p_flags & 1:  # PT_LOAD without PF_X
            struct.pack_into("<I", elf, off, 0)  # PT_NULL
    f.seek(0)
    f.write(elf)
EOF
		rm -f "$tmp/probe.fdata"
		"$perf2bolt" -p "$data_in" -o "$tmp/probe.fdata" "$p2b_bin" >"$tmp/probe.log" 2>&1 || true
		if [ "$(fdata_lines "$tmp/probe.fdata")" -eq 0 ]; then
			note "perf2bolt writes an empty profile for this recording even with the patched binary: no perf2bolt lines"
			p2b_bin=
		else
			note "perf2bolt needed the binary's non-executable PT_LOAD headers nulled (BOLT 16 PIE base-address bug)"
			echo "perf2bolt_binary_patched: 1"
		fi
	else
		echo "perf2bolt_binary_patched: 0"
	fi
fi
if [ -n "$p2b_bin" ]; then
	best perf2bolt "$perf2bolt" -p "$big" -o "$tmp/big.fdata" "$p2b_bin"
	echo "perf2bolt_fdata_lines: $(fdata_lines "$tmp/big.fdata")"
	read_line=$(grep -o 'read [0-9]* samples and [0-9]* LBR entries' "$tmp/perf2bolt.out" "$tmp/perf2bolt.err" | head -1 || true)
	[ -n "$read_line" ] && echo "perf2bolt_samples_read: $(echo "${read_line#*:}" | awk '{ print $2 }')"
	printf 'perf2bolt_seconds: %.3f\n' "$b_wall"
	printf 'perf2bolt_cpu_seconds: %.3f\n' "$b_cpu"
	[ -n "$b_rss" ] && echo "perf2bolt_peak_rss_kib: $b_rss"
	echo "import_speedup_vs_perf2bolt: $(ratio "$b_wall" "$import_wall")"
	echo "import_speedup_vs_perf2bolt_cpu: $(ratio "$b_cpu" "$import_cpu")"
fi

# --- perf script alone (the text perf2bolt and AutoFDO's tools start from) ----
if command -v perf >/dev/null; then
	m_stdout=/dev/null best perf_script perf script -i "$big" -F ip,brstack
	printf 'perf_script_brstack_seconds: %.3f\n' "$b_wall"
	echo "import_speedup_vs_perf_script: $(ratio "$b_wall" "$import_wall")"
fi
rm -f "$big" "$tmp"/*.out

# --- the LBR emulator: guest instructions per second of a whole
# `record --emulate`, and its slowdown against the native run --------------------
cc -O1 -o "$tmp/hot_cold" tests/workloads/hot_cold.c
m_stdout=/dev/null best emulator "$build/edgeprof" record --emulate -o "$tmp/emu.prof" -- \
	"$tmp/hot_cold" 100000000
emu_wall=$b_wall
m_stdout=/dev/null best native "$tmp/hot_cold" 100000000
native_wall=$b_wall
insns=$("$build/edgeprof" record --emulate -o "$tmp/emu.prof" -- "$tmp/hot_cold" 100000000 2>&1 \
	>/dev/null | sed -n 's/.* ran [0-9]* branches, \([0-9]*\) instructions/\1/p')
printf 'emulator_seconds: %.3f\n' "$emu_wall"
printf 'emulator_guest_insns_per_sec: %.0f\n' "$(echo "$insns / $emu_wall" | bc -l)"
echo "emulator_slowdown_vs_native: $(ratio "$emu_wall" "$native_wall")"

# --- the live agent: the BPF program's cost per run (kernel.bpf_stats_enabled:
# run_time_ns / run_cnt), the agent's CPU and peak RSS while sampling a busy
# machine for 5 s. Needs root; on a PMU-less VM this is the cpu-clock fallback.
if [ "$(id -u)" -eq 0 ] && [ -w /proc/sys/kernel/bpf_stats_enabled ]; then
	stats_was=$(cat /proc/sys/kernel/bpf_stats_enabled)
	echo 1 >/proc/sys/kernel/bpf_stats_enabled
	"$tmp/hot_cold" 100000000000 >/dev/null &
	busy=$!
	# the program's counters are read while it is still loaded
	(sleep 4 && bpftool -j prog show name on_overflow >"$tmp/prog.json" 2>/dev/null) &
	reader=$!
	m_stdout=/dev/null measure agent "$build/edgeprof" agent --duration 5 --ip-hz 4000 \
		-o "$tmp/agent.prof"
	wait "$reader"
	prog=$(cat "$tmp/prog.json" 2>/dev/null)
	# the opt-in mmap probe (--watch-mmaps): a second, short run; its BPF
	# time per system call, from the kernel's own counters
	"$build/edgeprof" agent --duration 3 --ip-hz 4000 --watch-mmaps -o "$tmp/agent2.prof" \
		2>/dev/null &
	agent2=$!
	(sleep 2 && bpftool -j prog show name on_mmap >"$tmp/prog.json.mmap" 2>/dev/null) || true
	wait "$agent2" || true
	kill "$busy" 2>/dev/null
	wait "$busy" 2>/dev/null || true
	echo "$stats_was" >/proc/sys/kernel/bpf_stats_enabled
	run_ns=$(echo "$prog" | jq '[.. | objects | select(.run_time_ns?) | .run_time_ns] | add // 0')
	run_cnt=$(echo "$prog" | jq '[.. | objects | select(.run_cnt?) | .run_cnt] | add // 0')
	if [ "${run_cnt:-0}" -gt 0 ]; then
		printf 'bpf_ns_per_run: %.0f\n' "$(echo "$run_ns / $run_cnt" | bc -l)"
		echo "bpf_runs: $run_cnt"
	fi
	probe=$(jq -s '[.. | objects | select(.run_cnt? and .run_cnt > 0)] | first // empty' \
		"$tmp/prog.json.mmap" 2>/dev/null)
	if [ -n "$probe" ]; then
		probe_ns=$(echo "$probe" | jq '.run_time_ns / .run_cnt')
		printf 'mmap_probe_ns_per_syscall: %.1f\n' "$probe_ns"
	fi
	printf 'agent_cpu_seconds_per_5s: %.3f\n' "$m_cpu"
	[ -n "$m_rss" ] && echo "agent_peak_rss_kib: $m_rss"
	echo "agent_samples: $("$build/edgeprof" export "$tmp/agent.prof" --format json | jq .stats.samples)"
else
	note "not root: live agent figures skipped"
fi

# --- what sampling costs a busy program: the agent against perf record ----------
bench/overhead.sh "$build"
bench/agent_cpu.sh "$build"
bench/emulator.sh "$build"

# --- accuracy: ours against the peers' method and ablations ---------------------
bench/accuracy.sh "$build"

# --- the collector's web UI on a binary with 10,000+ edges ------------------------
bench/ui_views.sh "$build"

# --- the binaries list with a million label sets on one binary (issue 32) -----
bench/label_cardinality.sh "$build"

# --- top functions across a selection's binaries, beside the listing (issue 36)
bench/top_functions.sh "$build"

# --- the other benchmarks ------------------------------------------------------
# the collector's ingest benchmark also measures ClickHouse when one starts
TEST_TMP=$tmp
track_pid() { :; }
# shellcheck source=../tests/integration/clickhouse.sh
source tests/integration/clickhouse.sh
if [ -x /usr/sbin/clickhouse-server ] && clickhouse_start >&2; then
	export EDGEPROF_BENCH_STORE="clickhouse:$CLICKHOUSE_URL/?database=bench"
else
	note "no clickhouse-server: the ClickHouse ingest figure is skipped"
fi
shopt -s nullglob
for b in "$build"/bench/*; do
	# run above, under cachegrind, with its inputs
	[ "$(basename "$b")" = pipeline_churn_bench ] && continue
	if [ -f "$b" ] && [ -x "$b" ]; then
		"$b" || note "$b exited with $?"
	fi
done
clickhouse_stop

# --- FDO on real programs: hours, so `make bench-fdo` runs it and this shows its last result
if [ -s "$build/fdo/results.txt" ]; then
	note "FDO results of the last make bench-fdo ($(date -r "$build/fdo/results.txt" '+%F %T'))"
	cat "$build/fdo/results.txt"
else
	note "no FDO results: make bench-fdo measures them (root, long)"
fi
exit 0
