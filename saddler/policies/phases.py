"""Phased patch scheduling: Capability first, then Steering.

The transition is `epochs` (the paper's default: once `capability_epochs` × the train size tasks have been
shown, repeats counted) or `full_coverage` (once every train task has been shown at least once, however many
repeats that took: the rule that suits a curriculum sampler, which revisits failing tasks).
`none` is the paper's no-structure ablation: one phase that allows every patch kind.
"""

from __future__ import annotations

from dataclasses import dataclass

CAPABILITY, STEERING, NONE = "capability", "steering", "none"


@dataclass
class PhaseSchedule:
    mode: str  # capability_then_steering | none
    train_size: int
    capability_epochs: float = 1.0
    steering_allows_capability: bool = False
    transition: str = "epochs"  # epochs | full_coverage

    def phase(self, tasks_seen: int, distinct_seen: int | None = None) -> str:
        """Phase of an iteration that starts after `tasks_seen` train tasks were shown (repeats counted),
        `distinct_seen` of them distinct (default: as many as shown, capped at the train size)."""
        if self.mode == "none":
            return NONE
        if self.transition == "full_coverage":
            covered = min(tasks_seen, self.train_size) if distinct_seen is None else distinct_seen
            return CAPABILITY if covered < self.train_size else STEERING
        return CAPABILITY if tasks_seen < self.capability_epochs * self.train_size else STEERING

    def allowed_kinds(self, phase: str) -> list[str]:
        if phase == CAPABILITY:
            return [CAPABILITY]
        if phase == STEERING:
            return [STEERING, CAPABILITY] if self.steering_allows_capability else [STEERING]
        return [CAPABILITY, STEERING]


def make_phase_schedule(
    mode: str, train_size: int, capability_epochs: float, steering_allows_capability: bool, transition: str = "epochs"
) -> PhaseSchedule:
    return PhaseSchedule(mode, train_size, capability_epochs, steering_allows_capability, transition)
