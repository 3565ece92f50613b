# Sourced by tests (after lib.sh): Debian's clickhouse-server on loopback,
# in a directory of the test's own, stopped by PID.

# clickhouse_start: sets CLICKHOUSE_URL and CLICKHOUSE_PID; 1 when it did
# not come up (its log is printed).
clickhouse_start() {
	local dir=$TEST_TMP/clickhouse http tcp
	mkdir -p "$dir/data"
	# free ports: ask the kernel, then hand them over (a race only with
	# other tests that do the same, on a 2-core CI machine)
	read -r http tcp < <(python3 -c 'import socket
ps = [socket.socket() for _ in range(2)]
for s in ps: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ps])')
	cat >"$dir/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><log>$dir/server.log</log><errorlog>$dir/server.err.log</errorlog><console>0</console></logger>
    <http_port>$http</http_port>
    <tcp_port>$tcp</tcp_port>
    <listen_host>127.0.0.1</listen_host>
    <max_connections>64</max_connections>
    <max_concurrent_queries>32</max_concurrent_queries>
    <uncompressed_cache_size>67108864</uncompressed_cache_size>
    <mark_cache_size>67108864</mark_cache_size>
    <path>$dir/data/</path>
    <tmp_path>$dir/data/tmp/</tmp_path>
    <user_files_path>$dir/data/user_files/</user_files_path>
    <format_schema_path>$dir/data/format_schemas/</format_schema_path>
    <users_config>$dir/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
</yandex>
XML
	cat >"$dir/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
    <users><default><password></password><networks><ip>127.0.0.1</ip></networks>
        <profile>default</profile><quota>default</quota></default></users>
    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
        <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
    </interval></default></quotas>
</yandex>
XML
	/usr/sbin/clickhouse-server --config-file="$dir/config.xml" >"$dir/stdout.log" 2>&1 &
	CLICKHOUSE_PID=$!
	track_pid "$CLICKHOUSE_PID"
	CLICKHOUSE_URL=http://127.0.0.1:$http
	for _ in $(seq 1 300); do
		[ "$(curl -s "$CLICKHOUSE_URL/ping")" = "Ok." ] && return 0
		kill -0 "$CLICKHOUSE_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "# clickhouse-server did not start:"
	tail -5 "$dir/stdout.log" "$dir/server.err.log" 2>/dev/null | sed 's/^/#   /'
	return 1
}

clickhouse_stop() {
	[ -n "${CLICKHOUSE_PID:-}" ] || return 0
	# callers may run under set -e: a process already gone is not an error
	kill "$CLICKHOUSE_PID" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$CLICKHOUSE_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$CLICKHOUSE_PID" 2>/dev/null || true
	wait "$CLICKHOUSE_PID" 2>/dev/null || true
	CLICKHOUSE_PID=
}
