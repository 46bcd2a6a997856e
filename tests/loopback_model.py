"""A scripted model server on 127.0.0.1 that speaks what the real claude, codex and pi CLIs send.

- Anthropic Messages (`POST /v1/messages`, streamed as SSE or not; `/v1/messages/count_tokens`): claude
  (`ANTHROPIC_BASE_URL`), the CLI bundled with claude-agent-sdk, and pi (`~/.pi/agent/models.json` `baseUrl`).
- OpenAI Responses (`POST /v1/responses`, SSE): codex (a `[model_providers.<name>]` with `wire_api = "responses"`).

What the model answers is decided per request by `responder(api, body, server) -> Reply` (the default plays
saddler's sessions through `tests/fake_agent.py`'s rules: see `SessionPlayer`), or taken from a queue of scripted
replies (`server.script.extend([...])`), which wins while it is not empty. A reply is text, tool calls, or an HTTP
error with its headers (429 with `retry-after`, 529 overloaded, a usage limit with its reset time, ...). Every
request is kept in `server.requests` (path, headers, body) for the tests to read.

Run alone (`python tests/loopback_model.py PORT`) it serves until killed, playing the sessions.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

API_ANTHROPIC = "anthropic"
API_RESPONSES = "responses"


@dataclass
class ToolCall:
    name: str
    input: dict[str, Any]


@dataclass
class Reply:
    """One model turn: `text` and/or `calls`; or an HTTP error (`status` >= 400 with `error` as the body)."""

    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    status: int = 200
    error: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    tokens_in: int = 1200
    tokens_out: int = 80
    disconnect: bool = False  # the stream ends before its last event (a dropped connection)


def anthropic_error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An Anthropic API error reply (`{"type": "error", "error": {...}}`)."""
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Reply(status=status, error=body, headers=headers or {})


def openai_error(status: int, code: str, message: str, headers: dict[str, str] | None = None, **extra: Any) -> Reply:
    """An OpenAI API error reply (`{"error": {...}}`)."""
    body = {"error": {"type": code, "code": code, "message": message, "param": None, **extra}}
    return Reply(status=status, error=body, headers=headers or {})


Responder = Callable[[str, dict[str, Any], "LoopbackModel"], Reply]


class LoopbackModel(ThreadingHTTPServer):
    """The server; `url` is its base (`http://127.0.0.1:PORT`). Start with `start()`, end with `stop()`."""

    daemon_threads = True

    def __init__(self, responder: Responder | None = None, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.responder = responder or SessionPlayer()
        self.script: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def next_id(self) -> int:
        return next(self._ids)

    def start(self) -> LoopbackModel:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True, name="loopback-model")
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def reply_for(self, api: str, body: dict[str, Any]) -> Reply:
        with self.lock:
            if self.script:
                return self.script.pop(0)
        return self.responder(api, body, self)

    def main_requests(self, api: str | None = None) -> list[dict[str, Any]]:
        """The requests that carried tools (the agent's own turns, not a CLI's side requests such as titles)."""
        return [r for r in self.requests if r["body"].get("tools") and (api is None or r["api"] == api)]


class _Handler(BaseHTTPRequestHandler):
    server: LoopbackModel
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self.server.requests.append({"method": "GET", "path": self.path, "api": "", "headers": {}, "body": {}})
        if self.path.rstrip("/").endswith("/models"):
            return self._json(200, {"object": "list", "data": [], "models": []})
        return self._json(404, {"error": {"message": f"no such path {self.path}"}})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        path = self.path.split("?", 1)[0]
        api = API_RESPONSES if path.endswith("/responses") else API_ANTHROPIC
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in ("authorization", "x-api-key")}
        headers["has_key"] = str(bool(self.headers.get("authorization") or self.headers.get("x-api-key")))
        with self.server.lock:
            self.server.requests.append({"method": "POST", "path": path, "api": api, "headers": headers, "body": body})
        if path.endswith("/count_tokens"):
            return self._json(200, {"input_tokens": 1000})
        if not (path.endswith("/messages") or path.endswith("/responses")):
            return self._json(404, {"error": {"message": f"no such path {path}"}})
        reply = self.server.reply_for(api, body)
        if reply.status >= 400:
            return self._json(reply.status, reply.error or {}, reply.headers)
        if api == API_RESPONSES:
            events = responses_events(reply, body, self.server.next_id())
            return self._sse(events[:-1] if reply.disconnect else events)
        if body.get("stream"):
            events = anthropic_events(reply, body, self.server.next_id())
            return self._sse(events[:-1] if reply.disconnect else events)
        return self._json(200, anthropic_message(reply, body, self.server.next_id()))

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True


# -- Anthropic Messages -----------------------------------------------------------------------------


def _anthropic_blocks(reply: Reply, n: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    blocks += [
        {"type": "tool_use", "id": f"toolu_{n:04d}_{i}", "name": c.name, "input": c.input}
        for i, c in enumerate(reply.calls)
    ]
    return blocks or [{"type": "text", "text": ""}]


def anthropic_message(reply: Reply, body: dict[str, Any], n: int) -> dict[str, Any]:
    """A non-streamed Messages response."""
    return {
        "id": f"msg_{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "loopback"),
        "content": _anthropic_blocks(reply, n),
        "stop_reason": "tool_use" if reply.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": reply.tokens_in, "output_tokens": reply.tokens_out},
    }


def anthropic_events(reply: Reply, body: dict[str, Any], n: int) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of a streamed Messages response."""
    message = anthropic_message(reply, body, n)
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": reply.tokens_in, "output_tokens": 1},
    }
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))  # fmt: skip
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            empty = {**block, "input": {}}
            events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": empty}))
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": reply.tokens_out}}))  # fmt: skip
    events.append(("message_stop", {"type": "message_stop"}))
    return events


# -- OpenAI Responses -------------------------------------------------------------------------------


def responses_events(reply: Reply, body: dict[str, Any], n: int) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of a streamed Responses API response (what codex reads)."""
    rid = f"resp_{n:04d}"
    output: list[dict[str, Any]] = []
    if reply.text:
        output.append({"type": "message", "id": f"msg_{n:04d}", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})  # fmt: skip
    for i, call in enumerate(reply.calls):
        arguments = call.input.get("__raw__") if "__raw__" in call.input else json.dumps(call.input)
        output.append({"type": "function_call", "id": f"fc_{n:04d}_{i}", "call_id": f"call_{n:04d}_{i}",
                       "name": call.name, "arguments": arguments, "status": "completed"})  # fmt: skip
    base = {"id": rid, "object": "response", "created_at": 0, "model": body.get("model", "loopback")}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": {**base, "status": "in_progress", "output": []}})
    ]
    for i, item in enumerate(output):
        events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": i,
                                                      "item": {**item, "status": "in_progress"}}))  # fmt: skip
        if item["type"] == "message":
            events.append(("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"],
                                                          "output_index": i, "content_index": 0,
                                                          "delta": reply.text}))  # fmt: skip
        events.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": i,
                                                     "item": item}))  # fmt: skip
    usage = {"input_tokens": reply.tokens_in, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": reply.tokens_out, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": reply.tokens_in + reply.tokens_out}  # fmt: skip
    done = {**base, "status": "completed", "output": output, "usage": usage}
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return events


# -- what the model says ----------------------------------------------------------------------------


def request_text(api: str, body: dict[str, Any]) -> str:
    """All the text of a request: system prompt, instructions and every message's text parts."""
    parts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for key in ("text", "content", "instructions", "system", "input", "output"):
                if key in value:
                    walk(value[key])

    walk(body.get("system"))
    walk(body.get("instructions"))
    walk(body.get("messages"))
    walk(body.get("input"))
    return "\n".join(parts)


def tool_names(api: str, body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        name = tool.get("name") or (tool.get("function") or {}).get("name")
        if name:
            names.append(name)
    return names


def tool_results(api: str, body: dict[str, Any]) -> int:
    """How many tool results the conversation holds (the turns the agent already took)."""
    count = 0
    if api == API_RESPONSES:
        return sum(1 for item in body.get("input") or [] if item.get("type") == "function_call_output")
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            count += sum(1 for c in content if isinstance(c, dict) and c.get("type") == "tool_result")
    return count


class SessionPlayer:
    """Plays saddler's three sessions as a model would, with the tools the CLI offers.

    Diagnosis: one turn edits the file `fake_agent.pick_file` chooses (claude `Edit`, pi `edit`, codex
    `apply_patch` through its shell tool), then the answer. Reflection and evolution answer at once. The answer
    is the `StructuredOutput` tool call when the CLI offers one (claude `--json-schema`), else the final text
    (codex `--output-schema`, pi). Side requests without tools get a short text.
    """

    def __call__(self, api: str, body: dict[str, Any], server: LoopbackModel) -> Reply:
        from fake_agent import evolve, pick_file, reflect

        tools = tool_names(api, body)
        text = request_text(api, body)
        if not tools:
            return Reply(text="Session title")
        done = tool_results(api, body)
        if "of the autoresearch fleet" in text:
            return self.fleet(api, tools, text, done)
        if is_diagnosis(text):
            cwd = _cwd(text)
            target = pick_file(text, cwd) if cwd else None
            reads = 1 if "Edit" in tools and "Read" in tools else 0  # claude edits only files it has read
            if target is not None and done < reads:
                return Reply(calls=[ToolCall("Read", {"file_path": str(target)})])
            if target is not None and done == reads:
                return Reply(calls=[self.edit_call(api, tools, target)])
            answer: dict[str, Any] = (
                {"status": "no_patch", "reason": "no editable file"} if target is None else _patched(target, cwd)
            )
        elif "# Reflection" in text:
            answer = reflect(text)
        elif "# Evolution" in text:
            answer = evolve(text)
        else:
            return Reply(text="ok")
        return self.answer(tools, body, answer)

    @staticmethod
    def answer(tools: list[str], body: dict[str, Any], answer: dict[str, Any]) -> Reply:
        """The session's final answer: the `StructuredOutput` call where the CLI offers it, else the JSON text."""
        if "StructuredOutput" in tools and not _structured_done(body):
            return Reply(calls=[ToolCall("StructuredOutput", answer)])
        if "StructuredOutput" in tools:
            return Reply(text="Done.")
        return Reply(text=json.dumps(answer))

    def fleet(self, api: str, tools: list[str], text: str, done: int) -> Reply:
        """A fleet experiment (tests/fixtures/fleet/project): raise OPT_LEVEL in solution.py with the CLI's own edit
        tool, then end with the DESCRIPTION line."""
        cwd = _cwd(text)
        target = cwd / "solution.py" if cwd else None
        reads = 1 if "Edit" in tools and "Read" in tools else 0
        if target is not None and target.is_file() and "OPT_LEVEL = 0" in target.read_text(encoding="utf-8"):
            if done < reads:
                return Reply(calls=[ToolCall("Read", {"file_path": str(target)})])
            if done == reads:
                return Reply(calls=[self.edit_call(api, tools, target, ("OPT_LEVEL = 0\n", "OPT_LEVEL = 1\n"))])
        return Reply(text="Raised the optimisation level.\nDESCRIPTION: opt level 1")

    @staticmethod
    def edit_call(api: str, tools: list[str], target: Path, change: tuple[str, str] | None = None) -> ToolCall:
        """The call that makes `change` (old, new) in `target` with the CLI's own tool; default: append a note."""
        note = "\n# verify results before answering\n" if target.suffix == ".py" else "\nRe-check every tool result.\n"
        whole = target.read_text(encoding="utf-8")
        old, new = change or (whole, whole + note)
        if "Edit" in tools:
            return ToolCall("Edit", {"file_path": str(target), "old_string": old, "new_string": new})
        if "edit" in tools:
            return ToolCall("edit", {"path": str(target), "edits": [{"oldText": old, "newText": new}]})
        if change is None:
            lines = "".join(f"+{line}\n" for line in note.splitlines())
        else:
            lines = "".join(f"-{line}\n" for line in old.splitlines()) + "".join(f"+{x}\n" for x in new.splitlines())
        patch = f"*** Begin Patch\n*** Update File: {target}\n@@\n{lines}*** End Patch\n"
        if "apply_patch" in tools:
            return ToolCall("apply_patch", {"input": patch})
        name = "exec_command" if "exec_command" in tools else "shell"
        return ToolCall(
            name,
            {"command": ["apply_patch", patch]} if name == "shell" else {"cmd": f"apply_patch <<'EOF'\n{patch}EOF"},
        )


def is_diagnosis(text: str) -> bool:
    """Whether a request's text is a diagnosis session's (its prompt's `# Diagnosis-Patch` heading)."""
    return "# Diagnosis-Patch" in text[:20000] or re.search(r"^# Diagnosis-Patch", text, re.MULTILINE) is not None


def _structured_done(body: dict[str, Any]) -> bool:
    for message in body.get("messages") or []:
        for c in message.get("content") or []:
            if isinstance(c, dict) and c.get("type") == "tool_use" and c.get("name") == "StructuredOutput":
                return True
    return False


def _cwd(text: str) -> Path | None:
    patterns = (
        r"checked out in your working directory `([^`]+)`",
        r"<cwd>([^<]+)</cwd>",
        r"[Ww]orking directory: (\S+)",
    )
    for pattern in patterns:
        match = re.search(pattern, text, re.DOTALL)
        if match and Path(match.group(1).strip()).is_dir():
            return Path(match.group(1).strip())
    return None


def _patched(target: Path, cwd: Path | None) -> dict[str, Any]:
    rel = target.relative_to(cwd).as_posix() if cwd else target.name
    return {
        "status": "patched",
        "hypothesis": {
            "target_tasks": [],
            "diagnosis": f"the agent finishes without verifying; {rel} is where it decides",
            "plan": f"add a verification step to {rel}",
            "patch_kind": "capability",
            "subtype": "tool" if target.suffix == ".py" else "prompt",
            "files": [rel],
            "symptoms": ["finished_unverified"],
        },
    }


if __name__ == "__main__":
    model = LoopbackModel(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(model.url, flush=True)
    model.serve_forever()
