#!/usr/bin/env python3
"""Reads what test_autofdo.sh compares: the emulator's exact counts (--exact-out JSON) of one
binary, a text sample profile (llvm-profgen's) and, optionally, the LLVM IR clang made with that
profile. Prints one `name value` line each:

  exact_hottest       the function of the binary whose branches ran most often
  exact_calls_F       calls into F (edges of kind call to F's first byte)
  exact_trips_F       executions of F's conditional branches per call (a loop's trip count)
  profile_hottest     the top-level function with the most samples
  profile_head_F      F's head samples (sampled calls into it)
  profile_trips_F     F's hottest body line per head sample
  profile_inlined_F   1 when some function's profile holds a callsite of F (inlined code
                      under its own, readable name)
  ir_entry_F          the function_entry_count clang gave F from the profile (-1: unknown,
                      what clang gives a function without samples unless told the
                      profile is accurate)

usage: afdo_profile.py EXACT.json BINARY PROFILE.txt [IR.ll]
"""
import json
import os
import re
import subprocess
import sys

FUNCS = ('hot', 'cold', 'mix', 'never')


def exact(path, binary):
    real = os.path.realpath(binary)
    prof = next(p for p in json.load(open(path))['profiles']
                if real in {os.path.realpath(x) for x in p.get('paths') or [p['path']]})
    # the exact profile lists no functions: the binary's symbols (nm) tell
    nm = subprocess.run(['nm', '--defined-only', '-S', binary], capture_output=True, text=True,
                        check=True).stdout
    funcs = [(int(a, 16), int(z, 16), n) for a, z, t, n in
             (ln.split() for ln in nm.splitlines() if len(ln.split()) == 4)
             if t in 'tTwW']

    def owner(addr):
        return next((n for s, z, n in funcs if s <= addr < s + max(z, 1)), None)
    starts = {n: s for s, _, n in funcs}
    ran, calls, cond = {}, {}, {}
    for e in prof['branches']:
        src = owner(int(e['from'], 16)) if not e.get('from_external') else None
        ran[src] = ran.get(src, 0) + e['count']
        if e['kind'] == 'call':
            for n, s in starts.items():
                if int(e['to'], 16) == s:
                    calls[n] = calls.get(n, 0) + e['count']
        if e['kind'] == 'conditional':
            cond[src] = cond.get(src, 0) + e['count']
    ran.pop(None, None)
    out = {'exact_hottest': max(ran, key=ran.get)}
    for n in FUNCS:
        if n in calls:
            out[f'exact_calls_{n}'] = calls[n]
            out[f'exact_trips_{n}'] = round(cond.get(n, 0) / calls[n], 2)
    return out


def profile(path):
    out, top, body, callees = {}, {}, {}, set()
    cur = None
    for line in open(path, errors='replace'):
        m = re.match(r'^(\S+):(\d+):(\d+)$', line.rstrip('\n'))
        if m:
            cur = m.group(1)
            top[cur] = int(m.group(2))
            out[f'profile_head_{cur}'] = int(m.group(3))
            continue
        m = re.match(r'^ ([\d.]+): (\d+)', line)
        if m and cur:
            body[cur] = max(body.get(cur, 0), int(m.group(2)))
        m = re.match(r'^ +[\d.]+: ([A-Za-z_]\w*):\d+$', line)
        if m:
            callees.add(m.group(1))
    out['profile_hottest'] = max(top, key=top.get) if top else '-'
    for n in FUNCS:
        if out.get(f'profile_head_{n}'):
            out[f'profile_trips_{n}'] = round(body.get(n, 0) / out[f'profile_head_{n}'], 2)
        out[f'profile_inlined_{n}'] = int(n in callees)
    return out


def ir(path):
    text = open(path).read()
    counts = dict(re.findall(r'^(!\d+) = !\{!"function_entry_count", i64 (-?\d+)\}', text, re.M))
    out = {}
    for name, md in re.findall(r'^define .*@(\w+)\(.*!prof (!\d+) \{', text, re.M):
        if name in FUNCS and md in counts:
            out[f'ir_entry_{name}'] = int(counts[md])
    return out


def main():
    res = exact(sys.argv[1], sys.argv[2])
    res.update(profile(sys.argv[3]))
    if len(sys.argv) > 4:
        res.update(ir(sys.argv[4]))
    for k, v in res.items():
        print(k, v)


if __name__ == '__main__':
    main()
