"""An iteration's phase moves, each a `phase.moved` event with its reason (the rules are `saddler.policies.phases`).

Three moves, one payload (`log_move`): the schedule's own (the end of Capability, `"scheduled": true`, logged with
the iteration row), a move on the batch's evidence (`follow_evidence`: where the parent's failures point), and the
widening of a narrowed phase whose diagnosis found no patch (`widen`, `"widened": true` and the attempt it starts
at; `policies.phase_widening`). A resumed iteration reads its own moves back (`attempt_phase`) so it replays its
attempts in the phase each was asked in.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from evodag.models import Iteration, RolloutRow
from saddler.run.context import RunContext
from saddler.run.outcomes import failure_kinds

KIND = "phase.moved"


def log_move(
    ctx: RunContext,
    number: int,
    src: str,
    dst: str,
    reason: str,
    *,
    scheduled: bool = False,
    widened_at: int | None = None,
) -> None:
    """The `phase.moved` event of iteration `number`: `scheduled` for the schedule's move, `widened_at` for a
    widening (the attempt it starts at), else a move on evidence. The one place its payload is written."""
    move: dict[str, Any] = {"iteration": number, "from": src, "to": dst, "reason": reason, "scheduled": scheduled}
    if widened_at is not None:
        move |= {"widened": True, "attempt": widened_at}
    ctx.store.log_event(KIND, move, run_id=ctx.run_id)


def follow_evidence(ctx: RunContext, it: Iteration, before: list[RolloutRow]) -> Iteration:
    """Move this iteration's phase where the parent's failures on the batch point (`PhaseSchedule.follow_evidence`),
    as an event with its reason and the iteration's stored phase; `it` unchanged otherwise."""
    moved = ctx.phases.follow_evidence(it.phase, failure_kinds(before, ctx.space.classify))
    if moved is None:
        return it
    phase, why = moved
    with ctx.store.transaction():
        log_move(ctx, it.number, it.phase, phase, why)
        return ctx.store.update_iteration(it.id, phase=phase)


def attempt_phase(ctx: RunContext, it: Iteration) -> tuple[Iteration, bool, bool]:
    """`it` as its first diagnosis attempt sees it (in the narrowed phase when a resumed iteration already widened),
    whether an evidence move narrowed it, and whether it already widened."""
    moves = [
        e.payload for e in ctx.store.events(run_id=ctx.run_id, kind=KIND) if e.payload.get("iteration") == it.number
    ]
    widened = next((m for m in moves if m.get("widened")), None)
    if widened is not None:
        it = replace(it, phase=str(widened["from"]))
    narrowed = any(not m.get("scheduled") and not m.get("widened") and m.get("to") == it.phase for m in moves)
    return it, narrowed, widened is not None


def widen(
    ctx: RunContext, it: Iteration, phase: str, because: str, why: str, attempt: int, *, recorded: bool
) -> Iteration:
    """`it` in the wider phase, the widening recorded at once unless a resumed iteration `recorded` it already:
    the narrowed attempt's `diagnosis.no_patch` (`why`), the move (`because`) and the iteration's new phase."""
    if not recorded:
        with ctx.store.transaction():
            ctx.store.log_event(
                "diagnosis.no_patch", {"iteration": it.number, "reason": why, "phase": it.phase}, run_id=ctx.run_id
            )
            log_move(ctx, it.number, it.phase, phase, because, widened_at=attempt)
            ctx.store.update_iteration(it.id, phase=phase)
    return replace(it, phase=phase)
