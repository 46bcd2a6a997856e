"""Acceptance on the mini-batch: only a strict improvement goes on to dev.

Scores are compared on the tasks valid in both runs (no infra_error/timeout on either side). What is compared is
`policies.acceptance`: `strict_mean` (the mean task score, partial credit included) or `pass_count` (the share of
tasks passed, by majority over repetitions: partial credit that does not flip a task counts for nothing).
Options: `min_margin` (the mean must rise by more than it), `reject_task_regression` (any task that
passed before and fails after rejects, as in the 000 seed's assertion-level rule), `accept_neutral`
(an equal mean with no regression is kept: the seed's approved NEUTRAL). `score` is the per-task score
compared (`policies.score`): `mean_score` (mean graded score over repetitions) or `pass_rate` (share passed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import mean

INVALID_DISPOSITIONS = ("infra_error", "timeout")


@dataclass(frozen=True)
class TaskOutcome:
    """One task over its repetitions on one node."""

    scores: tuple[float, ...]
    passes: tuple[bool, ...]
    dispositions: tuple[str, ...]

    @property
    def valid(self) -> bool:
        return bool(self.scores) and not any(d in INVALID_DISPOSITIONS for d in self.dispositions)

    @property
    def score(self) -> float:
        return mean(self.scores) if self.scores else 0.0

    @property
    def pass_rate(self) -> float:
        return sum(self.passes) / len(self.passes) if self.passes else 0.0

    def value(self, kind: str) -> float:
        """The task's score under `kind`: `pass_rate` or `mean_score`."""
        return self.pass_rate if kind == "pass_rate" else self.score

    @property
    def passed(self) -> bool:
        """Majority of repetitions (ties count as failed)."""
        return sum(self.passes) * 2 > len(self.passes)


@dataclass(frozen=True)
class AcceptanceDecision:
    verdict: str  # accepted | rejected | neutral
    reason: str
    before: float
    after: float
    compared: tuple[str, ...] = field(default=())
    regressions: tuple[str, ...] = field(default=())


def batch_mean(outcomes: dict[str, TaskOutcome], tasks: list[str] | tuple[str, ...], kind: str = "mean_score") -> float:
    return mean(outcomes[t].value(kind) for t in tasks) if tasks else 0.0


def pass_rate(outcomes: dict[str, TaskOutcome], tasks: list[str] | tuple[str, ...]) -> float:
    return sum(1 for t in tasks if outcomes[t].passed) / len(tasks) if tasks else 0.0


MEASURES = ("strict_mean", "pass_count")


@dataclass
class Acceptance:
    min_margin: float = 0.0
    reject_task_regression: bool = False
    accept_neutral: bool = False
    score: str = "mean_score"  # the per-task score `strict_mean` averages (policies.score)
    measure: str = "strict_mean"  # strict_mean | pass_count (see the module docstring)

    def decide(self, before: dict[str, TaskOutcome], after: dict[str, TaskOutcome]) -> AcceptanceDecision:
        """Compare parent (`before`) and candidate (`after`) on the same batch and seeds."""
        tasks = tuple(t for t in before if t in after and before[t].valid and after[t].valid)
        if not tasks:
            return AcceptanceDecision("rejected", "no task valid in both runs", 0.0, 0.0)
        if self.measure == "pass_count":
            b, a, label = pass_rate(before, tasks), pass_rate(after, tasks), "batch pass rate"
        else:
            b, a, label = batch_mean(before, tasks, self.score), batch_mean(after, tasks, self.score), "batch"
        regressions = tuple(t for t in tasks if before[t].passed and not after[t].passed)
        text = f"{label} {b:.3f} -> {a:.3f} on {len(tasks)} task(s)"
        if a > b + self.min_margin + 1e-12:
            if self.reject_task_regression and regressions:
                return AcceptanceDecision(
                    "rejected", f"{text}: task regression on {', '.join(regressions)}", b, a, tasks, regressions
                )
            return AcceptanceDecision("accepted", f"{text}: strict improvement", b, a, tasks, regressions)
        if abs(a - b) <= 1e-12 and not regressions and self.accept_neutral:
            return AcceptanceDecision("neutral", f"{text}: neutral, kept by approval", b, a, tasks, regressions)
        why = "not a strict improvement" if a >= b else "worse"
        if a > b:
            why = f"gain below the margin {self.min_margin}"
        return AcceptanceDecision("rejected", f"{text}: {why}", b, a, tasks, regressions)


def make_acceptance(
    min_margin: float,
    reject_task_regression: bool,
    accept_neutral: bool,
    score: str = "mean_score",
    measure: str = "strict_mean",
) -> Acceptance:
    if measure not in MEASURES:
        raise ValueError(f"unknown acceptance {measure!r}; available: {', '.join(MEASURES)}")
    return Acceptance(min_margin, reject_task_regression, accept_neutral, score, measure)
