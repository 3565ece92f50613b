#!/usr/bin/env python3
"""Checks the source layout rules of docs/architecture.md.

Modules are the folders that hold sources (agent/decode, common/profile, cli, ...).
Rules: top-level folders depend downward only (cli -> collector, agent -> common;
collector and agent never on each other); no cycle between modules; an internal
header (*_internal.h) is included from its own module only; includes are written
from the repository root; every CLI file is at most 300 lines; no function
(product or bench/) is longer than 120 lines. Prints one line per violation, exits 1 when any.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else '.')
PRODUCT = ['common', 'agent', 'collector', 'cli', 'bpf']
# which top-level folders a top-level folder may include from
ALLOWED = {
    'common': {'common'},
    'bpf': {'bpf'},
    'agent': {'agent', 'common', 'bpf'},
    'collector': {'collector', 'common'},
    'cli': {'cli', 'agent', 'collector', 'common', 'bpf'},
    'tests': set(PRODUCT) | {'tests'},
    'bench': set(PRODUCT) | {'bench'},
}
GENERATED = re.compile(r'(\.pb-c\.h|\.skel\.h|^vmlinux\.h)$')
MAX_CLI_LINES = 300
MAX_FUNCTION_LINES = 120
problems = []


def sources(top):
    for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
        for f in sorted(files):
            if f.endswith(('.c', '.h')):
                yield os.path.relpath(os.path.join(dirpath, f), ROOT)


def module_of(path):
    return os.path.dirname(path)


def function_lengths(path):
    """(name, first line, lines) of each top-level function body."""
    depth, start, name, out = 0, None, None, []
    with open(os.path.join(ROOT, path), errors='replace') as fh:
        lines = fh.read().split('\n')
    in_comment = False
    for i, line in enumerate(lines):
        code = re.sub(r'"([^"\\]|\\.)*"', '""', line)
        code = re.sub(r"'([^'\\]|\\.)*'", "''", code)
        if in_comment:
            if '*/' not in code:
                continue
            code, in_comment = code.split('*/', 1)[1], False
        code = re.sub(r'/\*.*?\*/', '', code).split('//')[0]
        if '/*' in code:
            code, in_comment = code.split('/*')[0], True
        if depth == 0 and code.startswith('{'):
            j = i - 1
            while j >= 0 and '(' not in lines[j]:
                j -= 1
            m = re.search(r'(\w+)\s*\(', lines[j]) if j >= 0 else None
            name, start = (m.group(1) if m else '?'), max(j, 0)
        depth += code.count('{') - code.count('}')
        if depth == 0 and start is not None and '}' in code:
            out.append((name, start + 1, i - start + 1))
            start = None
    return out


edges = {}
for top in list(ALLOWED):
    for path in sources(top):
        if path.startswith('tests/workloads') or path.startswith('tests/bpf'):
            continue
        with open(os.path.join(ROOT, path), errors='replace') as fh:
            text = fh.read()
        for n, m in enumerate(re.finditer(r'^\s*#\s*include\s+"([^"]+)"', text, re.M)):
            inc = m.group(1)
            if GENERATED.search(inc) or (top == 'tests' and '/' not in inc):
                continue
            if top == 'bpf' and '/' not in inc:
                continue  # the BPF object is built with -Ibpf, apart from the rest
            if not os.path.exists(os.path.join(ROOT, inc)):
                problems.append(f'{path}: #include "{inc}" is not a path from the repository root')
                continue
            inc_top = inc.split('/')[0]
            if inc_top not in ALLOWED[top]:
                problems.append(f'{path}: {top}/ must not include {inc} ({inc_top}/ is not below {top}/)')
            if inc.endswith('_internal.h') and module_of(inc) != module_of(path):
                problems.append(f'{path}: includes {inc}, internal to {module_of(inc)}/')
            if top in PRODUCT and module_of(inc) != module_of(path):
                edges.setdefault(module_of(path), set()).add(module_of(inc))

# cycles between modules (folders), depth-first
state, stack = {}, []


def visit(mod):
    state[mod] = 1
    stack.append(mod)
    for nxt in sorted(edges.get(mod, ())):
        if state.get(nxt) == 1:
            cycle = stack[stack.index(nxt):] + [nxt]
            problems.append('module cycle: ' + ' -> '.join(cycle))
        elif nxt not in state:
            visit(nxt)
    stack.pop()
    state[mod] = 2


for mod in sorted(edges):
    if mod not in state:
        visit(mod)

# the benches are code we keep too: the same bound on a function's length
for top in PRODUCT + ['bench']:
    for path in sources(top):
        if not path.endswith('.c'):
            continue
        if top == 'cli':
            with open(os.path.join(ROOT, path)) as fh:
                n = sum(1 for _ in fh)
            if n > MAX_CLI_LINES:
                problems.append(f'{path}: {n} lines; a CLI file parses options and wires modules '
                                f'(at most {MAX_CLI_LINES})')
        for name, line, n in function_lengths(path):
            if n > MAX_FUNCTION_LINES:
                problems.append(f'{path}:{line}: {name} is {n} lines (at most {MAX_FUNCTION_LINES})')

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
