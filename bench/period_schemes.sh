#!/usr/bin/env bash
# How the period is randomized against what it costs (part of `make bench`):
# the emulator models each of the live agent's schemes exactly (record
# --emulate --period-scheme), and the profile of ~15,000 samples is compared
# with the exact counts (overlap of conditional edges, as bench/accuracy.sh).
# Interrupts per sample: steps:K costs K, rearm:E costs 1 + the re-arms
# (one per CPU per drain: E events apart, ~1,000 samples at the defaults).
# The mean period is a multiple of the aliasing workload's 256-branch pattern,
# the worst case for a fixed period, which is shown as the floor.
#   period_scheme_overlap_<scheme>_<workload>: X
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ep=$build/edgeprof
for spec in aliasing:1600000 state_machine:6000000; do
	name=${spec%%:*}
	arg=${spec#*:}
	cc -O1 -g -o "$tmp/$name" "tests/workloads/$name.c"
	"$ep" record --emulate --period 1000000007 --exact-out "$tmp/exact.json" -o "$tmp/x.prof" \
		-- "$tmp/$name" "$arg" >/dev/null 2>"$tmp/totals"
	branches=$(sed -n 's/.* ran \([0-9]*\) branches.*/\1/p' "$tmp/totals")
	p=$(((branches / 15000 + 128) / 256 * 256))
	for scheme in fixed steps:16 steps:4 steps:1 rearm:$((p * 10)) rearm:$((p * 100)) \
		rearm:$((p * 1000)) sample; do
		if [ "$scheme" = fixed ]; then
			opts=(--jitter 0)
		else
			opts=(--period-scheme "$scheme")
		fi
		"$ep" record --emulate --event branches --period "$p" "${opts[@]}" -o "$tmp/a.prof" \
			-- "$tmp/$name" "$arg" >/dev/null 2>&1
		"$ep" export "$tmp/a.prof" --format json -o "$tmp/a.json"
		overlap=$(python3 tests/integration/overlap.py "$tmp/a.json" "$tmp/exact.json" "$tmp/$name")
		# rearm:E in samples between re-arms, the figure that matters
		label=$scheme
		[[ $scheme == rearm:* ]] && label="rearm_every_$((${scheme#rearm:} / p))_samples"
		echo "period_scheme_overlap_${label/:/_}_$name: $overlap"
	done
done
