"""The run's scheduler: tasks that wait, on one thread, against one clock.

A run is a pipeline, not a chain: several iterations are in flight, each waiting for its rollouts and sessions
while the others go on. Each is a **task**: a greenlet (a coroutine that can wait from inside plain synchronous
code), so the loop's steps stay ordinary functions that call `evaluate(...)` and get rows back. Only one task runs
at a time, on the thread that opened the run: the store, git and every decision are never touched by two at once,
and a task gives the others their turn only where it waits (`Hub.wait`): for a rollout, a session, a sleep.

The clock is injected. `Hub(virtual=True)` keeps **virtual time**: a task waits for a duration (`sleep`, and the
latencies the rollout pool and the session runner draw from a `saddler.schedule.latency.LatencyModel`), and when
no task can run, time jumps to the next timer, at once; ties go in the order the timers were set. So the same
seed, config and latency model give the same order of events, and the same DAG, whatever the machine does. With
`virtual=False` timers are real and work done by other threads (`run_in_thread`: a rollout child, an agent CLI)
arrives when it is done.

Why greenlets and not asyncio, trio or SimPy (each has a virtual clock: aiotools' `VirtualClock`, trio's
`MockClock`, SimPy's environment): all three schedule coroutines or generators, so every function between the
loop and a rollout (evidence rounds, the dev guard, the minimization, session calls) would have to become `async`
or a generator, and every caller with it. A greenlet waits from inside a plain call, so the loop's code is the
method as it was written, and the scheduler is this one small file.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import greenlet

T = TypeVar("T")
_CURRENT: contextvars.ContextVar[Task[Any] | None] = contextvars.ContextVar("saddler_task", default=None)


class Deadlock(RuntimeError):
    """Every task waits and nothing can wake one: a defect of the scheduler's user, never of a run's inputs."""


class Cancelled(Exception):
    """What waiting on a cancelled future raises."""


class Future(Generic[T]):
    """A value some task or callback will set; tasks `Hub.wait` on it."""

    def __init__(self, hub: Hub, name: str = "") -> None:
        self.hub, self.name = hub, name
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future[T]], None]] = []
        self.urgent = False  # whoever waits for it runs before every other ready task (a fault ends the run first)

    def done(self) -> bool:
        return self._done

    def set_result(self, value: T) -> None:
        self._finish(value, None)

    def set_exception(self, error: BaseException) -> None:
        self._finish(None, error)

    def cancel(self) -> bool:
        """Mark it done with `Cancelled` (nothing when it is done already)."""
        if self._done:
            return False
        self._finish(None, Cancelled(self.name or "cancelled"))
        return True

    def _finish(self, value: Any, error: BaseException | None) -> None:
        if self._done:
            return
        self._done, self._value, self._error = True, value, error
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def add_done_callback(self, callback: Callable[[Future[T]], None]) -> None:
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def result(self) -> T:
        """The value (raising what the future holds); a task that calls it before it is done waits for it."""
        if not self._done:
            return self.hub.wait(self)
        if self._error is not None:
            raise self._error
        value: T = self._value
        return value

    def exception(self) -> BaseException | None:
        return self._error if self._done else None


class Task(Future[T]):
    """A function running as a greenlet under the hub; its result is the function's return value."""

    def __init__(self, hub: Hub, fn: Callable[[], T], name: str) -> None:
        super().__init__(hub, name)
        self.greenlet = greenlet.greenlet(self._main, parent=hub.main)
        self.greenlet.gr_context = contextvars.copy_context()  # what the spawner had set (its iteration, ...)
        self._fn = fn

    def _main(self, *_first: object) -> None:
        _CURRENT.set(self)
        try:
            value = self._fn()
        except greenlet.GreenletExit:
            self._finish(None, Cancelled(f"task {self.name} was stopped"))
        except BaseException as exc:  # handed to whoever waits on it
            self._finish(None, exc)
        else:
            self._finish(value, None)


class Hub:
    """Tasks, timers and a clock (see the module docstring). `run(fn)` runs `fn` as the first task until it
    returns; inside it, `spawn` more tasks and `wait` on futures. `switch_guard`, when given, is asked before a task
    gives up its turn and names what must not be held across a wait (an open store transaction)."""

    def __init__(
        self,
        *,
        virtual: bool = False,
        time_source: Callable[[], float] = time.monotonic,
        switch_guard: Callable[[], str | None] | None = None,
    ) -> None:
        self.virtual = virtual
        self._time_source = time_source
        self._t0 = time_source()
        self._vt = 0.0
        self.switch_guard = switch_guard
        self.main: greenlet.greenlet = greenlet.getcurrent()
        self._ready: deque[tuple[Task[Any], Any]] = deque()
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._posted: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._threads_out = 0  # thread work handed out whose result is not posted back yet
        self._lock = threading.Lock()
        self.tasks: list[Task[Any]] = []

    # time -------------------------------------------------------------------------------------------
    def now(self) -> float:
        """Seconds since the hub was made: virtual seconds, or real ones."""
        return self._vt if self.virtual else self._time_source() - self._t0

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Run `callback` on the hub (not in a task) `delay` seconds from now."""
        timer = Timer(self.now() + max(0.0, delay), callback)
        heapq.heappush(self._timers, (timer.when, next(self._seq), timer))
        return timer

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` (virtual or real) from inside a task."""
        done: Future[None] = Future(self, f"sleep {seconds:.0f}s")
        self.call_later(seconds, lambda: done.set_result(None))
        self.wait(done)

    # tasks ------------------------------------------------------------------------------------------
    def spawn(self, fn: Callable[[], T], name: str = "") -> Task[T]:
        """Start `fn` as a task (it runs at the hub's next turn)."""
        task = Task(self, fn, name or getattr(fn, "__name__", "task"))
        self.tasks.append(task)
        self._ready.append((task, None))
        return task

    @staticmethod
    def current() -> Task[Any] | None:
        return _CURRENT.get()

    def wait(self, future: Future[T]) -> T:
        """From inside a task: give the others their turn until `future` is done, then its value (or raise)."""
        if not future.done():
            task = self.current()
            if task is None or greenlet.getcurrent() is self.main:
                raise RuntimeError("Hub.wait outside a task: run the caller under Hub.run")
            held = self.switch_guard() if self.switch_guard else None
            if held:
                raise RuntimeError(f"a task may not wait while it holds {held}")
            future.add_done_callback(
                lambda f: self._ready.appendleft((task, None)) if f.urgent else self._ready.append((task, None))
            )
            self.main.switch()
        return future.result()

    def wait_any(self, futures: Iterable[Future[Any]]) -> Future[Any]:
        """The first of `futures` to be done (the first listed, when several are)."""
        pending = list(futures)
        for future in pending:
            if future.done():
                return future
        first: Future[Future[Any]] = Future(self, "any")

        def settle(done: Future[Any]) -> None:
            if not first.done():
                first.urgent = done.exception() is not None  # a task that failed: its waiter hears it first
                first.set_result(done)

        for future in pending:
            future.add_done_callback(settle)
        return self.wait(first)

    def gather(self, *fns: Callable[[], Any], concurrent: bool = True) -> list[Any]:
        """Run `fns` as tasks at once (or one after another when not `concurrent`) and return their values in
        order; the first error is raised once all have ended."""
        if not concurrent:
            return [fn() for fn in fns]
        tasks = [self.spawn(fn, getattr(fn, "__name__", "part")) for fn in fns]
        for task in tasks:
            if not task.done():
                self.wait_done(task)
        return [task.result() for task in tasks]

    def wait_done(self, future: Future[Any]) -> None:
        """Wait until `future` is done, whatever it holds (the caller reads it)."""
        if future.done():
            return
        flag: Future[None] = Future(self, "done")
        future.add_done_callback(lambda _f: flag.set_result(None))
        self.wait(flag)

    # other threads ----------------------------------------------------------------------------------
    def post(self, callback: Callable[[], None]) -> None:
        """Thread-safe: run `callback` on the hub at its next turn."""
        self._posted.put(callback)

    def run_in_thread(self, fn: Callable[[], T], name: str = "") -> Future[T]:
        """Run `fn` on a new thread (blocking work: a rollout child, an agent CLI); its value comes back as a future
        set on the hub."""
        future: Future[T] = Future(self, name)
        with self._lock:
            self._threads_out += 1

        def work() -> None:
            try:
                value = fn()
            except BaseException as exc:  # handed to the hub
                error = exc
                self.post(lambda: self._landed(lambda: future.set_exception(error)))
            else:
                self.post(lambda: self._landed(lambda: future.set_result(value)))

        threading.Thread(target=work, name=f"saddler-{name or 'work'}", daemon=True).start()
        return future

    def _landed(self, deliver: Callable[[], None]) -> None:
        with self._lock:
            self._threads_out -= 1
        deliver()

    # the loop ---------------------------------------------------------------------------------------
    def run(self, fn: Callable[[], T], name: str = "run") -> T:
        """Run `fn` as the first task and everything it starts until `fn` returns; its value (or its error). Tasks
        still alive then are stopped (their `finally` blocks run)."""
        if greenlet.getcurrent() is not self.main:
            raise RuntimeError("Hub.run is called from the thread and greenlet that made the hub")
        root = self.spawn(fn, name)
        try:
            while not root.done():
                self._turn()
        finally:
            self.stop_all()
        return root.result()

    def stop_all(self) -> None:
        """Stop every task still alive, the newest first, running their `finally` blocks now."""
        for task in reversed(self.tasks):
            if not task.greenlet.dead and task.greenlet:  # started and suspended
                task.greenlet.throw(greenlet.GreenletExit)
            elif not task.done():
                task.cancel()
        self.tasks = [t for t in self.tasks if not t.done()]

    def _turn(self) -> None:
        """One step: a ready task, else work posted by threads, else the next timer (waiting for it in real time)."""
        if self._ready:
            task, value = self._ready.popleft()
            if not task.greenlet.dead:
                task.greenlet.switch(value)
            self._forget_dead()
            return
        try:
            callback = self._posted.get_nowait()
        except queue.Empty:
            callback = None
        if callback is not None:
            callback()
            return
        if self._timers and ((self.virtual and self._threads_out == 0) or self._timers[0][0] <= self.now()):
            when, _seq, timer = heapq.heappop(self._timers)
            if self.virtual:
                self._vt = max(self._vt, when)
            if not timer.cancelled:
                timer.callback()
            return
        if not self._timers and self._threads_out == 0:
            waiting = ", ".join(t.name for t in self.tasks if not t.done()) or "none"
            raise Deadlock(f"every task waits and nothing can wake one (tasks: {waiting})")
        timeout = None if not self._timers or self.virtual else max(0.0, self._timers[0][0] - self.now())
        try:
            callback = self._posted.get(timeout=timeout)
        except queue.Empty:
            return
        callback()

    def _forget_dead(self) -> None:
        if len(self.tasks) > 64:
            self.tasks = [t for t in self.tasks if not t.done()]


class Lock:
    """A lock tasks wait for, granted in the order they asked (`acquire` from a task; `release` by its holder)."""

    def __init__(self, hub: Hub, name: str = "lock") -> None:
        self.hub, self.name = hub, name
        self.holder: Task[Any] | None = None
        self._queue: deque[tuple[Task[Any] | None, Future[None]]] = deque()

    def acquire(self) -> None:
        task = self.hub.current()
        if self.holder is None and not self._queue:
            self.holder = task
            return
        turn: Future[None] = Future(self.hub, self.name)
        self._queue.append((task, turn))
        self.hub.wait(turn)

    def release(self) -> None:
        if self._queue:
            self.holder, turn = self._queue.popleft()
            turn.set_result(None)
        else:
            self.holder = None


class Timer:
    """A callback due at `when` (hub seconds); `cancel()` keeps it from running."""

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when, self.callback, self.cancelled = when, callback, False

    def cancel(self) -> None:
        self.cancelled = True
