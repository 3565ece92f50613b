#!/usr/bin/env bash
# A binary sent to the collector's POST /v1/images (by `edgeprof upload`,
# and by the agent's uploader: both ep_upload_file) is read from its file
# as it is sent, never held whole: a 96 MiB binary goes out of a process
# held to 48 MiB. Before, the file was read into one buffer of its size
# first (the agent sends up to --upload-max-mib, 4 GiB at most, from its
# 256 MiB).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"
source "$(dirname "$0")/memcg.sh"

cc -O1 -Wl,--build-id -o "$TEST_TMP/prog" "$(dirname "$0")/../workloads/hot_cold.c"
cp "$TEST_TMP/prog" "$TEST_TMP/big"
truncate -s 96M "$TEST_TMP/big" # zeros after the ELF: sparse, no disk
start_collector c --store "sqlite:$TEST_TMP/c.db" --listen 127.0.0.1:0 --max-binary-mib 128 ||
	exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"
if ! cg=$(memcg_create upload 48); then
	not_ok "a memory cgroup for the upload (48 MiB)"
	finish
fi
memcg_start "$cg" pid "$EDGEPROF" upload "$TEST_TMP/big" --collector "$url" --max-mib 128 \
	2>"$TEST_TMP/up.err"
wait "$pid"
rc=$?
sed 's/^/# /' "$TEST_TMP/up.err"
check "a 96 MiB binary sent from 48 MiB (exit $rc, peak $(memcg_peak_mib "$cg") MiB)" \
	test "$rc" -eq 0 -a "$(memcg_oom_kills "$cg")" = 0
id=$(readelf -n "$TEST_TMP/prog" | awk '/Build ID/ {print $3}')
check "  the collector keeps it ($id)" \
	test "$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/images/$id")" = 200
finish
