#!/usr/bin/env bash
# The collector's web UI on a binary with more than 10,000 edges (issue 13:
# every view should answer in < 300 ms). A generated C program (160
# functions of 40 data-dependent branches, built at -O0 so each stays a
# branch) runs under the LBR emulator, streamed into a collector with its
# code; then each view is asked BENCH_UI_RUNS (9) times:
#   ui_bench_edges                 the binary's edges (branches, and fall-throughs)
#   ui_view_ms_<view>              median wall time of the answer (curl)
#   ui_view_cpu_ms_<view>          the collector's CPU per answer (user + sys,
#                                  /proc), steadier than wall time on a busy machine
#   ui_view_ms_profile_proto       the peer: /v1/profile?format=proto, the store
#                                  read every binary and function view starts with
# views: binaries (/), binary (its page), function (its hottest function: CFG and
# disassembly: about 120 blocks), function_main (main: the loop calling all 160),
# function_big_switch (tests/workloads/big_switch.c's dispatch: ~1,000 blocks, of
# which the 400 hottest are laid out).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
case $build in /*) ;; *) build=$PWD/$build ;; esac
edgeprof=$build/edgeprof
runs=${BENCH_UI_RUNS:-9}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-uibench.XXXXXX")
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

python3 - "$tmp/many.c" <<'PY'
import sys
NF, NB = 160, 40
out = ["#include <stdlib.h>", "#include <stdio.h>", "volatile unsigned sink;"]
for f in range(NF):
    out.append(f"__attribute__((noinline)) static unsigned f{f}(unsigned x) {{ unsigned s = 0;")
    for b in range(NB):
        out.append(f"  if ((x >> {b % 13}) & {1 + b % 3}) s += {b + 1}; else s ^= {b * 7 + f};")
    out.append("  return s; }")
out.append("int main(int argc, char **argv) { unsigned n = argc > 1 ? atoi(argv[1]) : 300, x = 12345;")
out.append("  for (unsigned i = 0; i < n; i++) { x = x * 1103515245u + 12345u;")
out += [f"    sink += f{f}(x >> {f % 7});" for f in range(NF)]
out.append("  } printf(\"%u\\n\", sink); return 0; }")
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
gcc -O0 -Wl,--build-id -o "$tmp/many" "$tmp/many.c"
id=$(readelf -n "$tmp/many" | awk '/Build ID/ {print $3}')

"$edgeprof" collector --store "sqlite:$tmp/c.db" --listen 127.0.0.1:0 --port-file "$tmp/port" \
	>"$tmp/collector.log" 2>&1 &
pid=$!
# up to 60 s: a loaded machine (make test runs suites side by side) is slow
for _ in $(seq 600); do [ -s "$tmp/port" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
[ -s "$tmp/port" ] || { echo "bench: the collector did not start:" >&2; cat "$tmp/collector.log" >&2; exit 1; }
url=http://127.0.0.1:$(cat "$tmp/port")
"$edgeprof" record --emulate --period 2003 --collector "$url" --spool "$tmp/spool" \
	-o "$tmp/many.prof" -- "$tmp/many" 300 >"$tmp/record.log" 2>&1
curl -sf "$url/v1/profile?build_id=$id&format=json" >"$tmp/p.json"
echo "ui_bench_edges: $(jq '.profiles[0].branches | length' "$tmp/p.json")"
main=$(nm "$tmp/many" | awk '$3 == "main" {print "0x" $1}')
# the hottest function, as the binary's page ranks them
hot=$(curl -sf "$url/binary?build_id=$id" | grep -o 'addr=0x[0-9a-f]*' | head -1 | cut -d= -f2)

gcc -O1 -Wl,--build-id -o "$tmp/big_switch" tests/workloads/big_switch.c
"$edgeprof" record --emulate --collector "$url" --spool "$tmp/spool-big" \
	-o "$tmp/big.prof" -- "$tmp/big_switch" 400000 >"$tmp/record-big.log" 2>&1
"$edgeprof" upload "$tmp/big_switch" --collector "$url" >>"$tmp/record-big.log" 2>&1
big_id=$(readelf -n "$tmp/big_switch" | awk '/Build ID/ {print $3}')
big=$(nm "$tmp/big_switch" | awk '$3 == "dispatch" {print "0x" $1}')

cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
measure() { # name path
	local t0 t1 times=()
	t0=$(cpu_ticks)
	for _ in $(seq "$runs"); do
		times+=("$(curl -sf -o /dev/null -w '%{time_total}' "$url$2")")
	done
	t1=$(cpu_ticks)
	printf '%s\n' "${times[@]}" | sort -n | awk -v n="$1" '{a[NR] = $1}
		END {printf "ui_view_ms_%s: %.1f\n", n, 1000 * a[int((NR + 1) / 2)]}'
	awk -v n="$1" -v d=$((t1 - t0)) -v hz="$hz" -v r="$runs" \
		'BEGIN {printf "ui_view_cpu_ms_%s: %.1f\n", n, 1000 * d / hz / r}'
}
measure binaries "/"
measure binary "/binary?build_id=$id"
measure function "/function?build_id=$id&addr=$hot"
measure function_main "/function?build_id=$id&addr=$main"
measure function_big_switch "/function?build_id=$big_id&addr=$big"
measure profile_proto "/v1/profile?build_id=$id&format=proto"
echo "bench: note: ui views measured at load average $(cut -d' ' -f1 /proc/loadavg)" >&2
