#!/usr/bin/env bash
# export --format pprof, read by go tool pprof (Debian's golang-go: a reader
# we did not write). On the real LBR recordings (tests/data/lbr, imported):
# every function's IP samples, branch executions and cycles in `pprof -top`
# equal edgeprof's own report (`report`, `report --cpi`), and `pprof -traces
# -sample_index=calls` holds one callee-then-caller sample per call edge of
# the JSON export, with its count. On an IP-only profile of the live agent
# (--cycles: cpu-clock ns on this PMU-less VM; needs root): samples and cpu
# time alike. From a collector fed by agent --replay: `export --collector
# --format pprof` and /v1/profile?format=pprof (which pprof fetches itself)
# agree with `report --collector`.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

if ! command -v go >/dev/null || ! go tool pprof -h >/dev/null 2>&1; then
	echo "# skipped: no go (golang-go: go tool pprof reads the exports)"
	finish
fi
here=$(dirname "$0")
# pprof keeps a copy of what it fetches under PPROF_TMPDIR ($HOME/pprof)
export PPROF_TMPDIR=$TEST_TMP/pprof HOME=$TEST_TMP
# the profile's own names, never the binaries' symbols pprof could find
pprof() { go tool pprof -symbolize=none "$@" 2>"$TEST_TMP/pprof.err"; }
top() { # FILE|URL [pprof options]: every function, none dropped
	local src=$1
	shift
	pprof -top -nodecount=100000 -nodefraction=0 -edgefraction=0 "$@" "$src"
}

# compare NAME PROFILE.pb.gz REPORT JSON: samples, branches, calls
compare() {
	local name=$1 pb=$2 report=$3 json=$4
	top "$pb" -sample_index=samples >"$TEST_TMP/$name.samples"
	check "$name: pprof -top's IP samples per function are the report's" \
		python3 "$here/pprof_check.py" top samples "$report" "$TEST_TMP/$name.samples"
	top "$pb" -sample_index=branches >"$TEST_TMP/$name.branches"
	check "$name: pprof -top's branch executions per function are the report's" \
		python3 "$here/pprof_check.py" top branches "$report" "$TEST_TMP/$name.branches"
	pprof -traces -sample_index=calls "$pb" >"$TEST_TMP/$name.traces"
	check "$name: pprof -traces has each call edge of the JSON, callee then caller, its count" \
		python3 "$here/pprof_check.py" calls "$json" "$TEST_TMP/$name.traces"
}

# --- the real LBR recordings: test.lbr (non-PIE, no build-id, many
# functions) and propeller_sample_1 (PIE, with the LBR's cycles)
for fx in "test.lbr test.binary" "propeller_sample_1.perfdata1 propeller_sample_1.bin"; do
	read -r data bin <<<"$fx"
	name=${bin%%.*}
	"$EDGEPROF" import "$FIXTURES/$data" --binary "$FIXTURES/$bin" -o "$TEST_TMP/$name.prof" \
		2>/dev/null
	# the ASan+UBSan build: no leak, no overflow in the encoder
	ASAN_OPTIONS=detect_leaks=1 "$EDGEPROF_ASAN" export "$TEST_TMP/$name.prof" --format pprof \
		-o "$TEST_TMP/$name.pb.gz"
	check "$name: export --format pprof (ASan build) writes gzip" \
		test $? -eq 0 -a "$(head -c 2 "$TEST_TMP/$name.pb.gz" | od -An -tx1 | tr -d ' ')" = 1f8b
	"$EDGEPROF" export "$TEST_TMP/$name.prof" --format json -o "$TEST_TMP/$name.json"
	"$EDGEPROF" report "$TEST_TMP/$name.prof" --top 100000 >"$TEST_TMP/$name.report"
	compare "$name" "$TEST_TMP/$name.pb.gz" "$TEST_TMP/$name.report" "$TEST_TMP/$name.json"
done
# pprof reads test.binary (found by its name: it has no build-id) and
# disassembles it where the mapping places the ELF addresses
mkdir -p "$TEST_TMP/bin"
cp "$FIXTURES/test.binary" "$TEST_TMP/bin/"
PPROF_BINARY_PATH=$TEST_TMP/bin pprof -disasm=updcrc -sample_index=branches \
	"$TEST_TMP/test.pb.gz" >"$TEST_TMP/test.disasm"
check "test: pprof -disasm (non-PIE) has each branch's executions at its instruction" \
	python3 "$here/pprof_check.py" disasm branches "$TEST_TMP/test.json" "$TEST_TMP/test.disasm"
"$EDGEPROF" report "$TEST_TMP/propeller_sample_1.prof" --cpi --top 100000 >"$TEST_TMP/ps.cpi"
top "$TEST_TMP/propeller_sample_1.pb.gz" -sample_index=cycles >"$TEST_TMP/ps.cycles"
check "propeller_sample_1: pprof -top's cycles per function are report --cpi's" \
	python3 "$here/pprof_check.py" cpi "$TEST_TMP/ps.cpi" "$TEST_TMP/ps.cycles"
check "the samples are pprof's default type" grep -q '^Type: samples$' \
	<(top "$TEST_TMP/propeller_sample_1.pb.gz")
"$EDGEPROF" export "$TEST_TMP/test.prof" --format pprof --build-id 0 -o "$TEST_TMP/none.pb.gz" \
	2>"$TEST_TMP/none.err"
rc=$?
check "--build-id naming no binary: refused, said, nothing written" \
	bash -c '[ "$1" -eq 1 ] && [ ! -e "$3" ] &&
		grep -q "no binary in the profile has a build-id starting with 0" "$2"' \
	_ "$rc" "$TEST_TMP/none.err" "$TEST_TMP/none.pb.gz"

# --- the collector: agent --replay of the recording feeds it
COLLECTOR_BIN=$EDGEPROF_ASAN ASAN_OPTIONS=detect_leaks=1 start_collector pp --store "sqlite:$TEST_TMP/pp.db" --listen 127.0.0.1:0 --commit-ms 100 || exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"
"$EDGEPROF" agent --replay "$FIXTURES/propeller_sample_1.perfdata1" \
	--binary "$FIXTURES/propeller_sample_1.bin" --collector "$url" --node pp-node \
	--spool "$TEST_TMP/spool" 2>"$TEST_TMP/replay.err"
check "agent --replay streams the recording to the collector" test $? -eq 0
"$EDGEPROF" export --collector "$url" --format pprof -o "$TEST_TMP/c.pb.gz"
check "export --collector --format pprof" test $? -eq 0
"$EDGEPROF" export --collector "$url" --format json -o "$TEST_TMP/c.json"
"$EDGEPROF" report --collector "$url" --top 100000 >"$TEST_TMP/c.report"
compare collector "$TEST_TMP/c.pb.gz" "$TEST_TMP/c.report" "$TEST_TMP/c.json"
id=572ac72487ae1966
top "$url/v1/profile?format=pprof&build_id=$id" -sample_index=branches >"$TEST_TMP/url.branches"
check "go tool pprof reads /v1/profile?format=pprof itself (one binary)" \
	python3 "$here/pprof_check.py" top branches "$TEST_TMP/c.report" "$TEST_TMP/url.branches"
check "  its answer is application/octet-stream" \
	grep -qi '^content-type: application/octet-stream' \
	<(curl -s -o /dev/null -D - "$url/v1/profile?format=pprof&build_id=$id")
stop_pid "$COLLECTOR_PID"
check "the collector (ASan build) exits without a leak or error report" \
	bash -c '! grep -q "ERROR: \(Address\|Leak\)Sanitizer\|runtime error" "$1"' _ "$TEST_TMP/pp.log"

# --- an IP-only profile: the live agent on this PMU-less VM, --cycles
# giving cpu-clock nanoseconds; libc_calls runs in two binaries
if [ "$(id -u)" -ne 0 ]; then
	echo "# skipped: the live agent's IP-only profile needs root (CAP_BPF, CAP_PERFMON)"
	finish
fi
build_workload libc_calls
start_busy libc_calls
"$EDGEPROF" agent --pid "$BUSY_PID" --duration 3 --drain-ms 50 --cycles -o "$TEST_TMP/ip.prof" \
	2>"$TEST_TMP/ip.err"
check "agent --cycles writes an IP-only profile" test $? -eq 0
"$EDGEPROF" export "$TEST_TMP/ip.prof" --format pprof -o "$TEST_TMP/ip.pb.gz"
"$EDGEPROF" report "$TEST_TMP/ip.prof" --top 100000 >"$TEST_TMP/ip.report"
top "$TEST_TMP/ip.pb.gz" -sample_index=samples >"$TEST_TMP/ip.samples"
check "IP-only: pprof -top's samples per function are the report's" \
	python3 "$here/pprof_check.py" top samples "$TEST_TMP/ip.report" "$TEST_TMP/ip.samples"
"$EDGEPROF" export "$TEST_TMP/ip.prof" --format json -o "$TEST_TMP/ip.json"
unit=$(jq -r '.config.cycles_unit' "$TEST_TMP/ip.json")
type=$([ "$unit" = ns ] && echo cpu || echo cycles)
"$EDGEPROF" report "$TEST_TMP/ip.prof" --cpi --top 100000 >"$TEST_TMP/ip.cpi"
# -unit=ns: nanoseconds as they are, not rounded to ms
top "$TEST_TMP/ip.pb.gz" -sample_index="$type" $([ "$type" = cpu ] && echo -unit=ns) \
	>"$TEST_TMP/ip.time"
check "IP-only: pprof -top's $type per function is report --cpi's time ($unit)" \
	python3 "$here/pprof_check.py" cpi "$TEST_TMP/ip.cpi" "$TEST_TMP/ip.time"
pprof -disasm=cmp_int "$TEST_TMP/ip.pb.gz" >"$TEST_TMP/ip.disasm"
check "IP-only: pprof -disasm (PIE, from its path) has each IP's samples at its instruction" \
	python3 "$here/pprof_check.py" disasm samples "$TEST_TMP/ip.json" "$TEST_TMP/ip.disasm"
pprof -raw "$TEST_TMP/ip.pb.gz" >"$TEST_TMP/ip.raw"
check "IP-only: no branch or call sample types" \
	bash -c 'grep -q "^samples/count" "$1" && ! grep -q "branches/count\|calls/count" "$1"' \
	_ "$TEST_TMP/ip.raw"
finish
