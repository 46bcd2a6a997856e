"""`saddler doctor` per backend (CLI and version, the flags saddler passes, key, sandbox) and the
claude-agent-sdk pin (pyproject, the installed SDK's options, the doctor's version check)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from saddler.cli.app import app
from saddler.config import RunConfig
from saddler.doctor import healthy, run_checks
from saddler.doctor_backends import sdk_version_check
from saddler.sessions import confine
from saddler.sessions.claude import MIN_SDK_VERSION

ROOT = Path(__file__).resolve().parents[1]
BWRAP_OK, _ = confine.bwrap_works()


def doctor_json(run_dir: Path, command: str) -> tuple[int, dict[str, dict[str, object]]]:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "saddler.toml").write_text(
        f'[run]\nname = "r"\n[run.sessions]\nbackend = "command"\ncommand = "{command}"\n'
    )
    result = CliRunner().invoke(app, ["doctor", str(run_dir), "--json"])
    out = json.loads(result.stdout)
    return result.exit_code, {c["name"]: c for c in out["checks"]}


def test_the_claude_preset_is_checked_flag_by_flag(outside: Path, fakes: Path) -> None:
    code, checks = doctor_json(outside / "run", "claude")
    assert code == 0, checks
    assert list(checks) == [
        "python",
        "git",
        "claude",
        "flags",
        "env:ANTHROPIC_API_KEY",
        "sandbox",
        "evo-dag",
        "rollout sandbox",
    ]
    assert checks["claude"]["detail"] == "2.1.332 (Claude Code)"
    assert checks["flags"]["detail"] == (
        "all 16 flags saddler passes are supported (--max-turns, --system-prompt-file accepted though unlisted)"
    )
    assert "guard hook refuses" in str(checks["sandbox"]["detail"])


@pytest.mark.skipif(not BWRAP_OK, reason="bubblewrap cannot run here")
def test_the_codex_preset_names_its_own_sandbox(outside: Path, fakes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(outside / "codex-home"))
    code, checks = doctor_json(outside / "run", "codex")
    assert code == 0, checks
    assert checks["codex"]["detail"] == "codex-cli 0.171.0"
    assert checks["flags"]["ok"] and checks["env:OPENAI_API_KEY"]["ok"]
    assert "codex's own sandbox: diagnosis `workspace-write`" in str(checks["sandbox"]["detail"])
    assert checks["sandbox:start"]["ok"] and "codex sandbox --config" in str(checks["sandbox:start"]["detail"])
    assert checks["evo-dag"] == {
        "name": "evo-dag",
        "ok": True,
        "required": True,
        "detail": "`evo-dag --help` runs inside saddler's bubblewrap and codex's own sandbox",
    }


def test_codex_whose_sandbox_helper_cannot_start_fails_the_doctor(
    outside: Path, fakes: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issue 21.6: CODEX_HOME under /tmp: every session command would fail while codex exits 0; the doctor probes
    `codex sandbox -- true` with the sessions' CODEX_HOME and settings and says what to do."""
    home = Path(tempfile.mkdtemp(prefix="codex-home-", dir="/tmp"))
    try:
        monkeypatch.setenv("CODEX_HOME", str(home))
        code, checks = doctor_json(outside / "run", "codex")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert code == 1
    start = checks["sandbox:start"]
    assert (start["ok"], start["required"]) == (False, True)
    assert "bwrap: execvp codex-linux-sandbox: No such file or directory" in str(start["detail"])
    assert "set CODEX_HOME to a folder outside /tmp" in str(start["detail"])
    assert not checks["evo-dag"]["ok"] and "CODEX_HOME" in str(checks["evo-dag"]["detail"])


def test_the_pi_preset_needs_bubblewrap(outside: Path, fakes: Path) -> None:
    code, checks = doctor_json(outside / "run", "pi")
    assert checks["pi"]["detail"] == "0.73.1" and checks["flags"]["ok"]
    assert (checks["sandbox"]["ok"], checks["sandbox"]["required"]) == (BWRAP_OK, True)
    assert code == (0 if BWRAP_OK else 1), checks
    if BWRAP_OK:  # pi and evo-dag started inside the very bubblewrap a session gets
        assert checks["sandbox:start"]["detail"] == "`pi --version` runs inside saddler's bubblewrap"
        assert checks["evo-dag"]["detail"] == "`evo-dag --help` runs inside saddler's bubblewrap"
    config = RunConfig.model_validate({"sessions": {"backend": "command", "command": "pi"}})
    missing = {c.name: c for c in run_checks(config, bwrap=lambda: (False, "bwrap not found on PATH"))}
    assert missing["sandbox"].ok is False and missing["sandbox"].detail == "bwrap not found on PATH; pi would not start"
    unconfined = RunConfig.model_validate({"sessions": {"backend": "command", "command": "pi", "sandbox": "none"}})
    warned = {c.name: c for c in run_checks(unconfined, bwrap=lambda: (False, "bwrap not found on PATH"))}
    assert (warned["sandbox"].ok, warned["sandbox"].required) == (True, False)
    assert warned["sandbox"].detail == 'none: pi may write anywhere your user can (sessions.sandbox = "none")'


@pytest.mark.skipif(not BWRAP_OK, reason="bubblewrap cannot run here")
def test_pi_that_cannot_start_inside_bubblewrap_fails_the_doctor(outside: Path, fakes: Path) -> None:
    """Issue 21.2/6: `pi --version` runs outside, but not inside the sandbox: a shim (as nvm or asdf install)
    execs an interpreter under /tmp by its path. The doctor runs it inside the bubblewrap the sessions get."""
    shims = Path(tempfile.mkdtemp(prefix="node-shim-", dir="/tmp"))
    try:
        (shims / "node").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
        (shims / "node").chmod(0o755)
        pi = outside / "bin" / "pi"
        pi.write_text(pi.read_text().replace(f"exec {sys.executable} ", f"exec {shims / 'node'} "))
        code, checks = doctor_json(outside / "run", "pi")
    finally:
        shutil.rmtree(shims, ignore_errors=True)
    assert checks["pi"]["ok"] and code == 1
    start = checks["sandbox:start"]
    assert start["ok"] is False and start["detail"].startswith("`pi --version` fails inside saddler's bubblewrap: ")
    assert f"{shims / 'node'}: not found" in start["detail"]
    assert "install pi and node where the sandbox finds them" in start["detail"]


def test_a_cli_without_a_flag_saddler_passes_fails_the_doctor(outside: Path, fakes: Path) -> None:
    old = outside / "bin" / "codex"  # an older codex: no --output-schema, no --output-last-message
    old.write_text(
        '#!/bin/sh\nif [ "$1" = "--version" ]; then echo "codex-cli 0.20.0"; exit 0; fi\n'
        'echo "Usage: codex exec [OPTIONS] [PROMPT]"\n'
        'echo "  --json --skip-git-repo-check --sandbox --model --config"\n'
    )
    code, checks = doctor_json(outside / "run", "codex")
    assert code == 1
    assert checks["flags"] == {
        "name": "flags",
        "ok": False,
        "required": True,
        "detail": "codex does not know --output-schema, --output-last-message (per `codex exec --help`); upgrade it",
    }


def test_without_a_run_every_preset_is_listed_for_information(fakes: Path) -> None:
    checks = run_checks(None, bwrap=lambda: (True, "bubblewrap 0.8.0"))
    names = [c.name for c in checks]
    for preset in ("claude", "codex", "pi"):
        assert preset in names
    assert "pi:sandbox" in names and "claude-agent-sdk" in names
    assert healthy(checks)


def test_pyproject_pins_the_oldest_sdk_with_every_option_used() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"claude-agent-sdk>={MIN_SDK_VERSION}" in deps
    assert MIN_SDK_VERSION == "0.1.76"  # ResultMessage.api_error_status arrived in 0.1.76


def test_the_installed_sdk_has_every_option_and_field_used() -> None:
    from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ResultMessage

    options = {f.name for f in dataclasses.fields(ClaudeAgentOptions)}
    assert {"output_format", "max_budget_usd", "fallback_model", "tools", "setting_sources", "effort",
            "allowed_tools", "disallowed_tools", "permission_mode", "hooks", "add_dirs", "env"} <= options  # fmt: skip
    results = {f.name for f in dataclasses.fields(ResultMessage)}
    assert {"structured_output", "api_error_status", "model_usage", "errors", "total_cost_usd", "usage",
            "num_turns", "subtype", "is_error", "result"} <= results  # fmt: skip
    assert "error" in {f.name for f in dataclasses.fields(AssistantMessage)}


@pytest.mark.parametrize(("installed", "ok"), [("0.1.75", False), ("0.1.76", True), ("0.2.189", True)])
def test_the_doctor_refuses_an_sdk_older_than_the_pin(installed: str, ok: bool) -> None:
    check = sdk_version_check(installed, required=True)
    assert check.ok is ok
    if not ok:
        assert check.detail == (
            "claude-agent-sdk 0.1.75 is older than 0.1.76, the oldest with every option saddler uses; "
            "pip install 'claude-agent-sdk>=0.1.76'"
        )
