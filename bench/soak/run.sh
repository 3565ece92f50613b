#!/usr/bin/env bash
# `make soak` (issue 12, part 3): a whole-machine agent streams to a collector
# for SOAK_S seconds (1800) with churn, both the ASan+UBSan build
# (BUILD/edgeprof-asan, LeakSanitizer on):
#   - SOAK_EXECS (200) short processes a second (fork+exec /bin/true),
#   - a dlopen/dlclose loop (SOAK_DLOPENS, 50 a second, libz),
#   - "containers": every few seconds a cgroup named the way podman names its
#     own (libpod-ID.scope) is made, a short busy process runs in it, and it is
#     removed,
#   - the collector stopped and started again twice (at 30% and 60% of the
#     run; while it is down the agent's batches wait in its spool),
#   - the spool's disk (a 2 MiB tmpfs of this run's private mount namespace)
#     filled by a file and freed again (at 45% and 80%: batches that cannot be
#     put in the spool meanwhile are lost and counted, with their samples).
# Every 10 s the RSS and open descriptors of agent and collector are
# sampled, and the collector's heap in use and SQLite's part of it (its
# /metrics); after warm-up (SOAK_WARMUP_S, 20% of the run, at least 30 s) their
# slope is fitted (least squares; the collector's per run between restarts,
# the last one reported). At the end the agent is stopped (it flushes its
# spool), and every sample is accounted for: the samples of the batches
# the agent made (put in its spool, or refused by the spool's full disk and
# counted, both in its closing line) equal the collector's stored samples
# plus the refused ones. (Not the agent's -o totals: they keep every label
# set and binary ever seen in memory, which would be the soak's own growth.)
# Prints "soak_name: value" lines; exits 1
# when the accounting does not balance, a sanitizer reported, or a process
# failed. Needs root (BPF, mounts, cgroups).
set -u
build=${1:-build}
cd "$(dirname "$0")/../.." || exit 2
secs=${SOAK_S:-1800}
execs=${SOAK_EXECS:-200}
dlopens=${SOAK_DLOPENS:-50}
warmup=${SOAK_WARMUP_S:-$((secs / 5 > 30 ? secs / 5 : 30))}
interval=${SOAK_INTERVAL_S:-5}
case $build in /*) ;; *) build=$PWD/$build ;; esac
asan=$build/edgeprof-asan
# SOAK_COLLECTOR=plain runs the collector users run (glibc's allocator, no
# shadow memory) to tell its RSS from the ASan build's
collector_bin=$asan
[ "${SOAK_COLLECTOR:-asan}" = plain ] && collector_bin=$build/edgeprof
churn=$build/bench-soak/churn
note() { echo "soak: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
	note "needs root (the agent's BPF, a tmpfs, cgroups)"
	exit 2
fi
for f in "$asan" "$churn"; do
	[ -x "$f" ] || {
		note "$f is missing: make $build/edgeprof-asan $build/bench-soak/churn"
		exit 2
	}
done
# a private mount namespace: the spool's tmpfs is gone with this run
if [ "${EP_SOAK_NS:-}" != 1 ]; then
	EP_SOAK_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-soak.XXXXXX")
spool=$tmp/spool
mkdir -p "$spool"
mount -t tmpfs -o size=2m tmpfs "$spool" || {
	note "cannot mount a tmpfs for the spool"
	exit 2
}
cg_root=
for r in /sys/fs/cgroup/unified /sys/fs/cgroup; do
	if [ -f "$r/cgroup.procs" ] && [ -w "$r" ]; then
		cg_root=$r
		break
	fi
done
slice=${cg_root:+$cg_root/edgeprof-soak-$$.slice}
pids=()
stop_pid() { # TERM, wait up to 120 s (an ASan agent flushing), then KILL
	local pid=$1
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 1200); do
		kill -0 "$pid" 2>/dev/null || {
			wait "$pid" 2>/dev/null
			return
		}
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}
cleanup() {
	for p in "${pids[@]:-}"; do [ -n "$p" ] && stop_pid "$p"; done
	if [ -n "$slice" ] && [ -d "$slice" ]; then
		for c in "$slice"/*/; do
			[ -d "$c" ] || continue
			while read -r p; do echo "$p" >"$cg_root/cgroup.procs"; done <"$c/cgroup.procs" 2>/dev/null
			rmdir "$c" 2>/dev/null
		done
		rmdir "$slice" 2>/dev/null
	fi
	umount "$spool" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# ASan's quarantine holds up to 256 MiB of freed memory by default: RSS would
# grow to it whatever the program does; 4 MiB keeps RSS meaningful
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:quarantine_size_mb=4
export UBSAN_OPTIONS=print_stacktrace=1

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
collector=
collector_runs=0
start_collector() {
	collector_runs=$((collector_runs + 1))
	rm -f "$tmp/port"
	"$collector_bin" collector --store "sqlite:$tmp/store.db" --listen "127.0.0.1:$port" \
		--port-file "$tmp/port" >"$tmp/collector.$collector_runs.log" 2>&1 &
	collector=$!
	pids+=("$collector")
	for _ in $(seq 1 600); do
		[ -s "$tmp/port" ] && return 0
		kill -0 "$collector" 2>/dev/null || break
		sleep 0.1
	done
	note "collector did not start:"
	cat "$tmp/collector.$collector_runs.log" >&2
	exit 1
}
stop_collector() {
	stop_pid "$collector"
	collector=
}
start_collector

"$asan" agent --collector "$url" --spool "$spool" --spool-max-mib 64 --interval "$interval" \
	--flush-timeout 120 --retry-max-ms 2000 --node soak \
	>"$tmp/agent.log" 2>&1 &
agent=$!
pids+=("$agent")
for _ in $(seq 1 1200); do
	grep -q 'sampling IPs\|branch stacks on' "$tmp/agent.log" && break
	kill -0 "$agent" 2>/dev/null || break
	sleep 0.1
done
if ! grep -q 'sampling IPs\|branch stacks on' "$tmp/agent.log"; then
	note "the agent did not start sampling:"
	tail -5 "$tmp/agent.log" >&2
	exit 1
fi

"$churn" execs "$execs" >"$tmp/churn.execs" 2>&1 &
churn_execs=$!
pids+=("$churn_execs")
"$churn" dlopen "$dlopens" >"$tmp/churn.dlopen" 2>&1 &
churn_dl=$!
pids+=("$churn_dl")
# containers: a cgroup made, a busy process in it for ~2 s, the cgroup removed

container_loop() {
	[ -n "$slice" ] || return 0
	mkdir -p "$slice" || return 0
	local n=0
	while :; do
		local id ct
		id=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
		ct=$slice/libpod-$id.scope
		mkdir "$ct" || break
		sh -c 'echo $$ >"$1/cgroup.procs" && i=0 && while [ $i -lt 20000 ]; do i=$((i + 1)); done' \
			sh "$ct"
		rmdir "$ct"
		n=$((n + 1))
		echo "$n" >"$tmp/containers"
	done
}
container_loop &
containers_pid=$!
pids+=("$containers_pid")

# samples: elapsed agent_rss agent_fds collector_rss collector_fds
# collector_run collector_store_kib collector_heap_kib: SQLite's heap (its
# page cache fills up to cache_size as the store grows, which RSS shows as
# growth) and all the heap in use (a leak grows it; memory the allocator
# keeps grows RSS only)
heap_kib() {
	curl -s --max-time 5 "$url/metrics" | awk '
		/^edgeprof_store_memory_bytes / {s = int($2 / 1024)}
		/^edgeprof_process_heap_bytes / {h = int($2 / 1024)}
		END {print s + 0, h + 0}'
}
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
next_sample=0
: >"$tmp/samples"
sample() {
	local e
	e=$(elapsed)
	[ "$e" -ge "$next_sample" ] || return 0
	next_sample=$((next_sample + 10))
	if [ -n "$collector" ]; then
		echo "$e $(rss "$agent") $(fds "$agent") $(rss "$collector") $(fds "$collector") $collector_runs $(heap_kib)" >>"$tmp/samples"
	else
		echo "$e $(rss "$agent") $(fds "$agent") - - $collector_runs - -" >>"$tmp/samples"
	fi
}
# run_until SECONDS: samples every 10 s until then
run_until() {
	while [ "$(elapsed)" -lt "$1" ]; do
		sample
		kill -0 "$agent" 2>/dev/null || {
			note "the agent exited:"
			tail -5 "$tmp/agent.log" >&2
			exit 1
		}
		sleep 1
	done
}
spooled() { find "$spool" -name '*.batch' | wc -l; }
lost_lines() { grep -c "batch [0-9]* lost" "$tmp/agent.log"; }
# sample_until TEST WHAT: samples until TEST holds. The agent makes a batch
# every --interval s, so when TEST still fails far past that, the agent has
# stopped doing WHAT: the run fails, naming it, rather than waiting forever.
sample_until() {
	local waited=0
	until "$1"; do
		sample
		if [ $((waited += 1)) -gt $((interval * 20 + 60)) ]; then
			note "$2 in $waited s"
			exit 1
		fi
		sleep 1
	done
}
three_spooled() { [ "$(spooled)" -ge 3 ]; }
# an outage: the collector down until 3 batches wait in the spool
outage() {
	stop_collector
	sample_until three_spooled "the collector is down, yet 3 batches were not spooled"
	start_collector
}
# the spool's disk full until a batch could not be put in it. Filled to
# its last page (tmpfs allocates pages): 16 KiB blocks left up to 20 KiB
# free, which an IP-only agent's batches on a busy machine fit in, and the
# soak waited for a loss that never came.
lost_before=0
batch_lost() { [ "$(lost_lines)" -gt "$lost_before" ]; }
fill_spool() {
	lost_before=$(lost_lines)
	dd if=/dev/zero of="$spool/filler" bs=4k 2>/dev/null
	sample_until batch_lost "the spool's disk is full, yet no batch was lost"
	rm -f "$spool/filler"
}
run_until $((secs * 30 / 100))
outage
run_until $((secs * 45 / 100))
fill_spool
run_until $((secs * 60 / 100))
outage
run_until $((secs * 80 / 100))
fill_spool
run_until "$secs"
sample

stop_pid "$churn_execs"
stop_pid "$churn_dl"
stop_pid "$containers_pid"
stop_pid "$agent"
wait "$agent" 2>/dev/null
agent_rc=$?
stop_collector
# the store read back by a collector of the plain build (the ASan one has stopped)
"$build/edgeprof" collector --store "sqlite:$tmp/store.db" --listen 127.0.0.1:0 \
	--port-file "$tmp/port.read" >"$tmp/reader.log" 2>&1 &
reader=$!
pids+=("$reader")
for _ in $(seq 1 600); do [ -s "$tmp/port.read" ] && break; sleep 0.1; done
stored=$(curl -sf "http://127.0.0.1:$(cat "$tmp/port.read")/v1/binaries?limit=1000" |
	jq '[.binaries[].samples] | add // 0')
stop_pid "$reader"
summary=$(grep "streamed [0-9]* batches" "$tmp/agent.log" | tail -1)
spooled=$(sed -n 's/.*streamed [0-9]* batches (\([0-9]*\) samples).*/\1/p' <<<"$summary")
lost=$(sed -n 's/.* lost unspooled (\([0-9]*\) samples).*/\1/p' <<<"$summary")
lost_batches=$(sed -n 's/.* \([0-9]*\) lost unspooled.*/\1/p' <<<"$summary")
evicted=$(sed -n 's/.* \([0-9]*\) dropped from a full spool.*/\1/p' <<<"$summary")

echo "soak_seconds: $(elapsed)"
echo "soak_execs: $(sed -n 's/churn_execs: //p' "$tmp/churn.execs")"
echo "soak_dlopens: $(sed -n 's/churn_dlopen: //p' "$tmp/churn.dlopen")"
echo "soak_containers: $(cat "$tmp/containers" 2>/dev/null || echo 0)"
echo "soak_collector_runs: $collector_runs"
counted=$((${spooled:-0} + ${lost:-0}))
echo "soak_samples_counted: $counted"
echo "soak_samples_stored: $stored"
echo "soak_samples_lost_counted: ${lost:-?} (${lost_batches:-?} batches the full spool disk refused)"
echo "soak_batches_evicted: ${evicted:-?}"
balanced=0
[ -n "$lost" ] && [ -n "$spooled" ] && [ "$counted" -gt 0 ] && [ "$counted" = "$((stored + lost))" ] &&
	[ "${evicted:-1}" = 0 ] && balanced=1
echo "soak_accounting_balanced: $balanced"
echo "soak_agent_exit: $agent_rc"
reports=$(cat "$tmp"/agent.log "$tmp"/collector.*.log | grep -c 'Sanitizer\|runtime error')
echo "soak_sanitizer_reports: $reports"
# slopes after warm-up: the agent over the run, the collector over its last run
python3 - "$tmp/samples" "$warmup" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
warm = float(sys.argv[2])
def slope(pts):
    n = len(pts)
    if n < 3:
        return float("nan")
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den * 60 if den else float("nan")
agent = [r for r in rows if float(r[0]) >= warm]
last = max(int(r[5]) for r in rows)
coll = [r for r in rows if r[3] != "-" and int(r[5]) == last]
coll = coll[len(coll) // 5:]  # its own warm-up
def show(name, pts, col):
    if not pts:
        return
    ys = [(float(r[0]), col(r) if callable(col) else float(r[col])) for r in pts]
    print(f"soak_{name}_first: {ys[0][1]:.0f}")
    print(f"soak_{name}_last: {ys[-1][1]:.0f}")
    print(f"soak_{name}_max: {max(y for _, y in ys):.0f}")
    print(f"soak_{name}_slope_per_min: {slope(ys):.2f}")
print(f"soak_rss_samples: {len(rows)}")
show("agent_rss_kib", agent, 1)
show("agent_fds", agent, 2)
show("collector_rss_kib", coll, 3)
show("collector_fds", coll, 4)
# what of the collector's growth is SQLite's page cache filling (bounded by
# its cache_size), and what is left
show("collector_store_kib", coll, 6)
show("collector_rss_less_store_kib", coll, lambda r: float(r[3]) - float(r[6]))
show("collector_heap_kib", coll, 7)
show("collector_heap_less_store_kib", coll, lambda r: float(r[7]) - float(r[6]))
PY
cp "$tmp/samples" "${SOAK_SAMPLES_OUT:-/dev/null}" 2>/dev/null
[ "$reports" -eq 0 ] || grep -h -A12 'Sanitizer\|runtime error' "$tmp"/agent.log "$tmp"/collector.*.log | head -60 >&2
[ "$balanced" = 1 ] && [ "$reports" -eq 0 ] && [ "$agent_rc" -eq 0 ]
