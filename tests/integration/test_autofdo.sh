#!/usr/bin/env bash
# The README's AutoFDO route, end to end, on a small program built by clang-14
# with its default DWARF 5, non-PIE and PIE:
#   edgeprof record --emulate -> export --format profgen
#   -> llvm-profgen-14 --unsymbolized-profile --use-offset=false
#   -> clang-14 -fprofile-sample-use -fprofile-sample-accurate
# - clang accepts the profile, silently, and gives hot() and cold() entry
#   counts in the ratio of their calls (exact: 100); the profile's counts
#   are estimated executions: hot()'s head samples are about its calls;
# - never(), which did not run, is cold as instrumented PGO makes it: entry
#   count 0 and placed in .text.unlikely (without -fprofile-sample-accurate
#   clang takes a function without samples for unknown and leaves it among
#   the warm code: zstd's I1 misses went from 0.72 to 0.80 of PGO's saving
#   with it, README, AutoFDO), while hot() is placed in .text.hot;
# - the profile's hottest function is the one whose branches ran most (the
#   emulator's exact counts), hot()'s hottest line runs as many times per call
#   as its loop's trip count (exact: 40), and the helper inlined into main is
#   a callsite under its own name (create_llvm_prof 0.19 writes those names
#   from freed memory: the reason the README routes through llvm-profgen);
# - the peer: llvm-profgen-14 reads the same run's perf.data
#   (--perf-data, one MMAP2 per executable segment as the kernel maps them)
#   and finds the same shape.
# - what the README says of create_llvm_prof 0.19 still holds: from this DWARF 5
#   build it writes an empty profile, and from a DWARF 4 build it loses the
#   inlined callee's name, from our export and from a hand-written range alike
#   (if these fail, the tool changed: revisit the README).
# Ratios are checked within 25% of the exact ones: the recording is seeded,
# ~300 sampled calls of cold() make the sampling error ~6%.
source "$(dirname "$0")/lib.sh"

here=$(cd "$(dirname "$0")" && pwd)
w=$TEST_TMP
for tool in clang-14 llvm-profgen-14; do
	command -v "$tool" >/dev/null || {
		not_ok "$tool is installed (make deps: clang, llvm-14)"
		finish
	}
done
src=$here/../workloads/afdo_calls.c
# within A B: A is within 25% of B (B > 0)
within() { python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(not abs(a - b) <= 0.25 * b)" "$1" "$2"; }

for kind in nopie pie; do
	cflags=(-O2 -g -fdebug-info-for-profiling -fno-pie)
	lflags=(-no-pie)
	[ $kind = pie ] && cflags=(-O2 -g -fdebug-info-for-profiling -fPIE) && lflags=(-pie)
	d=$w/$kind
	mkdir -p "$d"
	b=$d/afdo_calls
	clang-14 "${cflags[@]}" "${lflags[@]}" -o "$b" "$src"
	check "$kind: clang-14's default debug info is DWARF 5" \
		bash -c "readelf --debug-dump=info '$b' 2>/dev/null | grep -m1 -q 'Version:.*5'"

	"$EDGEPROF" record --emulate --period 1009 --seed 7 --exact-out "$d/exact.json" \
		--perf-data "$d/run.data" -o "$d/run.prof" -- "$b" 1000000 >/dev/null 2>"$d/record.err"
	check "$kind: record --emulate" test $? -eq 0
	"$EDGEPROF" export "$d/run.prof" --format profgen -o "$d/run.profgen"
	check "$kind: export --format profgen" test $? -eq 0
	llvm-profgen-14 --binary="$b" --unsymbolized-profile="$d/run.profgen" --use-offset=false \
		--output="$d/run.afdo" --format=text >"$d/profgen.out" 2>&1
	check "$kind: llvm-profgen-14 reads the export" test $? -eq 0 -a -s "$d/run.afdo"

	# clang with the profile, as the README says: no word on stderr, entry counts in the IR
	use=(-fprofile-sample-use="$d/run.afdo" -fprofile-sample-accurate)
	clang-14 "${cflags[@]}" "${use[@]}" -S -emit-llvm -o "$d/run.ll" "$src" 2>"$d/clang.err"
	check "$kind: clang-14 -fprofile-sample-use accepts the profile" test $? -eq 0
	check "$kind: clang-14 says nothing about the profile" test ! -s "$d/clang.err"
	sed 's/^/# clang: /' "$d/clang.err" | head -5
	# the sections the functions land in (objdump -t: ADDR FLAGS SECTION SIZE NAME)
	clang-14 "${cflags[@]}" "${use[@]}" -c -o "$d/run.o" "$src"
	section() { objdump -t "$d/run.o" | awk -v f="$1" '$NF == f && $(NF - 3) == "F" { print $(NF - 2) }'; }
	check "$kind: never() (no samples) is placed in .text.unlikely ($(section never))" \
		test "$(section never)" = .text.unlikely.
	check "$kind: hot() is placed in .text.hot ($(section hot))" test "$(section hot)" = .text.hot.

	python3 "$here/afdo_profile.py" "$d/exact.json" "$b" "$d/run.afdo" "$d/run.ll" >"$d/facts"
	sed "s/^/# $kind: /" "$d/facts"
	f() { awk -v k="$1" '$1 == k { print $2 }' "$d/facts"; }
	ratio() { python3 -c "import sys; print(float(sys.argv[1]) / float(sys.argv[2]))" "$1" "$2"; }
	exact_ratio=$(ratio "$(f exact_calls_hot)" "$(f exact_calls_cold)")
	check "$kind: the profile's hottest function is the exact counts' ($(f exact_hottest))" \
		test "$(f profile_hottest)" = "$(f exact_hottest)"
	check "$kind: head samples hot/cold within 25% of the exact calls' ratio ($exact_ratio)" \
		within "$(ratio "$(f profile_head_hot)" "$(f profile_head_cold)")" "$exact_ratio"
	# the export writes estimated executions (counts times period / chop), so
	# the head samples are calls, not sampled calls: clang adds 1 to every
	# weight, which on counts of a few samples misjudges rarely run code
	check "$kind: head samples of hot() within 25% of its exact calls ($(f exact_calls_hot))" \
		within "$(f profile_head_hot)" "$(f exact_calls_hot)"
	check "$kind: clang's entry counts hot/cold within 25% of the exact calls' ratio" \
		within "$(ratio "$(f ir_entry_hot)" "$(f ir_entry_cold)")" "$exact_ratio"
	check "$kind: hot()'s hottest line per call within 25% of its loop's exact trips ($(f exact_trips_hot))" \
		within "$(f profile_trips_hot)" "$(f exact_trips_hot)"
	check "$kind: main's profile names its inlined callee mix" test "$(f profile_inlined_mix)" = 1
	check "$kind: clang's entry count of never() (no samples) is 0 ($(f ir_entry_never))" \
		test "$(f ir_entry_never)" = 0

	# the peer: llvm-profgen on the perf.data of the same run
	perf script -i "$d/run.data" --show-mmap-events 2>/dev/null | grep "PERF_RECORD_MMAP2.* $b\$" >"$d/mmaps"
	off=$(readelf -lW "$b" | awk '$1 == "LOAD" && / E +0x[0-9a-f]+$/ { print $2; exit }')
	check "$kind: perf.data maps the binary's code segment at its page offset ($off)" \
		grep -q "@ $(printf '0x%x' $((off & ~0xfff))) " "$d/mmaps"
	llvm-profgen-14 --binary="$b" --perfdata="$d/run.data" --output="$d/peer.afdo" \
		--format=text >"$d/peer.out" 2>&1
	check "$kind: llvm-profgen-14 reads the emulator's perf.data" test $? -eq 0 -a -s "$d/peer.afdo"
	python3 "$here/afdo_profile.py" "$d/exact.json" "$b" "$d/peer.afdo" >"$d/peer.facts"
	g() { awk -v k="$1" '$1 == k { print $2 }' "$d/peer.facts"; }
	check "$kind: perf.data -> llvm-profgen: hottest function $(f exact_hottest)" \
		test "$(g profile_hottest)" = "$(f exact_hottest)"
	check "$kind: perf.data -> llvm-profgen: head samples hot/cold within 25% of $exact_ratio" \
		within "$(ratio "$(g profile_head_hot)" "$(g profile_head_cold)")" "$exact_ratio"
done

# create_llvm_prof 0.19 (README, AutoFDO: why the route avoids it)
d=$w/nopie
"$EDGEPROF" export "$d/run.prof" --format afdo -o "$d/run.afdo.txt"
create_llvm_prof --profiler text --profile "$d/run.afdo.txt" --binary "$d/afdo_calls" \
	--out "$d/cllp5.txt" --format text >/dev/null 2>&1
check "create_llvm_prof 0.19 writes an empty profile from a DWARF 5 build" test ! -s "$d/cllp5.txt"
b4=$w/afdo_calls_dwarf4
clang-14 -O2 -gdwarf-4 -fdebug-info-for-profiling -fno-pie -no-pie -o "$b4" "$src"
"$EDGEPROF" record --emulate --period 1009 --seed 7 -o "$w/d4.prof" -- "$b4" 1000000 >/dev/null 2>&1
"$EDGEPROF" export "$w/d4.prof" --format afdo -o "$w/d4.afdo.txt"
create_llvm_prof --profiler text --profile "$w/d4.afdo.txt" --binary "$b4" --out "$w/cllp4.txt" \
	--format text >/dev/null 2>&1
check "create_llvm_prof 0.19 profiles hot() from a DWARF 4 build" grep -q '^hot:[0-9]*:[1-9]' "$w/cllp4.txt"
# callsite headers: " LINE: NAME:COUNT", where a body line is " LINE: COUNT ..."
LC_ALL=C awk '/^ [0-9.]+: / && !/^ [0-9.]+: [0-9]+( |$)/' "$w/cllp4.txt" >"$w/cllp4.callsites"
sed 's/^/# create_llvm_prof callsite:/' "$w/cllp4.callsites" | cat -v
check "create_llvm_prof 0.19 loses the inlined callee's name (mix) there" \
	bash -c "[ -s '$w/cllp4.callsites' ] && ! grep -aq ': mix:' '$w/cllp4.callsites'"
# not our export's doing: one hand-written range over main (file offsets)
read -r segoff segva < <(readelf -lW "$b4" | awk '$1 == "LOAD" && / E +0x[0-9a-f]+$/ { print $2, $3; exit }')
read -r ma mz < <(nm -S "$b4" | awk '$4 == "main" { print $1, $2 }')
lo=$((16#$ma - segva + segoff))
printf '1\n%x-%x:1000\n0\n0\n' "$lo" $((lo + 16#$mz - 1)) >"$w/hand.txt"
create_llvm_prof --profiler text --profile "$w/hand.txt" --binary "$b4" --out "$w/hand.afdo" \
	--format text >/dev/null 2>&1
LC_ALL=C awk '/^ [0-9.]+: / && !/^ [0-9.]+: [0-9]+( |$)/' "$w/hand.afdo" >"$w/hand.callsites"
check "create_llvm_prof 0.19 loses it from a hand-written range over main too" \
	bash -c "[ -s '$w/hand.callsites' ] && ! grep -aq ': mix:' '$w/hand.callsites'"
finish
