"""`RayExecutor`: the same isolated rollouts, spread over a Ray cluster (`pip install 'saddler[ray]'`).

The harness travels by tree: each distinct harness snapshot is tarred once and `ray.put` into the object
store; a task unpacks it once per node (cached under the node's temp dir by tree hash) and runs the same
isolated child as the local executor. Traces written on the worker come back as text in the task's
return value and the driver writes them into `job.trace_dir`, so the run folder holds them. Tasks are
keyed by `job.cache_key`: a task Ray retries, or two jobs with one key, yield one delivered result each.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from saddler.benchmark import RolloutResult
from saddler.config import ExecutorConfig
from saddler.errors import ExecutorError
from saddler.executor.base import RolloutJob
from saddler.executor.isolation import IsolatedRunner
from saddler.executor.reaper import TAIL_BYTES
from saddler.executor.sandbox import resolve_sandbox
from saddler.ports import ResultCallback

MAX_TRACE_BYTES = 8 * 1024 * 1024  # per file; larger traces are truncated on the way back


def snapshot_harness(harness_dir: Path) -> bytes:
    """A gzip tarball of the harness checkout (without `.git`)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(Path(harness_dir).rglob("*")):
            rel = path.relative_to(harness_dir)
            if rel.parts[0] == ".git" or not path.is_file():
                continue
            tar.add(path, arcname=str(rel), recursive=False)
    return buf.getvalue()


def unpack_harness(tree: str, snapshot: bytes, root: Path) -> Path:
    """The harness for `tree` under `root`, unpacked once per node (atomic rename; safe for racing tasks)."""
    dest = root / tree
    if dest.is_dir():
        return dest
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{tree[:12]}-", dir=root))
    with tarfile.open(fileobj=io.BytesIO(snapshot), mode="r:gz") as tar:
        tar.extractall(tmp, filter="data")
    try:
        tmp.rename(dest)
    except OSError:  # another task got there first
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def collect_traces(trace_dir: Path) -> dict[str, str]:
    """Every file under `trace_dir` as text, keyed by its relative path."""
    traces = {}
    for path in sorted(trace_dir.rglob("*")):
        if path.is_file():
            with open(path, "rb") as fh:
                traces[str(path.relative_to(trace_dir))] = fh.read(MAX_TRACE_BYTES).decode("utf-8", errors="replace")
    return traces


_WORKER_RUNNERS: dict[str, IsolatedRunner] = {}  # per Ray worker process: its fork servers live across tasks


def _worker_runner(config_json: str) -> IsolatedRunner:
    if config_json not in _WORKER_RUNNERS:
        _WORKER_RUNNERS[config_json] = IsolatedRunner(ExecutorConfig.model_validate_json(config_json))
    return _WORKER_RUNNERS[config_json]


def run_remote_rollout(job_json: str, snapshot: bytes, config_json: str) -> dict[str, Any]:
    """Body of one Ray task: unpack the harness, run the isolated child, return result and traces."""
    runner = _worker_runner(config_json)
    job = RolloutJob.from_json(job_json)
    base = Path(tempfile.gettempdir()) / "saddler-ray"
    harness = unpack_harness(job.tree, snapshot, base / "harness")
    trace_dir = base / "traces" / f"{job.cache_key or 'job'}-{uuid.uuid4().hex[:8]}"
    try:
        result = runner.run(replace(job, harness_dir=str(harness), trace_dir=str(trace_dir)))
        traces = collect_traces(trace_dir) if trace_dir.is_dir() else {}
    finally:
        shutil.rmtree(trace_dir, ignore_errors=True)
    return {"cache_key": job.cache_key, "result": result.to_dict(), "traces": traces, "trace_dir": str(trace_dir)}


def land_payload(job: RolloutJob, payload: dict[str, Any]) -> RolloutResult:
    """Write the returned traces into `job.trace_dir` and point the result's trace path there."""
    result = RolloutResult.from_dict(payload["result"])
    dest = Path(job.trace_dir)
    for rel, text in payload["traces"].items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    if result.trace_path:
        worker_dir = payload["trace_dir"]
        if result.trace_path.startswith(worker_dir + os.sep):
            result.trace_path = str(dest / os.path.relpath(result.trace_path, worker_dir))
    return result


class RayExecutor:
    """Runs rollouts as Ray tasks; connects to `config.ray_address` ("local"/"" start a local cluster)."""

    def __init__(self, config: ExecutorConfig) -> None:
        self.sandbox = resolve_sandbox(config)  # the driver's; each worker resolves its own
        try:
            import ray
        except ImportError as exc:
            raise ExecutorError(
                "executor.kind = \"ray\" needs the ray extra: pip install 'saddler[ray]' "
                '(or set executor.kind = "local")'
            ) from exc
        self.config = config
        self._ray: Any = ray
        self._owns_cluster = False
        if not ray.is_initialized():
            self._connect()
        self._remote: Any = ray.remote(num_cpus=1, max_retries=3)(run_remote_rollout)
        self._snapshots: dict[str, Any] = {}  # tree -> ObjectRef of its tarball

    def _connect(self) -> None:
        address = self.config.ray_address
        try:
            if address in ("", "local"):
                self._ray.init(num_cpus=self.config.workers, include_dashboard=False, log_to_driver=False)
            else:
                self._ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ExecutorError(
                f"cannot reach the Ray cluster at {address!r}: {exc}; start one with `ray start --head`, "
                'or set executor.ray_address = "local" to start a local one'
            ) from exc
        self._owns_cluster = True

    def _snapshot(self, job: RolloutJob) -> Any:
        if job.tree not in self._snapshots:
            self._snapshots[job.tree] = self._ray.put(snapshot_harness(Path(job.harness_dir)))
        return self._snapshots[job.tree]

    def run(self, jobs: Sequence[RolloutJob], on_result: ResultCallback) -> None:
        """Submit one task per distinct cache key; deliver each job's result as its task completes."""
        by_key: dict[str, list[RolloutJob]] = {}
        for i, job in enumerate(jobs):
            by_key.setdefault(job.cache_key or f"__job{i}", []).append(job)
        config_json = self.config.model_dump_json()
        pending = {
            self._remote.remote(group[0].to_json(), self._snapshot(group[0]), config_json): key
            for key, group in by_key.items()
        }
        try:
            while pending:
                done, _ = self._ray.wait(list(pending), num_returns=1)
                for ref in done:
                    key = pending.pop(ref)
                    for job in by_key[key]:
                        on_result(job, self._fetch(ref, job))
        finally:
            for ref in pending:
                self._ray.cancel(ref, force=True)

    def _fetch(self, ref: Any, job: RolloutJob) -> RolloutResult:
        try:
            return land_payload(job, self._ray.get(ref))
        except Exception as exc:  # the task failed even after Ray's retries: data, not a crash of the run
            tail = f"[saddler] ray task failed: {exc}"[-TAIL_BYTES:]
            return RolloutResult(job.task.id, 0.0, False, "infra_error", error_tail=tail)

    def close(self) -> None:
        """Shut down the cluster if this executor started it."""
        self._snapshots.clear()
        if self._owns_cluster and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_cluster = False
