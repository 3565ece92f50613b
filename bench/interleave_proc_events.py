#!/usr/bin/env python3
"""Writes a perf.data with a fork and an exit of an unrelated process after
every N-th sample of the input.

What a busy node's agent sees: other processes start and end all the time
while the profiled one runs. Measures what those events cost the samples of
the processes they do not touch (the reconstructor's remembered entries
are kept per process). Each new process gets a pid no sample uses, forked
from another such pid, at the time of the sample before it; its records
carry the sample-id trailer copied from the input's first FORK/EXIT/COMM
record, with that pid and time.

usage: interleave_proc_events.py IN OUT N"""
import argparse
import struct
import sys

from replicate_perfdata import HEADER_SIZE, REC_SAMPLE, fail, records, time_layout

REC_EXIT, REC_FORK, REC_COMM = 4, 7, 3
FIRST_PID = 3_000_000  # above any pid_max: never a sampled process


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("n", type=int)
    args = ap.parse_args()
    if args.n < 1:
        fail("N must be at least 1")
    with open(args.src, "rb") as f:
        blob = f.read()
    if blob[:8] != b"PERFILE2":
        fail(f"{args.src}: not a perf.data file")
    hsize, attr_size, attrs_off, attrs_size, data_off, data_size, ev_off, _ = struct.unpack_from(
        "<8Q", blob, 8)
    if hsize != HEADER_SIZE:
        fail(f"{args.src}: unexpected header size {hsize}")
    layout = time_layout(blob, attrs_off, attrs_size, attr_size)
    if layout is None or layout[1] is None:
        fail(f"{args.src}: records without a sample-id trailer with the time")
    in_sample, from_end = layout
    data = blob[data_off:data_off + data_size]
    trailer = None
    for pos, rtype, size in records(data):
        if rtype in (REC_EXIT, REC_FORK, REC_COMM):
            # the trailer is everything from TID on: TID comes first, 8 bytes
            # before TIME, when the attributes sample both
            trailer = bytes(data[pos + size - from_end - 8:pos + size])
            break
    if trailer is None:
        fail(f"{args.src}: no FORK, EXIT or COMM record to copy a trailer from")

    out = bytearray()
    samples = 0
    pid = FIRST_PID
    for pos, rtype, size in records(data):
        out += data[pos:pos + size]
        if rtype != REC_SAMPLE:
            continue
        samples += 1
        if samples % args.n:
            continue
        t, = struct.unpack_from("<Q", data, pos + in_sample)
        tr = bytearray(trailer)
        struct.pack_into("<IIQ", tr, 0, pid + 1, pid + 1, t)
        body_size = 8 + 16 + 8
        for rt in (REC_FORK, REC_EXIT):
            out += struct.pack("<IHH", rt, 0, body_size + len(tr))
            out += struct.pack("<IIIIQ", pid + 1, pid, pid + 1, pid, t)
            out += tr
        pid += 1
    shift = len(out) - data_size
    data_end = data_off + data_size

    def moved(off):
        return off + shift if off >= data_end else off

    header = bytearray(blob[:data_off])
    struct.pack_into("<Q", header, 48, len(out))
    struct.pack_into("<Q", header, 56, moved(ev_off))
    for off in range(attrs_off, attrs_off + attrs_size, attr_size):
        ids_pos = off + attr_size - 16
        ids_off, = struct.unpack_from("<Q", header, ids_pos)
        struct.pack_into("<Q", header, ids_pos, moved(ids_off))
    features = int.from_bytes(blob[72:104], "little")
    tail = bytearray(blob[data_end:])
    for i in range(bin(features).count("1")):
        off, size = struct.unpack_from("<QQ", tail, 16 * i)
        struct.pack_into("<QQ", tail, 16 * i, moved(off), size)
    with open(args.dst, "wb") as f:
        f.write(header)
        f.write(out)
        f.write(tail)
    print(f"interleave_proc_events: {pid - FIRST_PID} processes forked and exited among "
          f"{samples} samples", file=sys.stderr)


if __name__ == "__main__":
    main()
