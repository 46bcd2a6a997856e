"""One pool of sandboxes: priorities, streaming results, races dropping what has not started, faults, and a
virtual clock whose results are the executor's."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest

from saddler.benchmark import RolloutResult, Task
from saddler.executor.base import RolloutJob
from saddler.schedule.hub import Hub
from saddler.schedule.latency import LatencyModel
from saddler.schedule.pool import PREFETCH, RolloutPool


class Recorder:
    """An executor that scores a job by its seed (score = seed / 100) and records every call; it runs rollouts in
    this process (`runs_here`), as the bench's does."""

    runs_here = True

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.lock = threading.Lock()

    def run(self, jobs: Sequence[RolloutJob], on_result: Callable[[RolloutJob, RolloutResult], None]) -> None:
        with self.lock:
            self.calls.append([job.task.id for job in jobs])
        for job in jobs:
            on_result(job, RolloutResult(task_id=job.task.id, score=job.seed / 100, passed=True, disposition="success"))

    def close(self) -> None:
        return None


class Fixed(LatencyModel):
    """Rollout `t<N>` takes N seconds."""

    def rollout(self, task_id: str, key: str) -> float:
        return float(task_id[1:])


def job(task: str, seed: int = 0) -> RolloutJob:
    return RolloutJob("b", {}, "/h", "c", "t", Task(task, "g", "train"), "train", seed, 0, f"/tr/{task}-{seed}", task)


def fixed() -> Fixed:
    return Fixed("fixed", 0, 0, 0, 0)


def test_results_stream_in_the_order_they_finish_and_sandboxes_are_never_exceeded() -> None:
    hub = Hub(virtual=True)
    pool = RolloutPool(hub, Recorder(), 2, latency=fixed())
    landed: list[tuple[str, float, int]] = []

    def main() -> None:
        sub = pool.submit(
            [job("t30"), job("t10"), job("t5"), job("t1")],
            lambda j, r: landed.append((j.task.id, hub.now(), pool.busy)),
        )
        hub.wait(sub.done)

    hub.run(main)
    # t30 and t10 start at once; t5 takes t10's sandbox at 10, t1 t5's at 15
    assert landed == [("t10", 10.0, 2), ("t5", 15.0, 2), ("t1", 16.0, 2), ("t30", 30.0, 1)]  # busy as it lands
    assert pool.busy == 0 and pool.started == 4
    assert pool.busy_seconds == pytest.approx(30 + 10 + 5 + 1)


def test_the_most_urgent_queued_rollout_starts_first() -> None:
    hub = Hub(virtual=True)
    pool = RolloutPool(hub, Recorder(), 1, latency=fixed())
    order: list[str] = []

    def main() -> None:
        first = pool.submit([job("t5")], lambda j, r: order.append(j.task.id), priority=(3,))
        later = pool.submit([job("t2")], lambda j, r: order.append(j.task.id), priority=(9,))
        urgent = pool.submit([job("t1")], lambda j, r: order.append(j.task.id), priority=(1,))
        for sub in (first, later, urgent):
            hub.wait(sub.done)

    hub.run(main)
    assert order == ["t5", "t1", "t2"]  # t5 had the sandbox already; then the lower priority key


def test_cancel_drops_what_has_not_started_and_the_running_ones_still_land() -> None:
    hub = Hub(virtual=True)
    pool = RolloutPool(hub, Recorder(), 2, latency=fixed())
    landed: list[str] = []

    def main() -> int:
        sub = pool.submit([job(f"t{n}") for n in (4, 8, 6, 7, 9)], lambda j, r: landed.append(j.task.id))
        hub.sleep(5.0)  # t4 landed, t6 started in its sandbox at 4; t8 runs
        dropped = sub.cancel()
        hub.wait(sub.done)
        return dropped

    assert hub.run(main) == 2
    assert landed == ["t4", "t8", "t6"]


def test_results_computed_ahead_for_dropped_rollouts_are_never_handed_to_others() -> None:
    hub = Hub(virtual=True)
    executor = Recorder()
    pool = RolloutPool(hub, executor, 1, latency=fixed())
    got: list[tuple[str, float]] = []

    def main() -> None:
        first = pool.submit([job("t1", seed=10), *(job("t5", seed=20) for _ in range(3))], lambda j, r: None)  # no race
        hub.sleep(2.0)  # t1 landed at 1 (its queued rollouts computed with it); the first t5 runs
        first.cancel()
        hub.wait(first.done)
        for seed in (30, 40, 50):  # new jobs, new objects: each must get its own result
            second = pool.submit([job("t2", seed=seed)], lambda j, r: got.append((j.task.id, r.score)))
            hub.wait(second.done)

    hub.run(main)
    assert got == [("t2", 0.3), ("t2", 0.4), ("t2", 0.5)]
    assert len(executor.calls[0]) == 4 <= PREFETCH  # one call computed the running rollout and those queued


def test_a_fault_while_storing_fails_the_submission_and_drops_the_rest() -> None:
    hub = Hub(virtual=True)
    pool = RolloutPool(hub, Recorder(), 1, latency=fixed())

    def store(j: RolloutJob, r: RolloutResult) -> None:
        raise OSError(28, "No space left on device")

    def main() -> None:
        sub = pool.submit([job("t1"), job("t2"), job("t3")], store)
        hub.wait(sub.done)

    with pytest.raises(OSError, match="No space"):
        hub.run(main)
    assert pool.busy == 0


def test_real_time_rollouts_run_on_threads_through_the_executor() -> None:
    hub = Hub(virtual=False)
    pool = RolloutPool(hub, Recorder(), 3)
    scores: dict[str, float] = {}

    def main() -> None:
        sub = pool.submit([job(f"t{n}", seed=n) for n in range(6)], lambda j, r: scores.__setitem__(j.task.id, r.score))
        hub.wait(sub.done)

    hub.run(main)
    assert scores == {f"t{n}": n / 100 for n in range(6)}


def test_a_batch_runner_gets_a_whole_submission_holding_its_sandboxes() -> None:
    hub = Hub(virtual=False)
    batches: list[list[str]] = []

    def batch(jobs: Sequence[RolloutJob], on_result: Callable[[RolloutJob, RolloutResult], None]) -> None:
        batches.append([j.task.id for j in jobs])
        for j in jobs:
            on_result(j, RolloutResult(task_id=j.task.id, score=1.0, passed=True, disposition="success"))

    pool = RolloutPool(hub, Recorder(), 4, batch_runner=batch)
    seen: list[Any] = []

    def main() -> None:
        sub = pool.submit([job("t1"), job("t2"), job("t3")], lambda j, r: seen.append(j.task.id))
        hub.wait(sub.done)

    hub.run(main)
    assert batches == [["t1", "t2", "t3"]] and sorted(seen) == ["t1", "t2", "t3"]


def test_a_virtual_pool_needs_a_latency_model() -> None:
    with pytest.raises(ValueError, match="latency model"):
        RolloutPool(Hub(virtual=True), Recorder(), 2)


def test_latency_draws_are_keyed_by_what_they_time() -> None:
    model = LatencyModel("m", 100.0, 10.0, 10.0, 60.0, seed=3)
    assert model.rollout("task-a", "key-1") == model.rollout("task-a", "key-1")
    assert model.rollout("task-a", "key-1") != model.rollout("task-a", "key-2")
    assert model.session("diagnosis_patch", "3:diagnosis_patch:0") != model.session("reflection", "3:reflection:0")
    assert replace(model, seed=4).rollout("task-a", "key-1") != model.rollout("task-a", "key-1")


def test_nothing_a_race_may_drop_is_computed_ahead() -> None:
    hub = Hub(virtual=True)
    executor = Recorder()
    pool = RolloutPool(hub, executor, 1, latency=fixed())

    def main() -> None:
        raced = pool.submit([job("t1"), job("t2"), job("t3")], lambda j, r: None, may_drop=True)
        hub.sleep(1.5)
        raced.cancel()
        hub.wait(raced.done)

    hub.run(main)
    assert executor.calls == [["t1"], ["t2"]]  # t3 was dropped before it started: never computed


class Elsewhere(Recorder):
    """The same, as an executor whose rollouts run in children (the pool runs each on a thread)."""

    runs_here = False


def test_a_rollout_no_race_may_drop_starts_its_real_work_when_submitted() -> None:
    hub = Hub(virtual=True)
    executor = Elsewhere()
    pool = RolloutPool(hub, executor, 1, latency=fixed())
    got: list[float] = []

    def main() -> None:
        sub = pool.submit([job("t3", seed=1), job("t1", seed=2)], lambda j, r: got.append(r.score))
        hub.wait(sub.done)

    hub.run(main)
    pool.close()
    assert got == [0.01, 0.02] and sorted(executor.calls) == [["t1"], ["t3"]]  # one call each, on threads
