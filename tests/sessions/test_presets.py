"""The claude, codex and pi presets against stand-ins that behave like the real CLIs (tests/fake_clis): flags,
tools, hooks, sandboxes, output formats, exit codes. Run folders are outside /tmp (see plugins/clis.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from repo_paths import REPO

from saddler.errors import BackendError, ConfigError
from saddler.sessions import confine
from saddler.sessions.agent_edits import changed_files
from saddler.sessions.prompts import load_template

BWRAP_OK, BWRAP_WHY = confine.bwrap_works()


@pytest.fixture
def run_all_roles(
    make_worktree: Callable[[Path], Path],
    command_backend: Callable[..., Any],
    diagnosis_request: Callable[..., Any],
    reflection_request: Callable[..., Any],
    evolution_request: Callable[..., Any],
) -> Callable[..., tuple[Any, ...]]:
    """`run_all_roles(run_dir, command, **session_config)`: one diagnosis, reflection and evolution session through
    the command backend; returns (worktree, backend, diagnosis, reflection, evolution)."""

    def run(run_dir: Path, command: str, **config: object) -> tuple[Any, ...]:
        wt = make_worktree(run_dir / "worktrees" / "c1")
        b = command_backend(run_dir, command, **config)
        diag = b.diagnose_patch(diagnosis_request(run_dir, wt))
        refl = b.reflect(reflection_request(run_dir))
        evo = b.evolve(evolution_request(run_dir))
        return wt, b, diag, refl, evo

    return run


def test_codex_returns_a_diagnosis_from_a_run_folder_outside_tmp(
    outside: Path,
    fakes: Path,
    records: Callable[[Path], list[dict[str, Any]]],
    run_all_roles: Callable[..., tuple[Any, ...]],
) -> None:
    run_dir = outside / "run"
    wt, _, diag, refl, evo = run_all_roles(run_dir, "codex", model="gpt-5.2-codex")
    assert (diag.status, diag.stats.outcome) == ("patched", "ok"), diag.stats.error
    assert diag.hypothesis is not None and diag.hypothesis.files == ["tools/search.py"]
    assert diag.reason == ""  # the strict schema's explicit null was dropped, not validated as a string
    assert changed_files(wt) == ["tools/search.py"]
    assert [(x.task_id, x.category) for x in refl.lessons] == [("t1", "fixed"), ("t2", "still_passing")]
    assert (evo.action, evo.parent_node_id, evo.stats.outcome) == ("continue", 3, "ok")
    # codex reports one turn per exec; its edit and its answer were two model responses (issue 21.7)
    assert (diag.stats.turns, diag.stats.tokens_in, diag.stats.tokens_out) == (2, 1500, 200)
    runs = records(fakes)
    assert [r["sandbox"] for r in runs] == ["workspace-write", "read-only", "read-only"]
    assert all(w["outcome"] == "ok" for r in runs for w in r["writes"])
    assert all(r["schema"] for r in runs)
    system = (run_dir / "sessions" / "3-diagnosis_patch.system.md").read_text()
    assert runs[0]["config"]["developer_instructions"] == system
    assert "Session role: diagnosis_patch." in system
    argv = runs[0]["argv"]
    assert argv[argv.index("--model") + 1] == "gpt-5.2-codex"
    assert "--add-dir" not in argv  # nothing outside the worktree is writable
    assert runs[0]["cwd"] == str(wt) and runs[1]["cwd"] == str(run_dir)


@pytest.mark.parametrize("preset", ["claude", "codex", "pi"])
def test_a_300_kb_prompt_reaches_every_preset_intact(
    outside: Path,
    fakes: Path,
    preset: str,
    command_backend: Callable[..., Any],
    evolution_request: Callable[..., Any],
    records: Callable[[Path], list[dict[str, Any]]],
) -> None:
    if preset == "pi" and not BWRAP_OK:
        pytest.skip(f"pi runs confined and bubblewrap cannot run here: {BWRAP_WHY}")
    run_dir = outside / "run"
    big = outside / "evolution-big.md"
    appendix = "".join(f"Appendix line {i:06d}: context the agent must read in full.\n" for i in range(5500))
    big.write_text(load_template("evolution") + "\n## Appendix\n\n" + appendix, encoding="utf-8")
    assert len(big.read_bytes()) > 300_000
    b = command_backend(run_dir, preset, prompts={"evolution": str(big)})
    evo = b.evolve(evolution_request(run_dir))
    assert (evo.action, evo.parent_node_id, evo.stats.outcome) == ("continue", 3, "ok"), evo.stats.error
    sent = (run_dir / "sessions" / "3-evolution.prompt.md").read_text(encoding="utf-8")
    assert len(sent) > 300_000 and sent.endswith(appendix)
    [run] = records(fakes)
    assert hashlib.sha256(sent.encode("utf-8")).hexdigest() in run["part_sha256"]
    assert all(len(a) < 100_000 for a in b.last_argv)


def test_claude_shows_only_saddlers_tools_and_its_hook_guards_them(
    outside: Path,
    fakes: Path,
    monkeypatch: pytest.MonkeyPatch,
    records: Callable[[Path], list[dict[str, Any]]],
    run_all_roles: Callable[..., tuple[Any, ...]],
) -> None:
    escape = outside / "escape.txt"
    monkeypatch.setenv("FAKE_CLI_ESCAPE", str(escape))
    monkeypatch.setenv(
        "FAKE_CLI_BASH", json.dumps([f"evo-dag export --out {outside / 'dag.json'}", f"git diff --output={escape}"])
    )
    run_dir = outside / "run"
    wt, _, diag, refl, evo = run_all_roles(run_dir, "claude")
    assert (diag.status, refl.stats.outcome, evo.stats.outcome) == ("patched", "ok", "ok")
    runs = records(fakes)
    assert runs[0]["tools"] == ["Read", "Glob", "Grep", "Bash", "Edit", "Write"]
    assert runs[1]["tools"] == runs[2]["tools"] == ["Read", "Glob", "Grep", "Bash"]
    assert not {"Agent", "Skill", "Workflow"} & {t for r in runs for t in r["tools"]}
    outcomes = {
        (c["tool"], c["input"].get("file_path") or c["input"].get("command")): c["outcome"] for c in runs[0]["calls"]
    }
    assert outcomes[("Write", str(escape))].startswith("denied by hook: ")
    assert outcomes[("Edit", str(wt / "tools" / "search.py"))] == "ok"
    assert outcomes[("Bash", f"evo-dag export --out {outside / 'dag.json'}")].startswith("denied by hook: ")
    assert outcomes[("Bash", f"git diff --output={escape}")].startswith("denied by hook: ")
    assert not escape.exists() and not (outside / "dag.json").exists()
    assert all(r["schema"] for r in runs)  # the answer came back as structured output
    assert not (run_dir / "sessions" / "3-diagnosis_patch.result.json").exists()


@pytest.mark.skipif(not BWRAP_OK, reason=f"bubblewrap cannot run here: {BWRAP_WHY}")
def test_pi_is_confined_to_the_worktree(
    outside: Path,
    fakes: Path,
    monkeypatch: pytest.MonkeyPatch,
    records: Callable[[Path], list[dict[str, Any]]],
    run_all_roles: Callable[..., tuple[Any, ...]],
) -> None:
    escape = outside / "escape.txt"
    monkeypatch.setenv("FAKE_CLI_ESCAPE", str(escape))
    run_dir = outside / "run"
    wt, b, diag, refl, evo = run_all_roles(run_dir, "pi", model="claude-sonnet-4-5")
    assert (diag.status, refl.stats.outcome, evo.stats.outcome) == ("patched", "ok", "ok"), diag.stats.error
    assert not escape.exists()
    assert changed_files(wt) == ["tools/search.py"]
    runs = records(fakes)
    [escaped] = [c for c in runs[0]["calls"] if c["path"] == str(escape)]
    assert "OSError" in escaped["outcome"]  # the write failed (read-only file system), the session went on
    assert runs[0]["tools"] == ["read", "grep", "find", "ls", "bash", "edit", "write"]
    assert runs[1]["tools"] == runs[2]["tools"] == ["read", "grep", "find", "ls", "bash"]
    argv = runs[0]["argv"]
    assert argv[argv.index("--model") + 1] == "claude-sonnet-4-5"
    assert b.last_argv[0] == "bwrap"
    assert diag.stats.cost_usd == 0.004


def test_pi_refuses_to_run_unconfined_unless_told_to(
    outside: Path,
    fakes: Path,
    monkeypatch: pytest.MonkeyPatch,
    command_backend: Callable[..., Any],
    evolution_request: Callable[..., Any],
    run_all_roles: Callable[..., tuple[Any, ...]],
) -> None:
    monkeypatch.setattr(confine, "bwrap_works", lambda *a, **k: (False, "bwrap not found on PATH"))
    run_dir = outside / "run"
    b = command_backend(run_dir, "pi")
    with pytest.raises(BackendError, match=r'Install bubblewrap, or set sessions\.sandbox = "none"'):
        b.evolve(evolution_request(run_dir))
    escape = outside / "escape.txt"
    monkeypatch.setenv("FAKE_CLI_ESCAPE", str(escape))
    _, b, diag, *_ = run_all_roles(outside / "run2", "pi", sandbox="none")
    assert diag.status == "patched" and escape.exists()  # the documented cost of sandbox = "none"
    assert b.last_argv[0] == "pi"


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        ("claude", ["--effort", "high"]),
        ("codex", ['--config=model_reasoning_effort="high"']),
        ("pi", ["--thinking", "high"]),
    ],
)
def test_effort_reaches_each_cli_only_when_set(
    outside: Path,
    fakes: Path,
    preset: str,
    expected: list[str],
    monkeypatch: pytest.MonkeyPatch,
    command_backend: Callable[..., Any],
    evolution_request: Callable[..., Any],
) -> None:
    monkeypatch.setattr(confine, "bwrap_works", lambda *a, **k: (True, "test"))
    run_dir = outside / "run"
    b = command_backend(run_dir, preset, effort="high")
    argv, _ = b.argv_for("evolution", evolution_request(run_dir), "PROMPT")
    assert any(argv[i : i + len(expected)] == expected for i in range(len(argv)))
    plain, _ = command_backend(run_dir, preset).argv_for("evolution", evolution_request(run_dir), "PROMPT")
    assert not any("effort" in a or a == "--thinking" for a in plain)


def test_an_effort_a_cli_does_not_take_is_a_config_error(outside: Path, command_backend: Callable[..., Any]) -> None:
    with pytest.raises(ConfigError, match=r"'max' .* codex accepts: minimal, low, medium, high, xhigh"):
        command_backend(outside, "codex", effort="max")
    with pytest.raises(ConfigError, match=r"unknown placeholder\(s\) \{nope\}"):
        command_backend(outside, "agent --x {nope}")


def test_per_role_limits_reach_the_cli(
    outside: Path,
    fakes: Path,
    command_backend: Callable[..., Any],
    diagnosis_request: Callable[..., Any],
    evolution_request: Callable[..., Any],
    make_worktree: Callable[[Path], Path],
) -> None:
    run_dir = outside / "run"
    roles = {"diagnosis_patch": {"max_turns": 150, "max_budget_usd": 7.5}, "evolution": {"model": "claude-haiku-4-5"}}
    b = command_backend(run_dir, "claude", max_turns=12, roles=roles)
    wt = make_worktree(run_dir / "worktrees" / "c1")
    diag, _ = b.argv_for("diagnosis_patch", diagnosis_request(run_dir, wt), "PROMPT")
    evo, _ = b.argv_for("evolution", evolution_request(run_dir), "PROMPT")

    def flag(argv: list[str], name: str) -> str:
        return argv[argv.index(name) + 1]

    assert (flag(diag, "--max-turns"), flag(diag, "--max-budget-usd")) == ("150", "7.5")
    assert (flag(evo, "--max-turns"), flag(evo, "--model"), flag(evo, "--max-budget-usd")) == (
        "12",
        "claude-haiku-4-5",
        "1",
    )


def test_codex_without_a_key_names_the_variable(
    outside: Path,
    fakes: Path,
    monkeypatch: pytest.MonkeyPatch,
    command_backend: Callable[..., Any],
    evolution_request: Callable[..., Any],
) -> None:
    from saddler.errors import AuthenticationError

    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("CODEX_API_KEY", raising=False)
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        command_backend(outside / "run", "codex").evolve(evolution_request(outside / "run"))


def test_the_hook_keeps_claude_out_of_protected_paths(
    outside: Path,
    fakes: Path,
    monkeypatch: pytest.MonkeyPatch,
    command_backend: Callable[..., Any],
    diagnosis_request: Callable[..., Any],
    make_worktree: Callable[[Path], Path],
    records: Callable[[Path], list[dict[str, Any]]],
) -> None:
    run_dir = outside / "run"
    wt = make_worktree(run_dir / "worktrees" / "c1")
    monkeypatch.setenv("FAKE_CLI_ESCAPE", str(wt / "eval" / "grader.py"))
    diag = command_backend(run_dir, "claude").diagnose_patch(diagnosis_request(run_dir, wt))
    assert diag.status == "patched"
    assert changed_files(wt) == ["tools/search.py"]
    [run] = records(fakes)
    [call] = [c for c in run["calls"] if c["input"].get("file_path") == str(wt / "eval" / "grader.py")]
    assert "protected" in call["outcome"]


def test_the_readme_documents_every_placeholder_and_preset() -> None:
    from saddler.sessions.presets import PLACEHOLDERS, PRESETS

    section = (REPO / "docs" / "sessions.md").read_text(encoding="utf-8")
    assert [p for p in PLACEHOLDERS if f"{{{p}}}" not in section] == []
    flat = " ".join(section.split())
    for preset in PRESETS.values():
        assert f"`{preset.name}`" in section and preset.key_variable in section
        assert all(word in flat for word in preset.template.split()), preset.name
