"""Unit tests of the search policies: sampler, phases, acceptance, ranking, stop conditions."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evodag.models import Node
from saddler.config import LoopConfig
from saddler.policies import make_acceptance, make_phase_schedule, make_ranking, make_sampler, pick_best
from saddler.policies.acceptance import TaskOutcome
from saddler.policies.stopping import LoopState, StopConditions, trailing_stalls


def outcome(*passes: bool, disposition: str = "success") -> TaskOutcome:
    return TaskOutcome(tuple(1.0 if p else 0.0 for p in passes), passes, tuple(disposition for _ in passes))


@given(st.integers(min_value=1, max_value=40), st.integers(min_value=1, max_value=12), st.integers(0, 1000))
def test_epoch_sampler_covers_every_task_once_per_epoch(n: int, size: int, seed: int) -> None:
    ids = [f"t{i}" for i in range(n)]
    sampler = make_sampler("epoch", ids, size, seed)
    per_epoch = -(-n // min(size, n))
    seen: list[str] = []
    for i in range(per_epoch):
        epoch, batch = sampler.batch(i)
        assert epoch == 0
        seen += batch
    assert sorted(seen) == sorted(ids)
    assert sampler.batch(per_epoch)[0] == 1
    assert sampler.batch(3) == make_sampler("epoch", list(reversed(ids)), size, seed).batch(3)


def test_epoch_batches_cut_each_epoch_and_full_batch() -> None:
    sampler = make_sampler("epoch", [f"t{i}" for i in range(10)], 4, 0)
    assert [len(sampler.batch(i)[1]) for i in range(5)] == [4, 4, 2, 4, 4]  # shown: 0, 4, 8, 10, 14
    full = make_sampler("full", ["b", "a"], 1, 0)
    assert full.batch(2) == (2, ["a", "b"])


def test_phase_schedule_capability_then_steering() -> None:
    sched = make_phase_schedule("capability_then_steering", 10, 1.0, False)
    assert sched.phase(0) == "capability" and sched.phase(9) == "capability" and sched.phase(10) == "steering"
    assert sched.allowed_kinds("capability") == ["capability"]
    assert sched.allowed_kinds("steering") == ["steering"]
    assert make_phase_schedule("capability_then_steering", 10, 1.0, True).allowed_kinds("steering") == [
        "steering",
        "capability",
    ]
    none = make_phase_schedule("none", 10, 1.0, False)
    assert none.phase(100) == "none" and none.allowed_kinds("none") == ["capability", "steering"]


def test_acceptance_strict_improvement_only() -> None:
    acc = make_acceptance(0.0, False, False)
    before = {"a": outcome(False), "b": outcome(True)}
    assert acc.decide(before, {"a": outcome(True), "b": outcome(True)}).verdict == "accepted"
    same = acc.decide(before, {"a": outcome(False), "b": outcome(True)})
    assert same.verdict == "rejected" and "not a strict improvement" in same.reason
    assert acc.decide(before, {"a": outcome(False), "b": outcome(False)}).reason.endswith("worse")


def test_acceptance_ignores_tasks_invalid_in_either_run() -> None:
    acc = make_acceptance(0.0, False, False)
    before = {"a": outcome(False), "b": outcome(False, disposition="infra_error")}
    after = {"a": outcome(False), "b": outcome(True)}
    decision = acc.decide(before, after)
    assert decision.verdict == "rejected" and decision.compared == ("a",)


def test_acceptance_task_regression_and_margin_and_neutral() -> None:
    before = {"a": outcome(False), "b": outcome(False), "c": outcome(True)}
    after = {"a": outcome(True), "b": outcome(True), "c": outcome(False)}
    assert make_acceptance(0.0, False, False).decide(before, after).verdict == "accepted"
    strict = make_acceptance(0.0, True, False).decide(before, after)
    assert strict.verdict == "rejected" and strict.regressions == ("c",) and "task regression on c" in strict.reason
    assert make_acceptance(0.5, False, False).decide(before, after).verdict == "rejected"
    assert make_acceptance(0.0, False, True).decide(before, before).verdict == "neutral"


def test_majority_of_repetitions() -> None:
    assert outcome(True, True, False).passed and not outcome(True, False).passed


def _node(i: int, status: str, dev: float | None, lines: int = 0) -> Node:
    return Node(
        id=i,
        run_id=1,
        commit=f"c{i}",
        parent_id=None,
        iteration=i,
        phase="none",
        patch_kind="x",
        origin="o",
        status=status,
        dev_mean=dev,
        lines_changed=lines,
    )


def test_ranking_best_dev_ties_to_smaller_change() -> None:
    nodes = [
        _node(1, "baseline", 0.4),
        _node(2, "accepted", 0.7, 30),
        _node(3, "accepted", 0.7, 10),
        _node(4, "rejected", 0.9),
    ]
    best = pick_best(nodes)
    assert best is not None and best.id == 3
    no_dev = [_node(1, "baseline", None), _node(2, "accepted", None), _node(3, "rejected", None)]
    best = pick_best(no_dev)
    assert best is not None and best.id == 2


def test_ranking_latest_kept_ignores_dev() -> None:
    nodes = [_node(1, "baseline", 0.4), _node(2, "accepted", 0.9), _node(3, "neutral", 0.5), _node(4, "rejected", 1.0)]
    best = make_ranking("latest_kept")(nodes)
    assert best is not None and best.id == 3
    best = make_ranking("best_dev")(nodes)
    assert best is not None and best.id == 2


def test_acceptance_pass_count_needs_a_task_to_flip() -> None:
    def partial(score: float, passed: bool) -> TaskOutcome:
        return TaskOutcome((score,), (passed,), ("success",))

    before = {"a": partial(0.2, False), "b": partial(1.0, True)}
    more_credit = {"a": partial(0.6, False), "b": partial(1.0, True)}
    flipped = {"a": partial(0.6, True), "b": partial(1.0, True)}
    assert make_acceptance(0.0, False, False, measure="strict_mean").decide(before, more_credit).verdict == "accepted"
    by_passes = make_acceptance(0.0, False, False, measure="pass_count")
    verdict = by_passes.decide(before, more_credit)
    assert (verdict.verdict, verdict.before, verdict.after) == ("rejected", 0.5, 0.5)
    assert verdict.reason == "batch pass rate 0.500 -> 0.500 on 2 task(s): not a strict improvement"
    assert by_passes.decide(before, flipped).verdict == "accepted"
    with pytest.raises(ValueError, match="unknown acceptance 'vibes'; available: strict_mean, pass_count"):
        make_acceptance(0.0, False, False, measure="vibes")


def test_stop_conditions(tmp_path: Path) -> None:
    loop = LoopConfig(max_iterations=5, max_rollouts=100, cost_cap_usd=1.0, target_dev_score=0.9, stall_limit=3)
    stop = StopConditions(loop, tmp_path)
    ok = LoopState(1, 10, 0.0, 0.5, 0)
    assert stop.check(ok) is None
    assert stop.check(LoopState(5, 10, 0.0, 0.5, 0)) == "max_iterations"
    assert stop.check(LoopState(1, 100, 0.0, 0.5, 0)) == "max_rollouts"
    assert stop.check(LoopState(1, 10, 1.0, 0.5, 0)) == "cost_cap"
    assert stop.check(LoopState(1, 10, 0.0, 0.95, 0)) == "target_reached"
    assert stop.check(LoopState(1, 10, 0.0, 0.5, 3)) == "stall_limit"
    (tmp_path / "PAUSE").touch()
    assert stop.check(ok) == "paused"
    (tmp_path / "STOP").touch()
    assert stop.check(ok) == "stop_requested"


@pytest.mark.parametrize(
    ("decisions", "expected"),
    [
        ([], 0),
        (["accepted"], 0),
        (["accepted", "rejected", "no_patch"], 2),
        (["rejected", "neutral"], 0),
        (["invalid", "rejected", "rejected"], 3),
    ],
)
def test_trailing_stalls(decisions: list[str], expected: int) -> None:
    assert trailing_stalls(list(decisions)) == expected
