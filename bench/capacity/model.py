#!/usr/bin/env python3
"""The capacity model of docs/capacity.md: what a fleet of agents at the default rate needs
(network into the collectors, collector and ClickHouse cores, rows/s, disk per day and per
retention period) and the first limit it meets as it grows, computed from the figures
bench/capacity/measure.sh measured; then the model's per-agent figures checked against the
load runs in the same file (predicted / measured).

usage: model.py INPUTS [--set NAME=VALUE]...
  INPUTS: "name: value" lines (measure.sh's output); --set overrides an assumption
  (the names and defaults are in ASSUMPTIONS below and in docs/capacity.md).
Prints "name: value" lines. Exit 2 with one line naming the input and the problem when an
input is missing or not a usable number."""
import math
import re
import sys

# name: default. Each is an assumption about the fleet, not a measurement: docs/capacity.md
# says where each comes from.
ASSUMPTIONS = {
    'nodes': 10000,
    'cores_per_node': 32,
    'busy_fraction': 0.25,            # average share of a node's CPU time spent running code
    'branches_per_busy_core_s': 1e9,  # README: a busy CPU retires 1-2 G branches/s
    'period': 1000003,                # the agent's --period default (branches per sample)
    'interval_s': 10,                 # the agent's --interval default
    'processes_per_node': 20,         # label sets (process or container) sampled per interval
    'build_ids': 2000,                # distinct binaries fleet-wide (images kept once each)
    'retention_days': 30,             # the collector's --retention-days default
    'hot_binary_share': 0.10,         # share of every node's rows in one fleet-wide binary (libc)
    'collector_cores': 4,             # cores of one collector replica
    'shard_cores': 16,                # cores of one ClickHouse shard
    'core_budget': 0.5,               # share of those cores ingest may use (headroom)
    'sqlite_cores': 1,                # the SQLite store commits from one writer
    'nodes_read_ms_per_10k': 37,      # README, bench/fleet_sync.sh: the 1 s nodes read, 10k nodes
    'agent_label_sets_max': 256,      # the agent keeps at most 256 containers apart
    'batches_per_commit': 1,          # group commit merges more under load: 1 is the worst case
    'workload': 'python',             # which measured recording a node's processes are like
}
POOLS = ('propeller', 'testlbr')  # bench/load/run.sh's templates, in its order
TEMPLATE_SAMPLES = 100            # run.sh replays them with --batch-samples 100


class InputError(Exception):
    pass


def read_inputs(path):
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InputError(f'cannot read it: {e.strerror}')
    values = {}
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.startswith('#'):
            continue
        m = re.match(r'^([A-Za-z0-9_]+): (\S+)', line)
        if not m:
            raise InputError(f'line {n}: not a "name: value" line: {line!r}')
        values[m.group(1)] = m.group(2)
    return values


class Inputs:
    def __init__(self, values):
        self.values = values

    def num(self, key, positive=False):
        if key not in self.values:
            raise InputError(f'{key} is missing')
        raw = self.values[key]
        try:
            v = float(raw)
        except ValueError:
            raise InputError(f'{key}: {raw!r} is not a number')
        if not math.isfinite(v) or v < 0 or (positive and v == 0):
            raise InputError(f'{key}: {raw!r} must be a {"positive" if positive else "non-negative"} number')
        return v

    def has(self, key):
        return key in self.values


def power_fit(points):
    """Least squares y = a x^b in log space: a batch's distinct rows grow slower than its
    samples (the same hot edges come back), so rows per sample fall as batches grow."""
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(y) for _, y in points]
    n = len(points)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return math.exp(my - b * mx), b


def workload_points(inp, w):
    """(samples, rows, bytes) per batch of workload w at each measured batch size."""
    sizes = sorted({int(m.group(1)) for k in inp.values
                    for m in [re.match(rf'^wire_{re.escape(w)}_s(\d+)_batches$', k)] if m})
    pts = []
    for s in sizes:
        p = f'wire_{w}_s{s}_'
        nb = inp.num(p + 'batches', positive=True)
        rows = sum(inp.num(p + k) for k in ('edges', 'ranges', 'ips', 'binary_deltas'))
        pts.append((inp.num(p + 'samples', positive=True) / nb, rows / nb,
                    inp.num(p + 'bytes', positive=True) / nb))
    if len({x for x, _, _ in pts}) < 2:
        raise InputError(f'wire_{w}_s*: needs at least two batch sizes of workload {w!r} '
                         f'(found {len(pts)})')
    if any(r <= 0 for _, r, _ in pts):
        raise InputError(f'wire_{w}_s*: a batch size with no rows')
    return pts


def ratio_line(out, name, predicted, measured):
    out(f'{name}_predicted', predicted)
    out(f'{name}_measured', measured)
    out(f'{name}_ratio', predicted / measured if measured else float('inf'))


def solve2(name, eqs):
    """Per-batch (or per-commit) and per-row costs from two calibration runs:
    cpu = x * batches + y * rows. A cost the runs cannot tell from zero is taken as zero and
    the other fitted alone, rather than going negative."""
    (u1, v1, c1), (u2, v2, c2) = eqs
    det = u1 * v2 - u2 * v1
    if det == 0:
        raise InputError(f'{name}: the two calibration runs have the same shape '
                         '(batches or commits per row): their costs cannot be told apart')
    x, y = (c1 * v2 - c2 * v1) / det, (u1 * c2 - u2 * c1) / det
    if x < 0:
        x, y = 0.0, (c1 + c2) / (v1 + v2)
    elif y < 0:
        x, y = (c1 + c2) / (u1 + u2), 0.0
    return x, y


def costs(inp):
    """CPU per batch (per commit for clickhouse-server) and per row, from two calibration
    load runs each, the idle share taken out: the collectors' from calib and bulk (8 times
    the binaries per batch), clickhouse-server's from calib and group (the collector waiting
    --commit-ms for more batches per commit: ClickHouse's inserts grow, the load generator's
    batches merge the same)."""
    c = {'collector_idle': inp.num('collector_clickhouse_idle_cpu_s_per_s'),
         'clickhouse_idle': inp.num('clickhouse_idle_cpu_s_per_s')}

    def runs(st, cpu, per, rows, idle, tags=('calib', 'bulk')):
        eqs = []
        for tag in tags:
            p = f'{tag}_{st}_'
            eqs.append((inp.num(p + per), inp.num(p + rows),
                        max(inp.num(p + cpu) - idle * inp.num(p + 'seconds', positive=True), 0)))
        return solve2(f'{st} {cpu}', eqs)
    c['collector_batch'], c['collector_row'] = runs(
        'clickhouse', 'collector_cpu_s', 'batches_acked', 'rows_received', c['collector_idle'])
    c['clickhouse_commit'], c['clickhouse_row'] = runs(
        'clickhouse', 'store_server_cpu_s', 'store_commits', 'rows_written', c['clickhouse_idle'],
        ('calib', 'group'))
    c['sqlite_batch'], c['sqlite_row'] = runs(
        'sqlite', 'collector_cpu_s', 'batches_acked', 'rows_received', 0)
    for st in ('sqlite', 'clickhouse'):
        c[st + '_wire_row'] = (inp.num(f'calib_{st}_bytes_posted')
                               / inp.num(f'calib_{st}_rows_received', positive=True))
    return c


def model(inp, a, out):
    w = a['workload']
    pts = workload_points(inp, w)
    ra, rb = power_fit([(x, r) for x, r, _ in pts])
    ba, bb = power_fit([(x, y) for x, _, y in pts])
    cost = costs(inp)
    ch_bpr = inp.num('clickhouse_store_bytes') / inp.num('clickhouse_store_rows', positive=True)
    sq_bpr = inp.num('sqlite_store_bytes') / inp.num('sqlite_store_rows', positive=True)
    image = inp.num('clickhouse_images_bytes') / inp.num('clickhouse_images', positive=True)

    nodes, iv, procs = a['nodes'], a['interval_s'], a['processes_per_node']
    samples_node_s = a['cores_per_node'] * a['busy_fraction'] * a['branches_per_busy_core_s'] \
        / a['period']
    s_proc = samples_node_s * iv / procs
    rows_proc = ra * s_proc ** rb
    bytes_proc = ba * s_proc ** bb
    node_rows_s = procs * rows_proc / iv
    node_bytes_s = procs * bytes_proc / iv
    out('workload', w)
    out('rows_per_batch_fit_exponent', rb)
    out('samples_per_node_s', samples_node_s)
    out('samples_per_process_batch', s_proc)
    lo, hi = min(x for x, _, _ in pts), max(x for x, _, _ in pts)
    out('samples_per_process_batch_measured_range', f'{lo:.0f}-{hi:.0f}')
    out('rows_per_process_batch', rows_proc)
    out('wire_bytes_per_process_batch', bytes_proc)
    out('wire_bytes_per_row', bytes_proc / rows_proc)
    out('per_node_wire_bytes_per_s', node_bytes_s)
    out('per_node_rows_per_s', node_rows_s)
    out('collector_cpu_us_per_batch', cost['collector_batch'] * 1e6)
    out('collector_cpu_us_per_row', cost['collector_row'] * 1e6)
    # edges come with their ranges and IPs in real batches: the CPU per edge carries theirs
    out('collector_cpu_s_per_million_edge_updates',
        cost['collector_row'] * 1e6 * inp.num('calib_clickhouse_rows_received', positive=True)
        / inp.num('calib_clickhouse_rows_received_edges', positive=True))
    out('clickhouse_cpu_ms_per_commit', cost['clickhouse_commit'] * 1e3)
    out('clickhouse_cpu_us_per_row', cost['clickhouse_row'] * 1e6)
    out('sqlite_collector_cpu_us_per_row', cost['sqlite_row'] * 1e6)
    out('clickhouse_disk_bytes_per_row', ch_bpr)
    out('sqlite_disk_bytes_per_row', sq_bpr)
    out('image_bytes_per_build_id', image)

    # the fleet on ClickHouse: a real agent's batch holds each (binary, labels) once, so every
    # row received is a row written (rows are kept per batch, not summed per bucket)
    rows_s = nodes * node_rows_s
    batches_s = nodes / iv
    out('fleet_batches_per_s', batches_s)
    out('fleet_wire_bytes_per_s', nodes * node_bytes_s)
    out('fleet_wire_mbit_per_s', nodes * node_bytes_s * 8 / 1e6)
    out('fleet_rows_per_s', rows_s)
    coll_cores = batches_s * cost['collector_batch'] + rows_s * cost['collector_row']
    collectors = max(1, math.ceil(coll_cores / (a['collector_cores'] * a['core_budget'])))
    coll_cores += collectors * cost['collector_idle']
    out('fleet_collector_cores', coll_cores)
    out('fleet_collectors', collectors)
    shard_budget = a['shard_cores'] * a['core_budget']
    # a commit inserts into every shard (Distributed tables split it by build-id): the
    # per-commit cost is paid on each shard, the per-row cost once. Commits may take at most
    # half a shard's budget: the collectors must then merge at least this many batches per
    # commit (group commit does under load; --commit-ms forces it)
    bpc = max(a['batches_per_commit'],
              batches_s * cost['clickhouse_commit'] / (shard_budget / 2))
    commits_s = batches_s / bpc
    row_cores = rows_s * cost['clickhouse_row']
    commit_cores = commits_s * cost['clickhouse_commit']
    out('fleet_clickhouse_batches_per_commit', bpc)
    out('fleet_clickhouse_commits_per_s', commits_s)
    out('fleet_clickhouse_row_cores', row_cores)
    out('fleet_clickhouse_commit_cores_per_shard', commit_cores)
    shards = max(1, math.ceil(row_cores / (shard_budget - commit_cores)))
    out('fleet_clickhouse_shards', shards)
    out('fleet_clickhouse_cores', row_cores + commit_cores * shards)
    day = rows_s * 86400 * ch_bpr
    out('fleet_clickhouse_disk_bytes_per_day', day)
    out('fleet_clickhouse_disk_bytes_per_retention', day * a['retention_days'])
    out('fleet_images_bytes', a['build_ids'] * image)
    # SQLite sums a minute's batches per key: a minute's distinct rows of 60/iv batches
    per_min = 60 / iv
    sq_rows_min = procs * ra * (per_min * s_proc) ** rb
    out('fleet_sqlite_disk_bytes_per_day', nodes * sq_rows_min * 1440 * sq_bpr)
    # what summing a bucket's batches per key (a rollup) would keep of ClickHouse's rows
    out('rollup_rows_factor_per_minute', per_min ** (rb - 1))
    out('rollup_rows_factor_per_hour', (3600 / iv) ** (rb - 1))

    # limits, in nodes, as the fleet grows with everything else as assumed
    limits = {}
    limits['sqlite_single_writer'] = a['sqlite_cores'] / (
        cost['sqlite_batch'] / iv + node_rows_s * cost['sqlite_row'])
    limits['clickhouse_commits_on_every_shard'] = (
        shard_budget / cost['clickhouse_commit'] * a['batches_per_commit'] * iv
        if cost['clickhouse_commit'] else float('inf'))
    # sharded by build-id: one fleet-wide binary's rows all land on one shard
    shard_rows_s = shard_budget / cost['clickhouse_row'] if cost['clickhouse_row'] else float('inf')
    out('clickhouse_shard_rows_per_s', shard_rows_s)
    limits['hot_build_id_on_one_shard'] = shard_rows_s / (a['hot_binary_share'] * node_rows_s)
    limits['nodes_read_each_second'] = 10000 * 1000 / a['nodes_read_ms_per_10k']
    for k, v in limits.items():
        out(f'limit_nodes_{k}', v)
    # labels cardinality: the same samples split over more label sets make more rows
    out('rows_factor_at_max_label_sets', (a['agent_label_sets_max'] / procs) ** (1 - rb))
    out('hot_build_id_rows_per_hour_read', nodes * a['hot_binary_share'] * node_rows_s * 3600)
    ch_limits = {k: v for k, v in limits.items() if k != 'sqlite_single_writer'}
    first = min(ch_limits, key=ch_limits.get)
    out('first_limit_clickhouse', first)
    out('first_limit_clickhouse_nodes', ch_limits[first])
    return cost


def validate(inp, cost, out):
    """The per-agent figures against each load run (val*): batches, rows, bytes and CPU
    predicted for its agents, interval and seconds, from the replays (the load generator's
    templates) and the calibration runs' costs."""
    tpl = {}
    for p in POOLS:
        k = f'wire_{p}_s{TEMPLATE_SAMPLES}_'
        nb = inp.num(k + 'batches', positive=True)
        tpl[p] = (sum(inp.num(k + x) for x in ('edges', 'ranges', 'ips')) / nb,
                  inp.num(k + 'bytes') / nb)
    tags = sorted({m.group(1) for k in inp.values
                   for m in [re.match(r'^(val\d+)_interval_ms$', k)] if m},
                  key=lambda t: int(t[3:]))
    for tag in tags:
        iv = inp.num(f'{tag}_interval_ms', positive=True) / 1000
        per_batch = inp.num(f'{tag}_per_batch', positive=True)
        load_s = inp.num(f'{tag}_load_s', positive=True)
        for st in ('sqlite', 'clickhouse'):
            p = f'{tag}_{st}_'
            if not inp.has(p + 'agents'):
                continue
            agents = int(inp.num(p + 'agents', positive=True))
            # load_gen's agent i plays pool i % 2
            n0, n1 = (agents + 1) // 2, agents // 2
            rows_delta = (n0 * tpl[POOLS[0]][0] + n1 * tpl[POOLS[1]][0]) / agents
            bytes_delta = (n0 * tpl[POOLS[0]][1] + n1 * tpl[POOLS[1]][1]) / agents
            batches = agents * load_s / iv
            rows = batches * per_batch * rows_delta
            seconds = inp.num(p + 'seconds', positive=True)
            ratio_line(out, p + 'batches', batches, inp.num(p + 'batches_acked'))
            ratio_line(out, p + 'rows_received', rows, inp.num(p + 'rows_received'))
            ratio_line(out, p + 'wire_bytes', rows * cost[st + '_wire_row'],
                       inp.num(p + 'bytes_posted'))
            ratio_line(out, p + 'wire_bytes_additive', batches * per_batch * bytes_delta,
                       inp.num(p + 'bytes_posted'))
            if st == 'sqlite':
                cpu = batches * cost['sqlite_batch'] + rows * cost['sqlite_row']
            else:
                cpu = cost['collector_idle'] * seconds + batches * cost['collector_batch'] \
                    + rows * cost['collector_row']
            ratio_line(out, p + 'collector_cpu_s', cpu, inp.num(p + 'collector_cpu_s'))
            if st == 'clickhouse':
                # from the run's own commits and rows written: how the load generator's
                # batches merge is its own, not the model's
                ratio_line(out, p + 'server_cpu_s',
                           cost['clickhouse_idle'] * seconds
                           + inp.num(p + 'store_commits') * cost['clickhouse_commit']
                           + inp.num(p + 'rows_written') * cost['clickhouse_row'],
                           inp.num(p + 'store_server_cpu_s'))


def fmt(v):
    if isinstance(v, str):
        return v
    if isinstance(v, int) or (abs(v) >= 100 and float(v).is_integer()):
        return str(int(v))
    if abs(v) >= 100:
        return f'{v:.0f}'
    return f'{v:.4g}'


def main(argv):
    if len(argv) < 2 or argv[1] in ('-h', '--help'):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path, a = argv[1], dict(ASSUMPTIONS)
    rest = argv[2:]
    try:
        while rest:
            if rest[0] != '--set' or len(rest) < 2 or '=' not in rest[1]:
                raise InputError(f'{rest[0]!r}: expected --set NAME=VALUE')
            name, v = rest[1].split('=', 1)
            if name not in a:
                raise InputError(f'--set {name}: no such assumption (one of {", ".join(a)})')
            if name != 'workload':
                try:
                    v = float(v)
                except ValueError:
                    v = None
                if v is None or not math.isfinite(v) or v <= 0:
                    raise InputError(f'--set {rest[1]}: the value must be a positive number')
            a[name] = v
            rest = rest[2:]
        inp = Inputs(read_inputs(path))
        lines = []

        def out(name, v):
            lines.append(f'{name}: {fmt(v)}')
        for k, v in a.items():
            out('assume_' + k, v)
        cost = model(inp, a, out)
        validate(inp, cost, out)
    except InputError as e:
        print(f'model.py: {path}: {e}', file=sys.stderr)
        return 2
    print('\n'.join(lines))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
