#!/usr/bin/env python3
"""FDO benchmark on real programs (issue 19): BOLT (and AutoFDO) with exact, edgeprof and peer
profiles, measured on an EVALUATION input the profiles never saw.

usage: fdo.py BUILD_DIR   (bench/fdo/run.sh prepares sources, baselines and inputs first)

Everything is cached under BUILD_DIR/fdo: a second run measures only what is missing. Files
made with edgeprof live under a directory named after edgeprof's hash, so a rebuilt edgeprof
(an export fix) redoes its profiles and their measurements, and nothing else.

Environment: BENCH_FDO_PROGRAMS (lua,sqlite,zstd), BENCH_FDO_SAMPLES (2000,20000,200000),
BENCH_FDO_AFDO (programs for the clang AutoFDO/PGO variants, default lua; "" for none),
BENCH_FDO_WALL=1 (also wall time, BENCH_FDO_WALL_RUNS interleaved rounds, default 11).
Prints `name: value` lines on stdout; progress and tool messages go to stderr.
"""
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else 'build')
TOP = os.path.join(BUILD, 'fdo')
SRC, BIN, INPUTS = f'{TOP}/src', f'{TOP}/build', f'{TOP}/inputs'
EDGEPROF = os.path.join(BUILD, 'edgeprof')
BOLT = 'llvm-bolt-16'
# /usr/bin/perf2bolt-16 is a link to llvm-bolt, which picks its mode from argv[0]: called by
# that name it rewrites the binary into the "profile". The real perf2bolt is this one.
PERF2BOLT = '/usr/lib/llvm-16/bin/perf2bolt'
# BOLT 16 prepends /usr/lib/ to this option, even to an absolute path
BOLT_RT = 'llvm-16/lib/libbolt_rt_instr.a'
BOLT_OPTS = ['-reorder-blocks=ext-tsp', '-reorder-functions=hfsort', '-split-functions',
             '-split-all-cold', '-dyno-stats']
# one sample per this many branches: the taken-branch count then costs one tiny profile
EXACT_PERIOD = '100000007'
NICE = ['nice', '-n', '19']
FIGURES = ('taken_branches', 'i1_misses', 'lli_misses', 'instructions')

PROGRAMS = {
    'lua': dict(train=[f'{HERE}/inputs/lua_train.lua', '2'],
                eval=[f'{HERE}/inputs/lua_eval.lua', '4']),
    'sqlite': dict(train=[':memory:', f'.read {HERE}/inputs/sqlite_train.sql'],
                   eval=[':memory:', f'.read {HERE}/inputs/sqlite_eval.sql']),
    'zstd': dict(train=['-q', '-c', '-7'] + [f'{INPUTS}/zstd_train.tar'] * 5,
                 eval=['-q', '-c', '-7'] + [f'{INPUTS}/zstd_eval.tar'] * 3),
}


def env_list(name, default):
    return [x for x in os.environ.get(name, default).split(',') if x]


def note(msg):
    print(f'bench/fdo: {msg}', file=sys.stderr, flush=True)


def fresh(path):
    return os.path.exists(path) and os.path.getsize(path) > 0


def run(cmd, log=None, cwd=None, check=True, env=None, stdout=False):
    """Runs cmd niced; stderr goes to log, and stdout too when asked (BOLT reports there);
    otherwise stdout is dropped (zstd -c writes the archive there)."""
    note('+ ' + ' '.join(cmd))
    with open(log or os.devnull, 'w') as err:
        r = subprocess.run(NICE + cmd, stdout=err if stdout else subprocess.DEVNULL, stderr=err,
                           cwd=cwd, env=env or RUN_ENV)
    if check and r.returncode:
        raise SystemExit(f'bench/fdo: failed ({r.returncode}): {" ".join(cmd)} (see {log})')
    return r.returncode


def samples_label(n):
    return f'{n // 1000}k' if n % 1000 == 0 else str(n)


def edgeprof_hash():
    h = hashlib.sha256()
    for f in (EDGEPROF, os.path.join(BUILD, 'edgeprof-lbr.so')):
        with open(f, 'rb') as fh:
            h.update(fh.read())
    return h.hexdigest()[:12]


def has_perf_data_option():
    r = subprocess.run([EDGEPROF, 'record', '--help'], capture_output=True, text=True)
    return '--perf-data' in r.stdout + r.stderr


class Program:
    def __init__(self, name, ep_hash):
        self.name, self.cfg = name, PROGRAMS[name]
        self.dir = f'{BIN}/{name}'
        self.base = f'{self.dir}/base'
        # edgeprof-made files; other hashes' directories are stale
        self.ep = f'{self.dir}/ep-{ep_hash}'
        os.makedirs(self.dir, exist_ok=True)
        for old in os.listdir(self.dir):
            if old.startswith('ep-') and f'{self.dir}/{old}' != self.ep:
                shutil.rmtree(f'{self.dir}/{old}')
        os.makedirs(self.ep, exist_ok=True)
        self.variants = {}      # name -> binary, in the order they are reported
        self.recorded = {}      # name -> samples in its training recording
        self.bolt_logs = {}     # name -> llvm-bolt's log

    def path(self, f, ep=True):
        return f'{self.ep if ep else self.dir}/{f}'

    def bolt(self, name, data, ep=True):
        out = self.path(f'{name}.bin', ep)
        log = out + '.log'
        if not fresh(out) and fresh(data):
            run([BOLT, self.base, '-o', out, '-data', data] + BOLT_OPTS, log=log, check=False,
                stdout=True)
        self.bolt_logs[name] = log
        if fresh(out):
            self.variants[name] = out
        else:
            note(f'{self.name}: no {name} binary (llvm-bolt failed or no profile: {log})')

    def exact(self):
        """BOLT's instrumentation on the training input: every branch counted."""
        inst, fd = self.path('instrumented', False), self.path('exact.fdata', False)
        if not fresh(fd):
            run([BOLT, self.base, '-instrument', '-o', inst, '-instrumentation-file=' + fd,
                 '--runtime-instrumentation-lib=' + BOLT_RT], log=inst + '.log', stdout=True)
            run([inst] + self.cfg['train'], log=fd + '.run.log', cwd=self.dir)
        self.bolt('bolt_exact', fd, ep=False)

    def record(self, out, period=None, extra=()):
        if not fresh(out):
            cmd = [EDGEPROF, 'record', '--emulate', '--seed', '1', '-o', out] + list(extra)
            if period:
                cmd += ['--period', str(period)]
            run(cmd + ['--', self.base] + self.cfg['train'], log=out + '.log', cwd=self.ep)
        return out

    def training_branches(self):
        prof = self.record(self.path('train.default.prof'))
        text = open(prof + '.log', errors='replace').read()
        m = re.search(re.escape(self.base) + r' ran (\d+) branches', text)
        if not m:
            raise SystemExit(f'bench/fdo: no branch count in {prof}.log')
        return int(m.group(1))

    def samples(self, prof):
        m = re.search(r': (\d+) samples', open(prof + '.log', errors='replace').read())
        return int(m.group(1)) if m else None

    def sampled(self, counts, perf_data):
        """edgeprof's default profile at each sample count, and the peers' profiles of it."""
        branches = self.training_branches()
        for n in counts:
            k = samples_label(n)
            period = max(1, branches // n)
            pd = self.path(f'train.{k}.perf.data')
            prof = self.record(self.path(f'train.{k}.prof'), period,
                               ['--perf-data', pd] if perf_data else [])
            self.recorded[f'bolt_edgeprof_{k}'] = self.samples(prof)
            # the README's route for users: export --format fdata, then llvm-bolt -data
            fd = self.path(f'{k}.fdata')
            if not fresh(fd):
                run([EDGEPROF, 'export', prof, '--format', 'fdata', '-o', fd], log=fd + '.log')
            self.bolt(f'bolt_edgeprof_{k}', fd)
            if perf_data and fresh(pd):
                p2b = self.path(f'{k}.perf2bolt.fdata')
                if not fresh(p2b):
                    run([PERF2BOLT, '-p', pd, '-o', p2b, self.base], log=p2b + '.log', check=False,
                        stdout=True)
                self.bolt(f'bolt_perf2bolt_{k}', p2b)
            # the peers' method inside edgeprof: fixed period, whole stacks counted
            prof0 = self.record(self.path(f'train.chop0.{k}.prof'), period,
                                ['--chop', '0', '--jitter', '0'])
            self.recorded[f'bolt_edgeprof_chop0_{k}'] = self.samples(prof0)
            fd0 = self.path(f'chop0.{k}.fdata')
            if not fresh(fd0):
                run([EDGEPROF, 'export', prof0, '--format', 'fdata', '-o', fd0], log=fd0 + '.log')
            self.bolt(f'bolt_edgeprof_chop0_{k}', fd0)

    def measure_dir(self, name):
        # base and exact do not depend on edgeprof's profiles: measured once
        return self.dir if name in ('base', 'bolt_exact', 'clang_base', 'clang_pgo') else self.ep

    def measure(self, name, binary, args=None):
        args = args or self.cfg['eval']
        d = self.measure_dir(name)
        cg = f'{d}/{name}.cachegrind.txt'
        if not fresh(cg):
            run(['valgrind', '--tool=cachegrind', '--cache-sim=yes',
                 '--cachegrind-out-file=/dev/null', binary] + args, log=cg, cwd=d)
        tk = f'{d}/{name}.exact.json'
        if not fresh(tk):
            run([EDGEPROF, 'record', '--emulate', '--period', EXACT_PERIOD, '--exact-out', tk,
                 '-o', tk + '.prof', '--', binary] + args, log=tk + '.log', cwd=d)
        return figures(cg, tk, binary)


def figures(cg, tk, binary):
    f = {}
    text = open(cg, errors='replace').read()
    for key, pat in (('instructions', r'I\s+refs:\s+([\d,]+)'),
                     ('i1_misses', r'I1\s+misses:\s+([\d,]+)'),
                     ('lli_misses', r'LLi misses:\s+([\d,]+)')):
        m = re.search(pat, text)
        if m:
            f[key] = int(m.group(1).replace(',', ''))
    # taken branches executed in the program itself (libc's are the same in every variant)
    real = os.path.realpath(binary)
    for p in json.load(open(tk))['profiles']:
        if real in {os.path.realpath(x) for x in p.get('paths') or [p.get('path')]}:
            f['taken_branches'] = sum(e['count'] for e in p['branches'] if e['taken'])
    return f


def bolt_report(log):
    """BOLT's own account of the profile: functions with profile, ignored and stale objects."""
    out = {}
    if not os.path.exists(log):
        return out
    text = open(log, errors='replace').read()
    m = re.search(r'(\d+) out of \d+ functions in the binary .* have non-empty execution profile',
                  text)
    out['profiled_functions'] = int(m.group(1)) if m else 0
    m = re.search(r'profile for (\d+) objects was ignored', text)
    out['ignored_objects'] = int(m.group(1)) if m else 0
    m = re.search(r'(\d+) \([\d.]+% of all profiled\) functions? ha(?:s|ve) invalid', text)
    out['stale_functions'] = int(m.group(1)) if m else 0
    return out


def wall_times(variants, args, rounds):
    """Interleaved runs: each round runs every variant once, starting one further each time,
    so that load drifting during the run hits every variant alike."""
    times = {n: [] for n in variants}
    names = list(variants)
    for r in range(rounds):
        for i in range(len(names)):
            n = names[(i + r) % len(names)]
            t = time.perf_counter()
            subprocess.run([variants[n]] + args, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=RUN_ENV, check=True)
            times[n].append(time.perf_counter() - t)
    return times


def gain(base, exact, variant):
    if base == exact:
        return None
    return (base - variant) / (base - exact)


def report_program(p, lines):
    figs = {n: p.measure(n, b) for n, b in p.variants.items()}
    if os.environ.get('BENCH_FDO_WALL') == '1':
        rounds = int(os.environ.get('BENCH_FDO_WALL_RUNS', '11'))
        for n, ts in wall_times(p.variants, p.cfg['eval'], rounds).items():
            med = statistics.median(ts)
            figs[n]['wall_s'] = med
            lines.append(f'fdo_wall_median_s_{n}_{p.name}: {med:.4f}')
            lines.append(f'fdo_wall_spread_{n}_{p.name}: {(max(ts) - min(ts)) / med:.3f}')
    for n, f in figs.items():
        for k in FIGURES:
            if k in f:
                lines.append(f'fdo_{k}_{n}_{p.name}: {f[k]}')
    for n, s in p.recorded.items():
        if s is not None:
            lines.append(f'fdo_samples_{n}_{p.name}: {s}')
    base, exact = figs.get('base', {}), figs.get('bolt_exact', {})
    fractions = {}
    for n, f in figs.items():
        if n in ('base', 'bolt_exact'):
            continue
        for k in FIGURES + ('wall_s',):
            if k in f and k in base and k in exact:
                g = gain(base[k], exact[k], f[k])
                if g is not None:
                    fractions[(n, k)] = g
                    lines.append(f'fdo_gain_fraction_{n}_{k}_{p.name}: {g:.3f}')
    for n, log in p.bolt_logs.items():
        for k, v in bolt_report(log).items():
            lines.append(f'fdo_bolt_{k}_{n.removeprefix("bolt_")}_{p.name}: {v}')
    return fractions


RUN_ENV = dict(os.environ, HOME=f'{TOP}/home')  # no ~/.sqliterc or the like


def main():
    os.makedirs(RUN_ENV['HOME'], exist_ok=True)
    programs = env_list('BENCH_FDO_PROGRAMS', 'lua,sqlite,zstd')
    counts = [int(x) for x in env_list('BENCH_FDO_SAMPLES', '2000,20000,200000')]
    perf_data = has_perf_data_option()
    lines = []
    if not perf_data:
        note('edgeprof record has no --perf-data: the perf2bolt peer line is skipped')
    ep_hash = edgeprof_hash()
    minimum = []
    for name in programs:
        p = Program(name, ep_hash)
        p.variants['base'] = p.base
        p.exact()
        p.sampled(counts, perf_data)
        fr = report_program(p, lines)
        for k in ('taken_branches', 'i1_misses'):
            if ('bolt_edgeprof_20k', k) in fr:
                minimum.append(fr[('bolt_edgeprof_20k', k)])
    afdo = [x for x in env_list('BENCH_FDO_AFDO', 'lua') if x in programs]
    if afdo:
        sys.modules.setdefault('fdo', sys.modules[__name__])  # one module, not a second copy
        sys.dont_write_bytecode = True   # no __pycache__ in the source tree
        import afdo as autofdo   # bench/fdo/afdo.py
        for name in afdo:
            # a tool failure here must not cost the BOLT figures measured above
            try:
                autofdo.run_program(Program(name, ep_hash), lines)
            except SystemExit as e:
                note(f'{name}: AutoFDO variants skipped: {e}')
    if minimum and len(minimum) == 2 * len(programs):
        lines.append(f'fdo_gain_fraction_min: {min(minimum):.3f}')
    else:
        note('fdo_gain_fraction_min needs BOLT at 20000 samples measured on every program')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
