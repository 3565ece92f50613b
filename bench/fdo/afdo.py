"""AutoFDO variants of the FDO benchmark (clang-14), imported by fdo.py, or run alone:
`python3 bench/fdo/afdo.py BUILD_DIR` (after bench/fdo/run.sh has fetched the sources) measures
only these, for the programs in BENCH_FDO_AFDO (default lua).

Variants, all clang-14 -O2 built the same way (build.sh), measured on the EVALUATION input and on
the training input (`<program>_train`, AFDO_TRAIN):
- clang_base: no profile;
- clang_pgo: instrumented PGO on the training input (-fprofile-instr-generate, llvm-profdata
  merge, -fprofile-instr-use), the exact reference;
- autofdo_edgeprof: the README's route: `edgeprof record --emulate` (defaults) of clang_base on
  the training input, `export --format profgen`, llvm-profgen-14 --unsymbolized-profile;
- autofdo_perfdata: the peer: llvm-profgen-14 on the same recording's perf.data (perf's raw
  LBR stacks, AutoFDO's own counting);
- autofdo_cllp_edgeprof: create_llvm_prof 0.19 on `export --format afdo`, with the blocks it
  writes under corrupt names dropped (clang refuses them): the route the README documented
  before, kept to show what it loses.
"""
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
PROFGEN = 'llvm-profgen-14'
VARIANTS = ('autofdo_edgeprof', 'autofdo_perfdata', 'autofdo_cllp_edgeprof')
# the training input, measured too (a smaller N than the profiled run's: the same code paths)
AFDO_TRAIN = {'lua': [f'{fdo.HERE}/inputs/lua_train.lua', '1']}


def build(p, out, extra=()):
    if not fdo.fresh(out):
        fdo.run([f'{fdo.HERE}/build.sh', fdo.SRC, f'{fdo.TOP}/work', p.name, out, 'clang-14']
                + FLAGS + list(extra), log=out + '.log', check=False)
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
    if not fdo.fresh(raw):
        fdo.run(['create_llvm_prof', '--profiler', 'text', '--profile', profile, '--binary',
                 binary, '--out', raw, '--format', 'text'], log=raw + '.log', check=False)
    if not fdo.fresh(raw):
        fdo.note(f'{p.name}: create_llvm_prof wrote no profile from {profile} ({raw}.log)')
        return None, None
    return out, drop_corrupt_callsites(raw, out)


def profgen(binary, inputs, out):
    """llvm-profgen-14's text sample profile; inputs: its options naming the profile read."""
    if not fdo.fresh(out):
        fdo.run([PROFGEN, f'--binary={binary}', f'--output={out}', '--format=text'] + inputs,
                log=out + '.log', check=False)
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


def train(p, ep, base):
    """edgeprof's default profile of the clang build's training run, and its perf.data."""
    rec, perf_data = f'{ep}/train.prof', f'{ep}/train.perf.data'
    if not fdo.fresh(rec) or not fdo.fresh(perf_data):
        fdo.run([fdo.EDGEPROF, 'record', '--emulate', '--seed', '1', '-o', rec, '--perf-data',
                 perf_data, '--', base] + p.cfg['train'], log=rec + '.log', cwd=ep)
    p.recorded['autofdo_edgeprof'] = p.samples(rec)
    return rec, perf_data


def exports(ep, rec):
    out = {}
    for fmt in ('profgen', 'afdo'):
        f = f'{ep}/train.{fmt}'
        if not fdo.fresh(f):
            fdo.run([fdo.EDGEPROF, 'export', rec, '--format', fmt, '-o', f], log=f + '.log')
        out[fmt] = f
    return out


def sample_profiles(p, ep, base, lines):
    """The sample profiles of every AutoFDO variant: name -> text profile."""
    rec, perf_data = train(p, ep, base)
    exp = exports(ep, rec)
    profiles = {
        'autofdo_edgeprof': profgen(base, [f'--unsymbolized-profile={exp["profgen"]}',
                                           '--use-offset=false'], f'{ep}/autofdo_edgeprof.prof'),
        'autofdo_perfdata': profgen(base, [f'--perfdata={perf_data}'],
                                    f'{ep}/autofdo_perfdata.prof'),
    }
    cllp, dropped = create_llvm_prof(p, base, exp['afdo'], f'{ep}/autofdo_cllp_edgeprof.prof')
    profiles['autofdo_cllp_edgeprof'] = cllp
    if dropped is not None:
        lines.append(f'fdo_autofdo_dropped_line_fraction_cllp_edgeprof_{p.name}: {dropped:.3f}')
    for n, f in profiles.items():
        if f is None:
            fdo.note(f'{p.name}: no {n} profile (see the logs beside {ep}/{n}.prof)')
    return {n: f for n, f in profiles.items() if f}


def describe_profiles(p, profiles, profdata, lines):
    """What each sample profile holds against instrumented PGO's exact counts of the same
    training input: of the functions that ran, the share of their calls made into functions
    the profile names (top-level or inlined); and how many of the 20 most called functions
    are among the profile's 20 with the most head samples (calls that stayed calls)."""
    exact = instr_entries(profdata)
    calls = sum(exact.values())
    for n, f in profiles.items():
        s = profile_summary(f)
        named = sum(c for k, c in exact.items() if k in s)
        lines.append(f'fdo_autofdo_functions_{n}_{p.name}: {len(s)}')
        lines.append(f'fdo_autofdo_exact_calls_covered_{n}_{p.name}: {named / max(1, calls):.4f}')
        lines.append(f'fdo_autofdo_top20_called_shared_{n}_{p.name}: '
                     f'{len(set(top(s)) & set(top(exact)))}')
    lines.append(f'fdo_autofdo_functions_run_clang_pgo_{p.name}: '
                 f'{sum(1 for c in exact.values() if c)}')


def pgo_profile(p, d):
    prof = f'{d}/pgo.profdata'
    if not fdo.fresh(prof):
        inst = build(p, f'{d}/instrumented', ['-fprofile-instr-generate'])
        if inst is None:
            raise SystemExit(f'bench/fdo: {p.name}: the instrumented build failed ({d})')
        for f in os.listdir(d):
            if f.endswith('.profraw'):
                os.remove(f'{d}/{f}')
        env = dict(fdo.RUN_ENV, LLVM_PROFILE_FILE=f'{d}/pgo-%p.profraw')
        fdo.run([inst] + p.cfg['train'], log=f'{d}/instrumented.run.log', cwd=d, env=env)
        raws = [f'{d}/{f}' for f in os.listdir(d) if f.endswith('.profraw')]
        fdo.run(['llvm-profdata-14', 'merge', '-o', prof] + raws, log=prof + '.log')
    return prof


def run_program(p, lines):
    d = f'{p.dir}/clang'
    os.makedirs(d, exist_ok=True)
    base = build(p, f'{d}/base')
    if base is None:
        raise SystemExit(f'bench/fdo: {p.name}: the clang-14 build failed ({d}/base.log)')
    variants = {'clang_base': base}
    pgo = build(p, f'{d}/pgo', [f'-fprofile-instr-use={pgo_profile(p, d)}'])
    if pgo is None:
        raise SystemExit(f'bench/fdo: {p.name}: the PGO build failed ({d}/pgo.log)')
    variants['clang_pgo'] = pgo
    ep = f'{p.ep}/clang'
    os.makedirs(ep, exist_ok=True)
    profiles = sample_profiles(p, ep, base, lines)
    describe_profiles(p, profiles, pgo_profile(p, d), lines)
    for name in VARIANTS:
        if name in profiles:
            out = build(p, f'{ep}/{name}.bin', [f'-fprofile-sample-use={profiles[name]}'])
            if out:
                variants[name] = out
            else:
                fdo.note(f'{p.name}: clang refused the {name} profile ({ep}/{name}.bin.log)')
    report(p, variants, lines)


def report(p, variants, lines):
    """The figures on the evaluation input, and on the training input itself (train_N): the
    exact reference's gain there is what the profiles saw, so AutoFDO's share of it is
    defined even where PGO's gain on the evaluation input is not (lua: PGO executes more
    instructions than clang_base there)."""
    for suffix, args in (('', p.cfg['eval']), ('_train', AFDO_TRAIN.get(p.name))):
        if args is None:
            continue
        figs = {n: p.measure(n + suffix, b, args) for n, b in variants.items()}
        report_input(p, figs, suffix, lines)
    for n, s in p.recorded.items():
        if n.startswith('autofdo_') and s is not None:
            lines.append(f'fdo_samples_{n}_{p.name}: {s}')


def report_input(p, figs, suffix, lines):
    base_f, exact_f = figs['clang_base'], figs['clang_pgo']
    prog = p.name + suffix
    for n, f in figs.items():
        for k in fdo.FIGURES:
            if k in f:
                lines.append(f'fdo_{k}_{n}_{prog}: {f[k]}')
    for n, f in figs.items():
        if n == 'clang_base':
            continue
        for k in fdo.FIGURES:
            if k not in f or k not in base_f:
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


def main():
    os.makedirs(fdo.RUN_ENV['HOME'], exist_ok=True)
    lines = []
    for name in fdo.env_list('BENCH_FDO_AFDO', 'lua'):
        run_program(fdo.Program(name, fdo.edgeprof_hash()), lines)
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
