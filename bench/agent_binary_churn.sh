#!/usr/bin/env bash
# The agent's memory on a node that runs many distinct programs once each (a
# build machine's compilers and test binaries): an agent watching one cgroup
# (--interval 1) while N copies of a program with 4,000 functions, each with
# its own build-id, run there one after the other, 20 per interval. Prints
# the agent's RSS after every 100 and at the end, and what the agent says of
# its binaries (read, evicted, held):
#   agent_binary_churn_rss_kib_0, _100, ..., _end
# (BENCH_CHURN_PROGRAMS, default 400.) Not part of `make bench`: it is a
# check of a bound more than a figure. Needs root and a writable cgroup v2.
# usage: bench/agent_binary_churn.sh [BUILD] (BUILD/edgeprof, default build)
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
n=${BENCH_CHURN_PROGRAMS:-400}
source bench/sampling_lib.sh
sampling_bench_setup binary-churn
ep=$build/edgeprof
cg=
for root in /sys/fs/cgroup/unified /sys/fs/cgroup; do
	if [ -f "$root/cgroup.procs" ] && [ -w "$root" ]; then
		cg=$root/edgeprof-churn-$$
		break
	fi
done
if [ -z "$cg" ] || ! mkdir "$cg"; then
	note "no writable cgroup v2 hierarchy: the binary churn figures are skipped"
	exit 0
fi
trap 'sampling_bench_cleanup; rmdir "$cg" 2>/dev/null || true' EXIT

python3 - "$tmp" "$n" <<'EOF'
import os, re, subprocess, sys
tmp, n = sys.argv[1], int(sys.argv[2])
with open(f"{tmp}/many.c", "w") as f:
    for i in range(4000):
        f.write(f"int a_function_with_a_name_as_long_as_mangled_ones_are_{i:05d}(int x)"
                f" {{ return x * {i} + 1; }}\n")
    f.write("int main(int c, char **v) { (void)v;"
            " return a_function_with_a_name_as_long_as_mangled_ones_are_00001(c) == 0; }\n")
subprocess.run(["cc", "-O1", "-Wl,--build-id", "-o", f"{tmp}/many", f"{tmp}/many.c"], check=True)
note = subprocess.run(["readelf", "-n", f"{tmp}/many"], capture_output=True, text=True).stdout
bid = bytes.fromhex(re.search(r"Build ID: ([0-9a-f]+)", note).group(1))
data = bytearray(open(f"{tmp}/many", "rb").read())
at = data.find(bid) + len(bid) - 2
os.mkdir(f"{tmp}/bins")
for i in range(n):
    data[at:at + 2] = i.to_bytes(2, "big")
    with open(f"{tmp}/bins/p{i}", "wb") as f:
        f.write(data)
    os.chmod(f"{tmp}/bins/p{i}", 0o755)
EOF

"$ep" agent --cgroup "$cg" --interval 1 --duration 3600 -o "$tmp/a.prof" 2>"$tmp/a.err" &
sampler=$!
for _ in $(seq 600); do
	grep -q 'sampling IPs\|branch stacks on' "$tmp/a.err" && break
	sleep 0.1
done
rss() { awk '/VmRSS/{print $2}' "/proc/$sampler/status"; }
# until the agent rewrote its profile: one interval, so evictions keep up
wait_write() {
	local was
	was=$(stat -c %y "$tmp/a.prof" 2>/dev/null || true)
	for _ in $(seq 200); do
		[ "$(stat -c %y "$tmp/a.prof" 2>/dev/null || true)" != "$was" ] && return
		sleep 0.05
	done
}
echo "agent_binary_churn_rss_kib_0: $(rss)"
for i in $(seq 0 $((n - 1))); do
	bash -c 'echo $$ >"$1/cgroup.procs" && exec "$2"' _ "$cg" "$tmp/bins/p$i" >/dev/null 2>&1 || true
	if [ $(((i + 1) % 20)) = 0 ]; then wait_write; fi
	if [ $(((i + 1) % 100)) = 0 ]; then echo "agent_binary_churn_rss_kib_$((i + 1)): $(rss)"; fi
done
wait_write
wait_write
echo "agent_binary_churn_rss_kib_end: $(rss)"
kill -TERM "$sampler"
wait "$sampler" || true
sampler=
note "$(grep -o 'binaries: .*' "$tmp/a.err" || echo 'the agent says nothing of its binaries')"
