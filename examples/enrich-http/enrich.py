#!/usr/bin/env python3
"""An enrichment service for turbo's http handler, in Python's standard library.

turbo POSTs each record of the topic `orders` here (the value as the body,
the key base64 in Kafka-Key); the answer lists the records to write back to
Kafka (handler.response: outputs) as JSON lines: here one per order, to the
consumer's output.topic, keyed like the order, its value the order with
what this service adds. With handler.encoding utf8 the key and value are
plain strings.

    python3 enrich.py --port 8090
"""

import argparse
import base64
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def enrich(key, value, offset):
    """What this service adds to an order: its size, and where it came from."""
    return {
        "order": value,
        "customer": key,
        "bytes": len(value.encode()),
        "source_offset": offset,
        "enriched_by": "enrich.py",
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: turbo reuses connections

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = base64.b64decode(self.headers.get("Kafka-Key", "")).decode()
        offset = int(self.headers["Kafka-Offset"])
        out = {"key": key, "value": json.dumps(enrich(key, body.decode(), offset))}
        answer = (json.dumps(out) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass  # one line per record would drown the terminal


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8090, help="0 picks a free port")
    a = p.parse_args()
    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    srv.daemon_threads = True
    host, port = srv.server_address[:2]
    print(f"enrich.py listening on {host}:{port}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
