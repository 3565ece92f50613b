#!/usr/bin/env python3
"""Writes a perf.data whose data section is the input's repeated K times.

Benchmarks need more samples than the fixtures hold. The header's data size
grows, and the feature sections after the data (build-ids, cpuid, ...) move
by the added bytes, so perf and edgeprof read the copy like the original.
usage: replicate_perfdata.py IN OUT K"""
import struct
import sys


def main():
    src, dst, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(src, "rb") as f:
        blob = f.read()
    if blob[:8] != b"PERFILE2":
        sys.exit(f"{src}: not a perf.data file")
    data_off, data_size = struct.unpack_from("<QQ", blob, 40)
    features = struct.unpack_from("<4Q", blob, 72)
    nfeat = sum(bin(w).count("1") for w in features)
    data_end = data_off + data_size
    shift = (k - 1) * data_size
    header = bytearray(blob[:data_off])
    struct.pack_into("<Q", header, 48, data_size * k)
    tail = bytearray(blob[data_end:])
    for i in range(nfeat):  # the feature section table: (offset, size) each
        off, size = struct.unpack_from("<QQ", tail, 16 * i)
        struct.pack_into("<QQ", tail, 16 * i, off + shift, size)
    data = blob[data_off:data_end]
    with open(dst, "wb") as f:
        f.write(header)
        for _ in range(k):
            f.write(data)
        f.write(tail)


if __name__ == "__main__":
    main()
