"""AutoFDO variants of the FDO benchmark (clang-14), imported by fdo.py, or run alone:
`python3 bench/fdo/afdo.py BUILD_DIR` (after bench/fdo/sources.sh has fetched the sources)
measures only these, for the programs in BENCH_FDO_AFDO (default lua,sqlite,zstd). Every file
is made through fdo.cached: keyed by the content of all that determines it (build.sh, clang,
the source packages, edgeprof, llvm-profgen, perf, the inputs, the profile a build reads), so
a change remakes exactly what depends on it. BENCH_FDO_AFDO_SEEDS (1): the emulator seeds of
the training recordings; seeds after the first add variants NAME_sSEED (the sampling noise).

Variants, all clang-14 -O2 built the same way (build.sh), measured on the EVALUATION input and on
the training input (`<program>_train`, AFDO_TRAIN):
- clang_base: no profile;
- clang_pgo: instrumented PGO on the training input (-fprofile-instr-generate, llvm-profdata
  merge, -fprofile-instr-use), the exact reference;
- autofdo_edgeprof: the README's route: `edgeprof record --emulate` (defaults) of clang_base on
  the training input, `export --format profgen`, llvm-profgen-14 --unsymbolized-profile;
- autofdo_edgeprof_plain: the same profile without -fprofile-sample-accurate (the route before);
- autofdo_perfdata: the peer: llvm-profgen-14 on the same recording's perf.data (perf's raw
  LBR stacks, AutoFDO's own counting);
- autofdo_edgeprof_chop0: `record --emulate --chop 0` (whole stacks counted, the peers' way),
  the same export and route: what the coverage of a whole stack is worth;
- autofdo_edgeprof_taken: `record --emulate --event taken` (taken-branch sampling with its own
  uniform chop, agent/chop/chop.h), the period in taken branches chosen for as many samples as
  autofdo_edgeprof (taken_period): ~1.5-2x the branches counted per sample, still uniform;
- autofdo_exact: the training run's exact counts as llvm-profgen's input (exact_profgen):
  AutoFDO without sampling error, the most a sampled profile can give;
- autofdo_cllp_edgeprof (BENCH_FDO_AFDO_CLLP=1): create_llvm_prof 0.19 on `export --format
  afdo`, with the blocks it writes under corrupt names dropped (clang refuses them): the route
  the README documented before, kept to show what it loses.
Every autofdo_ variant but _plain and _cllp is built with -fprofile-sample-accurate (the
README's route).
"""
import bisect
import concurrent.futures
import json
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
import fdo  # noqa: E402 (after the line above)

# -gdwarf-4 only for create_llvm_prof 0.19, which reads no DWARF 5 (llvm-profgen-14 does); every
# variant gets the same flags so that they differ by their profile only.
# -fdebug-info-for-profiling: the discriminators sample profiles use to tell apart the blocks of
# one source line.
FLAGS = ['-gdwarf-4', '-fdebug-info-for-profiling']
# the README's route: functions without samples are cold (see route_variants)
ACCURATE = '-fprofile-sample-accurate'
PROFGEN = 'llvm-profgen-14'
# `record --period`'s default, in branches (cli/cmd_record.c): what the README's route samples at
DEFAULT_PERIOD = 10007
CLANG = 'clang-14'
DEFAULT_PROGRAMS = 'lua,sqlite,zstd'
# the training input, measured too, smaller than the profiled run where it has a size (the
# same code paths): lua's N, zstd's copies of the archive; sqlite's script is measured whole
AFDO_TRAIN = {'lua': [f'{fdo.HERE}/inputs/lua_train.lua', '1'],
              'sqlite': fdo.PROGRAMS['sqlite']['train'],
              'zstd': ['-q', '-c', '-7', f'{fdo.INPUTS}/zstd_train.tar']}
# the figures fdo_afdo_gain_fraction_min is taken over (PGO changes code, not only layout:
# instructions count as well as taken branches and I1 misses)
MIN_FIGURES = ('taken_branches', 'i1_misses', 'instructions')


def build_deps():
    """What a clang build depends on beyond build.sh's command line (build.sh's own content is
    in the key as the program run): the compiler, and the source packages' versions (their
    directory names, as run.sh keys the GCC baselines)."""
    return [fdo.tool_version([CLANG, '--version']), ' '.join(sorted(os.listdir(fdo.SRC)))]


def build(p, out, extra=()):
    """A clang-14 build of p through build.sh: FLAGS and extra (a profile named by
    -fprofile-*-use=FILE is in the key by its content)."""
    fdo.cached([f'{fdo.HERE}/build.sh', fdo.SRC, f'{fdo.TOP}/work', p.name, out, CLANG]
               + FLAGS + list(extra), out, build_deps(), log=out + '.log', check=False)
    return out if fdo.fresh(out) else None


def drop_corrupt_callsites(src, dst):
    """create_llvm_prof 0.19 writes the names of inlined callees from memory that is no longer
    theirs (bytes that are not text, newlines among them); clang refuses the profile
    ("Malformed sample profile data"). Drops every block whose header holds a byte that is not
    printable ASCII, with the lines it owns, including lines that the newline in a corrupt name
    split off. Returns the share of lines dropped."""
    lines = open(src, 'rb').read().split(b'\n')
    out, skip, dropped = [], None, 0
    for line in lines:
        indent = len(line) - len(line.lstrip(b' '))
        if skip is not None:
            if indent > skip or not re.match(rb'^ *[\w.]+(: |:\d| :)', line):
                dropped += 1
                continue
            skip = None
        if re.search(rb'[^\x20-\x7e]', line) or re.match(rb'^ *[\d.]+: \S*$', line):
            skip, dropped = indent, dropped + 1
            continue
        out.append(line)
    open(dst, 'wb').write(b'\n'.join(out))
    return dropped / max(1, len(lines))


def create_llvm_prof(p, binary, profile, out):
    raw = out + '.raw'
    fdo.cached(['create_llvm_prof', '--profiler', 'text', '--profile', profile, '--binary',
                binary, '--out', raw, '--format', 'text'], raw, log=raw + '.log', check=False)
    if not fdo.fresh(raw):
        fdo.note(f'{p.name}: create_llvm_prof wrote no profile from {profile} ({raw}.log)')
        return None, None
    return out, drop_corrupt_callsites(raw, out)


def profgen(binary, inputs, out, perf_data=None):
    """llvm-profgen-14's text sample profile; inputs: its options naming the profile read.
    With perf_data it runs `perf script` on it (perf is then in the key) into
    PERF_DATA.script.tmp, which it leaves behind: removed here."""
    extra = [fdo.tool_version(['perf', '--version'])] if perf_data else []
    fdo.cached([PROFGEN, f'--binary={binary}', f'--output={out}', '--format=text'] + inputs,
               out, extra, log=out + '.log', check=False)
    if perf_data and os.path.exists(perf_data + '.script.tmp'):
        os.remove(perf_data + '.script.tmp')
    return out if fdo.fresh(out) else None


def profile_summary(path):
    """A text sample profile's functions: name -> head samples (its top-level entry, sampled
    calls into it), for every function it names, top-level or inlined (head 0)."""
    funcs = {}
    for line in open(path, 'rb'):
        m = re.match(rb'^(\S+):\d+:(\d+)$', line.rstrip(b'\n'))
        if m:
            funcs[m.group(1).decode(errors='replace')] = int(m.group(2))
            continue
        m = re.match(rb'^ +[\d.]+: ([A-Za-z_]\w*):\d+$', line.rstrip(b'\n'))
        if m:
            funcs.setdefault(m.group(1).decode(), 0)
    return funcs


def top_level(path):
    """A text sample profile's top-level functions: name -> (total samples, head samples)."""
    out = {}
    for line in open(path, 'rb'):
        m = re.match(rb'^(\S+):(\d+):(\d+)$', line.rstrip(b'\n'))
        if m:
            out[m.group(1).decode(errors='replace')] = (int(m.group(2)), int(m.group(3)))
    return out


def distance_to_exact(profile, exact):
    """How far a sample profile's function shares are from autofdo_exact's: the total
    variation distance (half the summed absolute differences, 0 equal, 1 disjoint) of the
    shares of all samples (total) and of all calls (head) the top-level functions hold.
    Deterministic for one recording, and free of the layout noise that moves I1 misses."""
    a, b = top_level(profile), top_level(exact)
    out = []
    for i in (0, 1):
        ta, tb = sum(v[i] for v in a.values()) or 1, sum(v[i] for v in b.values()) or 1
        out.append(0.5 * sum(abs(a.get(n, (0, 0))[i] / ta - b.get(n, (0, 0))[i] / tb)
                             for n in set(a) | set(b)))
    return out


def instr_entries(profdata):
    """Instrumented PGO's function entry counts: name -> count (a local function's name
    loses its "file.c:" prefix, as sample profiles name it)."""
    text = subprocess.run(['llvm-profdata-14', 'show', '--all-functions', profdata],
                          capture_output=True, text=True, check=True).stdout
    out, name = {}, None
    for line in text.splitlines():
        m = re.match(r'^  (\S+):$', line)
        if m:
            name = m.group(1).rsplit(':', 1)[-1]
        m = re.match(r'^    Function count: (\d+)$', line)
        if m and name:
            out[name] = out.get(name, 0) + int(m.group(1))
    return out


def top(d, n=20):
    return [k for k, v in sorted(d.items(), key=lambda x: -x[1])[:n] if v > 0]


def seeds():
    """BENCH_FDO_AFDO_SEEDS (1): the emulator's --seed of each training recording; seeds after
    the first make variants of their own (autofdo_edgeprof_s2, ...): the spread of the figures
    over seeds is the sampling noise a comparison must beat."""
    return [int(x) for x in fdo.env_list('BENCH_FDO_AFDO_SEEDS', '1')]


def seed_suffix(seed):
    return '' if seed == seeds()[0] else f'_s{seed}'


def train(p, ep, base, seed):
    """edgeprof's default profile of the clang build's training run, and its perf.data."""
    sfx = seed_suffix(seed)
    rec, perf_data = f'{ep}/train{sfx}.prof', f'{ep}/train{sfx}.perf.data'
    fdo.cached([fdo.EDGEPROF, 'record', '--emulate', '--seed', str(seed), '-o', rec,
                '--perf-data', perf_data, '--', base] + p.cfg['train'], [rec, perf_data],
               log=rec + '.log', cwd=ep)
    p.recorded['autofdo_edgeprof' + sfx] = p.samples(rec)
    return rec, perf_data


def exports(ep, rec):
    out = {}
    for fmt in ('profgen', 'afdo'):
        f = f'{rec.removesuffix(".prof")}.{fmt}'
        fdo.cached([fdo.EDGEPROF, 'export', rec, '--format', fmt, '-o', f], f, log=f + '.log')
        out[fmt] = f
    return out


def exact_profgen(exact_json, binary, out):
    """The exact counts of a run (record --exact-out: every branch, taken and not taken) as
    llvm-profgen's unsymbolized input, what a sample profile would be with no sampling error:
    each edge into the binary starts a range of straight-line code that ends at the first
    branch instruction at or after its target (every branch instruction that ran is the
    source of some edge, so the next such address is where the code left the line), counted
    as often as the edge; the taken edges are the branches."""
    real = os.path.realpath(binary)
    prof = next(x for x in json.load(open(exact_json))['profiles']
                if real in {os.path.realpath(y) for y in x.get('paths') or [x.get('path')]})
    edges = [(int(e['from'], 16), int(e['to'], 16), e['count'], e['taken'],
              e.get('from_external'), e.get('to_external')) for e in prof['branches']]
    sites = sorted({f for f, _, _, _, fx, _ in edges if not fx})
    ranges, taken = {}, {}
    for f, t, c, tk, fx, tx in edges:
        if tx or not c:
            continue
        i = bisect.bisect_left(sites, t)
        if i < len(sites):
            ranges[(t, sites[i])] = ranges.get((t, sites[i]), 0) + c
        if tk and not fx:
            taken[(f, t)] = taken.get((f, t), 0) + c
    with open(out + '.new', 'w') as fh:
        fh.write(f'{len(ranges)}\n')
        fh.writelines(f'{a:x}-{b:x}:{c}\n' for (a, b), c in sorted(ranges.items()))
        fh.write(f'{len(taken)}\n')
        fh.writelines(f'{a:x}->{b:x}:{c}\n' for (a, b), c in sorted(taken.items()))
    os.replace(out + '.new', out)
    return out


def exact_json(p, ep, base):
    """The exact counts of the training run (record --exact-out)."""
    tk = f'{ep}/train.exact.json'
    fdo.cached([fdo.EDGEPROF, 'record', '--emulate', '--period', fdo.EXACT_PERIOD,
                '--exact-out', tk, '-o', tk + '.prof', '--', base] + p.cfg['train'],
               [tk, tk + '.prof'], log=tk + '.log', cwd=ep)
    return tk


def exact_profile(p, ep, base):
    """llvm-profgen's input made from the exact counts of the training run (exact_profgen):
    the autofdo_exact variant, AutoFDO's ceiling, what any sampled profile could reach."""
    return exact_profgen(exact_json(p, ep, base), base, f'{ep}/train.exact.profgen')


def taken_period(exact):
    """record's default period (in branches) turned into taken branches, from the training
    run's exact counts (every binary it ran): `record --event taken` with it takes as many
    samples as the default recording, so the two differ by what a sample counts only."""
    taken = total = 0
    for prof in json.load(open(exact))['profiles']:
        for e in prof['branches']:
            total += e['count']
            taken += e['count'] if e['taken'] else 0
    return max(1, round(DEFAULT_PERIOD * taken / max(1, total)))


def sample_profiles(p, ep, base, lines):
    """The sample profiles of every AutoFDO variant (and seed): name -> text profile."""
    profiles = {}
    for seed in seeds():
        sfx = seed_suffix(seed)
        rec, perf_data = train(p, ep, base, seed)
        exp = exports(ep, rec)
        profiles['autofdo_edgeprof' + sfx] = profgen(
            base, [f'--unsymbolized-profile={exp["profgen"]}', '--use-offset=false'],
            f'{ep}/autofdo_edgeprof{sfx}.prof')
        profiles['autofdo_perfdata' + sfx] = profgen(
            base, [f'--perfdata={perf_data}'], f'{ep}/autofdo_perfdata{sfx}.prof', perf_data)
        # the peers' counting inside edgeprof: whole stacks (--chop 0), through our export
        rec0 = f'{ep}/train_chop0{sfx}.prof'
        fdo.cached([fdo.EDGEPROF, 'record', '--emulate', '--seed', str(seed), '--chop', '0',
                    '-o', rec0, '--', base] + p.cfg['train'], rec0, log=rec0 + '.log', cwd=ep)
        profiles['autofdo_edgeprof_chop0' + sfx] = profgen(
            base, [f'--unsymbolized-profile={exports(ep, rec0)["profgen"]}',
                   '--use-offset=false'], f'{ep}/autofdo_edgeprof_chop0{sfx}.prof')
        # taken-branch sampling with its own uniform chop (agent/chop/chop.h): ~1.5x the
        # branches of the default chop per sample, at the same number of samples
        rect = f'{ep}/train_taken{sfx}.prof'
        fdo.cached([fdo.EDGEPROF, 'record', '--emulate', '--seed', str(seed), '--event',
                    'taken', '--period', str(taken_period(exact_json(p, ep, base))), '-o', rect,
                    '--', base] + p.cfg['train'], rect, log=rect + '.log', cwd=ep)
        p.recorded['autofdo_edgeprof_taken' + sfx] = p.samples(rect)
        profiles['autofdo_edgeprof_taken' + sfx] = profgen(
            base, [f'--unsymbolized-profile={exports(ep, rect)["profgen"]}',
                   '--use-offset=false'], f'{ep}/autofdo_edgeprof_taken{sfx}.prof')
        if sfx:
            continue  # create_llvm_prof's route is shown once, not measured for noise
        cllp, dropped = create_llvm_prof(p, base, exp['afdo'],
                                         f'{ep}/autofdo_cllp_edgeprof.prof')
        profiles['autofdo_cllp_edgeprof'] = cllp
        if dropped is not None:
            lines.append(f'fdo_autofdo_dropped_line_fraction_cllp_edgeprof_{p.name}: '
                         f'{dropped:.3f}')
    profiles['autofdo_exact'] = profgen(
        base, [f'--unsymbolized-profile={exact_profile(p, ep, base)}', '--use-offset=false'],
        f'{ep}/autofdo_exact.prof')
    for n, f in profiles.items():
        if f is None:
            fdo.note(f'{p.name}: no {n} profile (see the logs beside {ep}/{n}.prof)')
    return {n: f for n, f in profiles.items() if f}


def describe_profiles(p, profiles, profdata, lines):
    """What each sample profile holds against instrumented PGO's exact counts of the same
    training input: of the functions that ran, the share of their calls made into functions
    the profile names (top-level or inlined); and how many of the 20 most called functions
    are among the profile's 20 with the most head samples (calls that stayed calls); and
    how far its function shares are from the exact profile's (distance_to_exact)."""
    exact = instr_entries(profdata)
    calls = sum(exact.values())
    for n, f in profiles.items():
        s = profile_summary(f)
        named = sum(c for k, c in exact.items() if k in s)
        lines.append(f'fdo_autofdo_functions_{n}_{p.name}: {len(s)}')
        lines.append(f'fdo_autofdo_exact_calls_covered_{n}_{p.name}: {named / max(1, calls):.4f}')
        lines.append(f'fdo_autofdo_top20_called_shared_{n}_{p.name}: '
                     f'{len(set(top(s)) & set(top(exact)))}')
        if 'autofdo_exact' in profiles and n != 'autofdo_exact':
            tv = distance_to_exact(f, profiles['autofdo_exact'])
            lines.append(f'fdo_autofdo_distance_to_exact_totals_{n}_{p.name}: {tv[0]:.4f}')
            lines.append(f'fdo_autofdo_distance_to_exact_heads_{n}_{p.name}: {tv[1]:.4f}')
    lines.append(f'fdo_autofdo_functions_run_clang_pgo_{p.name}: '
                 f'{sum(1 for c in exact.values() if c)}')


def pgo_profile(p, d):
    """Instrumented PGO's profile of the training input. The raw profile has one fixed name:
    none of the programs forks, so one process writes it."""
    inst = build(p, f'{d}/instrumented', ['-fprofile-instr-generate'])
    if inst is None:
        raise SystemExit(f'bench/fdo: {p.name}: the instrumented build failed ({d})')
    raw, prof = f'{d}/pgo.profraw', f'{d}/pgo.profdata'
    env = dict(fdo.RUN_ENV, LLVM_PROFILE_FILE=raw)
    fdo.cached([inst] + p.cfg['train'], raw, ['LLVM_PROFILE_FILE=' + raw],
               log=f'{d}/instrumented.run.log', cwd=d, env=env)
    fdo.cached(['llvm-profdata-14', 'merge', '-o', prof, raw], prof, log=prof + '.log')
    return prof


def run_program(p, lines):
    """Builds and measures every variant of p; returns the gain fractions,
    (input, variant, figure) -> fraction, None where PGO's own gain is too small to judge."""
    d = f'{p.dir}/clang'
    os.makedirs(d, exist_ok=True)
    base = build(p, f'{d}/base')
    if base is None:
        raise SystemExit(f'bench/fdo: {p.name}: the clang-14 build failed ({d}/base.log)')
    variants = {'clang_base': base}
    prof = pgo_profile(p, d)
    pgo = build(p, f'{d}/pgo', [f'-fprofile-instr-use={prof}'])
    if pgo is None:
        raise SystemExit(f'bench/fdo: {p.name}: the PGO build failed ({d}/pgo.log)')
    variants['clang_pgo'] = pgo
    ep = f'{p.ep}/clang'
    os.makedirs(ep, exist_ok=True)
    profiles = sample_profiles(p, ep, base, lines)
    describe_profiles(p, profiles, prof, lines)
    todo = [(variant, flags) for name, f in profiles.items()
            for variant, flags in route_variants(name, f)]
    for (variant, _), out in zip(todo, parallel(
            lambda v: build(p, f'{ep}/{v[0]}.bin', v[1]), todo)):
        if out:
            variants[variant] = out
        else:
            fdo.note(f'{p.name}: clang refused the profile of {variant} ({ep}/{variant}.bin.log)')
    return report(p, variants, lines)


def parallel(fn, items):
    """fn over items, BENCH_FDO_JOBS (1) at a time, results in order: the builds and
    measurements of the variants are independent, and on a machine where niced commands get a
    sliver of the CPU each, several at once finish sooner; every file still has one maker."""
    jobs = int(os.environ.get('BENCH_FDO_JOBS', '1'))
    if jobs <= 1:
        return [fn(x) for x in items]
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        return list(ex.map(fn, items))


def route_variants(name, profile):
    """The builds made from one sample profile: (variant, clang flags). The README's route
    adds -fprofile-sample-accurate: a function without samples is then cold (entry count 0:
    .text.unlikely, optimized for size), as instrumented PGO makes every function that did
    not run; without it such functions are "unknown" and stay among the warm code (lua: 451
    of the 628 functions PGO put in .text.unlikely). autofdo_edgeprof_plain is the route
    without it, to show what the flag is worth. create_llvm_prof's route is built only with
    BENCH_FDO_AFDO_CLLP=1 (broken, see the README: it costs an hour of measuring per run)."""
    use = f'-fprofile-sample-use={profile}'
    if name == 'autofdo_cllp_edgeprof':
        return [(name, [use])] if os.environ.get('BENCH_FDO_AFDO_CLLP') == '1' else []
    out = [(name, [use, ACCURATE])]
    if name == 'autofdo_edgeprof':
        out.append(('autofdo_edgeprof_plain', [use]))
    return out


def report(p, variants, lines):
    """The figures on the evaluation input, and on the training input itself (_train): the
    exact reference's gain there is what the profiles saw, so AutoFDO's share of it is
    defined even where PGO's gain on the evaluation input is not (lua: PGO executes more
    instructions than clang_base there). Returns report_input's fractions of both."""
    fractions = {}
    inputs = [(suffix, args) for suffix, args in (('', p.cfg['eval']),
                                                  ('_train', AFDO_TRAIN.get(p.name))) if args]
    todo = [(suffix, n, b, args) for suffix, args in inputs for n, b in variants.items()]
    got = dict(zip([(suffix, n) for suffix, n, _, _ in todo],
                   parallel(lambda t: p.measure(t[1] + t[0], t[2], t[3]), todo)))
    for suffix, _ in inputs:
        figs = {n: got[(suffix, n)] for n in variants}
        fractions.update(report_input(p, figs, suffix, lines))
    for n, s in p.recorded.items():
        if n.startswith('autofdo_') and s is not None:
            lines.append(f'fdo_samples_{n}_{p.name}: {s}')
    return fractions


def report_input(p, figs, suffix, lines):
    """Figures, gains and gain fractions on one input; returns the fractions of MIN_FIGURES,
    (suffix, variant, figure) -> fraction, None where PGO saves less than
    fdo.MIN_SAVED_PER_KINSTR per 1000 instructions (fdo.py's rule for BOLT's exact profile:
    below that the figure is noise in the run time, and lua's instructions, which PGO makes
    more, are left out by it too)."""
    base_f, exact_f = figs['clang_base'], figs['clang_pgo']
    prog = p.name + suffix
    for n, f in figs.items():
        for k in fdo.GAIN_FIGURES:
            if k in f:
                lines.append(f'fdo_{k}_{n}_{prog}: {f[k]}')
    fractions = {}
    for n, f in figs.items():
        if n == 'clang_base':
            continue
        for k in fdo.GAIN_FIGURES:
            if not base_f.get(k) or k not in f:
                continue
            # the share each variant saves by itself: readable where PGO's own gain is
            # negative, which makes the fraction below change sign
            lines.append(f'fdo_gain_{n}_{k}_{prog}: {(base_f[k] - f[k]) / base_f[k]:.4f}')
            if n.startswith('autofdo_') and k in exact_f:
                g = fdo.gain(base_f[k], exact_f[k], f[k])
                if g is not None:
                    lines.append(f'fdo_gain_fraction_{n}_{k}_{prog}: {g:.3f}')
                    if n == 'autofdo_edgeprof':   # the headline: the README's route
                        lines.append(f'fdo_gain_fraction_autofdo_{k}_{prog}: {g:.3f}')
                    if k in MIN_FIGURES:
                        fractions[(suffix, n, k)] = g
    for k in MIN_FIGURES:
        if k in base_f and k in exact_f and base_f.get('instructions'):
            saved = (base_f[k] - exact_f[k]) * 1000 / base_f['instructions']
            lines.append(f'fdo_pgo_saved_per_kinstr_{k}_{prog}: {saved:.4f}')
            if saved < fdo.MIN_SAVED_PER_KINSTR:
                lines.append(f'fdo_afdo_gain_fraction_min_excludes_{k}_{prog}: {saved:.4f}')
                for key in [x for x in fractions if x[2] == k]:
                    fractions[key] = None
    return fractions


def minimum_lines(fractions, lines):
    """fdo_afdo_gain_fraction_min[_train]_<variant>: the least gain fraction of a variant over
    programs and MIN_FIGURES that PGO moves enough (per input: evaluation, training);
    fdo_afdo_gain_fraction_min[_train]: autofdo_edgeprof's, the issue's figure;
    fdo_afdo_gain_fraction_lead_over_perfdata_min[_train]: the least, over the same programs,
    figures and seeds, of autofdo_edgeprof's fraction less autofdo_perfdata's of the same
    recording (>= 0: our export at least as good as llvm-profgen on the same recording's
    perf.data everywhere)."""
    variants = sorted({v for fr in fractions.values() for _, v, _ in fr})
    for suffix in ('', '_train'):
        for v in variants:
            got = [g for fr in fractions.values() for (s, n, _), g in fr.items()
                   if s == suffix and n == v and g is not None]
            if got:
                lines.append(f'fdo_afdo_gain_fraction_min{suffix}_{v}: {min(got):.3f}')
                if v == 'autofdo_edgeprof':
                    lines.append(f'fdo_afdo_gain_fraction_min{suffix}: {min(got):.3f}')
        # each seed's recording against the peer's profile of the same recording
        ours_names = [v for v in variants if re.fullmatch(r'autofdo_edgeprof(_s\d+)?', v)]
        leads = []
        for fr in fractions.values():
            for v in ours_names:
                for k in MIN_FIGURES:
                    ours = fr.get((suffix, v, k))
                    peer = fr.get((suffix, v.replace('edgeprof', 'perfdata'), k))
                    if ours is not None and peer is not None:
                        leads.append(ours - peer)
        if leads:
            lines.append(f'fdo_afdo_gain_fraction_lead_over_perfdata_min{suffix}: '
                         f'{min(leads):.3f}')


def run_programs(names, ep_hash, lines):
    """The AutoFDO variants of each program, then the minimum lines. A tool failure on one
    program costs that program's lines only."""
    fractions = {}
    for name in names:
        try:
            fractions[name] = run_program(fdo.Program(name, ep_hash), lines)
        except SystemExit as e:
            fdo.note(f'{name}: AutoFDO variants skipped: {e}')
    minimum_lines(fractions, lines)


def prepare(names):
    """What run.sh makes before fdo.py, for running this file alone: zstd's inputs are made
    from the sqlite amalgamation (both scripts are quick when nothing changed)."""
    if 'zstd' in names:
        # the log below lies in work/, which run.sh's builds make on a full run
        os.makedirs(f'{fdo.TOP}/work', exist_ok=True)
        fdo.run([f'{fdo.HERE}/build.sh', fdo.SRC, f'{fdo.TOP}/work', 'sqlite-amalgamation', '-',
                 'gcc'], log=f'{fdo.TOP}/work/sqlite-amalgamation.log')
        fdo.run([f'{fdo.HERE}/inputs/make_zstd_corpus.sh', fdo.SRC, f'{fdo.TOP}/work',
                 fdo.INPUTS], log=f'{fdo.TOP}/work/make_zstd_corpus.log')


def main():
    os.makedirs(fdo.RUN_ENV['HOME'], exist_ok=True)
    names = fdo.env_list('BENCH_FDO_AFDO', DEFAULT_PROGRAMS)
    prepare(names)
    lines = []
    run_programs(names, fdo.edgeprof_hash(), lines)
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
