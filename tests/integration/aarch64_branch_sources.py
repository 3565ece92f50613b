#!/usr/bin/env python3
"""Every branch-stack entry of an aarch64 perf.data, read by tools we did not
write: perf script reads the entries (from, to, branch type) and the mappings,
aarch64-linux-gnu-readelf places each source in its file, and
aarch64-linux-gnu-objdump says which instruction is there. Each source must be
a branch instruction, and the entry's type (BRBE's field, as perf prints it)
must be that instruction's.
usage: aarch64_branch_sources.py PERF_DATA -> prints a summary, exit 1 on any mismatch"""
import re
import subprocess
import sys

# perf's branch type names (PERF_BR_*) -> the mnemonics objdump gives that type
TYPES = {
    "COND": re.compile(r"^(b|bc)\.(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)$|^(cbz|cbnz|tbz|tbnz)$"),
    "UNCOND": re.compile(r"^b$|^(b|bc)\.(al|nv)$"),
    "CALL": re.compile(r"^bl$"),
    "IND_CALL": re.compile(r"^blr$|^blra[ab]z?$"),
    "IND": re.compile(r"^br$|^bra[ab]z?$"),
    "RET": re.compile(r"^ret$|^reta[ab]$"),
}
ENTRY = re.compile(r"^(0x[0-9a-f]+)/(0x[0-9a-f]+)/[^ ]*/([A-Z_/]+)$")
MMAP = re.compile(r"PERF_RECORD_MMAP2 .*\[(0x[0-9a-f]+)\((0x[0-9a-f]+)\) @ (0x[0-9a-f]+|0) .*\]: \S+ (/\S+)$")


def run(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def load_segments(path):
    segs = []
    for line in run("aarch64-linux-gnu-readelf", "-lW", path).splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))  # offset, vaddr, filesz
    return segs


def disassembly(path):
    insns = {}
    for line in run("aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn", path).splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\t(\S+)", line)
        if m:
            insns[int(m.group(1), 16)] = m.group(2)
    return insns


def instruction_at(addr, maps, files):
    """(where, objdump's mnemonic or None) of a runtime address; the newest
    mapping holding it is the one in place when it was recorded"""
    hit = [mp for mp in maps if mp[0] <= addr < mp[0] + mp[1]]
    if not hit:
        return f"{addr:#x} (in no mapping)", None
    start, _, pgoff, path = hit[-1]
    if path not in files:
        files[path] = (load_segments(path), disassembly(path))
    segs, insns = files[path]
    off = addr - start + pgoff
    va = [v + off - o for o, v, sz in segs if o <= off < o + sz]
    if not va:
        return f"{path}+{off:#x} (in no segment)", None
    return f"{path}:{va[0]:#x}", insns.get(va[0])


def main():
    out = run("perf", "script", "-i", sys.argv[1], "--show-mmap-events", "-F", "ip,brstack")
    maps, files, bad = [], {}, []
    entries, sources, types, mnems = 0, {}, {}, {}
    for line in out.splitlines():
        m = MMAP.search(line)
        if m:
            start, length, pgoff = (int(x, 16) for x in m.groups()[:3])
            maps.append((start, length, pgoff, m.group(4)))
            continue
        for word in line.split()[1:]:
            e = ENTRY.match(word)
            if not e:
                continue
            entries += 1
            frm, kind = int(e.group(1), 16), e.group(3)
            types[kind] = types.get(kind, 0) + 1
            if frm not in sources:
                sources[frm] = instruction_at(frm, maps, files)
            where, mnem = sources[frm]
            if mnem is None:
                bad.append(f"{where}: no instruction there by objdump")
            elif kind not in TYPES or not TYPES[kind].match(mnem):
                bad.append(f"{where}: {mnem}, recorded as {kind}")
            else:
                mnems[mnem] = mnems.get(mnem, 0) + 1
    print(f"{entries} entries, {len(sources)} distinct sources in {len(files)} files, types "
          + ", ".join(f"{k} {v}" for k, v in sorted(types.items())))
    print("entries by instruction: " + ", ".join(f"{k} {v}" for k, v in sorted(mnems.items())))
    print(f"{len(bad)} mismatches")
    for b in list(dict.fromkeys(bad))[:20]:
        print("mismatch:", b)
    sys.exit(1 if bad or entries == 0 else 0)


if __name__ == "__main__":
    main()
