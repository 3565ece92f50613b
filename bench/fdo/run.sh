#!/bin/bash
# bench/fdo/run.sh BUILD_DIR: the FDO benchmark on real programs (`make bench-fdo`).
# Fetches the Debian sources (root, once), builds the GCC baselines, makes the inputs, then
# bench/fdo/fdo.py measures every variant. Everything is cached under BUILD_DIR/fdo; the
# printed lines are also kept in BUILD_DIR/fdo/results.txt, which `make bench` shows.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(realpath "${1:-build}")
top=$build/fdo
for tool in llvm-bolt-16 /usr/lib/llvm-16/bin/perf2bolt valgrind gcc dpkg-source tclsh; do
	command -v "$tool" > /dev/null || {
		echo "bench/fdo: $tool is missing (make deps)" >&2
		exit 1
	}
done
bench/fdo/sources.sh "$top/src"
programs=${BENCH_FDO_PROGRAMS:-lua,sqlite,zstd}
# a baseline is rebuilt when what makes it changes: the build script, the compiler, the
# source packages' versions (their directory names); everything measured from it is keyed
# by its content in fdo.py
for p in ${programs//,/ }; do
	out=$top/build/$p/base
	key=$({
		echo "$p"
		cat bench/fdo/build.sh
		gcc --version
		ls "$top/src"
	} | sha256sum | cut -d' ' -f1)
	if [ ! -s "$out" ] || [ "$(cat "$out.key" 2> /dev/null)" != "$key" ]; then
		rm -f "$out" "$out.key"
		bench/fdo/build.sh "$top/src" "$top/work" "$p" "$out" gcc
		echo "$key" > "$out.key"
	fi
done
# zstd's inputs are made from the sqlite amalgamation
[[ ,$programs, != *,zstd,* ]] || {
	bench/fdo/build.sh "$top/src" "$top/work" sqlite-amalgamation - gcc
	bench/fdo/inputs/make_zstd_corpus.sh "$top/src" "$top/work" "$top/inputs"
}
python3 bench/fdo/fdo.py "$build" > "$top/results.txt.new"
mv "$top/results.txt.new" "$top/results.txt"
cat "$top/results.txt"
# what a BOLT profile of lua's build before is worth on the next (issue 35; next_build_lua.sh,
# about a minute and a half); BENCH_FDO_NEXT_BUILD=0 leaves it out
if [[ ,$programs, == *,lua,* ]] && [ "${BENCH_FDO_NEXT_BUILD:-1}" != 0 ]; then
	bench/fdo/next_build_lua.sh "$build" "$top/src" | tee -a "$top/results.txt"
fi
