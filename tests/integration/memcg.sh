# Sourced by tests (after lib.sh) that hold the agent or the collector to the
# memory limit its manifest sets (deploy/k8s: agent 256 MiB, collector 1 GiB):
# a memory cgroup of the test's own, v2 or v1, whichever the machine mounts,
# made under the cgroup this shell runs in, removed on exit.
#
#   cg=$(memcg_create NAME MIB) || skip   a cgroup limited to MIB MiB, no swap
#   memcg_start CG VAR CMD ARGS...        CMD started in CG in the background,
#                                         tracked; its PID in VAR
#   memcg_oom_kills CG                    processes the kernel killed in CG
#   memcg_peak_mib CG                     the most CG has held, MiB
#   memcg_usage_mib CG                    what CG holds now, MiB
#
# Tests that cannot make one (not root, no memory controller) say so and skip
# that check; they never pass it silently.

_memcg_version=
_memcg_base=

# finds where this shell's memory cgroup lives; 1 when there is none to use
_memcg_find() {
	[ -n "$_memcg_base" ] && return 0
	local line rel
	if [ -f /sys/fs/cgroup/cgroup.controllers ] &&
		grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
		rel=$(sed -n 's/^0:://p' /proc/self/cgroup)
		_memcg_version=2
		_memcg_base=/sys/fs/cgroup${rel%/}
		# a v2 cgroup with processes of its own cannot enable controllers
		# for children: make the children beside it, under its parent
		if [ -s "$_memcg_base/cgroup.procs" ]; then
			_memcg_base=$(dirname "$_memcg_base")
		fi
		grep -qw memory "$_memcg_base/cgroup.subtree_control" 2>/dev/null ||
			echo +memory >"$_memcg_base/cgroup.subtree_control" 2>/dev/null ||
			{ _memcg_base=; return 1; }
	elif [ -d /sys/fs/cgroup/memory ]; then
		line=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup | head -1)
		rel=${line#*:*:}
		_memcg_version=1
		_memcg_base=/sys/fs/cgroup/memory${rel%/}
	elif [ -d /sys/fs/cgroup/unified ] &&
		grep -qw memory /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null; then
		rel=$(sed -n 's/^0:://p' /proc/self/cgroup)
		_memcg_version=2
		_memcg_base=/sys/fs/cgroup/unified${rel%/}
	else
		return 1
	fi
	[ -w "$_memcg_base" ] || { _memcg_base=; return 1; }
}

# memcg_create runs in a command substitution, a subshell: what it made is
# found again by name, not kept in a variable
_memcg_cleanup() {
	local d p
	_memcg_find 2>/dev/null || return 0
	for d in "$_memcg_base/edgeprof-test-$$-"*; do
		[ -d "$d" ] || continue
		for p in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
		for _ in $(seq 50); do
			[ -s "$d/cgroup.procs" ] || break
			sleep 0.1
		done
		rmdir "$d" 2>/dev/null
	done
}
# runs after lib.sh's cleanup, which kills the tracked processes first
trap '_cleanup; _memcg_cleanup' EXIT

memcg_create() {
	local name=$1 mib=$2 d
	_memcg_find || { echo "# no memory cgroup can be made here (not root, or no memory controller)" >&2; return 1; }
	d="$_memcg_base/edgeprof-test-$$-$name"
	mkdir "$d" 2>/dev/null || { echo "# cannot make $d" >&2; return 1; }
	if [ "$_memcg_version" = 2 ]; then
		echo $((mib << 20)) >"$d/memory.max" &&
			{ echo 0 >"$d/memory.swap.max" 2>/dev/null || true; }
	else
		echo $((mib << 20)) >"$d/memory.limit_in_bytes" &&
			{ echo $((mib << 20)) >"$d/memory.memsw.limit_in_bytes" 2>/dev/null || true; }
	fi || { echo "# cannot set $d's limit" >&2; return 1; }
	echo "$d"
}

# memcg_start CG VAR CMD ARGS...: the process enters CG before it execs CMD,
# so everything CMD allocates is charged there
memcg_start() {
	local cg=$1 var=$2
	shift 2
	bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$cg" "$@" &
	printf -v "$var" '%s' "$!"
	track_pid "$!"
}

memcg_oom_kills() {
	if [ "$_memcg_version" = 2 ]; then
		awk '$1 == "oom_kill" {print $2}' "$1/memory.events"
	else
		awk '$1 == "oom_kill" {print $2}' "$1/memory.oom_control"
	fi
}

memcg_peak_mib() {
	local f=$1/memory.max_usage_in_bytes
	[ "$_memcg_version" = 2 ] && f=$1/memory.peak
	if [ -f "$f" ]; then echo $(($(cat "$f") >> 20)); else echo "?"; fi
}

memcg_usage_mib() {
	local f=$1/memory.usage_in_bytes
	[ "$_memcg_version" = 2 ] && f=$1/memory.current
	echo $(($(cat "$f") >> 20))
}
