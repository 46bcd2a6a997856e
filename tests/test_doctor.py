"""`saddler doctor`: real executables on a controlled PATH, exact JSON out, exit 1 on a missing prerequisite."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from saddler.cli.app import app
from saddler.config import RunConfig, SessionConfig
from saddler.doctor import healthy, run_checks


def write_run(run_dir: Path, sessions: str, executor: str = "") -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "saddler.toml").write_text(f'[run]\nname = "r"\n[run.sessions]\n{sessions}\n{executor}')
    return run_dir


@pytest.fixture
def path_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """PATH holding git and the scripts a test creates in tmp_path/bin."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git = shutil.which("git")
    assert git is not None
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{Path(git).parent}")

    def add(name: str, body: str) -> Path:
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
        return script

    return add


def expected_base() -> list[dict[str, object]]:
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    python = ".".join(str(v) for v in sys.version_info[:3])
    return [
        {"name": "python", "ok": True, "required": True, "detail": f"Python {python}"},
        {"name": "git", "ok": True, "required": True, "detail": git_version},
    ]


def test_command_backend_with_its_cli_found(tmp_path: Path, path_with, monkeypatch: pytest.MonkeyPatch) -> None:
    path_with("fakecli", 'echo "fakecli 1.2.3"')
    run = write_run(tmp_path / "run", 'backend = "command"\ncommand = "fakecli --go {prompt}"')
    result = CliRunner().invoke(app, ["doctor", str(run), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["ok"], out["backend"]) == (True, "command")
    assert out["checks"][:3] == [
        *expected_base(),
        {"name": "fakecli", "ok": True, "required": True, "detail": "fakecli 1.2.3"},
    ]
    assert [(c["name"], c["required"]) for c in out["checks"][3:]] == [
        ("sandbox", False),  # what confines the agent (a custom template: its own sandbox, if any)
        ("evo-dag", True),  # `evo-dag --help` run as the sessions run it (no sandbox here)
        ("rollout sandbox", False),  # what confines the rollouts
    ]
    assert out["checks"][4]["detail"] == "`evo-dag --help` runs as the sessions run it"


def test_missing_cli_and_key_fail_the_doctor(tmp_path: Path, path_with, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("CODEX_API_KEY", raising=False)
    run = write_run(tmp_path / "run", 'backend = "command"\ncommand = "codex"')
    result = CliRunner().invoke(app, ["doctor", str(run), "--json"])
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["ok"] is False
    assert out["checks"][2:4] == [
        {"name": "codex", "ok": False, "required": True, "detail": "codex not found on PATH; install it"},
        {
            "name": "env:OPENAI_API_KEY",
            "ok": False,
            "required": True,
            "detail": "OPENAI_API_KEY or CODEX_API_KEY is not set; export OPENAI_API_KEY=... first",
        },
    ]


def test_claude_backend_names_the_key_variable(tmp_path: Path, path_with, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("CLAUDE_CODE_OAUTH_TOKEN", raising=False)
    run = write_run(tmp_path / "run", 'backend = "claude"')
    result = CliRunner().invoke(app, ["doctor", str(run)])
    assert result.exit_code == 1
    assert "MISSING  env:ANTHROPIC_API_KEY" in result.stdout
    assert result.stdout.strip().endswith("some required prerequisites are missing")

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-used")
    ok = CliRunner().invoke(app, ["doctor", str(run), "--json"])
    checks = {c["name"]: c for c in json.loads(ok.stdout)["checks"]}
    assert checks["env:ANTHROPIC_API_KEY"] == {
        "name": "env:ANTHROPIC_API_KEY",
        "ok": True,
        "required": True,
        "detail": "ANTHROPIC_API_KEY is set",
    }
    assert checks["claude-agent-sdk"]["ok"] and checks["claude-cli (bundled)"]["required"]
    assert ok.exit_code == (0 if checks["claude-cli (bundled)"]["ok"] else 1)


def test_the_sandbox_is_always_checked_and_a_missing_one_named(path_with, monkeypatch: pytest.MonkeyPatch) -> None:
    from saddler.executor import landlock, sandbox

    monkeypatch.setattr(sandbox, "bwrap_status", lambda: (False, "bubblewrap is not installed"))
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    asked = RunConfig.model_validate({"executor": {"sandbox": "bwrap"}, "sessions": {"backend": "offline"}})
    checks = run_checks(asked, env={}, which=lambda n: f"/x/{n}", version=lambda argv: "v1")
    assert [c.name for c in checks] == ["python", "git", "rollout sandbox"]
    assert not healthy(checks) and checks[-1].required and "apt-get install bubblewrap" in checks[-1].detail
    offline = run_checks(RunConfig(sessions=SessionConfig()), env={}, which=lambda n: f"/x/{n}", version=lambda a: "v1")
    # a warning, not a failure
    assert [c.name for c in offline] == ["python", "git", "rollout sandbox"] and healthy(offline)
    assert offline[-1].to_dict() == {
        "name": "rollout sandbox",
        "ok": False,
        "required": False,
        "detail": "sandbox auto -> none (bubblewrap is not installed; no Landlock on this kernel); not contained: "
        + "; ".join(sandbox.Sandbox("none", "auto", False).uncontained())
        + f"; {sandbox.BWRAP_HINT}",
    }
    ray = RunConfig.model_validate({"executor": {"kind": "ray"}})
    assert "ray" in [c.name for c in run_checks(ray, env={}, which=lambda n: f"/x/{n}", version=lambda a: "v1")]


def test_doctor_says_what_rollouts_run_in_here(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", 'backend = "offline"')
    out = json.loads(CliRunner().invoke(app, ["doctor", str(run), "--json"]).stdout)
    [check] = [c for c in out["checks"] if c["name"] == "rollout sandbox"]
    from saddler.executor.sandbox import resolve_sandbox

    box = resolve_sandbox(RunConfig().executor)
    assert check["ok"] == (box.mode == "bwrap") and check["detail"].startswith(box.describe())


def test_unknown_run_folder_is_a_clean_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["doctor", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "no such file" in result.output


def test_claude_tasks_rollouts_need_the_key_passed_through() -> None:
    def names(config: RunConfig, env: dict[str, str]) -> list[tuple[str, bool]]:
        return [
            (c.name, c.ok) for c in run_checks(config, env=env, which=lambda n: f"/x/{n}", version=lambda argv: "v1")
        ]

    closed = RunConfig.model_validate({"benchmark": "claude-tasks"})
    assert names(closed, {"ANTHROPIC_API_KEY": "k"})[-1] == ("rollout key", False)
    opened = RunConfig.model_validate(
        {"benchmark": "claude-tasks", "executor": {"env_allow": ["PATH", "ANTHROPIC_API_KEY"]}}
    )
    assert names(opened, {"ANTHROPIC_API_KEY": "k"})[-1] == ("rollout key", True)
    assert names(opened, {})[-1] == ("rollout key", False)


@pytest.mark.parametrize(("found", "ok"), [("git version 2.20.1", False), ("git version 2.39.5", True), ("v1", True)])
def test_a_git_too_old_for_ref_transactions_is_named(found: str, ok: bool) -> None:
    """The run keeps one `git update-ref --stdin` open for its refs, with `start`/`commit` transactions (git 2.27)."""
    checks = run_checks(RunConfig(sessions=SessionConfig()), env={}, which=lambda n: f"/x/{n}", version=lambda a: found)
    git = next(c for c in checks if c.name == "git")
    assert (git.ok, git.required) == (ok, True)
    if not ok:
        assert (
            git.detail == "git version 2.20.1 is older than 2.27, which saddler needs (ref transactions); upgrade git"
        )
