"""networkx views and store-level queries on the fixture DAG."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evodag import views
from evodag.errors import UnknownNodeError, UnknownTaskError
from evodag.store import EvoDAG


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, fixture_dag: Callable[[Path], dict[str, int]]) -> EvoDAG:
    path = tmp_path_factory.mktemp("views") / "evodag.sqlite"
    fixture_dag(path)
    return EvoDAG(path, readonly=True)


def test_graph_attributes(store: EvoDAG) -> None:
    g = views.graph(store)
    assert sorted(g.nodes) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert sorted(g.edges) == [(1, 2), (1, 5), (1, 8), (2, 3), (2, 4), (4, 7), (5, 6)]
    assert g.nodes[2]["hypothesis"] == {"claim": "retry tool"} and g.nodes[7]["status"] == "invalid"
    assert (g.edges[5, 6]["kind"], g.edges[5, 6]["source_edge_id"], g.edges[4, 7]["kind"]) == (
        "cherry_pick",
        3,
        "revert",
    )
    assert views.graph(store, run_id=99).number_of_nodes() == 0


def test_lineage_descendants_branches(store: EvoDAG) -> None:
    assert [n.id for n in views.lineage(store, 7)] == [1, 2, 4, 7]
    assert [n.id for n in views.lineage(store, 1)] == [1]
    assert [n.id for n in views.descendants(store, 2)] == [3, 4, 7]
    assert [n.id for n in store.descendants(2)] == [3, 4, 7]
    assert [n.id for n in views.descendants(store, 1)] == [2, 3, 4, 5, 6, 7, 8]
    assert views.descendants(store, 8) == []
    assert views.branches(store) == [[1, 2, 3], [1, 5, 6], [1, 2, 4, 7], [1, 8]]
    with pytest.raises(UnknownNodeError):
        views.lineage(store, 99)
    with pytest.raises(UnknownNodeError):
        views.descendants(store, 99)


def test_best_and_frontier(store: EvoDAG) -> None:
    best = views.best_node(store)
    assert best is not None and best.id == 6  # the run's recorded choice
    assert [n.id for n in views.best_path(store)] == [1, 5, 6]
    assert [n.id for n in views.frontier(store)] == [6, 8]
    assert [n.id for n in store.frontier()] == [6, 8]


def test_no_best_before_the_run_records_one(tmp_path: Path) -> None:
    with EvoDAG(tmp_path / "e.sqlite") as s:
        run = s.create_run({}, 0).id
        node = s.add_node(run, "c0", None, 0, "baseline", "baseline", "baseline", status="baseline").id
        s.update_node(node, dev_mean=0.5)
        assert views.best_node(s) is None and views.best_path(s) == []
        s.update_run(run, best_node_id=node)
        assert views.best_node(s).id == node  # type: ignore[union-attr]


def test_scenario_of_lesson_only_task_and_unknown(store: EvoDAG, tmp_path: Path) -> None:
    with pytest.raises(UnknownTaskError, match="no rollout or lesson mentions it"):
        store.scenario("t-zzz")
    with EvoDAG(tmp_path / "l.sqlite") as s:
        run = s.create_run({}, 0).id
        s.add_lesson(run, "general", "uncertain", "only a lesson", task_id="lonely")
        doc = s.scenario("lonely")
        assert (doc["nodes"], [les["text"] for les in doc["lessons"]], doc["attempts"]) == (
            [], ["only a lesson"], [])  # fmt: skip
