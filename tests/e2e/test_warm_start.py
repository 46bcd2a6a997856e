"""Warm start: `saddler init … --warm-start OTHER_RUN` imports the other run's lessons, excluded ideas and per-task
registry as history (sealed: nothing about a dev or test task), refuses another harness or benchmark unless
`--force`, and the offline backend tries the other run's accepted edges first."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from benchmarks.opsdesk import OpsdeskBenchmark
from evodag.store import EvoDAG
from evodag.view import write_session_view
from saddler.cli.app import app
from saddler.run.folder import init_run
from saddler.run.loop import Optimizer
from saddler.warmstart import load_warm_start

pytestmark = pytest.mark.slow
runner = CliRunner()
SMALL = ["--set", "loop.batch_size=6", "--set", "loop.test_runs=1"]
HELD_OUT = [t.id for s in ("dev", "test") for t in OpsdeskBenchmark().tasks(s)]


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished opsdesk run, with two lessons planted that name held-out tasks (they must never travel)."""
    run = tmp_path_factory.mktemp("warm") / "other"
    init_run(
        run, template="opsdesk", seed=0, overrides={"loop": {"max_iterations": 4, "batch_size": 6, "test_runs": 1}}
    )
    Optimizer(run, quiet=True).run()
    with EvoDAG(run / "evodag.sqlite") as store:
        rid = store.get_run().id
        store.add_lesson(rid, "general", "uncertain", f"{HELD_OUT[0]} looked easy on dev")
        store.add_lesson(rid, "fixed", "true_fix", "a test task fixed", task_id=HELD_OUT[-1])
    return run


def _accepted(run: Path) -> list[str]:
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        lineage = store.lineage(store.get_run().best_node_id)
        return [n.origin for n in lineage[1:] if n.status in ("accepted", "neutral")]


def test_init_imports_the_history_sealed_and_the_run_starts_from_its_accepted_edges(
    other: Path, tmp_path: Path
) -> None:
    new = tmp_path / "new"
    result = runner.invoke(
        app,
        [
            "init",
            str(new),
            "--template",
            "opsdesk",
            "--warm-start",
            str(other),
            "--set",
            "loop.max_iterations=1",
            *SMALL,
        ],
    )
    assert result.exit_code == 0, result.output
    warm = load_warm_start(new)
    assert warm is not None and [e.origin for e in warm.accepted] == _accepted(other) != []
    assert warm.lessons and all(x.text.startswith("[warm start from other] ") for x in warm.lessons)
    document = (new / "warm-start.json").read_text()
    assert not [t for t in HELD_OUT if t in document]
    with EvoDAG(other / "evodag.sqlite", readonly=True) as store:
        excluded = [n for n in store.nodes() if n.status in ("invalid", "rejected")]
    assert len([x for x in warm.lessons if " excluded idea " in x.text]) == len(excluded)

    Optimizer(new, quiet=True).run()
    with EvoDAG(new / "evodag.sqlite", readonly=True) as store:
        first = next(n for n in store.nodes() if n.iteration == 1 and n.parent_id is not None)
        imported = [e.payload for e in store.events(kind="warmstart.imported")]
        rid = store.get_run().id
        view = tmp_path / "view.sqlite"
        write_session_view(store, view, rid)
    assert first.origin == warm.accepted[0].origin
    assert "accepted in the warm start's run" in (first.hypothesis or {})["diagnosis"]
    assert imported == [
        {"source": str(other.resolve()), "name": "other", "lessons": len(warm.lessons), "accepted": _accepted(other)}
    ]
    with sqlite3.connect(view) as conn:
        texts = [row[0] for row in conn.execute("SELECT text FROM lessons")]
        tasks = {row[0] for row in conn.execute("SELECT DISTINCT task_id FROM lessons WHERE task_id IS NOT NULL")}
    assert sum(t.startswith("[warm start from other]") for t in texts) == len(warm.lessons)
    assert not tasks & set(HELD_OUT) and not [t for t in HELD_OUT if any(t in text for text in texts)]


def test_a_resumed_run_imports_once(other: Path, tmp_path: Path) -> None:
    new = tmp_path / "new"
    assert runner.invoke(app, ["init", str(new), "-t", "opsdesk", "--warm-start", str(other), *SMALL]).exit_code == 0
    for _ in range(2):
        runner.invoke(app, ["pause", str(new)])
        Optimizer(new, quiet=True).run()  # paused before the baseline: opens the store, imports, stops
    with EvoDAG(new / "evodag.sqlite", readonly=True) as store:
        assert len(store.events(kind="warmstart.imported")) == 1
        assert len([x for x in store.lessons() if x.text.startswith("[warm start")]) == len(
            load_warm_start(new).lessons
        )  # type: ignore[union-attr]


def test_another_harness_or_benchmark_is_refused_unless_forced(other: Path, tmp_path: Path) -> None:
    new = tmp_path / "repofix"
    refused = runner.invoke(app, ["init", str(new), "-t", "repofix", "--warm-start", str(other)])
    assert refused.exit_code == 2
    assert "is not a run of this harness and benchmark: the harness baseline tree (" in refused.output
    assert "the benchmark (opsdesk " in refused.output and "pass --force" in refused.output
    assert not new.exists()
    forced = runner.invoke(app, ["init", str(new), "-t", "repofix", "--warm-start", str(other), "--force"])
    assert forced.exit_code == 0, forced.output
    assert "imported despite differing the harness baseline tree" in forced.output
    data: dict[str, Any] = json.loads((new / "warm-start.json").read_text())
    assert data["benchmark"] == "opsdesk"


def test_a_folder_that_holds_no_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = runner.invoke(
        app, ["init", str(tmp_path / "new"), "-t", "opsdesk", "--warm-start", str(tmp_path / "empty")]
    )
    assert result.exit_code == 2 and "no run there" in result.output and not (tmp_path / "new").exists()
