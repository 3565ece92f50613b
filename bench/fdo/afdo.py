"""AutoFDO variants of the FDO benchmark (clang-14), imported by fdo.py.

The exact reference is clang's instrumented PGO on the training input; AutoFDO's profile is
made by Debian's create_llvm_prof from edgeprof's `export --format afdo` (and from the
emulator's perf.data when `record --perf-data` exists). Both are compared with plain clang -O2.
"""
import os
import re

import fdo

# create_llvm_prof 0.19 writes an empty profile from DWARF 5 (clang-14's default) without a
# word; -fdebug-info-for-profiling gives it the discriminators AutoFDO is meant to use
FLAGS = ['-gdwarf-4', '-fdebug-info-for-profiling']


def build(p, out, extra=()):
    if not fdo.fresh(out):
        fdo.run([f'{fdo.HERE}/build.sh', fdo.SRC, f'{fdo.TOP}/work', p.name, out, 'clang-14']
                + FLAGS + list(extra), log=out + '.log')
    return out


def drop_corrupt_callsites(src, dst):
    """create_llvm_prof 0.19 writes inlined callees' names from freed memory
    (google/autofdo#95); clang refuses the profile ("Malformed sample profile data"). Drops
    every block whose header holds a byte that is not printable ASCII. Returns the share of
    lines dropped (the inline profile lost with them)."""
    lines = open(src, 'rb').read().split(b'\n')
    out, skip, dropped = [], None, 0
    for line in lines:
        indent = len(line) - len(line.lstrip(b' '))
        if skip is not None:
            if indent > skip:
                dropped += 1
                continue
            skip = None
        if re.search(rb'[^\x20-\x7e]', line):
            skip, dropped = indent, dropped + 1
            continue
        out.append(line)
    open(dst, 'wb').write(b'\n'.join(out))
    return dropped / max(1, len(lines))


def create_llvm_prof(p, binary, profile, out, profiler):
    raw = out + '.raw'
    if not fdo.fresh(raw):
        fdo.run(['create_llvm_prof', '--profiler', profiler, '--profile', profile, '--binary',
                 binary, '--out', raw, '--format', 'text'], log=raw + '.log', check=False)
    if not fdo.fresh(raw):
        fdo.note(f'{p.name}: create_llvm_prof wrote no profile from {profile} ({raw}.log)')
        return None, None
    return out, drop_corrupt_callsites(raw, out)


def run_program(p, lines):
    d = f'{p.dir}/clang'
    os.makedirs(d, exist_ok=True)
    base = build(p, f'{d}/base')
    # instrumented PGO: the exact reference
    prof = f'{d}/pgo.profdata'
    if not fdo.fresh(prof):
        inst = build(p, f'{d}/instrumented', ['-fprofile-instr-generate'])
        for f in os.listdir(d):
            if f.endswith('.profraw'):
                os.remove(f'{d}/{f}')
        env = dict(fdo.RUN_ENV, LLVM_PROFILE_FILE=f'{d}/pgo-%p.profraw')
        fdo.run([inst] + p.cfg['train'], log=f'{d}/instrumented.run.log', cwd=d, env=env)
        raws = [f'{d}/{f}' for f in os.listdir(d) if f.endswith('.profraw')]
        fdo.run(['llvm-profdata-14', 'merge', '-o', prof] + raws, log=prof + '.log')
    variants = {'clang_base': base,
                'clang_pgo': build(p, f'{d}/pgo', [f'-fprofile-instr-use={prof}'])}
    # edgeprof's default profile of the clang build's training run, through the AutoFDO export
    ep = f'{p.ep}/clang'
    os.makedirs(ep, exist_ok=True)
    perf_data = f'{ep}/train.perf.data'
    rec = f'{ep}/train.prof'
    if not fdo.fresh(rec):
        extra = ['--perf-data', perf_data] if fdo.has_perf_data_option() else []
        fdo.run([fdo.EDGEPROF, 'record', '--emulate', '--seed', '1', '-o', rec] + extra
                + ['--', base] + p.cfg['train'], log=rec + '.log', cwd=ep)
    text = f'{ep}/train.afdo'
    if not fdo.fresh(text):
        fdo.run([fdo.EDGEPROF, 'export', rec, '--format', 'afdo', '-o', text], log=text + '.log')
    for name, profile, profiler in (('autofdo_edgeprof', text, 'text'),
                                    ('autofdo_perfdata', perf_data, 'perf')):
        if not fdo.fresh(profile):
            continue
        sp, dropped = create_llvm_prof(p, base, profile, f'{ep}/{name}.prof', profiler)
        if sp is None:
            continue
        lines.append(f'fdo_autofdo_dropped_line_fraction_{name}_{p.name}: {dropped:.3f}')
        out = f'{ep}/{name}.bin'
        if not fdo.fresh(out):
            fdo.run([f'{fdo.HERE}/build.sh', fdo.SRC, f'{fdo.TOP}/work', p.name, out, 'clang-14']
                    + FLAGS + [f'-fprofile-sample-use={sp}'], log=out + '.log', check=False)
        if fdo.fresh(out):
            variants[name] = out
    figs = {n: p.measure(n, b) for n, b in variants.items()}
    base_f, exact_f = figs['clang_base'], figs['clang_pgo']
    for n, f in figs.items():
        for k in fdo.FIGURES:
            if k in f:
                lines.append(f'fdo_{k}_{n}_{p.name}: {f[k]}')
        if n.startswith('autofdo_'):
            for k in fdo.FIGURES:
                if k in f and k in base_f and k in exact_f:
                    g = fdo.gain(base_f[k], exact_f[k], f[k])
                    if g is not None:
                        lines.append(f'fdo_gain_fraction_{n}_{k}_{p.name}: {g:.3f}')
