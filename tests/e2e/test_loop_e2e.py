"""End-to-end runs of the optimizer on opsdesk with the offline backend, and the loop's invariants."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from typer.testing import CliRunner

from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.run.loop import Optimizer

pytestmark = pytest.mark.slow
runner = CliRunner()


class CountingExecutor:
    """Wraps the real executor and counts the rollouts it is asked to execute."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.executed = inner, 0

    def run(self, jobs: Any, on_result: Any) -> None:
        self.executed += len(jobs)
        self.inner.run(jobs, on_result)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, make_run: Callable[..., Path]) -> tuple[Path, int]:
    """One small finished run, driven through the real CLI, with an executor that counts."""
    import saddler.run.context as context

    run_dir = make_run(tmp_path_factory.mktemp("e2e") / "run")
    counters: list[CountingExecutor] = []
    real = context.make_executor

    def counting(cfg: Any) -> CountingExecutor:
        counters.append(CountingExecutor(real(cfg)))
        return counters[-1]

    mp = pytest.MonkeyPatch()
    mp.setattr(context, "make_executor", counting)
    try:
        result = runner.invoke(app, ["run", str(run_dir), "--json"])
    finally:
        mp.undo()
    assert result.exit_code == 0, result.output
    return run_dir, sum(c.executed for c in counters)


def test_run_prints_summary_and_writes_artifacts(finished: tuple[Path, int]) -> None:
    run_dir, _ = finished
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        run = store.get_run()
        assert run.status == "finished" and run.termination_reason == "max_iterations"
        assert len(store.iterations()) == 6
    for name in ("report.md", "results.tsv", "progress.png", "best/EXPORT.json"):
        assert (run_dir / name).is_file(), name
    assert not list(run_dir.glob(".progress.png*"))  # no draft or temporary plot left behind
    assert (run_dir / "results.tsv").read_text().splitlines()[0] == "commit\tmetric\tstatus\tdescription\tscored_on"
    export = json.loads((run_dir / "best" / "EXPORT.json").read_text())
    assert export["node_id"] == run.best_node_id


def test_rollouts_spent_equal_rollouts_recorded(finished: tuple[Path, int]) -> None:
    run_dir, executed = finished
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        keys = {r.cache_key for r in store.rollouts()}
    assert executed == len(keys) > 0


def test_every_node_commit_and_parent_commit_exist_and_dag_is_acyclic(
    finished: tuple[Path, int], run_git: Callable[..., Any]
) -> None:
    run_dir, _ = finished
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        nodes = store.nodes()
        for node in nodes:
            assert run_git(run_dir, "cat-file", "-e", f"{node.commit}^{{commit}}").returncode == 0
            if node.parent_id is not None:
                parent = store.get_node(node.parent_id)
                assert run_git(run_dir, "cat-file", "-e", parent.commit).returncode == 0
                edge = store.edge_into(node.id)
                assert edge is not None and edge.parent_id == node.parent_id
        g = nx.DiGraph([(e.parent_id, e.child_id) for e in store.edges()])
        g.add_nodes_from(n.id for n in nodes)
    assert nx.is_directed_acyclic_graph(g) and g.number_of_nodes() == len(nodes)
    assert run_git(run_dir, "fsck", "--no-progress").returncode == 0


def test_test_split_is_opened_only_at_the_end_for_baseline_and_best(finished: tuple[Path, int]) -> None:
    run_dir, _ = finished
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        rows = store.rollouts()
        run = store.get_run()
        ended = [e for e in store.events() if e.kind == "schedule.search_ended"]
    assert len(ended) == 1
    # no test row before the search ended: test runs at the end, beside the minimization (which reads dev only)
    test_rows = [r for r in rows if r.split == "test"]
    assert test_rows and all(r.created_at >= ended[0].ts for r in test_rows)
    assert {r.node_id for r in rows if r.split == "test"} <= {run.baseline_node_id, run.best_node_id}


def test_no_dev_trace_reaches_diagnosis(finished: tuple[Path, int]) -> None:
    run_dir, _ = finished
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        split_of = {r.trace_path: r.split for r in store.rollouts() if r.trace_path}
        given = [p for e in store.events() if e.kind == "diagnosis.evidence" for p in e.payload["trace_paths"]]
    assert given and {split_of[p] for p in given} == {"train"}


def test_store_integrity(finished: tuple[Path, int]) -> None:
    run_dir, _ = finished
    with sqlite3.connect(run_dir / "evodag.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_same_seed_and_config_give_the_same_dag(
    finished: tuple[Path, int],
    tmp_path: Path,
    dag_signature: Callable[[Path], dict[str, Any]],
    make_run: Callable[..., Path],
) -> None:
    run_dir, _ = finished
    again = make_run(tmp_path / "again")
    Optimizer(again, quiet=True).run()
    assert dag_signature(again) == dag_signature(run_dir)


def test_rerunning_a_finished_run_spends_nothing(
    finished: tuple[Path, int], monkeypatch: pytest.MonkeyPatch, dag_signature: Callable[[Path], dict[str, Any]]
) -> None:
    import saddler.run.context as context

    run_dir, _ = finished
    before = dag_signature(run_dir)
    counters: list[CountingExecutor] = []
    real = context.make_executor
    monkeypatch.setattr(
        context, "make_executor", lambda cfg: counters.append(CountingExecutor(real(cfg))) or counters[-1]
    )
    result = runner.invoke(app, ["run", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    assert counters[0].executed == 0
    assert dag_signature(run_dir) == before


def test_pause_then_resume_gives_the_uninterrupted_dag(
    finished: tuple[Path, int],
    tmp_path: Path,
    dag_signature: Callable[[Path], dict[str, Any]],
    make_run: Callable[..., Path],
) -> None:
    run_dir, _ = finished
    paused = make_run(tmp_path / "paused")

    def pause_after_iteration_two(text: str) -> None:
        if text.startswith("iter   2 ["):
            (paused / "PAUSE").touch()

    outcome = Optimizer(paused, quiet=True, say=pause_after_iteration_two).run()
    assert outcome.reason == "paused"
    with EvoDAG(paused / "evodag.sqlite", readonly=True) as store:
        assert len(store.iterations()) == 2 and store.get_run().status == "paused"
    assert runner.invoke(app, ["resume", str(paused)]).exit_code == 0
    assert Optimizer(paused, quiet=True).run().reason == "max_iterations"
    assert dag_signature(paused) == dag_signature(run_dir)
