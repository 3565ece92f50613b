#!/usr/bin/env bash
# The fdata and preagg exports for an aarch64 binary (issue 15), consumed by
# Debian's BOLT 16, which lays out AArch64 too: bolt_mix (static functions of
# one name in two files, PLT calls, loops) cross-built non-PIE and PIE with
# --emit-relocs, recorded under the emulator (qemu-aarch64, BRBE's 64
# entries):
#  - llvm-bolt takes the fdata: nothing stale, nothing ignored but the
#    "[unknown]" source of entries from libc; its output prints the same;
#  - every name is BOLT's: NAME/N for the two static step()s, SYM@PLT for the
#    PLT entries (AArch64's adrp/ldr/add/br stubs, PLT0 32 bytes);
#  - every function holding 1% of the exact branch executions (the emulator's
#    counts, checked against QEMU's own execution log in
#    test_emulator_aarch64.sh) has a profile: BOLT's instrumentation, the
#    exact oracle on x86-64, links a runtime built for the host only;
#  - perf2bolt -pa turns our preagg export into our fdata line for line,
#    with no trace mismatching the code.
# Built with -fno-jump-tables: BOLT 16 cannot follow GCC's AArch64 jump table
# (adr, ldrb, add with sxtb: "failed to post-process indirect branches"), and
# counts every trace of such a function as mismatching the code.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/bolt.sh"

here=$(cd "$(dirname "$0")" && pwd)
for tool in "$bolt" "$perf2bolt" aarch64-linux-gnu-gcc qemu-aarch64; do
	if ! command -v "$tool" >/dev/null; then
		not_ok "$tool is installed (make deps)"
		finish
	fi
done

for kind in nopie pie; do
	w=$TEST_TMP/$kind
	mkdir -p "$w"
	bin=$w/bolt_mix
	if [ $kind = pie ]; then pic=(-fpie -pie); else pic=(-fno-pie -no-pie); fi
	aarch64-linux-gnu-gcc -O2 -g "${pic[@]}" -Wl,--emit-relocs -fno-reorder-blocks-and-partition \
		-fno-jump-tables -o "$bin" "$here/../workloads/bolt_mix.c" "$here/../workloads/bolt_mix_b.c"
	bid=$(aarch64-linux-gnu-readelf -n "$bin" | awk '/Build ID/ {print $3}')
	"$EDGEPROF" record --emulate --lbr 64 --period 997 --exact-out "$w/exact.json" \
		-o "$w/p.prof" -- "$bin" 400 >"$w/run.out" 2>"$w/record.err"
	check "$kind: record --emulate of the aarch64 program exits 0" test $? -eq 0
	"$EDGEPROF" export "$w/p.prof" --build-id "$bid" --format fdata --infer off -o "$w/p.fdata"
	"$EDGEPROF" export "$w/p.prof" --build-id "$bid" --format preagg -o "$w/p.preagg"
	check "$kind: fdata and preagg written" test -s "$w/p.fdata" -a -s "$w/p.preagg"

	check_bolt_takes_fdata "$kind" "$w" "$bin"
	echo "# $kind: BOLT finds profile for $(profiled "$w/bolt.log") functions"
	qemu-aarch64 -L /usr/aarch64-linux-gnu "$w/out.bolt" 400 >"$w/bolted.out" 2>&1
	check "$kind: the BOLTed binary prints what the original printed" cmp -s "$w/run.out" "$w/bolted.out"

	names "$w/p.fdata" >"$w/ours.names"
	echo "# $kind: named $(tr '\n' ' ' <"$w/ours.names")"
	check "$kind: both static step() functions are named apart (step/1, step/2)" \
		bash -c "grep -qx 'step/1' '$w/ours.names' && grep -qx 'step/2' '$w/ours.names'"
	# the PLT entries as objdump names them (sym@plt), as BOLT does (SYM@PLT)
	aarch64-linux-gnu-objdump -d -j .plt "$bin" | sed -n 's/^[0-9a-f]* <\(.*\)@plt>:$/\1@PLT/p' >"$w/plt"
	{ aarch64-linux-gnu-nm --defined-only "$bin" | awk '{print $3}'; cat "$w/plt"; echo __BOLT_PSEUDO_.plt; } |
		sort -u >"$w/syms"
	sed -E 's,/[0-9]+$,,' "$w/ours.names" | sort -u >"$w/ours.plain"
	check "$kind: every name is a symbol of the binary or one of its PLT entries" \
		test -z "$(comm -23 "$w/ours.plain" "$w/syms")"
	check "$kind: the library calls are named SYM@PLT (qsort, strlen)" \
		bash -c "grep -qx 'qsort@PLT' '$w/ours.names' && grep -qx 'strlen@PLT' '$w/ours.names'"
	# the functions holding 1% of the exact branch executions, by the
	# binary's own symbol table
	aarch64-linux-gnu-nm -S --defined-only "$bin" | awk 'NF == 4 && $3 ~ /^[tTwW]$/ {print $1, $2, $4}' >"$w/funcs"
	python3 - "$w/exact.json" "$w/funcs" "$bin" >"$w/hot" <<'PY'
import json, sys
exact, funcs, path = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
fs = [(int(a, 16), int(a, 16) + int(s, 16), n) for a, s, n in (l.split() for l in open(funcs))]
bp = next(p for p in exact["profiles"] if p["path"] == path)
# PIE: the profile's addresses are the file's (the loader's base taken off)
by = {}
for b in bp["branches"]:
    if b.get("from_external"):
        continue
    a = int(b["from"], 16)
    for lo, hi, n in fs:
        if lo <= a < hi:
            by[n] = by.get(n, 0) + b["count"]
total = sum(by.values())
for n, c in sorted(by.items()):
    if c >= 0.01 * total:
        print(n)
PY
	echo "# $kind: hot by the exact counts: $(tr '\n' ' ' <"$w/hot")"
	check "$kind: every function with 1% of the exact branches has a profile ($(wc -l <"$w/hot") of them)" \
		test -s "$w/hot" -a -z "$(comm -23 <(sort -u "$w/hot") "$w/ours.plain")"

	check_perf2bolt_equals "$kind" "$w" "$bin"
done
finish
