#!/usr/bin/env bash
# What a BOLT profile of one build is worth on the next build (issue 35):
# tests/workloads/next_build.c as version A and as version B (-DNEXT_BUILD:
# code inserted in every hot function, so addresses, function hashes and
# some blocks change), each recorded under the emulator with
# `record --emulate` and exported as fdata. llvm-bolt-19 turns A's fdata
# into its YAML profile (`-w`, which writes BOLT's function and block hashes
# of A), then lays B out four ways, all measured by the emulator's exact
# count of the taken branches B's own code runs (libc's are the same in
# every variant):
#   fdo_stale_taken_branches_unbolted  B as built
#   fdo_stale_taken_branches_fresh     BOLTed with B's own profile (the peer)
#   fdo_stale_taken_branches_stale     BOLTed with A's YAML, -infer-stale-profile
#   fdo_stale_taken_branches_no_infer  BOLTed with A's YAML without it (the
#                                      profile of every changed function dropped)
#   fdo_stale_taken_branches_a_fdata   BOLTed with A's fdata (offsets in A's
#                                      code: BOLT drops every changed function)
#   fdo_stale_next_build_fraction      (unbolted - stale) / (unbolted - fresh)
#   fdo_stale_no_infer_fraction, fdo_stale_fdata_fraction  the same for those
#   fdo_stale_functions, fdo_stale_inferred_functions  from BOLT's log
# Usage: bench/fdo/next_build.sh [BUILD] (a few seconds); NEXT_BUILD_DIR=DIR
# keeps the binaries and logs there (tests/integration/test_stale_profile.sh
# reads them). BOLT's layout options are bench/fdo's.
set -euo pipefail
build=$(realpath -m "${1:-build}")
cd "$(dirname "$0")/../.."
here=$PWD/bench/fdo
edgeprof=${EDGEPROF:-$build/edgeprof}
bolt=${BOLT:-llvm-bolt-19}
note() { echo "bench: note: $*" >&2; }
if [ -n "${NEXT_BUILD_DIR:-}" ]; then
	w=$NEXT_BUILD_DIR
	mkdir -p "$w"
else
	w=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-nextbuild.XXXXXX")
	trap 'rm -rf "$w"' EXIT
fi
if ! command -v "$bolt" >/dev/null; then
	note "no $bolt (Debian package bolt-19): the next-build figures are skipped"
	exit 0
fi
src=$PWD/tests/workloads/next_build.c
opts=(-reorder-blocks=ext-tsp -reorder-functions=hfsort -split-functions -split-all-cold)

for v in A B; do
	def=()
	[ "$v" = B ] && def=(-DNEXT_BUILD)
	cc -O2 -g -fno-pie -no-pie -fno-reorder-blocks-and-partition -Wl,--emit-relocs \
		"${def[@]}" -o "$w/$v" "$src"
	"$edgeprof" record --emulate --seed 1 -o "$w/$v.prof" -- "$w/$v" >"$w/$v.out" 2>"$w/$v.record.log"
	bid=$(readelf -n "$w/$v" | awk '/Build ID/ {print $3}')
	"$edgeprof" export "$w/$v.prof" --build-id "$bid" --format fdata -o "$w/$v.fdata" \
		2>"$w/$v.export.log"
done
# BOLT writes the YAML of what it read: A's counts on A's CFG, with A's hashes
"$bolt" "$w/A" -data "$w/A.fdata" -w "$w/A.yaml" -o /dev/null >"$w/A.yaml.log" 2>&1
"$bolt" "$w/B" -data "$w/B.fdata" -o "$w/B.fresh" "${opts[@]}" >"$w/B.fresh.log" 2>&1
"$bolt" "$w/B" -data "$w/A.yaml" -infer-stale-profile -o "$w/B.stale" "${opts[@]}" \
	>"$w/B.stale.log" 2>&1
"$bolt" "$w/B" -data "$w/A.yaml" -o "$w/B.no_infer" "${opts[@]}" >"$w/B.no_infer.log" 2>&1
"$bolt" "$w/B" -data "$w/A.fdata" -o "$w/B.a_fdata" "${opts[@]}" >"$w/B.a_fdata.log" 2>&1
cp "$w/B" "$w/B.unbolted"

# taken NAME: the taken branches W/NAME's own code runs, exactly
taken() {
	"$edgeprof" record --emulate --period 1000000 --exact-out "$w/$1.exact.json" \
		-o "$w/$1.exact.prof" -- "$w/$1" >"$w/$1.run.out" 2>"$w/$1.exact.log"
	python3 "$here/taken.py" "$w/$1" "$w/$1.exact.json"
}
declare -A tb
for k in unbolted fresh stale no_infer a_fdata; do
	tb[$k]=$(taken "B.$k")
	echo "fdo_stale_taken_branches_$k: ${tb[$k]}"
	cmp -s "$w/B.out" "$w/B.$k.run.out" || note "B.$k printed other output than B"
done
for k in stale no_infer a_fdata; do
	name=stale_next_build
	[ "$k" = no_infer ] && name=stale_no_infer
	[ "$k" = a_fdata ] && name=stale_fdata
	python3 -c 'import sys; u, f, s = map(int, sys.argv[2:]); print("fdo_%s_fraction: %.3f" % (sys.argv[1], (u - s) / (u - f)))' \
		"$name" "${tb[unbolted]}" "${tb[fresh]}" "${tb[$k]}"
done
# "BOLT-WARNING: N (P% of all profiled) functions have invalid (possibly stale) profile"
# "BOLT-INFO: inferred profile for N (P% of profiled, Q% of stale) functions ..."
echo "fdo_stale_functions: $(sed -n 's/^BOLT-WARNING: \([0-9]*\) (.*possibly stale) profile.*/\1/p' "$w/B.stale.log")"
echo "fdo_stale_inferred_functions: $(sed -n 's/^BOLT-INFO: inferred profile for \([0-9]*\) .*/\1/p' "$w/B.stale.log")"

# AutoFDO (the README's route: export --format profgen, llvm-profgen-14, clang-14). Its
# sample profile is keyed by function name and line offset from the function's first line,
# so B's source has B's lines: A's with the NEXT_BUILD blocks cut out, B's with them in.
# clang compiles most of these branches without a jump, so a profile saves little (one
# branch a round): the exact profiles (--exact-profile) are exported, as a sampled draw,
# which the guest's environment shifts, moves the figures by that much
#   fdo_stale_autofdo_taken_branches_{none,fresh,stale,same_lines}  B with no profile, its
#     own, A's, and A's on B written with each inserted block on the line before it
#   fdo_stale_autofdo_fraction, fdo_stale_autofdo_same_lines_fraction
if ! command -v clang-14 >/dev/null || ! command -v llvm-profgen-14 >/dev/null; then
	note "no clang-14 or llvm-profgen-14: the AutoFDO figures are skipped"
	exit 0
fi
awk '/^#ifdef NEXT_BUILD/ {s = 1; next} s && /^#endif/ {s = 0; next} !s' "$src" >"$w/af_A.c"
awk '/^#ifdef NEXT_BUILD/ {s = 1; next} s && /^#endif/ {s = 0; next} 1' "$src" >"$w/af_B.c"
cflags=(-O2 -g -fdebug-info-for-profiling -fno-pie -no-pie)
for v in A B; do
	clang-14 "${cflags[@]}" -o "$w/af_$v" "$w/af_$v.c"
	"$edgeprof" record --emulate --seed 1 --exact-profile "$w/af_$v.prof" -o "$w/af_$v.sampled.prof" \
		-- "$w/af_$v" >"$w/af_$v.out" 2>"$w/af_$v.record.log"
	bid=$(readelf -n "$w/af_$v" | awk '/Build ID/ {print $3}')
	"$edgeprof" export "$w/af_$v.prof" --build-id "$bid" --format profgen \
		-o "$w/af_$v.profgen" 2>"$w/af_$v.export.log"
	llvm-profgen-14 --binary="$w/af_$v" --unsymbolized-profile="$w/af_$v.profgen" \
		--use-offset=false --output="$w/af_$v.afdo" >"$w/af_$v.profgen.log" 2>&1
done
# the same edit with no line of a function moved: each block joined onto the line before it
python3 - "$src" >"$w/af_B2.c" <<'EOF'
import sys
out, block = [], None
for line in open(sys.argv[1]).read().split('\n'):
    if line.startswith('#ifdef NEXT_BUILD'):
        block = []
    elif block is not None and line.startswith('#endif'):
        out[-1] += ' ' + ' '.join(x.strip() for x in block)
        block = None
    elif block is not None:
        block.append(line)
    else:
        out.append(line)
print('\n'.join(out), end='')
EOF
cp "$w/af_B" "$w/af_B.none"
clang-14 "${cflags[@]}" -fprofile-sample-use="$w/af_A.afdo" -fprofile-sample-accurate \
	-o "$w/af_B.same_lines" "$w/af_B2.c"
for k in fresh:B stale:A; do
	clang-14 "${cflags[@]}" -fprofile-sample-use="$w/af_${k#*:}.afdo" -fprofile-sample-accurate \
		-o "$w/af_B.${k%:*}" "$w/af_B.c"
done
for k in none fresh stale same_lines; do
	tb[af_$k]=$(taken "af_B.$k")
	echo "fdo_stale_autofdo_taken_branches_$k: ${tb[af_$k]}"
	cmp -s "$w/af_B.out" "$w/af_B.$k.run.out" || note "af_B.$k printed other output than B"
done
for k in stale same_lines; do
	name=stale_autofdo
	[ "$k" = same_lines ] && name=stale_autofdo_same_lines
	python3 -c 'import sys; u, f, s = map(int, sys.argv[2:]); print("fdo_%s_fraction: %.3f" % (sys.argv[1], (u - s) / (u - f)))' \
		"$name" "${tb[af_none]}" "${tb[af_fresh]}" "${tb[af_$k]}"
done
