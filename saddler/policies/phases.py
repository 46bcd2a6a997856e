"""Phased patch scheduling: Capability until `capability_epochs` of train have been seen, then Steering.

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

    def phase(self, tasks_seen: int) -> str:
        """Phase of an iteration that starts after `tasks_seen` train tasks were shown."""
        if self.mode == "none":
            return NONE
        return CAPABILITY if tasks_seen < self.capability_epochs * self.train_size else STEERING

    def allowed_kinds(self, phase: str) -> list[str]:
        if phase == CAPABILITY:
            return [CAPABILITY]
        if phase == STEERING:
            return [STEERING, CAPABILITY] if self.steering_allows_capability else [STEERING]
        return [CAPABILITY, STEERING]


def make_phase_schedule(
    mode: str, train_size: int, capability_epochs: float, steering_allows_capability: bool
) -> PhaseSchedule:
    return PhaseSchedule(mode, train_size, capability_epochs, steering_allows_capability)
