"""The real-CLI tier (issue 21): `pytest --run-real-clis tests/real` installs the real claude, codex and pi CLIs
from the npm registry (tests/real_clis.py) and drives a short `saddler run` of each preset (command backend) and a
fleet iteration of each provider through the loopback model (tests/loopback_model.py), which plays the sessions
with each CLI's own tools; `saddler doctor`'s probes of each CLI in its sandbox (a /tmp CODEX_HOME refused); pi
installed under /tmp inside saddler's bubblewrap."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import real_clis
from loopback_model import LoopbackModel

from saddler.cli.app import app

pytestmark = [pytest.mark.real_clis, pytest.mark.slow]
MODELS = real_clis.MODELS


@pytest.mark.parametrize("preset", ["claude", "codex", "pi"])
def test_a_short_run_of_each_preset_through_the_loopback_model(
    preset: str, clis: dict[str, Path], run_preset: Callable[..., Path]
) -> None:
    model = LoopbackModel().start()
    try:
        run_dir = run_preset(preset, model.url, seed=1, loop__max_iterations="2")
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


def _init_run(run_dir: Path, preset: str) -> None:
    assert CliRunner().invoke(app, real_clis.init_args(run_dir, preset, seed=1)).exit_code == 0


def _doctor(run_dir: Path) -> tuple[int, dict[str, dict[str, object]]]:
    result = CliRunner().invoke(app, ["doctor", str(run_dir), "--json"])
    return result.exit_code, {c["name"]: c for c in json.loads(result.stdout)["checks"]}


@pytest.mark.parametrize("preset", ["claude", "codex", "pi"])
def test_the_doctor_starts_each_real_cli_in_the_sessions_sandbox(
    preset: str, clis: dict[str, Path], outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21.6: `pi --version` inside saddler's bubblewrap, `codex sandbox -- true` with the sessions'
    CODEX_HOME, `evo-dag --help` where the agent's commands run; nothing is spent (no model is listening)."""
    import os

    for key, value in real_clis.environment(outside / "home", "http://127.0.0.1:9", base=dict(os.environ)).items():
        monkeypatch.setenv(key, value)
    _init_run(outside / "run", preset)
    code, checks = _doctor(outside / "run")
    assert code == 0, checks
    assert checks["evo-dag"]["ok"], checks["evo-dag"]
    if preset != "claude":
        assert checks["sandbox:start"]["ok"], checks["sandbox:start"]


def test_codex_with_its_home_under_tmp_fails_the_doctor(
    clis: dict[str, Path], outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21.6: with CODEX_HOME under /tmp the real codex cannot start its sandbox helper."""
    import os
    import shutil
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="codex-home-", dir="/tmp"))
    try:
        for key, value in real_clis.environment(home, "http://127.0.0.1:9", base=dict(os.environ)).items():
            monkeypatch.setenv(key, value)
        _init_run(outside / "run", "codex")
        code, checks = _doctor(outside / "run")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert code == 1
    assert "bwrap: execvp codex-linux-sandbox" in str(checks["sandbox:start"]["detail"])
    assert "set CODEX_HOME to a folder outside /tmp" in str(checks["sandbox:start"]["detail"])


def test_pi_installed_under_tmp_runs_its_sessions_in_bubblewrap(
    clis: dict[str, Path], outside: Path, monkeypatch: pytest.MonkeyPatch, reflection_request
) -> None:
    """Issue 21.2: the real pi from an npm prefix under /tmp (a hard-linked copy of the installed one) starts
    inside saddler's bubblewrap, for the doctor and for a session through the loopback model."""
    import os
    import shutil
    import subprocess
    import tempfile

    from saddler.config import SessionConfig
    from saddler.sessions.command import CommandBackend

    prefix = Path(tempfile.mkdtemp(prefix="npm-prefix-", dir="/tmp")) / "prefix"
    model = LoopbackModel().start()
    try:
        subprocess.run(["cp", "-al", str(real_clis.PREFIX), str(prefix)], check=True)
        env = real_clis.environment(outside / "home", model.url, base=dict(os.environ))
        path = [p for p in env["PATH"].split(os.pathsep) if p != str(real_clis.BIN)]
        env["PATH"] = os.pathsep.join([str(prefix / "node_modules" / ".bin"), *path])
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        _init_run(outside / "run", "pi")
        code, checks = _doctor(outside / "run")
        assert code == 0 and checks["sandbox:start"]["detail"] == "`pi --version` runs inside saddler's bubblewrap"
        config = SessionConfig(backend="command", command="pi", model=MODELS["pi"], retries=0)
        run_dir = outside / "run"
        result = CommandBackend(config, run_dir=run_dir, seed=0).reflect(reflection_request(run_dir))
    finally:
        model.stop()
        shutil.rmtree(prefix.parent, ignore_errors=True)
    assert result.stats.outcome == "ok", result.stats.error
    assert model.main_requests(), "pi never called the model"
