"""The seed modes' acceptance rules as named policies (`saddler.policies.seed_acceptance`): the 002 seed's keep rule
on one metric, and the regression check the 000 seed's veto and the optimizer's `reject_task_regression` share."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evodag.decisions import ACCEPTED, INVALID, REJECTED, TSV_STATUS
from saddler.policies.acceptance import Acceptance, TaskOutcome
from saddler.policies.seed_acceptance import AssertionVeto, MetricKeep, lost_passes


def test_the_policies_are_named() -> None:
    assert (AssertionVeto().name, MetricKeep().name) == ("assertion_veto", "metric_keep")


def test_metric_keep_keeps_only_a_strict_improvement_in_its_direction() -> None:
    low, high = MetricKeep("minimize"), MetricKeep("maximize")
    assert low.improved(1.0, 2.0) and not low.improved(2.0, 2.0) and not low.improved(3.0, 2.0)
    assert high.improved(3.0, 2.0) and not high.improved(2.0, 2.0) and not high.improved(1.0, 2.0)
    assert (low.best([3.0, 1.0, 2.0]), high.best([3.0, 1.0, 2.0]), low.best([])) == (1.0, 3.0, None)


def test_metric_keep_verdicts_in_the_results_tsv_words() -> None:
    rule = MetricKeep("minimize")
    kept = rule.decide(1.5, 2.0)
    assert (kept.status, kept.tsv_status, kept.kept) == (ACCEPTED, "keep", True)
    assert kept.reason == "metric 2.0 -> 1.5 (minimize): keep"
    same = rule.decide(2.0, 2.0)
    assert (same.status, same.tsv_status, same.kept) == (REJECTED, "discard", False)
    crash = rule.decide(None, 2.0, "exit 1")
    assert (crash.status, crash.tsv_status, crash.reason) == (
        INVALID,
        "crash",
        "metric 2.0 -> None (minimize): crash; exit 1",
    )
    assert rule.decide(9.0, None).kept  # nothing kept yet: any metric is the first best


@given(metric=st.none() | st.floats(-10, 10), best=st.none() | st.floats(-10, 10))
def test_metric_keep_round_trips_through_results_tsv(metric: float | None, best: float | None) -> None:
    verdict = MetricKeep("maximize").decide(metric, best)
    assert TSV_STATUS[verdict.tsv_status] == verdict.status
    assert verdict.kept == (metric is not None and (best is None or metric > best))


def test_lost_passes_counts_a_missing_key_as_failing() -> None:
    assert lost_passes({"a": True, "b": True, "c": False}, {"a": False, "c": True}) == ["a", "b"]


def test_the_optimizers_task_veto_and_the_assertion_veto_agree_on_what_regressed() -> None:
    def outcome(ok: bool) -> TaskOutcome:
        return TaskOutcome((float(ok),), (ok,), ("success",))

    before = {"t1": True, "t2": False, "t3": False}
    after = {"t1": False, "t2": True, "t3": True}
    task = Acceptance(reject_task_regression=True, measure="strict_mean").decide(
        {t: outcome(v) for t, v in before.items()}, {t: outcome(v) for t, v in after.items()}
    )
    skill = AssertionVeto().decide(2 / 3, 1 / 3, after, before, from_program=False)
    assert (task.verdict, list(task.regressions)) == (REJECTED, ["t1"])
    assert (skill.decision, skill.regressions) == ("DISCARD", ["t1"])
