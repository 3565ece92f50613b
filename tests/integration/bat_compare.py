#!/usr/bin/env python3
"""Compares two fdata files of one BOLTed binary's recording, translated
through its BAT table: ours (edgeprof export) and perf2bolt's. Both must
say "boltedcollection" and hold the same lines (function, offset, function,
offset), but for lines from inside the PLT (our exports leave the PLT's own
traces out, docs/exports.md); counts may differ by what the two count per
sample, so each common line's count ratio (ours / perf2bolt, lines of 20 or
more) must lie within [LO, HI]. Prints one summary line; exits 1 when a
check fails, saying which."""
import statistics
import sys


def load(path):
    lines = open(path).read().splitlines()
    header = bool(lines) and lines[0] == "boltedcollection"
    d = {}
    for line in lines:
        f = line.split()
        if len(f) == 8:
            d[tuple(f[:6])] = d.get(tuple(f[:6]), 0) + int(f[7])
    return header, d


def in_plt(key):
    name = key[1]
    return name.endswith("@PLT") or name.startswith("__BOLT_PSEUDO_.plt")


def main():
    ours_path, peer_path, lo, hi = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    h1, ours = load(ours_path)
    h2, peer = load(peer_path)
    only_ours = [k for k in ours if k not in peer and not in_plt(k)]
    only_peer = [k for k in peer if k not in ours and not in_plt(k)]
    ratios = [ours[k] / peer[k] for k in ours if k in peer and peer[k] >= 20]
    print("lines ours %d perf2bolt %d common %d only-ours %d only-perf2bolt %d; "
          "count ratio min %.3f median %.3f max %.3f" %
          (len(ours), len(peer), len(set(ours) & set(peer)), len(only_ours), len(only_peer),
           min(ratios or [0]), statistics.median(ratios or [0]), max(ratios or [0])))
    bad = []
    if not (h1 and h2):
        bad.append("boltedcollection header missing (ours %s, perf2bolt %s)" % (h1, h2))
    if not ours or not ratios:
        bad.append("no lines to compare")
    for k in only_ours[:5]:
        bad.append("only ours: " + " ".join(k))
    for k in only_peer[:5]:
        bad.append("only perf2bolt: " + " ".join(k))
    if ratios and (min(ratios) < lo or max(ratios) > hi):
        bad.append("a count ratio outside [%g, %g]" % (lo, hi))
    for b in bad:
        print("  " + b)
    sys.exit(1 if bad else 0)


main()
