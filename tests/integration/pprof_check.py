#!/usr/bin/env python3
"""Compares what go tool pprof reads from a pprof export with edgeprof's own
report and JSON export of the same profile (tests/integration/test_pprof.sh).

  pprof_check.py top COLUMN REPORT PPROF_TOP
      every function's value in `pprof -top` (flat, by function name) equals
      the REPORT's (`edgeprof report --top N`) column COLUMN (samples or
      branches), summed by name over the binaries; prints the hottest
  pprof_check.py cpi REPORT_CPI PPROF_TOP
      the same for `report --cpi`'s time per function ("functions by ...")
  pprof_check.py calls JSON PPROF_TRACES
      the two-frame samples of `pprof -traces -sample_index=calls` are the
      call edges (kinds call and call_indirect, both ends in the binary) of
      the JSON export, one per edge: (callee, caller, count) alike

  pprof_check.py disasm samples|branches JSON PPROF_DISASM
      every instruction `pprof -disasm` lists (it reads the binary: the
      mapping places ELF addresses) has the JSON's value at its address: the
      IPs' counts, or the branch executions from it

Addresses in no function are compared where the report has a row for them
(report --cpi's "[no symbol]"), else left out. Exits 1 naming the first differences.
"""
import bisect
import json
import re
import sys

ADDRESS = re.compile(r'^0x[0-9a-f]+$')
# pprof names a location in no function by its address, or by its mapping's
# file ("[libc.so.6]"); report --cpi by "[no symbol]"
NO_FUNCTION = re.compile(r'^(0x[0-9a-f]+|\[.*\])$')
NOFN = '(in no function)'


def report_table(path, column):
    """{name: value} from each binary's first "hottest functions" table."""
    index = {'branches': 0, 'samples': 3}[column]
    sums, in_table, seen_table = {}, False, False
    with open(path) as fh:
        for line in fh:
            if re.match(r'^\S.*  build-id \S+  ', line):
                seen_table = in_table = False
                continue
            if line.startswith('  hottest functions by '):
                in_table, seen_table = not seen_table, True
                next(fh)  # the columns' names
                continue
            if not in_table or not line.strip() or line.startswith('  hottest'):
                in_table = False
                continue
            parts = line.split(None, 4)
            value = int(parts[index])
            name = parts[4].rstrip('\n')
            if value:
                sums[name] = sums.get(name, 0) + value
    return sums


def cpi_table(path):
    """{name: time} from each binary's "functions by cycles|ns:" table."""
    sums, in_table = {}, False
    with open(path) as fh:
        for line in fh:
            if re.match(r'^functions by \S+:$', line):
                in_table = True
                next(fh)
                continue
            if in_table and line.startswith('  '):
                parts = line.split(None, 5)
                name = parts[5].rstrip('\n')
                name = NOFN if name == '[no symbol]' else name
                sums[name] = sums.get(name, 0) + int(parts[0])
            else:
                in_table = False
    return sums


def pprof_top(path):
    """{name: flat} from `go tool pprof -top` (counts, or -unit=ns)."""
    sums, rows = {}, False
    with open(path) as fh:
        for line in fh:
            if re.match(r'^\s+flat\s+flat%\s+sum%\s+cum\s+cum%', line):
                rows = True
                continue
            if not rows:
                continue
            parts = line.split(None, 5)
            name = parts[5].rstrip('\n')
            value = int(re.sub(r'ns$', '', parts[0]))
            name = NOFN if NO_FUNCTION.match(name) else name
            if value:
                sums[name] = sums.get(name, 0) + value
    return sums


def compare(ours, theirs, what):
    # the report's function tables have no row for addresses in no function
    if NOFN not in ours:
        theirs.pop(NOFN, None)
    if not ours:
        print(f'# {what}: the report lists no function')
        return 1
    bad = sorted(set(ours) | set(theirs), key=lambda n: -max(ours.get(n, 0), theirs.get(n, 0)))
    bad = [n for n in bad if ours.get(n) != theirs.get(n)]
    for name in bad[:10]:
        print(f'# {what}: {name}: report {ours.get(name)}, pprof {theirs.get(name)}')
    hottest = sorted(ours.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    print(f'# {what}: {len(ours)} functions, hottest ' +
          ', '.join(f'{n} {v}' for n, v in hottest))
    return 1 if bad else 0


def json_calls(path):
    """[(callee, caller, count)] of the JSON export's call edges."""
    with open(path) as fh:
        doc = json.load(fh)
    out = []
    for prof in doc['profiles']:
        # the order every format finds a function in (ep_func_index)
        funcs = sorted(prof.get('functions', []),
                       key=lambda f: (int(f['start'], 16), f['size'], f['name']))
        starts = [int(f['start'], 16) for f in funcs]

        def name(addr):
            k = bisect.bisect_right(starts, addr)
            if k == 0:
                return None
            f = funcs[k - 1]
            return f['name'] if addr - starts[k - 1] < max(f['size'], 1) else None

        for e in prof.get('branches', []):
            if e.get('kind') not in ('call', 'call_indirect') or not e.get('taken'):
                continue
            if e.get('from_external') or e.get('to_external') or not e['count']:
                continue
            callee, caller = name(int(e['to'], 16)), name(int(e['from'], 16))
            if callee and caller:
                out.append((callee, caller, e['count']))
    return sorted(out)


def pprof_traces(path):
    """[(callee, caller, value)] of -traces' two-frame samples with a value."""
    out, frames = [], []

    def flush():
        if len(frames) == 2 and frames[0][0] and not any(ADDRESS.match(f[1]) for f in frames):
            out.append((frames[0][1], frames[1][1], frames[0][0]))

    with open(path) as fh:
        for line in fh:
            if line.startswith('-----------+'):
                flush()
                frames = []
                continue
            m = re.match(r'^\s*(\d+)\s+(\S.*)$', line) if not frames else None
            if m:
                frames.append((int(m.group(1)), m.group(2)))
            elif frames and line.startswith(' ' * 13):
                frames.append((0, line.strip()))
    flush()
    return sorted(out)


def disasm(kind, json_path, listing):
    with open(json_path) as fh:
        doc = json.load(fh)
    ours = {}
    for prof in doc['profiles']:
        if kind == 'samples':
            for ip in prof.get('ips', []):
                a = int(ip['ip'], 16)
                ours[a] = ours.get(a, 0) + ip['count']
        else:
            for e in prof.get('branches', []):
                if e['kind'] != 'fallthrough' and not e.get('from_external'):
                    a = int(e['from'], 16)
                    ours[a] = ours.get(a, 0) + e['count']
    theirs = {}
    with open(listing) as fh:
        for line in fh:
            m = re.match(r'^\s*(\d+|\.)\s+(\d+|\.)\s+([0-9a-f]+):', line)
            if m:
                theirs[int(m.group(3), 16)] = 0 if m.group(1) == '.' else int(m.group(1))
    bad = [a for a in sorted(theirs) if theirs[a] != ours.get(a, 0)]
    for a in bad[:10]:
        print(f'# disasm: {a:#x}: JSON {ours.get(a, 0)}, pprof {theirs[a]}')
    print(f'# disasm: {len(theirs)} instructions, {sum(theirs.values())} {kind} at '
          f'{sum(1 for v in theirs.values() if v)} of them')
    return 1 if bad or not sum(theirs.values()) else 0


def main():
    mode = sys.argv[1]
    if mode == 'top':
        return compare(report_table(sys.argv[3], sys.argv[2]), pprof_top(sys.argv[4]),
                       sys.argv[2])
    if mode == 'cpi':
        return compare(cpi_table(sys.argv[2]), pprof_top(sys.argv[3]), 'time')
    if mode == 'disasm':
        return disasm(sys.argv[2], sys.argv[3], sys.argv[4])
    if mode == 'calls':
        ours, theirs = json_calls(sys.argv[2]), pprof_traces(sys.argv[3])
        print(f'# calls: {len(ours)} call edges in the JSON, {len(theirs)} two-frame samples '
              f'in pprof -traces; hottest {max(ours, key=lambda c: c[2]) if ours else None}')
        if not ours or ours != theirs:
            for row in sorted(set(ours) ^ set(theirs))[:10]:
                print(f'# calls: only in {"the JSON" if row in ours else "pprof"}: {row}')
            return 1
        return 0
    print(f'unknown mode {mode}', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main())
