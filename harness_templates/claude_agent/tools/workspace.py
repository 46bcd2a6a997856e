"""Workspace tools served in-process through `create_sdk_mcp_server`.

`build_server(workspace)` returns the MCP server config; `TOOL_NAMES` lists the tools it serves. The
answer the agent submits is written to `workspace/.answer`, where the benchmark reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from claude_agent_sdk import create_sdk_mcp_server, tool

SERVER = "workspace"
TOOL_NAMES = ["list_files", "read_file", "submit_answer"]
ANSWER_FILE = ".answer"
MAX_LINES = 20


def _text(text: str, error: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if error:
        out["is_error"] = True
    return out


def build_server(workspace: Path) -> Any:
    """The MCP server of the workspace tools, bound to `workspace`."""
    root = Path(workspace).resolve()

    def _resolve(name: str) -> Path | None:
        path = (root / name).resolve()
        return path if path.is_file() and root in path.parents else None

    @tool("list_files", "List the files in the workspace.", {})
    async def list_files(args: dict[str, Any]) -> dict[str, Any]:
        names = sorted(p.name for p in root.iterdir() if p.is_file() and not p.name.startswith("."))
        return _text("\n".join(names))

    @tool("read_file", "Read a workspace file.", {"name": str})
    async def read_file(args: dict[str, Any]) -> dict[str, Any]:
        path = _resolve(str(args.get("name", "")))
        if path is None:
            return _text("no such file", error=True)
        lines = path.read_text(encoding="utf-8").splitlines()
        return _text("\n".join(lines[:MAX_LINES]))

    @tool("submit_answer", "Submit the final answer to the task.", {"answer": str})
    async def submit_answer(args: dict[str, Any]) -> dict[str, Any]:
        (root / ANSWER_FILE).write_text(str(args.get("answer", "")).strip(), encoding="utf-8")
        return _text("answer recorded")

    return create_sdk_mcp_server(SERVER, "1.0.0", [list_files, read_file, submit_answer])
