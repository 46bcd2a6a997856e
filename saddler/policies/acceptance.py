"""Acceptance on the mini-batch: does the candidate beat its parent on the same tasks and seeds?

Scores are compared on the tasks valid in both runs (no infra_error/timeout on either side). `score` is the
per-task score compared (`policies.score`): `mean_score` (mean graded score over repetitions) or `pass_rate`
(share of repetitions passed). `policies.acceptance` names the rule:

- `sequential` (the default): a close call is not a verdict. Per task the candidate wins by how much its score
  is above the parent's and loses by how much it is below (a paired comparison; tied tasks say nothing about the
  direction). The confidence that the candidate is better is P(theta > 1/2) for theta ~ Beta(1 + wins,
  1 + losses): a sign test with a uniform prior. At `confidence` or above it is accepted, at 1 - `confidence` or
  below rejected; in between (a tie, one flip, a flip each way) the decision is `close` and the loop gathers
  evidence on more train tasks (`saddler.run.closecall`) and asks again. When the evidence is spent
  (`final=True`) the point estimate decides: more wins than losses is accepted.
- `strict_mean` (AutoSaddler's rule): the mean task score must rise, however little.
- `pass_count`: the share of tasks passed (by majority over repetitions) must rise: partial credit that does not
  flip a task counts for nothing.

Options for every rule: `min_margin` (the mean must rise by more than it), `reject_task_regression` (any task
that passed before and fails after rejects: the 000 seed's veto, which skill mode applies per assertion,
`seed_acceptance.AssertionVeto`), `accept_neutral` (an equal score with no regression is kept: the seed's approved
NEUTRAL). Every decision carries the confidence, computed the same way whatever the rule, so decisions of
different strategies can be compared. `metric`: the benchmark's
own metric, in which a mean graded score is stated in the decision's reason.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import mean
from typing import Any

from evodag.decisions import ACCEPTED, CLOSE, NEUTRAL, REJECTED
from evodag.metric import MetricScale, score_text
from evodag.models import RolloutRow
from saddler.policies.seed_acceptance import lost_passes

INVALID_DISPOSITIONS = ("infra_error", "timeout")
MEASURES = ("sequential", "strict_mean", "pass_count")


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
    def share_passed(self) -> float:
        """The share of repetitions passed (the task's Pass@1)."""
        return sum(self.passes) / len(self.passes) if self.passes else 0.0

    def value(self, kind: str) -> float:
        """The task's score under `kind`: `pass_rate` (share of repetitions passed) or `mean_score`."""
        return self.share_passed if kind == "pass_rate" else self.score

    @property
    def passed(self) -> bool:
        """Majority of repetitions (ties count as failed)."""
        return sum(self.passes) * 2 > len(self.passes)


@dataclass(frozen=True)
class AcceptanceDecision:
    verdict: str  # accepted | rejected | neutral | close (sequential, more evidence wanted)
    reason: str
    before: float
    after: float
    compared: tuple[str, ...] = field(default=())
    regressions: tuple[str, ...] = field(default=())
    confidence: float = 0.5  # P(candidate better), see `better_confidence`
    wins: float = 0.0
    losses: float = 0.0


def task_outcomes(rows: Iterable[RolloutRow]) -> dict[str, TaskOutcome]:
    """Stored rollout rows as per-task outcomes (repetitions in order), what `Acceptance.decide` compares."""
    grouped: dict[str, list[RolloutRow]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: (r.task_id, r.repetition)):
        grouped[row.task_id].append(row)
    return {
        task: TaskOutcome(tuple(r.score for r in rs), tuple(r.passed for r in rs), tuple(r.disposition for r in rs))
        for task, rs in grouped.items()
    }


def batch_score(outcomes: dict[str, TaskOutcome], kind: str, measure: str = "sequential") -> float | None:
    """The batch figure a decision compares (its `before` and `after`) over the valid tasks of `outcomes`: the
    share of tasks passed under `pass_count`, else the mean per-task score under `kind`; None without a valid one."""
    tasks = [t for t, outcome in outcomes.items() if outcome.valid]
    if not tasks:
        return None
    return tasks_passed_share(outcomes, tasks) if measure == "pass_count" else batch_mean(outcomes, tasks, kind)


def recorded_measure(config: dict[str, Any], inputs: dict[str, Any] | None) -> str:
    """The acceptance rule a run decided by, as its store records it (its inputs, else its stored config, else
    the default `sequential`); see `saddler.scoring.recorded_score_kind` for the per-task score."""
    measure = (inputs or {}).get("policies.acceptance") or (config.get("policies") or {}).get("acceptance")
    return measure if measure in MEASURES else "sequential"


def batch_mean(outcomes: dict[str, TaskOutcome], tasks: list[str] | tuple[str, ...], kind: str = "mean_score") -> float:
    return mean(outcomes[t].value(kind) for t in tasks) if tasks else 0.0


def tasks_passed_share(outcomes: dict[str, TaskOutcome], tasks: list[str] | tuple[str, ...]) -> float:
    """The share of `tasks` passed by majority over their repetitions."""
    return sum(1 for t in tasks if outcomes[t].passed) / len(tasks) if tasks else 0.0


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def beta_cdf(x: float, a: float, b: float) -> float:
    """P(theta <= x) for theta ~ Beta(a, b), a, b > 0."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, 1.0 - x) / b


def better_confidence(wins: float, losses: float) -> float:
    """P(theta > 1/2), theta ~ Beta(1 + wins, 1 + losses): how sure the paired comparison is that the candidate is
    the better one. 0.5 with no evidence either way; 0.75 after one win, 0.875 after two, 0.25 after one loss."""
    return round(1.0 - beta_cdf(0.5, 1.0 + wins, 1.0 + losses), 9)


_ON_THE_LINE = 1e-12  # a P(better) on a line counts as past it, whatever the float error of 1 - confidence


def clearly_better(p_better: float, confidence: float) -> bool:
    """Whether a P(better) (`better_confidence`) is a clear gain at the decision `confidence`: at or above it, where
    a sequential decision accepts. The one home of this line; every rule that asks "clearly better" reads it."""
    return p_better >= confidence - _ON_THE_LINE


def clearly_worse(p_better: float, confidence: float) -> bool:
    """Whether a P(better) is a clear loss at the decision `confidence`: at or under 1 - it, where a sequential
    decision rejects and the dev guard, minimization, lineage exclusion and the bench's clear false accepts refuse.
    Strictly between the two lines a comparison is a close call."""
    return p_better <= 1.0 - confidence + _ON_THE_LINE


def close_call(p_better: float, confidence: float) -> bool:
    """Whether a P(better) is strictly between the two lines: neither `clearly_better` nor `clearly_worse`."""
    return not clearly_better(p_better, confidence) and not clearly_worse(p_better, confidence)


@dataclass
class Acceptance:
    min_margin: float = 0.0
    reject_task_regression: bool = False
    accept_neutral: bool = False
    score: str = "mean_score"  # the per-task score compared (policies.score)
    measure: str = "sequential"  # sequential | strict_mean | pass_count (see the module docstring)
    confidence: float = 0.8  # sequential: decide at this confidence (or at 1 - it)
    metric: MetricScale | None = None  # the reason states a mean graded score as this metric

    @property
    def gathers_evidence(self) -> bool:
        return self.measure == "sequential"

    def decide(
        self, before: dict[str, TaskOutcome], after: dict[str, TaskOutcome], final: bool = True
    ) -> AcceptanceDecision:
        """Compare parent (`before`) and candidate (`after`) on the same tasks and seeds. A sequential decision
        with `final=False` may answer `close` (gather evidence, then ask again)."""
        tasks = tuple(t for t in before if t in after and before[t].valid and after[t].valid)
        if not tasks:
            return AcceptanceDecision(REJECTED, "no task valid in both runs", 0.0, 0.0)
        kind = self.score
        diffs = [after[t].value(kind) - before[t].value(kind) for t in tasks]
        wins, losses = sum(d for d in diffs if d > 0), -sum(d for d in diffs if d < 0)
        conf = better_confidence(wins, losses)
        b, a = (batch_score({t: side[t] for t in tasks}, kind, self.measure) or 0.0 for side in (before, after))
        label = "batch tasks passed" if self.measure == "pass_count" else "batch"
        regressions = tuple(lost_passes({t: before[t].passed for t in tasks}, {t: after[t].passed for t in tasks}))
        scale = self.metric if self.measure != "pass_count" and kind == "mean_score" else None
        label += f" {scale.label}" if scale is not None else ""
        text = f"{label} {score_text(b, scale)} -> {score_text(a, scale)} on {len(tasks)} task(s)"
        if self.measure == "sequential":
            text += f", {_count(wins)} win(s) {_count(losses)} loss(es), P(better) {conf:.2f}"

        def verdict(name: str, why: str) -> AcceptanceDecision:
            return AcceptanceDecision(name, f"{text}: {why}", b, a, tasks, regressions, conf, wins, losses)

        if self.measure == "sequential" and not final and close_call(conf, self.confidence):
            return verdict(CLOSE, "close call, gathering evidence")
        if a > b + self.min_margin + 1e-12:
            if self.reject_task_regression and regressions:
                return verdict(REJECTED, f"task regression on {', '.join(regressions)}")
            sure = self.measure != "sequential" or clearly_better(conf, self.confidence)
            return verdict(
                ACCEPTED, "strict improvement" if sure else "more wins than losses once the evidence ran out"
            )
        if abs(a - b) <= 1e-12 and not regressions and self.accept_neutral:
            return verdict(NEUTRAL, "neutral, kept by approval")
        why = "not a strict improvement" if a >= b else "worse"
        if a > b:
            why = f"gain below the margin {self.min_margin}"
        return verdict(REJECTED, why)


def dev_guard_vetoes(train: AcceptanceDecision, dev: AcceptanceDecision, confidence: float, unsure: float) -> str:
    """Why a candidate kept on train is not kept after its dev comparison with its parent ("" when it is kept):
    dev says it is clearly worse (P(better) <= 1 - `confidence`); or, with `unsure` > 0, train was not sure of it
    (accepted with P(better) below `confidence`, once the evidence ran out) and dev leans against it (P(better)
    below `unsure`): a close call on train is decided by the dev evidence too."""
    if clearly_worse(dev.confidence, confidence):
        return "worse than its parent on dev"
    if unsure > 0 and not clearly_better(train.confidence, confidence) and dev.confidence < unsure:
        return f"a close call on train (P(better) {train.confidence:.2f}) that dev leans against"
    return ""


def dev_guard_clear(dev: AcceptanceDecision, confidence: float) -> bool:
    """Whether one pass of dev already vetoes clearly enough to stop there (`policies.dev_guard_evidence`): its
    P(better) is at or below the veto's line squared, (1 - `confidence`)^2 (0.04 at the default 0.8), a stricter
    line for stopping early, as a sequential test draws one. Above it, a veto waits for one more pass."""
    return dev.confidence <= (1.0 - confidence) ** 2


def _count(value: float) -> str:
    return f"{value:.0f}" if abs(value - round(value)) < 1e-9 else f"{value:.2f}"


def make_acceptance(
    min_margin: float,
    reject_task_regression: bool,
    accept_neutral: bool,
    score: str = "mean_score",
    measure: str = "sequential",
    confidence: float = 0.8,
    metric: MetricScale | None = None,
) -> Acceptance:
    if measure not in MEASURES:
        raise ValueError(f"unknown acceptance {measure!r}; available: {', '.join(MEASURES)}")
    if not 0.5 < confidence < 1.0:
        raise ValueError(f"the acceptance confidence must be in (0.5, 1), not {confidence}")
    return Acceptance(min_margin, reject_task_regression, accept_neutral, score, measure, confidence, metric)
