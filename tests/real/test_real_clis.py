"""The real-CLI tier (issue 21): `pytest --run-real-clis tests/real` installs the real claude, codex and pi CLIs
from the npm registry (tests/real_clis.py) and drives a short `saddler run` of each preset (command backend)
through the loopback model (tests/loopback_model.py), which plays the sessions with each CLI's own tools."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import real_clis
from loopback_model import LoopbackModel

from saddler.cli.app import app

pytestmark = [pytest.mark.real_clis, pytest.mark.slow]
MODELS = {"claude": "claude-sonnet-4-5", "codex": "gpt-5.1-codex", "pi": "claude-sonnet-4-5"}


@pytest.fixture(scope="module")
def clis() -> dict[str, Path]:
    return real_clis.install()


@pytest.mark.parametrize("preset", ["claude", "codex", "pi"])
def test_a_short_run_of_each_preset_through_the_loopback_model(
    preset: str, clis: dict[str, Path], outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = LoopbackModel().start()
    try:
        env = real_clis.environment(outside / "home", model.url, retries=0, base=dict(__import__("os").environ))
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        run_dir = outside / "run"
        sets = {"sessions.command": json.dumps(preset), "sessions.model": json.dumps(MODELS[preset]),
                "loop.max_iterations": "2", "loop.batch_size": "3", "loop.test_runs": "1", "executor.workers": "1",
                "sessions.retries": "0"}  # fmt: skip
        args = ["init", str(run_dir), "--template", "opsdesk", "--backend", "command", "--seed", "1"]
        for key, value in sets.items():
            args += ["--set", f"{key}={value}"]
        runner = CliRunner()
        assert runner.invoke(app, args).exit_code == 0
        result = runner.invoke(app, ["run", str(run_dir), "--json"])
        assert result.exit_code == 0, result.output
    finally:
        model.stop()
    db = sqlite3.connect(run_dir / "evodag.sqlite")
    rows = db.execute("SELECT iteration, role, outcome, turns, error FROM sessions ORDER BY id").fetchall()
    assert rows and all(outcome in ("ok", "no_patch") for _, _, outcome, _, _ in rows), rows
    assert {role for _, role, *_ in rows} >= {"diagnosis_patch", "reflection"}, rows
    assert not db.execute("SELECT COUNT(*) FROM events WHERE kind = 'session.escaped'").fetchone()[0]
    # the model's edit through the CLI's own edit tool became a candidate
    assert db.execute("SELECT COUNT(*) FROM nodes WHERE parent_id IS NOT NULL").fetchone()[0] >= 1, rows
    assert model.main_requests(), "the CLI never called the model"
    if preset == "codex":  # item 7: no web search outside the exploration diagnosis, real turns counted
        tools = [t.get("type") for r in model.main_requests() for t in r["body"].get("tools", [])]
        assert "web_search" not in tools
        diagnosis = [t for _, role, _, t, _ in rows if role == "diagnosis_patch"]
        assert max(diagnosis) >= 2, rows


@pytest.mark.parametrize("provider", ["claude", "codex", "pi"])
def test_a_fleet_iteration_of_each_provider_through_the_loopback_model(
    provider: str, clis: dict[str, Path], outside: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup
) -> None:
    """Issue 21.8: fleet mode runs each real CLI through its session preset's `fleet` template (the prompt on
    stdin or as `@file`); the loopback model edits solution.py with the CLI's own tool and the fleet keeps it."""
    import os

    from evodag.store import EvoDAG
    from saddler.modes.fleet.loop import FleetRun, init_fleet
    from saddler.modes.fleet.results import read_results

    model = LoopbackModel().start()
    try:
        env = real_clis.environment(outside / "home", model.url, retries=0, base=dict(os.environ))
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        (outside / "fleet").mkdir()
        changes = {"config.provider": provider, "config.model": MODELS[provider], "stop_when.max_iterations": 1}
        fleet_json = fleet_setup(outside / "fleet", **changes)
        (outside / "fleet" / "bin" / "claude").unlink()  # the fleet tests' scripted agent: the real CLI here
        root = init_fleet(outside / "fleet" / "root", fleet_json).root
        FleetRun(root).run()
    finally:
        model.stop()
    rows = read_results(outside / "fleet" / "my-project" / "results.tsv")
    assert [(r.status, r.description) for r in rows] == [("keep", "baseline"), ("keep", "opt level 1")], rows
    with EvoDAG(root / "evodag.sqlite", readonly=True) as store:
        [session] = store.sessions()
    assert session.outcome == "exit_0" and session.turns >= 2, session
    assert model.main_requests(), "the CLI never called the model"
