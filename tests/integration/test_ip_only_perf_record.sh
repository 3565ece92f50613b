#!/usr/bin/env bash
# A recording made here, without a branch-stack PMU: `perf record -e
# cpu-clock --buildid-mmap` of a workload. edgeprof warns it is IP-only,
# finds the binary by the build-id inside the MMAP2 records alone
# (--buildid-mmap writes no build-id feature section, and the file is
# renamed, so no path matches), and names the same hottest function as
# `perf report`, with about the same share of the binary's samples.
source "$(dirname "$0")/lib.sh"

cc -O1 -g -o "$TEST_TMP/hot_cold" "$(dirname "$0")/../workloads/hot_cold.c"
if ! perf record -q -e cpu-clock -c 100000 --buildid-mmap -o "$TEST_TMP/ip.data" \
	-- "$TEST_TMP/hot_cold" 60000000 >/dev/null 2>"$TEST_TMP/rec.err"; then
	cat "$TEST_TMP/rec.err"
	not_ok "perf record -e cpu-clock works here"
	finish
fi
ok "perf record -e cpu-clock works here"
# the share of the binary's own samples, as edgeprof's report gives it: of all
# samples, the kernel's part (page faults, a VM's interrupt handling) moves it
# by several points on a loaded machine
perf_share=$(perf report -i "$TEST_TMP/ip.data" --stdio --dsos hot_cold --percentage relative \
	--sort sym 2>/dev/null | awk '/hot_loop/ {sub("%", "", $1); print $1; exit}')
mv "$TEST_TMP/hot_cold" "$TEST_TMP/renamed_binary"

"$EDGEPROF" import "$TEST_TMP/ip.data" --binary "$TEST_TMP/renamed_binary" \
	-o "$TEST_TMP/ip.prof" 2>"$TEST_TMP/import.err"
check "import of an IP-only recording succeeds" test $? -eq 0
check "says in one line that the profile is IP-only" grep -q 'IP-only profile' "$TEST_TMP/import.err"
"$EDGEPROF" export "$TEST_TMP/ip.prof" --format json -o "$TEST_TMP/ip.json"
want_id=$(readelf -n "$TEST_TMP/renamed_binary" | awk '/Build ID/ {print $3}')
got=$(jq -r --arg id "$want_id" '[.profiles[] | select(.build_id == $id) | .ips[].count] | add' \
	"$TEST_TMP/ip.json")
check "the renamed binary was found by its MMAP2 build-id" test "${got:-0}" -gt 100
"$EDGEPROF" report "$TEST_TMP/ip.prof" >"$TEST_TMP/report.txt"
our_share=$(awk '/hot_loop$/ {sub("%", "", $3); print $3; exit}' "$TEST_TMP/report.txt")
first=$(awk '/hottest functions/ {getline; getline; print $NF; exit}' "$TEST_TMP/report.txt")
echo "# hot_loop: perf report ${perf_share:-?}%, edgeprof ${our_share:-?}% of the binary's samples"
check "hottest function is hot_loop, as perf report says" test "$first" = hot_loop
check "hot_loop's share matches perf report's within 2 points" \
	python3 -c "import sys; sys.exit(abs(float('${our_share:-0}') - float('${perf_share:-100}')) > 2)"
finish
