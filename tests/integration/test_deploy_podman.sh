#!/usr/bin/env bash
# A Kubernetes node on one machine: the edgeprof image (built with no
# registry, deploy/image/build.sh) runs under podman exactly as the
# DaemonSet would (its capabilities, hostPID, mounts, read-only root, all
# read from deploy/k8s/base), beside a collector container and two workload
# containers. The continuous profile must carry both containers' ids, each
# with only its own program; an on-demand session of one container holds
# only that container's program; with a capability removed the agent says
# which.
# Also checks the manifests' promises (and builds them with kustomize when
# kubectl is there). Needs root and podman.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

check "manifests: hostPID, read-only roots, capabilities, tolerations, resources, RBAC only pods get/list/watch for the agent, no token for the collector, 0400 secrets" \
	python3 "$here/k8s_agent_run.py" "$repo/deploy/k8s/base" --check
if command -v kubectl >/dev/null && kubectl kustomize "$repo/deploy/k8s/base" >/dev/null 2>&1; then
	check "kustomize builds the base and the ClickHouse overlay" \
		bash -c "kubectl kustomize '$repo/deploy/k8s/clickhouse' | grep -q 'store=clickhouse:'"
else
	echo "# kubectl with kustomize not found: the overlay build is not checked"
fi
if [ "$(id -u)" -ne 0 ] || ! command -v podman >/dev/null; then
	not_ok "podman as root is needed (scripts/setup-deps.sh installs podman)"
	finish
fi
tag=test-$$
image=localhost/edgeprof:$tag
workloads=localhost/edgeprof-workloads:$tag
containers=()
cleanup_podman() {
	for c in "${containers[@]:-}"; do [ -n "$c" ] && podman rm -f -t 0 "$c" >/dev/null 2>&1; done
	podman rmi -f "$image" "$workloads" >/dev/null 2>&1
}
trap '_cleanup; cleanup_podman' EXIT
# Debian's podman here: runc (crun refuses the hybrid cgroup layout), and
# explicit ulimits (no CAP_SYS_RESOURCE to raise them)
P=(--runtime runc --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)

check "the image builds from this build, pulling nothing" \
	bash -c "'$repo/deploy/image/build.sh' '$(dirname "$EDGEPROF")' '$image' >/dev/null"
mkdir -p "$TEST_TMP/w"
cc -O1 -static -o "$TEST_TMP/w/hot_cold" "$here/../workloads/hot_cold.c"
cc -O1 -static -o "$TEST_TMP/w/random_branches" "$here/../workloads/random_branches.c"
tar -C "$TEST_TMP/w" -cf "$TEST_TMP/w.tar" .
podman import --quiet "$TEST_TMP/w.tar" "$workloads" >/dev/null

mkdir -p "$TEST_TMP/data"
c=$(podman run -d "${P[@]}" --network host --read-only -v "$TEST_TMP/data:/data" "$image" \
	collector --store sqlite:/data/store.db --listen 127.0.0.1:0 --port-file /data/port)
containers+=("$c")
for _ in $(seq 1 100); do [ -s "$TEST_TMP/data/port" ] && break; sleep 0.1; done
check "collector container up" test -s "$TEST_TMP/data/port"
url="http://127.0.0.1:$(cat "$TEST_TMP/data/port")"
a=$(podman run -d "${P[@]}" "$workloads" /hot_cold 100000000000)
containers+=("$a")
b=$(podman run -d "${P[@]}" "$workloads" /random_branches 100000000000)
containers+=("$b")

mapfile -t as_daemonset < <(python3 "$here/k8s_agent_run.py" "$repo/deploy/k8s/base")
echo "# agent container options from the DaemonSet: ${as_daemonset[*]}"
timeout 120 podman run --rm "${P[@]}" --network host "${as_daemonset[@]}" "$image" \
	agent --duration 4 --interval 1 --collector "$url" --node node-1 >"$TEST_TMP/agent.log" 2>&1
rc=$?
grep -v "RLIMIT_MEMLOCK" "$TEST_TMP/agent.log" | sed 's/^/# agent: /' | tail -4
check "the agent runs in its container with the DaemonSet's capabilities only (exit 0)" \
	test "$rc" -eq 0
in_ct() {
	curl -s "$url/v1/profile?format=json&container_id=$1" |
		jq -r '[.profiles[] | select(.samples > 20) | .paths[0]] | sort | join(" ")'
}
check "the continuous profile carries both containers' ids" \
	test "$(curl -s "$url/v1/binaries" | jq -r --arg a "$a" --arg b "$b" \
		'[.binaries[].labels[].container_id | select(. == $a or . == $b)] | unique | length')" -eq 2
check "container 1's profile holds only its program" test "$(in_ct "$a")" = /hot_cold
check "container 2's profile holds only its program" test "$(in_ct "$b")" = /random_branches

# on demand: the agent runs as the DaemonSet's would (until stopped), and
# `edgeprof profile` asks the collector for 3 s of container 1 only
ag=$(podman run -d "${P[@]}" --network host "${as_daemonset[@]}" "$image" \
	agent --interval 1 --collector "$url" --node node-2)
containers+=("$ag")
for _ in $(seq 1 300); do
	curl -s "$url/v1/nodes" | jq -e '.nodes[] | select(.name == "node-2" and .reporting and .sessions)' \
		>/dev/null 2>&1 && break
	sleep 0.1
done
timeout 120 "$EDGEPROF" profile --container "${a:0:12}" --duration 3 --collector "$url" \
	-o "$TEST_TMP/session.json" --format json 2>"$TEST_TMP/session.err"
rc=$?
sed 's/^/# profile: /' "$TEST_TMP/session.err"
check "profile --container on the node's agent: done (exit 0)" test "$rc" -eq 0
check "  the session's profile holds only that container's program" \
	test "$(jq -r '[.profiles[] | select(.samples > 0) | .path] | unique | join(" ")' "$TEST_TMP/session.json")" = /hot_cold
sid=$(sed -n 's/.*session \([0-9a-f]\{16\}\): done.*/\1/p' "$TEST_TMP/session.err")
check "  container 2's continuous profile still holds only its program" \
	test "$(in_ct "$b")" = /random_branches
check "  and the session's label set names the container" \
	test "$(curl -s "$url/v1/binaries?session=$sid" | jq -r '[.binaries[].labels[].container_id] | unique | join(" ")')" = "$a"
[ "$rc" -eq 0 ] || podman logs "$ag" 2>&1 | tail -20 | sed "s/^/# agent-2: /"
podman stop -t 10 "$ag" >/dev/null 2>&1

# one capability fewer: a clear refusal naming it
without_bpf=()
for o in "${as_daemonset[@]}"; do [ "$o" = --cap-add=BPF ] || without_bpf+=("$o"); done
timeout 60 podman run --rm "${P[@]}" --network host "${without_bpf[@]}" "$image" \
	agent --duration 1 -o /tmp/x.prof >"$TEST_TMP/nobpf.log" 2>&1
rc=$?
check "without CAP_BPF: exit 1 naming the missing capability" \
	bash -c "[ $rc -eq 1 ] && grep -q 'missing capability CAP_BPF' '$TEST_TMP/nobpf.log'"
without_ptrace=()
for o in "${as_daemonset[@]}"; do [ "$o" = --cap-add=SYS_PTRACE ] || without_ptrace+=("$o"); done
timeout 60 podman run --rm "${P[@]}" --network host "${without_ptrace[@]}" "$image" \
	agent --duration 1 -o /tmp/x.prof >"$TEST_TMP/noptrace.log" 2>&1
check "without CAP_SYS_PTRACE: it runs and says what it cannot read" \
	grep -q "without CAP_SYS_PTRACE the agent cannot read" "$TEST_TMP/noptrace.log"
finish
