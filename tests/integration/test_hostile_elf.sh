#!/usr/bin/env bash
# Issue 32, items 1 and 2: ELF files made to multiply memory, mapped
# executable by a process that spins in them, against an agent held to
# 256 MiB and a collector held to 1 GiB (memory cgroups, as the manifests
# set them). hostile_elf.py makes them:
#   segments  4 MiB, 1,000 executable PT_LOADs each covering the whole file
#             (the collector copied every segment: 4 GB)
#   symbols   60,000 function symbols all naming one 16 KB string (the
#             agent and the collector copied every name: 1.2 GB)
#   sections  1,000,000 section headers (libelf keeps ~260 bytes of its own
#             for each: 260 MB before a byte of the file is looked at)
#   symbols-2..4  three more like symbols: each within the bounds of one
#             binary, together past the agent's budget (4 x 64 MiB of names)
# Both survive every one, say what they refused (file, size, bound), count
# it (the agent's summary line, the collector's /metrics), and the agent
# still profiles the processes spinning in them.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/memcg.sh"
source "$(dirname "$0")/collector.sh"

require_root_live
here=$(dirname "$0")
cg_c=$(memcg_create collector 1024) && cg_a=$(memcg_create agent 256) || {
	echo "# skipped: no memory cgroup here"
	finish
}
declare -A off id
kinds="segments symbols sections symbols-2 symbols-3 symbols-4"
for k in $kinds; do
	read -r off[$k] id[$k] < <(python3 "$here/hostile_elf.py" $k "$TEST_TMP/$k.elf")
done
cc -O1 -o "$TEST_TMP/map_spin" "$here/../workloads/map_spin.c" || exit 1

# the collector, in its cgroup from its first instruction
printf '#!/bin/sh\necho $$ >"%s/cgroup.procs" && exec "%s" "$@"\n' "$cg_c" "$EDGEPROF" \
	>"$TEST_TMP/in_cg"
chmod +x "$TEST_TMP/in_cg"
COLLECTOR_BIN=$TEST_TMP/in_cg start_collector c --store "sqlite:$TEST_TMP/c.db" \
	--listen 127.0.0.1:0 || exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"
collector_pid=$COLLECTOR_PID

# 1. straight to POST /v1/images, as any holder of the token (or anyone,
# without one) can
post() {
	curl -s -o "$TEST_TMP/$1.answer" -w '%{http_code}' --max-time 60 \
		--data-binary "@$TEST_TMP/$1.elf" \
		"$url/v1/images?build_id=${id[$1]}&path=/hostile/$1.elf&source=upload"
}
code=$(post segments)
echo "# segments: HTTP $code: $(cat "$TEST_TMP/segments.answer")"
check "collector: 1,000 overlapping executable segments refused (400), naming the bytes and the file's size" \
	bash -c "[ '$code' = 400 ] && grep -q 'executable segments.*[0-9] bytes.*overlap' '$TEST_TMP/segments.answer'"
code=$(post symbols)
echo "# symbols: HTTP $code: $(cat "$TEST_TMP/symbols.answer")"
check "collector: 60,000 symbols of 16 KB names: stored, the symbols kept up to --max-image-symbols-mib" \
	bash -c "[ '$code' = 201 ] && grep -q 'binary /hostile/symbols.elf .*[0-9] of 59999 function symbols not kept: past the 64 MiB --max-image-symbols-mib' '$TEST_TMP/c.log'"
code=$(post sections)
echo "# sections: HTTP $code: $(cat "$TEST_TMP/sections.answer")"
check "collector: 1,000,000 section headers refused (400) before libelf reads them" \
	bash -c "[ '$code' = 400 ] && grep -q '1000000 section headers' '$TEST_TMP/sections.answer'"
check "collector: each refusal logged with the file's name" \
	bash -c "grep -q 'binary upload of /hostile/segments.elf: refused' '$TEST_TMP/c.log' &&
		grep -q 'binary upload of /hostile/sections.elf: refused' '$TEST_TMP/c.log'"

# 2. an agent sampling processes that spin in them, streaming to that
# collector (which it uploads the files to)
pid_args=()
for k in $kinds; do
	"$TEST_TMP/map_spin" "$TEST_TMP/$k.elf" "${off[$k]}" &
	pid_args+=(--pid "$!")
	track_pid "$!"
done
memcg_start "$cg_a" agent "$EDGEPROF" agent "${pid_args[@]}" --duration 4 --interval 1 \
	--collector "$url" --spool "$TEST_TMP/spool" --log-level info -o "$TEST_TMP/a.prof" \
	2>"$TEST_TMP/agent.err"
wait "$agent"
rc=$?
echo "# agent: exit $rc, peak $(memcg_peak_mib "$cg_a") MiB; collector: peak $(memcg_peak_mib "$cg_c") MiB"
grep -E 'elf|binaries:|refused' "$TEST_TMP/agent.err" | cut -c1-300 | sed 's/^/#   /'
check "agent: not OOM-killed in 256 MiB ($(memcg_oom_kills "$cg_a") kills)" \
	test "$(memcg_oom_kills "$cg_a")" = 0
check "agent: exits 0" test "$rc" = 0
check "agent: says which symbols of symbols.elf it did not keep, and the bound" \
	grep -q 'symbols.elf (.*): [0-9]* of 59999 symbols not kept; past the [0-9]* MiB --binar\(y-symbols\|ies-held\)-max-mib' "$TEST_TMP/agent.err"
check "agent: refuses sections.elf's 1,000,000 section headers before libelf reads them" \
	grep -q 'sections.elf (.*): 1000000 section headers: reading them would take 259 MiB, more than the [0-9]* MiB --binar\(y-symbols\|ies-held\)-max-mib' "$TEST_TMP/agent.err"
check "agent: says the code of segments.elf it did not read, and the bound" \
	grep -q 'segments.elf (.*): [0-9.]* MiB of its 4000.0 MiB of executable segments not read (more than the file holds, or than the [0-9]* MiB --binar\(y-code\|ies-held\)-max-mib' "$TEST_TMP/agent.err"
check "agent: the four symbols files together kept within --binaries-held-max-mib, saying so" \
	grep -q 'symbols\(-[234]\)\?.elf (.*): [0-9]* of 59999 symbols not kept; past the [0-9]* MiB --binaries-held-max-mib (what the binaries held leave of it)' "$TEST_TMP/agent.err"
check "agent: binaries past their read limits counted in the summary" \
	grep -Eq 'binaries: .*[1-9][0-9]* past their read limits' "$TEST_TMP/agent.err"
samples=$("$EDGEPROF" export "$TEST_TMP/a.prof" --format json |
	jq --arg p "$TEST_TMP/symbols.elf" '[.profiles[] | select(.path == $p) | .samples] | add // 0')
check "agent: still profiles the process spinning in symbols.elf (${samples:-0} samples)" \
	test "${samples:-0}" -gt 0

check "collector: not OOM-killed in 1 GiB ($(memcg_oom_kills "$cg_c") kills)" \
	test "$(memcg_oom_kills "$cg_c")" = 0
check "collector: still up, /healthz answers" \
	bash -c "kill -0 $collector_pid && curl -sf --max-time 20 '$url/healthz' -o /dev/null"
for l in code headers symbols; do
	v=$(metric "$url" "edgeprof_images_limited_total{limit=\"$l\"}")
	check "collector: /metrics counts images past the $l limit (${v:-none})" test "${v:-0}" -ge 1
done
[ -n "${KEEP_LOGS:-}" ] && cp "$TEST_TMP"/*.log "$TEST_TMP"/*.err "$KEEP_LOGS"/
finish
