"""bench/false_accepts.py: the kept candidates below their parent on test, and which of them clearly."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from repo_paths import REPO

from saddler.policies.acceptance import TaskOutcome

sys.path.insert(0, str(REPO / "bench"))
import false_accepts
import strategy_runs
from false_accepts import FalseAccepts


def _tasks(*passed: int) -> dict[str, TaskOutcome]:
    """Tasks t0, t1, ... passed on `passed[i]` of 3 repetitions."""
    return {f"t{i}": TaskOutcome((0.0,) * 3, (True,) * k + (False,) * (3 - k), ("success",) * 3) for i, k in
            enumerate(passed)}  # fmt: skip


def test_p_better_is_paired_task_by_task_on_the_tasks_both_nodes_hold() -> None:
    assert strategy_runs.paired_confidence(_tasks(3, 3), _tasks(3, 3)) == 0.5  # no task moved
    assert strategy_runs.paired_confidence(_tasks(0, 3), _tasks(3, 3)) == 0.25  # one whole task lost
    # two thirds lost on t0 and one third won on t1: a net third lost, not as sure as a whole task
    assert 0.25 < strategy_runs.paired_confidence(_tasks(1, 3), _tasks(3, 2)) < 0.5
    assert strategy_runs.paired_confidence(_tasks(3), _tasks(0, 0)) == 0.75  # t1 only on one node: left out


def test_a_false_accept_is_clear_at_or_under_one_minus_the_acceptance_confidence() -> None:
    rows = [
        FalseAccepts("a", 10, [(1, 2, 0.19), (2, 3, 0.31)], 0.8),  # one clearly lower, one inside the noise
        FalseAccepts("b", 5, [(1, 4, 0.2)], 0.8),  # exactly at the line 1 - 0.8 (a float under 0.2): clear
        FalseAccepts("c", 5, [], 0.8),
    ]
    assert [r.clear for r in rows] == [1, 1, 0]
    assert false_accepts.summary(rows) == [
        "false_accepts_runs: 3",
        "false_accepts_kept: 20",
        "false_accept_share: 0.150 (3 of 20)",
        "false_accept_clear_share: 0.100 (2 of 20)",
    ]
    assert false_accepts.summary([FalseAccepts("d", 0, [], 0.8)])[2] == "false_accept_share: nan (no candidate kept)"


def test_a_real_runs_false_accepts_are_the_ones_the_bench_counts(tmp_path: Path) -> None:
    run = tmp_path / "run"
    # one iteration at a time, no dev race: the serial loop, where this seed keeps a candidate below its parent
    sets = {"sessions": {"proposer": "calibrated"}, "loop": {"parallel_iterations": 1}, "policies": {"dev_race": False}}
    measured = strategy_runs.run_one("opsdesk", sets, 0, 8, run, tmp_path / "cache.sqlite", False)
    assert measured.false_accepts >= 1, "this seed no longer keeps a candidate below its parent: pick one that does"
    found = false_accepts.false_accepts(run)
    assert (found.kept, len(found.below), found.clear) == (
        measured.accepted,
        measured.false_accepts,
        measured.clear_false_accepts,
    )
    assert found.confidence == 0.8 and all(0.0 < p < 0.5 for _, _, p in found.below)  # lower: under 0.5


def test_a_folder_that_is_not_a_finished_bench_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="not a finished bench run"):
        false_accepts.false_accepts(tmp_path)
