"""A chat webhook on loopback for the alert tests: it records the JSON body of every POST and answers 200.

Shared by the sensor tests (tests/assets/test_alerts.py) and the browser test's deployment (tests/browser/conftest.py),
whose alert sensors post to it through VIDEOLAKE_ALERT_WEBHOOK_URL.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def webhook_receiver(path: str = "/hook") -> Iterator[tuple[str, list[dict]]]:
    """Serve until the block ends; yields (its URL, the bodies received so far, in arrival order)."""
    got: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}", got
    finally:
        server.shutdown()
        server.server_close()
