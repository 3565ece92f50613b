#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One batch for the top-functions view (issue 36), POSTed to a collector's
/v1/ingest as an agent sends it (label_sets_gen.py's encoding): two binaries
with symbols, counted under two pods, so that a pod's hottest function is not
in its most sampled binary, and one pod's ranking differs from the other's.

  top_gen.py URL

Pod "shop/web-7d9f8-x2k4q" (container WEB_CID): binary A (most samples) with
a C++ function and a C one, binary B with the hottest function of the pod,
and branches and IPs in no symbol of A ([unknown]). Pod "shop/db-0"
(container DB_CID): binary A only, where its C function is the hottest.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import label_sets_gen as g  # noqa: E402

WEB_CID = "7d9f8c0ffee1" + "a" * 52
DB_CID = "0db0db0db0db" + "b" * 52
A, B = "a0" * 20, "b0" * 20


def function(name, start, size):
    return g.field_bytes(1, name) + g.field_varint(2, start) + g.field_varint(3, size)


def edge(frm, to, count):
    return g.field_varint(1, frm) + g.field_varint(2, to) + b"\x18\x01" + \
        g.field_varint(4, count) + g.field_varint(6, 1)


def ip(addr, count):
    return g.field_varint(1, addr) + g.field_varint(2, count)


def binary(build_id, path, samples, edges, ips):
    funcs = [function("_ZN4shop6Parser5parseEv", 0x1000, 0x100),
             function("checksum", 0x1100, 0x100)] if build_id == A else \
        [function("_ZN4shop5Cache6lookupEm", 0x2000, 0x80), function("idle", 0x2080, 0x80)]
    prof = [g.field_bytes(1, build_id), g.field_bytes(2, path), g.field_bytes(3, "x86_64"),
            g.field_varint(4, samples)]
    prof += [g.field_bytes(5, edge(*e)) for e in edges]
    prof += [g.field_bytes(7, ip(*i)) for i in ips]
    prof += [g.field_bytes(8, f) for f in funcs]
    return b"".join(prof)


def labels(cid, pod):
    return b"".join([g.field_bytes(1, cid), g.field_bytes(2, pod), g.field_bytes(3, "shop"),
                     g.field_bytes(4, "/kubepods/" + cid), g.field_bytes(5, "app")])


def main():
    url = sys.argv[1]
    web = labels(WEB_CID, "shop/web-7d9f8-x2k4q")
    db = labels(DB_CID, "shop/db-0")
    deltas = [
        # web, binary A: parse 300 + 50 executions, checksum 120, 40 in no symbol
        (binary(A, "/usr/bin/shop-api", 90,
                [(0x1010, 0x1040, 300), (0x1050, 0x1010, 50), (0x1110, 0x1180, 120),
                 (0x3010, 0x3000, 40)],
                [(0x1020, 30), (0x1120, 25), (0x3008, 20)]), web),
        # web, binary B: lookup 500, idle 5: the pod's hottest, in its colder binary
        (binary(B, "/usr/lib/libcache.so", 40, [(0x2010, 0x2030, 500), (0x2090, 0x20a0, 5)],
                [(0x2020, 12), (0x2090, 3)]), web),
        # db, binary A: checksum 2000, the hottest of all without a filter
        (binary(A, "/usr/bin/shop-api", 60, [(0x1110, 0x1180, 2000)], [(0x1120, 50)]), db),
    ]
    body = g.batch("top-gen", 1, [g.field_bytes(1, b) + g.field_bytes(2, lab)
                                  for b, lab in deltas], 190)
    g.Poster(url, None).post(1, g.Zstd().compress(body))
    print("batches: 1")


if __name__ == "__main__":
    main()
