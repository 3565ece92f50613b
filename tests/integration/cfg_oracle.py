#!/usr/bin/env python3
"""What the UI's function page must draw, found without our decoder.

cfg_oracle.py BINARY PROFILE.json BUILD_ID START SIZE prints
"BLOCKS HOT_EDGES BRANCHES": the basic blocks of the function at START (its
instructions from objdump: a block starts at the entry, at every direct jump
target inside it, after every jump, return or trap, and where one of the
profile's edges from inside lands inside), how many distinct
(source, target, taken / not taken / fall-through) edges of the profile with
a count join two of its instructions, and the sum of the counts of the
branches leaving it (its "branch executions" on the binary's page).
"""
import json
import re
import subprocess
import sys

binary, profile, build_id, start, size = sys.argv[1:6]
start, size = int(start, 0), int(size, 0)
end = start + size

dump = subprocess.run(
    ["objdump", "-d", "--no-show-raw-insn", "-M", "intel",
     f"--start-address={start:#x}", f"--stop-address={end:#x}", binary],
    check=True, capture_output=True, text=True).stdout
insns = []  # (addr, mnemonic, operands)
for line in dump.splitlines():
    m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
    if m:
        insns.append((int(m.group(1), 16), m.group(2), m.group(3)))
addrs = {a for a, _, _ in insns}
ENDS = ("ret", "ud2", "hlt", "int3", "syscall", "sysenter", "iret")
leaders = {start}
for i, (a, mn, ops) in enumerate(insns):
    jump = mn.startswith("j") or mn.startswith("loop")
    if (jump or mn.startswith(ENDS)) and i + 1 < len(insns):
        leaders.add(insns[i + 1][0])
    t = re.match(r"^([0-9a-f]+)\b", ops)
    if jump and t and int(t.group(1), 16) in addrs:
        leaders.add(int(t.group(1), 16))

prof = next(p for p in json.load(open(profile))["profiles"] if p["build_id"] == build_id)
INTER = {"call", "call_indirect", "return"}
hot = set()
branches = 0
for e in prof["branches"]:
    f, t = int(e["from"], 16), int(e["to"], 16)
    ext = e.get("from_external") or e.get("to_external")
    if start <= f < end and not e.get("from_external") and e["kind"] != "fallthrough":
        branches += e["count"]
    if ext or e["kind"] in INTER or not (f in addrs and t in addrs):
        continue
    leaders.add(t)
    kind = "fallthrough" if e["kind"] == "fallthrough" else (
        "taken" if e.get("taken") else "not-taken")
    if e["count"] > 0:
        hot.add((f, t, kind))


def block_of(a):
    return max(x for x in leaders if x <= a)


print(len(leaders & addrs), len({(block_of(f), block_of(t), k) for f, t, k in hot}), branches)
