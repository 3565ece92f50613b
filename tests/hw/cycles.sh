#!/usr/bin/env bash
# agent --cycles on a machine with a PMU: the hardware cycles event opens
# (no cpu-clock fallback line), and where the branch records carry cycles
# (Intel LBR since Skylake) their first records say so and the event
# closes, else the event's IP samples give the cycles; either way the
# profile says cycles, report --cpi gives the busy function the most, the
# event's periods are P +- D, and a workload of two loops of known cost per
# instruction (one missing the caches on every load, one not) comes out in
# that order, the missing one at least 3x the CPI of the other.
# Elsewhere it says "skipped: no hardware cycles event" (test_agent_cycles.sh
# is the test there). Run as root after `make`.
cd "$(dirname "$0")/../.."
source tests/integration/lib.sh
ep=$EDGEPROF
tmp=$TEST_TMP

cc -O1 -g -o "$tmp/hot_cold" tests/workloads/hot_cold.c
"$tmp/hot_cold" 100000000000 >/dev/null &
pid=$!
track_pid "$pid"
"$ep" agent --pid "$pid" --duration 5 --cycles -o "$tmp/c.prof" --log-level info 2>"$tmp/c.err"
rc=$?
kill "$pid" 2>/dev/null
if grep -q -- '--cycles: no hardware cycles event' "$tmp/c.err"; then
	echo "skipped: no hardware cycles event ($(sed -n 's/.*no hardware cycles event on this machine (\([^)]*\)).*/\1/p' "$tmp/c.err"))"
	exit 0
fi
grep -- '--cycles' "$tmp/c.err" | sed 's/^/# /'
check "agent --cycles ran on the PMU" test "$rc" -eq 0
check "the hardware cycles event opened: one line says so, no fallback" \
	test "$(grep -c -- '--cycles: the cycles event, an IP sample every [0-9]* +- [0-9]* cycles' "$tmp/c.err")" -eq 1
"$ep" export "$tmp/c.prof" --format json -o "$tmp/c.json"
source=$(jq -r .config.cycles_source "$tmp/c.json")
with=$(jq .stats.samples_with_branches "$tmp/c.json")
echo "# cycles source: $source; $with samples with branch stacks"
if [ "${with:-0}" -gt 0 ]; then
	check "branch stacks: their first records decide the source, in one line" \
		test "$(grep -c -- '--cycles: the branch records carry' "$tmp/c.err")" -eq 1
fi
check "the profile's cycles are cycles (config: $source, $(jq -r .config.cycles_unit "$tmp/c.json"))" \
	bash -c "[ '$(jq -r .config.cycles_unit "$tmp/c.json")' = cycles ] && [ '$source' = branch_records -o '$source' = cycles_event ]"
"$ep" report "$tmp/c.prof" --cpi >"$tmp/cpi.txt"
read -r _ share _ _ _ hottest < <(sed -n '/^functions by cycles:/{n;n;p;q}' "$tmp/cpi.txt")
check "report --cpi: hot_loop has the most cycles ($hottest, $share)" test "$hottest" = hot_loop
if [ "$source" = cycles_event ]; then
	read -r p d < <(sed -n 's/.*the cycles event, an IP sample every \([0-9]*\) +- \([0-9]*\) cycles.*/\1 \2/p' "$tmp/c.err")
	stats=$(sed -n 's/.*cycles event periods: \(.*\)/\1/p' "$tmp/c.err")
	drawn=$(sed -n 's/.*cycles event: .*, \([0-9]*\) periods drawn.*/\1/p' "$tmp/c.err")
	echo "# asked $p +- $d cycles; measured $stats"
	check "cycles event periods: a uniform draw of P +- D, re-armed" \
		python3 tests/integration/uniform_period.py "${p:-0}" "${d:-0}" \
		"${stats:-n=0 mean=0 min=0 max=0 stddev=0}" "${drawn:-0}" rearm "$(nproc)"
fi
check "the cycles ring's lost-record metric is in the profile" \
	test "$(jq '.stats | has("cycles_lost_records")' "$tmp/c.json")" = true

# Two loops of known relative cost per instruction
cat >"$tmp/two_loops.c" <<'EOF'
#include <stdlib.h>
static volatile unsigned long sink;
/* every load a cache (and TLB) miss: a random cycle over 128 MiB */
__attribute__((noinline)) static unsigned long chase(const unsigned *next, unsigned long n)
{
	unsigned i = 0;
	for (unsigned long k = 0; k < n; k++)
		i = next[i];
	return i;
}
/* registers only */
__attribute__((noinline)) static unsigned long alu(unsigned long n)
{
	unsigned long s = 1;
	for (unsigned long k = 0; k < n; k++)
		s = s * 6364136223846793005ULL + k;
	return s;
}
int main(void)
{
	size_t len = 1u << 25;
	unsigned *next = malloc(len * sizeof(*next));
	for (size_t i = 0; i < len; i++)
		next[i] = (unsigned)i;
	unsigned long r = 88172645463325252ULL;
	for (size_t i = len - 1; i > 0; i--) { /* Sattolo: one cycle through all */
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		size_t j = r % i;
		unsigned t = next[i];
		next[i] = next[j], next[j] = t;
	}
	for (;;)
		sink += chase(next, 2000000) + alu(20000000);
}
EOF
cc -O1 -g -o "$tmp/two_loops" "$tmp/two_loops.c"
"$tmp/two_loops" &
pid=$!
track_pid "$pid"
"$ep" agent --pid "$pid" --duration 8 --cycles -o "$tmp/two.prof" 2>/dev/null
kill "$pid" 2>/dev/null
"$ep" export "$tmp/two.prof" --format json -o "$tmp/two.json"
cpi() { jq --arg f "$1" '[.profiles[].cpi.functions[]? | select(.name == $f) | .cpi] | first // 0' "$tmp/two.json"; }
chase=$(cpi chase)
alu=$(cpi alu)
echo "# CPI: chase $chase, alu $alu"
check "two loops: the cache-missing one's CPI at least 3x the other's ($chase vs $alu)" \
	python3 -c "import sys; c, a = float('$chase'), float('$alu'); sys.exit(not (a > 0 and c >= 3 * a))"
finish
