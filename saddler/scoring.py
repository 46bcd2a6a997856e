"""Node scores: the one place they are computed (dev, test, reports, exports, benchmarks).

A node's score on a split is per repetition the mean over tasks of the per-task score, then mean ± population
std over repetitions. An `infra_error` rollout (not the candidate's fault) counts nowhere: `counted` leaves it out
of every score, and `infra_share` says how many there were. The per-task score is `passed` (0/1) under
`pass_rate` — that figure is Pass@1 — or the graded `score` (0..1, partial credit) under `mean_score`
(`node_score`; `policies.score` chooses).
`metric_mean` reads a benchmark's own metric back from the scores. `bootstrap_ci` resamples tasks (seeded) for a
confidence interval of a node's mean score, and `paired_bootstrap_ci` for the difference between two nodes on the
same tasks, so a report can say how much of a gain could be noise.
`figure` writes a score for a person or a grep (`DECIMALS` decimals, `nan` when missing), and `metric_line` one
grep-able `name: value` line: the lines closing `saddler run`'s output and report.md alike.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from saddler.benchmark import SCORE_KINDS, MetricScale

__all__ = [
    "DECIMALS", "MEASURED", "SCORE_KINDS", "PassAt1", "bootstrap_ci", "counted", "figure", "infra_share", "metric_line",
    "metric_mean", "node_score", "paired_bootstrap_ci", "pass_at_1", "recorded_score_kind",
]  # fmt: skip

MEASURED = ("success", "task_failure")
DECIMALS = 4


def figure(value: float | None, *, signed: bool = False) -> str:
    """A score as saddler writes it: `DECIMALS` decimals (`+` before a positive one when `signed`); `nan` when None."""
    if value is None:
        return "nan"
    return f"{value:+.{DECIMALS}f}" if signed else f"{value:.{DECIMALS}f}"


def metric_line(name: str, value: float | int | str | None) -> str:
    """One grep-able `name: value` line: a float as `figure` (signed for a `delta_*` name), None as `nan`, an int
    or text as is."""
    if value is None or isinstance(value, float):
        return f"{name}: {figure(value, signed=name.startswith('delta_'))}"
    return f"{name}: {value}"


class ScoredRow(Protocol):
    """What Pass@1 reads from a rollout row."""

    task_id: str
    repetition: int
    passed: bool
    score: float


@dataclass(frozen=True)
class PassAt1:
    """Mean ± population std of the per-run pass rates; `per_run` in repetition order (empty: no rows)."""

    mean: float
    std: float
    per_run: tuple[float, ...] = field(default=())

    @property
    def runs(self) -> int:
        return len(self.per_run)

    def figures(self) -> dict[str, Any]:
        """{"mean", "std", "runs"} as a report states them: rounded to 6 decimals, mean and std None without runs."""
        if not self.per_run:
            return {"mean": None, "std": None, "runs": 0}
        return {"mean": round(self.mean, 6), "std": round(self.std, 6), "runs": self.runs}


def counted(rows: Iterable[ScoredRow]) -> list[ScoredRow]:
    """The rows a score counts: all but `infra_error` ones (the rollout could not run; its score means nothing)."""
    return [row for row in rows if getattr(row, "disposition", "") != "infra_error"]


def infra_share(rows: Iterable[ScoredRow]) -> tuple[int, int]:
    """(infra_error rows, all rows)."""
    listed = list(rows)
    return len(listed) - len(counted(listed)), len(listed)


def _per_task(rows: Iterable[ScoredRow], kind: str) -> dict[str, float]:
    """Task id -> the task's mean `task_value` over its counted repetitions."""
    values: dict[str, list[float]] = defaultdict(list)
    for row in counted(rows):
        values[row.task_id].append(task_value(row, kind))
    return {task: float(np.mean(v)) for task, v in values.items()}


def task_scores(rows: Iterable[ScoredRow], kind: str) -> dict[str, float]:
    """Task id -> the task's score under `kind` (its mean over counted repetitions): per-task before/after."""
    return _per_task(rows, kind)


def pass_at_1(rows: Iterable[ScoredRow]) -> PassAt1:
    """Pass@1 over `rows`; no rows gives mean 0, std 0 and no runs."""
    return node_score(rows, "pass_rate")


def recorded_score_kind(config: dict[str, Any], inputs: dict[str, Any] | None) -> str:
    """The per-task score a run scores by, as its store records it: `policies.score` of its inputs (resolved for
    the benchmark, updated by an allowed change), else of its stored config, else `pass_rate` (runs made before
    the setting existed)."""
    kind = (inputs or {}).get("policies.score") or (config.get("policies") or {}).get("score", "pass_rate")
    return kind if kind in SCORE_KINDS else "pass_rate"


def task_value(row: ScoredRow, kind: str) -> float:
    """One rollout's contribution to its task's score: `passed` as 0/1 (pass_rate) or its graded score."""
    if kind == "pass_rate":
        return float(bool(row.passed))
    if kind == "mean_score":
        return float(row.score)
    raise ValueError(f"unknown score kind {kind!r}; use pass_rate or mean_score")


def node_score(rows: Iterable[ScoredRow], kind: str) -> PassAt1:
    """Mean ± std over repetitions of the per-repetition mean `task_value` of the counted rows (no infra errors);
    no such rows gives 0, 0 and no runs."""
    per_rep: dict[int, list[float]] = defaultdict(list)
    for row in counted(rows):
        per_rep[row.repetition].append(task_value(row, kind))
    if not per_rep:
        return PassAt1(0.0, 0.0, ())
    runs = np.array([np.mean(v) for _, v in sorted(per_rep.items())], dtype=float)
    return PassAt1(float(runs.mean()), float(runs.std()), tuple(float(x) for x in runs))


class MeasuredRow(ScoredRow, Protocol):
    """What `metric_mean` reads from a rollout row."""

    disposition: str
    error_tail: str


def metric_mean(rows: Iterable[MeasuredRow], scale: MetricScale) -> float | None:
    """Mean of the benchmark's own metric over the rows that measured one (graded, no error_tail), read back
    from each score through `scale`, to 12 significant digits; None when no row measured anything."""
    values = [scale.metric(r.score) for r in rows if r.disposition in MEASURED and not r.error_tail]
    finite = [v for v in values if np.isfinite(v)]
    return float(f"{np.mean(finite):.12g}") if finite else None  # 12 digits: the score round trip's noise goes


def bootstrap_ci(
    rows: Iterable[ScoredRow], kind: str = "pass_rate", *, level: float = 0.95, samples: int = 2000, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of a node's mean score, resampling tasks with replacement (seeded); None
    without rows."""
    per_task = np.array(list(_per_task(rows, kind).values()))
    if per_task.size == 0:
        return None
    return _interval(per_task, level, samples, seed)


def paired_bootstrap_ci(
    before: Iterable[ScoredRow],
    after: Iterable[ScoredRow],
    kind: str = "pass_rate",
    *,
    level: float = 0.95,
    samples: int = 2000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of mean(after) - mean(before) over the tasks both were run on, resampling
    those tasks with replacement (paired: a task's difficulty cancels out); None when they share no task."""
    a, b = _per_task(before, kind), _per_task(after, kind)
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    return _interval(np.array([b[t] - a[t] for t in shared]), level, samples, seed)


def _interval(values: np.ndarray, level: float, samples: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(samples, len(values)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return round(float(lo), 6), round(float(hi), 6)
