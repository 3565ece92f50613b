#!/usr/bin/env python3
"""FDO benchmark on real programs (issue 19): BOLT (and AutoFDO) with exact, edgeprof and peer
profiles, measured on an EVALUATION input the profiles never saw.

usage: fdo.py BUILD_DIR   (bench/fdo/run.sh prepares sources, baselines and inputs first)

Everything is cached under BUILD_DIR/fdo: a second run measures only what is missing. Every
cached file OUT has a key beside it (OUT.key): a hash of all that determines it, the command
line with the content of every file it names (the binary, the inputs, the profile), and the
tools that make it (edgeprof and its emulator plugin, llvm-bolt, valgrind, qemu). A changed
option, input, binary or tool remakes exactly the files that depend on it. Files made with
edgeprof live under a directory named after edgeprof's hash (afdo.py caches by that).

Environment: BENCH_FDO_PROGRAMS (lua,sqlite,zstd), BENCH_FDO_SAMPLES (2000,20000,200000),
BENCH_FDO_AFDO (programs for the clang AutoFDO/PGO variants, default lua,sqlite,zstd;
"" for none), BENCH_FDO_BAT (programs whose BAT round trip is measured, default lua: the
input BOLTed with --enable-bat from its own 20k profile, recorded, and its profile exported
for the input through BOLT's table),
BENCH_FDO_WALL=1 (also wall time, BENCH_FDO_WALL_RUNS interleaved rounds, default 11),
BENCH_FDO_NICE (the niceness of every command, default 19; 0 on a machine shared with
other work at normal priority, where 19 gets almost no CPU), BENCH_FDO_SEEDS (the emulator's
seeds for the sampled profiles, default 1: a profile of 20k samples is one draw, and which
rarely run code it reaches, so what BOLT splits off as cold, changes from seed to seed; with
several seeds the fractions are reported per seed and as their median, and the minimum and
the lead over the peers are taken over the medians).
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
# every command runs niced (BENCH_FDO_NICE, 19): hours of CPU that should not slow the machine
NICE = ['nice', '-n', os.environ.get('BENCH_FDO_NICE', '19')]
# cycle_estimate: what the instruction side costs, in KCachegrind's cycle estimation (CEst:
# an instruction 1, an L1 miss 10, a last-level miss 100; its data-side and branch terms left
# out, a layout changes neither much): each figure weighted by what it costs the run, so a
# figure worth 0.3% of the run time is not read as the user's whole gain
GAIN_FIGURES = ('taken_branches', 'i1_misses', 'lli_misses', 'instructions', 'cycle_estimate')
# and instructions executed in code BOLT split off as cold: why a layout gains less
FIGURES = GAIN_FIGURES + ('cold_instructions',)
# the figures fdo_gain_fraction_min is taken over, and the least the exact profile must save
# of one, in events per 1000 instructions the baseline executes, for it to judge a profile:
# below that the figure is worth less than ~0.1% of the run time, and its fraction is
# decided by code run a few hundred times, which no sampled profile reaches (zstd's I1
# misses: 33k in 3 G instructions, 0.011 per 1000; see README.md)
MIN_FIGURES = ('taken_branches', 'i1_misses')
MIN_SAVED_PER_KINSTR = 0.1
MIN_SAMPLES = 20000

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


_DIGESTS = {}


def file_digest(path):
    """sha256 of a file's content, computed once per run for each (path, size, mtime)."""
    st = os.stat(path)
    k = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if k not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, 'rb') as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b''):
                h.update(chunk)
        _DIGESTS[k] = h.hexdigest()
    return _DIGESTS[k]


def tool_version(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return cmd[0] + ' ' + r.stdout + r.stderr


# what a command's output depends on beyond its own binary and arguments: the emulator's
# plugin and qemu for edgeprof (record runs the program under qemu-user), cachegrind's tool
# for valgrind (/usr/bin/valgrind is only its launcher)
_TOOL_DEPS = {}


def tool_deps(exe):
    if exe not in _TOOL_DEPS:
        if exe == EDGEPROF:
            _TOOL_DEPS[exe] = [file_digest(os.path.join(BUILD, 'edgeprof-lbr.so')),
                               tool_version(['qemu-x86_64', '--version'])]
        elif os.path.basename(exe) == 'valgrind':
            _TOOL_DEPS[exe] = [tool_version(['valgrind', '--version'])]
        else:
            _TOOL_DEPS[exe] = []
    return _TOOL_DEPS[exe]


def cache_key(cmd, outs, extra=()):
    """A hash of everything that determines what cmd writes to outs: every argument, the
    content of every file an argument names (alone, after '=', or as a word of it, like
    sqlite's '.read FILE'), the content of the program run and of its tools; the files of
    outs are left out (only their names count). extra: more strings that count (a file the
    command reads without naming it)."""
    h = hashlib.sha256()
    exe = shutil.which(cmd[0]) or cmd[0]
    h.update(file_digest(exe).encode())
    for d in tool_deps(exe):
        h.update(d.encode())
    skip = {os.path.realpath(o) for o in outs}
    for a in list(cmd[1:]) + list(extra):
        h.update(b'\0' + a.encode())
        for tok in re.split(r'[\s=]+', a):
            if tok and os.path.isfile(tok) and os.path.realpath(tok) not in skip:
                h.update(file_digest(tok).encode())
    return h.hexdigest()


def cached(cmd, outs, extra=(), later=(), **kw):
    """Runs cmd (see run) unless every file of outs is there with the key of this command
    (OUT.key). Returns cmd's exit status, 0 when cached. The key is written after a run that
    made every output; a failed one runs again next time. later: files cmd names but does not
    read (what the program it makes will write), left out of the key like outs."""
    outs = [outs] if isinstance(outs, str) else list(outs)
    key = cache_key(cmd, outs + list(later), extra)
    stamps = [o + '.key' for o in outs]

    def stamped(o, s):
        return fresh(o) and os.path.exists(s) and open(s).read().strip() == key
    if all(stamped(o, s) for o, s in zip(outs, stamps)):
        return 0
    for o, s in zip(outs, stamps):
        for f in (o, s):
            if os.path.exists(f):
                os.remove(f)
    rc = run(cmd, **kw)
    if all(fresh(o) for o in outs):
        for s in stamps:
            with open(s, 'w') as fh:
                fh.write(key + '\n')
    return rc


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
        self.checks = {}        # name -> value printed as fdo_<name>_<program>

    def path(self, f, ep=True):
        return f'{self.ep if ep else self.dir}/{f}'

    def bolt(self, name, data, ep=True):
        out = self.path(f'{name}.bin', ep)
        log = out + '.log'
        if fresh(data):
            cached([BOLT, self.base, '-o', out, '-data', data] + BOLT_OPTS, out, log=log,
                   check=False, stdout=True)
        elif os.path.exists(out):
            os.remove(out)  # made from another profile
        self.bolt_logs[name] = log
        if fresh(out):
            self.variants[name] = out
        else:
            note(f'{self.name}: no {name} binary (llvm-bolt failed or no profile: {log})')

    def exact(self):
        """BOLT's instrumentation on the training input: every branch counted."""
        inst, fd = self.path('instrumented', False), self.path('exact.fdata', False)
        # the runtime library BOLT links in is named relative to /usr/lib (see BOLT_RT)
        cached([BOLT, self.base, '-instrument', '-o', inst, '-instrumentation-file=' + fd,
                '--runtime-instrumentation-lib=' + BOLT_RT], inst, [f'/usr/lib/{BOLT_RT}'],
               later=[fd], log=inst + '.log', stdout=True)
        # the instrumented binary holds fd's path: it is in the key through inst's content
        cached([inst] + self.cfg['train'], fd, log=fd + '.run.log', cwd=self.dir)
        self.bolt('bolt_exact', fd, ep=False)

    def record(self, out, period=None, extra=(), outs=(), seed=1):
        cmd = [EDGEPROF, 'record', '--emulate', '--seed', str(seed), '-o', out] + list(extra)
        if period:
            cmd += ['--period', str(period)]
        cached(cmd + ['--', self.base] + self.cfg['train'], [out] + list(outs),
               log=out + '.log', cwd=self.ep)
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

    def sampled(self, counts, perf_data, seeds=(1,)):
        """edgeprof's default profile at each sample count, and the peers' profiles of it;
        one set per seed, named as seed 1's with `_sSEED` added (seed 1's names unchanged)."""
        branches = self.training_branches()
        for n in counts:
            for seed in seeds:
                self.sampled_one(n, branches, perf_data, seed)

    def sampled_one(self, n, branches, perf_data, seed):
        k = samples_label(n)
        tag = '' if seed == 1 else f'.s{seed}'      # file names
        sfx = '' if seed == 1 else f'_s{seed}'      # variant names
        period = max(1, branches // n)
        pd = self.path(f'train.{k}{tag}.perf.data')
        prof = self.record(self.path(f'train.{k}{tag}.prof'), period,
                           ['--perf-data', pd] if perf_data else [],
                           [pd] if perf_data else [], seed)
        self.recorded[f'bolt_edgeprof_{k}{sfx}'] = self.samples(prof)
        # the README's route for users: export --format fdata, then llvm-bolt -data
        fd = self.path(f'{k}{tag}.fdata')
        cached([EDGEPROF, 'export', prof, '--format', 'fdata', '-o', fd], fd, log=fd + '.log')
        self.bolt(f'bolt_edgeprof_{k}{sfx}', fd)
        # the same recording's sampled counts, without the inference of the default (issue 34)
        fdi = self.path(f'{k}{tag}.noinfer.fdata')
        cached([EDGEPROF, 'export', prof, '--format', 'fdata', '--infer', 'off', '-o', fdi], fdi,
               log=fdi + '.log')
        self.bolt(f'bolt_edgeprof_noinfer_{k}{sfx}', fdi)
        if perf_data and fresh(pd):
            p2b = self.path(f'{k}{tag}.perf2bolt.fdata')
            cached([PERF2BOLT, '-p', pd, '-o', p2b, self.base], p2b, log=p2b + '.log',
                   check=False, stdout=True)
            self.bolt(f'bolt_perf2bolt_{k}{sfx}', p2b)
            if seed == 1:
                self.same_samples(k, pd, p2b)
        if seed == 1 and n == MIN_SAMPLES and self.name in env_list('BENCH_FDO_BAT', 'lua'):
            self.bat_roundtrip(k, period)
        # the peers' method inside edgeprof: fixed period, whole stacks counted
        prof0 = self.record(self.path(f'train.chop0.{k}{tag}.prof'), period,
                            ['--chop', '0', '--jitter', '0'], seed=seed)
        self.recorded[f'bolt_edgeprof_chop0_{k}{sfx}'] = self.samples(prof0)
        fd0 = self.path(f'chop0.{k}{tag}.fdata')
        cached([EDGEPROF, 'export', prof0, '--format', 'fdata', '-o', fd0], fd0,
               log=fd0 + '.log')
        self.bolt(f'bolt_edgeprof_chop0_{k}{sfx}', fd0)

    def bat_roundtrip(self, k, period):
        """Issue 35: the input laid out with --enable-bat from its own k profile, that binary
        recorded as the input was (same period and seed), and the profile exported through
        BOLT's table for the input binary, which BOLT lays out again: variant
        bolt_bat_roundtrip_K, to be as good as bolt_edgeprof_K."""
        fd, bat = self.path(f'{k}.fdata'), self.path(f'bat.{k}.bin')
        if not fresh(fd):
            return
        cached([BOLT, self.base, '-o', bat, '-data', fd, '--enable-bat'] + BOLT_OPTS, bat,
               log=bat + '.log', check=False, stdout=True)
        if not fresh(bat):
            note(f'{self.name}: no BOLTed binary with a BAT table ({bat}.log)')
            return
        prof, pd = self.path(f'bat.train.{k}.prof'), self.path(f'bat.train.{k}.perf.data')
        perf_data = has_perf_data_option()
        cached([EDGEPROF, 'record', '--emulate', '--seed', '1', '--period', str(period), '-o',
                prof] + (['--perf-data', pd] if perf_data else []) + ['--', bat] +
               self.cfg['train'], [prof] + ([pd] if perf_data else []), log=prof + '.log',
               cwd=self.ep)
        self.recorded[f'bolt_bat_roundtrip_{k}'] = self.samples(prof)
        notes = subprocess.run(['readelf', '-n', bat], capture_output=True, text=True).stdout
        bid = re.search(r'Build ID: ([0-9a-f]+)', notes)
        fd2 = self.path(f'bat.{k}.fdata')
        cached([EDGEPROF, 'export', prof, '--build-id', bid.group(1) if bid else '',
                '--format', 'fdata', '-o', fd2], fd2, log=fd2 + '.log')
        self.bolt(f'bolt_bat_roundtrip_{k}', fd2)
        # the peer: perf2bolt reads the same recording's perf.data through the table
        if perf_data and fresh(pd):
            p2b = self.path(f'bat.{k}.perf2bolt.fdata')
            cached([PERF2BOLT, '-p', pd, '-o', p2b, bat], p2b, log=p2b + '.log', check=False,
                   stdout=True)
            self.bolt(f'bolt_bat_roundtrip_perf2bolt_{k}', p2b)

    def same_samples(self, k, pd, p2b):
        """Our export of the very samples perf2bolt read (import --chop 0, counting whole
        stacks as perf2bolt does) must name every function perf2bolt's profile names: one
        it lacks is profile the export or the reconstruction lost, not sampling."""
        if not fresh(p2b):
            return
        prof, fd = self.path(f'{k}.import0.prof'), self.path(f'{k}.import0.fdata')
        cached([EDGEPROF, 'import', pd, '--binary', self.base, '--chop', '0', '-o', prof], prof,
               log=prof + '.log')
        cached([EDGEPROF, 'export', prof, '--format', 'fdata', '-o', fd], fd, log=fd + '.log')
        missing = sorted(fdata_functions(p2b) - fdata_functions(fd))
        self.checks[f'fdata_functions_missing_vs_perf2bolt_{k}'] = len(missing)
        if missing:
            note(f'{self.name}: functions in perf2bolt\'s profile of {pd} and not in ours: '
                 + ' '.join(missing))

    def measure_dir(self, name):
        # base and exact do not depend on edgeprof's profiles: measured once
        return self.dir if name in ('base', 'bolt_exact', 'clang_base', 'clang_pgo') else self.ep

    def measure(self, name, binary, args=None):
        args = args or self.cfg['eval']
        d = self.measure_dir(name)
        cg = f'{d}/{name}.cachegrind.txt'
        # the per-function counts (cg + '.out') say where the misses and the cold code are
        cached(['valgrind', '--tool=cachegrind', '--cache-sim=yes',
                '--cachegrind-out-file=' + cg + '.out', binary] + args, [cg, cg + '.out'],
               log=cg, cwd=d)
        tk = f'{d}/{name}.exact.json'
        cached([EDGEPROF, 'record', '--emulate', '--period', EXACT_PERIOD, '--exact-out', tk,
                '-o', tk + '.prof', '--', binary] + args, [tk, tk + '.prof'], log=tk + '.log',
               cwd=d)
        return figures(cg, tk, binary)


def cold_instructions(cg_out):
    """Instructions executed in code BOLT split off as cold (functions NAME.cold.N): what the
    evaluation input ran of the blocks the training profile had no count for."""
    n, fn, col = 0, '', None
    for line in open(cg_out, errors='replace'):
        if line.startswith('events:'):
            col = line.split()[1:].index('Ir')
        elif line.startswith('fn='):
            fn = line[3:].strip()
        elif col is not None and line[:1].isdigit() and re.search(r'\.cold(\.\d+)?$', fn):
            v = line.split()
            n += int(v[1 + col]) if len(v) > 1 + col else 0
    return n


def figures(cg, tk, binary):
    f = {}
    if fresh(cg + '.out'):
        f['cold_instructions'] = cold_instructions(cg + '.out')
    text = open(cg, errors='replace').read()
    for key, pat in (('instructions', r'I\s+refs:\s+([\d,]+)'),
                     ('i1_misses', r'I1\s+misses:\s+([\d,]+)'),
                     ('lli_misses', r'LLi misses:\s+([\d,]+)')):
        m = re.search(pat, text)
        if m:
            f[key] = int(m.group(1).replace(',', ''))
    if all(k in f for k in ('instructions', 'i1_misses', 'lli_misses')):
        f['cycle_estimate'] = f['instructions'] + 10 * f['i1_misses'] + 100 * f['lli_misses']
    # taken branches executed in the program itself (libc's are the same in every variant)
    real = os.path.realpath(binary)
    for p in json.load(open(tk))['profiles']:
        if real in {os.path.realpath(x) for x in p.get('paths') or [p.get('path')]}:
            f['taken_branches'] = sum(e['count'] for e in p['branches'] if e['taken'])
    return f


def fdata_functions(path):
    """The functions an fdata file gives counts to (ends written "1 NAME OFFSET")."""
    names = set()
    for line in open(path, errors='replace'):
        v = line.split()
        if len(v) == 8:
            names.update(v[i + 1] for i in (0, 3) if v[i] == '1')
    return names


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
        for k in GAIN_FIGURES + ('wall_s',):
            if k in f and k in base and k in exact:
                g = gain(base[k], exact[k], f[k])
                if g is not None:
                    fractions[(n, k)] = g
                    lines.append(f'fdo_gain_fraction_{n}_{k}_{p.name}: {g:.3f}')
    for k in GAIN_FIGURES:
        if k in base and k in exact and base.get('instructions'):
            saved = (base[k] - exact[k]) * 1000 / base['instructions']
            lines.append(f'fdo_exact_saved_per_kinstr_{k}_{p.name}: {saved:.4f}')
            if k in MIN_FIGURES and saved < MIN_SAVED_PER_KINSTR:
                lines.append(f'fdo_gain_fraction_min_excludes_{k}_{p.name}: {saved:.4f}')
                note(f'{p.name}: {k} left out of fdo_gain_fraction_min: the exact profile saves '
                     f'{base[k] - exact[k]} ({saved:.4f} per 1000 instructions, less than '
                     f'{MIN_SAVED_PER_KINSTR})')
                for key in [x for x in fractions if x[1] == k]:
                    fractions[key] = None
    bat_lines(p.name, figs, lines)
    seed_lines(p.name, fractions, lines)
    for n, log in p.bolt_logs.items():
        for k, v in bolt_report(log).items():
            lines.append(f'fdo_bolt_{k}_{n.removeprefix("bolt_")}_{p.name}: {v}')
    for n, v in p.checks.items():
        lines.append(f'fdo_{n}_{p.name}: {v}')
    return fractions


def bat_lines(program, figs, lines):
    """Issue 35's BAT round trip: the share of the input's own profile's gain (over base)
    that the profile taken from its BOLTed binary reaches, per figure, and the least over
    taken branches and I1 misses (fdo_bat_roundtrip_fraction, the issue's figure, >= 0.97)."""
    base = figs.get('base', {})
    for n, f in figs.items():
        if not n.startswith('bolt_bat_roundtrip_'):
            continue
        # the peer's round trip against the peer's profile of the input
        ref = figs.get(n.replace('bat_roundtrip_perf2bolt', 'perf2bolt')
                       .replace('bat_roundtrip', 'edgeprof'), {})
        least = None
        for k in GAIN_FIGURES:
            if k in f and k in ref and k in base:
                g = gain(base[k], ref[k], f[k])
                if g is None:
                    continue
                v = n.removeprefix('bolt_bat_roundtrip_')
                lines.append(f'fdo_bat_roundtrip_fraction_{v}_{k}_{program}: {g:.3f}')
                if k in MIN_FIGURES:
                    least = g if least is None else min(least, g)
        if least is not None:
            peer = '_perf2bolt' if 'perf2bolt' in n else ''
            lines.append(f'fdo_bat_roundtrip_fraction{peer}: {least:.3f}')


RUN_ENV = dict(os.environ, HOME=f'{TOP}/home')  # no ~/.sqliterc or the like


def main():
    os.makedirs(RUN_ENV['HOME'], exist_ok=True)
    programs = env_list('BENCH_FDO_PROGRAMS', 'lua,sqlite,zstd')
    counts = [int(x) for x in env_list('BENCH_FDO_SAMPLES', '2000,20000,200000')]
    seeds = [int(x) for x in env_list('BENCH_FDO_SEEDS', '1')]
    perf_data = has_perf_data_option()
    lines = []
    if not perf_data:
        note('edgeprof record has no --perf-data: the perf2bolt peer line is skipped')
    ep_hash = edgeprof_hash()
    fractions = {}  # program -> (variant, figure) -> gain fraction, None: left out of the min
    for name in programs:
        p = Program(name, ep_hash)
        p.variants['base'] = p.base
        p.exact()
        p.sampled(counts, perf_data, seeds)
        fractions[name] = report_program(p, lines)
    afdo = [x for x in env_list('BENCH_FDO_AFDO', 'lua,sqlite,zstd') if x in programs]
    if afdo:
        sys.modules.setdefault('fdo', sys.modules[__name__])  # one module, not a second copy
        sys.dont_write_bytecode = True   # no __pycache__ in the source tree
        import afdo as autofdo   # bench/fdo/afdo.py
        # a tool failure there costs that program's AutoFDO lines, not the BOLT figures above
        autofdo.run_programs(afdo, ep_hash, lines)
    minimum_lines(fractions, counts, lines)
    print('\n'.join(lines))


def by_seed(fr):
    """(variant, figure) -> {seed: fraction} from one program's fractions, a variant's seeds
    other than 1 being named VARIANT_sSEED."""
    out = {}
    for (n, k), v in fr.items():
        m = re.fullmatch(r'(.*)_s(\d+)', n)
        base, seed = (m.group(1), int(m.group(2))) if m else (n, 1)
        out.setdefault((base, k), {})[seed] = v
    return out


def seed_median(fr, v, k):
    """The median over seeds of variant v's fraction of figure k; None where left out."""
    got = [x for x in by_seed(fr).get((v, k), {}).values() if x is not None]
    return statistics.median(got) if got else None


def seed_lines(program, fractions, lines):
    """With several seeds: each variant's median, least and greatest fraction over them."""
    for (v, k), per in sorted(by_seed(fractions).items()):
        got = [x for x in per.values() if x is not None]
        if len(per) > 1 and got:
            lines.append(f'fdo_gain_fraction_seeds_{len(got)}_median_{v}_{k}_{program}: '
                         f'{statistics.median(got):.3f}')
            lines.append(f'fdo_gain_fraction_seeds_{len(got)}_lo_{v}_{k}_{program}: {min(got):.3f}')
            lines.append(f'fdo_gain_fraction_seeds_{len(got)}_hi_{v}_{k}_{program}: {max(got):.3f}')


def minimum_lines(fractions, counts, lines):
    """fdo_gain_fraction_min_<variant>: the least gain fraction of one BOLT variant over
    programs and MIN_FIGURES (those the exact profile moves enough); fdo_gain_fraction_min:
    edgeprof's at MIN_SAMPLES; fdo_gain_fraction_lead_over_peers_min: the least, over the
    same programs and figures, of edgeprof's fraction less the best peer's at that count."""
    def variant_min(v):
        got = []
        for fr in fractions.values():
            if all((v, k) not in fr for k in MIN_FIGURES):
                return None  # not measured on this program
            got += [m for m in (seed_median(fr, v, k) for k in MIN_FIGURES) if m is not None]
        return min(got) if got else None
    for n in counts:
        k = samples_label(n)
        for v in (f'bolt_edgeprof_{k}', f'bolt_edgeprof_noinfer_{k}', f'bolt_edgeprof_chop0_{k}',
                  f'bolt_perf2bolt_{k}'):
            m = variant_min(v)
            if m is not None:
                lines.append(f'fdo_gain_fraction_min_{v.removeprefix("bolt_")}: {m:.3f}')
        # paired by seed (the peers read the same recording, or one made with the same seed),
        # then the median over seeds
        leads = []
        for fr in fractions.values():
            per = by_seed(fr)
            for f in MIN_FIGURES:
                ours = per.get((f'bolt_edgeprof_{k}', f), {})
                peers = [per.get((v, f), {}) for v in (f'bolt_edgeprof_chop0_{k}',
                                                        f'bolt_perf2bolt_{k}')]
                paired = []
                for seed, x in ours.items():
                    best = [p[seed] for p in peers if p.get(seed) is not None]
                    if x is not None and best:
                        paired.append(x - max(best))
                if paired:
                    leads.append(statistics.median(paired))
        if leads:
            lines.append(f'fdo_gain_fraction_lead_over_peers_min_{k}: {min(leads):.3f}')
    m = variant_min(f'bolt_edgeprof_{samples_label(MIN_SAMPLES)}')
    if m is not None:
        lines.append(f'fdo_gain_fraction_min: {m:.3f}')
    else:
        note(f'fdo_gain_fraction_min needs BOLT at {MIN_SAMPLES} samples measured on every program')


if __name__ == '__main__':
    main()
