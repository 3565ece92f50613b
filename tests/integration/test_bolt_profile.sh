#!/usr/bin/env bash
# The fdata export is complete for BOLT 16 (issue 19): on a program with
# static functions of the same name in two files, PLT calls, a jump table
# and loops, built non-PIE and PIE, the fdata of an emulated recording
# (a) names only functions BOLT knows and fits their code (nothing stale),
# (b) gives BOLT a profile for every function the samples reached that
#     BOLT's own instrumentation (the exact profile) gives one, and
# (c) equals, line for line, what perf2bolt writes from our preagg export
#     of the same recording (local NAME/N names, SYM@PLT, fall-throughs).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/bolt.sh"

here=$(cd "$(dirname "$0")" && pwd)
if ! command -v "$bolt" >/dev/null || [ ! -x "$perf2bolt" ]; then
	not_ok "BOLT 16 is installed (Debian package bolt-16)"
	finish
fi

for kind in nopie pie; do
	w=$TEST_TMP/$kind
	mkdir -p "$w"
	bin=$w/bolt_mix
	if [ $kind = pie ]; then pic=(-fpie -pie); else pic=(-fno-pie -no-pie); fi
	cc -O2 -g "${pic[@]}" -Wl,--emit-relocs -fno-reorder-blocks-and-partition -o "$bin" \
		"$here/../workloads/bolt_mix.c" "$here/../workloads/bolt_mix_b.c"
	bid=$(readelf -n "$bin" | awk '/Build ID/ {print $3}')
	"$EDGEPROF" record --emulate --period 997 -o "$w/p.prof" -- "$bin" 400 >/dev/null 2>&1
	"$EDGEPROF" export "$w/p.prof" --build-id "$bid" --format fdata --infer off -o "$w/p.fdata"
	"$EDGEPROF" export "$w/p.prof" --build-id "$bid" --format preagg -o "$w/p.preagg"
	check "$kind: fdata and preagg written" test -s "$w/p.fdata" -a -s "$w/p.preagg"

	# (a) BOLT's messages
	check_bolt_takes_fdata "$kind" "$w" "$bin"

	# (b) the exact profile, from BOLT's instrumentation (its runtime path
	# is taken relative to /usr/lib)
	"$bolt" "$bin" -instrument -o "$bin.inst" --runtime-instrumentation-lib=llvm-16/lib/libbolt_rt_instr.a \
		-instrumentation-file="$w/exact.fdata" >"$w/inst.log" 2>&1
	"$bin.inst" 400 >/dev/null
	# PLT0 (__BOLT_PSEUDO_.plt), which a lazily bound first call jumps
	# through, is code BOLT does not instrument: only sampled profiles name it
	names "$w/p.fdata" | grep -v '^__BOLT_PSEUDO_' >"$w/ours.names"
	names "$w/exact.fdata" >"$w/exact.names"
	check "$kind: every function we name is one the exact profile names (NAME/N, SYM@PLT)" \
		test -z "$(comm -23 "$w/ours.names" "$w/exact.names")"
	check "$kind: both static step() functions are named apart" \
		bash -c "grep -qx 'step/1' '$w/ours.names' && grep -qx 'step/2' '$w/ours.names'"
	# the exact lines of the functions the samples reached
	awk 'NR == FNR {k[$1] = 1; next} ($1 == 0 || k[$2]) && ($4 == 0 || k[$5])' \
		"$w/ours.names" "$w/exact.fdata" >"$w/exact.reached"
	"$bolt" "$bin" -data "$w/exact.reached" -o "$w/out3.bolt" "${bolt_opts[@]}" >"$w/bolt3.log" 2>&1
	ours=$(profiled "$w/bolt.log")
	exact=$(profiled "$w/bolt3.log")
	echo "# $kind: BOLT finds profile for ${ours:-0} functions from our fdata, ${exact:-0} from the exact profile of the same functions"
	check "$kind: as many functions with profile as the exact profile" \
		test "${ours:-0}" -gt 0 -a "${ours:-0}" -eq "${exact:--1}"

	# (c) perf2bolt's conversion of our preagg export
	check_perf2bolt_equals "$kind" "$w" "$bin"
done
finish
