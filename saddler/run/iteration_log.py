"""The run's iterations as the loop reads them before every iteration, without reading the whole run each time.

An iteration never changes once it is finished (every update of the loop comes before `finished_at`), so
`IterationLog.read()` keeps the finished ones it has read and asks the store only for newer and unfinished ones
(`evodag.queries.iterations_after`): the same list as `EvoDAG.iterations(run_id)`, at a cost that does not grow
with the run.
"""

from __future__ import annotations

from evodag.models import Iteration
from evodag.queries import iterations_after
from evodag.store import EvoDAG


class IterationLog:
    """The iterations of run `run_id` of `store`, read incrementally (see the module docstring)."""

    def __init__(self, store: EvoDAG, run_id: int) -> None:
        self.store, self.run_id = store, run_id
        self._finished: list[Iteration] = []
        self._last_finished_id = 0

    def read(self) -> list[Iteration]:
        """Every iteration of the run, by id, as the store holds it now."""
        fresh = iterations_after(self.store, self.run_id, self._last_finished_id)
        settled = 0
        while settled < len(fresh) and fresh[settled].finished_at is not None:
            settled += 1  # a finished prefix: kept from now on, the list stays in id order
        if settled:
            self._finished += fresh[:settled]
            self._last_finished_id = fresh[settled - 1].id
        return [*self._finished, *fresh[settled:]]
