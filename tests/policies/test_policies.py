"""Unit tests of the search policies: sampler, phases, acceptance, ranking, stop conditions."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evodag.decisions import trailing_stalls
from evodag.models import Node
from saddler.config import LoopConfig
from saddler.policies import make_acceptance, make_phase_schedule, make_ranking, make_sampler, pick_best
from saddler.policies.acceptance import TaskOutcome
from saddler.policies.stopping import LoopState, StopConditions


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


def _node(i: int, status: str, dev: float | None, lines: int = 0, parent: int | None = None) -> Node:
    return Node(
        id=i,
        run_id=1,
        commit=f"c{i}",
        parent_id=parent,
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


def test_ranking_best_dev_tie_goes_to_the_descendant_accepted_over_the_tied_node() -> None:
    # the child was accepted over its parent (train strictly better, dev not worse): on a dev tie it is the better
    # evidenced harness, however many lines it adds; a neutral child (no train gain) and an unrelated node do not
    # outrank the smaller change
    nodes = [
        _node(1, "baseline", 0.4),
        _node(2, "accepted", 0.7, 10, parent=1),
        _node(3, "accepted", 0.7, 30, parent=2),
        _node(4, "accepted", 0.7, 5, parent=1),
    ]
    best = pick_best(nodes)
    assert best is not None and best.id == 4  # 2 is outranked by its accepted child 3; 4 is smaller than 3
    deeper = [*nodes[:3], _node(4, "accepted", 0.6, 40, parent=3), _node(5, "accepted", 0.7, 50, parent=4)]
    best = pick_best(deeper)
    assert best is not None and best.id == 5  # an accepted descendant, through a lower-dev node, still outranks 2 and 3
    neutral_child = [*nodes[:2], _node(3, "neutral", 0.7, 30, parent=2)]
    best = pick_best(neutral_child)
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
    assert verdict.reason == "batch tasks passed 0.500 -> 0.500 on 2 task(s): not a strict improvement"
    assert by_passes.decide(before, flipped).verdict == "accepted"
    with pytest.raises(ValueError, match="unknown acceptance 'vibes'; available: sequential, strict_mean, pass_count"):
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


def test_sequential_acceptance_calls_a_tie_or_one_flip_close_and_decides_on_clear_evidence() -> None:
    acc = make_acceptance(0.0, False, False, score="pass_rate", measure="sequential")
    before = {t: outcome(False) for t in "abcd"} | {"e": outcome(True)}
    tie = acc.decide(before, dict(before), final=False)
    assert (tie.verdict, tie.confidence, tie.wins, tie.losses) == ("close", 0.5, 0.0, 0.0)
    one = acc.decide(before, before | {"a": outcome(True)}, final=False)
    assert one.verdict == "close" and one.confidence == 0.75
    assert (
        one.reason
        == "batch 0.200 -> 0.400 on 5 task(s), 1 win(s) 0 loss(es), P(better) 0.75: close call, gathering evidence"
    )
    two = acc.decide(before, before | {"a": outcome(True), "b": outcome(True)}, final=False)
    assert (two.verdict, two.confidence) == ("accepted", 0.875) and two.reason.endswith("strict improvement")
    worse = acc.decide(before, before | {"e": outcome(False)}, final=False)
    assert worse.verdict == "close" and worse.confidence == 0.25
    much_worse = acc.decide(before | {"d": outcome(True)}, before | {"e": outcome(False)}, final=False)
    assert (much_worse.verdict, much_worse.confidence) == ("rejected", 0.125)


def test_sequential_acceptance_at_the_end_of_the_evidence_takes_the_point_estimate() -> None:
    acc = make_acceptance(0.0, False, False, score="pass_rate", measure="sequential")
    before = {t: outcome(False) for t in "abc"}
    one = acc.decide(before, before | {"a": outcome(True)}, final=True)
    assert one.verdict == "accepted" and one.reason.endswith("more wins than losses once the evidence ran out")
    tie = acc.decide(before, dict(before), final=True)
    assert tie.verdict == "rejected" and tie.reason.endswith("not a strict improvement")


def test_every_rule_reports_the_same_confidence_for_the_same_evidence() -> None:
    before = {"a": outcome(False), "b": outcome(False), "c": outcome(True)}
    after = {"a": outcome(True), "b": outcome(True), "c": outcome(False)}
    confidences = {m: make_acceptance(0.0, False, False, "pass_rate", m).decide(before, after).confidence
                   for m in ("sequential", "strict_mean", "pass_count")}  # fmt: skip
    assert set(confidences.values()) == {0.6875}


def test_sequential_confidence_uses_graded_differences_as_partial_wins() -> None:
    def graded(score: float) -> TaskOutcome:
        return TaskOutcome((score,), (score >= 1.0,), ("success",))

    acc = make_acceptance(0.0, False, False, score="mean_score", measure="sequential")
    decision = acc.decide({"a": graded(0.25), "b": graded(0.5)}, {"a": graded(0.75), "b": graded(0.5)}, final=False)
    assert decision.wins == 0.5 and decision.losses == 0.0 and decision.verdict == "close"
    assert round(decision.confidence, 4) == 0.6464
    with pytest.raises(ValueError, match="confidence must be in"):
        make_acceptance(0.0, False, False, confidence=0.5)


def test_phase_evidence_moves_follow_the_files_failures_point_at() -> None:
    sched = make_phase_schedule("capability_then_steering", 10, 1.0, False)
    assert sched.follow_evidence("capability", {"steering": 2}) == (
        "steering", "the batch's 2 failing task(s) with a known failure file all point at steering files"
    )  # fmt: skip
    assert sched.follow_evidence("capability", {"steering": 2, "capability": 1}) is None
    assert sched.follow_evidence("capability", {}) is None  # no known file: no evidence
    assert sched.follow_evidence("steering", {"capability": 1, "steering": 3}) == (
        "mixed", "1 failing task(s) of the batch point at capability files: capability patches allowed"
    )  # fmt: skip
    assert sched.follow_evidence("steering", {"steering": 3}) is None
    assert sched.follow_evidence("steering", {"capability": 2}) == (
        "capability", "the batch's 2 failing task(s) with a known failure file all point at capability files"
    )  # fmt: skip
    assert sched.allowed_kinds("mixed") == ["capability", "steering"]
    fixed = make_phase_schedule("capability_then_steering", 10, 1.0, False, moves="fixed")
    assert fixed.follow_evidence("capability", {"steering": 2}) is None
    assert make_phase_schedule("none", 10, 1.0, False).follow_evidence("none", {"steering": 2}) is None


def test_phase_evidence_ends_capability_early_after_patience_discards_in_a_row() -> None:
    sched = make_phase_schedule("capability_then_steering", 10, 2.0, False, patience=3)
    assert not sched.stalled(["accepted", "rejected", "no_patch", "accepted", "invalid"])
    assert not sched.stalled(["rejected", "no_training_failures", "no_patch"])
    stalled = ["rejected", "no_patch", "no_training_failures", "invalid", "accepted"]
    assert sched.stalled(stalled)  # once stalled, capability stays over
    assert sched.phase(0, stalled=True) == "steering" and sched.phase(0) == "capability"
    fixed = make_phase_schedule("capability_then_steering", 10, 2.0, False, moves="fixed")
    assert not fixed.stalled(stalled) and fixed.phase(0, stalled=True) == "capability"
    assert not make_phase_schedule("capability_then_steering", 10, 2.0, False, patience=0).stalled(stalled)


@pytest.mark.parametrize(
    ("train_p", "dev_p", "unsure", "vetoed"),
    [
        (0.9, 0.15, 0.0, "worse than its parent on dev"),  # clearly worse on dev: always
        (0.9, 0.3, 0.5, ""),  # sure on train: only a clear dev loss vetoes
        (0.75, 0.3, 0.5, "a close call on train (P(better) 0.75) that dev leans against"),
        (0.75, 0.3, 0.0, ""),  # the unsure guard off
        (0.75, 0.5, 0.5, ""),  # dev says nothing either way: train's decision stands
    ],
)
def test_the_dev_guard_vetoes_a_clear_dev_loss_and_an_unsure_train_accept_dev_leans_against(
    train_p: float, dev_p: float, unsure: float, vetoed: str
) -> None:
    from saddler.policies.acceptance import AcceptanceDecision, dev_guard_vetoes

    train = AcceptanceDecision("accepted", "", 0.5, 0.75, confidence=train_p)
    dev = AcceptanceDecision("rejected", "", 0.8, 0.775, confidence=dev_p)
    assert dev_guard_vetoes(train, dev, 0.8, unsure) == vetoed


@pytest.mark.parametrize("confidence", [0.75, 0.8, 0.9])
def test_the_clear_lines_are_one_rule_the_sequential_decision_draws_them(confidence: float) -> None:
    """`clearly_better`/`clearly_worse` are the lines every veto, refusal and exclusion reads; a sequential
    decision that may still gather evidence answers `close` exactly between them, at the dyadic P(better) values
    the sign test takes (0.25 and 0.75 sit on the lines at confidence 0.75)."""
    from saddler.policies.acceptance import better_confidence, clearly_better, clearly_worse, close_call

    acc = make_acceptance(0.0, False, False, "pass_rate", "sequential", confidence=confidence)
    for wins in range(4):
        for losses in range(4):
            before = {f"t{i}": outcome(i < losses) for i in range(wins + losses)}
            after = {f"t{i}": outcome(i >= losses) for i in range(wins + losses)}
            if not before:
                continue
            decided = acc.decide(before, after, final=False)
            p = better_confidence(wins, losses)
            assert decided.confidence == p
            better, worse = clearly_better(p, confidence), clearly_worse(p, confidence)
            assert not (better and worse)
            assert (decided.verdict == "close") == (not better and not worse) == close_call(p, confidence)
    assert clearly_worse(0.25, 0.75) and clearly_better(0.75, 0.75)
    assert not clearly_worse(0.25 + 1e-9, 0.75) and not clearly_better(0.75 - 1e-9, 0.75)


def test_the_scheduled_phase_says_why() -> None:
    epochs = make_phase_schedule("capability_then_steering", 10, 2.0, False, patience=3)
    assert epochs.scheduled(19, 10) == ("capability", "19 of the 20 train tasks to show first (capability_epochs 2)")
    assert epochs.scheduled(20, 10) == ("steering", "20 train tasks shown, capability_epochs 2 x 10 train tasks")
    assert epochs.scheduled(0, 0, stalled=True) == (
        "steering", "the Capability search stalled: 3 discards in a row (phase_patience)"
    )  # fmt: skip
    coverage = make_phase_schedule("capability_then_steering", 10, 2.0, False, transition="full_coverage")
    assert coverage.scheduled(30, 9) == ("capability", "9 of the 10 train tasks shown at least once")
    assert coverage.scheduled(12, 10) == ("steering", "every one of the 10 train tasks shown at least once")
    assert make_phase_schedule("none", 10, 2.0, False).scheduled(5, 5) == ("none", "one phase (phases = none)")
    for tasks_seen, distinct, stalled in [(19, 10, False), (20, 10, False), (0, 0, True), (30, 9, False)]:
        assert epochs.phase(tasks_seen, distinct, stalled) == epochs.scheduled(tasks_seen, distinct, stalled)[0]


def test_a_narrowed_phase_with_no_patch_widens_to_mixed_only_when_asked() -> None:
    sched = make_phase_schedule("capability_then_steering", 10, 1.0, False, widening="on_no_patch")
    assert sched.widen("capability") == (
        "mixed",
        "no capability patch answers the batch's failures: steering patches allowed too",
    )
    assert sched.widen("steering") == (
        "mixed",
        "no steering patch answers the batch's failures: capability patches allowed too",
    )
    assert sched.widen("mixed") is None and sched.widen("none") is None
    assert make_phase_schedule("capability_then_steering", 10, 1.0, False).widen("capability") is None  # never
    both = make_phase_schedule("capability_then_steering", 10, 1.0, True, widening="on_no_patch")
    assert both.widen("steering") is None and both.widen("capability") == (
        "mixed", "no capability patch answers the batch's failures: steering patches allowed too"
    )  # fmt: skip
