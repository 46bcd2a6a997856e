"""The seed modes' acceptance rules: named policies beside the optimizer's `acceptance`, each the rule its seed asks.

- `assertion_veto` (`AssertionVeto`, skill mode; the 000 seed's decision table 2-6). The candidate is compared with
  the current best on the same evals, by mean pass rate and assertion by assertion. `KEEP` only when the rate rises
  and no assertion regresses (one that passed on the best and fails or is missing now): the veto is per assertion,
  so gains elsewhere never buy a regression back. `NEUTRAL` (kept only once approved: the mode asks) when the rate
  is equal, the change came from a program.md strategy and nothing regressed. `DISCARD` otherwise. Rates within
  `EPS` are equal. The optimizer's `acceptance` has the same veto over tasks (`reject_task_regression`).
- `metric_keep` (`MetricKeep`, fleet mode; the 002 seed's program.md loop, steps 6-7: "If metric improved: keep the
  commit. If worse or crash: reset and log as discard/crash"). The seed leaves the decision to the agent; saddler
  takes it itself on its own measurement. `keep` (accepted) on a strict improvement in the metric's direction
  (any metric when there is no best yet), `crash` (invalid) when the eval gave no metric, `discard` (rejected)
  otherwise; the words are the results.tsv column's (`evodag.decisions.STATUS_TSV`).

Each decision is a pure function of what it is given: no store, no clock, no randomness.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from evodag.decisions import ACCEPTED, INVALID, REJECTED, STATUS_TSV

EPS = 1e-9
Direction = Literal["minimize", "maximize"]


def lost_passes(before: Mapping[str, bool], after: Mapping[str, bool]) -> list[str]:
    """The keys that passed in `before` and do not pass in `after` (missing there counts as failing), in
    `before`'s order: the regressions a veto looks at (tasks for `acceptance`, assertions for `assertion_veto`)."""
    return [key for key, ok in before.items() if ok and not after.get(key, False)]


@dataclass(frozen=True)
class SkillVerdict:
    """An `assertion_veto` decision: `decision` KEEP | NEUTRAL | DISCARD (the 000 seed's words,
    `evodag.decisions.SKILL_VERDICT_STATUS` maps them to node statuses), the assertions that regressed and those
    gained (sorted), and the reason in the seed's terms (`0.5000 -> 0.7500: improved without regression`)."""

    decision: str
    regressions: list[str]
    gained: list[str]
    reason: str


@dataclass(frozen=True)
class AssertionVeto:
    """The 000 seed's decision table (see the module docstring)."""

    name: str = "assertion_veto"

    def decide(
        self, new: float, best: float, new_map: Mapping[str, bool], best_map: Mapping[str, bool], from_program: bool
    ) -> SkillVerdict:
        """Candidate (`new` rate, `new_map` assertion -> passed) against the best (`best`, `best_map`);
        `from_program`: the change came from a program.md strategy (only such a change may be NEUTRAL)."""
        regressions = sorted(lost_passes(best_map, new_map))
        gained = sorted(lost_passes(new_map, best_map))
        text = f"{best:.4f} -> {new:.4f}"
        if new > best + EPS:
            if regressions:
                why = f"assertion regression on {', '.join(regressions)}"
                return SkillVerdict("DISCARD", regressions, gained, f"{text}: {why}")
            return SkillVerdict("KEEP", [], gained, f"{text}: improved without regression")
        if abs(new - best) <= EPS:
            if from_program and not regressions:
                return SkillVerdict("NEUTRAL", [], gained, f"{text}: equal, program.md strategy, no regression")
            why = f"regression on {', '.join(regressions)}" if regressions else "no improvement"
            return SkillVerdict("DISCARD", regressions, gained, f"{text}: equal pass rate, {why}")
        return SkillVerdict("DISCARD", regressions, gained, f"{text}: pass rate fell")


@dataclass(frozen=True)
class MetricVerdict:
    """A `metric_keep` decision: the candidate's node `status` (accepted | rejected | invalid) and the reason."""

    status: str
    reason: str

    @property
    def kept(self) -> bool:
        return self.status == ACCEPTED

    @property
    def tsv_status(self) -> str:
        """The results.tsv word: keep | discard | crash."""
        return STATUS_TSV[self.status]


@dataclass(frozen=True)
class MetricKeep:
    """The 002 seed's keep rule on one metric (see the module docstring)."""

    direction: Direction = "minimize"
    name: str = "metric_keep"

    def improved(self, new: float, best: float) -> bool:
        """Strictly better in `direction`."""
        return new < best if self.direction == "minimize" else new > best

    def best(self, metrics: Iterable[float]) -> float | None:
        """The best of `metrics` in `direction` (None for none)."""
        values = list(metrics)
        if not values:
            return None
        return min(values) if self.direction == "minimize" else max(values)

    def decide(self, metric: float | None, best: float | None, error: str = "") -> MetricVerdict:
        """The candidate's measured `metric` (None: the eval gave none, `error` says why) against the `best` kept
        one (None before any). The reason: `metric 2.0 -> 1.5 (minimize): keep[; error]`."""
        if metric is None:
            status = INVALID
        elif best is None or self.improved(metric, best):
            status = ACCEPTED
        else:
            status = REJECTED
        reason = f"metric {best} -> {metric} ({self.direction}): {STATUS_TSV[status]}"
        return MetricVerdict(status, reason + (f"; {error}" if error else ""))
