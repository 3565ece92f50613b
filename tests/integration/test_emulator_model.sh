#!/usr/bin/env bash
# The LBR emulator's fast path (per-event specialized callbacks, events
# counted down in one decrement and brought up to date only where one
# samples, per-vCPU indirect-branch tables) writes exactly what
# the plain model writes (model=reference: every event through the period
# logic one by one, indirect branches counted in the blocks' maps under the
# lock): the same samples (time, ip, every branch entry), the same exact
# counts and totals, for every event and filter, on the workloads of
# tests/ and on one whose branches signals cut short, built for
# x86_64 and for aarch64 (qemu-aarch64: BRBE's typed entries). The
# emulator is the ground truth of the accuracy measurements: a faster
# plugin must not change one count.
source "$(dirname "$0")/lib.sh"

here=$(dirname "$0")
w=$TEST_TMP/w
mkdir -p "$w"
plugin=$(dirname "$EDGEPROF")/edgeprof-lbr.so
canon=$here/emu_stream_canon.py
# the QEMU that runs the guest (and its options)
qemu=(qemu-x86_64)

# run NAME MODEL ARGS PROGRAM...: the plugin's stream, canonical, in
# $w/NAME.MODEL.txt (NAME without commas: they separate the plugin's
# arguments)
run() {
	local name=$1 model=$2 args=$3
	shift 3
	rm -f "$w/$name.$model.txt"
	"${qemu[@]}" -plugin "$plugin,out=$w/$name.$model.bin,model=$model,$args" "$@" \
		>/dev/null 2>"$w/$name.$model.err" &&
		python3 "$canon" "$w/$name.$model.bin" >"$w/$name.$model.txt" ||
		{
			echo "# $name, model=$model: $(tail -1 "$w/$name.$model.err")"
			rm -f "$w/$name.$model.txt"
		}
}

# same NAME ARGS PROGRAM...: both models, one stream
same() {
	local name=$1 args=$2
	shift 2
	run "$name" fast "$args" "$@"
	run "$name" reference "$args" "$@"
	local samples edges
	samples=$(grep -c '^sample ' "$w/$name.fast.txt")
	edges=$(sed -n 's/^exact //p' "$w/$name.fast.txt")
	check "$name ($args): fast path and plain model write the same stream" \
		cmp -s "$w/$name.fast.txt" "$w/$name.reference.txt"
	[ -f "$w/$name.fast.txt" ] || return
	check "$name: the stream is not empty ($samples samples, ${edges:-0} exact edges)" \
		test "$samples" -gt 10 -a "${edges:-0}" -gt 10
}

for name in hot_cold interp recursion random_branches state_machine libc_calls aliasing \
	signals; do
	cc -O1 -g -o "$w/$name" "$here/../workloads/$name.c"
done
base=period=1009,jitter=63,seed=5
same hot_cold "$base" "$w/hot_cold" 300000
same interp "$base" "$w/interp" 30000
same recursion "$base" "$w/recursion" 18
same random_branches "$base" "$w/random_branches" 50000
same state_machine "$base" "$w/state_machine" 50000
same libc_calls "$base" "$w/libc_calls" 10
same aliasing "$base" "$w/aliasing" 50000
same signals "$base" "$w/signals" 300
for opts in event=taken event=instructions filter=calls event=taken,filter=calls \
	event=instructions,filter=calls lbr=8; do
	same "interp.${opts//,/+}" "$base,$opts" "$w/interp" 30000
	same "signals.${opts//,/+}" "$base,$opts" "$w/signals" 300
done
same interp.nojitter period=997,jitter=0,seed=5 "$w/interp" 30000

# aarch64 guests: the same plugin, the same two models
qemu=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
for name in interp libc_calls signals; do
	aarch64-linux-gnu-gcc -O1 -g -o "$w/a64_$name" "$here/../workloads/$name.c"
done
same a64_libc_calls "$base,lbr=64" "$w/a64_libc_calls" 10
for opts in lbr=64 event=taken event=instructions filter=calls; do
	same "a64_interp.${opts//,/+}" "$base,$opts" "$w/a64_interp" 30000
	same "a64_signals.${opts//,/+}" "$base,$opts" "$w/a64_signals" 300
done
typed=$(grep -c '^sample .*/0x[1-6]00000\( \|$\)' "$w/a64_interp.lbr=64.fast.txt")
check "aarch64: the entries carry their branch type ($typed samples with typed entries)" \
	test "$typed" -gt 10
qemu=(qemu-x86_64)

# the comparison can fail: another seed samples elsewhere
run interp.seed6 fast period=1009,jitter=63,seed=6 "$w/interp" 30000
check "another seed, another stream" bash -c "! cmp -s '$w/interp.fast.txt' '$w/interp.seed6.fast.txt'"
finish
