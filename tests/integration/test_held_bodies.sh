#!/usr/bin/env bash
# Held request bodies (issue 32, item 4), no token needed: 72 connections
# (from 3 addresses, under --max-client-conns) each declare a 16 MiB batch,
# send all of it but the last byte and hold it; a connection the collector
# closes comes back 2 s later and does it again. Each body was kept whole
# per connection with no bound across connections and no deadline (the
# header timeout stops at the header), so the 1 GiB collector was
# OOM-killed. Now all bodies together hold at most --max-bodies-mib (256);
# past it a body that stopped arriving at --body-min-rate is closed to make
# room, and one that falls --body-timeout-s behind it is closed anyway.
# Checked with the collector in a 1 GiB memory cgroup (the manifest's
# limit): it survives, /healthz answers at once and an agent streams its
# batches while the attack goes on, and the closings are counted.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"
source "$(dirname "$0")/memcg.sh"

perf="$FIXTURES/propeller_sample_1.perfdata1"
bin="$FIXTURES/propeller_sample_1.bin"
args=(collector --store "sqlite:$TEST_TMP/store.db" --listen 127.0.0.1:0
	--port-file "$TEST_TMP/port" --body-timeout-s 4)
if cg=$(memcg_create collector 1024); then
	memcg_start "$cg" cpid "$EDGEPROF" "${args[@]}"
else # the bounds still hold; only the cgroup's own checks are skipped
	echo "# no memory cgroup here: its OOM and peak checks are skipped"
	"$EDGEPROF" "${args[@]}" &
	cpid=$!
	track_pid "$cpid"
fi
peak() { if [ -n "$cg" ]; then memcg_peak_mib "$cg"; else echo "?"; fi; }
for _ in $(seq 100); do [ -s "$TEST_TMP/port" ] && break; sleep 0.1; done
url=http://127.0.0.1:$(cat "$TEST_TMP/port")
python3 "$(dirname "$0")/slow_clients.py" --body $((16 * 1024 * 1024 - 1)) --reconnect 2 \
	"${url##*:}" "$TEST_TMP/held" 0 127.0.0.10x24 127.0.0.11x24 127.0.0.12x24 &
attack=$!
track_pid "$attack"
stat() { awk -v k="$1" '$1 == k {print $2}' "$TEST_TMP/held" 2>/dev/null; }
m() { metric "$url" "$1"; }
# until 1.25 GiB went out: more than the cgroup holds, had it all been kept
for _ in $(seq 600); do
	[ "$(($(stat sent_mib) + 0))" -ge 1280 ] 2>/dev/null && break
	kill -0 "$cpid" 2>/dev/null || break
	sleep 0.1
done
echo "# attack: $(stat sent_mib) MiB sent on $(stat connected) connections, $(stat reconnected) of them again"
check "the collector lives through 1.25 GiB of held bodies (peak $(peak) MiB)" \
	kill -0 "$cpid"
t=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 10 "$url/healthz")
check "  while they are held: /healthz answers 200 at once ($t s)" \
	python3 -c "import sys; c, t = '$t'.split(); sys.exit(c != '200' or float(t) > 2)"
start=$SECONDS
timeout 60 "$EDGEPROF" agent --replay "$perf" --binary "$bin" --collector "$url" \
	--spool "$TEST_TMP/spool" --flush-timeout 30 >"$TEST_TMP/agent.log" 2>&1
rc=$?
sed 's/^/# agent: /' "$TEST_TMP/agent.log" | tail -1
check "  an agent streams every batch meanwhile (exit $rc, $((SECONDS - start)) s)" \
	test "$rc" -eq 0 -a $((SECONDS - start)) -le 30
held=$(m edgeprof_http_body_bytes)
check "  bodies held: $((held >> 20)) MiB, at most the 256 MiB bound" \
	test "$held" -le $((256 << 20)) -a "$(m edgeprof_http_body_bytes_max)" = $((256 << 20))
reason() { m "edgeprof_http_connections_closed_total{reason=\"$1\"}"; }
check "  stalled bodies were closed to make room (body_evicted $(reason body_evicted))" \
	test "$(($(reason body_evicted) + 0))" -gt 0
kill "$attack" 2>/dev/null
wait "$attack" 2>/dev/null
if [ -n "$cg" ]; then
	check "no OOM kill in the collector's cgroup ($(memcg_oom_kills "$cg")), peak $(peak) MiB" \
		test "$(memcg_oom_kills "$cg")" = 0
fi

# a body that stops is closed past its deadline even with room to spare
python3 "$(dirname "$0")/slow_clients.py" --body $((1024 * 1024)) "${url##*:}" \
	"$TEST_TMP/one" 0 127.0.0.13x4 &
one=$!
track_pid "$one"
before=$(reason body_timeout)
for _ in $(seq 150); do
	[ "$(awk '$1 == "closed" {print $2}' "$TEST_TMP/one" 2>/dev/null)" = 4 ] && break
	sleep 0.1
done
check "4 bodies that stop are closed at the deadline (4 s + 1 s grace; longest lived $(awk '$1 == "longest" {print $2}' "$TEST_TMP/one") s)" \
	awk '$1 == "closed" {n = $2} $1 == "longest" {t = $2} END {exit !(n == 4 && t > 3 && t < 8)}' "$TEST_TMP/one"
check "  counted: body_timeout $before -> $(reason body_timeout)" \
	test "$(($(reason body_timeout) - before))" -ge 4
check "  and their memory is given back (held now: $(m edgeprof_http_body_bytes))" \
	test "$(m edgeprof_http_body_bytes)" = 0
stop_pid "$one"
stop_pid "$cpid"
finish
