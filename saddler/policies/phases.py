"""Phased patch scheduling: Capability first, then Steering, moving on evidence.

The scheduled phase of an iteration (`phase`):

- `transition` says when Capability ends on schedule: `epochs` (the paper's default: once `capability_epochs` x
  the train size tasks have been shown, repeats counted) or `full_coverage` (once every train task has been shown
  at least once, however many repeats that took: the rule that suits a curriculum sampler).
- `moves = "evidence"` (the default) also ends Capability early when its search stalls: `patience` discards in a
  row (counted in code, as the plateau is) mean the Capability search found nothing to keep, so the run moves to
  Steering for good. `moves = "fixed"` is the paper's schedule only.

Then, per iteration, `follow_evidence` looks at the files the parent's failures on this batch point at (each
failing rollout's `failure_file`, classified by the component map) and moves the phase for this iteration only:

- in Capability, when every failure with a known file points at steering files, the iteration is Steering (no
  capability patch can answer it);
- in Steering, when every such failure points at capability files, the iteration is Capability; when some do,
  capability patches are allowed too (`mixed`): the schedule must not forbid the only patches that would help.
- with `widening = "on_no_patch"`, an iteration narrowed to Capability or Steering that way whose diagnosis finds
  no patch there is asked again in `mixed` (`widen`): a failure's file is where it shows, not always where its fix
  goes.

Failures without a known file are no evidence: a benchmark that does not report failure files gets the scheduled
phase. `none` is the paper's no-structure ablation: one phase that allows every patch kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evodag.decisions import running_stalls
from saddler.harness.components import CAPABILITY, MIXED, STEERING

NONE = "none"
PHASES = (CAPABILITY, STEERING, MIXED, NONE)


@dataclass
class PhaseSchedule:
    mode: str  # capability_then_steering | none
    train_size: int
    capability_epochs: float = 1.0
    steering_allows_capability: bool = False
    transition: str = "epochs"  # epochs | full_coverage
    moves: str = "evidence"  # evidence | fixed
    patience: int = 3  # evidence moves: discards in a row that end Capability early (0 = never)
    widening: str = "never"  # never | on_no_patch (see `widen`)

    def phase(self, tasks_seen: int, distinct_seen: int | None = None, stalled: bool = False) -> str:
        """Scheduled phase of an iteration that starts after `tasks_seen` train tasks were shown (repeats counted),
        `distinct_seen` of them distinct (default: as many as shown, capped at the train size); `stalled` when the
        Capability search stalled earlier (see `stalled`)."""
        return self.scheduled(tasks_seen, distinct_seen, stalled)[0]

    def scheduled(self, tasks_seen: int, distinct_seen: int | None = None, stalled: bool = False) -> tuple[str, str]:
        """`phase`, and why in words (the reason a `phase.moved` event gives when the schedule moves)."""
        if self.mode == "none":
            return NONE, "one phase (phases = none)"
        if stalled and self.moves == "evidence":
            return STEERING, f"the Capability search stalled: {self.patience} discards in a row (phase_patience)"
        if self.transition == "full_coverage":
            covered = min(tasks_seen, self.train_size) if distinct_seen is None else distinct_seen
            if covered < self.train_size:
                return CAPABILITY, f"{covered} of the {self.train_size} train tasks shown at least once"
            return STEERING, f"every one of the {self.train_size} train tasks shown at least once"
        epochs = f"{self.capability_epochs:g}"
        due = self.capability_epochs * self.train_size
        if tasks_seen < due:
            return CAPABILITY, f"{tasks_seen} of the {due:g} train tasks to show first (capability_epochs {epochs})"
        return STEERING, f"{tasks_seen} train tasks shown, capability_epochs {epochs} x {self.train_size} train tasks"

    def stalled(self, decisions: Sequence[str | None]) -> bool:
        """Whether the decisions of the earlier iterations, in order, ever held `patience` discards in a row."""
        if self.moves != "evidence" or self.patience <= 0:
            return False
        return any(count >= self.patience for count in running_stalls(decisions))

    def follow_evidence(self, phase: str, failure_kinds: Mapping[str, int]) -> tuple[str, str] | None:
        """The phase this iteration moves to, and why, given how many of the parent's failing tasks on the batch
        point at files of each kind (`capability`, `steering`, ...); None to stay."""
        if self.moves != "evidence" or self.mode == "none":
            return None
        cap, steer = failure_kinds.get(CAPABILITY, 0), failure_kinds.get(STEERING, 0)
        if phase == CAPABILITY and steer and not cap:
            return (
                STEERING,
                f"the batch's {steer} failing task(s) with a known failure file all point at steering files",
            )
        if phase == STEERING and cap and not steer:
            return (
                CAPABILITY,
                f"the batch's {cap} failing task(s) with a known failure file all point at capability files",
            )
        if phase == STEERING and cap and CAPABILITY not in self.allowed_kinds(STEERING):
            return MIXED, f"{cap} failing task(s) of the batch point at capability files: capability patches allowed"
        return None

    def widen(self, phase: str) -> tuple[str, str] | None:
        """The phase, and why, for the next diagnosis attempt of an iteration an evidence move narrowed to `phase`
        when the diagnosis found no patch there (`widening = "on_no_patch"`); None to stay. A failure's file says
        where it shows, not always where its fix goes (a wrong guess surfacing in a tool may be a prompt's to fix),
        so a narrowed phase with nothing left to try must not end the iteration."""
        if self.widening != "on_no_patch" or phase not in (CAPABILITY, STEERING):
            return None
        if set(self.allowed_kinds(phase)) >= {CAPABILITY, STEERING}:  # steering_allows_capability: nothing to add
            return None
        other = STEERING if phase == CAPABILITY else CAPABILITY
        return MIXED, f"no {phase} patch answers the batch's failures: {other} patches allowed too"

    def allowed_kinds(self, phase: str) -> list[str]:
        if phase == CAPABILITY:
            return [CAPABILITY]
        if phase == STEERING:
            return [STEERING, CAPABILITY] if self.steering_allows_capability else [STEERING]
        return [CAPABILITY, STEERING]


def make_phase_schedule(
    mode: str,
    train_size: int,
    capability_epochs: float,
    steering_allows_capability: bool,
    transition: str = "epochs",
    moves: str = "evidence",
    patience: int = 3,
    widening: str = "never",
) -> PhaseSchedule:
    return PhaseSchedule(
        mode, train_size, capability_epochs, steering_allows_capability, transition, moves, patience, widening
    )
