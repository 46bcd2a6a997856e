"""A tie that moved the failure it targeted is kept as a stepping stone (`policies.keep_stepping_stones`).

Failures are jagged: a task often fails for two reasons in a row, and a fix of the first one only shows the second
(a tool that lets the model see the line to fix, which then meets an edit tool that replaces the wrong copy). On
the score such a fix is a tie — the task fails before and after — and a strict rule rejects it, so the fix of the
second reason never gets the parent it needs. The evidence that tells this tie from a placebo is in the rollouts,
not in what the author claims: on the tasks the hypothesis targets, the parent's failure signature
(`evodag.history.failure_signature`: the harness file at the failure point and the failed check) is gone from the
candidate's rollout, which now fails somewhere else.

The rule, after a close call's evidence (`saddler.run.closecall`) ended in a rejection:

- the candidate tied its parent on every task compared (no win, no loss: nothing passed or failed differently);
- among the compared rollouts of targeted tasks that the parent failed, more now fail with another signature
  ("moved") than with the same one ("stuck"), and at least one moved;
- the parent is not a stepping stone itself: one step across a valley, never a walk along it.

Then the candidate is kept as `neutral`: it goes to dev like an accepted candidate, the dev guard can still refuse
it, the next iteration continues from it, and the returned node is still the kept node with the best dev score.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from evodag.decisions import NEUTRAL, REJECTED
from evodag.history import failure_signature
from evodag.models import Node, RolloutRow
from saddler.policies.acceptance import AcceptanceDecision

STONE_MARK = "kept as a stepping stone"
"""The words a stepping stone's decision reason carries (how a later decision recognizes its parent as one)."""


@dataclass(frozen=True)
class Movement:
    """What became of the targeted failures: rollouts (task, repetition) that fail now with another signature, or
    with the same one, and the most common signature change among the moved ones."""

    moved: int
    stuck: int
    example: str = ""

    @property
    def carries(self) -> bool:
        return self.moved > 0 and self.moved > self.stuck


def target_tasks(cand: Node) -> list[str]:
    """The tasks `cand`'s hypothesis targets (none for an exploration hypothesis)."""
    return list((cand.hypothesis or {}).get("target_tasks") or [])


def targeted_movement(targets: Iterable[str], before: list[RolloutRow], after: list[RolloutRow]) -> Movement:
    """Pair the parent's (`before`) and the candidate's (`after`) rollouts by task and repetition, and count, over
    the targeted tasks the parent failed and the candidate fails too, whose failure signature changed."""
    wanted = set(targets)
    mine = {(r.task_id, r.repetition): r for r in after if r.task_id in wanted}
    changes: dict[str, int] = {}
    moved = stuck = 0
    for row in before:
        other = mine.get((row.task_id, row.repetition))
        if other is None or row.passed or other.passed:
            continue
        was = failure_signature(row.rationale, row.failure_file, row.disposition)
        now = failure_signature(other.rationale, other.failure_file, other.disposition)
        if was == now:
            stuck += 1
        else:
            moved += 1
            change = f"{was} -> {now}"
            changes[change] = changes.get(change, 0) + 1
    example = max(sorted(changes), key=lambda c: changes[c]) if changes else ""
    return Movement(moved, stuck, example)


def is_stone(node: Node) -> bool:
    """Whether `node` was kept as a stepping stone."""
    return node.status == NEUTRAL and STONE_MARK in (node.status_reason or "")


def keep_moved_tie(
    enabled: bool,
    parent: Node,
    cand: Node,
    verdict: AcceptanceDecision,
    before: list[RolloutRow],
    after: list[RolloutRow],
) -> tuple[AcceptanceDecision, Movement | None]:
    """`verdict`, or a `neutral` one when the rule of the module docstring keeps the tie as a stepping stone; with
    the targeted failures' movement when the rule looked at them (None when the decision was no tie)."""
    if not enabled or verdict.verdict != REJECTED or verdict.wins or verdict.losses or is_stone(parent):
        return verdict, None
    movement = targeted_movement(target_tasks(cand), before, after)
    if not movement.carries:
        return verdict, movement
    why = (
        f"{verdict.reason}; {STONE_MARK}: the failure it targets moved on {movement.moved} of "
        f"{movement.moved + movement.stuck} targeted rollout(s) ({movement.example})"
    )
    return replace(verdict, verdict=NEUTRAL, reason=why), movement
