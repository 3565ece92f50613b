#!/usr/bin/env bash
# The soak, short (issue 12, part 3; `make soak` is the 30-minute one): ~2
# minutes of a whole-machine agent streaming to a collector, both the ASan
# build, with 200 execs a second, a dlopen loop, containers (cgroups) made
# and removed, the collector stopped and started twice, the spool's disk
# filled and freed twice. Every sample is accounted for exactly (what the
# agent counted = what the store holds + what the agent counted as lost),
# no sanitizer report at exit, and memory and descriptors stay flat, loosely
# (after warm-up, the largest sample at most twice the first, descriptors
# at most 16 more; the collector's heap in use less SQLite's at most twice
# the first plus 1 MiB). No timing is asserted.
# tests/run.sh: group heavy (ClickHouse servers, or a load run: one such suite at a time)
source "$(dirname "$0")/lib.sh"
build=$(dirname "$EDGEPROF")
if [ "$(id -u)" -ne 0 ]; then
	echo "ok - # SKIP the soak needs root (BPF, a tmpfs, cgroups)"
	finish
fi
if [ ! -x "$build/bench-soak/churn" ] || [ ! -x "$EDGEPROF_ASAN" ]; then
	not_ok "the soak's programs are built (make $build/edgeprof-asan $build/bench-soak/churn)"
	finish
fi
out=$TEST_TMP/soak.txt
TMPDIR=$TEST_TMP SOAK_S=${SOAK_S:-120} nice bash "$(dirname "$0")/../../bench/soak/run.sh" "$build" \
	>"$out" 2>"$TEST_TMP/soak.err"
rc=$?
sed 's/^/# /' "$out" "$TEST_TMP/soak.err"
v() { awk -v k="$1:" '$1 == k {print $2}' "$out"; }
check "the soak run exits 0 ($rc)" test "$rc" -eq 0
check "churn ran: $(v soak_execs) execs, $(v soak_dlopens) dlopens, $(v soak_containers) containers" \
	test "$(($(v soak_execs) + 0))" -gt 0 -a "$(($(v soak_dlopens) + 0))" -gt 0
check "the collector ran three times (stopped and started twice)" test "$(v soak_collector_runs)" = 3
check "every sample accounted for: $(v soak_samples_counted) counted = $(v soak_samples_stored) stored + $(v soak_samples_lost_counted) lost (counted)" \
	test "$(v soak_accounting_balanced)" = 1
check "the spool's full disk made the agent count lost batches" \
	test "$(($(v soak_samples_lost_counted) + 0))" -gt 0
check "no sanitizer report from agent or collector" test "$(v soak_sanitizer_reports)" = 0
check "the agent exited 0 with its spool sent" test "$(v soak_agent_exit)" = 0
for p in agent collector; do
	check "$p RSS flat, loosely ($(v soak_${p}_rss_kib_first) -> max $(v soak_${p}_rss_kib_max) KiB)" \
		test "$(v soak_${p}_rss_kib_max)" -le "$((2 * $(v soak_${p}_rss_kib_first)))"
	check "$p descriptors flat ($(v soak_${p}_fds_first) -> max $(v soak_${p}_fds_max))" \
		test "$(v soak_${p}_fds_max)" -le "$(($(v soak_${p}_fds_first) + 16))"
done
# RSS also holds SQLite's page cache filling to its bound and memory the
# allocator keeps; the heap in use less SQLite's is what a leak would grow
h0=$(v soak_collector_heap_less_store_kib_first)
check "collector heap in use, less SQLite's, flat ($h0 -> max $(v soak_collector_heap_less_store_kib_max) KiB)" \
	test -n "$h0" -a "$(v soak_collector_heap_less_store_kib_max)" -le "$((2 * ${h0:-0} + 1024))"
finish
