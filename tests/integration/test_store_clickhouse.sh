#!/usr/bin/env bash
# The ClickHouse store: Debian's clickhouse-server on loopback passes the
# same storage suite as SQLite (tests/unit/test_store.c); a commit cut short
# before its batch row is invisible and its resend is counted once; and
# the collector's kill-and-restart test holds with ClickHouse behind it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/clickhouse.sh"

if [ ! -x /usr/sbin/clickhouse-server ]; then
	not_ok "clickhouse-server is installed (scripts/setup-deps.sh installs it)"
	finish
fi
clickhouse_start || { not_ok "clickhouse-server starts on loopback"; finish; }
ok "clickhouse-server starts on loopback ($CLICKHOUSE_URL)"
build=$(dirname "$EDGEPROF")

for flavour in rel asan; do
	EDGEPROF_TEST_STORE="clickhouse:$CLICKHOUSE_URL" ASAN_OPTIONS=detect_leaks=1 \
		"$build/$flavour/tests/test_store" >"$TEST_TMP/suite.$flavour" 2>&1
	rc=$?
	passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$TEST_TMP/suite.$flavour")
	check "the shared storage suite passes on ClickHouse ($flavour: ${passed:-0} tests)" \
		test "$rc" -eq 0 -a "${passed:-0}" -ge 4
	[ "$rc" -eq 0 ] || sed 's/^/# /' "$TEST_TMP/suite.$flavour"
done

# binaries' images (the UI's code) kept in ClickHouse as in SQLite
for flavour in rel asan; do
	EDGEPROF_TEST_STORE="clickhouse:$CLICKHOUSE_URL" ASAN_OPTIONS=detect_leaks=1 \
		"$build/$flavour/tests/test_binaries" >"$TEST_TMP/images.$flavour" 2>&1
	rc=$?
	check "binaries' images on ClickHouse ($flavour)" test "$rc" -eq 0
	[ "$rc" -eq 0 ] || sed 's/^/# /' "$TEST_TMP/images.$flavour"
done

# the same streaming guarantees end to end, ClickHouse behind the collector
EDGEPROF_TEST_STORE="clickhouse:$CLICKHOUSE_URL/?database=restart_$$" \
	bash "$(dirname "$0")/test_stream_restart.sh" >"$TEST_TMP/restart.log" 2>&1
sed 's/^/# restart: /' "$TEST_TMP/restart.log" | grep -v "^# restart: ok"
check "kill-and-restart test with ClickHouse: $(grep -c '^ok' "$TEST_TMP/restart.log") checks pass" \
	bash -c "! grep -q '^not ok' '$TEST_TMP/restart.log' && grep -q 'equal the local import exactly' '$TEST_TMP/restart.log'"

# a commit cut short: its count rows are there, its batch row is not (the
# last column: session_id, "" for the continuous profile)
q() { curl -s --data-binary "$1" "$CLICKHOUSE_URL/?database=restart_$$"; }
id=$(q "SELECT build_id FROM edges LIMIT 1")
before=$(q "SELECT sum(count) FROM edges FINAL WHERE (agent_id, sequence) IN (SELECT agent_id, sequence FROM batches)")
printf '%s\t60\t\t\t\t\t\t4096\t4160\t1\t1\t1000000\t0\tcut-agent\t1\t\n' "$id" |
	curl -s --data-binary @- "$CLICKHOUSE_URL/?database=restart_$$&query=INSERT%20INTO%20edges%20FORMAT%20TabSeparated"
after=$(q "SELECT sum(count) FROM edges FINAL WHERE (agent_id, sequence) IN (SELECT agent_id, sequence FROM batches)")
check "rows of a commit without its batch row are not counted ($before = $after)" \
	test -n "$before" -a "$before" = "$after"
# its resend completes it: the same rows again plus the batch row, counted once
printf '%s\t60\t\t\t\t\t\t4096\t4160\t1\t1\t1000000\t0\tcut-agent\t1\t\n' "$id" |
	curl -s --data-binary @- "$CLICKHOUSE_URL/?database=restart_$$&query=INSERT%20INTO%20edges%20FORMAT%20TabSeparated"
printf 'cut-agent\t1\tnode\t1700000000\n' |
	curl -s --data-binary @- "$CLICKHOUSE_URL/?database=restart_$$&query=INSERT%20INTO%20batches%20FORMAT%20TabSeparated"
resent=$(q "SELECT sum(count) FROM edges FINAL WHERE (agent_id, sequence) IN (SELECT agent_id, sequence FROM batches)")
check "its resend is counted once ($resent = $before + 1000000)" test "$resent" = "$((before + 1000000))"
clickhouse_stop
finish
