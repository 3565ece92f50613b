# Sourced by tests (after lib.sh): Debian's clickhouse-server on loopback,
# in a directory of the test's own, stopped by PID.

# free_ports N: N ports free now on 127.0.0.1 (the kernel's; handed over, so
# a race only with other tests that do the same)
free_ports() {
	python3 -c 'import socket, sys
ps = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ps: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ps])' "$1"
}

# clickhouse_server DIR HOST HTTP TCP [REMOTE_SERVERS_XML]: starts one
# server listening on HOST, its data under DIR (kept over restarts); sets
# CLICKHOUSE_PID; 1 when it did not come up (its log is printed).
clickhouse_server() {
	local dir=$1 host=$2 http=$3 tcp=$4 remote=${5:-}
	mkdir -p "$dir/data"
	cat >"$dir/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><log>$dir/server.log</log><errorlog>$dir/server.err.log</errorlog><console>0</console></logger>
    <http_port>$http</http_port>
    <tcp_port>$tcp</tcp_port>
    <listen_host>$host</listen_host>
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
    $remote
</yandex>
XML
	cat >"$dir/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
    <users><default><password></password><networks><ip>127.0.0.0/8</ip></networks>
        <profile>default</profile><quota>default</quota></default></users>
    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
        <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
    </interval></default></quotas>
</yandex>
XML
	/usr/sbin/clickhouse-server --config-file="$dir/config.xml" >"$dir/stdout.log" 2>&1 &
	CLICKHOUSE_PID=$!
	track_pid "$CLICKHOUSE_PID"
	for _ in $(seq 1 300); do
		[ "$(curl -s "http://$host:$http/ping")" = "Ok." ] && return 0
		kill -0 "$CLICKHOUSE_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "# clickhouse-server on $host:$http did not start:"
	tail -5 "$dir/stdout.log" "$dir/server.err.log" 2>/dev/null | sed 's/^/#   /'
	return 1
}

# clickhouse_start: one server; sets CLICKHOUSE_URL and CLICKHOUSE_PID; 1
# when it did not come up.
clickhouse_start() {
	local http tcp
	read -r http tcp < <(free_ports 2)
	CLICKHOUSE_URL=http://127.0.0.1:$http
	clickhouse_server "$TEST_TMP/clickhouse" 127.0.0.1 "$http" "$tcp"
}

# clickhouse_start_cluster N: N servers as the N shards of cluster
# edgeprof_test, shard k on 127.0.0.k, all on one HTTP port as a real
# cluster's hosts are; sets CLICKHOUSE_URL (shard 1), CLICKHOUSE_SHARD_PIDS
# and CLICKHOUSE_CLUSTER. clickhouse_restart_shard K restarts one.
clickhouse_start_cluster() {
	local n=$1 k http remote=""
	local -a ports
	read -r -a ports < <(free_ports $((n + 1)))
	http=${ports[0]}
	CLICKHOUSE_CLUSTER=edgeprof_test
	for k in $(seq 1 "$n"); do
		remote+="<shard><replica><host>127.0.0.$k</host><port>${ports[$k]}</port></replica></shard>"
	done
	CLICKHOUSE_REMOTE="<remote_servers><$CLICKHOUSE_CLUSTER>$remote</$CLICKHOUSE_CLUSTER></remote_servers>"
	CLICKHOUSE_HTTP=$http
	CLICKHOUSE_TCPS=("${ports[@]:1}")
	CLICKHOUSE_SHARD_PIDS=()
	for k in $(seq 1 "$n"); do
		clickhouse_server "$TEST_TMP/clickhouse-$k" "127.0.0.$k" "$http" \
			"${CLICKHOUSE_TCPS[$((k - 1))]}" "$CLICKHOUSE_REMOTE" || return 1
		CLICKHOUSE_SHARD_PIDS[$k]=$CLICKHOUSE_PID
	done
	CLICKHOUSE_PID=
	CLICKHOUSE_URL=http://127.0.0.1:$http
}

clickhouse_shard_url() { echo "http://127.0.0.$1:$CLICKHOUSE_HTTP"; }

# clickhouse_restart_shard K: SIGTERM, wait, start again on its data
clickhouse_restart_shard() {
	clickhouse_stop_pid "${CLICKHOUSE_SHARD_PIDS[$1]}"
	clickhouse_server "$TEST_TMP/clickhouse-$1" "127.0.0.$1" "$CLICKHOUSE_HTTP" \
		"${CLICKHOUSE_TCPS[$(($1 - 1))]}" "$CLICKHOUSE_REMOTE" || return 1
	CLICKHOUSE_SHARD_PIDS[$1]=$CLICKHOUSE_PID
	CLICKHOUSE_PID=
}

clickhouse_stop_pid() {
	[ -n "$1" ] || return 0
	# callers may run under set -e: a process already gone is not an error
	kill "$1" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# every server started here
clickhouse_stop() {
	local pid
	for pid in "${CLICKHOUSE_PID:-}" "${CLICKHOUSE_SHARD_PIDS[@]:-}"; do
		clickhouse_stop_pid "$pid"
	done
	CLICKHOUSE_PID=
	CLICKHOUSE_SHARD_PIDS=()
}
