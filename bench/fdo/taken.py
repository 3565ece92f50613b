"""taken.py BINARY EXACT_JSON: the taken branches BINARY's own code ran, from the exact
counts `edgeprof record --emulate --exact-out EXACT_JSON` wrote of a run of it (libc's are
the same in every layout of a program, so they are left out, as bench/fdo/fdo.py does)."""
import json
import os
import sys

real = os.path.realpath(sys.argv[1])
for p in json.load(open(sys.argv[2]))['profiles']:
    if real in {os.path.realpath(x) for x in p.get('paths') or [p.get('path')]}:
        print(sum(e['count'] for e in p['branches'] if e['taken']))
        break
else:
    sys.exit('no profile of ' + real)
