#!/usr/bin/env python3
"""The sampled instruction mix against the exact one, type by type: each
type's share of the binary's executed instructions, from the sampled
profile's ranges and from the emulator's exact ranges (both `export --format
json --insn-mix`). A type at least 1% of the instructions must be within
TOL (relative) of its exact share; a rarer one within TOL x 1% (absolute),
so a type run a handful of times is not held to a ratio of small numbers.

usage: insn_mix_sampled.py SAMPLED.json EXACT.json BINARY [TOL]
Prints the shares and the worst deviation; exits 1 past TOL."""
import json
import sys

TYPES = ["load", "store", "cond_branch", "jump", "indirect_jump", "call", "indirect_call",
         "return", "vector", "atomic", "divide", "other"]


def shares(path, binary):
    with open(path) as f:
        doc = json.load(f)
    p = [p for p in doc["profiles"] if p["path"] == binary or binary in p["paths"]][0]
    total = p["insn_mix"]["total"]
    return {t: total[t] / total["instructions"] for t in TYPES}, total["instructions"]


def main():
    sampled, n = shares(sys.argv[1], sys.argv[3])
    exact, m = shares(sys.argv[2], sys.argv[3])
    tol = float(sys.argv[4]) if len(sys.argv) > 4 else 0.02
    worst, bad = 0.0, []
    for t in TYPES:
        # deviation in units of the bound: 1.0 is the tolerance
        dev = abs(sampled[t] - exact[t]) / (tol * max(exact[t], 0.01))
        worst = max(worst, dev * tol)
        print(f"# {t:14} sampled {100 * sampled[t]:8.4f}%  exact {100 * exact[t]:8.4f}%")
        if dev > 1.0:
            bad.append(t)
    print(f"# {n} sampled instructions, {m} exact; worst deviation {100 * worst:.2f}% "
          f"(bound {100 * tol:.0f}%){'; past it: ' + ', '.join(bad) if bad else ''}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
