"""What the strategies bench reads off a finished run beside the returned node's test: the full best's test when
the minimization cut it, and whether the DAG's best node on test is one the run kept (bench/strategy_runs.py)."""

from __future__ import annotations

import sys

from repo_paths import REPO
from seed_results import seed_result

from evodag.models import Node

sys.path.insert(0, str(REPO / "bench"))
import strategy_runs


def _node(nid: int, parent: int | None, origin: str, status: str = "accepted") -> Node:
    return Node(nid, 1, f"c{nid}", parent, nid, "capability", "capability", origin, status)


def test_the_full_best_is_the_nearest_ancestor_the_minimization_did_not_make() -> None:
    nodes = {n.id: n for n in [_node(1, None, "baseline", "baseline"), _node(2, 1, "bank:x"),
                               _node(3, 2, "minimize"), _node(4, 3, "minimize")]}  # fmt: skip
    tests = {1: 0.3, 2: 0.8, 3: 0.75, 4: 0.7}
    assert strategy_runs._unminimized_test(nodes, 4, tests) == 0.8
    assert strategy_runs._unminimized_test(nodes, 2, tests) == 0.8


def test_a_miss_of_the_dag_best_bar_is_read_apart_from_the_minimization() -> None:
    cut = seed_result(test=0.70, dag_best_test=0.80, kept_best_test=0.8, unminimized_test=0.79)
    assert not cut.within_2pts and cut.within_2pts_unminimized
    uncut = seed_result(test=0.70, dag_best_test=0.80, kept_best_test=0.8)
    assert not uncut.within_2pts and not uncut.within_2pts_unminimized


def test_the_post_hoc_test_of_every_node_is_pass_at_1_whatever_the_run_scores_by(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # a run that accepts on the graded score (partial_credit) returns a node whose test is read as Pass@1: the DAG's
    # best and the false accepts must be read on the same scale, never on the run's graded one
    import json

    from evodag.store import EvoDAG
    from saddler.config import load_run_config
    from saddler.scoring import node_score, pass_at_1

    run_dir = tmp_path / "run"
    sets = {"policies": {"score": "mean_score"}, "sessions": {"proposer": "neutral"}}
    strategy_runs.run_one("opsdesk", sets, 1, 2, run_dir, tmp_path / "cache.sqlite", False)
    tests = json.loads((run_dir / strategy_runs.POSTHOC).read_text())["test"]
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        baseline = store.get_run().baseline_node_id
        rows = [r for r in store.rollouts() if r.node_id == baseline and r.split == "test"]
    assert tests[str(baseline)] == pass_at_1(rows).mean != node_score(rows, "mean_score").mean
    # a cache written on the run's own scale (before the bench read every test as Pass@1) is redone, not trusted
    marker = run_dir / strategy_runs.POSTHOC
    old = json.loads(marker.read_text())
    marker.write_text(json.dumps({"first_rollout": old["first_rollout"], "test": {str(baseline): 0.123}}))
    runs = load_run_config(run_dir).loop.test_runs
    assert strategy_runs.posthoc_tests(run_dir, runs)[baseline] == pass_at_1(rows).mean
