"""The run's scheduler: iterations in flight as tasks (`hub`), one pool of sandboxes (`pool`), an injected clock with
a latency model (`latency`), and how sessions are timed (`sessions`).

`Schedule` says which clock a run follows; `Pipeline` how much of its work overlaps. Both are chosen once per run
(`saddler.run.loop.Optimizer`); the bench builds its own (`Pipeline.serial()` is the loop before the scheduler).
"""

from __future__ import annotations

from dataclasses import dataclass

from saddler.schedule.latency import ASSUMED, LatencyModel

EPOCH_S = 1_767_225_600.0
"""Where a simulated run's clock starts (2026-01-01T00:00:00Z): its timestamps are this plus virtual seconds."""


@dataclass(frozen=True)
class Schedule:
    """The clock of a run's events. `latency` None: real time, each result taken as it comes. Otherwise virtual
    time on that model: events happen in the order the model's latencies give, whatever the machine does, so the
    same seed and config give the same DAG; the work itself still runs for real. `simulated`: the store's
    timestamps read the virtual clock too (a simulated run: the bench and the estimate); otherwise they are real
    (a run whose backend is deterministic is ordered on `ASSUMED` and stamped in real time)."""

    latency: LatencyModel | None = None
    simulated: bool = False

    @property
    def virtual(self) -> bool:
        return self.latency is not None

    @classmethod
    def real(cls) -> Schedule:
        return cls()

    @classmethod
    def ordered(cls, latency: LatencyModel = ASSUMED) -> Schedule:
        return cls(latency)

    @classmethod
    def simulation(cls, latency: LatencyModel) -> Schedule:
        return cls(latency, simulated=True)


@dataclass(frozen=True)
class Pipeline:
    """How a run's work overlaps. `iterations`: how many are in flight at once (`loop.parallel_iterations`);
    `together`: the rollouts one decision needs of two nodes go as one submission (a close call's rounds, the dev
    guard's second pass, the minimization's train check), and the end of the run submits what does not depend on
    what else it runs (the minimization's cuts, the test of baseline and best) at once. `diagnoses_in_order`: an
    iteration's diagnosis starts once those of the iterations started before it have answered
    (`saddler.run.flights.DiagnosisOrder`)."""

    iterations: int = 1
    together: bool = True
    diagnoses_in_order: bool = True

    @classmethod
    def serial(cls) -> Pipeline:
        """The loop as it was before the scheduler: one iteration at a time, every evaluation waiting for the last."""
        return cls(iterations=1, together=False)


__all__ = ["ASSUMED", "EPOCH_S", "LatencyModel", "Pipeline", "Schedule"]
