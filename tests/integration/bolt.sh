# Sourced by the BOLT tests (after lib.sh): BOLT 16 called by its real
# names (the perf2bolt-16 symlink runs as llvm-bolt), and the checks they
# share on W/p.fdata and W/p.preagg, the exports of one recording of BIN.
bolt=llvm-bolt-16
perf2bolt=/usr/lib/llvm-16/bin/perf2bolt
bolt_opts=(-reorder-blocks=ext-tsp -reorder-functions=hfsort -split-functions -split-all-cold)
# N of "BOLT-INFO: N out of M functions ... have non-empty execution profile"
profiled() { sed -n 's/^BOLT-INFO: \([0-9]*\) out of [0-9]* functions.*non-empty execution profile.*/\1/p' "$1"; }
# the functions an fdata names
names() { awk '$1 == 1 {print $2} $4 == 1 {print $5}' "$1" | sort -u; }

# check_bolt_takes_fdata KIND W BIN: llvm-bolt lays BIN out with W/p.fdata
# (W/out.bolt, log W/bolt.log), nothing stale; "profile for 1 objects was
# ignored" is the "[unknown]" source of the entries from libc (the exact
# profile has it too): without those lines nothing may be ignored
check_bolt_takes_fdata() {
	local kind=$1 w=$2 bin=$3
	"$bolt" "$bin" -data "$w/p.fdata" -o "$w/out.bolt" "${bolt_opts[@]}" >"$w/bolt.log" 2>&1
	check "$kind: llvm-bolt accepts the fdata" test $? -eq 0
	check "$kind: no stale function" bash -c "! grep -q 'possibly stale' '$w/bolt.log'"
	grep -v '^0 \[unknown\]' "$w/p.fdata" >"$w/known.fdata"
	"$bolt" "$bin" -data "$w/known.fdata" -o "$w/out2.bolt" >"$w/bolt2.log" 2>&1
	check "$kind: no object ignored but the [unknown] source" \
		bash -c "! grep -qE 'objects was ignored|possibly stale' '$w/bolt2.log'"
}

# check_perf2bolt_equals KIND W BIN: perf2bolt -pa turns W/p.preagg into
# W/p.fdata line for line, no trace mismatching BIN's code
check_perf2bolt_equals() {
	local kind=$1 w=$2 bin=$3 mismatch
	"$perf2bolt" -pa -p "$w/p.preagg" -o "$w/pa.fdata" "$bin" >"$w/p2b.log" 2>&1
	mismatch=$(sed -n 's/^PERF2BOLT: traces mismatching disassembled function contents: \([0-9]*\).*/\1/p' "$w/p2b.log")
	check "$kind: perf2bolt: no trace mismatches the code (${mismatch:-?}; none inside the PLT)" \
		test "${mismatch:-1}" -eq 0
	sort "$w/p.fdata" >"$w/a.sorted"
	sort "$w/pa.fdata" >"$w/b.sorted"
	echo "# $kind: fdata lines: ours $(wc -l <"$w/p.fdata"), perf2bolt $(wc -l <"$w/pa.fdata"), only ours $(comm -23 "$w/a.sorted" "$w/b.sorted" | wc -l), only perf2bolt $(comm -13 "$w/a.sorted" "$w/b.sorted" | wc -l)"
	check "$kind: our fdata equals perf2bolt's from our preagg" cmp -s "$w/a.sorted" "$w/b.sorted"
}
