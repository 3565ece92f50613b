#!/usr/bin/env bash
# A profile of one build laid out on the next (issue 35), against BOLT 19:
# bench/fdo/next_build.sh records tests/workloads/next_build.c's version A
# under the emulator, exports fdata, has llvm-bolt-19 write it as YAML with
# A's hashes, and gives that YAML to llvm-bolt-19 -infer-stale-profile on
# version B (code inserted in every hot function). Checked:
#  - the edit is real: A and B print the same, and BOLT finds every
#    function of A's YAML that B edits stale on B (hashes differ);
#  - BOLT infers a profile for every stale function (its log);
#  - every BOLTed B prints what B printed;
#  - B BOLTed with A's profile saves at least 0.8 of the taken branches that
#    B's own profile saves (the emulator's exact counts), and without
#    -infer-stale-profile, or with A's fdata as it is (offsets in A's
#    code), next to none (below 0.2): the matching, not an unchanged
#    function, is what carries the profile over;
#  - without the block hashes (set to 0) BOLT matches less and the fraction
#    falls below 0.8: the hashes llvm-bolt wrote are what it matches by;
#  - AutoFDO (clang-14, llvm-profgen-14), whose profile is keyed by line
#    offsets in each function: A's profile saves at least 0.3 of what B's
#    own saves when the edit moves no line of a function (0.498: what it
#    saves on A itself), and less than 0.2 when it inserts lines into each
#    hot function.
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
bolt=llvm-bolt-19
if ! command -v "$bolt" >/dev/null; then
	not_ok "BOLT 19 is installed (Debian package bolt-19)"
	
if command -v clang-14 >/dev/null && command -v llvm-profgen-14 >/dev/null; then
	check "AutoFDO: B's own profile saves taken branches" \
		test "$(fig fdo_stale_autofdo_taken_branches_fresh)" -lt "$(fig fdo_stale_autofdo_taken_branches_none)"
	for k in none fresh stale same_lines; do
		check "AutoFDO: B built $k prints what B printed" cmp -s "$w/af_B.out" "$w/af_B.$k.run.out"
	done
	f=$(fig fdo_stale_autofdo_same_lines_fraction)
	check "AutoFDO: A's profile, no line of a function moved, saves >= 0.3 ($f)" at_least "$f" 0.3
	f=$(fig fdo_stale_autofdo_fraction)
	check "AutoFDO: A's profile, lines inserted in each hot function, saves < 0.2 ($f)" below "$f" 0.2
fi
finish
fi
w=$TEST_TMP/nb
NEXT_BUILD_DIR=$w EDGEPROF=$EDGEPROF bash "$here/../../bench/fdo/next_build.sh" >"$w.lines" 2>"$w.err"
check "next_build.sh exits 0" test $? -eq 0
sed 's/^/# /' "$w.lines" "$w.err"
fig() { sed -n "s/^$1: //p" "$w.lines"; }
# at_least X Y: X >= Y, decimals
at_least() { python3 -c 'import sys; sys.exit(not float(sys.argv[1]) >= float(sys.argv[2]))' "$1" "$2"; }

check "A and B print the same" cmp -s "$w/A.out" "$w/B.out"
check "A's YAML carries BOLT's hashes" grep -q '^  hash-func: *xxh3' "$w/A.yaml"
# rare(), the one function B leaves alone, has a profile only when sampled
nprof=$(grep '^  - name:' "$w/A.yaml" | grep -vc "'rare/1'")
check "every function of A's YAML that B edits is stale on B ($(fig fdo_stale_functions) of $nprof)" \
	test "$(fig fdo_stale_functions)" = "$nprof"
check "BOLT inferred a profile for each ($(fig fdo_stale_inferred_functions))" \
	test "$(fig fdo_stale_inferred_functions)" = "$nprof"
for k in fresh stale no_infer; do
	check "B BOLTed ($k) prints what B printed" cmp -s "$w/B.out" "$w/B.$k.run.out"
done
check "B's own profile saves taken branches" \
	test "$(fig fdo_stale_taken_branches_fresh)" -lt "$(fig fdo_stale_taken_branches_unbolted)"
f=$(fig fdo_stale_next_build_fraction)
check "A's profile on B saves >= 0.8 of what B's own saves ($f)" at_least "$f" 0.8
below() { ! at_least "$1" "$2"; }
f=$(fig fdo_stale_no_infer_fraction)
check "without -infer-stale-profile it saves < 0.2 ($f)" below "$f" 0.2
f=$(fig fdo_stale_fdata_fraction)
check "A's fdata as it is (what a new build got before) saves < 0.2 ($f)" below "$f" 0.2

# the same with A's block hashes zeroed: the fraction must fall, or the test
# above would pass without BOLT matching blocks by hash at all
sed -E 's/^(        hash: *)0x[0-9A-F]+/\10x0/' "$w/A.yaml" >"$w/A.nohash.yaml"
"$bolt" "$w/B" -data "$w/A.nohash.yaml" -infer-stale-profile -o "$w/B.nohash" \
	-reorder-blocks=ext-tsp -reorder-functions=hfsort -split-functions -split-all-cold \
	>"$w/B.nohash.log" 2>&1
"$EDGEPROF" record --emulate --period 1000000 --exact-out "$w/nohash.json" -o "$w/nohash.prof" \
	-- "$w/B.nohash" >"$w/nohash.out" 2>/dev/null
nohash=$(python3 -c '
import json, os, sys
real = os.path.realpath(sys.argv[1])
for p in json.load(open(sys.argv[2]))["profiles"]:
    if real in {os.path.realpath(x) for x in p.get("paths") or [p.get("path")]}:
        print(sum(e["count"] for e in p["branches"] if e["taken"]))' "$w/B.nohash" "$w/nohash.json")
fn=$(python3 -c 'import sys; u, f, s = map(int, sys.argv[1:]); print("%.3f" % ((u - s) / (u - f)))' \
	"$(fig fdo_stale_taken_branches_unbolted)" "$(fig fdo_stale_taken_branches_fresh)" "${nohash:-0}")
echo "# without block hashes: taken branches $nohash, fraction $fn"
check "block hashes zeroed: the fraction falls below 0.8 ($fn)" below "$fn" 0.8

if command -v clang-14 >/dev/null && command -v llvm-profgen-14 >/dev/null; then
	check "AutoFDO: B's own profile saves taken branches" \
		test "$(fig fdo_stale_autofdo_taken_branches_fresh)" -lt "$(fig fdo_stale_autofdo_taken_branches_none)"
	for k in none fresh stale same_lines; do
		check "AutoFDO: B built $k prints what B printed" cmp -s "$w/af_B.out" "$w/af_B.$k.run.out"
	done
	f=$(fig fdo_stale_autofdo_same_lines_fraction)
	check "AutoFDO: A's profile, no line of a function moved, saves >= 0.3 ($f)" at_least "$f" 0.3
	f=$(fig fdo_stale_autofdo_fraction)
	check "AutoFDO: A's profile, lines inserted in each hot function, saves < 0.2 ($f)" below "$f" 0.2
fi
finish
