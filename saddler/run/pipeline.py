"""The run's scheduler wired into an open run: its pool of sandboxes, its sessions timed by its clock, its
commits dated by the iteration that makes them (`saddler.schedule` is the scheduler itself).

`attach(ctx, hub, schedule, pipeline)` gives the run context its hub and pool: the evaluator's rollouts and the
session calls then wait as tasks of the hub. `default_schedule` is the clock a run follows when nothing else is
asked: virtual time on the assumed latencies when the backend is deterministic (the offline backend: the same seed
then gives the same DAG, however many iterations are in flight), real time otherwise.
"""

from __future__ import annotations

import contextvars
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from evodag.base import Clock, utc_now
from saddler.benchmark import BatchBenchmark, complete
from saddler.config import RunConfig
from saddler.control import SCHEDULE_FILE
from saddler.harness.gitcmd import logical_commit_time
from saddler.run.context import RunContext
from saddler.schedule import EPOCH_S, Pipeline, Schedule
from saddler.schedule.hub import Hub
from saddler.schedule.latency import ASSUMED
from saddler.schedule.pool import RolloutPool

ITERATION: contextvars.ContextVar[int] = contextvars.ContextVar("saddler_iteration", default=0)
"""The iteration the calling task works for (0: the run's own steps); its commits carry that iteration's date."""

DETERMINISTIC_BACKENDS = ("offline",)
"""Backends whose sessions give the same answer to the same request: their runs are ordered on a virtual clock."""


def default_schedule(cfg: RunConfig) -> Schedule:
    """Virtual time on `ASSUMED` for a deterministic backend, real time for an agent (see the module docstring)."""
    return Schedule.ordered(ASSUMED) if cfg.sessions.backend in DETERMINISTIC_BACKENDS else Schedule.real()


def store_clock(schedule: Schedule, hub: Hub) -> Clock:
    """The store's timestamps: the virtual clock from `EPOCH_S` in a simulation, else the wall clock."""
    if not schedule.simulated:
        return utc_now

    def simulated() -> str:
        return datetime.fromtimestamp(EPOCH_S + hub.now(), UTC).isoformat(timespec="milliseconds")

    return simulated


def attach(ctx: RunContext, hub: Hub, schedule: Schedule, pipeline: Pipeline) -> RolloutPool:
    """Give `ctx` its scheduler (see the module docstring); the pool every rollout of the run goes through."""
    bench = complete(ctx.benchmark)
    batched = isinstance(bench, BatchBenchmark) and ctx.evaluator.batch is not None
    pool = RolloutPool(
        hub,
        ctx.executor,
        ctx.cfg.executor.workers,
        latency=schedule.latency,
        batch_runner=ctx.evaluator.run_as_batch if batched else None,
        progress=ctx.evaluator.progress,
    )
    ctx.hub, ctx.pool, ctx.pipeline = hub, pool, pipeline
    ctx.evaluator.pool = pool
    ctx.calls.hub, ctx.calls.latency = hub, schedule.latency
    ctx.calls.beside_others = lambda: pipeline.iterations > 1 or pool.busy > 0 or pool.queued() > 0
    ctx.space.clock = lambda: logical_commit_time(ITERATION.get())
    return pool


SEARCH_EVENT = "schedule.search_ended"
"""The event logged when the search ends: the pool's use until then (sandbox-seconds, the span, the sandboxes)."""


class ScheduleState:
    """Writes `schedule.json` in the run folder — the iterations in flight, sandboxes busy, rollouts queued, and an ETA
    of the search from the pace of this process so far (real seconds per finished iteration, times those left) — at
    most once every `every_s` of real time, and whenever forced. `seconds` is the scheduler's clock (virtual on a
    virtual clock); the ETA is always in real seconds."""

    def __init__(self, ctx: RunContext, hub: Hub, pool: RolloutPool, every_s: float = 1.0) -> None:
        self.ctx, self.hub, self.pool, self.every_s = ctx, hub, pool, every_s
        self.path = Path(ctx.paths.root) / SCHEDULE_FILE
        self.in_flight: list[int] = []
        self._last = 0.0
        self._started = time.monotonic()
        self._finished_at_start: int | None = None

    def update(self, force: bool = False) -> None:
        if not force and time.monotonic() - self._last < self.every_s:
            return
        self._last = time.monotonic()
        self.write()

    def snapshot(self) -> dict[str, object]:
        iterations = self.ctx.iterations.read()
        finished = sum(1 for it in iterations if it.finished_at is not None)
        if self._finished_at_start is None:
            self._finished_at_start = finished
        done_here = finished - self._finished_at_start
        elapsed = time.monotonic() - self._started
        left = max(0, self.ctx.cfg.loop.max_iterations - finished)
        eta = elapsed / done_here * left if done_here else None
        return {
            "clock": "virtual" if self.hub.virtual else "real",
            "seconds": round(self.hub.now(), 3),
            "written_at": time.time(),
            "in_flight": sorted(self.in_flight),
            "parallel_iterations": self.ctx.pipeline.iterations,
            "sandboxes": self.pool.sandboxes,
            "busy": self.pool.busy,
            "queued": self.pool.queued(),
            "utilisation": round(self.pool.utilisation(), 4),
            "iterations_finished": finished,
            "search_eta_s": None if eta is None else round(eta, 1),
        }

    def write(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(self.snapshot()))
        os.replace(tmp, self.path)
