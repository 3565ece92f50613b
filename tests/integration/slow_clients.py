#!/usr/bin/env python3
"""Hostile clients for the collector's connection tests: opens connections
to 127.0.0.1:PORT from the given loopback source addresses (ADDRxN: N from
ADDR) and holds them, one of three ways:

  slow_clients.py PORT STATUS INTERVAL ADDRxN...
      slowloris: a request line, then one header line per connection every
      INTERVAL seconds, never ending the header
  slow_clients.py --body N [--path P] [--token-file F] PORT STATUS 0 ADDRxN...
      held bodies: POST P (default /v1/ingest) declaring N + 1 bytes of
      body, N sent as fast as the server reads them, the last never (with
      the bearer token when given)
  slow_clients.py --token-file F [--path P] PORT STATUS INTERVAL ADDRxN...
      token holders: GET P (default /healthz) with the bearer token, the
      answer read, the same request again every INTERVAL seconds on the
      same connection (keep-alive)

--reconnect S opens a connection the server closed again S seconds later.
Writes STATUS (rewritten atomically, at most every 0.1 s) as "key value"
lines: connected, open, closed (by the server), reconnected, answered
(answers read), longest (seconds a connection the server closed had lived),
status_CODE (answers by HTTP status), sent_mib (body bytes sent), and per
source address open_ADDR and closed_ADDR. Runs until killed."""
import argparse
import os
import re
import selectors
import socket
import time

STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d\d\d) ")


class Conn:
    def __init__(self, sock, addr):
        self.sock, self.addr = sock, addr
        self.born = time.monotonic()
        self.out = memoryview(b"")
        self.tail = b""  # the last bytes read, for a status line cut in two


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--body", type=int, default=0)
    ap.add_argument("--path")
    ap.add_argument("--token-file")
    ap.add_argument("--reconnect", type=float, default=-1)
    ap.add_argument("port", type=int)
    ap.add_argument("status")
    ap.add_argument("interval", type=float)
    ap.add_argument("plan", nargs="+")
    a = ap.parse_args()
    plan = [(spec.split("x")[0], int(spec.split("x")[1])) for spec in a.plan]
    auth = ""
    if a.token_file:
        with open(a.token_file) as f:
            auth = f"Authorization: Bearer {f.read().strip()}\r\n"
    if a.body:
        head = (f"POST {a.path or '/v1/ingest'} HTTP/1.1\r\nHost: x\r\n{auth}"
                "Content-Type: application/x-protobuf\r\n"
                f"Content-Length: {a.body + 1}\r\n\r\n").encode()
        body = memoryview(head + bytes(a.body))
    elif a.token_file:
        body = memoryview((f"GET {a.path or '/healthz'} HTTP/1.1\r\nHost: x\r\n"
                           f"{auth}\r\n").encode())
    else:
        body = memoryview(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    sel = selectors.DefaultSelector()
    conns = set()
    by_addr = {addr: [0, 0] for addr, _ in plan}
    stats = {"connected": 0, "closed": 0, "reconnected": 0, "answered": 0, "longest": 0.0}
    codes = {}
    sent = [0]
    reopen = []  # (when, addr)

    def watch(c):
        ev = selectors.EVENT_READ | (selectors.EVENT_WRITE if len(c.out) else 0)
        sel.modify(c.sock, ev, c)

    def open_one(addr):
        s = socket.socket()
        s.bind((addr, 0))
        try:
            s.connect(("127.0.0.1", a.port))
        except OSError:
            stats["closed"] += 1
            by_addr[addr][1] += 1
            s.close()
            if a.reconnect >= 0:
                reopen.append((time.monotonic() + a.reconnect, addr))
            return
        s.setblocking(False)
        c = Conn(s, addr)
        c.out = body
        sel.register(s, selectors.EVENT_READ, c)
        watch(c)
        conns.add(c)
        stats["connected"] += 1
        by_addr[addr][0] += 1

    def close(c):
        sel.unregister(c.sock)
        conns.discard(c)
        stats["longest"] = max(stats["longest"], time.monotonic() - c.born)
        stats["closed"] += 1
        by_addr[c.addr][0] -= 1
        by_addr[c.addr][1] += 1
        c.sock.close()
        if a.reconnect >= 0:
            reopen.append((time.monotonic() + a.reconnect, c.addr))

    def write_status():
        lines = [f"{k} {v}" for k, v in stats.items()]
        lines.append(f"open {len(conns)}")
        lines.append(f"sent_mib {sent[0] >> 20}")
        lines += [f"status_{k} {v}" for k, v in sorted(codes.items())]
        for addr, (o, c) in by_addr.items():
            lines += [f"open_{addr} {o}", f"closed_{addr} {c}"]
        with open(a.status + ".tmp", "w") as f:
            f.write("\n".join(lines) + "\n")
        os.rename(a.status + ".tmp", a.status)

    for addr, n in plan:
        for _ in range(n):
            open_one(addr)
    next_line = time.monotonic() + a.interval
    written = 0.0
    while True:
        now = time.monotonic()
        if now - written >= 0.1:
            write_status()
            written = now
        timeout = 0.1
        if a.interval > 0:
            timeout = min(timeout, max(0.0, next_line - now))
        for key, ev in sel.select(timeout):
            c = key.data
            if ev & selectors.EVENT_WRITE and len(c.out):
                try:
                    n = c.sock.send(c.out[:1 << 20])
                except OSError:
                    n = 0
                c.out = c.out[n:]
                sent[0] += n
                if not len(c.out):
                    watch(c)
            if ev & selectors.EVENT_READ:
                try:
                    data = c.sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    close(c)
                    continue
                seen = c.tail + data
                for m in STATUS_LINE.finditer(seen):
                    if m.end() > len(c.tail):  # not one counted before
                        code = m.group(1).decode()
                        codes[code] = codes.get(code, 0) + 1
                        stats["answered"] += 1
                c.tail = seen[-16:]
        now = time.monotonic()
        while reopen and reopen[0][0] <= now:
            _, addr = reopen.pop(0)
            stats["reconnected"] += 1
            open_one(addr)
        if a.interval > 0 and now >= next_line:
            next_line += a.interval
            for c in list(conns):
                if a.token_file:
                    c.out = body  # the same request again
                    watch(c)
                elif not a.body:
                    try:
                        c.sock.send(b"X-Slow: 1\r\n")
                    except OSError:
                        close(c)


if __name__ == "__main__":
    main()
