#!/usr/bin/env bash
# Accuracy benchmark (part of `make bench`): for each workload, about the
# same number of samples (~15,000) taken four ways, each profile compared
# with the emulator's exact counts by the overlap of the edges out of
# conditional branches (sum of min(p, q), normalised; llvm-profdata's
# definition), restricted to the workload's own binary.
#   ours        all-branches event, randomized period (P +- P/16), full
#               branch trace reconstructed, chopped to the 32 LBR entries
#   peers       fixed period on instructions (a stand-in for cycles), every
#               entry of the stack counted, no chop (perf2bolt / AutoFDO)
#   fixed       ours with a fixed period
#   no_chop     ours counting the whole stack
#   taken       the taken-branches event, randomized period, chopped in taken
#               branches (each with the not-taken ones before it, N-1 of them)
# On the aliasing workload the fixed periods are made multiples of the
# workload's pattern length, in branches and in instructions.
# Then the workloads again as aarch64 programs under qemu-aarch64 (ours with
# 32 and with BRBE's 64 entries): accuracy_min_overlap_aarch64.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
target=${ACCURACY_SAMPLES:-15000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ep=$build/edgeprof

# totals NAME ARG: "branches instructions" of one run (from record's log)
totals() {
	"$ep" record --emulate --period 1000000007 -o "$tmp/t.prof" -- "$tmp/$1" "$2" 2>&1 >/dev/null |
		sed -n 's/.* ran \([0-9]*\) branches, \([0-9]*\) instructions/\1 \2/p'
}
overlap() { # PROFILE NAME
	"$ep" export "$1" --format json -o "$1.json"
	python3 tests/integration/overlap.py "$1.json" "$tmp/$2.exact.json" "$tmp/$2"
}
record() { # NAME ARG OUT OPTIONS...
	local name=$1 arg=$2 out=$3
	shift 3
	"$ep" record --emulate "$@" -o "$out" -- "$tmp/$name" "$arg" >/dev/null 2>&1
}

printf '%-16s %8s %8s %8s %8s %8s %8s\n' workload samples ours peers fixed no_chop taken
min=1
min_taken=1
for spec in hot_cold:30000000 interp:3000000 recursion:32 random_branches:4000000 \
	state_machine:6000000 libc_calls:400 aliasing:1600000; do
	name=${spec%%:*}
	arg=${spec#*:}
	cc -O1 -g -o "$tmp/$name" "tests/workloads/$name.c"
	"$ep" record --emulate --period 1000000007 --exact-out "$tmp/$name.exact.json" \
		-o "$tmp/x.prof" -- "$tmp/$name" "$arg" >/dev/null 2>&1
	read -r branches insns < <(totals "$name" "$arg")
	pb=$((branches / target))
	pi=$((insns / target))
	fixed_b=$pb
	fixed_i=$pi
	if [ "$name" = aliasing ]; then
		# pattern: 16 iterations = 256 branches; its length in instructions
		# from two runs 16,000 iterations apart
		read -r _ i1 < <(totals "$name" "$arg")
		read -r _ i2 < <(totals "$name" "$((arg + 16000))")
		ipat=$(((i2 - i1 + 500) / 1000))
		fixed_b=$(((pb + 128) / 256 * 256))
		fixed_i=$(((pi + ipat / 2) / ipat * ipat))
	fi
	record "$name" "$arg" "$tmp/a.prof" --event branches --period "$pb" --jitter $((pb / 16))
	record "$name" "$arg" "$tmp/b.prof" --event instructions --period "$fixed_i" --jitter 0 --chop 0
	record "$name" "$arg" "$tmp/c.prof" --event branches --period "$fixed_b" --jitter 0
	record "$name" "$arg" "$tmp/d.prof" --event branches --period "$pb" --jitter $((pb / 16)) --chop 0
	taken=$(jq '[.profiles[].branches[] | select(.taken) | .count] | add' "$tmp/$name.exact.json")
	pt=$((taken / target))
	record "$name" "$arg" "$tmp/e.prof" --event taken --period "$pt" --jitter $((pt / 16))
	a=$(overlap "$tmp/a.prof" "$name")
	b=$(overlap "$tmp/b.prof" "$name")
	c=$(overlap "$tmp/c.prof" "$name")
	d=$(overlap "$tmp/d.prof" "$name")
	e=$(overlap "$tmp/e.prof" "$name")
	samples=$(jq .stats.samples "$tmp/a.prof.json")
	printf '%-16s %8s %8s %8s %8s %8s %8s\n' "$name" "$samples" "$a" "$b" "$c" "$d" "$e"
	min=$(python3 -c "print(min($min, $a))")
	min_taken=$(python3 -c "print(min($min_taken, $e))")
done

# The same workloads built for aarch64 (aarch64-linux-gnu-gcc, Debian's arm64
# libc) and run under qemu-aarch64 with Arm BRBE's record: ours as above
# with the x86 column's 32 entries, and with BRBE's 64. aliasing is x86
# assembly and has no aarch64 build.
printf '%-16s %8s %8s %8s\n' aarch64 samples ours ours_64
min_a64=1
for spec in hot_cold:30000000 interp:3000000 recursion:32 random_branches:4000000 \
	state_machine:6000000 libc_calls:400; do
	name=a64_${spec%%:*}
	arg=${spec#*:}
	aarch64-linux-gnu-gcc -O1 -g -o "$tmp/$name" "tests/workloads/${spec%%:*}.c"
	"$ep" record --emulate --period 1000000007 --exact-out "$tmp/$name.exact.json" \
		-o "$tmp/x.prof" -- "$tmp/$name" "$arg" >/dev/null 2>&1
	read -r branches _ < <(totals "$name" "$arg")
	pb=$((branches / target))
	record "$name" "$arg" "$tmp/a.prof" --event branches --period "$pb" --jitter $((pb / 16))
	record "$name" "$arg" "$tmp/f.prof" --event branches --period "$pb" --jitter $((pb / 16)) \
		--lbr 64
	a=$(overlap "$tmp/a.prof" "$name")
	f=$(overlap "$tmp/f.prof" "$name")
	samples=$(jq .stats.samples "$tmp/a.prof.json")
	printf '%-16s %8s %8s %8s\n' "${spec%%:*}" "$samples" "$a" "$f"
	min_a64=$(python3 -c "print(min($min_a64, $a))")
done
echo "accuracy_min_overlap: $min"
echo "accuracy_min_overlap_taken_event: $min_taken"
echo "accuracy_min_overlap_aarch64: $min_a64"
