#!/usr/bin/env bash
# The perf.data reader against perf itself: every sample's IP and branch
# stack, as `edgeprof dump` prints them, equal `perf script -F ip,brstack`.
# Same order too: both put records back in time order (perf writes each
# CPU's buffer in turn, so file order is not time order).
source "$(dirname "$0")/lib.sh"

norm() { sed -e 's/[[:space:]]\+/ /g' -e 's/^ //' -e 's/ $//'; }
for f in propeller_sample_1.perfdata1 test.lbr; do
	perf script -i "$FIXTURES/$f" -F ip,brstack 2>/dev/null | norm >"$TEST_TMP/perf.txt"
	"$EDGEPROF" dump "$FIXTURES/$f" | norm >"$TEST_TMP/ours.txt"
	n=$(wc -l <"$TEST_TMP/perf.txt")
	echo "# $f: $n samples from perf script"
	check "$f: perf script printed samples" test "$n" -gt 1000
	check "$f: every sample's branch stack equals perf script's" \
		cmp -s "$TEST_TMP/perf.txt" "$TEST_TMP/ours.txt"
	cmp "$TEST_TMP/perf.txt" "$TEST_TMP/ours.txt" | head -2
done
finish
