#!/usr/bin/env python3
"""bench/capacity/model.py on fixed inputs (tests/data/capacity/inputs.txt): its outputs equal
the ones worked out by hand below, and a missing or unusable input stops it with exit 2 and
one line naming the input and the problem.

usage: capacity_model_check.py TMPDIR   prints "ok - ..." / "not ok - ..." lines"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import tap  # noqa: E402
from tap import check  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
model = os.path.join(here, '../../bench/capacity/model.py')
inputs = os.path.join(here, '../data/capacity/inputs.txt')
tmp = sys.argv[1]


# a node of 1 core, always busy, 4e7 branches/s at a period of 1e6: 40 samples/s, 400 per
# 10 s batch of its one process; 1,000 nodes
SMALL = ['nodes=1000', 'cores_per_node=1', 'busy_fraction=1',
         'branches_per_busy_core_s=40000000', 'period=1000000', 'processes_per_node=1']


def run(path, sets=SMALL):
    args = [sys.executable, model, path]
    for s in sets:
        args += ['--set', s]
    p = subprocess.run(args, capture_output=True, text=True)
    out = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition(': ')
        out[k] = v
    return p.returncode, out, p.stderr


rc, out, err = run(inputs)
check(f'the model runs on the fixed inputs (exit {rc}{": " + err.strip() if err else ""})',
      rc == 0)
# by hand, from the inputs' comments:
expected = {
    'rows_per_batch_fit_exponent': 0.5,       # 200 -> 400 rows for 100 -> 400 samples
    'samples_per_process_batch': 400,         # 40 samples/s x 10 s / 1 process
    'rows_per_process_batch': 400,            # 20 x 400^0.5
    'wire_bytes_per_process_batch': 4000,     # 200 x 400^0.5
    'per_node_rows_per_s': 40,                # 400 rows / 10 s
    'fleet_wire_bytes_per_s': 400000,         # 1,000 nodes x 4,000 bytes / 10 s
    'fleet_wire_mbit_per_s': 3.2,
    'fleet_rows_per_s': 40000,
    'collector_cpu_us_per_batch': 1000,       # the two calibration runs solved: 1 ms per batch
    'collector_cpu_us_per_row': 10,           # and 10 us per row
    'collector_cpu_s_per_million_edge_updates': 20,  # half the rows are edges
    'clickhouse_cpu_ms_per_commit': 50,
    'clickhouse_cpu_us_per_row': 2,
    'sqlite_collector_cpu_us_per_row': 15,
    'fleet_collector_cores': 0.51,            # 100 batches/s x 1 ms + 40,000 rows/s x 10 us + idle
    'fleet_collectors': 1,
    # 100 batches/s x 50 ms = 5 cores of commits on every shard, over half its 8: 1.25 batches
    # per commit bring them to 4
    'fleet_clickhouse_batches_per_commit': 1.25,
    'fleet_clickhouse_commit_cores_per_shard': 4,
    'fleet_clickhouse_shards': 1,             # 0.08 row cores fit in the 4 left
    'fleet_clickhouse_cores': 4.08,           # + 40,000 rows/s x 2 us
    'fleet_clickhouse_disk_bytes_per_day': 27648000000,   # 40,000 x 86,400 x 8 bytes
    'fleet_clickhouse_disk_bytes_per_retention': 829440000000,  # x 30 days
    'fleet_images_bytes': 2000000000,         # 2,000 build-ids x 1 MB
    'fleet_sqlite_disk_bytes_per_day': 42327182755,  # 1,000 x 20 x 2400^0.5 x 1,440 x 30
    'rollup_rows_factor_per_minute': 0.4082,  # 6^-0.5
    'limit_nodes_sqlite_single_writer': 1250,  # 1 core / (0.2 ms + 40 x 15 us) per node-second
    'limit_nodes_clickhouse_commits_on_every_shard': 1600,  # 8 cores / 50 ms x 10 s
    'limit_nodes_hot_build_id_on_one_shard': 1000000,  # 8 cores / 2 us / (0.1 x 40 rows/s)
    'rows_factor_at_max_label_sets': 16,      # 256^0.5
    'first_limit_clickhouse_nodes': 1600,
    'val100_clickhouse_batches_ratio': 1,     # 100 agents x 50 s / 10 s = 500
    'val100_clickhouse_rows_received_ratio': 0.8,  # 500 x 8 x 200 = 800,000 of 1,000,000
    'val100_clickhouse_wire_bytes_ratio': 2,  # 800,000 x 5 bytes of 2,000,000
    'val100_clickhouse_wire_bytes_additive_ratio': 1.5,  # 500 x 8 x 750 of 2,000,000
    'val100_clickhouse_collector_cpu_s_ratio': 1,  # 0.51 + 0.5 + 8 = 9.01
    'val100_clickhouse_server_cpu_s_ratio': 1,  # 5.1 + 200 x 50 ms + 500,000 x 2 us = 16.1
    'val100_sqlite_collector_cpu_s_ratio': 2,  # 500 x 2 ms + 800,000 x 15 us = 13, of 6.5
}
for k, want in expected.items():
    got = out.get(k)
    try:
        good = abs(float(got) - want) <= 1e-3 * abs(want)
    except (TypeError, ValueError):
        good = False
    check(f'{k} = {want} (got {got})', good)
check('the first limit is named (clickhouse_commits_on_every_shard)',
      out.get('first_limit_clickhouse') == 'clickhouse_commits_on_every_shard')

lines = open(inputs).read().splitlines()


def variant(name, edit):
    path = os.path.join(tmp, name)
    with open(path, 'w') as f:
        f.write('\n'.join(edit(list(lines))) + '\n')
    return path


def refused(name, path, message, sets=SMALL):
    rc, out, err = run(path, sets)
    check(f'{name}: exit 2, nothing printed, the reason named ({err.strip()})',
          rc == 2 and not out and message in err and err.count('\n') == 1)


def drop(key):
    return lambda ls: [x for x in ls if not x.startswith(key + ':')]


def setv(key, v):
    return lambda ls: [f'{key}: {v}' if x.startswith(key + ':') else x for x in ls]


# calibration runs whose solution has a negative cost per batch (noise): none per batch, the
# rows carry all of both runs' CPU, (1.1 + 4.6) s / 500,000 rows = 11.4 us
rc, neg, err = run(variant('negative', setv('bulk_clickhouse_collector_cpu_s', '4.7')))
check(f'a cost the runs put below zero is taken as zero (got {neg.get("collector_cpu_us_per_batch")} '
      f'us per batch, {neg.get("collector_cpu_us_per_row")} us per row)',
      rc == 0 and float(neg.get('collector_cpu_us_per_batch', -1)) == 0
      and abs(float(neg.get('collector_cpu_us_per_row', 0)) - 11.4) < 1e-6)

refused('a missing input', variant('missing', drop('clickhouse_store_rows')),
        'clickhouse_store_rows is missing')
refused('a value that is no number', variant('nan', setv('clickhouse_store_rows', 'abc')),
        "clickhouse_store_rows: 'abc' is not a number")
refused('a negative value', variant('neg', setv('calib_clickhouse_seconds', '-3')),
        "calib_clickhouse_seconds: '-3' must be a positive number")
refused('zero rows to divide by', variant('zero', setv('sqlite_store_rows', '0')),
        "sqlite_store_rows: '0' must be a positive number")
refused('infinity', variant('inf', setv('clickhouse_images_bytes', 'inf')),
        "clickhouse_images_bytes: 'inf' must be a non-negative number")
refused('one batch size only', variant('one', lambda ls: [x for x in ls
                                                          if not x.startswith('wire_python_s400')]),
        "needs at least two batch sizes of workload 'python' (found 1)")
refused('a line that is not "name: value"', variant('garbage', lambda ls: ls + ['garbage']),
        f'line {len(lines) + 1}: not a "name: value" line')
refused('calibration runs of one shape',
        variant('alike', lambda ls: [x.replace('bulk_clickhouse_batches_acked: 50',
                                               'bulk_clickhouse_batches_acked: 400')
                                     for x in ls]),
        'cannot be told apart')
refused('an unknown assumption', inputs, "--set nodez: no such assumption", SMALL + ['nodez=3'])
refused('an assumption that is no number', inputs, '--set nodes=many: the value must be',
        SMALL + ['nodes=many'])
refused('a workload that was not measured', inputs, "workload 'java' (found 0)",
        SMALL + ['workload=java'])
refused('an inputs file that is not there', os.path.join(tmp, 'none.txt'), 'cannot read it')
sys.exit(tap.exit_status())
