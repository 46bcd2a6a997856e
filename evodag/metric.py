"""A benchmark's own metric and how every figure of it reads: the one home of the metric's formatting.

A benchmark may rank on a metric of its own (accuracy, p50 latency in ms, …) through a strictly monotonic map onto
the 0..1 score (`MetricScale`). The store records it with the run (the `benchmark.described` event), so `evo-dag`,
the report, results.tsv, acceptance reasons and the run's summary all show a score as the metric it stands for, in
the metric's unit and with its direction: `score_text` and `delta_text` (a plain score without a metric).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evodag.store import EvoDAG


def _g(value: float, sign: str = "") -> str:
    return f"{value:{sign}.6g}"


@dataclass(frozen=True)
class MetricScale:
    """A benchmark's own metric (accuracy, p99 ms, …) and its strictly monotonic map onto the 0..1 score.

    Better metric ⇔ higher score, so ranking and acceptance on the score are ranking and acceptance on the
    metric. With `low` < `high` the map is linear on [low, high] (the worse end 0, the better end 1) and clamps
    outside; without them it is 0.5 ± 0.5·m/(1+|m|), defined and invertible for every real m.
    """

    name: str
    direction: str  # maximize | minimize
    low: float | None = None
    high: float | None = None
    unit: str = ""  # e.g. "ms"; shown after every value

    def __post_init__(self) -> None:
        if self.direction not in ("maximize", "minimize"):
            raise ValueError(f"metric direction must be maximize or minimize, not {self.direction!r}")

    @property
    def linear(self) -> bool:
        return self.low is not None and self.high is not None and self.high > self.low

    def score(self, metric: float) -> float:
        """The metric as a 0..1 score, higher is better."""
        sign = 1.0 if self.direction == "maximize" else -1.0
        if self.linear:
            assert self.low is not None and self.high is not None
            frac = (metric - self.low) / (self.high - self.low)
            return min(1.0, max(0.0, frac if sign > 0 else 1.0 - frac))
        m = sign * metric
        return 0.5 / (1.0 - m) if m < 0 else 0.5 + 0.5 * m / (1.0 + m)

    def metric(self, score: float) -> float:
        """The metric a score stands for (exact inside the linear range; the bound where the map clamps)."""
        sign = 1.0 if self.direction == "maximize" else -1.0
        if self.linear:
            assert self.low is not None and self.high is not None
            frac = score if sign > 0 else 1.0 - score
            return self.low + frac * (self.high - self.low)
        if score <= 0.0 or score >= 1.0:
            return -sign * math.inf if score <= 0.0 else sign * math.inf
        m = 1.0 - 0.5 / score if score < 0.5 else (score - 0.5) / (1.0 - score)
        return sign * m

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def label(self) -> str:
        """`p50_ms (ms, minimize)`: the metric's name, unit and direction, as headings and lines name it."""
        return f"{self.name} ({', '.join(p for p in (self.unit, self.direction) if p)})"

    def show(self, score: float) -> str:
        """The metric a 0..1 score stands for, in its unit: `110 ms` (6 significant digits)."""
        return f"{self.plain(score)} {self.unit}".rstrip()

    def plain(self, score: float) -> str:
        """The metric a 0..1 score stands for, the number alone (`110`): a table column of the metric."""
        return _g(self.metric(score))

    def show_delta(self, before: float, after: float) -> str:
        """The change from `before` to `after` (scores) in the metric's unit, and whether it is better:
        `-15 ms (better)`."""
        change = self.metric(after) - self.metric(before)
        word = "same" if after == before else ("better" if after > before else "worse")
        return f"{_g(change, '+')} {self.unit}".rstrip() + f" ({word})"


def score_text(score: float | None, scale: MetricScale | None, digits: int = 3, missing: str = "—") -> str:
    """A score as a person reads it: the metric it stands for in its unit when the run has one (`110 ms`), else
    the 0..1 score to `digits` places; `missing` for None."""
    if score is None:
        return missing
    return scale.show(score) if scale is not None else f"{score:.{digits}f}"


def delta_text(before: float | None, after: float | None, scale: MetricScale | None, digits: int = 3) -> str:
    """The change between two scores: in the metric's unit with better/worse (`-15 ms (better)`), else signed."""
    if before is None or after is None:
        return "—"
    return scale.show_delta(before, after) if scale is not None else f"{after - before:+.{digits}f}"


def scale_of(payload: dict[str, Any] | None) -> MetricScale | None:
    """A recorded metric (`MetricScale.to_dict()`) read back; None when there is none."""
    if not payload:
        return None
    known = {k: payload[k] for k in ("name", "direction", "low", "high", "unit") if k in payload}
    return MetricScale(**known)


def run_metric(store: EvoDAG, run_id: int, *, batch: bool = False) -> MetricScale | None:
    """The metric a run's scores stand for: the one its benchmark declared (the `benchmark.described` event),
    when the run scores by the graded score (`policies.score = mean_score`: a pass rate stands for no metric).
    With `batch`, for the batch figures of acceptance, also only when acceptance compares mean scores (not
    `policies.acceptance = pass_count`, which compares shares of tasks passed). None otherwise."""
    policies = store.get_run(run_id).config.get("policies") or {}
    if policies.get("score", "pass_rate") != "mean_score":
        return None
    if batch and policies.get("acceptance") == "pass_count":
        return None
    for event in store.events(run_id=run_id, kind="benchmark.described"):
        scale = scale_of(event.payload.get("metric"))
        if scale is not None:
            return scale
    return None
