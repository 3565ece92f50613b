#!/usr/bin/env python3
"""Writes a copy of a file with N random bytes changed (seeded, so every run
of the test sees the same damage). usage: mutate.py IN OUT SEED N [FROM]"""
import random
import sys

src, dst, seed, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
start = int(sys.argv[5]) if len(sys.argv) > 5 else 0
data = bytearray(open(src, "rb").read())
rng = random.Random(seed)
for _ in range(n):
    data[rng.randrange(start, len(data))] = rng.randrange(256)
open(dst, "wb").write(data)
