"""The capacity measurement's large-binary workload (bench/capacity/measure.sh records it
under the LBR emulator): an interpreter doing a service's everyday work (JSON in and out,
regular expressions, sorting, counting), so a batch covers the many functions of a big
program (libpython, libc) rather than the fixtures' small loops."""
import collections
import json
import random
import re

random.seed(1)
docs = [{"id": i, "name": "n%d" % i, "tags": [random.choice("abcdef") for _ in range(5)],
         "v": random.random()} for i in range(3000)]
text = json.dumps(docs)
for _ in range(3):
    d = json.loads(text)
    tags = collections.Counter(t for x in d for t in x["tags"])
    names = re.findall(r"n\d+7", text)
    d.sort(key=lambda x: x["v"])
