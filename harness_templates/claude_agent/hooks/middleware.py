"""Hooks as middleware: `build_hooks(workspace)` returns the `hooks` mapping of ClaudeAgentOptions.

PreToolUse refuses anything outside the workspace tools; PostToolUse can add context after a tool ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from claude_agent_sdk import HookMatcher


def build_hooks(workspace: Path) -> dict[str, list[HookMatcher]]:
    async def only_workspace_tools(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        if str(hook_input.get("tool_name", "")).startswith("mcp__workspace__"):
            return {}
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "use the workspace tools only",
            }
        }

    async def after_tool(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        return {}

    return {
        "PreToolUse": [HookMatcher(matcher=None, hooks=[only_workspace_tools])],
        "PostToolUse": [HookMatcher(matcher=None, hooks=[after_tool])],
    }
