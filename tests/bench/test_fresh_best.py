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
