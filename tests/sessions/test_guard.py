"""The session guard: the Bash allowlist checked argument by argument, edits confined, and failing closed
(as the SDK hook through the real control protocol, and as the command hook run the way Claude Code runs it)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_transport import FakeTransport, Hook, result

from saddler.config import SessionConfig
from saddler.sessions import guard
from saddler.sessions.claude import ClaudeBackend
from saddler.sessions.guard import BashPolicy, bash_denial, guard_decision, hook_command

POLICY = BashPolicy("python -m compileall -q .", "/r/sessions/evodag-view.sqlite")


@pytest.mark.parametrize(
    "command",
    [
        "evo-dag --db /r/sessions/evodag-view.sqlite lessons",
        "evo-dag lessons --attribution true_regression",
        "evo-dag scenario t1 --json",
        "evo-dag history",
        "evo-dag export --format dot",
        "git diff --stat",
        "git diff HEAD -- tools/search.py",
        "git status --porcelain",
        "python -m compileall -q .",
    ],
)
def test_read_only_commands_pass(command: str) -> None:
    assert bash_denial(command, POLICY) is None


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("evo-dag export --out /etc/cron.d/x", "--out"),
        ("evo-dag export --format dot --out=../../outside.dot", "--out"),
        ("evo-dag --db x.sqlite export --out x", "--out"),
        ("git diff --output=/home/user/.bashrc", "--output"),
        ("git diff --output /tmp/x HEAD", "--output"),
        ("git diff --outp=/tmp/x", "--outp"),  # git accepts unambiguous prefixes of long options
        ("git diff --ext-diff", "--ext-diff"),
        ("python -m compileall -q . -d /tmp/elsewhere", "Bash runs single commands only"),
        ("evo-dag frobnicate", "read-only subcommands"),
        ("evo-dag query 'SELECT * FROM rollouts'", "read-only subcommands"),  # raw SQL would show dev per task
        ("evo-dag summary; rm -rf /", "single commands"),
        ("git diff $(rm x)", "single commands"),
        ("git diff > out.txt", "single commands"),
        ("git commit -m x", "Bash runs single commands only"),
        ("python -c 1", "Bash runs single commands only"),
    ],
)
def test_writes_through_allowed_prefixes_are_refused(command: str, why: str) -> None:
    assert why in (bash_denial(command, POLICY) or "")


def test_the_policy_describes_itself_for_the_prompts() -> None:
    text = POLICY.describe()
    assert "`evo-dag` read-only subcommands (no `--out`, `--run`)" in text
    assert "`git diff` (no `--output`, `--no-index`)" in text
    assert "exactly `python -m compileall -q .`" in text
    assert POLICY.prefixes() == ["evo-dag", "git diff", "git status"]


def test_guard_allows_only_the_named_writable_file_outside_the_worktree(tmp_path: Path) -> None:
    answer = tmp_path / "answer.json"
    edit = {"tool_name": "Write", "tool_input": {"file_path": str(answer)}}
    assert guard_decision(edit, None, [], POLICY, [str(answer)]) == {}
    denied = guard_decision(edit, None, [], POLICY, [])
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert guard_decision({"tool_name": "Read", "tool_input": {"file_path": "/etc/hosts"}}, None, [], POLICY) == {}


def run_hook(command: str, stdin: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command hook exactly as Claude Code does: through a shell, the hook input on stdin."""
    return subprocess.run(["/bin/sh", "-c", command], input=stdin, capture_output=True, text=True, env=env)


def test_the_command_hook_denies_and_allows(tmp_path: Path, make_worktree: Callable[[Path], Path]) -> None:
    wt = make_worktree(tmp_path / "wt")
    command = hook_command({"worktree": str(wt), "protected": ["eval/**"], "check": ""})
    deny = run_hook(command, json.dumps({"tool_name": "Bash", "tool_input": {"command": "git diff --output=/x"}}))
    assert deny.returncode == 0
    assert json.loads(deny.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    allow = run_hook(command, json.dumps({"tool_name": "Edit", "tool_input": {"file_path": str(wt / "tools" / "a")}}))
    assert (allow.returncode, json.loads(allow.stdout)) == (0, {})


def test_the_command_hook_fails_closed(tmp_path: Path, make_worktree: Callable[[Path], Path]) -> None:
    """Claude Code blocks a call when a command hook prints a deny decision (exit 0) or exits 2; any other exit
    code is a non-blocking error and the call goes ahead. A guard that breaks must therefore never exit 1."""
    wt = make_worktree(tmp_path / "wt")
    command = hook_command({"worktree": str(wt), "protected": [], "check": ""})
    broken_input = run_hook(command, json.dumps({"tool_name": "Edit", "tool_input": ["not", "an", "object"]}))
    assert broken_input.returncode == 0, broken_input.stderr
    assert json.loads(broken_input.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    not_json = run_hook(command, "this is not JSON")
    assert json.loads(not_json.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    # Python itself cannot start: the shell's `|| exit 2` still blocks the call
    dead = run_hook(command, "{}", env={"PATH": os.environ["PATH"], "PYTHONHOME": str(tmp_path / "no-python-here")})
    assert dead.returncode == 2


def test_the_sdk_hook_fails_closed_when_the_guard_raises(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    diagnosis_request: Callable[..., Any],
    make_worktree: Callable[[Path], Path],
) -> None:
    def broken(*args: object, **kwargs: object) -> dict[str, object]:
        raise RuntimeError("guard bug")

    monkeypatch.setattr(guard, "guard_decision", broken)
    wt = make_worktree(tmp_path / "wt")
    transport = FakeTransport(
        [
            Hook("Write", {"file_path": str(wt / "tools" / "search.py"), "content": "x"}),
            result(structured={"status": "no_patch", "reason": "nothing to do"}),
        ]
    )
    backend = ClaudeBackend(
        SessionConfig(backend="claude", retries=0),
        run_dir=tmp_path / "run",
        seed=0,
        transport_factory=lambda: transport,
    )
    backend.diagnose_patch(diagnosis_request(tmp_path / "run", wt))
    response = transport.hook_responses[0]["response"]
    assert response["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "guard bug" in response["hookSpecificOutput"]["permissionDecisionReason"]
