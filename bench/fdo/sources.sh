#!/bin/bash
# bench/fdo/sources.sh SRC_DIR: the Debian 12 source packages of the benchmark's programs,
# unpacked under SRC_DIR (cached: nothing is fetched when they are there).
# apt-get source needs a deb-src entry: one is added beside each Debian deb entry that lacks
# one (same URIs, Suites, Components, Signed-By), which needs root, like `make deps`.
set -euo pipefail
src=$1
packages=(lua5.4 sqlite3 zstd)
have() { compgen -G "$src/$1" > /dev/null; }
if have 'lua5.4-*/src/lua.c' && have 'sqlite3-*/configure' && have 'libzstd-*/lib/zstd.h'; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "bench/fdo: the Debian sources are not under $src yet; fetching them needs root (apt-get)" >&2
	exit 1
fi

# deb822 files (Debian 12's default): copy each stanza of Types: deb whose URIs+Suites have no
# deb-src stanza yet, right after it, with Types: deb-src. Only Debian's own stanzas (those
# naming a bookworm suite): third-party repositories often publish no sources, and apt-get
# update would then fail on them.
for f in /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] || continue
	python3 - "$f" << 'PY'
import re, sys
path = sys.argv[1]
stanzas = [s for s in re.split(r'\n\s*\n', open(path).read().strip('\n')) if s.strip()]
def field(s, k):
    m = re.search(r'^' + k + r':\s*(.*)$', s, re.M)
    return m.group(1).split() if m else []
have_src = {(tuple(field(s, 'URIs')), tuple(field(s, 'Suites')))
            for s in stanzas if 'deb-src' in field(s, 'Types')}
out, added = [], 0
for s in stanzas:
    out.append(s)
    key = (tuple(field(s, 'URIs')), tuple(field(s, 'Suites')))
    if field(s, 'Types') == ['deb'] and key not in have_src and \
            any(x.startswith('bookworm') for x in key[1]):
        out.append(re.sub(r'^Types:.*$', 'Types: deb-src', s, count=1, flags=re.M))
        added += 1
if added:
    open(path, 'w').write('\n\n'.join(out) + '\n')
    print(f'bench/fdo: {path}: {added} deb-src entries added', file=sys.stderr)
PY
done
# one-line format (/etc/apt/sources.list): a deb-src line after each Debian deb line lacking one
if [ -f /etc/apt/sources.list ] && grep -q '^deb .*bookworm' /etc/apt/sources.list; then
	python3 - << 'PY'
lines = open('/etc/apt/sources.list').read().splitlines()
have = {l for l in lines if l.startswith('deb-src ')}
out = []
for l in lines:
    out.append(l)
    if l.startswith('deb ') and 'bookworm' in l and 'deb-src ' + l[4:] not in have:
        out.append('deb-src ' + l[4:])
if len(out) != len(lines):
    open('/etc/apt/sources.list', 'w').write('\n'.join(out) + '\n')
PY
fi

nice -n 19 apt-get update > /dev/null
mkdir -p "$src"
cd "$src"
# --download-only then dpkg-source: apt-get source as root warns about its sandbox user and
# would also need the package's signing keys for the .dsc check
nice -n 19 apt-get source --download-only "${packages[@]}" > /dev/null 2>&1
for d in *.dsc; do
	dir=$(dpkg-source --no-check -x "$d" 2>&1 | sed -n 's/.*extracting .* in \(.*\)$/\1/p')
	echo "bench/fdo: unpacked $d${dir:+ in $dir}" >&2
done
