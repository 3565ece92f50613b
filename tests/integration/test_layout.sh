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
finish
