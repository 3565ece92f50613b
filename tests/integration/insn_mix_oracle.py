#!/usr/bin/env python3
"""The instruction mix, checked against tools we did not write.

callgrind (--dump-instr=yes) counts how often each instruction ran; objdump
-d names each instruction; this script classifies objdump's text by its
own rules (below, independent of edgeprof's capstone classifier) and sums
callgrind's counts per type. edgeprof's side is `export --format json
--insn-mix` of the emulator's exact profile (record --exact-profile): the
exact ranges' counts times the types capstone decoded. Both must be equal
type by type, in total and per function. The exact ranges' instruction
counts must also equal callgrind's instruction by instruction.

.init and .fini are left out of both sides: valgrind runs them without
attributing them to the binary (see callgrind_jumps.py). The binary must
not be PIE: callgrind writes a PIE's PLT stubs at their run-time addresses,
the rest at ELF addresses (a non-PIE's stubs it files under "???"). callgrind must run with --skip-plt=no, else it
counts the stubs' instructions in the calls to them.

usage: insn_mix_oracle.py CALLGRIND.OUT BINARY EDGEPROF_EXACT_MIX.json
Exits 1 on any difference."""
import bisect
import json
import re
import subprocess
import sys

from callgrind_jumps import parse_pos

TYPES = ["load", "store", "cond_branch", "jump", "indirect_jump", "call", "indirect_call",
         "return", "vector", "atomic", "divide", "other"]
PREFIXES = {"lock", "rep", "repz", "repe", "repnz", "repne", "bnd", "notrack", "data16",
            "addr32", "cs", "ds", "es", "ss", "fs", "gs", "rex", "rex.w"}
# AT&T: the destination is the last operand. These read it without writing.
NO_WRITE = re.compile(r"^(cmp|test|bt[wlq]?$|ucomis|comis|ptest|vptest|vucomis|vcomis|scas)")
# These write it without reading it.
WRITE_ONLY = re.compile(r"^(mov|vmov|set|stos|cvt|vcvt|pop|lea|pextr|vpextr|extractps|vextract|"
                        r"cmov)")
NO_DATA = re.compile(r"^(lea|nop|prefetch|clflush|endbr)")
DIVIDE = re.compile(r"^(i?div[bwlq]?|v?div(ss|sd|ps|pd)|fi?divr?p?[sl]?)$")
VECTOR_REG = re.compile(r"%(x|y|z)mm\d|%mm\d|%k[0-7]\b")


def split_operands(text):
    ops, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            ops.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        ops.append(cur.strip())
    return ops


def is_memory(op, branch):
    if op.startswith("$") or op.startswith("%"):
        return False
    if branch:
        return op.startswith("*") and not op.startswith("*%")
    return True  # (base,index), disp(...), an absolute address, %seg:...


def classify(text):
    """The set of types of one instruction, from objdump's AT&T text."""
    words = text.split(None, 1)
    lock = False
    while words and words[0] in PREFIXES:
        lock |= words[0] == "lock"
        words = words[1].split(None, 1) if len(words) > 1 else []
    if not words:
        return {"other"}
    m = words[0]
    operands = words[1].split("#")[0].split("<")[0].strip() if len(words) > 1 else ""
    ops = split_operands(operands)
    t = set()
    branch = m.startswith(("j", "call", "ret", "loop"))
    if m.startswith("jmp"):
        t.add("indirect_jump" if ops and ops[0].startswith("*") else "jump")
    elif m.startswith("call"):
        t.add("indirect_call" if ops and ops[0].startswith("*") else "call")
        t.add("store")  # the return address
    elif m.startswith("ret"):
        t |= {"return", "load"}
    elif m.startswith(("j", "loop")):
        t.add("cond_branch")
    if m.startswith("push"):
        t.add("store")
    if m.startswith("pop") or m.startswith("leave"):
        t.add("load")
    mem = [i for i, op in enumerate(ops) if is_memory(op, branch)]
    if mem and not NO_DATA.match(m):
        for i in mem:
            last = i == len(ops) - 1 and len(ops) > 1
            if branch or m.startswith("push"):
                t.add("load")
            elif m.startswith("pop"):
                t.add("store")
            elif not last and len(ops) > 1:
                t.add("load")
            elif len(ops) == 1:
                # one operand: read-modify-write (inc, neg, not, shifts),
                # read (mul, div), or written (set)
                if m.startswith("set"):
                    t.add("store")
                elif re.match(r"^(i?mul|i?div|f)", m):
                    t.add("load")
                else:
                    t |= {"load", "store"}
            elif NO_WRITE.match(m):
                t.add("load")
            elif WRITE_ONLY.match(m):
                t.add("store")
            else:
                t |= {"load", "store"}
    if VECTOR_REG.search(operands):
        t.add("vector")
    if lock or (m.startswith("xchg") and mem):
        t.add("atomic")
    if DIVIDE.match(m):
        t.add("divide")
    return t or {"other"}


def objdump(binary):
    """address -> (text, (start, name) of its function) for every instruction."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-w", binary],
                         capture_output=True, text=True, check=True).stdout
    insns, func = {}, None
    for line in out.splitlines():
        h = re.match(r"^([0-9a-f]+) <(.*)>:$", line)
        if h:
            func = (int(h.group(1), 16), h.group(2))
            continue
        i = re.match(r"^\s+([0-9a-f]+):\s+(.*)$", line)
        if i and not i.group(2).startswith("(bad)"):
            insns[int(i.group(1), 16)] = (i.group(2).strip(), func)
    return insns


def callgrind_counts(path, binary, plt):
    """address -> how often it ran (self cost only: a cost line right after
    calls= is the call's inclusive cost). callgrind files a non-PIE binary's
    PLT stubs under the object "???": those inside the PLT sections count."""
    counts, ob_names, ob, pos, after_calls = {}, {}, None, 0, False
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith(("ob=", "cob=")):
                name = line.partition("=")[2]
                if name.startswith("("):
                    ident, _, rest = name.partition(")")
                    rest = rest.strip()
                    if rest:
                        ob_names[ident] = rest
                    name = ob_names.get(ident, rest)
                if line.startswith("ob="):
                    ob = name
                continue
            if line.startswith("calls="):
                after_calls = True
                continue
            if not line or not (line[0].isdigit() or line[0] in "+-*"):
                continue
            cols = line.split()
            pos = parse_pos(cols[0], pos)
            if after_calls:
                after_calls = False
                continue
            ours = ob == binary or (ob == "???" and any(lo <= pos < hi for lo, hi in plt))
            if ours and len(cols) >= 3:
                counts[pos] = counts.get(pos, 0) + int(cols[2])
    return counts


def section(binary, name):
    """[start, end) of a section (readelf -SW), (0, 0) when none."""
    out = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.replace("[", " ").replace("]", " ").split()
        if name in parts:
            i = parts.index(name)
            addr, size = int(parts[i + 2], 16), int(parts[i + 4], 16)
            return addr, addr + size
    return 0, 0


def main():
    cg_file, binary, mix_file = sys.argv[1:4]
    insns = objdump(binary)
    left_out = [section(binary, ".init"), section(binary, ".fini")]
    kept = lambda a: not any(lo <= a < hi for lo, hi in left_out)  # noqa: E731
    plt = [section(binary, s) for s in (".plt", ".plt.got", ".plt.sec")]
    cg = {a: c for a, c in callgrind_counts(cg_file, binary, plt).items() if kept(a)}
    with open(mix_file) as f:
        doc = json.load(f)
    prof = [p for p in doc["profiles"] if p["path"] == binary or binary in p["paths"]][0]
    # the exact ranges, instruction by instruction (objdump's instruction starts)
    starts = sorted(insns)
    ours = {}
    for r in prof["ranges"]:
        lo, hi = int(r["start"], 16), int(r["end"], 16)
        for a in starts[bisect.bisect_left(starts, lo):bisect.bisect_right(starts, hi)]:
            if kept(a):
                ours[a] = ours.get(a, 0) + r["count"]
    diff = [a for a in set(ours) | set(cg) if ours.get(a, 0) != cg.get(a, 0)]
    for a in sorted(diff)[:5]:
        print(f"# 0x{a:x} {insns.get(a, ('?', '?'))}: exact ranges {ours.get(a, 0)}, "
              f"callgrind {cg.get(a, 0)}")
    print(f"# {len(cg)} instructions callgrind saw run, {len(diff)} counts differ")
    # callgrind x objdump's types, per type and per function
    total = {t: 0 for t in TYPES + ["instructions"]}
    per_func = {}
    for a, c in cg.items():
        text, func = insns.get(a, ("?", None))
        f = per_func.setdefault(func, {t: 0 for t in TYPES + ["instructions"]})
        for t in classify(text) | {"instructions"}:
            total[t] += c
            f[t] += c
    mix = prof["insn_mix"]
    theirs_total = dict(mix["total"])
    # functions by start address: edgeprof and objdump name the PLT's
    # entries differently (SYM@PLT, SYM@plt)
    theirs_func = {(int(f["start"], 16), f["name"]): f["mix"] for f in mix["functions"]}
    for key in [k for k in theirs_func if k[1] in ("_init", "_fini")]:
        m = theirs_func.pop(key)
        for t in theirs_total:
            theirs_total[t] -= m[t]
    bad = 0
    for t in ["instructions"] + TYPES:
        same = total[t] == theirs_total[t]
        bad += not same
        print(f"# {t:14} callgrind x objdump {total[t]:>12}  edgeprof {theirs_total[t]:>12}"
              f"{'' if same else '  DIFFERENT'}")
    by_start = {k[0]: v for k, v in theirs_func.items()}
    for func, f in sorted(per_func.items(), key=lambda kv: str(kv[0])):
        t = by_start.get(func[0] if func else None, {})
        d = [k for k in f if f[k] != t.get(k, 0)]
        if d:
            bad += 1
            print(f"# function {func}: differs in {d}: callgrind x objdump "
                  f"{ {k: f[k] for k in d} }, edgeprof { {k: t.get(k, 0) for k in d} }")
    extra = set(by_start) - {f[0] for f in per_func if f}
    if extra:
        bad += 1
        print(f"# functions only edgeprof counted: {sorted(hex(a) for a in extra)}")
    print(f"# {len(per_func)} functions compared type by type")
    sys.exit(1 if bad or diff or not cg else 0)


if __name__ == "__main__":
    main()
