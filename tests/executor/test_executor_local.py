"""LocalExecutor: every job delivered once, in the calling thread, in parallel, failures as data."""

from __future__ import annotations

import errno
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from saddler.benchmark import RolloutResult
from saddler.errors import DiskFullError, ExecutorError
from saddler.executor import make_executor
from saddler.executor.base import RolloutJob
from saddler.executor.local import LocalExecutor

pytestmark = pytest.mark.usefixtures("fakes_importable")  # rollout children import fake_benchmarks


def test_every_job_is_delivered_once_in_the_calling_thread(
    tmp_path: Path, executor_config: Callable[..., Any], make_harness: Callable[..., Path], make_job: Callable[..., Any]
) -> None:
    harness = make_harness(tmp_path / "h")
    jobs = [make_job(harness, tmp_path / "t", f"ok-{i}", seed=i) for i in range(6)]
    jobs.append(make_job(harness, tmp_path / "t", "crash-1"))
    seen: list[tuple[str, str]] = []
    caller = threading.get_ident()

    def on_result(job: RolloutJob, result: RolloutResult) -> None:
        assert threading.get_ident() == caller
        assert result.task_id == job.task.id
        seen.append((job.task.id, result.disposition))

    executor = make_executor(executor_config(workers=3, timeout_s=30))
    assert isinstance(executor, LocalExecutor)
    executor.run(jobs, on_result)
    assert sorted(t for t, _ in seen) == sorted(j.task.id for j in jobs)
    assert dict(seen)["crash-1"] == "infra_error"
    executor.run([], on_result)  # nothing to do is fine
    executor.close()


def test_workers_run_in_parallel(
    tmp_path: Path, executor_config: Callable[..., Any], make_harness: Callable[..., Path], make_job: Callable[..., Any]
) -> None:
    """Four rollouts that each wait for all four to have started: only parallel workers let them pass (they meet
    in a shared folder, which only `sandbox = "none"` lets them write)."""
    harness = make_harness(tmp_path / "h")
    (tmp_path / "barrier").mkdir()
    prompt = json.dumps({"dir": str(tmp_path / "barrier"), "parties": 4})
    jobs = [make_job(harness, tmp_path / "t", f"barrier-{i}", prompt=prompt, timeout_s=20) for i in range(4)]
    executor = LocalExecutor(executor_config(workers=4, timeout_s=30, sandbox="none"))
    results: list[str] = []
    executor.run(jobs, lambda job, result: results.append(result.disposition))
    executor.close()
    assert results == ["success"] * 4


def test_completion_order_not_submission_order(
    tmp_path: Path, executor_config: Callable[..., Any], make_harness: Callable[..., Path], make_job: Callable[..., Any]
) -> None:
    harness = make_harness(tmp_path / "h")
    jobs = [make_job(harness, tmp_path / "t", "sleep-slow", timeout_s=0.8), make_job(harness, tmp_path / "t", "ok-1")]
    order: list[str] = []
    executor = LocalExecutor(executor_config(workers=2, timeout_s=30))
    executor.run(jobs, lambda j, r: order.append(j.task.id))
    executor.close()
    assert order == ["ok-1", "sleep-slow"]


def test_a_failing_callback_stops_the_pool_and_kills_running_children(
    tmp_path: Path, executor_config: Callable[..., Any], make_harness: Callable[..., Path], make_job: Callable[..., Any]
) -> None:
    harness = make_harness(tmp_path / "h")
    jobs = [make_job(harness, tmp_path / "t", "ok-0")]
    jobs += [make_job(harness, tmp_path / "t", f"sleep-{i}", timeout_s=60) for i in range(3)]
    executor = LocalExecutor(executor_config(workers=2, timeout_s=60))

    def on_result(job: RolloutJob, result: RolloutResult) -> None:
        raise KeyError("store is gone")

    start = time.monotonic()
    with pytest.raises(KeyError, match="store is gone"):
        executor.run(jobs, on_result)
    assert time.monotonic() - start < 10
    assert executor.runner._active == {}
    executor.close()


@pytest.fixture
def worker_fault(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    executor_config: Callable[..., Any],
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
) -> Callable[[OSError], BaseException]:
    """`worker_fault(exc)`: what `LocalExecutor.run` raises when its worker's rollout raises `exc`."""

    def run(exc: OSError) -> BaseException:
        executor = LocalExecutor(executor_config(workers=1))

        def broken(job: RolloutJob, cancel: object = None) -> RolloutResult:
            raise exc

        monkeypatch.setattr(executor.runner, "run", broken)
        with pytest.raises(Exception) as err:
            executor.run([make_job(make_harness(tmp_path / "h"), tmp_path / "t", "ok-1")], lambda j, r: None)
        return err.value

    return run


def test_a_system_fault_in_a_worker_is_an_executor_error(worker_fault: Callable[[OSError], BaseException]) -> None:
    raised = worker_fault(OSError(errno.EMFILE, "Too many open files"))
    assert isinstance(raised, ExecutorError)
    assert str(raised) == "rollout worker failed: [Errno 24] Too many open files"  # the message, not a repr


def test_a_full_disk_in_a_worker_is_the_one_line_disk_full_error(
    tmp_path: Path, worker_fault: Callable[[OSError], BaseException]
) -> None:
    raised = worker_fault(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "t" / "trace.jsonl")))
    assert isinstance(raised, DiskFullError)
    assert str(raised).startswith(f"disk full: saddler could not write to {tmp_path / 't' / 'trace.jsonl'} (")


def test_ray_without_the_extra_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, executor_config: Callable[..., Any]
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail as if it were not installed
    with pytest.raises(ExecutorError, match=r"pip install 'saddler\[ray\]'"):
        make_executor(executor_config(kind="ray"))
