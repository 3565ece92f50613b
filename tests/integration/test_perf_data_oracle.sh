#!/usr/bin/env bash
# The perf.data reader against perf itself: every sample's IP and branch
# stack, as `edgeprof dump` prints them, equal `perf script -F ip,brstack`.
# perf sorts samples by time, edgeprof prints them in file order: both
# listings are sorted before comparing (each line is a whole sample).
source "$(dirname "$0")/lib.sh"

norm() { sed -e 's/[[:space:]]\+/ /g' -e 's/^ //' -e 's/ $//'; }
for f in propeller_sample_1.perfdata1 test.lbr; do
	perf script -i "$FIXTURES/$f" -F ip,brstack 2>/dev/null | norm | sort >"$TEST_TMP/perf.txt"
	"$EDGEPROF" dump "$FIXTURES/$f" | norm | sort >"$TEST_TMP/ours.txt"
	n=$(wc -l <"$TEST_TMP/perf.txt")
	echo "# $f: $n samples from perf script"
	check "$f: perf script printed samples" test "$n" -gt 1000
	check "$f: every sample's branch stack equals perf script's" \
		cmp -s "$TEST_TMP/perf.txt" "$TEST_TMP/ours.txt"
	cmp "$TEST_TMP/perf.txt" "$TEST_TMP/ours.txt" | head -2
done
finish
