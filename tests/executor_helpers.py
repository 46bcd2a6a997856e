"""Shared helpers for the executor tests: jobs against `fake_benchmarks.FakeBenchmark`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from saddler.benchmark import Task
from saddler.config import ExecutorConfig
from saddler.executor.base import RolloutJob, rollout_cache_key

TESTS_DIR = str(Path(__file__).parent)
SPEC = "fake_benchmarks:FakeBenchmark"


def child_can_import_fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rollout children find `fake_benchmarks` through the allow-listed PYTHONPATH."""
    current = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (TESTS_DIR, current) if p))


def make_harness(root: Path, policy: str = "baseline") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "policy.txt").write_text(policy)
    return root


def make_job(
    harness: Path, traces: Path, task_id: str, seed: int = 0, rep: int = 0, prompt: str = "", **extra: object
) -> RolloutJob:
    task = Task(id=task_id, group="g0", split="train", prompt=prompt)
    key = rollout_cache_key("tree-" + harness.name, task_id, "train", seed, rep, "fake-1", "fake-model")
    return RolloutJob(
        benchmark=SPEC, benchmark_options={}, harness_dir=str(harness), commit="c0", tree="tree-" + harness.name,
        task=task, split="train", seed=seed, repetition=rep, trace_dir=str(traces), cache_key=key, extra=dict(extra),
    )  # fmt: skip


def pid_alive(pid: int) -> bool:
    """True when `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def executor_config(**fields: Any) -> ExecutorConfig:
    """An `ExecutorConfig` validated from keyword fields (defaults for the rest)."""
    return ExecutorConfig.model_validate(fields)


SANDBOXES = ["bwrap", "landlock", "none"]


def sandbox_unavailable(mode: str) -> str | None:
    """Why sandbox `mode` cannot run on this machine (None when it can): tests of it skip with this reason."""
    from saddler.executor import landlock, sandbox

    if mode == "bwrap" and not sandbox.bwrap_status()[0]:
        return sandbox.bwrap_status()[1]
    if mode == "landlock" and landlock.abi_version() < 1:
        return "this kernel has no Landlock"
    return None


def require_sandbox(mode: str) -> None:
    """Skip the calling test when sandbox `mode` is not available here."""
    reason = sandbox_unavailable(mode)
    if reason:
        pytest.skip(reason)
