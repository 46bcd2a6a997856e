"""The store's view the batch sampler and the phase schedule read before an iteration (`SamplerState`).

Everything is derived from tables that exist anyway: the earlier iterations' stored batches and decisions
(shown, seen, last shown, tries) and the reference node's lineage train rollouts (what it is believed to fail,
with each failure's signature). Only an adaptive sampler gets the failures (they cost a lineage query).
"""

from __future__ import annotations

from collections import Counter

from evodag.decisions import FRUITLESS
from evodag.models import Iteration, Node
from evodag.queries import lineage_train_outcomes
from evodag.store import EvoDAG
from saddler.policies.phases import PhaseSchedule
from saddler.policies.sampler import SamplerState


def sampler_state(
    store: EvoDAG, iterations: list[Iteration], number: int, reference: Node, with_failures: bool
) -> SamplerState:
    """The state before iteration `number` (1-based), from the run's `iterations` as the store holds them now,
    with the failures of `reference` if `with_failures`."""
    earlier = [it for it in iterations if it.number < number]
    last_shown: dict[str, int] = {}
    tries: Counter[str] = Counter()
    for it in sorted(earlier, key=lambda i: (i.number, i.id)):
        for task in it.batch:
            last_shown[task] = it.number - 1
            if it.decision in FRUITLESS:
                tries[task] += 1
    failing: dict[str, str] = {}
    if with_failures:
        for task, outcome in lineage_train_outcomes(store, reference.id).items():
            if outcome["signature"] is not None:
                failing[task] = outcome["signature"]
    shown, seen = _shown(earlier)
    return SamplerState(
        shown=shown,
        seen=seen,
        last_shown=last_shown,
        failing=failing,
        tries=dict(tries),
        in_flight=frozenset(task for it in earlier if it.finished_at is None for task in it.batch),
    )


def scheduled_phase(phases: PhaseSchedule, iterations: list[Iteration], number: int) -> tuple[str, str]:
    """The schedule's phase of iteration `number` (1-based) and why (`PhaseSchedule.scheduled`), from the batches
    (tasks shown, distinct tasks) and decisions (a stall) of the run's `iterations` before it."""
    earlier = [it for it in iterations if it.number < number]
    shown, seen = _shown(earlier)
    return phases.scheduled(shown, len(seen), stalled=phases.stalled([it.decision for it in earlier]))


def _shown(earlier: list[Iteration]) -> tuple[int, frozenset[str]]:
    """The train tasks `earlier` iterations showed, repeats counted, and the distinct ones: what the sampler and the
    phase schedule both count."""
    return sum(len(it.batch) for it in earlier), frozenset(task for it in earlier for task in it.batch)
