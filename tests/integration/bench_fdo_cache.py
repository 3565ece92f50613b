#!/usr/bin/env python3
"""bench/fdo's cache (fdo.cached): a file is reused only when everything that made it is the
same: the command line, the content of each file it names (alone, after '=', or as a word of
an argument), and the program run. Checked with a tiny command in a temporary directory.

usage: bench_fdo_cache.py TMPDIR   prints "ok - ..." / "not ok - ..." lines"""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../bench/fdo'))
import fdo  # noqa: E402
from tap import check  # noqa: E402
import tap  # noqa: E402

tmp = sys.argv[1]


def write(path, text):
    with open(path, 'w') as f:
        f.write(text)


# the command copies its input to OUT and appends a line to a run log, so each run is seen
script, inp, inc, out, runs = (f'{tmp}/{n}' for n in ('cmd.sh', 'in', 'inc', 'out', 'runs'))
write(script, '#!/bin/sh\n[ "$1" = -n ] && shift 2\ncat "$2" > "$1"; echo run >> ' + runs + '\n')
os.chmod(script, 0o755)
write(inp, 'a\n')
write(inc, 'x\n')


def go(*extra, flag='-v'):
    fdo.cached([script, out, inp, f'--opt={flag}', f'.read {inc}'] + list(extra), out)
    return len(open(runs).read().splitlines()) if os.path.exists(runs) else 0


n = go()
check('the first call runs the command', n == 1 and open(out).read() == 'a\n')
check('the same call again reuses its output', go() == 1)
write(inp, 'b\n')
check('a changed input file runs it again', go() == 2 and open(out).read() == 'b\n')
check('and then is reused', go() == 2)
check('a changed option runs it again', go(flag='-w') == 3)
check('the output of the other option is not reused', go() == 4)
write(inc, 'y\n')
check('a changed file named inside an argument (.read FILE) runs it again', go() == 5)
os.remove(out)
check('a missing output runs it again', go() == 6)
os.remove(out + '.key')
check('an output without its key runs it again', go() == 7)
write(script, open(script).read() + '# another version of the program\n')
check('a changed program runs it again', go() == 8)
# a command that names a file only a later step writes (BOLT's -instrumentation-file=F)
later, out2 = f'{tmp}/later', f'{tmp}/out2'


def go_later():
    fdo.cached([script, out2, inp, f'--instrumentation-file={later}'], out2, later=[later])
    return len(open(runs).read().splitlines())


n = go_later()
write(later, 'written by the program the command made\n')
check('a file the command names but does not read (later=) is not part of its key',
      go_later() == n)

# several seeds (BENCH_FDO_SEEDS): the minimum is taken over each variant's median over seeds,
# and the lead over the peers pairs each seed's profile with the peers' of the same seed
fr = {('bolt_edgeprof_20k', 'taken_branches'): 0.90,
      ('bolt_edgeprof_20k_s2', 'taken_branches'): 0.97,
      ('bolt_edgeprof_20k_s3', 'taken_branches'): 0.99,
      ('bolt_perf2bolt_20k', 'taken_branches'): 0.95,
      ('bolt_perf2bolt_20k_s2', 'taken_branches'): 0.96,
      ('bolt_perf2bolt_20k_s3', 'taken_branches'): 0.93,
      ('bolt_edgeprof_20k', 'i1_misses'): None,
      ('bolt_perf2bolt_20k', 'i1_misses'): None}
got = []
fdo.minimum_lines({'p': fr}, [20000], got)
vals = dict(line.split(': ') for line in got)
check('the minimum over programs is the median over seeds',
      vals.get('fdo_gain_fraction_min') == '0.970'
      and vals.get('fdo_gain_fraction_min_perf2bolt_20k') == '0.950')
# paired leads: -0.05, +0.01, +0.06; median +0.01 (unpaired medians would give +0.02)
check('the lead over the peers is the median of the leads paired by seed',
      vals.get('fdo_gain_fraction_lead_over_peers_min_20k') == '0.010')
got = []
fdo.seed_lines('p', fr, got)
check('each variant gets its median, least and greatest fraction over the seeds',
      'fdo_gain_fraction_seeds_3_median_bolt_edgeprof_20k_taken_branches_p: 0.970' in got
      and 'fdo_gain_fraction_seeds_3_lo_bolt_perf2bolt_20k_taken_branches_p: 0.930' in got
      and not any('i1_misses' in x for x in got))
sys.exit(tap.exit_status())
