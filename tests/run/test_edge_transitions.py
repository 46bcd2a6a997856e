"""Edge transitions come from the scores; what a reflection says about them is checked, never stored as fact."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evodag.history import compared_tasks
from evodag.models import RolloutRow
from evodag.store import EvoDAG
from saddler.run.loop import Optimizer
from saddler.run.outcomes import measured_transitions
from saddler.run.reflection import checked_lessons, corrected_counts
from saddler.sessions import registry
from saddler.sessions.offline import OfflineBackend
from saddler.sessions.schema import LessonOut, ReflectionRequest, ReflectionResult, SessionStats


def _rows(node: int, outcomes: dict[str, list[bool]]) -> list[RolloutRow]:
    return [
        RolloutRow(i, 1, node, task, "train", 100 + rep, rep, 1.0 if ok else 0.0, ok, "success")
        for i, (task, reps) in enumerate(outcomes.items())
        for rep, ok in enumerate(reps)
    ]


def test_transitions_are_measured_by_majority_over_repetitions() -> None:
    before = _rows(1, {"a": [False, False, True], "b": [True, True, False], "c": [False, True, False], "d": [True] * 3})
    after = _rows(2, {"a": [True, True, False], "b": [False, False, True], "c": [False, False, True], "d": [True] * 3})
    after += _rows(2, {"e": [True]})  # only measured on one side: no transition
    assert measured_transitions(before, after) == {
        "a": "fixed",
        "b": "regressed",
        "c": "still_failing",
        "d": "still_passing",
    }


def test_the_reflection_prompt_shows_the_category_the_edge_records() -> None:
    from saddler.run.outcomes import transitions
    from saddler.sessions.prompts import render

    before = _rows(1, {"a": [False, False, True], "b": [True, True, False]})
    after = _rows(2, {"a": [True, True, False], "b": [True, True, True]})
    moved = transitions(before, after)
    assert [(t.task_id, t.category) for t in moved] == [("a", "fixed"), ("b", "still_passing")]
    request = ReflectionRequest(
        run_dir="/r", db_path="/r/evodag.sqlite", iteration=3, parent_node_id=1, candidate_node_id=2,
        decision="accepted", hypothesis=None, diff="", files_changed=[], transitions=moved,
    )  # fmt: skip
    prompt = render("reflection", request)
    assert "- `a`: FFP -> PPF (fixed; repetitions disagree before and after)" in prompt  # not "still failing"
    assert "- `b`: PPF -> PPP (still_passing; repetitions disagree before)" in prompt


def test_claims_that_contradict_the_scores_are_corrected_or_dropped() -> None:
    measured = {"a": "still_failing", "b": "fixed", "c": "still_passing"}
    lessons = [
        LessonOut(task_id="a", category="fixed", attribution="true_fix", text="a works now"),
        LessonOut(task_id="b", category="fixed", attribution="true_fix", text="b fixed by the retry"),
        LessonOut(task_id="c", category="still_passing", attribution="true_regression", text="c"),
        LessonOut(task_id="zz", category="fixed", attribution="true_fix", text="a task not in the batch"),
        LessonOut(task_id=None, category="regressed", attribution="uncertain", text="overall worse"),
        LessonOut(task_id=None, category="general", attribution="true_fix", text="the retry helps"),
    ]
    kept, notes = checked_lessons(lessons, measured)
    assert [(k.task_id, k.category, k.attribution) for k in kept] == [
        ("a", "still_failing", "uncertain"),
        ("b", "fixed", "true_fix"),
        ("c", "still_passing", "uncertain"),
        (None, "general", "uncertain"),
        (None, "general", "true_fix"),
    ]
    assert kept[0].text == (
        "a works now [corrected by saddler: the reflection said fixed; the batch scores say still_failing]"
        " [attribution true_fix dropped by saddler: the task is still_failing]"
    )
    assert kept[1].text == "b fixed by the retry"
    assert notes == [
        "a: the reflection said fixed, the batch scores say still_failing",
        "a: true_fix of a still_failing task became uncertain",
        "c: true_regression of a still_passing task became uncertain",
        "dropped a lesson on zz: the task is not in this batch",
        "a regressed lesson names no task: kept as general",
    ]


def test_a_general_lesson_states_the_measured_counts_whatever_the_session_claims() -> None:
    measured = {"a": "fixed", "b": "still_failing", "c": "still_passing", "d": "still_failing"}
    claim = LessonOut(category="general", attribution="true_fix", text="fixed 5 task(s), 2 tasks regressed; helps")
    kept, notes = checked_lessons([claim], measured)
    assert kept[0].text == (
        "measured on 4 task(s): fixed 1, regressed 0, still failing 2, still passing 1. fixed 1 task(s), 0 tasks "
        "regressed; helps [counts corrected by saddler from the scores]"
    )
    assert notes == [
        "the reflection said fixed 5, the scores say 1",
        "the reflection said regressed 2, the scores say 0",
    ]
    assert corrected_counts("still failing: 2, 1 fixed", measured) == ("still failing: 2, 1 fixed", [])


class EverythingFixedBackend(OfflineBackend):
    """A reflection that calls every batch task a true fix, and adds one about a task it never saw."""

    def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        lessons = [
            LessonOut(task_id=t.task_id, category="fixed", attribution="true_fix", text=f"{t.task_id} fixed")
            for t in request.transitions
        ]
        lessons.append(LessonOut(task_id="not-a-task", category="fixed", attribution="true_fix", text="imagined"))
        return ReflectionResult(lessons=lessons, stats=SessionStats(backend="offline"))


@pytest.mark.slow
def test_the_loop_stores_measured_transitions_whatever_the_reflection_claims(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_run: Callable[..., Path]
) -> None:
    monkeypatch.setitem(registry.BACKENDS, "fixed", f"{__name__}:EverythingFixedBackend")
    run = make_run(tmp_path / "run", loop={"max_iterations": 3}, sessions={"backend": "fixed"})
    Optimizer(run, quiet=True).run()
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        checked = 0
        for it in store.iterations():
            if it.candidate_id is None or it.decision == "invalid":
                continue
            edge = store.edge_between(it.parent_id or 0, it.candidate_id)
            compared = compared_tasks(it.batch, it.evidence)
            measured = measured_transitions(
                [r for r in store.rollouts(node_id=it.parent_id, split="train") if r.task_id in compared],
                [r for r in store.rollouts(node_id=it.candidate_id, split="train") if r.task_id in compared],
            )
            for category in ("fixed", "regressed", "still_failing", "still_passing"):
                assert getattr(edge, category) == [t for t, c in measured.items() if c == category]
            lessons = {les.task_id: les for les in store.lessons(edge_id=edge.id)}
            assert "not-a-task" not in lessons
            for task, category in measured.items():
                assert lessons[task].category == category
                assert (lessons[task].attribution == "true_fix") == (category == "fixed")
            checked += 1
        assert checked and any(e.kind == "reflection.corrected" for e in store.events())
