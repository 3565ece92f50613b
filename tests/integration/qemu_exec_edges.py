#!/usr/bin/env python3
"""The emulator's exact counts on an aarch64 binary against QEMU's own
execution log, an oracle outside our plugin: `qemu-aarch64 -d
in_asm,exec,nochain` prints each translation block's instructions when it is
translated and a "Trace" line with its guest PC every time it runs (with
chaining off, every block entry goes through QEMU's logged lookup). The
branch ending block i went to block i+1's start; which instruction ends the
block, and so whether it is conditional and taken, comes from
aarch64-linux-gnu-objdump, not from our classifier. Every edge out of the
binary's code to its own code must have the exact profile's count, and no
other such edge may be in the profile.
usage: qemu_exec_edges.py QEMU_LOG EXACT.json BINARY (a non-PIE binary: the
log's addresses are its own) -> prints a summary, exit 1 on any difference"""
import json
import re
import subprocess
import sys

COND = re.compile(r"^(b|bc)\.(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)$|^(cbz|cbnz|tbz|tbnz)$")
BRANCH = re.compile(r"^(b|bl|br|blr|ret|reta[ab]|bra[ab]z?|blra[ab]z?|cbz|cbnz|tbz|tbnz)$|^(b|bc)\.")


def objdump(path):
    insns = {}
    out = subprocess.run(["aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn", path],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\t(\S+)", line)
        if m:
            insns[int(m.group(1), 16)] = m.group(2)
    return insns


def oracle(log, insns):
    """(from, to, taken) -> count of the branches in insns, from the log"""
    last = {}  # block start -> its last instruction's address, as last translated
    edges = {}
    block, prev = None, None
    with open(log, errors="replace") as f:
        for line in f:
            if line.startswith("IN:"):
                block = None
                continue
            m = re.match(r"^0x([0-9a-f]+):\s", line)
            if m:
                a = int(m.group(1), 16)
                if block is None:
                    block = a
                last[block] = a
                continue
            m = re.match(r"^Trace \d+: \S+ \[[0-9a-f]+/([0-9a-f]+)/", line)
            if not m:
                continue
            pc = int(m.group(1), 16)
            if prev is not None:
                frm = last[prev]
                mnem = insns.get(frm)
                if mnem and BRANCH.match(mnem) and pc in insns:
                    taken = not (COND.match(mnem) and pc == frm + 4)
                    key = (frm, pc, taken)
                    edges[key] = edges.get(key, 0) + 1
            prev = pc
    return edges


def exact(path, binary, insns):
    with open(path) as f:
        doc = json.load(f)
    edges = {}
    for p in doc["profiles"]:
        if binary not in p["paths"] and p["path"] != binary:
            continue
        for b in p["branches"]:
            frm, to = int(b["from"], 16), int(b["to"], 16)
            if b.get("to_external") or b.get("from_external") or to not in insns:
                continue
            edges[(frm, to, b["taken"])] = b["count"]
    return edges


def main():
    log, exact_json, binary = sys.argv[1:4]
    insns = objdump(binary)
    want, got = oracle(log, insns), exact(exact_json, binary, insns)
    diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    cond = sum(1 for k in want if COND.match(insns[k[0]]))
    print(f"{len(want)} edges in the log ({cond} out of conditional branches, "
          f"{sum(want.values())} executions), {len(got)} in the exact profile, "
          f"{len(diff)} differ")
    for frm, to, taken in diff[:20]:
        print(f"  {frm:#x} {insns.get(frm)} -> {to:#x} taken={taken}: "
              f"log {want.get((frm, to, taken))}, exact {got.get((frm, to, taken))}")
    sys.exit(1 if diff or cond == 0 else 0)


if __name__ == "__main__":
    main()
