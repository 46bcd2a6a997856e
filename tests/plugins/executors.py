"""Fixtures for the executor tests: harness folders and rollout jobs against `fake_benchmarks.FakeBenchmark`,
executor configs, and the sandbox modes this machine can run."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_benchmarks import SPEC

from saddler.benchmark import Task
from saddler.config import ExecutorConfig
from saddler.executor.base import RolloutJob, rollout_cache_key

TESTS_DIR = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def tests_dir() -> str:
    """The tests folder (for PYTHONPATH): a rollout child finds `fake_benchmarks`, `trace_plugins`, … there."""
    return str(TESTS_DIR)


@pytest.fixture
def fakes_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rollout children find `fake_benchmarks` through the allow-listed PYTHONPATH (tests/ put first)."""
    current = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(TESTS_DIR), current) if p))


def _make_harness(root: Path, policy: str = "baseline") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "policy.txt").write_text(policy)
    return root


@pytest.fixture(scope="session")
def make_harness() -> Callable[..., Path]:
    """`make_harness(root, policy="baseline")`: a harness folder for the fake benchmark (its policy.txt)."""
    return _make_harness


def _make_job(
    harness: Path, traces: Path, task_id: str, seed: int = 0, rep: int = 0, prompt: str = "", **extra: object
) -> RolloutJob:
    task = Task(id=task_id, group="g0", split="train", prompt=prompt)
    key = rollout_cache_key("tree-" + harness.name, task_id, "train", seed, rep, "fake-1", "fake-model")
    return RolloutJob(
        benchmark=SPEC, benchmark_options={}, harness_dir=str(harness), commit="c0", tree="tree-" + harness.name,
        task=task, split="train", seed=seed, repetition=rep, trace_dir=str(traces), cache_key=key, extra=dict(extra),
    )  # fmt: skip


@pytest.fixture(scope="session")
def make_job() -> Callable[..., RolloutJob]:
    """`make_job(harness, traces, task_id, seed=0, rep=0, prompt="", **extra)`: a train rollout of the fake
    benchmark's task `task_id` (its id says what the fake does: ok-, hostile-, ghost-, …)."""
    return _make_job


@pytest.fixture(scope="session")
def executor_config() -> Callable[..., ExecutorConfig]:
    """`executor_config(**fields)`: an `ExecutorConfig` validated from keyword fields (defaults for the rest)."""

    def make(**fields: Any) -> ExecutorConfig:
        return ExecutorConfig.model_validate(fields)

    return make


def _sandbox_unavailable(mode: str) -> str | None:
    from saddler.executor import landlock, sandbox

    if mode == "bwrap" and not sandbox.bwrap_status()[0]:
        return sandbox.bwrap_status()[1]
    if mode == "landlock" and landlock.abi_version() < 1:
        return "this kernel has no Landlock"
    return None


@pytest.fixture(scope="session")
def sandbox_unavailable() -> Callable[[str], str | None]:
    """`sandbox_unavailable(mode)`: why sandbox `mode` cannot run on this machine (None when it can)."""
    return _sandbox_unavailable


@pytest.fixture(scope="session")
def require_sandbox() -> Callable[[str], None]:
    """`require_sandbox(mode)`: skip the calling test when this machine cannot run sandbox `mode` (bubblewrap not
    installed or not allowed to make namespaces, a kernel without Landlock): a tool genuinely absent."""

    def require(mode: str) -> None:
        reason = _sandbox_unavailable(mode)
        if reason:
            pytest.skip(reason)

    return require
