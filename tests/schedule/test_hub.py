"""The scheduler's hub: tasks that wait, virtual and real clocks, errors, and stopping."""

from __future__ import annotations

import threading
import time

import pytest

from saddler.schedule.hub import Cancelled, Deadlock, Future, Hub


def test_virtual_time_jumps_to_the_next_timer_without_sleeping() -> None:
    hub = Hub(virtual=True)
    seen: list[tuple[str, float]] = []

    def sleeper(name: str, seconds: float) -> None:
        hub.sleep(seconds)
        seen.append((name, hub.now()))

    def main() -> float:
        hub.gather(lambda: sleeper("long", 7200.0), lambda: sleeper("short", 60.0), lambda: sleeper("tie", 60.0))
        return hub.now()

    started = time.monotonic()
    assert hub.run(main) == 7200.0
    assert time.monotonic() - started < 1.0  # two hours of virtual time, no real waiting
    assert seen == [("short", 60.0), ("tie", 60.0), ("long", 7200.0)]  # a tie goes in the order the timers were set


def test_the_same_tasks_give_the_same_order_of_events() -> None:
    def trace() -> list[str]:
        hub = Hub(virtual=True)
        log: list[str] = []

        def worker(i: int) -> None:
            for step in range(3):
                hub.sleep(10.0 * ((i * 7 + step * 3) % 5 + 1))
                log.append(f"{i}.{step}@{hub.now():.0f}")

        hub.run(lambda: hub.gather(*(lambda i=i: worker(i) for i in range(4))))
        return log

    assert trace() == trace()


def test_a_task_error_reaches_whoever_waits_and_the_run() -> None:
    hub = Hub(virtual=True)

    def failing() -> None:
        hub.sleep(1.0)
        raise ValueError("the disk is full")

    def main() -> None:
        task = hub.spawn(failing)
        hub.wait(task)

    with pytest.raises(ValueError, match="disk is full"):
        hub.run(main)


def test_waiting_outside_a_task_is_refused() -> None:
    hub = Hub(virtual=True)
    with pytest.raises(RuntimeError, match="outside a task"):
        hub.wait(Future(hub))


def test_a_wait_nothing_can_end_is_a_deadlock() -> None:
    hub = Hub(virtual=True)
    with pytest.raises(Deadlock, match="nothing can wake"):
        hub.run(lambda: hub.wait(Future(hub, "never set")))


def test_a_task_may_not_wait_inside_a_transaction() -> None:
    held = {"transaction": True}
    hub = Hub(virtual=True, switch_guard=lambda: "an open store transaction" if held["transaction"] else None)
    with pytest.raises(RuntimeError, match="open store transaction"):
        hub.run(lambda: hub.sleep(1.0))


def test_tasks_still_alive_at_the_end_are_stopped_and_their_finally_blocks_run() -> None:
    hub = Hub(virtual=True)
    cleaned: list[str] = []

    def forever() -> None:
        try:
            hub.sleep(1e9)
        finally:
            cleaned.append("worktree removed")

    def main() -> str:
        hub.spawn(forever, "left behind")
        hub.sleep(1.0)
        return "done"

    assert hub.run(main) == "done"
    assert cleaned == ["worktree removed"]


def test_a_cancelled_future_raises_cancelled_for_its_waiter() -> None:
    hub = Hub(virtual=True)
    future: Future[int] = Future(hub, "rollout")

    def main() -> None:
        hub.call_later(5.0, future.cancel)
        future.result()

    with pytest.raises(Cancelled):
        hub.run(main)


def test_real_time_work_on_threads_comes_back_while_other_tasks_go_on() -> None:
    hub = Hub(virtual=False)
    order: list[str] = []
    gate = threading.Event()

    def slow() -> str:
        gate.wait(5.0)
        return "agent answered"

    def agent() -> None:
        order.append(hub.run_in_thread(slow, "session").result())

    def other() -> None:
        hub.sleep(0.05)
        order.append("rollout landed")
        gate.set()

    hub.run(lambda: hub.gather(agent, other))
    assert order == ["rollout landed", "agent answered"]


def test_gather_one_after_another_runs_in_order() -> None:
    hub = Hub(virtual=True)
    log: list[str] = []

    def part(name: str, seconds: float) -> str:
        hub.sleep(seconds)
        log.append(name)
        return name

    result = hub.run(lambda: hub.gather(lambda: part("a", 5.0), lambda: part("b", 1.0), concurrent=False))
    assert result == ["a", "b"] and log == ["a", "b"]
    assert hub.now() == 6.0


def test_a_failed_task_is_heard_before_any_other_ready_task_runs() -> None:
    hub = Hub(virtual=True)
    ran: list[str] = []
    turn: Future[None] = Future(hub, "turn")

    def failing() -> None:
        try:
            hub.sleep(1.0)
            raise RuntimeError("authentication failed")
        finally:
            turn.set_result(None)  # as an iteration's end lets the next diagnosis begin

    def next_one() -> None:
        hub.wait(turn)
        ran.append("a paid session")

    def main() -> None:
        tasks = [hub.spawn(failing, "iteration 1"), hub.spawn(next_one, "iteration 2")]
        hub.wait_any(tasks).result()

    with pytest.raises(RuntimeError, match="authentication"):
        hub.run(main)
    assert ran == []  # the run ended before iteration 2 went on
