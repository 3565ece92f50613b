#!/usr/bin/env bash
# `edgeprof record --emulate --perf-data F` writes a `perf record -b` file:
# - perf reads it without a complaint: the header names the event and the
#   sample type, `perf script -F ip,brstack` prints every sample's stack and
#   equals `edgeprof dump` of the same file;
# - the stacks are the ones the emulator sampled: importing the file gives
#   the record's own profile, edge for edge and range for range (same chop),
#   for the branches event and the raw taken event;
# - the peers accept it: perf2bolt finds the binary by build-id and reads
#   every sample (non-PIE and PIE), create_llvm_prof writes a profile of the
#   hot function;
# - a truncated file is refused by our import with the byte offset.
source "$(dirname "$0")/lib.sh"

here=$(dirname "$0")
w=$TEST_TMP/w
mkdir -p "$w"
perf2bolt=/usr/lib/llvm-16/bin/perf2bolt
norm() { sed -e 's/[[:space:]]\+/ /g' -e 's/^ //' -e 's/ $//'; }
# the profiles without the paths a --binary adds
edges() { "$EDGEPROF" export "$1" --format json | jq -S '[.profiles[] | del(.paths)]'; }

# -gdwarf-4: create_llvm_prof 0.19 reads no DWARF 5 (issue 19)
cc -O2 -gdwarf-4 -no-pie -Wl,--emit-relocs -o "$w/hot_cold" "$here/../workloads/hot_cold.c"
cc -O2 -gdwarf-4 -pie -fPIE -Wl,--emit-relocs -o "$w/hot_cold_pie" "$here/../workloads/hot_cold.c"
cc -O2 -gdwarf-4 -no-pie -Wl,--emit-relocs -o "$w/interp" "$here/../workloads/interp.c"

for spec in hot_cold:branches:300000 interp:branches:100000 interp:taken:100000 \
	hot_cold_pie:branches:300000; do
	IFS=: read -r name event arg <<<"$spec"
	t="$name/$event"
	f=$w/$name.$event
	"$EDGEPROF" record --emulate --event "$event" --period 1009 --seed 7 \
		--perf-data "$f.data" -o "$f.prof" -- "$w/$name" "$arg" >/dev/null 2>"$f.err"
	if [ $? -ne 0 ]; then
		not_ok "$t: record --emulate --perf-data"
		cat "$f.err"
		continue
	fi
	n=$(jq .stats.samples <("$EDGEPROF" export "$f.prof" --format json))
	echo "# $t: $n samples"

	perf report -i "$f.data" --header-only >"$f.hdr" 2>&1
	want="name = branches:u, , id = { 1 }, size = 128, config = 0x4,"
	[ "$event" = taken ] && want="name = r20c4:u, , id = { 1 }, type = 4, size = 128, config = 0x20c4,"
	check "$t: perf's header names the event ($want)" grep -qF "$want" "$f.hdr"
	check "$t: perf's header: sample type, branch stack, sample_id_all" grep -qE \
		'sample_type = IP\|TID\|TIME\|CPU\|PERIOD\|BRANCH_STACK,.*sample_id_all = 1,.*branch_sample_type = USER\|ANY' "$f.hdr"
	check "$t: perf's header: build-id, arch, cpuid, branch-stack features present" \
		bash -c "! grep -E '^# missing features:.*( BUILD_ID | ARCH | CPUID | BRANCH_STACK )' '$f.hdr'"
	perf buildid-list -i "$f.data" >"$f.bid" 2>&1
	check "$t: perf buildid-list names the binary with its build-id" \
		grep -qx "$(readelf -n "$w/$name" | awk '/Build ID/ {print $3}') $w/$name" "$f.bid"

	# QEMU's own mappings share the guest's address space: only the guest's may be listed
	perf script -i "$f.data" --show-mmap-events 2>/dev/null | awk '/PERF_RECORD_MMAP2/ {print $NF}' |
		sort -u >"$f.mmaps"
	check "$t: the mappings in perf.data are the guest's ($(tr '\n' ' ' <"$f.mmaps")), none of QEMU's" \
		bash -c "grep -qx '$w/$name' '$f.mmaps' && ! grep -Eq 'qemu|edgeprof-lbr|libglib|libcapstone' '$f.mmaps'"
	perf script -i "$f.data" -F ip,brstack 2>"$f.ps.err" | norm >"$f.ps"
	"$EDGEPROF" dump "$f.data" | norm >"$f.dump"
	check "$t: perf script prints every sample ($(wc -l <"$f.ps") of $n)" test "$(wc -l <"$f.ps")" -eq "$n"
	check "$t: perf script says nothing on stderr" test ! -s "$f.ps.err"
	check "$t: perf script -F ip,brstack equals edgeprof dump" cmp -s "$f.ps" "$f.dump"

	# record chops the taken event in taken branches (N-1 of them); so does import, told
	unit=()
	[ "$event" = taken ] && unit=(--chop-unit taken)
	"$EDGEPROF" import "$f.data" --binary "$w/$name" "${unit[@]}" -o "$f.imp.prof" 2>/dev/null
	check "$t: import of the perf.data gives the record's profile, edge for edge" \
		cmp -s <(edges "$f.prof") <(edges "$f.imp.prof")
	if [ "$event" = taken ]; then
		"$EDGEPROF" import "$f.data" --binary "$w/$name" -o "$f.imp2.prof" 2>"$f.imp2.err"
		check "$t: import without --chop-unit warns that the taken event's chop is in branches" \
			grep -q "event .*20c4 counts taken branches only.*--chop-unit taken" "$f.imp2.err"
	fi
done

# the peers' tools
for name in hot_cold hot_cold_pie interp; do
	f=$w/$name.branches
	n=$(jq .stats.samples <("$EDGEPROF" export "$f.prof" --format json))
	"$perf2bolt" -p "$f.data" -o "$f.fdata" "$w/$name" >"$f.p2b" 2>&1
	check "$name: perf2bolt exits 0" test $? -eq 0
	grep -E 'samples|traces|build-id|wrote' "$f.p2b" | sed 's/^/# /'
	check "$name: perf2bolt matches the binary by build-id" grep -q 'matched build-id and file name' "$f.p2b"
	check "$name: perf2bolt reads all $n samples, ignores none" \
		bash -c "grep -q 'read $n samples' '$f.p2b' && grep -q '^PERF2BOLT: 0 samples (0.0%) were ignored' '$f.p2b'"
	check "$name: perf2bolt finds no trace mismatching the code" \
		grep -q 'traces mismatching disassembled function contents: 0 (0.0%)' "$f.p2b"
	check "$name: perf2bolt has no misprediction-bit warning" bash -c "! grep -q 'misprediction bit is missing' '$f.p2b'"
	hot=hot_loop
	[ "$name" = interp ] && hot=main
	check "$name: the fdata counts $hot" grep -q " $hot" "$f.fdata"

	create_llvm_prof --profile="$f.data" --binary="$w/$name" --format=text \
		--out="$f.afdo.txt" >"$f.cllp" 2>&1
	check "$name: create_llvm_prof exits 0" test $? -eq 0
	head_line=$(grep -a -m1 "^$hot:" "$f.afdo.txt")
	echo "# $name: create_llvm_prof: $head_line ($(wc -l <"$f.afdo.txt") lines)"
	check "$name: create_llvm_prof profiles $hot with samples" \
		test "$(echo "$head_line" | cut -d: -f2)" -gt 0
done

f=$w/hot_cold.branches
size=$(stat -c %s "$f.data")
head -c $((size / 2)) "$f.data" >"$w/cut.data"
"$EDGEPROF" import "$w/cut.data" --binary "$w/hot_cold" -o "$w/cut.prof" 2>"$w/cut.err"
check "a truncated perf.data: import exits 1" test $? -eq 1
check "a truncated perf.data: says where it is cut" grep -qE 'cut.data: byte [0-9]+: .*cut off' "$w/cut.err"
check "a truncated perf.data: the samples before the cut are kept" test -s "$w/cut.prof"
"$EDGEPROF" record --emulate --perf-data /nonexistent/x.data -o "$w/x.prof" -- "$w/hot_cold" 10 >"$w/x.out" 2>"$w/x.err"
check "an unwritable --perf-data: exit 1 and the reason, before running the program" \
	bash -c "[ $? -eq 1 ] && grep -q '/nonexistent/x.data: cannot create' '$w/x.err' && [ ! -s '$w/x.out' ]"
finish
