#!/usr/bin/env python3
"""Exact counts from the emulator against BOLT instrumentation (an oracle we
did not write): `llvm-bolt -instrument` builds a binary that counts every
edge between basic blocks and writes them as fdata,
"1 FUNC OFFSET 1 FUNC OFFSET MISPREDICTS COUNT" (local functions carry a
"/N" suffix). Every conditional edge edgeprof counted (taken: branch to
target; not taken: branch to the next instruction) must carry the same
count in BOLT's file, where BOLT lists it.

usage: bolt_fdata_compare.py BOLT.fdata EXACT.json BINARY
Prints what was compared; exits 1 on any difference or on nothing compared."""
import json
import subprocess
import sys


def functions(binary):
    out = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True,
                         text=True).stdout
    funcs = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTW":
            funcs.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    return funcs


def locate(funcs, addr):
    for start, size, name in funcs:
        if start <= addr < start + size:
            return name, addr - start
    return None


def main():
    fdata, exact, binary = sys.argv[1:4]
    bolt = {}
    with open(fdata) as f:
        for line in f:
            p = line.split()
            if len(p) != 8 or p[0] != "1" or p[3] != "1":
                continue
            key = (p[1].split("/")[0], int(p[2], 16), p[4].split("/")[0], int(p[5], 16))
            bolt[key] = bolt.get(key, 0) + int(p[7])
    funcs = functions(binary)
    with open(exact) as f:
        doc = json.load(f)
    compared = differ = absent = 0
    for prof in doc["profiles"]:
        if binary not in prof["paths"] and prof["path"] != binary:
            continue
        for b in prof["branches"]:
            if b["kind"] != "conditional":
                continue
            src = locate(funcs, int(b["from"], 16))
            dst = locate(funcs, int(b["to"], 16))
            if not src or not dst:
                continue
            key = (src[0], src[1], dst[0], dst[1])
            if key not in bolt:
                absent += 1
                continue
            compared += 1
            if bolt[key] != b["count"]:
                differ += 1
                print(f"# {key}: BOLT {bolt[key]}, edgeprof {b['count']}")
    print(f"# {compared} conditional edges compared with BOLT instrumentation, {differ} differ, "
          f"{absent} not listed by BOLT")
    sys.exit(0 if compared and not differ else 1)


if __name__ == "__main__":
    main()
