#!/usr/bin/env bash
# The LBR emulator on aarch64 programs (issue 15 item 2): `edgeprof record
# --emulate` sees an aarch64 ELF and runs it under qemu-aarch64 with the same
# plugin, which records BRBE's shape (up to 64 entries, each with its branch
# type). Workloads are cross-built with Debian's gcc-aarch64-linux-gnu,
# dynamic (the arm64 libc of libc6-dev-arm64-cross) and static, plain and
# with pointer authentication (RETAA, BLRAA...). For each:
# - the sampled, reconstructed, chopped profile matches the emulator's exact
#   counts (overlap of conditional edges >= 0.95, the x86 test's threshold),
#   with no inconsistent gap;
# - the --perf-data file reads back the same through perf script and
#   through our import; in it, as perf script reads it, every entry's source is a
#   branch by aarch64-linux-gnu-objdump and its type is that branch's
#   (aarch64_branch_sources.py), the header says aarch64, and a sample holds
#   up to 64 entries;
# - the exact counts equal QEMU's own execution log's (qemu_exec_edges.py:
#   `-d in_asm,exec,nochain`, QEMU's core rather than our plugin, and
#   objdump's reading of each block's last instruction) on every edge
#   within the binary, non-PIE so the log's addresses are the binary's;
# - report and export name the functions; the same seed gives the same
#   profile; a program of another machine is refused with its machine named.
source "$(dirname "$0")/lib.sh"

here=$(dirname "$0")
w=$TEST_TMP/w
mkdir -p "$w"
xcc=aarch64-linux-gnu-gcc
# NAME:SOURCE:ARG:CFLAGS, an argument that keeps each run well under a second
for spec in hot_cold:hot_cold:2000000: interp:interp:200000: recursion:recursion:20: \
	random_branches:random_branches:200000: state_machine:state_machine:300000: \
	libc_calls:libc_calls:20: static:hot_cold:1000000:-static \
	pac_state_machine:state_machine:300000:-march=armv8.3-a+-mbranch-protection=standard \
	pac_recursion:recursion:20:-march=armv8.3-a+-mbranch-protection=standard; do
	IFS=: read -r name src arg flags <<<"$spec"
	# shellcheck disable=SC2086 # the flags are words
	$xcc -O1 -g ${flags//+/ } -o "$w/$name" "$here/../workloads/$src.c"
	"$EDGEPROF" record --emulate --lbr 64 --period 1009 --exact-out "$w/$name.exact.json" \
		--perf-data "$w/$name.data" -o "$w/$name.prof" -- "$w/$name" "$arg" \
		>/dev/null 2>"$w/$name.err"
	if [ $? -ne 0 ]; then
		not_ok "$name: record --emulate"
		cat "$w/$name.err"
		continue
	fi
	"$EDGEPROF" export "$w/$name.prof" --format json -o "$w/$name.json"
	arch=$(jq -r --arg p "$w/$name" '.profiles[] | select(.path == $p) | .arch' "$w/$name.json")
	check "$name: the profile's binary is aarch64 ($arch)" test "$arch" = aarch64
	check_sampled_vs_exact "$w" "$name"
	python3 "$here/aarch64_branch_sources.py" "$w/$name.data" >"$w/$name.src" 2>&1
	rc=$?
	sed 's/^/# /' "$w/$name.src"
	check "$name: every entry's source is a branch by objdump, of the entry's type" \
		test $rc -eq 0
done

# The exact counts against QEMU's execution log (issue 15 item 3). Both runs
# get an empty environment: a static libc's strlen and strrchr count the
# bytes of the environment (bash's $_ differs between the two commands).
for spec in hot_cold:hot_cold:200000: interp:interp:5000: state_machine:state_machine:30000: \
	libc_calls:libc_calls:5: static_libc_calls:libc_calls:5:-static \
	pac_recursion:recursion:15:-march=armv8.3-a+-mbranch-protection=standard; do
	IFS=: read -r name src arg flags <<<"$spec"
	b=$w/np_$name
	# shellcheck disable=SC2086 # the flags are words
	$xcc -O1 -g -no-pie ${flags//+/ } -o "$b" "$here/../workloads/$src.c"
	env -i "$(command -v qemu-aarch64)" -L /usr/aarch64-linux-gnu -d in_asm,exec,nochain \
		-D "$b.log" "$b" "$arg" >/dev/null
	env -i "$EDGEPROF" record --emulate --exact-out "$b.exact.json" -o "$b.prof" \
		-- "$b" "$arg" >/dev/null 2>&1
	python3 "$here/qemu_exec_edges.py" "$b.log" "$b.exact.json" "$b" >"$b.cmp" 2>&1
	rc=$?
	sed 's/^/# /' "$b.cmp"
	check "$name: exact counts equal QEMU's execution log on every edge in the binary" \
		test $rc -eq 0
	rm -f "$b.log"
done

# the pointer-authenticated forms were run and recorded as what they are
check "pac: authenticated returns (retaa) were run and recorded as returns" \
	grep -Eq '(^|, )retaa [1-9]' "$w/pac_recursion.src"

perf report -i "$w/hot_cold.data" --header-only --stdio >"$w/header.txt" 2>&1
check "perf.data header: arch aarch64, an Arm MIDR, branch types saved" \
	bash -c "grep -q '^# arch : aarch64' '$w/header.txt' && grep -q '^# cpuid : 0x' '$w/header.txt' &&
		grep -q 'branch_sample_type = .*TYPE_SAVE' '$w/header.txt'"
# the perf.data back through perf and through our import
norm() { sed -e 's/[[:space:]]\+/ /g' -e 's/^ //' -e 's/ $//'; }
edges() { "$EDGEPROF" export "$1" --format json | jq -S '[.profiles[] | del(.paths)]'; }
for name in hot_cold libc_calls; do
	perf script -i "$w/$name.data" -F ip,brstack 2>/dev/null | norm >"$w/$name.ps"
	"$EDGEPROF" dump "$w/$name.data" | norm >"$w/$name.dump"
	check "$name: perf script -F ip,brstack equals edgeprof dump, branch types included" \
		bash -c "test -s '$w/$name.ps' && cmp -s '$w/$name.ps' '$w/$name.dump'"
	"$EDGEPROF" import "$w/$name.data" --binary "$w/$name" -o "$w/$name.imp.prof" 2>/dev/null
	check "$name: import of the perf.data gives the record's profile, edge for edge" \
		cmp -s <(edges "$w/$name.prof") <(edges "$w/$name.imp.prof")
done
# QEMU's own mappings (x86-64 files) share the guest's address space: only the guest's are listed
perf script -i "$w/libc_calls.data" --show-mmap-events 2>/dev/null |
	awk '/PERF_RECORD_MMAP2/ {print $NF}' | sort -u >"$w/mmaps"
machines=$(xargs -n1 aarch64-linux-gnu-readelf -h <"$w/mmaps" | awk '/Machine:/ {$1 = ""; print}' | sort | uniq -c | tr -s ' ')
check "perf.data's mappings ($(tr '\n' ' ' <"$w/mmaps")) are the guest's, all aarch64 ($machines)" \
	bash -c "grep -qx '$w/libc_calls' '$w/mmaps' && [ '$machines' = ' $(wc -l <"$w/mmaps") AArch64' ]"
most=$(perf script -i "$w/interp.data" -F brstack 2>/dev/null | awk '{ if (NF > m) m = NF } END { print m + 0 }')
check "BRBE's shape: a sample holds up to 64 entries, full ones have 64 ($most)" test "$most" -eq 64

"$EDGEPROF" report "$w/hot_cold.prof" >"$w/report.txt" 2>&1
first=$(grep -A2 -m1 'hottest functions by branches' "$w/report.txt" | sed -n 3p)
check "report: hot_loop is the hottest function of the aarch64 binary ($first)" \
	bash -c "[[ '$first' == *' hot_loop' ]]"
own=$(jq -r --arg p "$w/libc_calls" '.profiles[] | select(.path == $p) | .functions[].name' \
	"$w/libc_calls.json" | sort | tr '\n' ' ')
libc=$(jq -r '.profiles[] | select(.path | endswith("/libc.so.6")) | .functions[].name' \
	"$w/libc_calls.json" | sort | tr '\n' ' ')
echo "# libc_calls: sampled functions $own; in the arm64 libc: $libc"
check "export: libc_calls' sampled functions are named, its own (cmp_int, main) and libc's" \
	bash -c "[[ ' $own' == *' cmp_int '* && ' $own' == *' main '* && '$libc' =~ [a-z_]+ ]]"

# the taken-branches event, chopped in taken branches (N-1 of them), as on x86
"$EDGEPROF" record --emulate --event taken --period 101 -o "$w/taken.prof" \
	-- "$w/state_machine" 300000 >/dev/null 2>&1
"$EDGEPROF" export "$w/taken.prof" --format json -o "$w/taken.json"
ov=$(python3 "$here/overlap.py" "$w/taken.json" "$w/state_machine.exact.json" "$w/state_machine")
echo "# --event taken: overlap $ov ($(jq .stats.samples "$w/taken.json") samples)"
check "--event taken: uniform (overlap $ov >= 0.995, x86's threshold)" \
	python3 -c "import sys; sys.exit(float('$ov') < 0.995)"

# call-graph mode: only calls and returns in the record
"$EDGEPROF" record --emulate --mode calls --period 1009 --exact-out "$w/calls.exact.json" \
	-o "$w/calls.prof" -- "$w/recursion" 20 >/dev/null 2>&1
"$EDGEPROF" export "$w/calls.prof" --format json -o "$w/calls.json"
ov=$(python3 "$here/overlap.py" "$w/calls.json" "$w/calls.exact.json" "$w/recursion" call,call_indirect,return)
echo "# recursion --mode calls: overlap of call/return edges $ov"
check "recursion --mode calls: call edges overlap the exact counts >= 0.95" \
	python3 -c "import sys; sys.exit(float('$ov') < 0.95)"

"$EDGEPROF" record --emulate --seed 3 -o "$w/a.prof" -- "$w/random_branches" 100000 >/dev/null 2>&1
"$EDGEPROF" record --emulate --seed 3 -o "$w/b.prof" -- "$w/random_branches" 100000 >/dev/null 2>&1
check "same seed, same profile, byte for byte" cmp -s "$w/a.prof" "$w/b.prof"

# an ELF for a machine the emulator does not run (RISC-V: e_machine 243)
cp "$w/hot_cold" "$w/riscv"
printf '\xf3\x00' | dd of="$w/riscv" bs=1 seek=18 conv=notrunc status=none
"$EDGEPROF" record --emulate -o "$w/riscv.prof" -- "$w/riscv" 1 2>"$w/riscv.err"
rc=$?
check "another machine: refused (exit $rc), the machine named" \
	bash -c "[ $rc -ne 0 ] && grep -q 'machine 243: the emulator runs 64-bit x86_64 and aarch64' '$w/riscv.err'"
finish
