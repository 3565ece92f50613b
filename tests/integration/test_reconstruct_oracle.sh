#!/usr/bin/env bash
# Reconstruction against perf script's brstackinsn (an oracle we did not
# write): for every gap edgeprof reconstructs in propeller_sample_1, the
# instructions walked are exactly the ones perf lists. Zero disagreements.
source "$(dirname "$0")/lib.sh"

fx=$FIXTURES
recorded=/build/work/11ef31a2a8be9640fa8d4c917e76f0db3923/google3/blaze-out/k8-opt/genfiles/devtools/crosstool/autofdo/testdata/propeller_sample_1.bin.gen
mkdir -p "$TEST_TMP/symfs$(dirname "$recorded")"
cp "$fx/propeller_sample_1.bin" "$TEST_TMP/symfs$recorded"

perf script -i "$fx/propeller_sample_1.perfdata1" -F ip,sym,brstackinsn \
	--symfs "$TEST_TMP/symfs" >"$TEST_TMP/perf.txt" 2>"$TEST_TMP/perf.err"
check "perf script lists the instructions" test -s "$TEST_TMP/perf.txt"
"$EDGEPROF" trace "$fx/propeller_sample_1.perfdata1" --symfs "$TEST_TMP/symfs" \
	>"$TEST_TMP/trace.txt" 2>"$TEST_TMP/trace.err"
check "edgeprof trace runs" test $? -eq 0
"$EDGEPROF" dump "$fx/propeller_sample_1.perfdata1" >"$TEST_TMP/dump.txt"
check "every reconstructed gap equals perf's instructions" \
	python3 "$(dirname "$0")/brstackinsn_oracle.py" "$TEST_TMP/perf.txt" "$TEST_TMP/trace.txt" \
	"$TEST_TMP/dump.txt"
finish
