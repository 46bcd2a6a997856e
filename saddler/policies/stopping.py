"""Stop conditions, checked at iteration boundaries from numbers counted in the store (never by a model).

Reasons are stable strings (stored as the run's termination reason): `stop_requested`, `paused`,
`max_iterations`, `max_rollouts`, `cost_cap`, `target_reached`, `stall_limit` (the stall count follows
`evodag.decisions.stall_after`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from saddler.config import LoopConfig
from saddler.control import RunControls


def budget_spent(
    iterations_done: int,
    max_iterations: int,
    rollouts: int = 0,
    max_rollouts: int = 0,
    cost_usd: float = 0.0,
    cost_cap_usd: float = 0.0,
) -> str | None:
    """`max_iterations`, `max_rollouts` or `cost_cap` (in that order) once that budget is used up, else None; a
    zero `max_rollouts` or `cost_cap_usd` is no limit. The main loop, fleet mode and skill mode's circuit breaker
    stop on these words."""
    if iterations_done >= max_iterations:
        return "max_iterations"
    if max_rollouts and rollouts >= max_rollouts:
        return "max_rollouts"
    if cost_cap_usd and cost_usd >= cost_cap_usd:
        return "cost_cap"
    return None


@dataclass(frozen=True)
class LoopState:
    iterations_done: int
    rollouts: int
    cost_usd: float
    best_dev: float | None
    stall_count: int


@dataclass
class StopConditions:
    loop: LoopConfig
    run_dir: Path

    def sentinel(self) -> str | None:
        """`stop_requested` / `paused` when RUN/STOP / RUN/PAUSE asks for it (STOP first), else None."""
        return RunControls(self.run_dir).asked()

    def check(self, state: LoopState) -> str | None:
        """The reason to stop before the next iteration, or None to go on."""
        asked = self.sentinel()
        if asked:
            return asked
        loop = self.loop
        spent = budget_spent(
            state.iterations_done, loop.max_iterations, state.rollouts, loop.max_rollouts, state.cost_usd,
            loop.cost_cap_usd,
        )  # fmt: skip
        if spent:
            return spent
        if state.best_dev is not None and state.best_dev >= self.loop.target_dev_score:
            return "target_reached"
        if self.loop.stall_limit and state.stall_count >= self.loop.stall_limit:
            return "stall_limit"
        return None
