"""The command backend running tests/fake_agent.py (a real subprocess) in a real git worktree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from repo_paths import FAKE_AGENT

from saddler.agentcli import build_argv, parse_usage
from saddler.config import SessionConfig
from saddler.errors import AuthenticationError, BackendError, ConfigError
from saddler.sessions.agent_edits import changed_files
from saddler.sessions.command import CommandBackend
from saddler.sessions.presets import PRESETS, resolve_command

FAKE = FAKE_AGENT
TEMPLATE = f"{sys.executable} {FAKE} {{prompt_file}}"


def make_backend(tmp_path: Path, command: str = TEMPLATE, **config: object) -> CommandBackend:
    cfg = SessionConfig(backend="command", command=command, retries=1, **config)  # type: ignore[arg-type]
    b = CommandBackend(cfg, benchmark=None, run_dir=tmp_path / "run", seed=0, sleep=lambda s: None)
    return b


@pytest.fixture(autouse=True)
def _clean_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAKE_AGENT_MODE", raising=False)


def test_diagnosis_edits_the_worktree_and_reads_the_result_file(
    tmp_path: Path, diagnosis_request: Callable[..., Any], make_worktree: Callable[[Path], Path]
) -> None:
    wt = make_worktree(tmp_path / "wt")
    b = make_backend(tmp_path)
    out = b.diagnose_patch(diagnosis_request(tmp_path / "run", wt))
    assert out.status == "patched", out
    assert out.hypothesis is not None and out.hypothesis.files == ["tools/search.py"]
    hyp = out.hypothesis
    assert (hyp.patch_kind, hyp.origin, hyp.target_tasks) == (
        "capability",
        "llm:add-a-verification-step-to-tools-search-py-iteration-3",
        ["t1"],
    )
    assert changed_files(wt) == ["tools/search.py"]
    assert "verify results" in (wt / "tools" / "search.py").read_text()
    stats = out.stats
    assert (stats.backend, stats.turns, stats.tokens_in, stats.tokens_out, stats.cost_usd, stats.outcome) == (
        "command",
        3,
        1200,
        340,
        0.0125,
        "ok",
    )
    transcript = [json.loads(x) for x in Path(stats.transcript_path or "").read_text().splitlines()]
    assert [t["kind"] for t in transcript] == ["prompt", "attempt", "stdout", "exit", "outcome"]
    assert transcript[3]["returncode"] == 0
    assert b.last_argv[:2] == [sys.executable, str(FAKE)]
    assert b.last_argv[2].endswith("sessions/3-diagnosis_patch.prompt.md")


def test_reflection_and_evolution_through_the_command(
    tmp_path: Path, evolution_request: Callable[..., Any], reflection_request: Callable[..., Any]
) -> None:
    b = make_backend(tmp_path)
    refl = b.reflect(reflection_request(tmp_path / "run"))
    assert [(x.task_id, x.category, x.attribution) for x in refl.lessons] == [
        ("t1", "fixed", "uncertain"),
        ("t2", "still_passing", "uncertain"),
    ]
    evo = b.evolve(evolution_request(tmp_path / "run"))
    assert (evo.action, evo.parent_node_id, evo.stats.outcome) == ("continue", 3, "ok")
    assert Path(tmp_path / "run" / "sessions" / "3-evolution.result.json").is_file()


def test_agent_without_a_result_file_is_a_failed_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reflection_request: Callable[..., Any]
) -> None:
    monkeypatch.setenv("FAKE_AGENT_MODE", "no_result")
    out = make_backend(tmp_path).reflect(reflection_request(tmp_path / "run"))
    assert out.lessons == [] and out.stats.outcome == "failed:unparsable_output"
    assert out.stats.cost_usd == 0.0125


def test_max_turns_reported_by_the_agent(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    diagnosis_request: Callable[..., Any],
    make_worktree: Callable[[Path], Path],
) -> None:
    monkeypatch.setenv("FAKE_AGENT_MODE", "max_turns")
    wt = make_worktree(tmp_path / "wt")
    out = make_backend(tmp_path).diagnose_patch(diagnosis_request(tmp_path / "run", wt))
    got = (out.status, out.stats.outcome, out.stats.turns, out.stats.cost_usd)
    assert got == ("failed", "failed:max_turns", 40, 0.5)


def test_timeout_kills_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, evolution_request: Callable[..., Any]
) -> None:
    monkeypatch.setenv("FAKE_AGENT_MODE", "hang")
    out = make_backend(tmp_path, timeout_s=1.0).evolve(evolution_request(tmp_path / "run"))
    assert (out.action, out.parent_node_id, out.stats.outcome) == ("continue", 3, "failed:timeout")


def test_transient_failure_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, evolution_request: Callable[..., Any]
) -> None:
    monkeypatch.setenv("FAKE_AGENT_MODE", "rate_limit_once")
    monkeypatch.setenv("FAKE_AGENT_STATE", str(tmp_path / "state"))
    out = make_backend(tmp_path).evolve(evolution_request(tmp_path / "run"))
    assert out.stats.outcome == "ok"
    kinds = [json.loads(x)["kind"] for x in Path(out.stats.transcript_path or "").read_text().splitlines()]
    assert kinds.count("attempt") == 2 and "retry" in kinds


def test_missing_cli_is_a_backend_error(tmp_path: Path, evolution_request: Callable[..., Any]) -> None:
    b = make_backend(tmp_path, command="definitely-not-an-agent-cli {prompt}")
    with pytest.raises(BackendError, match="not found on PATH"):
        b.evolve(evolution_request(tmp_path / "run"))


def test_templates_and_presets() -> None:
    assert build_argv("agent --msg {prompt} -x={model}", {"prompt": "two words {x}", "model": "m"}) == [
        "agent",
        "--msg",
        "two words {x}",
        "-x=m",
    ]
    with pytest.raises(ConfigError, match=r"\{nope\}"):
        build_argv("agent {nope}", {"prompt": "p"})
    with pytest.raises(ConfigError, match=r"sessions\.command is empty"):
        resolve_command(SessionConfig(command=""))
    assert resolve_command(SessionConfig(command="codex")) == (PRESETS["codex"].template, "OPENAI_API_KEY")
    assert resolve_command(SessionConfig(command="claude"))[1] == "ANTHROPIC_API_KEY"


def test_claude_preset_argv_carries_limits_tools_and_the_guard_hook(
    tmp_path: Path, diagnosis_request: Callable[..., Any], make_worktree: Callable[[Path], Path]
) -> None:
    wt = make_worktree(tmp_path / "wt")
    b = make_backend(tmp_path, command="claude", max_turns=9, max_budget_usd=0.75)
    req = diagnosis_request(tmp_path / "run", wt)
    argv, stdin = b.argv_for("diagnosis_patch", req, "PROMPT")
    assert argv[:2] == ["claude", "-p"] and "PROMPT" not in argv and stdin == "PROMPT"
    flags = dict(zip(argv[2:-1:2], argv[3:-1:2], strict=True))
    assert argv[-1] == "--no-session-persistence"
    assert (flags["--max-turns"], flags["--max-budget-usd"], flags["--setting-sources"]) == ("9", "0.75", "")
    assert flags["--tools"] == "Read,Glob,Grep,Bash,Edit,Write"
    assert "Bash(evo-dag:*)" in flags["--allowedTools"].split(",")
    assert "WebSearch" not in flags["--allowedTools"]
    assert json.loads(flags["--json-schema"])["title"] == "DiagnosisResult"
    assert Path(flags["--system-prompt-file"]).read_text().startswith("You are an optimizer agent inside saddler.")
    assert "--effort" not in flags and "--fallback-model" not in flags
    explore = diagnosis_request(tmp_path / "run", wt, exploration=True)
    assert b.web_search("diagnosis_patch", explore)
    assert not make_backend(tmp_path).web_search("diagnosis_patch", explore)  # custom template: no tool list
    explore_argv, _ = b.argv_for("diagnosis_patch", explore, "PROMPT")
    assert explore_argv[explore_argv.index("--tools") + 1].endswith(",WebSearch,WebFetch")
    assert {"WebSearch", "WebFetch"} <= set(explore_argv[explore_argv.index("--allowedTools") + 1].split(","))
    hook = json.loads(flags["--settings"])["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    # run the hook exactly as the CLI would: through a shell, the hook input on stdin, the decision on stdout
    deny = subprocess.run(
        hook,
        shell=True,
        capture_output=True,
        text=True,
        check=True,
        input=json.dumps({"tool_name": "Edit", "tool_input": {"file_path": str(wt / "eval" / "grader.py")}}),
    )
    assert json.loads(deny.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    allow = subprocess.run(
        hook,
        shell=True,
        capture_output=True,
        text=True,
        check=True,
        input=json.dumps({"tool_name": "Edit", "tool_input": {"file_path": str(wt / "tools" / "search.py")}}),
    )
    assert json.loads(allow.stdout) == {}


def test_parse_usage_shapes() -> None:
    codex = "\n".join(
        json.dumps(x)
        for x in [
            {"type": "thread.started"},
            {"type": "turn.completed", "usage": {"input_tokens": 100, "cached_input_tokens": 50, "output_tokens": 10}},
            {"type": "turn.completed", "usage": {"input_tokens": 200, "output_tokens": 20}},
        ]
    )
    assert {k: v for k, v in parse_usage(codex).items() if k != "final"} == {
        "turns": 2,
        "tokens_in": 300,
        "tokens_out": 30,
        "cost_usd": 0.0,
    }
    pi = "\n".join(
        json.dumps(x)
        for x in [
            {"type": "message_end", "message": {"role": "user"}},
            {
                "type": "message_end",
                "message": {
                    "role": "assistant",
                    "usage": {"input": 10, "cacheRead": 5, "output": 3, "cost": {"total": 0.002}},
                },
            },
        ]
    )
    assert {k: v for k, v in parse_usage(pi).items() if k != "final"} == {
        "turns": 1,
        "tokens_in": 15,
        "tokens_out": 3,
        "cost_usd": 0.002,
    }
    assert parse_usage("plain text output")["turns"] == 0


@pytest.mark.slow
def test_claude_preset_against_the_real_bundled_cli_without_credentials(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    diagnosis_request: Callable[..., Any],
    make_worktree: Callable[[Path], Path],
) -> None:
    """The preset's flags are accepted by the real CLI, which then refuses: no key, empty HOME, nothing spent."""
    import claude_agent_sdk

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("CLAUDE_CODE_OAUTH_TOKEN", raising=False)
    wt = make_worktree(tmp_path / "wt")
    b = make_backend(tmp_path, command="claude", effort="high", fallback_model="claude-sonnet-4-5")
    with pytest.raises(AuthenticationError, match="set ANTHROPIC_API_KEY"):
        b.diagnose_patch(diagnosis_request(tmp_path / "run", wt))
    transcript = [
        json.loads(x) for x in (tmp_path / "run" / "sessions" / "3-diagnosis_patch.jsonl").read_text().splitlines()
    ]
    final = json.loads(next(t["line"] for t in transcript if t["kind"] == "stdout"))
    assert (final["type"], final["is_error"], final["total_cost_usd"]) == ("result", True, 0)
    stderr = next(t for t in transcript if t["kind"] == "exit")["stderr"]
    assert "unknown option" not in stderr and "is invalid" not in stderr and "Input must be provided" not in stderr
    assert {"--effort", "--fallback-model", "--system-prompt-file", "--tools", "--json-schema"} <= set(b.last_argv)


def test_an_agent_that_commits_gets_its_commit_undone_into_the_worktree(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    diagnosis_request: Callable[..., Any],
    make_worktree: Callable[[Path], Path],
) -> None:
    monkeypatch.setenv("FAKE_AGENT_MODE", "commits")
    wt = make_worktree(tmp_path / "wt")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=wt, capture_output=True, text=True).stdout
    out = make_backend(tmp_path).diagnose_patch(diagnosis_request(tmp_path / "run", wt))
    assert out.status == "patched"
    assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=wt, capture_output=True, text=True).stdout == head
    assert changed_files(wt) == ["tools/search.py"]


def test_a_prompt_too_long_for_one_argument_goes_by_reference(
    tmp_path: Path, evolution_request: Callable[..., Any]
) -> None:
    b = make_backend(tmp_path, command="agent --instructions {prompt}")
    req = evolution_request(tmp_path / "run")
    files = b.session_files("evolution", req)
    small = b.values("evolution", req, "short prompt", files)["prompt"]
    big = b.values("evolution", req, "x" * 200_000, files)["prompt"]
    assert small == "short prompt"
    assert big.startswith(f"Your full instructions are in the file {files['prompt']}") and len(big) < 300
