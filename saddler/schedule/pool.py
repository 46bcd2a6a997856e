"""One pool of sandboxes for the whole run: every rollout any task needs goes through it, and no batch is a barrier.

`RolloutPool.submit(jobs, on_result, priority)` queues rollouts; whenever a sandbox is free the most urgent queued
rollout starts (the lowest `priority`, then the order submitted), and each result goes to its submission's
`on_result` on the hub the moment it lands. A task waits on its `Submission` (`Hub.wait(sub.done)`), or on less: a
dev race decides after each result and `cancel()`s what has not started, and the task goes on while the rollouts
already running land (they are paid for: their rows are stored). So a slow rollout holds up only what needs its
result, parent and candidate share one submission, and other iterations' work fills every sandbox meanwhile.

Real time (`Hub(virtual=False)`): each rollout runs through the executor on a thread of its own (`Executor.run` with
one job: the local executor's isolated child, a Ray task, the bench's in-process runner). A benchmark that runs
whole batches itself (`BatchBenchmark`: Harbor) gets each submission as one batch holding as many sandboxes as it
has rollouts (at most all of them).

Virtual time: a rollout lands `LatencyModel.rollout` seconds after it starts, whatever its real work took; a
rollout's result depends on its job alone, so this gives the same rows as real time while the order of events
follows the model. Its real work runs on a thread (the executor's child, a Ray task) from the moment it is
submitted when no race may drop it, else from the moment it starts, at most `sandboxes` at once; its landing waits
for it if need be. An executor that runs rollouts in this process (`runs_here`: the bench's) computes them when the
first of those running lands, with those queued that no race may drop.

`busy_seconds` integrates the sandboxes in use over the hub's clock (`utilisation()` is its share of the capacity).
"""

from __future__ import annotations

import concurrent.futures
import functools
import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from saddler.benchmark import RolloutResult
from saddler.executor.base import RolloutJob
from saddler.ports import Executor, Progress
from saddler.reporting.progress import NullProgress
from saddler.schedule.hub import Future, Hub
from saddler.schedule.latency import LatencyModel

OnResult = Callable[[RolloutJob, RolloutResult], None]
PREFETCH = 4
"""On a virtual clock, results are computed for up to this many times the sandboxes at once (see `_compute`)."""
BatchRunner = Callable[[Sequence[RolloutJob], OnResult], None]


@dataclass(eq=False)
class Submission:
    """Rollouts handed to the pool together. `done` is set once every one has landed or been cancelled (with the
    first error `on_result` raised, if any); `landed` counts those whose result was handed on."""

    pool: RolloutPool
    jobs: tuple[RolloutJob, ...]
    on_result: OnResult
    priority: tuple[Any, ...]
    done: Future[None]
    serial: int = 0  # unique among the pool's submissions
    may_drop: bool = False  # a race may drop what has not started
    landed: int = 0
    queued: set[int] = field(default_factory=set)  # indices not started
    running: int = 0
    error: BaseException | None = None

    def cancel(self) -> int:
        """Drop the rollouts not started (those running still land); how many were dropped."""
        dropped = set(self.queued)
        self.queued.clear()
        self.pool.dropped(self, dropped)
        return len(dropped)

    def _maybe_done(self) -> None:
        if not self.queued and self.running == 0 and not self.done.done():
            if self.error is not None:
                self.done.set_exception(self.error)
            else:
                self.done.set_result(None)


@dataclass(eq=False)
class _Unit:
    """What occupies sandboxes: one rollout, or one batch of a batch-running benchmark."""

    sub: Submission
    indices: tuple[int, ...]
    held: int = 0  # sandboxes it occupies while it runs
    left: int = 0  # rollouts whose result has not landed

    @property
    def jobs(self) -> list[RolloutJob]:
        return [self.sub.jobs[i] for i in self.indices]


class RolloutPool:
    """See the module docstring. `sandboxes` is how many rollouts run at once (`executor.workers`); `batch_runner`,
    when given, runs a whole submission as one batch (a `BatchBenchmark`) instead of one rollout per sandbox;
    `latency` times rollouts on a virtual hub."""

    def __init__(
        self,
        hub: Hub,
        executor: Executor,
        sandboxes: int,
        *,
        latency: LatencyModel | None = None,
        batch_runner: BatchRunner | None = None,
        progress: Progress | None = None,
    ) -> None:
        if hub.virtual and latency is None:
            raise ValueError("a pool on a virtual clock needs a latency model")
        self.hub, self.executor, self.sandboxes = hub, executor, max(1, sandboxes)
        self.latency, self.batch_runner = latency, batch_runner
        self.progress: Progress = progress or NullProgress()
        self.observer: Callable[[], None] | None = None  # told after every start and landing (the run's state file)
        self.busy = 0
        self.busy_seconds = 0.0
        self.started = 0  # rollouts started, ever
        self._since = self._last = hub.now()
        self._queue: list[tuple[tuple[Any, ...], int, _Unit]] = []
        self._seq = itertools.count()
        self._serials = itertools.count()
        self._pending: list[_Unit] = []  # virtual: started batch units whose results are not computed yet
        # virtual, with an executor whose rollouts run elsewhere (children, Ray): each started rollout's real work
        # runs on a thread from the moment it starts; an executor that runs them in this process says so
        # (`runs_here`), and its results are computed when the first running one lands (`_compute`)
        self._threads = (
            None
            if getattr(executor, "runs_here", False) or not hub.virtual
            else (
                concurrent.futures.ThreadPoolExecutor(max_workers=self.sandboxes, thread_name_prefix="saddler-rollout")
            )
        )
        self._running: dict[tuple[int, int], concurrent.futures.Future[RolloutResult]] = {}
        self._results: dict[tuple[int, int], RolloutResult] = {}  # virtual: (submission serial, index) -> result

    # what tasks call ----------------------------------------------------------------------------------
    def submit(
        self, jobs: Sequence[RolloutJob], on_result: OnResult, priority: tuple[Any, ...] = (), may_drop: bool = False
    ) -> Submission:
        """Queue `jobs` (see the module docstring); returns at once. `may_drop`: a race may `cancel()` what has not
        started (then nothing of it is computed ahead: a rollout computed for nothing may cost money)."""
        sub = Submission(self, tuple(jobs), on_result, priority, Future(self.hub, "rollouts"), next(self._serials))
        sub.may_drop = may_drop
        if not jobs:
            sub.done.set_result(None)
            return sub
        sub.queued = set(range(len(jobs)))
        units = (
            [_Unit(sub, tuple(range(len(jobs))))]
            if self.batch_runner is not None
            else [_Unit(sub, (i,)) for i in range(len(jobs))]
        )
        for unit in units:
            heapq.heappush(self._queue, (priority, next(self._seq), unit))
        if self._threads is not None and not may_drop and self.batch_runner is None:  # certain to run: start its work
            for i, job in enumerate(sub.jobs):
                self._running[(sub.serial, i)] = self._threads.submit(self._one, job)
        self.progress.extend(len(jobs), self._label())
        self._dispatch()
        return sub

    def queued(self) -> int:
        """Rollouts waiting for a sandbox."""
        return sum(len(u.indices) for *_key, u in self._queue if u.sub.queued)

    def utilisation(self) -> float:
        """The share of sandbox-seconds used since the pool was made."""
        self._account()
        span = self.hub.now() - self._since
        return self.busy_seconds / (span * self.sandboxes) if span > 0 else 0.0

    def dropped(self, sub: Submission, indices: set[int]) -> None:
        """The queued rollouts `indices` of `sub` will never start (cancelled, or the submission failed): results
        computed ahead for them are thrown away."""
        if indices:
            self.progress.advance(len(indices))
        for i in indices:
            self._results.pop((sub.serial, i), None)
        sub._maybe_done()

    # dispatch ---------------------------------------------------------------------------------------
    def _label(self) -> str:
        return f"rollouts ({self.busy}/{self.sandboxes} sandboxes busy, {self.queued()} queued)"

    def _account(self) -> None:
        now = self.hub.now()
        self.busy_seconds += self.busy * (now - self._last)
        self._last = now

    def _dispatch(self) -> None:
        while self._queue and self.busy < self.sandboxes:
            unit = self._queue[0][-1]
            live = tuple(i for i in unit.indices if i in unit.sub.queued)
            if not live:
                heapq.heappop(self._queue)
                continue
            need = min(len(live), self.sandboxes)
            if self.busy + need > self.sandboxes and self.busy > 0:
                return  # a batch waits for the sandboxes it needs
            heapq.heappop(self._queue)
            unit = _Unit(unit.sub, live)
            for i in live:
                unit.sub.queued.discard(i)
            unit.sub.running += len(live)
            self._account()
            self.busy += need
            self.started += len(live)
            self._start(unit, need)
        if self.observer is not None:
            self.observer()

    def _start(self, unit: _Unit, held: int) -> None:
        unit.held, unit.left = held, len(unit.indices)
        if self.hub.virtual:
            assert self.latency is not None
            if self.batch_runner is not None:
                self._pending.append(unit)
            for i in unit.indices:
                job = unit.sub.jobs[i]
                token = (unit.sub.serial, i)
                if self.batch_runner is None and self._threads is not None and token not in self._running:
                    self._running[token] = self._threads.submit(self._one, job)  # its real work starts now
                delay = self.latency.rollout(job.task.id, job.cache_key or job.trace_dir)
                self.hub.call_later(delay, functools.partial(self._land_virtual, unit, i))
            return
        runner: BatchRunner = self.batch_runner or self.executor.run
        jobs = unit.jobs

        def work() -> None:  # on a thread of its own: each result is posted back to the hub as it comes
            runner(jobs, lambda job, result: self.hub.post(lambda: self._land(unit, job, result)))

        ended = self.hub.run_in_thread(work, "rollouts")
        ended.add_done_callback(lambda future: self._end(unit, future.exception()))

    def _one(self, job: RolloutJob) -> RolloutResult:
        """One rollout through the executor (on a worker thread), its result."""
        got: list[RolloutResult] = []
        self.executor.run([job], lambda _job, result: got.append(result))
        if not got:
            raise RuntimeError(f"the executor returned no result for rollout {job.task.id}")
        return got[0]

    def _land_virtual(self, unit: _Unit, index: int) -> None:
        token = (unit.sub.serial, index)
        running = self._running.pop(token, None)
        if running is not None:
            self._results[token] = running.result()  # its real work, started with it: waited for here if need be
        if token not in self._results:
            self._compute(unit, index)
        self._land(unit, unit.sub.jobs[index], self._results.pop(token))
        if unit.left == 0:
            self._end(unit, None)

    def _compute(self, unit: _Unit, index: int) -> None:
        """The result of rollout `index` of `unit` — with those of the other rollouts running and, ahead of time, of
        the next queued ones (up to `PREFETCH` x the sandboxes in all), so the executor's own workers stay busy: one
        executor call for single rollouts, one batch-runner call per batch unit. A result computed ahead for a
        rollout a race then drops is thrown away, never stored."""
        if self.batch_runner is not None:
            units, self._pending = self._pending, []
            for started in units:
                self._run_for({(started.sub.serial, i): started.sub.jobs[i] for i in started.indices}, True)
            return
        wanted: dict[tuple[int, int], RolloutJob] = {(unit.sub.serial, index): unit.sub.jobs[index]}
        for *_key, queued in sorted(self._queue, key=lambda entry: entry[:2]):
            if len(wanted) >= PREFETCH * self.sandboxes:
                break
            if queued.sub.may_drop:
                continue
            for i in queued.indices:
                token = (queued.sub.serial, i)
                if i in queued.sub.queued and token not in self._results and len(wanted) < PREFETCH * self.sandboxes:
                    wanted[token] = queued.sub.jobs[i]
        self._run_for(wanted, False)

    def _run_for(self, wanted: dict[tuple[int, int], RolloutJob], batch: bool) -> None:
        tokens = {id(job): token for token, job in wanted.items()}  # the jobs are alive for the whole call

        def keep(job: RolloutJob, result: RolloutResult) -> None:
            self._results[tokens[id(job)]] = result

        if batch:
            assert self.batch_runner is not None
            self.batch_runner(list(wanted.values()), keep)
        else:
            self.executor.run(list(wanted.values()), keep)

    def _land(self, unit: _Unit, job: RolloutJob, result: RolloutResult) -> None:
        """One rollout's result, handed to its submission's `on_result` (once; an error there fails the submission:
        its queued rollouts are dropped and the waiting task gets the error)."""
        sub = unit.sub
        unit.left -= 1
        sub.running -= 1
        sub.landed += 1
        self.progress.advance()
        if sub.error is None:
            try:
                sub.on_result(job, result)
            except BaseException as exc:  # a system fault while storing it (a full disk)
                sub.error = exc
                dropped = set(sub.queued)
                sub.queued.clear()
                self.dropped(sub, dropped)
        sub._maybe_done()

    def _end(self, unit: _Unit, error: BaseException | None) -> None:
        """The unit gave its sandboxes back; rollouts it never returned (an executor that failed) fail the
        submission."""
        self._account()
        self.busy -= unit.held
        sub = unit.sub
        if unit.left:
            sub.running -= unit.left
            unit.left = 0
            error = error or RuntimeError(f"the executor returned no result for {len(unit.indices)} rollout(s)")
        if error is not None and sub.error is None:
            sub.error = error
            sub.queued.clear()
        sub._maybe_done()
        self._dispatch()
        if self.busy == 0 and not self.queued():
            self.progress.finish()

    def close(self) -> None:
        """Stop the worker threads of a virtual pool (rollouts still running finish)."""
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
