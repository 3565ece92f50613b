#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One batch as an agent that runs on-demand sessions sends it (capability
"profile-session", no counts), POSTed to URL/v1/ingest: zstd-compressed
edgeprof.v1.Batch (proto/ingest.proto), encoded by hand so the tests need no
protobuf module. Prints the answer: "status CODE", "bytes N" (the
IngestResponse's size) and "session ID" for each session it hands this
agent.

  session_agent.py URL --node NODE [--agent-id ID] [--seq N] [--token-file F]
"""
import argparse
import subprocess
import sys
import time
import urllib.error
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


def fields(buf):
    """(number, value) of each field of a message; value: int or bytes"""
    i = 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, kind = key >> 3, key & 7
        if kind == 0:
            v, i = read_varint(buf, i)
        elif kind == 2:
            n, i = read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif kind == 1:
            v, i = buf[i:i + 8], i + 8
        elif kind == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % kind)
        yield num, v


def read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--node", required=True)
    ap.add_argument("--agent-id")
    ap.add_argument("--seq", type=int, default=1)
    ap.add_argument("--token-file")
    a = ap.parse_args()
    now = time.time_ns()
    agent = field_bytes(1, a.node) + field_bytes(2, a.agent_id or "fake-" + a.node) + \
        field_bytes(3, "edgeprof-test")
    plain = b"".join([
        field_varint(1, 1), field_bytes(2, agent), field_varint(3, a.seq),
        field_varint(4, now - 10**9), field_varint(5, now),
        field_bytes(9, "profile-session"),
    ])
    # the zstd tool writes the frame's checksum, as the agent does
    body = subprocess.run(["zstd", "-q", "-c"], input=plain, check=True,
                          stdout=subprocess.PIPE).stdout
    req = urllib.request.Request(a.url.rstrip("/") + "/v1/ingest", data=body, method="POST")
    req.add_header("Content-Type", "application/x-protobuf")
    req.add_header("Content-Encoding", "zstd")
    if a.token_file:
        with open(a.token_file) as f:
            req.add_header("Authorization", "Bearer " + f.read().strip())
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            code, answer = r.status, r.read()
    except urllib.error.HTTPError as e:
        print("status %d" % e.code)
        print(e.read()[:300].decode(errors="replace"), file=sys.stderr)
        sys.exit(1)
    print("status %d" % code)
    print("bytes %d" % len(answer))
    for num, v in fields(answer):
        if num != 4:  # IngestResponse.instructions
            continue
        for inum, iv in fields(v):
            if inum == 1:  # Instruction.profile_session
                sid = dict((n, x) for n, x in fields(iv)).get(1, b"")
                print("session %s" % sid.decode())


if __name__ == "__main__":
    main()
