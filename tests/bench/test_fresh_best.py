"""bench/fresh_best.py: the returned node's gap to the DAG's best, on the post-hoc test seeds and on fresh ones."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from repo_paths import REPO

sys.path.insert(0, str(REPO / "bench"))
import fresh_best
from fresh_best import Remeasured


def test_the_summary_counts_a_run_near_the_best_on_each_set_of_seeds() -> None:
    rows = [
        Remeasured("a", 5, 9, 0.60, 0.70, 0.65, 0.66, 0.70, 0.72),  # 10 points behind on the post-hoc seeds, 1 on fresh
        Remeasured("b", 4, 4, 0.80, 0.80, 0.75, 0.75, 0.60, 0.60),  # the returned node is the DAG's best
        Remeasured("c", 3, 7, 0.50, 0.53, 0.50, 0.55, 0.70, 0.65),  # 3 then 5 points behind; lower on dev
        Remeasured("d", 2, 8, 0.40, 0.50, 0.40, 0.50, 0.55, 0.60),  # 10 points behind on both; higher on dev
    ]
    assert fresh_best.summary(rows) == [
        "fresh_best_runs: 4",
        "fresh_best_within_2pts_posthoc: 0.250",
        "fresh_best_within_2pts_fresh: 0.500",
        "fresh_best_gap_posthoc: 0.0575",
        "fresh_best_gap_fresh: 0.0400",
        "fresh_best_gap_runs_fresh: 2",
        "fresh_best_gap_runs_best_higher_on_dev: 1",
    ]


def test_a_folder_that_is_not_a_finished_bench_run_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "cell" / "proposer" / "full-s0"
    run.mkdir(parents=True)
    (run / "saddler.toml").write_text('[run]\nname = "r"\n')
    with pytest.raises(SystemExit, match="not a finished bench run"):
        fresh_best.remeasure(run, tmp_path / "work", 2)
    assert sorted(p.name for p in run.iterdir()) == ["saddler.toml"]  # the original is never written


def test_a_run_is_behind_what_dev_can_reach_only_where_dev_clearly_ranks_a_better_node_above_it() -> None:
    rows = [
        fresh_best.DevReachable("a", 5, 0.80, 0.80),  # no node dev clearly prefers
        fresh_best.DevReachable("b", 5, 0.80, 0.81),  # dev prefers one, 1 point above on test
        fresh_best.DevReachable("c", 5, 0.70, 0.75),  # dev prefers one 5 points above on test
    ]
    assert [r.gap for r in rows] == [0.0, pytest.approx(0.01), pytest.approx(0.05)]
    assert fresh_best.reachable_summary(rows) == [
        "fresh_best_runs: 3",
        "fresh_best_within_2pts_of_dev_reachable: 0.667",
        "fresh_best_dev_reachable_gap_runs: 1",
    ]


def test_dev_reachable_evaluates_on_dev_only_the_nodes_above_the_returned_one_and_never_writes_the_run(
    tmp_path: Path,
) -> None:
    import json

    import strategy_runs

    from evodag.store import EvoDAG

    run = tmp_path / "opsdesk" / "neutral" / "full-s1"
    measured = strategy_runs.run_one(
        "opsdesk", {"sessions": {"proposer": "neutral"}}, 1, 2, run, tmp_path / "c.sqlite", False
    )
    assert measured.dev_reachable_test is not None and measured.within_2pts_of_dev_reachable is not None
    posthoc = json.loads((run / strategy_runs.POSTHOC).read_text())
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        returned, baseline = store.get_run().best_node_id, store.get_run().baseline_node_id
        rows_before = store.count_rollouts()
    assert returned is not None and baseline is not None and returned != baseline
    got = fresh_best.dev_reachable(run, tmp_path / "work")
    assert got.returned == returned and got.reachable_test == got.returned_test  # nothing above it on test
    posthoc["test"][str(baseline)] = posthoc["test"][str(returned)] + 0.5  # the baseline made to look far better
    (run / strategy_runs.POSTHOC).write_text(json.dumps(posthoc))
    got = fresh_best.dev_reachable(run, tmp_path / "work2")
    with EvoDAG(tmp_path / "work2" / "opsdesk-neutral-full-s1" / "evodag.sqlite", readonly=True) as store:
        dev = {r.node_id for r in store.rollouts(split="dev")}
    assert {returned, baseline} <= dev, "both were evaluated on dev"
    assert got.reachable_test == got.returned_test, "dev does not rank the baseline above what the run returned"
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        assert store.count_rollouts() == rows_before, "the original run is never written"
