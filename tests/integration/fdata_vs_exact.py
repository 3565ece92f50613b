#!/usr/bin/env python3
"""fdata_vs_exact.py EXACT SAMPLED: how far a sampled fdata's counts are from the exact
one's (both BOLT fdata, the exact one exported from the emulator's --exact-profile).

Only edges inside one function count (from and to in the same function: the control-flow
graph BOLT lays out); calls and returns are left out. Prints `name: value` lines:
- executed_edges: the exact profile's edges with a count;
- executed_zero: of them, those the sampled fdata has no count for (BOLT reads the
  blocks they lead to as never run, unless another edge says so);
- executed_blocks, executed_blocks_zero: the same for block starts (an edge's target),
  a block having a count when any edge into it has;
- unexecuted_blocks_counted: blocks the sampled fdata gives a count that never ran;
- distance: per function, the total variation distance between the two profiles' edge
  shares (0 alike, 1 disjoint), averaged with the exact profile's function weights.
"""
import sys
from collections import defaultdict


def read(path):
    edges = defaultdict(int)
    for line in open(path):
        f = line.split()
        if len(f) != 8 or f[0] != '1' or f[3] != '1' or f[1] != f[4]:
            continue
        edges[(f[1], int(f[2], 16), int(f[5], 16))] += int(f[7])
    return edges


def blocks(edges):
    b = defaultdict(int)
    for (fn, _, to), n in edges.items():
        b[(fn, to)] += n
    return b


def main():
    exact, sampled = read(sys.argv[1]), read(sys.argv[2])
    ex_exec = [k for k, n in exact.items() if n > 0]
    print(f'executed_edges: {len(ex_exec)}')
    print(f'executed_zero: {sum(1 for k in ex_exec if sampled.get(k, 0) == 0)}')
    eb, sb = blocks(exact), blocks(sampled)
    eb_exec = [k for k, n in eb.items() if n > 0]
    print(f'executed_blocks: {len(eb_exec)}')
    print(f'executed_blocks_zero: {sum(1 for k in eb_exec if sb.get(k, 0) == 0)}')
    print(f'unexecuted_blocks_counted: {sum(1 for k, n in sb.items() if n > 0 and eb.get(k, 0) == 0)}')
    per_fn = defaultdict(lambda: [defaultdict(int), defaultdict(int)])
    for k, n in exact.items():
        per_fn[k[0]][0][k] += n
    for k, n in sampled.items():
        if k[0] in per_fn:
            per_fn[k[0]][1][k] += n
    total = sum(exact.values())
    dist = 0.0
    for fn, (e, s) in per_fn.items():
        te, ts = sum(e.values()), sum(s.values())
        if te == 0:
            continue
        if ts == 0:
            d = 1.0
        else:
            d = 0.5 * sum(abs(e.get(k, 0) / te - s.get(k, 0) / ts) for k in set(e) | set(s))
        dist += d * te / total
    print(f'distance: {dist:.4f}')


main()
