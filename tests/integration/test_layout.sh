#!/usr/bin/env bash
# The layout rules of README's "Layout" section: folders depend downward only
# (cli -> agent, collector -> common), no cycle between modules, no other
# module's internal header, CLI files <= 300 lines, functions <= 120 lines
# (bench/ too).
source "$(dirname "$0")/lib.sh"
check "source layout follows the README's rules (tests/layout/check_layout.py)" \
	python3 tests/layout/check_layout.py
# the checker itself must catch what it is for: a copy of the tree with a
# collector file reaching into the agent, and an agent file into the CLI
bad=$TEST_TMP
cp -r common agent collector cli bpf "$bad"/
echo '#include "agent/aggregate/aggregate.h"' >>"$bad/collector/store/store.c"
echo '#include "cli/cli_util.h"' >>"$bad/agent/chop/chop.c"
out=$(python3 tests/layout/check_layout.py "$bad" 2>&1)
check "the checker names a collector -> agent include" grep -q 'collector/store/store.c: collector/ must not include agent/' <<<"$out"
check "the checker names the agent -> cli include" grep -q 'agent/chop/chop.c: agent/ must not include cli/' <<<"$out"
# and a bench's function past 120 lines (bench/ is held to it too)
mkdir -p "$bad/bench"
{
	echo 'int long_bench_main(void)'
	echo '{'
	echo '	int x = 0;'
	for _ in $(seq 130); do echo '	x++;'; done
	echo '	return x;'
	echo '}'
} >"$bad/bench/long_bench.c"
out=$(python3 tests/layout/check_layout.py "$bad" 2>&1)
check "the checker names a bench function over 120 lines" \
	grep -q 'bench/long_bench.c:1: long_bench_main is 135 lines' <<<"$out"

# The linker holds the layers apart too: one library per top folder, each
# linked whole against only the layers below it (scripts/check_layers.sh, run
# before build/edgeprof is linked). A common/ object that calls into agent/,
# declaring the function itself so that no include shows it, is refused.
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(dirname "$EDGEPROF")
layers=$TEST_TMP/layers
mkdir -p "$layers"
if ! cp "$build"/rel/lib{cli,agent,collector,common}.a "$layers"/ 2>/dev/null; then
	not_ok "the layers' libraries are built ($build/rel/lib{cli,agent,collector,common}.a)"
	finish
fi
check_layers() {
	make -s --no-print-directory -C "$root" BUILD="$build" LAYERS_DIR="$layers" check-layers 2>&1
}
check "the libraries as built link layer by layer" check_layers
cat >"$TEST_TMP/wrong_way.c" <<'EOF'
struct ep_streamer;
void ep_streamer_free(struct ep_streamer *s);
void ep_common_wrong_way(void) { ep_streamer_free(0); }
EOF
cc -c -o "$TEST_TMP/wrong_way.o" "$TEST_TMP/wrong_way.c"
ar rs "$layers/libcommon.a" "$TEST_TMP/wrong_way.o" 2>/dev/null
out=$(check_layers)
rc=$?
echo "$out" | sed 's/^/# /'
check "a common/ object calling an agent/ function does not link" test "$rc" -ne 0
names_both() {
	grep -q 'libcommon.a calls outside' <<<"$out" &&
		grep -q 'undefined reference to .ep_streamer_free' <<<"$out"
}
check "  the refusal names libcommon.a and ep_streamer_free" names_both
cp "$TEST_TMP/wrong_way.c" "$bad/common/util/wrong_way.c"
check "  which the include rules cannot see" \
	bash -c "! python3 tests/layout/check_layout.py '$bad' | grep -q wrong_way"
finish
