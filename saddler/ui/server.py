"""The dashboard server: the standard library's ThreadingHTTPServer serving the page, its assets and the JSON API.

Bound to 127.0.0.1 unless the caller passes another host (the CLI warns then). Nothing is fetched from outside:
the page's libraries are the vendored files under `static/`. Requests are read-only; the server never writes.
"""

from __future__ import annotations

import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from saddler.ui import page
from saddler.ui.api import RunSource, answer

LOCAL_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html; charset=utf-8"}


def _handler(sources: list[RunSource]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "saddler-ui"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the terminal shows the URL only
            return

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path in ("/", "/index.html"):
                self._send(200, page.live_html().encode("utf-8"), TYPES[".html"])
            elif path.startswith("/static/"):
                asset = page.asset(path.removeprefix("/static/"))
                if asset is None:
                    self._send(404, b"not found", "text/plain")
                else:
                    self._send(200, asset, TYPES.get("." + path.rsplit(".", 1)[-1], "application/octet-stream"))
            elif path.startswith("/api/"):
                status, doc = answer(sources, path)
                self._send(status, json.dumps(doc, default=str).encode("utf-8"), "application/json")
            else:
                self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")

    return Handler


def make_server(sources: list[RunSource], host: str = LOCAL_HOST, port: int = DEFAULT_PORT) -> ThreadingHTTPServer:
    """A bound (not yet serving) server for `sources`; port 0 picks a free port (`server.server_address`)."""
    server = ThreadingHTTPServer((host, port), _handler(sources))
    server.daemon_threads = True
    return server


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    """Serve `server` on a daemon thread (tests, embedding); `server.shutdown()` stops it."""
    thread = threading.Thread(target=server.serve_forever, name="saddler-ui", daemon=True)
    thread.start()
    return thread
