"""A small OpenAI-compatible server on 127.0.0.1 for the tests: `POST /v1/chat/completions` answers like a weak
model (it adds, and knows nothing else); anything else, `/v1/responses` included, is a 404 as a server without
OpenAI's Responses API gives. Every request's path is recorded in `requests`. Bounded: it serves until `close()`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class OpenAICompatibleServer:
    """`with OpenAICompatibleServer() as server:` serves on `server.base_url` (`http://127.0.0.1:<port>/v1`)."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                outer.requests.append(self.path)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no such endpoint {self.path}", "type": "not_found"}})
                    return
                self._send(200, outer.completion(body))

            def do_GET(self) -> None:
                outer.requests.append(self.path)
                self._send(404, {"error": {"message": f"no such endpoint {self.path}"}})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @staticmethod
    def completion(body: dict[str, Any]) -> dict[str, Any]:
        question = " ".join(str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user")
        added = re.search(r"(\d+)\s*\+\s*(\d+)", question)
        answer = str(int(added.group(1)) + int(added.group(2))) if added else "I do not know."
        return {
            "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "test-model"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }  # fmt: skip

    def __enter__(self) -> OpenAICompatibleServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
