"""What the strategies bench reads off a finished run beside the returned node's test: the full best's test when
the minimization cut it, and whether the DAG's best node on test is one the run kept (bench/strategy_runs.py)."""

from __future__ import annotations

import sys

from repo_paths import REPO

from evodag.models import Node

sys.path.insert(0, str(REPO / "bench"))
import strategy_runs
from strategy_runs import SeedResult


def _node(nid: int, parent: int | None, origin: str, status: str = "accepted") -> Node:
    return Node(nid, 1, f"c{nid}", parent, nid, "capability", "capability", origin, status)


def test_the_full_best_is_the_nearest_ancestor_the_minimization_did_not_make() -> None:
    nodes = {n.id: n for n in [_node(1, None, "baseline", "baseline"), _node(2, 1, "bank:x"),
                               _node(3, 2, "minimize"), _node(4, 3, "minimize")]}  # fmt: skip
    tests = {1: 0.3, 2: 0.8, 3: 0.75, 4: 0.7}
    assert strategy_runs._unminimized_test(nodes, 4, tests) == 0.8
    assert strategy_runs._unminimized_test(nodes, 2, tests) == 0.8


def test_a_miss_of_the_dag_best_bar_is_read_apart_from_the_minimization() -> None:
    counts = ("spent", "test_spent", "reach", "charged_dev", "capability_in_returned", "saturated", "blocked",
              "accepted", "rejected", "ties_rejected", "ties_after_evidence", "good_rejected", "false_accepts",
              "evidence_rollouts")  # fmt: skip
    fields = {name: 1 for name in counts} | {
        "seed": 0,
        "baseline_test": 0.3,
        "returned_dev": 0.7,
        "kept_best_test": 0.8,
    }
    cut = SeedResult(test=0.70, dag_best_test=0.80, unminimized_test=0.79, **fields)  # type: ignore[arg-type]
    assert not cut.within_2pts and cut.within_2pts_unminimized
    uncut = SeedResult(test=0.70, dag_best_test=0.80, **fields)  # type: ignore[arg-type]
    assert not uncut.within_2pts and not uncut.within_2pts_unminimized
