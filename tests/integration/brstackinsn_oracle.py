#!/usr/bin/env python3
"""Compares `edgeprof trace` with `perf script -F ip,sym,brstackinsn`.

perf (an oracle we did not write) prints, per sample, every instruction
between consecutive branch-stack entries, oldest first; lines ending a
straight line carry "# PRED" or "# MISPRED". edgeprof trace prints every gap
as "G <sample> <start> <end> ok <insn>..." or "... cut <why>".
perf orders samples by time, edgeprof trace by file position, so gaps are
matched by their ends: the straight line from <start> to <end> is the same
code in every sample. For every gap edgeprof calls consistent, perf's
instructions from <start> to <end> must be exactly edgeprof's. Prints the counts, exits 1
on any disagreement."""
import sys


def perf_segments(path):
    """{(start, end): [insn addresses]} over all samples"""
    segments = {}
    seg = []
    with open(path) as f:
        for line in f:
            if not line.startswith("\t") and line.strip():
                seg = None  # "<ip> <sym>" header of the next sample
                continue
            if "insn:" not in line:
                if "..." in line:
                    seg = None
                continue
            addr = int(line.split()[0], 16)
            is_branch = "PRED" in line  # PRED or MISPRED
            if seg is None:
                # the oldest entry's source opens the listing: not a gap
                if is_branch:
                    seg = []
                continue
            seg.append(addr)
            if is_branch:
                segments.setdefault((seg[0], addr), seg)
                seg = []
    return segments


def kernel_return_targets(dump_file):
    """Addresses where a branch from the kernel (an interrupt's return)
    landed, from `edgeprof dump`: perf lists no straight line starting there,
    it runs its listing on across the kernel entry."""
    targets = set()
    with open(dump_file) as f:
        for line in f:
            for entry in line.split()[1:]:
                frm, to = entry.split("/")[:2]
                if int(frm, 16) >> 63:
                    targets.add(int(to, 16))
    return targets


def main():
    perf_file, trace_file, dump_file = sys.argv[1], sys.argv[2], sys.argv[3]
    perf = perf_segments(perf_file)
    after_interrupt = kernel_return_targets(dump_file)
    interrupted = 0
    compared = agree = disagree = missing = cut = 0
    shown = 0
    with open(trace_file) as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0] != "G":
                continue
            sample, start, end = int(parts[1]), int(parts[2], 16), int(parts[3], 16)
            if parts[4] != "ok":
                cut += 1
                continue
            ours = [int(x, 16) for x in parts[5:]]
            theirs = perf.get((start, end))
            if theirs is None and start in after_interrupt:
                interrupted += 1
                continue
            if theirs is None:
                missing += 1
                if shown < 5:
                    print(f"# perf has no straight line {start:x}-{end:x} in sample {sample}")
                    shown += 1
                continue
            compared += 1
            if ours == theirs:
                agree += 1
            else:
                disagree += 1
                if shown < 5:
                    print(f"# sample {sample} gap {start:x}-{end:x}: ours {len(ours)} insns, perf {len(theirs)}")
                    shown += 1
    print(f"# gaps compared: {compared}, equal: {agree}, different: {disagree}, "
          f"absent from perf: {missing}, starting after an interrupt (perf lists none): "
          f"{interrupted}, cut by edgeprof: {cut}")
    sys.exit(0 if disagree == 0 and missing == 0 and compared > 0 else 1)


if __name__ == "__main__":
    main()
