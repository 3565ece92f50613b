#!/usr/bin/env python3
"""Checks README.md and docs/**/*.md (for tests/integration/test_docs.sh).

  docs_check.py links ROOT     every relative link resolves: the file (or folder)
                               exists under ROOT and is not one git ignores (a
                               build output a clone lacks), and a #anchor names
                               a heading of its page as GitHub writes it
  docs_check.py history ROOT   no line tells the project's history ("session 4",
                               "(was 115 us)", "before issue 17's work", ...)
                               outside code: the pages say what is, each figure
                               with the command that reproduces it

Prints one line per problem, PATH:LINE: what; exits 1 when there is any.
"""
import os
import re
import subprocess
import sys

# What history reads like. Each pattern is narrow enough to leave the words'
# ordinary uses alone ("an on-demand session", "was refused", "before the
# libraries are mapped").
HISTORY = [
    (re.compile(r'\bsessions? [0-9]+\b', re.I), 'a work session named ("session N")'),
    (re.compile(r'[(;]\s*(?:was|were) [-~+]?[0-9][^);]*'), 'an old figure ("(was X)")'),
    (re.compile(r'\b(?:was|were) [-~+]?[0-9][^.;]*?\b(?:before|earlier|previously)\b'),
     'an old figure ("was X ... before")'),
    (re.compile(r'\b(?:before|after|since) (?:issue|session|commit) [0-9a-f]+', re.I),
     'a change dated by an issue, session or commit'),
    (re.compile(r"\bissue [0-9]+'s work\b|\bgoal of issue [0-9]+", re.I),
     "an issue's work or goal"),
    (re.compile(r'\b(?:since|before|until) [0-9a-f]{7,40}\b'), 'a change dated by a commit'),
    (re.compile(r'\b(?:none|[0-9][0-9,.]*) now\b'), 'then against now ("X now")'),
    (re.compile(r'\bused to be\b'), 'what used to be'),
]

LINK = re.compile(r'!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
REF = re.compile(r'^\s*\[[^\]]+\]:\s*(\S+)')
CODE_SPAN = re.compile(r'`+[^`]*`+')


def pages(root):
    out = [os.path.join(root, 'README.md')]
    for d, _, files in os.walk(os.path.join(root, 'docs')):
        out += [os.path.join(d, f) for f in sorted(files) if f.endswith('.md')]
    return [p for p in out if os.path.isfile(p)]


def lines_outside_code(path, cut_spans=True):
    """(number, text) of the lines outside fenced code blocks, code spans cut
    out unless cut_spans is false."""
    fence = None
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            m = re.match(r'\s*(```+|~~~+)', line)
            if m:
                if fence is None:
                    fence = m.group(1)[0]
                elif m.group(1)[0] == fence:
                    fence = None
                continue
            if fence is None:
                yield n, CODE_SPAN.sub('', line) if cut_spans else line


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped but - and _,
    spaces to -."""
    h = re.sub(r'[`*]', '', heading.strip()).lower()
    h = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', h)
    h = ''.join(c for c in h if c.isalnum() or c in ' -_')
    return h.replace(' ', '-')


def anchors(path):
    seen = {}
    out = set()
    for _, line in lines_outside_code(path, cut_spans=False):
        m = re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
        if not m:
            continue
        s = slug(m.group(1))
        k = seen.get(s, 0)
        seen[s] = k + 1
        out.add(s if k == 0 else '%s-%d' % (s, k))
    return out


def git_ignored(root, path):
    r = subprocess.run(['git', '-C', root, 'check-ignore', '-q', os.path.relpath(path, root)],
                       capture_output=True)
    return r.returncode == 0


def check_links(root):
    problems = []
    root = os.path.abspath(root)
    have_git = subprocess.run(['git', '-C', root, 'rev-parse'], capture_output=True).returncode == 0
    for page in pages(root):
        rel = os.path.relpath(page, root)
        for n, line in lines_outside_code(page):
            targets = LINK.findall(line)
            m = REF.match(line)
            if m:
                targets.append(m.group(1))
            for t in targets:
                if re.match(r'[a-z][a-z0-9+.-]*:', t, re.I):
                    continue  # http:, https:, mailto:
                path, _, anchor = t.partition('#')
                dest = page if not path else os.path.normpath(
                    os.path.join(os.path.dirname(page), path))
                where = '%s:%d: %s' % (rel, n, t)
                if not dest.startswith(root + os.sep) and dest != root:
                    problems.append(where + ': outside the repository')
                elif not os.path.exists(dest):
                    problems.append(where + ': no such file')
                elif have_git and git_ignored(root, dest):
                    problems.append(where + ': a file git ignores (a clone lacks it)')
                elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
                    problems.append(where + ': no heading #%s in %s' %
                                    (anchor, os.path.relpath(dest, root)))
    return problems


def check_history(root):
    problems = []
    for page in pages(root):
        rel = os.path.relpath(page, root)
        for n, line in lines_outside_code(page):
            for rx, what in HISTORY:
                m = rx.search(line)
                if m:
                    problems.append('%s:%d: %s: "%s"' % (rel, n, what, m.group(0)))
    return problems


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ('links', 'history'):
        sys.exit(__doc__)
    problems = (check_links if sys.argv[1] == 'links' else check_history)(sys.argv[2])
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == '__main__':
    main()
