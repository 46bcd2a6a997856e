"""`LocalExecutor`: a pool of N worker threads, each blocking on one isolated child process at a time.

The parallelism is the child processes; the threads only wait. Results reach `on_result` in the calling
thread, in completion order, through a queue. Jobs share no mutable state. If `on_result` raises or the
caller is interrupted, queued jobs are dropped, running children are killed, and the exception propagates.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence

from saddler.benchmark import RolloutResult
from saddler.config import ExecutorConfig
from saddler.errors import ExecutorError, as_user_error
from saddler.executor.base import RolloutJob
from saddler.executor.isolation import IsolatedRunner
from saddler.ports import ResultCallback

_DONE = object()


class LocalExecutor:
    """Runs rollouts on this machine with `config.workers` isolated children in parallel.
    `mode` is the isolation mode ("fork" or "spawn", see `IsolatedRunner`)."""

    def __init__(self, config: ExecutorConfig, mode: str | None = None) -> None:
        self.config = config
        self.runner = IsolatedRunner(config, mode)

    def run(self, jobs: Sequence[RolloutJob], on_result: ResultCallback) -> None:
        """Run every job; `on_result(job, result)` once per job as each finishes (calling thread)."""
        if not jobs:
            return
        todo: queue.Queue[RolloutJob] = queue.Queue()
        for job in jobs:
            todo.put(job)
        results: queue.Queue[tuple[RolloutJob, RolloutResult] | object] = queue.Queue()
        stop = threading.Event()
        n_workers = min(self.config.workers, len(jobs))
        threads = [
            threading.Thread(target=self._work, args=(todo, results, stop), name=f"saddler-rollout-{i}", daemon=True)
            for i in range(n_workers)
        ]
        for thread in threads:
            thread.start()
        finished = 0
        try:
            while finished < n_workers:
                item = results.get()
                if item is _DONE:
                    finished += 1
                elif isinstance(item, BaseException):
                    raise as_user_error(item) or ExecutorError(f"rollout worker failed: {item}") from item
                else:
                    assert isinstance(item, tuple)
                    on_result(item[0], item[1])
        finally:
            if finished < n_workers:
                stop.set()
                self.runner.kill_all()
            for thread in threads:
                thread.join()

    def _work(self, todo: queue.Queue[RolloutJob], results: queue.Queue[object], stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                results.put((job, self.runner.run(job, cancel=stop)))
        except Exception as exc:  # a system fault in the parent (disk full, fork failure): hand it over
            results.put(exc)
        finally:
            results.put(_DONE)

    def close(self) -> None:
        """Kill anything still running and stop the fork servers."""
        self.runner.close()
