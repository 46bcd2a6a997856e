"""The tool guard of LLM sessions: which edits and Bash commands an optimizer agent may make.

Used as the claude-agent-sdk PreToolUse hook and, for CLI agents, as a command hook
(`python -m saddler.sessions.guard GUARD_JSON`). Globs are the component map's (`saddler.harness.components`),
so the hook and the loop's post-hoc diff check agree on what is protected.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

from saddler.harness.components import matches

EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
_SHELL_META = re.compile(r"[;&|<>`$()\n\\]")


def edit_denial(file_path: str, worktree: Path, protected: list[str]) -> str | None:
    """Why an edit of `file_path` must be refused (outside the worktree, in `.git`, protected), or None."""
    root = Path(os.path.realpath(worktree))
    target = Path(file_path)
    if not target.is_absolute():
        target = root / target
    resolved = Path(os.path.realpath(target))
    try:
        rel = resolved.relative_to(root).as_posix()
    except ValueError:
        return f"{file_path} is outside the harness worktree {root}; edit files inside it only"
    if rel == ".git" or rel.startswith(".git/"):
        return f"{file_path} is git metadata; edit harness files only"
    if matches(rel, protected):
        return f"{rel} is a protected path (evaluation code, data or saddler.toml) and must not be edited"
    return None


def bash_denial(command: str, allowed_prefixes: list[str]) -> str | None:
    """Why a Bash command must be refused, or None: only single commands (no pipes, chaining,
    redirection or substitution) starting with an allowed prefix may run; an allowed entry given
    verbatim (e.g. the harness's check command) may run as written."""
    if command.strip() in (p.strip() for p in allowed_prefixes):
        return None
    if _SHELL_META.search(command):
        return "only single commands are allowed here: no pipes, chaining, redirection or substitution"
    try:
        words = shlex.split(command)
    except ValueError:
        return "the command could not be parsed"
    for prefix in allowed_prefixes:
        pwords = shlex.split(prefix)
        if pwords and words[: len(pwords)] == pwords:
            return None
    return f"Bash is limited to: {', '.join(allowed_prefixes)}"


def guard_decision(
    hook_input: dict[str, Any],
    worktree: Path | None,
    protected: list[str],
    bash_prefixes: list[str],
    writable_files: list[str] | None = None,
) -> dict[str, Any]:
    """PreToolUse hook output for one tool call: a deny decision with its reason, or `{}` (no opinion).

    Edits are allowed inside `worktree` except protected paths (none when `worktree` is None), plus the
    exact `writable_files` (e.g. the command backend's result file); Bash must pass `bash_denial`.
    """
    tool = str(hook_input.get("tool_name", ""))
    args = hook_input.get("tool_input") or {}
    reason: str | None = None
    if tool in EDIT_TOOLS:
        path = str(args.get("file_path") or args.get("notebook_path") or "")
        writable = {os.path.realpath(f) for f in writable_files or []}
        if os.path.realpath(path) in writable:
            reason = None
        elif worktree is None:
            reason = "this session does not edit files"
        else:
            reason = edit_denial(path, worktree, protected)
    elif tool == "Bash":
        reason = bash_denial(str(args.get("command", "")), bash_prefixes)
    if reason is None:
        return {}
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def allowed_bash_prefixes(check_command: str = "") -> list[str]:
    """The commands a session may run: the EvoDAG CLI, read-only git, and the harness's check command."""
    prefixes = ["evo-dag", "git diff", "git status"]
    if check_command.strip():
        prefixes.append(check_command.strip())
    return prefixes


def guard_main(argv: list[str]) -> int:
    """Command-hook entry point: `python -m saddler.sessions.guard GUARD_JSON` reads the hook input
    from stdin and prints `guard_decision` (GUARD_JSON: worktree, protected, bash, writable)."""
    import sys

    spec = json.loads(argv[0])
    hook_input = json.loads(sys.stdin.read() or "{}")
    worktree = Path(spec["worktree"]) if spec.get("worktree") else None
    decision = guard_decision(
        hook_input, worktree, spec.get("protected", []), spec.get("bash", []), spec.get("writable")
    )
    print(json.dumps(decision))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(guard_main(sys.argv[1:]))
