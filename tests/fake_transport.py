"""A fake claude-agent-sdk `Transport` playing the CLI side of the real control protocol.

It answers `initialize`, asks the SDK's hook callbacks (`hook_callback`), calls in-process MCP tools
(`mcp_message`: handshake, then `tools/call`) and emits scripted messages, ending after `end_input`.
`exit_code` set: it then fails the way the real CLI process does after an error result (it exits non-zero and
the subprocess transport raises `ProcessError`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from claude_agent_sdk import Transport

_EXIT: Any = object()  # queue marker: the CLI process exited with `exit_code`


def assistant(text: str, error: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "type": "assistant",
        "session_id": "s1",
        "message": {"role": "assistant", "model": "claude-opus-4-6", "content": [{"type": "text", "text": text}]},
    }
    if error:
        msg["error"] = error
    return msg


def result(
    subtype: str = "success",
    *,
    structured: Any = None,
    text: str | None = None,
    cost: float = 0.25,
    is_error: bool = False,
    status: int | None = None,
    turns: int = 4,
    models: tuple[str, ...] = (),
) -> dict[str, Any]:
    return {
        "type": "result",
        "subtype": subtype,
        "duration_ms": 1200,
        "duration_api_ms": 900,
        "is_error": is_error,
        "num_turns": turns,
        "session_id": "s1",
        "total_cost_usd": cost,
        "usage": {"input_tokens": 1000, "cache_read_input_tokens": 500, "output_tokens": 300},
        "structured_output": structured,
        "result": text,
        "api_error_status": status,
        **({"modelUsage": {m: {"costUSD": cost / len(models)} for m in models}} if models else {}),
    }


class Hook:
    """A script step: the CLI asks the SDK's PreToolUse hook about a tool call, then runs it if allowed."""

    def __init__(self, tool: str, tool_input: dict[str, Any], apply: Any = None) -> None:
        self.tool, self.tool_input, self.apply = tool, tool_input, apply


class McpCall:
    """A script step: the CLI calls tool `tool` of the SDK MCP server `server` with `args`."""

    def __init__(self, server: str, tool: str, args: dict[str, Any]) -> None:
        self.server, self.tool, self.args = server, tool, args


class FakeTransport(Transport):
    """Plays the CLI side: answers `initialize`, asks hook callbacks, emits scripted messages."""

    def __init__(self, script: list[Any], exit_code: int = 0) -> None:
        self.script = script
        self.exit_code = exit_code
        self.written: list[dict[str, Any]] = []
        self.initialize: dict[str, Any] | None = None
        self.hook_responses: list[dict[str, Any]] = []
        self.mcp_responses: list[dict[str, Any]] = []
        self._mcp_ready: set[str] = set()
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ready = False
        self._counter = 0

    async def connect(self) -> None:
        self._ready = True

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            msg = json.loads(line)
            self.written.append(msg)
            if msg["type"] == "control_request" and msg["request"]["subtype"] == "initialize":
                self.initialize = msg["request"]
                await self._queue.put(
                    {
                        "type": "control_response",
                        "response": {
                            "subtype": "success",
                            "request_id": msg["request_id"],
                            "response": {"commands": []},
                        },
                    }
                )
            elif msg["type"] == "control_response":
                self._pending.pop(msg["response"]["request_id"]).set_result(msg["response"])
            elif msg["type"] == "user":
                asyncio.get_running_loop().create_task(self._play())

    async def _play(self) -> None:
        hook_ids = [
            cid for m in (self.initialize or {}).get("hooks", {}).get("PreToolUse", []) for cid in m["hookCallbackIds"]
        ]
        for step in self.script:
            if isinstance(step, McpCall):
                await self._mcp(step)
            elif isinstance(step, Hook):
                self._counter += 1
                request_id = f"cli_{self._counter}"
                future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
                self._pending[request_id] = future
                await self._queue.put(
                    {
                        "type": "control_request",
                        "request_id": request_id,
                        "request": {
                            "subtype": "hook_callback",
                            "callback_id": hook_ids[0],
                            "tool_use_id": f"tu{self._counter}",
                            "input": {
                                "hook_event_name": "PreToolUse",
                                "tool_name": step.tool,
                                "tool_input": step.tool_input,
                                "session_id": "s1",
                                "transcript_path": "",
                                "cwd": "",
                            },
                        },
                    }
                )
                response = await future
                self.hook_responses.append(response)
                decision = response.get("response", {}).get("hookSpecificOutput", {}).get("permissionDecision")
                if decision != "deny" and step.apply is not None:
                    step.apply()
            else:
                await self._queue.put(step)
        if self.exit_code:
            await self._queue.put(_EXIT)  # the process exits after its last message

    async def _request(self, request: dict[str, Any]) -> dict[str, Any]:
        self._counter += 1
        request_id = f"cli_{self._counter}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        await self._queue.put({"type": "control_request", "request_id": request_id, "request": request})
        return await future

    async def _mcp(self, step: McpCall) -> None:
        def msg(message: dict[str, Any]) -> dict[str, Any]:
            return {"subtype": "mcp_message", "server_name": step.server, "message": message}

        if step.server not in self._mcp_ready:
            await self._request(
                msg(
                    {
                        "jsonrpc": "2.0",
                        "id": 0,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-06-18",
                            "capabilities": {},
                            "clientInfo": {"name": "fake", "version": "0"},
                        },
                    }
                )
            )
            await self._request(msg({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            self._mcp_ready.add(step.server)
        response = await self._request(
            msg(
                {
                    "jsonrpc": "2.0",
                    "id": self._counter,
                    "method": "tools/call",
                    "params": {"name": step.tool, "arguments": step.args},
                }
            )
        )
        self.mcp_responses.append(response["response"]["mcp_response"])

    def read_messages(self):  # type: ignore[override]
        async def gen():
            while True:
                item = await self._queue.get()
                if item is _EXIT:
                    from claude_agent_sdk import ProcessError

                    raise ProcessError(
                        f"Command failed with exit code {self.exit_code}",
                        exit_code=self.exit_code,
                        stderr="Check stderr output for details",
                    )
                if item is None:
                    return
                yield item

        return gen()

    async def close(self) -> None:
        self._ready = False

    def is_ready(self) -> bool:
        return self._ready

    async def end_input(self) -> None:
        await self._queue.put(None)
