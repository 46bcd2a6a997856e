"""The one place node scores and their uncertainty are computed (saddler.scoring)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saddler.scoring import bootstrap_ci, node_score, paired_bootstrap_ci


@dataclass(frozen=True)
class Row:
    task_id: str
    repetition: int
    passed: bool
    score: float = 0.0


def rows(passes: dict[str, list[bool]]) -> list[Row]:
    return [Row(t, r, p, float(p)) for t, ps in passes.items() for r, p in enumerate(ps)]


def test_no_change_and_a_uniform_gain_have_degenerate_intervals() -> None:
    before = rows({"a": [False, False], "b": [True, True], "c": [False, True]})
    assert paired_bootstrap_ci(before, before) == (0.0, 0.0)
    everything = rows({"a": [True, True], "b": [True, True], "c": [True, True]})
    nothing = rows({"a": [False, False], "b": [False, False], "c": [False, False]})
    assert paired_bootstrap_ci(nothing, everything) == (1.0, 1.0)
    assert paired_bootstrap_ci(everything, nothing) == (-1.0, -1.0)


def test_only_shared_tasks_are_paired() -> None:
    assert paired_bootstrap_ci(rows({"a": [True]}), rows({"b": [True]})) is None
    assert paired_bootstrap_ci([], []) is None and bootstrap_ci([]) is None
    half = paired_bootstrap_ci(rows({"a": [False], "x": [False]}), rows({"a": [True], "y": [True]}))
    assert half == (1.0, 1.0)  # only task a is on both sides


def test_intervals_are_seeded_and_widen_with_mixed_outcomes() -> None:
    before = rows({f"t{i}": [i % 3 == 0] for i in range(30)})
    after = rows({f"t{i}": [i % 2 == 0] for i in range(30)})
    ci = paired_bootstrap_ci(before, after, seed=7)
    assert ci == paired_bootstrap_ci(before, after, seed=7)
    assert ci is not None and ci[0] < ci[1]
    gain = node_score(after, "pass_rate").mean - node_score(before, "pass_rate").mean
    assert ci[0] <= gain <= ci[1]


def test_mean_score_kind_uses_the_graded_score() -> None:
    before = [Row("a", 0, False, 0.2), Row("b", 0, False, 0.4)]
    after = [Row("a", 0, False, 0.6), Row("b", 0, False, 0.8)]
    assert paired_bootstrap_ci(before, after, "pass_rate") == (0.0, 0.0)
    assert paired_bootstrap_ci(before, after, "mean_score") == pytest.approx((0.4, 0.4))


@given(st.dictionaries(st.text("abc", min_size=1, max_size=3), st.lists(st.booleans(), min_size=1, max_size=3),
                       min_size=1, max_size=8))  # fmt: skip
def test_a_node_interval_lies_within_its_task_scores(passes: dict[str, list[bool]]) -> None:
    ci = bootstrap_ci(rows(passes))
    per_task = [sum(p) / len(p) for p in passes.values()]
    assert ci is not None and min(per_task) - 1e-6 <= ci[0] <= ci[1] <= max(per_task) + 1e-6  # 6 decimals
