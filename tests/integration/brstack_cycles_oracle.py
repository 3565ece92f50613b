#!/usr/bin/env python3
"""Cycles per block against `perf script -F ip,sym,brstackinsn` (an oracle we
did not write).

perf lists, per sample and oldest first, the instructions between
consecutive branch-stack entries; the line of each entry's branch ends with
"# PRED|MISPRED N cycles [T] X.XX IPC": N the entry's cycles, X the
block's instructions over N. A block is the straight line from the previous
entry's target to this entry's branch: the whole gap, which is what
edgeprof's ranges are with --ranges gap (and every entry counted: --chop
0). Per distinct block (start, end) this sums perf's occurrences, cycles
and instructions and compares them with the profile's range (JSON export):
count, cycles and cycled_instructions equal, so IPC equal, block for block;
and perf's printed IPC equals its own instructions over its cycles for every
occurrence (the listing is read as perf meant it).

Addresses: perf prints run-time addresses under "SYMBOL+OFF:" labels; nm
gives the symbols' ELF addresses, so each label gives the load bias.

Interrupts: an entry from the kernel (an interrupt's return) has no line in
perf's listing, which runs on from the older entry's target to the next
user entry's branch as one block; its cycles are the newer entry's, which
counted from the kernel's return. edgeprof's block there starts at the
kernel's return target (what the cycles measured). `edgeprof dump` (the same
samples, same order) says which entries these are: they are left out of both
sides, one occurrence at a time, and counted. So is the newest entry when the
hardware recorded it twice and perf lists the copy (edgeprof drops it, as
AutoFDO does). Each sample's entries are aligned with perf's lines by their
cycles: a sample that does not align fails the check.

usage: brstack_cycles_oracle.py PERF.txt PROFILE.json BINARY DUMP.txt [BLOCKS.txt]
BLOCKS.txt receives perf's blocks, most cycles first: "0xSTART-0xEND CYCLES
IPC" (IPC to 3 places), for checking reports against.
Exits 1 on any difference."""
import json
import re
import subprocess
import sys


def symbols(binary):
    out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True,
                         check=True).stdout
    syms = {}
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3:
            syms.setdefault(p[2], int(p[0], 16))
    return syms


def perf_samples(path, syms):
    """Per sample, its PRED lines oldest first: (instructions of the block
    ending there as ELF addresses, or None for the opening line and a
    broken listing; cycles; printed IPC), and the bias seen."""
    samples, bias, label = [], None, None
    cur = block = None
    with open(path) as f:
        for line in f:
            if not line.startswith("\t"):
                if line.strip():
                    cur = []
                    samples.append(cur)
                    block = None
                continue
            s = line.strip()
            m = re.match(r"^([^\s:]+?)(\+(\d+))?:$", s)
            if m:
                label = (m.group(1), int(m.group(3) or 0))
                continue
            if "insn:" not in s:
                if s.startswith("..."):
                    block = None
                continue
            addr = int(s.split()[0], 16)
            if label:
                if label[0] in syms:
                    bias = addr - (syms[label[0]] + label[1])
                label = None
            br = re.search(r"# (MIS)?PRED (\d+) cycles \[\d+\](?: ([0-9.]+) IPC)?", s)
            if block is not None and bias is not None:
                block.append(addr - bias)
            if br:
                cur.append((block, int(br.group(2)), br.group(3)))
                block = []
    return samples, bias


def dump_samples(path):
    """Per sample, its entries (from, to, cycles) newest first."""
    out = []
    with open(path) as f:
        for line in f:
            entries = []
            for e in line.split()[1:]:
                p = e.split("/")
                entries.append((int(p[0], 16), int(p[1], 16), int(p[5] or 0)))
            out.append(entries)
    return out


def main():
    perf_file, prof_file, binary, dump_file = sys.argv[1:5]
    samples, bias = perf_samples(perf_file, symbols(binary))
    dumps = dump_samples(dump_file)
    theirs, left_out, ipc_wrong, unaligned, duplicates = {}, {}, 0, 0, 0
    for lines, entries in zip(samples, dumps):
        # the newest entry recorded twice (an Intel erratum): perf lists it
        # once or twice; the cycles say which
        for drop in (0, 1):
            if drop and not (len(entries) >= 2 and entries[0][:2] == entries[1][:2]):
                break
            old_first = list(reversed(entries[drop:]))
            user = [i for i, e in enumerate(old_first) if not e[0] >> 63]
            aligned = len(user) == len(lines) and \
                all(c == old_first[i][2] for (_, c, _), i in zip(lines, user))
            if aligned:
                break
        if not aligned or len(samples) != len(dumps):
            unaligned += 1
            continue
        if not drop and len(entries) >= 2 and entries[0][:2] == entries[1][:2]:
            # perf listed the copy: its "block" runs from the entry's own
            # target to its source, through whatever lies between (a return,
            # a call); edgeprof drops the copy, as AutoFDO does
            lines = lines[:-1]
            user = user[:-1]
            duplicates += 1
        for (block, cycles, ipc), i in zip(lines, user):
            prev = old_first[i - 1] if i > 0 else None
            if prev is not None and prev[0] >> 63 and not prev[1] >> 63:
                # across an interrupt: edgeprof's block starts at its return
                k = (prev[1] - bias, old_first[i][0] - bias)
                v = left_out.setdefault(k, [0, 0])
                v[0] += 1
                v[1] += cycles
                continue
            if not block:
                continue
            if ipc is not None and cycles and f"{len(block) / cycles:.2f}" != ipc:
                ipc_wrong += 1
            b = theirs.setdefault((block[0], block[-1]), [0, 0, 0])
            b[0] += 1
            b[1] += cycles
            b[2] += len(block) if cycles else 0
    if len(sys.argv) > 5:
        with open(sys.argv[5], "w") as f:
            for (a, b), (n, c, i) in sorted(theirs.items(), key=lambda kv: (-kv[1][1], kv[0])):
                f.write(f"0x{a:x}-0x{b:x} {c} {i / c if c else 0:.3f}\n")
    with open(prof_file) as f:
        doc = json.load(f)
    prof = [p for p in doc["profiles"] if binary in p["paths"] or p["path"] == binary]
    if not prof:
        print(f"# {binary} is not in the profile")
        sys.exit(1)
    ours = {}
    for r in prof[0]["ranges"]:
        k = (int(r["start"], 16), int(r["end"], 16))
        n, c = left_out.get(k, [0, 0])
        if r["count"] - n or r["cycles"] - c:
            ours[k] = (r["count"] - n, r["cycles"] - c, r["cycled_instructions"])
    bad = 0
    for key, (n, cycles, insns) in sorted(theirs.items()):
        r = ours.get(key)
        if r is None or r[0] != n or r[1] != cycles or (cycles and r[2] * n != insns * r[0]):
            bad += 1
            if bad <= 5:
                print(f"# block 0x{key[0]:x}-0x{key[1]:x}: perf {n} times, {cycles} cycles, "
                      f"{insns} instructions; edgeprof (count, cycles, instructions) {r}")
    only_ours = [k for k in ours if k not in theirs]
    for k in only_ours[:5]:
        print(f"# only edgeprof: 0x{k[0]:x}-0x{k[1]:x} {ours[k]}")
    total_cycles = sum(v[1] for v in theirs.values())
    total_insns = sum(v[2] for v in theirs.values())
    print(f"# {len(theirs)} blocks compared ({sum(v[0] for v in theirs.values())} occurrences, "
          f"{total_cycles} cycles, IPC {total_insns / max(total_cycles, 1):.3f}), {bad} differ; "
          f"{len(only_ours)} ranges only edgeprof has; "
          f"{sum(v[0] for v in left_out.values())} blocks across an interrupt and "
          f"{duplicates} duplicated newest entries left out; "
          f"{unaligned} samples not aligned with the dump; {ipc_wrong} of perf's printed IPCs "
          f"disagree with its own counts")
    sys.exit(1 if bad or only_ours or ipc_wrong or unaligned or not theirs else 0)


if __name__ == "__main__":
    main()
