"""A loopback server that speaks the Hugging Face hub's file protocol (the part ``hf_hub_download`` uses):
``HEAD``/``GET {endpoint}/datasets/<org>/<name>/resolve/<revision>/<path>`` (``{endpoint}/<org>/<name>/...``
for a model repository) answer with the headers huggingface_hub reads (``X-Repo-Commit``, ``ETag``,
``Content-Length``); an unknown repository, revision or file is a 404 with the hub's ``X-Error-Code``.

``repos`` maps ``("dataset" | "model", "org/name")`` to ``{path: bytes | Path}``; a test may change it
while the server runs (a corrupted copy). The commit a revision resolves to (``X-Repo-Commit``) is served as
that revision too, as the hub does (the data lock fetches the commit it recorded).
"""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote


class LoopbackHub:
    def __init__(self, repos: dict[tuple[str, str], dict[str, bytes | Path]], revisions=("main",)):
        self.repos = repos
        self.revisions = set(revisions)
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                hub._answer(self, body=False)

            def do_GET(self):
                hub._answer(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> LoopbackHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _lookup(self, path: str):
        parts = unquote(path.split("?", 1)[0]).lstrip("/").split("/")
        kind = "model"
        if parts and parts[0] == "datasets":
            kind, parts = "dataset", parts[1:]
        if len(parts) < 5 or parts[2] != "resolve":
            return None, None, None
        repo, revision, file = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
        return (kind, repo), revision, file

    def _answer(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        key, revision, file = self._lookup(h.path)
        self.requests.append((h.command, h.path))
        files = self.repos.get(key) if key else None
        commits = {self.commit(key, r): r for r in self.revisions} if key else {}
        revision = commits.get(revision, revision)  # a commit a revision resolved to: the same files
        if files is None or revision not in self.revisions:
            code = "RepoNotFound" if files is None else "RevisionNotFound"
            return self._error(h, code, body)
        if file not in files:
            return self._error(h, "EntryNotFound", body, commit=True)
        data = files[file]
        data = data.read_bytes() if isinstance(data, Path) else data
        h.send_response(200)
        h.send_header("X-Repo-Commit", self.commit(key, revision))
        h.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        h.send_header("Content-Length", str(len(data)))
        h.send_header("Content-Type", "application/octet-stream")
        h.end_headers()
        if body:
            h.wfile.write(data)

    def commit(self, key, revision: str) -> str:
        return hashlib.sha1(f"{key}@{revision}".encode()).hexdigest()

    def _error(self, h: BaseHTTPRequestHandler, code: str, body: bool, commit: bool = False) -> None:
        msg = f"{code}: not on this loopback hub".encode()
        h.send_response(404)
        h.send_header("X-Error-Code", code)
        h.send_header("X-Error-Message", msg.decode())
        h.send_header("Content-Length", str(len(msg)))
        h.end_headers()
        if body:
            h.wfile.write(msg)
