#!/usr/bin/env bash
# bench/fdo's cache: a cached file is remade when an option, an input, the binary or the
# tool that made it changed, and only then (bench_fdo_cache.py).
source "$(dirname "$0")/lib.sh"
# the commands' "bench/fdo: +" notes are shown only when a check fails
python3 "$(dirname "$0")/bench_fdo_cache.py" "$TEST_TMP" 2> "$TEST_TMP/notes" || {
	cat "$TEST_TMP/notes"
	_status=1
}
finish
