"""End to end: `saddler run` on opsdesk with the command backend pointed at tests/fake_agent.py."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from repo_paths import FAKE_AGENT
from typer.testing import CliRunner

from saddler.cli.app import app

FAKE = FAKE_AGENT

pytestmark = pytest.mark.slow


def test_saddler_run_with_the_command_backend_records_every_session(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    command = f"{sys.executable} {FAKE} {{prompt_file}}"
    runner = CliRunner()
    init = runner.invoke(
        app,
        [
            "init",
            str(run_dir),
            "--template",
            "opsdesk",
            "--backend",
            "command",
            "--seed",
            "1",
            "--set",
            f"sessions.command={json.dumps(command)}",
            "--set",
            "loop.max_iterations=2",
            "--set",
            "loop.parallel_iterations=1",  # iteration 2 evolves after iteration 1 (tests/e2e/test_parallel_loop.py)
            "--set",
            "loop.batch_size=3",
            "--set",
            "loop.test_runs=1",
            "--set",
            "executor.workers=1",
        ],
    )
    assert init.exit_code == 0, init.output
    result = runner.invoke(app, ["run", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output

    db = sqlite3.connect(run_dir / "evodag.sqlite")
    rows = db.execute(
        "SELECT iteration, role, backend, outcome, cost_usd, turns, transcript_path FROM sessions ORDER BY id"
    ).fetchall()
    roles = [(it, role) for it, role, *_ in rows]
    assert {role for it, role in roles if it == 2} == {"diagnosis_patch", "reflection", "evolution"}, roles
    assert {role for it, role in roles if it == 1} >= {"diagnosis_patch", "reflection"}, roles
    assert all(backend == "command" for _, _, backend, *_ in rows)
    for _it, _role, _backend, outcome, cost, turns, transcript in rows:
        assert outcome in ("ok", "no_patch"), rows
        assert (cost, turns) == (0.0125, 3)
        assert Path(transcript).is_file()
    # the fake agent's edit became a candidate with its hypothesis and an edge carrying the diff
    nodes = db.execute("SELECT id, hypothesis, status FROM nodes WHERE parent_id IS NOT NULL").fetchall()
    assert len(nodes) >= 2, "a candidate per iteration was expected"
    assert all(status != "invalid" for *_, status in nodes), nodes
    hypotheses = [json.loads(h) for _, h, _ in nodes]
    assert all(h["origin"].startswith("llm:add-a-verification-step") for h in hypotheses)
    # the agent queried history through the evo-dag CLI: none before iteration 1, reflection's lessons after
    assert hypotheses[0]["diagnosis"].endswith("(evo-dag lessons: 0)")
    n_lessons_1 = db.execute("SELECT COUNT(*) FROM lessons WHERE iteration = 1").fetchone()[0]
    assert n_lessons_1 > 0 and hypotheses[1]["diagnosis"].endswith(f"(evo-dag lessons: {n_lessons_1})")
    edges = db.execute("SELECT files_changed FROM edges").fetchall()
    assert any(json.loads(files) for (files,) in edges)
    lessons = db.execute("SELECT attribution FROM lessons").fetchall()
    assert lessons and {a for (a,) in lessons} == {"uncertain"}


def test_saddler_run_with_the_claude_backend_stops_at_the_first_session_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real bundled claude CLI, with no key and an empty HOME: refused before any API call."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("CLAUDE_CODE_OAUTH_TOKEN", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    run_dir = tmp_path / "run"
    runner = CliRunner()
    init = runner.invoke(
        app,
        [
            "init",
            str(run_dir),
            "--template",
            "opsdesk",
            "--backend",
            "claude",
            "--set",
            "loop.max_iterations=3",
            "--set",
            "loop.batch_size=3",
            "--set",
            "sessions.retries=0",
            "--set",
            "executor.workers=1",
        ],
    )
    assert init.exit_code == 0, init.output
    result = runner.invoke(app, ["run", str(run_dir)])
    assert result.exit_code == 1
    assert "error: Anthropic authentication failed: set ANTHROPIC_API_KEY" in result.output
    transcripts = sorted(p.name for p in (run_dir / "sessions").glob("*.jsonl"))
    assert transcripts == ["1-diagnosis_patch.jsonl"]
