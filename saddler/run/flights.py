"""Iterations in flight: how one starts, how one ends, and what the ones that ended say to the next.

Several iterations run at once (`loop.parallel_iterations`), so they finish in another order than they started. Each
iteration row records both: `number` is the order they started in, `finish_order` the order they finished in (1, 2,
...), and `started_after` how many had finished when it started. What a new iteration reads of the others comes from
the finished ones in the order they finished:

- **the latest kept node** (where evolution continues from): the last finished iteration's candidate if it kept
  it (or the node its change was carried onto the line as: `saddler.run.carry`), else its parent — unless another
  iteration finished while it was in flight and kept a candidate: then the last of those (a parent chosen before
  that keep is older news). With one iteration at a time nothing finishes during another, and this is the rule of
  the serial loop.
- **the stall count** (the discard streak the plateau and the stall limit read): over the decisions in finish
  order.

Starting an iteration (its batch, phase and row) happens on the scheduler's own task, before the iteration's task
runs, so two starts never read the same state; the batch sampler is told which tasks the iterations in flight hold
(`SamplerState.in_flight`), so two proposers do not chase the same failures while others remain.
"""

from __future__ import annotations

from evodag.decisions import KEPT_DECISIONS, stall_after, trailing_stalls
from evodag.models import Iteration, Node
from saddler.run import phase_moves
from saddler.run.context import RunContext
from saddler.run.sampling import sampler_state, scheduled_phase
from saddler.schedule.hub import Future, Hub


class DiagnosisOrder:
    """Diagnoses answer in the order their iterations started: an iteration's diagnosis begins once every iteration
    started before it and still in flight has its answer (a candidate, or none), so each proposer is told what the
    others are trying on its parent (`diagnosis.Excluded`) and no two write the same idea at once."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._answered: dict[int, Future[None]] = {}

    def started(self, number: int, answered: bool = False) -> None:
        self._answered[number] = Future(self.hub, f"diagnosis {number}")
        if answered:
            self.answered(number)

    def answered(self, number: int) -> None:
        future = self._answered.pop(number, None)
        if future is not None and not future.done():
            future.set_result(None)

    def wait_turn(self, number: int) -> None:
        for earlier in sorted(n for n in self._answered if n < number):
            future = self._answered.get(earlier)  # others answer (and leave) while this one waits
            if future is not None:
                self.hub.wait_done(future)


def finished_in_order(iterations: list[Iteration]) -> list[Iteration]:
    """The finished iterations in the order they finished (stores before the order was recorded: by number)."""
    done = [it for it in iterations if it.finished_at is not None]
    return sorted(done, key=lambda it: (it.finish_order if it.finish_order is not None else it.number, it.number))


def kept_node(it: Iteration) -> int | None:
    """The node a finished iteration kept: its candidate, or where its change was carried (`saddler.run.carry`:
    the carried node, or the node that held the change already); None when it kept nothing."""
    if it.decision not in KEPT_DECISIONS or it.candidate_id is None:
        return None
    carried = (it.evidence or {}).get("carried")
    if carried:
        return int(carried["node"] if carried.get("node") is not None else carried["onto"])
    return it.candidate_id


def latest_kept(ctx: RunContext, iterations: list[Iteration], baseline: Node) -> Node:
    """The node evolution continues from (see the module docstring)."""
    done = finished_in_order(iterations)
    if not done:
        return baseline
    last = done[-1]
    kept = kept_node(last)
    if kept is not None:
        return ctx.store.get_node(kept)
    seen = last.started_after if last.started_after is not None else len(done) - 1
    meanwhile = [k for k in (kept_node(it) for it in done[seen:-1]) if k is not None]
    if meanwhile:
        return ctx.store.get_node(meanwhile[-1])
    return ctx.store.get_node(last.parent_id) if last.parent_id is not None else baseline


def stalls(iterations: list[Iteration]) -> int:
    """The discard streak of the finished iterations, in the order they finished."""
    return trailing_stalls([it.decision for it in finished_in_order(iterations)])


def start(ctx: RunContext, iterations: list[Iteration], number: int, current: Node) -> Iteration:
    """Open iteration `number`: its mini-batch (told what the iterations in flight hold), its phase and its row."""
    store, cfg = ctx.store, ctx.cfg
    streak = stalls(iterations)
    state = sampler_state(store, iterations, number, current, ctx.sampler.adaptive)
    epoch, batch = ctx.sampler.batch(number - 1, state)
    phase, why = scheduled_phase(ctx.phases, iterations, number)
    was = scheduled_phase(ctx.phases, iterations, number - 1)[0] if number > 1 else phase
    exploration = bool(cfg.loop.plateau_threshold) and streak >= cfg.loop.plateau_threshold
    finished = sum(1 for it in iterations if it.finished_at is not None)
    with store.transaction():  # the schedule's own move (the end of Capability) is an event too
        it = store.start_iteration(
            ctx.run_id, number, epoch, batch, phase=phase, exploration=exploration, stall_count=streak,
            started_after=finished,
        )  # fmt: skip
        if was != phase:
            phase_moves.log_move(ctx, number, was, phase, why, scheduled=True)
    return it


def finish(ctx: RunContext, it: Iteration, decision: str, cand: Node | None) -> None:
    """Close iteration `it` with `decision`: its place in the finish order and the stall count after it."""
    iterations = ctx.iterations.read()
    done = finished_in_order(iterations)
    order = 1 + (done[-1].finish_order or done[-1].number if done else 0)
    ctx.store.update_iteration(
        it.id,
        decision=decision,
        candidate_id=cand.id if cand else None,
        stall_count=stall_after(stalls(iterations), decision),
        step="done",
        finished_at=ctx.store.clock(),
        last_rollout=ctx.store.last_rollout_id(),
        finish_order=order,
    )
