"""A loopback HTTP server for raw files, as raw.githubusercontent.com serves them: ``GET /<org>/<name>/<commit>/<path>``
answers the bytes of ``files["<org>/<name>/<commit>/<path>"]``, anything else is a 404. ``files`` may be changed while
the server runs (a tampered copy). Point ``PEEVAL_DATA_RAW_BASE`` at :attr:`base`."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote


class LoopbackRaw:
    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.requests: list[str] = []
        raw = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                key = unquote(self.path.split("?", 1)[0]).lstrip("/")
                raw.requests.append(key)
                data = raw.files.get(key)
                self.send_response(200 if data is not None else 404)
                body = data if data is not None else b"404: Not Found"
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> LoopbackRaw:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
