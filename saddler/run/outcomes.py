"""Turn stored rollout rows into what policies and sessions consume.

Pure functions: per-task outcomes for acceptance, train evidence for diagnosis, per-task transitions
for reflection, Pass@1 figures for dev/test, and stable seeds for splits and repetitions.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable

from evodag.models import RolloutRow
from saddler.benchmark import Task
from saddler.policies.acceptance import task_outcomes
from saddler.sessions.schema import TaskEvidence, TaskTransition, transition_category


def split_seeds(run_seed: int, split: str, count: int) -> list[int]:
    """Seeds of repetitions 0..count-1 on `split`: the same for every node (same-batch verification)."""
    return [int(hashlib.sha256(f"{run_seed}:{split}:{r}".encode()).hexdigest()[:8], 16) for r in range(count)]


def by_task(rows: Iterable[RolloutRow]) -> dict[str, list[RolloutRow]]:
    grouped: dict[str, list[RolloutRow]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: (r.task_id, r.repetition)):
        grouped[row.task_id].append(row)
    return dict(grouped)


def failure_kinds(rows: Iterable[RolloutRow], classify: Callable[[str], str]) -> Counter[str]:
    """Per component kind (`classify` of a path), how many tasks failing by majority point at a file of that kind:
    the failure files of their failed rows. A task counts once per kind; a failure without a file counts nowhere."""
    kinds: Counter[str] = Counter()
    for rows_of_task in by_task(rows).values():
        if sum(r.passed for r in rows_of_task) * 2 > len(rows_of_task):
            continue
        kinds.update({classify(r.failure_file) for r in rows_of_task if not r.passed and r.failure_file})
    return kinds


def evidence(rows: Iterable[RolloutRow], tasks: dict[str, Task]) -> list[TaskEvidence]:
    """Train rollouts as diagnosis sees them. Refuses any non-train row: dev/test never reach diagnosis."""
    out = []
    for r in sorted(rows, key=lambda r: (r.task_id, r.repetition)):
        if r.split != "train":
            raise ValueError(f"rollout {r.id} is on {r.split}: only train evidence may reach diagnosis")
        task = tasks.get(r.task_id)
        out.append(
            TaskEvidence(
                task_id=r.task_id,
                group=task.group if task else r.task_group,
                family=task.family if task else "",
                repetition=r.repetition,
                seed=r.seed,
                score=r.score,
                passed=r.passed,
                disposition=r.disposition,
                rationale=r.rationale,
                trace_path=r.trace_path,
                failure_file=r.failure_file,
                error_tail=r.error_tail,
            )
        )
    return out


def measured_transitions(before: Iterable[RolloutRow], after: Iterable[RolloutRow]) -> dict[str, str]:
    """Task -> category, for every task measured on both nodes (a task passes by majority of its repetitions)."""
    b, a = task_outcomes(before), task_outcomes(after)
    return {task: transition_category(b[task].passes, a[task].passes) for task in sorted(set(b) & set(a))}


def transitions(before: Iterable[RolloutRow], after: Iterable[RolloutRow]) -> list[TaskTransition]:
    """Each task of both batches before and after, with the category the edge records (`measured_transitions`)."""
    before, after = list(before), list(after)
    b, a = by_task(before), by_task(after)
    measured = measured_transitions(before, after)
    out = []
    for task in sorted(set(b) & set(a)):
        out.append(
            TaskTransition(
                task_id=task,
                before=[r.passed for r in b[task]],
                after=[r.passed for r in a[task]],
                before_scores=[r.score for r in b[task]],
                after_scores=[r.score for r in a[task]],
                before_failure_files=sorted({r.failure_file for r in b[task] if r.failure_file and not r.passed}),
                after_failure_files=sorted({r.failure_file for r in a[task] if r.failure_file and not r.passed}),
                before_trace_paths=[r.trace_path for r in b[task] if r.trace_path],
                after_trace_paths=[r.trace_path for r in a[task] if r.trace_path],
                category=measured[task],
            )
        )
    return out


def failing_tasks(rows: Iterable[RolloutRow]) -> list[str]:
    return sorted(t for t, o in task_outcomes(rows).items() if not o.passed)


def nothing_to_fix(rows: Iterable[RolloutRow], score_kind: str) -> bool:
    """True when every rollout is already perfect under the run's score: passed, and under `mean_score` also at
    the top score (a metric benchmark's runs all "pass" without a threshold, yet their score can still rise)."""
    rows = list(rows)
    return bool(rows) and all(r.passed and (score_kind == "pass_rate" or r.score >= 1.0 - 1e-9) for r in rows)
