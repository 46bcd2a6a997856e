"""The task agent: claude-agent-sdk with this harness's prompt, tools, hooks and loop settings.

Contract with the claude-tasks benchmark: `run_task(prompt, workspace, transport=None)` runs one task
with `workspace` as cwd and returns a dict: `answer` (what the agent submitted, else its last text),
`submitted` (whether it used `submit_answer`), `messages` (the conversation as plain dicts, for the trace),
`cost_usd`, `turns`, `error` ("" if none).

A run that ends in an error result (max turns, budget, an API error) is still a finished run: the CLI exits
non-zero after reporting it and the SDK raises (`ResultError`), but the conversation, the cost and any answer
already submitted are kept and graded. Only an exception before any result is a crash, and it propagates.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ResultMessage, TextBlock, query

import settings
from hooks.middleware import build_hooks
from tools.workspace import ANSWER_FILE, SERVER, TOOL_NAMES, build_server

HERE = Path(__file__).resolve().parent


def build_options(workspace: Path) -> ClaudeAgentOptions:
    """The agent's SDK options for one task in `workspace`."""
    return ClaudeAgentOptions(
        system_prompt=(HERE / "prompts" / "system.md").read_text(encoding="utf-8"),
        cwd=str(workspace),
        setting_sources=[],
        tools=list(settings.BUILTIN_TOOLS),
        mcp_servers={SERVER: build_server(workspace)},
        allowed_tools=[f"mcp__{SERVER}__{name}" for name in TOOL_NAMES],
        permission_mode="dontAsk",
        hooks=build_hooks(workspace),
        model=settings.MODEL,
        fallback_model=settings.FALLBACK_MODEL,
        max_turns=settings.MAX_TURNS,
    )


async def _run(prompt: str, workspace: Path, transport: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"answer": "", "submitted": False, "messages": [], "cost_usd": 0.0, "turns": 0, "error": ""}
    last_text = ""
    finished = False
    try:
        async for message in query(prompt=prompt, options=build_options(workspace), transport=transport):
            out["messages"].append({"type": type(message).__name__, **dataclasses.asdict(message)})
            if isinstance(message, AssistantMessage):
                texts = [b.text for b in message.content if isinstance(b, TextBlock)]
                last_text = texts[-1] if texts else last_text
                if message.error:
                    out["error"] = message.error
            elif isinstance(message, ResultMessage):
                finished = True
                out["cost_usd"] = message.total_cost_usd or 0.0
                out["turns"] = message.num_turns
                if message.is_error:
                    out["error"] = out["error"] or message.subtype
    except Exception as exc:  # the SDK raises after an error result; that run still finished
        if not finished:
            raise
        out["messages"].append({"type": "error", "error": f"{type(exc).__name__}: {exc}"})
    answer_file = Path(workspace) / ANSWER_FILE
    out["submitted"] = answer_file.is_file()
    out["answer"] = answer_file.read_text(encoding="utf-8").strip() if answer_file.is_file() else last_text.strip()
    return out


def run_task(prompt: str, workspace: Path, transport: Any = None) -> dict[str, Any]:
    """Run one task (see the module docstring for the returned fields)."""
    return asyncio.run(_run(prompt, Path(workspace), transport))
