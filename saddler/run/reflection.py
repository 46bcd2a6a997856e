"""Step 7 of an iteration: the edge's per-task transitions, measured; then reflection on them, accepted or not.

Fixed / regressed / still failing / still passing come from the stored before/after rollouts of the same batch
(majority over repetitions) and are set on the edge before the session runs, so a failed reflection still leaves
a complete edge. The session adds what scores cannot say: attribution (true fix, true regression, stochastic,
uncertain), root cause and lesson text. Its per-task claims are checked against the measurement: a lesson whose
category contradicts it is corrected to the measured category (and says so), a lesson about a task outside the
batch is dropped, and an attribution the category rules out ("true fix" of a task that was not fixed) becomes
`uncertain`. A general lesson's counts come from the scores too: it starts with the measured counts, and a count
it states otherwise ("fixed 5 task(s)" when one was) is corrected. A failed session is retried up to
`sessions.retries` times.
"""

from __future__ import annotations

import re

from evodag.models import Iteration, Node, RolloutRow
from saddler.run.context import RunContext
from saddler.run.faults import fault_point
from saddler.run.outcomes import measured_transitions, transitions
from saddler.run.session_calls import failure_reason, worth_asking_again
from saddler.sessions.schema import Hypothesis, LessonOut, ReflectionRequest, ReflectionResult

CATEGORIES = ("fixed", "regressed", "still_failing", "still_passing")
_ATTRIBUTION_NEEDS = {"true_fix": "fixed", "true_regression": "regressed"}


_CAT = r"(fixed|regressed|still[ _]failing|still[ _]passing)"
_CAT_THEN_COUNT = re.compile(rf"\b{_CAT}(\W{{0,2}})(\d+)\b", re.IGNORECASE)  # "fixed 5", "regressed: 1"
_COUNT_THEN_CAT = re.compile(rf"\b(\d+)(\s+(?:tasks?(?:\(s\))?\s+)?){_CAT}\b", re.IGNORECASE)  # "5 task(s) fixed"


def measured_counts(measured: dict[str, str]) -> str:
    """The batch's transitions counted from the scores, as a general lesson states them."""
    counts = [sum(1 for c in measured.values() if c == cat) for cat in CATEGORIES]
    return "measured on {} task(s): fixed {}, regressed {}, still failing {}, still passing {}".format(
        len(measured), *counts
    )


def corrected_counts(text: str, measured: dict[str, str]) -> tuple[str, list[str]]:
    """`text` with every count of a transition it states ("fixed 5", "3 task(s) regressed") replaced by the
    measured one, and a note for each that differed: counts come from the scores, never from the session."""
    notes: list[str] = []

    def truth(category: str, said: str) -> str:
        cat = category.lower().replace(" ", "_")
        real = sum(1 for c in measured.values() if c == cat)
        if int(said) != real:
            notes.append(f"the reflection said {cat.replace('_', ' ')} {said}, the scores say {real}")
        return str(real)

    text = _CAT_THEN_COUNT.sub(lambda m: m[1] + m[2] + truth(m[1], m[3]), text)
    text = _COUNT_THEN_CAT.sub(lambda m: truth(m[3], m[1]) + m[2] + m[3], text)
    return text, notes


def checked_lessons(lessons: list[LessonOut], measured: dict[str, str]) -> tuple[list[LessonOut], list[str]]:
    """The lessons consistent with the measured transitions, and a note for each one corrected or dropped.
    A general lesson starts with the counts measured from the scores, and any count it states is corrected."""
    kept: list[LessonOut] = []
    notes: list[str] = []
    for lesson in lessons:
        category: str = lesson.category
        attribution: str = lesson.attribution
        text = lesson.text
        if lesson.task_id is None:
            text, wrong = corrected_counts(text, measured)
            notes += wrong
            if wrong:
                text += " [counts corrected by saddler from the scores]"
            text = f"{measured_counts(measured)}. {text}"
        if lesson.task_id is not None and lesson.task_id not in measured:
            notes.append(f"dropped a lesson on {lesson.task_id}: the task is not in this batch")
            continue
        if lesson.task_id is None and category != "general":
            notes.append(f"a {category} lesson names no task: kept as general")
            category = "general"
        truth = measured.get(lesson.task_id or "")
        if truth is not None and category != "general" and category != truth:
            notes.append(f"{lesson.task_id}: the reflection said {category}, the batch scores say {truth}")
            text += f" [corrected by saddler: the reflection said {category}; the batch scores say {truth}]"
            category = truth
        needs = _ATTRIBUTION_NEEDS.get(attribution)
        if needs and category not in (needs, "general"):
            notes.append(f"{lesson.task_id}: {attribution} of a {category} task became uncertain")
            text += f" [attribution {attribution} dropped by saddler: the task is {category}]"
            attribution = "uncertain"
        kept.append(lesson.model_copy(update={"category": category, "attribution": attribution, "text": text}))
    return kept, notes


def reflect(
    ctx: RunContext,
    it: Iteration,
    parent: Node,
    cand: Node,
    decision: str,
    before: list[RolloutRow],
    after: list[RolloutRow],
) -> None:
    store = ctx.store
    edge = store.edge_between(parent.id, cand.id)
    measured = measured_transitions(before, after)
    groups = {cat: [t for t, c in measured.items() if c == cat] for cat in CATEGORIES}
    if any(getattr(edge, cat) != groups[cat] for cat in CATEGORIES):
        store.set_edge_transitions(edge.id, **groups)
    if it.step in ("reflected", "done") or store.lessons(edge_id=edge.id):
        return  # already reflected before a crash
    result = _session(ctx, it, parent, cand, decision, before, after)
    lessons, notes = checked_lessons(result.lessons, measured)
    with store.transaction():
        for lesson in lessons:
            store.add_lesson(
                ctx.run_id,
                lesson.category,
                lesson.attribution,
                lesson.text,
                node_id=cand.id,
                edge_id=edge.id,
                iteration=it.number,
                task_id=lesson.task_id,
            )
            fault_point("reflect")
        if notes:
            store.log_event("reflection.corrected", {"iteration": it.number, "notes": notes}, run_id=ctx.run_id)
        store.update_iteration(it.id, step="reflected")


def reflection_request(
    ctx: RunContext,
    it: Iteration,
    parent: Node,
    cand: Node,
    decision: str,
    before: list[RolloutRow],
    after: list[RolloutRow],
) -> ReflectionRequest:
    """What reflection on the edge `parent` -> `cand` is asked: the diff, the batch's transitions, dev as aggregates."""
    hyp = cand.hypothesis or {}
    return ReflectionRequest(
        **ctx.session_paths(),
        iteration=it.number,
        parent_node_id=parent.id,
        candidate_node_id=cand.id,
        decision=decision,
        hypothesis=Hypothesis(**hyp) if "diagnosis" in hyp else None,
        diff=ctx.space.diff(parent.commit, cand.commit),
        files_changed=ctx.space.changed_files(parent.commit, cand.commit),
        transitions=transitions(before, after),
        parent_dev_mean=parent.dev_mean,
        candidate_dev_mean=cand.dev_mean,
        best_dev_mean=ctx.best().dev_mean,
    )


def _session(
    ctx: RunContext,
    it: Iteration,
    parent: Node,
    cand: Node,
    decision: str,
    before: list[RolloutRow],
    after: list[RolloutRow],
) -> ReflectionResult:
    request = reflection_request(ctx, it, parent, cand, decision, before, after)
    attempt = 0
    while True:
        result = ctx.calls.reflect(request.model_copy(update={"attempt": attempt}), cand.id)
        failed = failure_reason(result.stats)
        if not failed or attempt >= ctx.cfg.sessions.retries or not worth_asking_again(result.stats):
            return result
        attempt += 1
        request = request.model_copy(update={"retry_reason": failed})
