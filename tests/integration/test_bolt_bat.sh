#!/usr/bin/env bash
# Profiles of BOLTed binaries (issue 35 item 1): a program laid out by
# llvm-bolt --enable-bat (BOLT 19 and 16, non-PIE and PIE) and recorded on
# the emulator exports fdata in its INPUT binary's terms, read through the
# binary's address translation table (common/elf/elf_bat.c):
# (a) it equals what perf2bolt of the same BOLT version writes from the
#     recording's perf.data of the BOLTed binary: the same lines (functions,
#     input offsets), counts within what the two count per sample (non-PIE:
#     of a BOLTed PIE's perf.data perf2bolt 16 and 19 place 99.9% of the
#     traces "out of range": the new code is a second executable mapping);
# (b) llvm-bolt takes it for the input binary: a profile for as many
#     functions as the input's own profile gives, none stale;
# (c) a damaged table is refused naming the file (no fdata in the BOLTed
#     layout's offsets), under ASan too.
source "$(dirname "$0")/lib.sh"

here=$(cd "$(dirname "$0")" && pwd)
opts=(-reorder-blocks=ext-tsp -reorder-functions=hfsort -split-functions -split-all-cold)
# N of "BOLT-INFO: N out of M functions ... have non-empty execution profile"
profiled() { sed -n 's/^BOLT-INFO: \([0-9]*\) out of [0-9]* functions.*non-empty execution profile.*/\1/p' "$1"; }
bid() { readelf -n "$1" | awk '/Build ID/ {print $3}'; }

for v in 19 16; do
	bolt=llvm-bolt-$v
	perf2bolt=/usr/lib/llvm-$v/bin/perf2bolt
	if ! command -v "$bolt" >/dev/null || [ ! -x "$perf2bolt" ]; then
		not_ok "BOLT $v is installed (Debian package bolt-$v)"
		continue
	fi
	for kind in nopie pie; do
		w=$TEST_TMP/$v-$kind
		mkdir -p "$w"
		in=$w/bolt_mix
		if [ $kind = pie ]; then pic=(-fpie -pie); else pic=(-fno-pie -no-pie); fi
		cc -O2 -g "${pic[@]}" -Wl,--emit-relocs -fno-reorder-blocks-and-partition -o "$in" \
			"$here/../workloads/bolt_mix.c" "$here/../workloads/bolt_mix_b.c"
		# the input's exact profile, and its BOLTed layout with the table
		"$EDGEPROF" record --emulate --period 997 -o "$w/in.prof" -- "$in" 400 >/dev/null 2>&1
		"$EDGEPROF" export "$w/in.prof" --build-id "$(bid "$in")" --format fdata -o "$w/in.fdata"
		"$bolt" "$in" -data "$w/in.fdata" -o "$w/bolted" --enable-bat "${opts[@]}" >"$w/bat.log" 2>&1
		check "$v $kind: llvm-bolt --enable-bat writes a table" \
			grep -q '^BOLT-INFO: Wrote [0-9]* BAT maps' "$w/bat.log"

		# (a) the BOLTed binary recorded: every taken branch of each
		# sample counted (--event taken --chop 0), as perf2bolt counts LBRs
		"$EDGEPROF" record --emulate --event taken --chop 0 --period 997 \
			--perf-data "$w/b.data" -o "$w/b.prof" -- "$w/bolted" 400 >/dev/null 2>&1
		"$EDGEPROF" export "$w/b.prof" --build-id "$(bid "$w/bolted")" --format fdata \
			-o "$w/ours.fdata" 2>"$w/export.err"
		check "$v $kind: the export says the fdata is for the input binary (build-id $(bid "$in"))" \
			grep -q "enable-bat.*input binary's terms (build-id $(bid "$in")" "$w/export.err"
		if [ $kind = nopie ]; then
			"$perf2bolt" -p "$w/b.data" -o "$w/peer.fdata" "$w/bolted" >"$w/p2b.log" 2>&1
			cmp=$(python3 "$here/bat_compare.py" "$w/ours.fdata" "$w/peer.fdata" 0.9 1.2)
			rc=$?
			echo "$cmp" | sed "1s/^/$v $kind: /; s/^/# /"
			check "$v $kind: our fdata has perf2bolt's lines, counts within [0.9, 1.2] of its" \
				test $rc -eq 0
		fi

		# (b) the next BOLT run, on the input binary
		"$bolt" "$in" -data "$w/ours.fdata" -o "$w/again" "${opts[@]}" >"$w/again.log" 2>&1
		check "$v $kind: llvm-bolt lays the input out with it" test $? -eq 0
		check "$v $kind: llvm-bolt reads it as a BOLTed binary's profile" \
			grep -q 'profile collection done on a binary already processed by BOLT' "$w/again.log"
		check "$v $kind: no stale function" bash -c "! grep -q 'stale' '$w/again.log'"
		"$bolt" "$in" -data "$w/in.fdata" -o "$w/direct" "${opts[@]}" >"$w/direct.log" 2>&1
		ours=$(profiled "$w/again.log") direct=$(profiled "$w/direct.log")
		echo "# $v $kind: functions with profile: ${ours:-0} from the BOLTed binary's, ${direct:-0} from the input's"
		check "$v $kind: as many functions with profile as from the input's own profile" \
			test "${ours:-0}" -gt 0 -a "${ours:-0}" -eq "${direct:--1}"
	done
done

# (c) the table's function count made huge, in a copy of the last binary
w=$TEST_TMP/19-nopie
bad=$TEST_TMP/bad_bat
cp "$w/bolted" "$bad"
off=$((0x$(readelf -SW "$bad" | sed -n 's/.*\.note\.bolt_bat *NOTE *[0-9a-f]* \([0-9a-f]*\).*/\1/p')))
printf '\xff\xff\xff\xff\xff\xff\x7f' | dd of="$bad" bs=1 seek=$((off + 20)) conv=notrunc 2>/dev/null
cp "$w/b.prof" "$TEST_TMP/bad.prof"
for e in "$EDGEPROF" ${EDGEPROF_ASAN:+"$EDGEPROF_ASAN"}; do
	"$e" export "$TEST_TMP/bad.prof" --binary "$bad" --build-id "$(bid "$bad")" --format fdata \
		-o "$TEST_TMP/bad.fdata" \
		>/dev/null 2>"$TEST_TMP/bad.err"
	rc=$?
	check "$(basename "$e"): a damaged table is refused: no fdata, exit 1" \
		test $rc -eq 1 -a ! -e "$TEST_TMP/bad.fdata"
	check "$(basename "$e"): ... naming the file and the problem" \
		grep -q "($bad): BOLT address translation not read: .*no BAT table" "$TEST_TMP/bad.err"
	check "$(basename "$e"): ... without a sanitizer report" \
		bash -c "! grep -q 'Sanitizer' '$TEST_TMP/bad.err'"
done
finish
