"""The record of a measured minimization (`saddler.run.minimize`): which changes of the best harness were kept,
and the dev points each one carries. Read by the report, `saddler status` and the pull-request hand-off.

A *change* is one hunk of the best node's diff against the baseline (a whole file for a new, deleted, binary or
mode-only file), numbered from 1 in diff order. Minimization records one `minimize.step` event per measured
removal and one `minimize.finished` event at the end; this module only reads them (no SQL: the store's
`events(kind=...)`), so every reader, in any layer, sees the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evodag.metric import MetricScale, score_text
from evodag.store import EvoDAG

STEP_EVENT = "minimize.step"
FINISHED_EVENT = "minimize.finished"
ORIGIN = "minimize"
"""The `origin` of every candidate node a minimization makes (a real commit with an edge from the harness it was
cut from); reports count these apart from the search's candidates. A cut that stood is `neutral` (kept), one put
back `rejected`; the ranking policy then picks the run's best among all kept nodes as always, so the minimized
harness becomes the run's best when the policy prefers it (under `best_dev`: its dev is not lower and it is
smaller)."""


@dataclass(frozen=True)
class Contribution:
    """One change of the best harness and what it carries on dev.

    `change` numbers it (1-based, diff order); `file` and `header` (the hunk's `@@` line, or `new file`, `deleted
    file`, `binary`, `mode`) say where it is; `patch` is the change alone as a git patch that applies to the
    baseline; `lines` its lines added plus removed; `edge` the lineage edge it came from (the last edge between
    baseline and best whose diff added its lines, else the last that changed its file; its child node holds the
    hypothesis), None when no edge names the file.
    `kept` is whether the minimized harness has it. `dev_points` is the dev score with it minus without it, measured
    on the harness it was last tested in (negative: the harness did better without it), on `dev_tasks` dev tasks:
    fewer than all when the evaluation stopped as soon as the harness without it was sure to be lower (then the
    difference on those tasks over every dev task: a floor when the harness it was cut from passes the rest); both
    None when the budget ran out before it was measured (an unmeasured change is kept). `step` is the
    `minimize.step` that measured it.
    """

    change: int
    file: str
    header: str
    patch: str
    lines: int
    edge: int | None
    kept: bool
    dev_points: float | None
    dev_tasks: int | None
    step: int | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Minimization:
    """A finished minimization of `best_node`: `node` is the minimized harness (`best_node` itself when every
    change was kept), `changes` how many changes the best had and `kept` how many the minimized one has, with the
    diff lines of each; `dev` is (full, minimized) dev score; `rollouts` what the minimization stored (counted in
    the run's budget); `stopped` why it ended (`done`, or the budget that ran out); `rule` the `minimize.rule` it
    removed changes by."""

    best_node: int
    node: int
    changes: int
    kept: int
    lines: tuple[int, int]
    dev: tuple[float | None, float | None]
    rollouts: int
    stopped: str
    contributions: tuple[Contribution, ...]
    rule: str = "not_lower"  # `minimize.rule`: when a removal stood
    dev_tasks: int = 0  # the run's dev tasks (a change measured on fewer was found out early)

    @property
    def smaller(self) -> bool:
        return self.node != self.best_node

    def counterpart(self, node: int) -> int | None:
        """The other harness of the pair (the full best for the minimized one, and back), None when not smaller."""
        if not self.smaller:
            return None
        return self.best_node if node == self.node else self.node if node == self.best_node else None

    def summary(self, scale: MetricScale | None = None) -> str:
        """`3 of 9 changes, dev 0.925 -> 0.925` (the report's and the summary line's wording); dev in the
        benchmark's own metric with `scale` (`dev 120 ms -> 118 ms`)."""
        full, small = (score_text(d, scale) for d in self.dev)
        return f"{self.kept} of {self.changes} changes, dev {full} -> {small}"

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["lines"], out["dev"] = list(self.lines), list(self.dev)
        out["contributions"] = [c.to_json() for c in self.contributions]
        return out


def minimization(store: EvoDAG, run_id: int, node: int | None = None) -> Minimization | None:
    """The run's latest finished minimization (when `node` is given: the one that minimized it or made it), or
    None when none finished."""
    for event in reversed(store.events(run_id=run_id, kind=FINISHED_EVENT)):
        payload = event.payload
        if node is None or node in (payload["best_node"], payload["node"]):
            return from_json(payload)
    return None


def contributions(store: EvoDAG, run_id: int, node: int | None = None) -> list[Contribution]:
    """Per change of the minimized harness, the dev points it carries (see `Contribution`); [] when the run has no
    finished minimization (of or into `node`, when given: pass the run's best). The hand-off's PR.md lists the
    kept ones, one commit each."""
    found = minimization(store, run_id, node)
    return list(found.contributions) if found else []


def from_json(payload: dict[str, Any]) -> Minimization:
    """A `Minimization` from the payload of its `minimize.finished` event."""
    fields = dict(payload)
    fields["lines"] = tuple(fields["lines"])
    fields["dev"] = tuple(fields["dev"])
    fields["contributions"] = tuple(Contribution(**c) for c in fields["contributions"])
    return Minimization(**fields)
