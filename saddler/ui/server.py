"""The dashboard server: the standard library's ThreadingHTTPServer serving the page, its assets and the JSON API.

Bound to 127.0.0.1 unless the caller passes another host (the CLI warns then). Nothing is fetched from outside:
the page's libraries are the vendored files under `static/`. Requests are read-only; the server never writes.
Requests are answered on their own threads; every store read happens on one worker thread (`SharedStores`), which
keeps each run's store open (an SQLite connection stays in the thread that made it).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from evodag.store import EvoDAG
from saddler.ui import page
from saddler.ui.api import RunSource, answer

LOCAL_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html; charset=utf-8"}


class SharedStores:
    """Each run's store opened once, read-only, and used from a single worker thread; a store whose read fails
    with an SQLite error is closed and opened again on the next request."""

    def __init__(self, sources: list[RunSource]) -> None:
        self.sources = sources
        self._stores: dict[int, EvoDAG] = {}
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="saddler-ui-store")

    @contextmanager
    def _open(self, index: int) -> Iterator[EvoDAG]:
        store = self._stores.get(index)
        if store is None:
            store = self._stores[index] = EvoDAG(self.sources[index].db, readonly=True)
        try:
            yield store
        except sqlite3.Error:
            self._stores.pop(index).close()
            raise

    def answer(self, path: str) -> tuple[int, Any]:
        """`saddler.ui.api.answer` on the worker thread, with the open stores."""
        return self._worker.submit(answer, self.sources, path, self._open).result()

    def close(self) -> None:
        def close_all() -> None:
            for store in self._stores.values():
                store.close()
            self._stores.clear()

        self._worker.submit(close_all).result()
        self._worker.shutdown()


class DashboardServer(ThreadingHTTPServer):
    """The HTTP server with the runs' `SharedStores` (closed with the server)."""

    daemon_threads = True
    stores: SharedStores

    def server_close(self) -> None:
        super().server_close()
        self.stores.close()


def _handler(stores: SharedStores) -> type[BaseHTTPRequestHandler]:
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
            with suppress(BrokenPipeError, ConnectionResetError):  # the page went away mid-answer (a reload)
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
                status, doc = stores.answer(path)
                self._send(status, json.dumps(doc, default=str).encode("utf-8"), "application/json")
            else:
                self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")

    return Handler


def make_server(sources: list[RunSource], host: str = LOCAL_HOST, port: int = DEFAULT_PORT) -> DashboardServer:
    """A bound (not yet serving) server for `sources`; port 0 picks a free port (`server.server_address`)."""
    stores = SharedStores(sources)
    server = DashboardServer((host, port), _handler(stores))
    server.stores = stores
    return server


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    """Serve `server` on a daemon thread (tests, embedding); `server.shutdown()` stops it."""
    thread = threading.Thread(target=server.serve_forever, name="saddler-ui", daemon=True)
    thread.start()
    return thread
