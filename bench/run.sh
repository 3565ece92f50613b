#!/usr/bin/env bash
# `make bench`: prints "name: value" lines. Speed is compared with a peer in
# the same run (ratios), since these machines are noisy.
#  - import: edgeprof import vs perf2bolt (BOLT 16) on the same perf.data,
#    propeller_sample_1's samples repeated to make the input large enough;
#  - every bench/*.c program built into BUILD/bench/ prints its own lines.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
fx=tests/data/propeller
copies=${BENCH_COPIES:-50}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 bench/replicate_perfdata.py "$fx/propeller_sample_1.perfdata1" "$tmp/big.data" "$copies"
samples=$("$build/edgeprof" dump "$tmp/big.data" | wc -l)
echo "import_input_samples: $samples"
echo "import_input_bytes: $(stat -c %s "$tmp/big.data")"

# best of 3 wall-clock runs, in seconds
best_of_3() {
	local best="" t
	for _ in 1 2 3; do
		local start end
		start=$(date +%s.%N)
		"$@" >/dev/null 2>&1
		end=$(date +%s.%N)
		t=$(echo "$end - $start" | bc -l)
		if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" -eq 1 ]; then best=$t; fi
	done
	echo "$best"
}

ours=$(best_of_3 "$build/edgeprof" import "$tmp/big.data" --binary "$fx/propeller_sample_1.bin" \
	-o "$tmp/big.prof")
printf 'import_seconds: %.3f\n' "$ours"
printf 'import_samples_per_sec: %.0f\n' "$(echo "$samples / $ours" | bc -l)"
if command -v /usr/bin/time >/dev/null; then
	/usr/bin/time -f '%M' -o "$tmp/rss" "$build/edgeprof" import "$tmp/big.data" \
		--binary "$fx/propeller_sample_1.bin" -o "$tmp/big.prof" 2>/dev/null
	echo "import_peak_rss_kib: $(tail -1 "$tmp/rss")"
fi

# perf2bolt finds the binary by the name the recording gives it
cp "$fx/propeller_sample_1.bin" "$tmp/propeller_sample_1.bin.gen"
theirs=$(best_of_3 /usr/lib/llvm-16/bin/perf2bolt -p "$tmp/big.data" -o "$tmp/big.fdata" \
	"$tmp/propeller_sample_1.bin.gen")
printf 'perf2bolt_seconds: %.3f\n' "$theirs"
printf 'import_speedup_vs_perf2bolt: %.1f\n' "$(echo "$theirs / $ours" | bc -l)"
script=$(best_of_3 perf script -i "$tmp/big.data" -F ip,brstack)
printf 'perf_script_brstack_seconds: %.3f\n' "$script"
printf 'import_speedup_vs_perf_script: %.1f\n' "$(echo "$script / $ours" | bc -l)"

for b in "$build"/bench/*; do
	[ -x "$b" ] && "$b"
done
exit 0
