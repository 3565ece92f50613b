#!/usr/bin/env python3
"""Conditional-jump counts from a callgrind profile (an oracle we did not
write) compared with edgeprof's exact counts.

callgrind --collect-jumps=yes --dump-instr=yes writes, before the cost line
of a conditional jump, "jcnd=TAKEN/EXECUTED TARGET": the jump at the next
cost line's instruction was executed EXECUTED times and taken TAKEN times.
Positions are "instr line" pairs, each column compressed: "+N"/"-N" relative
to the previous cost line, "*" the same. Only cost lines move the current
position; a jump's target is relative to it but does not move it.

callgrind writes a jcnd line per basic-block context, and only for contexts
where the jump was taken, so the executions of a branch are read from its
instruction's Ir cost (all contexts summed) and the taken count from the
jcnd lines; every conditional branch callgrind saw run is compared on both. Branches callgrind never saw run at all (it
shows no cost for their instructions: the main program's _init, which
valgrind does not attribute to the binary) are listed, not compared.

In a static binary libc's startup code takes other paths under valgrind
than under QEMU (they present different CPUs: other ifunc choices), so
FUNCTIONS (comma-separated) can restrict the comparison to the program's own.

usage: callgrind_jumps.py CALLGRIND.OUT BINARY_PATH EXACT.json [FUNCTIONS]
Prints the counts compared; exits 1 on any difference."""
import json
import subprocess
import sys


def parse_pos(tok, prev):
    if tok == "*":
        return prev
    if tok[0] in "+-":
        return prev + int(tok, 0)
    return int(tok, 0)


def callgrind_conditionals(path, binary):
    sites = {}  # addr -> [taken, executed] from jcnd lines
    executions = {}  # addr -> Ir cost: how often the instruction ran
    ob_names = {}
    ob = None
    pos = 0
    pending = None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith(("ob=", "cob=")):
                name = line.partition("=")[2]
                # "(id) name" defines an id (in ob= or cob=), "(id)" reuses it
                if name.startswith("("):
                    ident, _, rest = name.partition(")")
                    rest = rest.strip()
                    if rest:
                        ob_names[ident] = rest
                    name = ob_names.get(ident, rest)
                if line.startswith("ob="):
                    ob = name
                continue
            if line.startswith("jcnd="):
                counts, _, _target = line[5:].partition(" ")
                taken, executed = (int(x) for x in counts.split("/"))
                pending = (taken, executed)
                continue
            if not line or not (line[0].isdigit() or line[0] in "+-*"):
                if not line.startswith(("jump=", "calls=")):
                    pending = None
                continue
            cols = line.split()
            pos = parse_pos(cols[0], pos)
            if ob == binary and len(cols) >= 3:
                executions[pos] = executions.get(pos, 0) + int(cols[2])
            if pending and ob == binary:
                s = sites.setdefault(pos, [0, 0])
                s[0] += pending[0]
                s[1] += pending[1]
            pending = None
    return sites, executions


def exact_conditionals(path, binary):
    sites = {}
    with open(path) as f:
        doc = json.load(f)
    for p in doc["profiles"]:
        if binary not in p["paths"] and p["path"] != binary:
            continue
        for b in p["branches"]:
            if b["kind"] != "conditional":
                continue
            s = sites.setdefault(int(b["from"], 16), [0, 0])
            if b["taken"]:
                s[0] += b["count"]
            s[1] += b["count"]
    return sites


def init_section(binary):
    """[start, end) of the binary's .init section (readelf -SW)."""
    out = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.replace("[", " ").replace("]", " ").split()
        if ".init" in parts:
            i = parts.index(".init")
            addr, size = int(parts[i + 2], 16), int(parts[i + 4], 16)
            return addr, addr + size
    return 0, 0


def function_ranges(binary, names):
    out = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True,
                         text=True).stdout
    ranges = []
    for line in out.splitlines():
        p = line.split()
        if len(p) == 4 and p[3] in names:
            start = int(p[0], 16)
            ranges.append((start, start + int(p[1], 16)))
    return ranges


def main():
    cg, executions = callgrind_conditionals(sys.argv[1], sys.argv[2])
    ours = exact_conditionals(sys.argv[3], sys.argv[2])
    if len(sys.argv) > 4:
        keep = function_ranges(sys.argv[2], sys.argv[4].split(","))
        inside = lambda a: any(lo <= a < hi for lo, hi in keep)  # noqa: E731
        cg = {a: v for a, v in cg.items() if inside(a)}
        ours = {a: v for a, v in ours.items() if inside(a)}
    for addr in set(ours) | set(cg):
        if addr in executions:
            cg[addr] = [cg.get(addr, [0, 0])[0], executions[addr]]
    unseen = sorted(a for a in ours if a not in cg)
    init = init_section(sys.argv[2])
    outside = [a for a in unseen if not (init[0] <= a < init[1])]
    for addr in unseen:
        print(f"# 0x{addr:x}: ran {ours[addr][1]} times under the emulator; callgrind shows "
              f"no cost for it (not compared)")
    diff = 0
    for addr in sorted(set(cg) | (set(ours) - set(unseen))):
        a, b = cg.get(addr), ours.get(addr)
        if a != b:
            diff += 1
            if diff <= 5:
                print(f"# 0x{addr:x}: callgrind taken/executed {a}, edgeprof {b}")
    executed = sum(v[1] for v in cg.values())
    print(f"# {len(cg)} conditional branches compared ({len(ours)} in edgeprof, "
          f"{len(unseen)} unseen by callgrind), {executed} executions, {diff} differ")
    if outside:
        print(f"# {len(outside)} branches outside .init unseen by callgrind")
    sys.exit(0 if diff == 0 and cg and not outside else 1)


if __name__ == "__main__":
    main()
