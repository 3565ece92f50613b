#!/usr/bin/env python3
"""Prints an LBR emulator stream (the plugin's out=FILE) as text that two runs
of the same guest with the same seed must share: every record in order, the
samples whole but for pid and tid, the exact edges sorted, the totals. The
maps text is left out: it is the host's /proc/self/maps, randomized."""
import struct
import sys

MAGIC = b"EPEMU002"
# struct ep_sample_record up to its entries (bpf/edgeprof_record.h)
HEAD = "<IIIIQQQQQiIII"


def main(path):
    data = open(path, "rb").read()
    if data[:8] != MAGIC:
        sys.exit(f"{path}: not an emulator stream (no {MAGIC.decode()} magic)")
    off = 8
    out = []
    while off < len(data):
        if off + 8 > len(data):
            sys.exit(f"{path}: byte {off}: truncated record header")
        rtype, size = struct.unpack_from("<II", data, off)
        off += 8
        payload = data[off:off + size]
        if len(payload) != size:
            sys.exit(f"{path}: byte {off}: truncated record")
        off += size
        if rtype == 1:
            out.append("maps")
        elif rtype == 2:
            (pid, tid, cpu, flags, time_ns, cgroup, ip, period, hw_index, err,
             n, _nr_stack, _pad) = struct.unpack_from(HEAD, payload, 0)
            head = struct.calcsize(HEAD)
            ents = struct.iter_unpack("<QQQ", payload[head:head + 24 * n])
            out.append(f"sample cpu={cpu} flags={flags:#x} time={time_ns} ip={ip:#x} "
                       f"period={period} hw={hw_index} err={err} n={n} " +
                       " ".join(f"{f:#x}>{t:#x}/{fl:#x}" for f, t, fl in ents))
        elif rtype == 3:
            edges = sorted(struct.iter_unpack("<QQQII", payload))
            out.append(f"exact {len(edges)}")
            out.extend(f"  {f:#x} {t:#x} {c} {tk} {k}" for f, t, c, tk, k in edges)
        elif rtype == 4:
            out.append("end %d %d" % struct.unpack("<QQ", payload))
        else:
            sys.exit(f"{path}: byte {off - 8 - size}: unknown record type {rtype}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: emu_stream_canon.py STREAM")
    main(sys.argv[1])
