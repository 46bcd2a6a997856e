"""One rule for "best": the ranking policy decides, the loop records its pick when it changes, every reader reads it."""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evodag.cli import app as evodag_app
from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.config import load_run_config
from saddler.policies.ranking import pick_best_dev, pick_latest_kept
from saddler.reporting.figures import build_report
from saddler.reporting.progress import make_progress
from saddler.reporting.status import status_snapshot
from saddler.run.context import open_context
from saddler.run.folder import RunPaths

pytestmark = pytest.mark.slow
runner = CliRunner()


def _finish(run_dir: Path) -> dict[str, object]:
    result = runner.invoke(app, ["run", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def _recorded_bests(store: EvoDAG) -> list[int]:
    return [
        e.payload["best_node_id"] for e in store.events() if e.kind == "run.updated" and "best_node_id" in e.payload
    ]


@pytest.mark.parametrize(("ranking", "rule"), [("best_dev", pick_best_dev), ("latest_kept", pick_latest_kept)])
def test_every_reader_names_the_node_the_loop_chose(
    tmp_path: Path, ranking: str, rule: object, make_run: Callable[..., Path]
) -> None:
    run_dir = make_run(tmp_path / "run", policies={"ranking": ranking})
    outcome = _finish(run_dir)
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        run = store.get_run()
        assert run.best_node_id == rule(store.nodes()).id  # type: ignore[operator]
        recorded = _recorded_bests(store)
        report_best = build_report(store)["best"]["node"]
        status_best = status_snapshot(store, run_dir)["best_node"]
    assert recorded[-1] == run.best_node_id and len(recorded) >= 2, "the baseline, then each change"
    assert all(a != b for a, b in pairwise(recorded)), "written only when it changes"
    cli = runner.invoke(evodag_app, ["best", "--json", "--db", str(run_dir / "evodag.sqlite")])
    exported = json.loads((run_dir / "best" / "EXPORT.json").read_text())["node_id"]
    assert {outcome["best_node"], json.loads(cli.output)["best"]["id"], report_best, status_best, exported} == {
        run.best_node_id
    }


def test_reading_the_best_node_writes_nothing(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run_dir = make_run(tmp_path / "run", loop={"max_iterations": 2})
    _finish(run_dir)
    paths = RunPaths(run_dir.resolve())
    with EvoDAG(paths.db) as store:
        ctx = open_context(paths, load_run_config(run_dir), store, make_progress(True))
        try:
            recorded = store.get_run().best_node_id
            rejected = store.nodes(status="rejected") or store.nodes(status="baseline")
            store.update_node(rejected[0].id, dev_mean=1.0)  # would win a second ranking, not the recorded one
            events = len(store.events())
            assert ctx.best().id == recorded
            assert len(store.events()) == events and store.get_run().best_node_id == recorded
        finally:
            ctx.executor.close()
