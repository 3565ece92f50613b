#!/usr/bin/env python3
"""Checks that the sampling periods an agent reports are a uniform draw of P +- D.

usage: uniform_period.py P D STATS MIN_DRAWS [rearm] CPUS
STATS is what the agent logs after "sampling periods: " (or "cycles event
periods: "): "n=.. mean=.. min=.. max=.. stddev=..". The mean, the range and
a uniform law's spread must hold; bounds are in standard errors of the
independent draws there are (one per sample, or with re-armed periods one
per CPU per drain: MIN_DRAWS), so a loaded machine (fewer samples) widens
them instead of failing. With re-armed periods one draw serves a whole
drain, in which a busy CPU takes T/P samples: the samples weigh each draw by
1/P, so their mean is 1/E[1/P] (~2% under P for D = P/4), not P. And a
single-threaded target runs on one CPU at a time, so its samples come from
about draws/CPUs draws. Prints the expectation; exits 1 when it does not
hold.
"""
import math
import sys

p, d, draws = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[4])
rearm, cpus = sys.argv[5] == "rearm", int(sys.argv[6])
s = dict(kv.split("=") for kv in sys.argv[3].split())
n, mean, lo, hi, sd = int(s["n"]), float(s["mean"]), int(s["min"]), int(s["max"]), float(s["stddev"])
want_mean, want_sd = p, d / math.sqrt(3)
k = min(n, draws)  # independent draws: one per sample, or per CPU per drain
if rearm:
    inv = math.log((p + d) / (p - d)) / (2 * d)  # E[1/P]
    want_mean = 1 / inv
    want_sd = math.sqrt(p / inv - want_mean**2)
    k = max(1, k // cpus)
ok = (n >= 200 and abs(mean - want_mean) < 5 * want_sd / math.sqrt(k) and lo >= p - d
      and hi <= p + d and abs(sd - want_sd) < max(0.2, 3 / math.sqrt(k)) * want_sd)
print(f"# expected mean {want_mean:.0f} +- {5 * want_sd / math.sqrt(k):.0f}, stddev {want_sd:.0f} ({k} independent draws)")
sys.exit(0 if ok else 1)
