#!/usr/bin/env bash
# `make run`: the most end-to-end job edgeprof does today on a machine
# without a branch-stack PMU: import a real LBR recording (bundled), build the
# uniform edge profile, print its report and write the optimizer exports.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
data=tests/data/propeller
out=$build/demo
mkdir -p "$out"

echo "== edgeprof import: $data/propeller_sample_1.perfdata1 (recorded on Skylake-SP, 32-entry LBR)"
"$build/edgeprof" import "$data/propeller_sample_1.perfdata1" \
	--binary "$data/propeller_sample_1.bin" -o "$out/propeller.prof" --log-level info
echo
echo "== edgeprof report"
"$build/edgeprof" report "$out/propeller.prof" --top 10
for f in json fdata preagg afdo; do
	"$build/edgeprof" export "$out/propeller.prof" --format "$f" -o "$out/propeller.$f"
done
echo
echo "== exports written: $(cd "$out" && ls propeller.json propeller.fdata propeller.preagg propeller.afdo | tr '\n' ' ')(in $out)"
echo "   feed to BOLT: llvm-bolt-16 $data/propeller_sample_1.bin -o out.bolt -data $out/propeller.fdata"
