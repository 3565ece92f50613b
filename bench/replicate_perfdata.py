#!/usr/bin/env python3
"""Writes a perf.data whose data section is the input's repeated K times.

Benchmarks need more samples than the fixtures hold. The copy keeps the
input's header, attributes and feature sections (build-ids included), so
perf, perf2bolt and edgeprof read it like the original:
  - the header's data size becomes K times the original;
  - every file section that lies after the data section (the feature
    sections, and attribute ids or event types if a writer put them there)
    moves by the added bytes;
  - copy i's timestamps are shifted by i x (the recording's time span + 1 ms),
    so the result reads as K runs of the program one after the other, in
    time order (without it, perf warns about out-of-order events). Pass
    --no-shift-time to repeat the records byte for byte.

usage: replicate_perfdata.py [--no-shift-time] IN OUT K"""
import argparse
import struct
import sys

HEADER_SIZE = 104
USER_TYPE_START = 64  # records from perf itself (FINISHED_ROUND, ...) have no sample_id
REC_SAMPLE = 9
# record types with their own time field: offset of that field in the record
OWN_TIME_OFFSET = {4: 24, 7: 24, 5: 8, 6: 8}  # EXIT, FORK: after 4 u32; THROTTLE, UNTHROTTLE
# feature bits whose contents hold offsets into the data section
FEAT_AUXTRACE = 18
FEAT_DIR_FORMAT = 24

S_IP, S_TID, S_TIME, S_ID, S_CPU, S_STREAM_ID, S_IDENTIFIER = 1, 2, 4, 64, 128, 512, 1 << 16
ATTR_SAMPLE_ID_ALL = 1 << 18


def fail(msg):
    sys.exit(f"replicate_perfdata: {msg}")


def time_layout(blob, attrs_off, attrs_size, attr_size):
    """(offset of time in a SAMPLE, offset of time from the end of other
    kernel records or None) when every attribute agrees; None otherwise."""
    layouts = set()
    for off in range(attrs_off, attrs_off + attrs_size, attr_size):
        sample_type, = struct.unpack_from("<Q", blob, off + 24)
        flags, = struct.unpack_from("<Q", blob, off + 40)
        if not sample_type & S_TIME:
            return None
        in_sample = 8 + 8 * sum(bool(sample_type & b) for b in (S_IDENTIFIER, S_IP, S_TID))
        from_end = None
        if flags & ATTR_SAMPLE_ID_ALL:
            from_end = 8 + 8 * sum(bool(sample_type & b) for b in (S_ID, S_STREAM_ID, S_CPU, S_IDENTIFIER))
        layouts.add((in_sample, from_end))
    return layouts.pop() if len(layouts) == 1 else None


def records(data):
    pos = 0
    while pos < len(data):
        rtype, _misc, size = struct.unpack_from("<IHH", data, pos)
        if size < 8 or pos + size > len(data):
            fail(f"bad record at data byte {pos}")
        yield pos, rtype, size
        pos += size


def time_fields(data, layout):
    """Offsets (in the data section) of every timestamp worth shifting."""
    in_sample, from_end = layout
    out = []
    for pos, rtype, size in records(data):
        if rtype == REC_SAMPLE:
            if in_sample + 8 <= size:
                out.append(pos + in_sample)
        elif rtype < USER_TYPE_START:
            if rtype in OWN_TIME_OFFSET and OWN_TIME_OFFSET[rtype] + 8 <= size:
                out.append(pos + OWN_TIME_OFFSET[rtype])
            if from_end is not None and from_end + 8 <= size:
                out.append(pos + size - from_end)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-shift-time", action="store_true")
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("k", type=int)
    args = ap.parse_args()
    if args.k < 1:
        fail("K must be at least 1")
    with open(args.src, "rb") as f:
        blob = f.read()
    if blob[:8] != b"PERFILE2" or len(blob) < HEADER_SIZE:
        fail(f"{args.src}: not a perf.data file (or a pipe-mode one)")
    hsize, attr_size, attrs_off, attrs_size, data_off, data_size, ev_off, ev_size = struct.unpack_from(
        "<8Q", blob, 8)
    if hsize != HEADER_SIZE:
        fail(f"{args.src}: unexpected header size {hsize}")
    features = int.from_bytes(blob[72:104], "little")
    for bit, name in ((FEAT_AUXTRACE, "AUXTRACE"), (FEAT_DIR_FORMAT, "DIR_FORMAT")):
        if features >> bit & 1:
            fail(f"{args.src}: has a {name} feature, whose offsets this tool does not rewrite")
    data_end = data_off + data_size
    shift = (args.k - 1) * data_size

    def moved(off):
        return off + shift if off >= data_end else off

    header = bytearray(blob[:data_off])
    struct.pack_into("<Q", header, 48, data_size * args.k)
    struct.pack_into("<Q", header, 56, moved(ev_off))
    if attrs_off + attrs_size > data_off:
        fail("attributes after the data section are not supported")
    for off in range(attrs_off, attrs_off + attrs_size, attr_size):
        ids_pos = off + attr_size - 16  # each attribute ends with its ids' (offset, size)
        ids_off, = struct.unpack_from("<Q", header, ids_pos)
        struct.pack_into("<Q", header, ids_pos, moved(ids_off))

    tail = bytearray(blob[data_end:])
    nfeat = bin(features).count("1")
    for i in range(nfeat):  # the feature section table: (offset, size) each
        off, size = struct.unpack_from("<QQ", tail, 16 * i)
        struct.pack_into("<QQ", tail, 16 * i, moved(off), size)

    data = blob[data_off:data_end]
    layout = None if args.no_shift_time else time_layout(blob, attrs_off, attrs_size, attr_size)
    if not args.no_shift_time and layout is None:
        print("replicate_perfdata: attributes differ or lack TIME; repeating records unchanged",
              file=sys.stderr)
    fields = time_fields(data, layout) if layout else []
    times = [t for t in (struct.unpack_from("<Q", data, p)[0] for p in fields) if 0 < t < 1 << 63]
    step = (max(times) - min(times) + 1_000_000) if times else 0

    with open(args.dst, "wb") as f:
        f.write(header)
        copy = bytearray(data)
        for i in range(args.k):
            if i and step:
                for p in fields:
                    t, = struct.unpack_from("<Q", data, p)
                    if 0 < t < 1 << 63:
                        struct.pack_into("<Q", copy, p, t + i * step)
            f.write(copy)
        f.write(tail)


if __name__ == "__main__":
    main()
