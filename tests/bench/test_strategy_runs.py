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
