#!/usr/bin/env python3
"""Slowloris clients for test_slow_clients.sh: opens connections to
127.0.0.1:PORT from the given loopback source addresses, sends a request
line, then one header line per connection every INTERVAL seconds and never
ends the header. Writes STATUS (rewritten atomically) as "key value" lines:
connected, open, closed (by the server), longest (seconds a connection the
server closed had lived), and per source address open_ADDR and closed_ADDR.
Runs until killed."""
import os
import selectors
import socket
import sys
import time


def main():
    port, status, interval = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    plan = []  # (source address, count)
    for spec in sys.argv[4:]:
        addr, n = spec.split("x")
        plan.append((addr, int(n)))
    sel = selectors.DefaultSelector()
    born, by_addr = {}, {}
    stats = {"connected": 0, "closed": 0, "longest": 0.0}
    for addr, n in plan:
        by_addr.setdefault(addr, [0, 0])
        for _ in range(n):
            s = socket.socket()
            s.bind((addr, 0))
            try:
                s.connect(("127.0.0.1", port))
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                stats["closed"] += 1
                by_addr[addr][1] += 1
                s.close()
                continue
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, addr)
            born[s] = time.monotonic()
            stats["connected"] += 1
            by_addr[addr][0] += 1

    def close(s, addr):
        sel.unregister(s)
        stats["longest"] = max(stats["longest"], time.monotonic() - born.pop(s))
        stats["closed"] += 1
        by_addr[addr][0] -= 1
        by_addr[addr][1] += 1
        s.close()

    def write_status():
        lines = [f"{k} {v}" for k, v in stats.items()]
        lines.append(f"open {len(born)}")
        for addr, (o, c) in by_addr.items():
            lines += [f"open_{addr} {o}", f"closed_{addr} {c}"]
        with open(status + ".tmp", "w") as f:
            f.write("\n".join(lines) + "\n")
        os.rename(status + ".tmp", status)

    next_line = time.monotonic() + interval
    while True:
        write_status()
        timeout = max(0.0, next_line - time.monotonic())
        for key, _ in sel.select(timeout):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                close(s, key.data)
        if time.monotonic() >= next_line:
            next_line += interval
            for s in list(born):
                try:
                    s.send(b"X-Slow: 1\r\n")
                except OSError:
                    close(s, sel.get_key(s).data)


if __name__ == "__main__":
    main()
