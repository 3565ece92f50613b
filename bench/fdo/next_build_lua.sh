#!/usr/bin/env bash
# bench/fdo/next_build.sh's question on lua 5.4 (issue 35): what a BOLT profile of one
# build is worth on the next. Version A is bench/fdo's lua (build.sh); version B the same
# source with a rarely-true check inserted at the top of eight hot functions (luaV_execute,
# match, index2value, which lapi.c inlines into most of its functions, lua_geti,
# lua_settop, lua_pushvalue, lua_type, luaD_precall) and five of luaV_execute's opcode
# handlers: a new block in each, every address after it moved. Each is recorded on the
# training input with `record --emulate --seed 1` at about 20k samples, as bench/fdo does;
# A's fdata becomes BOLT's YAML (`llvm-bolt-19 A -data A.fdata -w A.yaml`), and B is laid
# out by llvm-bolt-19 with bench/fdo's options from B's own fdata (fresh), from A's YAML
# with -infer-stale-profile (stale) and from A's fdata as it is; the evaluation input's
# taken branches in lua's own code are counted exactly by the emulator:
#   fdo_stale_lua_taken_branches_{unbolted,fresh,stale,a_fdata}
#   fdo_stale_next_build_fraction_lua  (unbolted - stale) / (unbolted - fresh)
#   fdo_stale_fdata_fraction_lua       the same for A's fdata
#   fdo_stale_functions_lua, fdo_stale_inferred_functions_lua  from BOLT's log
# NEXT_BUILD_LUA_HANDLERS=0 leaves the opcode handlers alone (the function tops only).
# Usage: bench/fdo/next_build_lua.sh [BUILD [SRC]]: SRC holds Debian's lua5.4 source
# package, unpacked (BUILD/fdo/src once `make bench-fdo` ran). A few minutes of both cores;
# files under BUILD/fdo/next_build_lua.
set -euo pipefail
build=$(realpath -m "${1:-build}")
src=$(realpath -m "${2:-$build/fdo/src}")
cd "$(dirname "$0")/../.."
here=$PWD/bench/fdo
edgeprof=${EDGEPROF:-$build/edgeprof}
bolt=${BOLT:-llvm-bolt-19}
note() { echo "bench: note: $*" >&2; }
if ! command -v "$bolt" >/dev/null || ! compgen -G "$src/lua5.4-*/src/lvm.c" >/dev/null; then
	note "no $bolt or no lua5.4 source under $src (make bench-fdo fetches it): skipped"
	exit 0
fi
w=$build/fdo/next_build_lua
rm -rf "$w"
mkdir -p "$w/srcA" "$w/srcB"
l=$(echo "$src"/lua5.4-*)
cp -r "$l" "$w/srcA/"
cp -r "$l" "$w/srcB/"
b=$(echo "$w"/srcB/lua5.4-*/src)
for f in lapi.c ldo.c lstrlib.c lvm.c; do
	perl -ne 'print;
		my $t = "{ extern volatile unsigned long nb_touch; if (nb_touch == 0x5a5a5a5au) nb_touch = 1; }";
		print "  $t\n" if /^[a-zA-Z].*\b(luaV_execute|match|index2value|lua_geti|lua_settop|lua_pushvalue|lua_type|luaD_precall) \(.*\{$/;
		print "        $t\n" if $ENV{NEXT_BUILD_LUA_HANDLERS} ne "0" &&
			/^\s*vmcase\(OP_(MOVE|GETTABUP|CALL|FORLOOP|GETFIELD)\) \{$/;' \
		"$b/$f" >"$b/$f.new"
	mv "$b/$f.new" "$b/$f"
done
echo 'volatile unsigned long nb_touch;' >>"$b/lua.c"
for v in A B; do
	bash "$here/build.sh" "$w/src$v" "$w/work$v" lua "$w/$v" gcc
done
train=("$here/inputs/lua_train.lua" 2)
eval=("$here/inputs/lua_eval.lua" 4)
nice -n 19 "$edgeprof" record --emulate --seed 1 -o "$w/count.prof" -- "$w/A" "${train[@]}" \
	>/dev/null 2>"$w/count.log"
branches=$(sed -n 's/.* ran \([0-9]*\) branches.*/\1/p' "$w/count.log")
for v in A B; do
	nice -n 19 "$edgeprof" record --emulate --seed 1 --period $((branches / 20000)) \
		-o "$w/$v.prof" -- "$w/$v" "${train[@]}" >/dev/null 2>"$w/$v.record.log"
	bid=$(readelf -n "$w/$v" | awk '/Build ID/ {print $3}')
	"$edgeprof" export "$w/$v.prof" --build-id "$bid" --format fdata -o "$w/$v.fdata" \
		2>"$w/$v.export.log"
done
opts=(-reorder-blocks=ext-tsp -reorder-functions=hfsort -split-functions -split-all-cold)
nice -n 19 "$bolt" "$w/A" -data "$w/A.fdata" -w "$w/A.yaml" -o /dev/null >"$w/A.yaml.log" 2>&1
nice -n 19 "$bolt" "$w/B" -data "$w/B.fdata" -o "$w/B.fresh" "${opts[@]}" >"$w/B.fresh.log" 2>&1
nice -n 19 "$bolt" "$w/B" -data "$w/A.yaml" -infer-stale-profile -o "$w/B.stale" "${opts[@]}" \
	>"$w/B.stale.log" 2>&1
nice -n 19 "$bolt" "$w/B" -data "$w/A.fdata" -o "$w/B.a_fdata" "${opts[@]}" >"$w/B.a_fdata.log" 2>&1
cp "$w/B" "$w/B.unbolted"
declare -A tb
for k in unbolted fresh stale a_fdata; do
	(cd "$w" && nice -n 19 "$edgeprof" record --emulate --period 100000007 \
		--exact-out "$w/B.$k.exact.json" -o "$w/B.$k.exact.prof" -- "$w/B.$k" "${eval[@]}" \
		>"$w/B.$k.out" 2>"$w/B.$k.exact.log")
	tb[$k]=$(python3 "$here/taken.py" "$w/B.$k" "$w/B.$k.exact.json")
	echo "fdo_stale_lua_taken_branches_$k: ${tb[$k]}"
	cmp -s "$w/B.unbolted.out" "$w/B.$k.out" || note "B.$k printed other output than B"
done
for k in stale a_fdata; do
	name=stale_next_build
	[ "$k" = a_fdata ] && name=stale_fdata
	python3 -c 'import sys; u, f, s = map(int, sys.argv[2:]); print("fdo_%s_fraction_lua: %.3f" % (sys.argv[1], (u - s) / (u - f)))' \
		"$name" "${tb[unbolted]}" "${tb[fresh]}" "${tb[$k]}"
done
echo "fdo_stale_functions_lua: $(sed -n 's/^BOLT-WARNING: \([0-9]*\) (.*possibly stale) profile.*/\1/p' "$w/B.stale.log")"
echo "fdo_stale_inferred_functions_lua: $(sed -n 's/^BOLT-INFO: inferred profile for \([0-9]*\) .*/\1/p' "$w/B.stale.log")"
