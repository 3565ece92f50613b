#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Batches holding many label sets (issue 32, item 5: a cluster's pod churn),
POSTed to a collector's /v1/ingest as an agent sends them: zstd-compressed
edgeprof.v1.Batch protobuf (proto/ingest.proto), encoded here by hand so the
tests need no protobuf module.

  label_sets_gen.py URL --label-sets N [--per-batch K] [--binaries M]
                    [--agent-id ID] [--token-file F] [--edges E] [--ips I] [--prefix P]
                    [--base B] [--agents A] [--node NAME] [--dump DIR]
                    [--span MIN-MAX --concurrent C]

Label set i (0 <= i < N) is container "<P>-<i>" (i zero-padded to 64
characters, like a container id), pod "pod-<i>", namespace "ns-<i % 7>", cgroup
"/kubepods/<P>-<i>", process "proc-<i % 5>", on binary B + i % M (build-id
0xe0e0000000 + B + i % M as 40 hex digits): 1 sample each, E distinct edges
each (0 by default) and I sample IPs (--ips, 0).
Prints "batches: B" and "seconds: S" when done; exits 1 on any answer but 200.
--dump DIR writes the batches' bytes there instead of posting them.

--span MIN-MAX: pod churn over time instead of one bucket. Label set i lives
MIN to MAX consecutive minute buckets (its own length, spread evenly), the
next one starting a little later, so that about C (--concurrent, 3,000) are
alive in any minute: 1 M label sets of 30-60 minutes span ~10 days. Each
minute is one batch (split past --per-batch) whose window ends in that
minute, the last minute being now; label set i has 1 + i % 4 samples in each
of its minutes. Prints "samples: S", "rows: R" (label sets' minutes) and
"buckets: M" too.
"""
import argparse
import ctypes
import http.client
import os
import subprocess
import sys
import time
import urllib.parse
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


def delta(prefix, i, binaries, edges, base, ips=0, samples=1):
    m = i % binaries + base
    prof = [field_bytes(1, build_id(m)), field_bytes(2, "/usr/bin/app-%d" % m),
            field_bytes(3, "x86_64"), field_varint(4, samples)]
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


class Zstd:
    """libzstd through ctypes: one frame per batch, with the checksum and the
    content size the agent writes, without a process per batch"""

    def __init__(self):
        self.lib = ctypes.CDLL("libzstd.so.1")
        self.lib.ZSTD_createCCtx.restype = ctypes.c_void_p
        self.lib.ZSTD_compressBound.restype = ctypes.c_size_t
        self.lib.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
        self.lib.ZSTD_CCtx_setParameter.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        self.lib.ZSTD_compress2.restype = ctypes.c_size_t
        self.lib.ZSTD_compress2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                            ctypes.c_char_p, ctypes.c_size_t]
        self.lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
        self.cctx = self.lib.ZSTD_createCCtx()
        self.lib.ZSTD_CCtx_setParameter(self.cctx, 100, 3)  # ZSTD_c_compressionLevel
        self.lib.ZSTD_CCtx_setParameter(self.cctx, 201, 1)  # ZSTD_c_checksumFlag

    def compress(self, data):
        cap = self.lib.ZSTD_compressBound(len(data))
        out = ctypes.create_string_buffer(cap)
        n = self.lib.ZSTD_compress2(self.cctx, out, cap, data, len(data))
        if self.lib.ZSTD_isError(n):
            raise RuntimeError("zstd failed")
        return out.raw[:n]


class Poster:
    """POSTs batches over one kept-alive connection"""

    def __init__(self, url, token):
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.token = u.hostname, u.port or 80, token
        self.conn = None

    def post(self, seq, body):
        headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "zstd"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        for attempt in range(3):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=300)
                self.conn.request("POST", "/v1/ingest", body, headers)
                r = self.conn.getresponse()
                answer = r.read()
            except (OSError, http.client.HTTPException):
                self.conn = None
                if attempt == 2:
                    raise
                continue
            if r.status != 200:
                print("batch %d: HTTP %d: %s" % (seq, r.status, answer[:300].decode(
                    errors="replace")), file=sys.stderr)
                sys.exit(1)
            return


def churn(a, token):
    """--span: label sets that live MIN-MAX minutes each, C alive at once"""
    lo, hi = (int(x) for x in a.span.split("-"))
    n = a.label_sets
    length = [lo + (i * 7919) % (hi - lo + 1) for i in range(n)]
    minutes = max(1, sum(length) // a.concurrent)
    start = [i * minutes // n for i in range(n)]
    last = max(start[i] + length[i] for i in range(n))
    now_min = int(time.time()) // 60
    zstd, poster = Zstd(), Poster(a.url, token)
    key8 = varint((8 << 3) | 2)
    alive, cache, nxt = [], {}, 0
    seq = samples = rows = 0
    t0 = time.monotonic()
    for m in range(last):
        while nxt < n and start[nxt] <= m:
            d = delta(a.prefix, nxt, a.binaries, a.edges, a.base, a.ips, 1 + nxt % 4)
            cache[nxt] = key8 + varint(len(d)) + d
            alive.append(nxt)
            nxt += 1
        ended = [i for i in alive if start[i] + length[i] <= m]
        if ended:
            for i in ended:
                del cache[i]
            alive = [i for i in alive if start[i] + length[i] > m]
        end_ns = ((now_min - last + 1 + m) * 60 + 30) * 10**9
        for first in range(0, len(alive), a.per_batch):
            part = alive[first:first + a.per_batch]
            seq += 1
            s = sum(1 + i % 4 for i in part)
            samples += s
            rows += len(part)
            agent = field_bytes(1, a.node) + field_bytes(2, a.agent_id) + field_bytes(3, "gen")
            head = b"".join([
                field_varint(1, 1), field_bytes(2, agent), field_varint(3, seq),
                field_varint(4, end_ns - 10 * 10**9), field_varint(5, end_ns),
                field_bytes(7, field_varint(1, s)),
            ])
            poster.post(seq, zstd.compress(head + b"".join(cache[i] for i in part)))
    print("batches: %d" % seq)
    print("samples: %d" % samples)
    print("rows: %d" % rows)
    print("buckets: %d" % last)
    print("seconds: %.2f" % (time.monotonic() - t0))


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
    ap.add_argument("--span", help="MIN-MAX: minute buckets each label set lives (pod churn)")
    ap.add_argument("--concurrent", type=int, default=3000,
                    help="with --span: label sets alive in any one minute")
    a = ap.parse_args()
    token = None
    if a.token_file:
        with open(a.token_file) as f:
            token = f.read().strip()
    if a.span:
        churn(a, token)
        return
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
