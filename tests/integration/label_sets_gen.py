#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Batches holding many label sets (issue 32, item 5: a cluster's pod churn),
POSTed to a collector's /v1/ingest as an agent sends them: zstd-compressed
edgeprof.v1.Batch protobuf (proto/ingest.proto), encoded here by hand so the
tests need no protobuf module.

  label_sets_gen.py URL --label-sets N [--per-batch K] [--binaries M]
                    [--agent-id ID] [--token-file F] [--edges E] [--ips I] [--prefix P]
                    [--base B] [--agents A] [--node NAME] [--dump DIR]

Label set i (0 <= i < N) is container "<P>-<i>" (i zero-padded to 64
characters, like a container id), pod "pod-<i>", namespace "ns-<i % 7>", cgroup
"/kubepods/<P>-<i>", process "proc-<i % 5>", on binary B + i % M (build-id
0xe0e0000000 + B + i % M as 40 hex digits): 1 sample each, E distinct edges
each (0 by default) and I sample IPs (--ips, 0).
Prints "batches: B" and "seconds: S" when done; exits 1 on any answer but 200.
--dump DIR writes the batches' bytes there instead of posting them.
"""
import argparse
import os
import subprocess
import sys
import time
import urllib.request


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(num, n):
    return varint(num << 3) + varint(n)


def field_bytes(num, b):
    if isinstance(b, str):
        b = b.encode()
    return varint((num << 3) | 2) + varint(len(b)) + b


def build_id(m):
    return "%040x" % (0xE0E0000000 + m)


def label_set(prefix, i):
    cid = "%s-%0*d" % (prefix, 63 - len(prefix), i)
    return b"".join([
        field_bytes(1, cid),
        field_bytes(2, "pod-%d" % i),
        field_bytes(3, "ns-%d" % (i % 7)),
        field_bytes(4, "/kubepods/%s-%d" % (prefix, i)),
        field_bytes(5, "proc-%d" % (i % 5)),
    ])


def ip_fields(n):
    """n sample IPs of count 1"""
    key7 = varint((7 << 3) | 2)
    return b"".join(key7 + varint(len(f)) + f
                    for f in (field_varint(1, 0x401000 + e) + b"\x10\x01" for e in range(n)))


def delta(prefix, i, binaries, edges, base, ips=0):
    m = i % binaries + base
    prof = [field_bytes(1, build_id(m)), field_bytes(2, "/usr/bin/app-%d" % m),
            field_bytes(3, "x86_64"), field_varint(4, 1)]
    prof.append(edge_fields(edges))
    prof.append(ip_fields(ips))
    return field_bytes(1, b"".join(prof)) + field_bytes(2, label_set(prefix, i))


_edges = {}


def edge_fields(n):
    """n distinct taken edges of count 1, encoded once per n"""
    if n not in _edges:
        key5 = varint((5 << 3) | 2)
        out = bytearray()
        for e in range(n):
            # from, to, taken, count
            edge = field_varint(1, 0x401000 + 16 * e) + field_varint(2, 0x402000 + 16 * e) + \
                b"\x18\x01\x20\x01"
            out += key5 + varint(len(edge)) + edge
        _edges[n] = bytes(out)
    return _edges[n]


def batch(agent_id, seq, deltas, samples, node="gen-node"):
    now = time.time_ns()
    agent = field_bytes(1, node) + field_bytes(2, agent_id) + field_bytes(3, "gen")
    head = b"".join([
        field_varint(1, 1), field_bytes(2, agent), field_varint(3, seq),
        field_varint(4, now - 10 * 10**9), field_varint(5, now),
        field_bytes(7, field_varint(1, samples)),
    ])
    return head + b"".join(field_bytes(8, d) for d in deltas)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--label-sets", type=int, required=True)
    ap.add_argument("--per-batch", type=int, default=10000)
    ap.add_argument("--binaries", type=int, default=1)
    ap.add_argument("--base", type=int, default=0)
    ap.add_argument("--edges", type=int, default=0)
    ap.add_argument("--ips", type=int, default=0)
    ap.add_argument("--agent-id", default="label-sets-gen-%d" % os.getpid())
    ap.add_argument("--prefix", default="c")
    ap.add_argument("--token-file")
    ap.add_argument("--dump")
    ap.add_argument("--node", default="gen-node")
    ap.add_argument("--agents", type=int, default=1,
                    help="the same batches from A agents (ID-0, ID-1, ... on NAME-0, NAME-1, ...)")
    a = ap.parse_args()
    token = None
    if a.token_file:
        with open(a.token_file) as f:
            token = f.read().strip()
    t0 = time.monotonic()
    seq = 0
    work = [(agent, first) for agent in range(a.agents)
            for first in range(0, a.label_sets, a.per_batch)]
    for agent, first in work:
        n = min(a.per_batch, a.label_sets - first)
        seq += 1
        agent_id = a.agent_id if a.agents == 1 else "%s-%d" % (a.agent_id, agent)
        node = a.node if a.agents == 1 else "%s-%d" % (a.node, agent)
        plain = batch(agent_id, seq,
                      [delta(a.prefix, i, a.binaries, a.edges, a.base, a.ips)
                       for i in range(first, first + n)], n, node)
        # the zstd tool writes the frame's checksum and content size, as the agent does
        body = subprocess.run(["zstd", "-q", "-c", "-3"], input=plain, check=True,
                              stdout=subprocess.PIPE).stdout
        if a.dump:
            with open(os.path.join(a.dump, "batch-%06d.zst" % seq), "wb") as f:
                f.write(body)
            continue
        req = urllib.request.Request(a.url.rstrip("/") + "/v1/ingest", data=body, method="POST")
        req.add_header("Content-Type", "application/x-protobuf")
        req.add_header("Content-Encoding", "zstd")
        if token:
            req.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(req, timeout=300) as r:
                r.read()
        except urllib.error.HTTPError as e:
            print("batch %d: HTTP %d: %s" % (seq, e.code, e.read()[:300].decode(errors="replace")),
                  file=sys.stderr)
            sys.exit(1)
    print("batches: %d" % seq)
    print("seconds: %.2f" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
