#!/usr/bin/env bash
# make bench keeps running: bench/run.sh on small inputs (BENCH_QUICK=1)
# exits 0, no part of it fails or is skipped for an error, and every part
# prints its figures. What it prints is not checked as a measurement here.
# tests/run.sh: group heavy (ClickHouse servers, or a load run: one such suite at a time)
source "$(dirname "$0")/lib.sh"

build=$(dirname "$EDGEPROF")
BENCH_QUICK=1 bench/run.sh "$build" >"$TEST_TMP/out" 2>"$TEST_TMP/err"
rc=$?
check "bench/run.sh (BENCH_QUICK=1) exits 0" test "$rc" -eq 0
if [ "$rc" -ne 0 ]; then
	tail -20 "$TEST_TMP/err" | sed 's/^/#   /'
fi
check "no bench program exited with an error" \
	bash -c "! grep -E 'exited with|error|Traceback' '$TEST_TMP/err'"
grep -E 'exited with|error|Traceback' "$TEST_TMP/err" | head -5 | sed 's/^/#   /'
# one figure of each part: the import against perf2bolt, the emulator, the
# agent against perf record, accuracy, the UI, label cardinality, top
# functions, and the bench programs (ingest, decoder walk)
for name in import_samples_per_sec import_speedup_vs_perf2bolt emulator_seconds \
	workload_slowdown_pct_agent agent_cpu_us_per_exec accuracy_min_overlap ui_view_ms_function \
	label_sets_binaries_ms top_all_ms collector_ingest_edges_per_sec_sqlite decoder_walks_per_sec; do
	check "prints $name" grep -Eq "^$name: -?[0-9.]+$" "$TEST_TMP/out"
done
finish
