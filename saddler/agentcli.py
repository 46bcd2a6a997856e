"""External command-line programs (CLI coding agents, eval commands): argv templates and output parsing.

Stdlib and `saddler.errors` only, so benchmark plugins may import it beside `saddler.benchmark`.
`build_argv` splits a template like a shell and fills `{placeholders}` inside each word (a filled word stays
one argv element); `parse_usage` reads turns, tokens and cost from the JSON / JSONL that claude, codex and pi
print; `final_message` finds the agent's last message in that output.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from saddler.errors import ConfigError

_CODEX_STEPS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search", "agent_message"})
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([a-z_]+)\}")


def fill(template: str, values: dict[str, str], source: str = "template") -> str:
    """Substitute `{name}` placeholders in one pass; an unknown name is a `ConfigError` listing known ones."""
    unknown = sorted({m.group(1) for m in _PLACEHOLDER.finditer(template) if m.group(1) and m.group(1) not in values})
    if unknown:
        raise ConfigError(
            f"{source}: unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}; "
            f"available: {', '.join(sorted(values))}"
        )

    def _sub(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return values[match.group(1)]

    return _PLACEHOLDER.sub(_sub, template)


def build_argv(template: str, values: dict[str, str]) -> list[str]:
    """Split `template` like a shell and fill placeholders inside each argument."""
    try:
        words = shlex.split(template)
    except ValueError as exc:
        raise ConfigError(f"sessions.command: cannot parse {template!r}: {exc}") from exc
    return [fill(word, values, source="sessions.command") for word in words]


class Usage:
    """Running turns, tokens and cost of an agent's JSON output, fed one object at a time (claude, codex, pi shapes):
    `parse_usage` for a whole output, a live watch (fleet's limits) line by line. `final` is claude's `result`."""

    def __init__(self) -> None:
        self.turns, self.tokens_in, self.tokens_out, self.cost_usd = 0, 0, 0, 0.0
        self.final: dict[str, Any] | None = None
        self._codex_steps = 0  # codex reports one turn per exec: each tool call or message of it is one response

    @property
    def running_turns(self) -> int:
        """The turns so far, codex's steps of the exec still running included."""
        return self.turns + self._codex_steps

    def feed(self, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        item: dict[str, Any] = obj["item"] if isinstance(obj.get("item"), dict) else {}
        if kind == "item.completed" and item.get("type") in _CODEX_STEPS:
            self._codex_steps += 1
        if "total_cost_usd" in obj or kind == "result":  # claude -p --output-format json / stream-json
            u = obj.get("usage") or {}
            self.cost_usd += float(obj.get("total_cost_usd") or 0.0)
            self.turns += int(obj.get("num_turns") or 0)
            self.tokens_in += sum(
                int(u.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            )
            self.tokens_out += int(u.get("output_tokens") or 0)
            self.final = obj
        elif kind == "turn.completed":  # codex exec --json
            u = obj.get("usage") or {}
            self.turns += max(1, self._codex_steps)
            self._codex_steps = 0
            self.tokens_in += int(u.get("input_tokens") or 0)
            self.tokens_out += int(u.get("output_tokens") or 0)
        elif kind == "message_end" and isinstance(obj.get("message"), dict):  # pi --mode json
            message = obj["message"]
            u = message.get("usage") or {}
            if message.get("role") == "assistant":
                self.turns += 1
                self.tokens_in += int(u.get("input") or 0) + int(u.get("cacheRead") or 0)
                self.tokens_out += int(u.get("output") or 0)
                cost = u.get("cost")
                self.cost_usd += float(cost.get("total") or 0.0) if isinstance(cost, dict) else 0.0

    def feed_line(self, line: str) -> None:
        """Feed one output line (non-JSON lines are ignored)."""
        for obj in json_objects(line) if line.lstrip().startswith("{") else []:
            self.feed(obj)

    def as_dict(self) -> dict[str, Any]:
        return {"turns": self.turns, "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                "cost_usd": round(self.cost_usd, 6), "final": self.final}  # fmt: skip


def parse_usage(stdout: str) -> dict[str, Any]:
    """Turns, tokens and cost from an agent's JSON / JSONL output (claude, codex, pi shapes); zeros if absent."""
    usage = Usage()
    for obj in json_objects(stdout):
        usage.feed(obj)
    return usage.as_dict()


def json_objects(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects in an output: a whole JSON object or list, else one object per `{`-line."""
    text = stdout.strip()
    try:
        whole = json.loads(text) if text else None
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [whole]
    if isinstance(whole, list):
        return [o for o in whole if isinstance(o, dict)]
    objects = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                objects.append(obj)
    return objects


def final_message(stdout: str) -> Any:
    """The agent's final answer in a CLI's output: `claude -p --output-format json`'s `structured_output` (else its
    `result`), the last `agent_message` item of `codex exec --json`, the last assistant message of
    `pi --mode json`; the whole output when it is none of these."""
    objects = json_objects(stdout)
    answer: Any = None
    for obj in objects:
        kind = obj.get("type")
        if kind == "result" and ("structured_output" in obj or "result" in obj):
            structured = obj.get("structured_output")
            answer = structured if structured is not None else obj.get("result")
        elif kind == "item.completed" and isinstance(obj.get("item"), dict):
            item = obj["item"]
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                answer = item["text"]
        elif kind == "message_end" and isinstance(obj.get("message"), dict):
            message = obj["message"]
            if message.get("role") == "assistant":
                content = message.get("content")
                parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
                text = "".join(
                    str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
                )
                answer = text if text.strip() else answer
    return stdout if answer is None else answer
