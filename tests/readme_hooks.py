"""A webhook receiver for tests/test_readme.py: ``python -m tests.readme_hooks DIR``.

Writes its port to DIR/port, then answers POSTs by path: ``/hook`` 200, ``/later`` 429
with ``Retry-After: 1``, ``/gone`` 410; every request's path and JSON body is appended
to DIR/hits as one JSON line.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ANSWERS = {"/hook": (200, {}), "/later": (429, {"Retry-After": "1"}), "/gone": (410, {})}


class Receiver(BaseHTTPRequestHandler):
    hits: Path

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.hits.open("a") as out:
            out.write(json.dumps({"path": self.path, "body": json.loads(body)}) + "\n")
        status, headers = ANSWERS.get(self.path, (404, {}))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: the hits file is the record


def main() -> None:
    folder = Path(sys.argv[1])
    Receiver.hits = folder / "hits"
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    (folder / "port").write_text(str(server.server_port))
    server.serve_forever()


if __name__ == "__main__":
    main()
