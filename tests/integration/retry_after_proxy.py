#!/usr/bin/env python3
"""An overloaded collector, as an agent meets it: the first N batches get
503 with Retry-After: S, the rest go to the real collector behind. Writes
its port to PORT_FILE and one line per batch to LOG: the monotonic time it
arrived and the status it got.

usage: retry_after_proxy.py UPSTREAM_URL PORT_FILE LOG N S
"""
import http.server
import os
import sys
import time
import urllib.error
import urllib.request

upstream, port_file, log_path, refuse, after = sys.argv[1:6]
refuse = int(refuse)
seen = 0


class Proxy(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        global seen
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        seen += 1
        if seen <= refuse:
            status, data, ctype = 503, b"busy\n", "text/plain"
            extra = [("Retry-After", after)]
        else:
            req = urllib.request.Request(upstream + self.path, data=body, method="POST")
            for h in ("Content-Type", "Content-Encoding", "Authorization"):
                if self.headers.get(h):
                    req.add_header(h, self.headers[h])
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    status, data = r.status, r.read()
                    ctype = r.headers.get("Content-Type", "application/octet-stream")
            except urllib.error.HTTPError as e:
                status, data, ctype = e.code, e.read(), "text/plain"
            extra = []
        with open(log_path, "a") as log:
            log.write("%.3f %d\n" % (time.monotonic(), status))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


server = http.server.HTTPServer(("127.0.0.1", 0), Proxy)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
