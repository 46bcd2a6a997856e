"""Resume refuses changed inputs: a run records what its results depend on and checks it each time it resumes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.config import RunConfig
from saddler.run.inputs import MAY_CHANGE, config_inputs

pytestmark = pytest.mark.slow
runner = CliRunner()


def _run(run_dir: Path, *extra: str) -> tuple[int, str]:
    result = runner.invoke(app, ["run", str(run_dir), "--quiet", *extra])
    return result.exit_code, result.output


def _edit(run_dir: Path, old: str, new: str) -> None:
    path = run_dir / "saddler.toml"
    text = path.read_text()
    assert old in text, text
    path.write_text(text.replace(old, new))


def test_budgets_and_resources_are_not_inputs() -> None:
    keys = set(config_inputs(RunConfig().model_dump(mode="json")))
    assert not keys & MAY_CHANGE
    assert {
        "seed",
        "benchmark",
        "policies.min_margin",
        "loop.batch_size",
        "sessions.model",
        "executor.timeout_s",
    } <= keys


def test_a_changed_setting_stops_the_resume_until_allowed(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run_dir = make_run(tmp_path / "run", loop={"max_iterations": 1})
    assert _run(run_dir)[0] == 0
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        recorded = store.get_run().inputs
        events = len(store.events())
    assert recorded is not None and recorded["policies.min_margin"] == 0.0 and "harness.baseline_commit" in recorded

    _edit(run_dir, "max_iterations = 1", "max_iterations = 2")  # a budget: allowed
    _edit(run_dir, "capability_epochs = 2.0", "capability_epochs = 2.0\nmin_margin = 0.1")
    code, output = _run(run_dir)
    assert code == 2
    assert "error: the inputs of this run changed since it started (policies.min_margin: 0.0 -> 0.1)" in output
    assert "--allow-changed" in output and "max_iterations" not in output
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        assert len(store.events()) == events and len(store.iterations()) == 1, "nothing ran"

    assert _run(run_dir, "--allow-changed")[0] == 0
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        changed = [e.payload for e in store.events() if e.kind == "run.inputs_changed"]
        assert changed == [{"changed": {"policies.min_margin": [0.0, 0.1]}}]
        assert store.get_run().inputs["policies.min_margin"] == 0.1  # type: ignore[index]
        assert len(store.iterations()) == 2
    assert _run(run_dir)[0] == 0, "the new inputs are the run's now"


def test_a_moved_harness_baseline_and_an_edited_prompt_file_are_changes(
    tmp_path: Path, run_git: Callable[..., Any], make_run: Callable[..., Path]
) -> None:
    run_dir = make_run(tmp_path / "run", loop={"max_iterations": 1})
    (run_dir / "evolution.md").write_text("# Evolution {iteration}\n")
    _edit(run_dir, "[run.executor]", '[run.sessions.prompts]\nevolution = "evolution.md"\n\n[run.executor]')
    assert _run(run_dir)[0] == 0
    (run_dir / "evolution.md").write_text("# Evolution, reworded {iteration}\n")
    (run_dir / "harness" / "NOTES.md").write_text("a new baseline\n")
    run_git(run_dir, "add", "-A")
    run_git(run_dir, "commit", "-qm", "new baseline")
    run_git(run_dir, "update-ref", "refs/saddler/baseline", "HEAD")
    code, output = _run(run_dir)
    assert code == 2
    assert "harness.baseline_commit: '" in output and "sessions.prompts.evolution.sha256: '" in output


def test_a_run_recorded_before_inputs_were_kept_is_checked_on_its_config(
    tmp_path: Path, make_run: Callable[..., Path]
) -> None:
    run_dir = make_run(tmp_path / "run", loop={"max_iterations": 1})
    assert _run(run_dir)[0] == 0
    with EvoDAG(run_dir / "evodag.sqlite") as store:
        store.update_run(1, inputs=None)
    _edit(run_dir, "batch_size = 6", "batch_size = 4")
    code, output = _run(run_dir, "--allow-changed")
    assert code == 0, output
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        changed = [e.payload["changed"] for e in store.events() if e.kind == "run.inputs_changed"]
    assert changed == [{"loop.batch_size": [6, 4]}]
    assert json.dumps(changed)
