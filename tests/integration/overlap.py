#!/usr/bin/env python3
"""Overlap of a profile's conditional-branch edges with the exact counts:
sum over edges of min(p, q), p and q normalised (llvm-profdata's measure).
usage: overlap.py PROFILE.json EXACT.json BINARY_PATH [KINDS] -> prints the overlap
KINDS: comma-separated branch kinds to compare (default: conditional)"""
import json
import sys


def edges(path, binary, kinds):
    out = {}
    with open(path) as f:
        doc = json.load(f)
    for p in doc["profiles"]:
        if binary not in p["paths"] and p["path"] != binary:
            continue
        for b in p["branches"]:
            if b["kind"] in kinds:
                key = (b["from"], b["to"], b["taken"])
                out[key] = out.get(key, 0) + b["count"]
    return out


def main():
    kinds = set((sys.argv[4] if len(sys.argv) > 4 else "conditional").split(","))
    got, want = edges(sys.argv[1], sys.argv[3], kinds), edges(sys.argv[2], sys.argv[3], kinds)
    gs, ws = sum(got.values()), sum(want.values())
    if not gs or not ws:
        print("0.0")
        return
    print(f"{sum(min(got.get(k, 0) / gs, want[k] / ws) for k in want):.4f}")


if __name__ == "__main__":
    main()
