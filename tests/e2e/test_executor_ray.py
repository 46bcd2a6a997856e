"""RayExecutor on a local 2-CPU cluster: same results as the local executor, traces in the run folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from repo_paths import REPO

from evodag.store import EvoDAG
from saddler.benchmark import Benchmark, load_benchmark
from saddler.executor.local import LocalExecutor
from saddler.harness.space import HarnessSpace
from saddler.ports import Executor
from saddler.run.evaluate import Evaluator

ray = pytest.importorskip(
    "ray", reason="the ray extra is not installed (pip install 'saddler[ray]')", exc_type=ModuleNotFoundError
)  # a broken ray install fails instead

from saddler.executor.ray_executor import RayExecutor, snapshot_harness, unpack_harness  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_unreachable_cluster_is_a_clear_error() -> None:
    """Runs first in this module, before the module's cluster exists ("auto" would find that one)."""
    assert not ray.is_initialized(), "this test must run before the module's cluster starts ('auto' would join it)"
    code = (
        "from saddler.config import ExecutorConfig\n"
        "from saddler.errors import ExecutorError\n"
        "from saddler.executor import make_executor\n"
        "try:\n"
        "    make_executor(ExecutorConfig.model_validate({'kind': 'ray', 'ray_address': 'auto'}))\n"
        "except ExecutorError as exc:\n"
        "    print(exc)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.startswith("cannot reach the Ray cluster at 'auto'"), proc.stdout + proc.stderr
    assert "ray start --head" in proc.stdout


@pytest.fixture(scope="module")
def cluster(tests_dir: str) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        # workers inherit the driver's environment; children find the test benchmarks through PYTHONPATH
        mp.setenv("PYTHONPATH", os.pathsep.join(p for p in (tests_dir, os.environ.get("PYTHONPATH", "")) if p))
        mp.setenv("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()


def _opsdesk() -> tuple[Benchmark, Path]:
    """The bundled opsdesk benchmark and template: a failure to load either is a test failure, never a skip."""
    template = REPO / "harness_templates" / "opsdesk"
    assert template.is_dir(), f"the bundled opsdesk template is missing: {template}"
    return load_benchmark("opsdesk"), template


def _fake(tmp: Path, make_harness: Callable[..., Path]) -> tuple[Benchmark, Path]:
    from fake_benchmarks import FakeBenchmark

    return FakeBenchmark(n_tasks=4), make_harness(tmp / "fake-template")


def _evaluate(root: Path, template: Path, bench: Benchmark, name: str, options: dict[str, Any], ex: Executor) -> Any:
    with EvoDAG(root / "evodag.db") as store:
        space = HarnessSpace.create(template, root / "harness", root / "worktrees")
        run_id = store.create_run({}, seed=0).id
        node = store.add_node(run_id, space.baseline_commit(), None, 0, "baseline", "baseline", "baseline")
        evaluator = Evaluator(store, run_id, space, bench, name, options, ex, root)
        tasks = bench.tasks("dev")[:6]
        rows = evaluator.evaluate(node, tasks, "dev", [1, 2])
        assert evaluator.executed_count == len(rows)
        return [(r.task_id, r.repetition, r.score, r.passed, r.disposition) for r in rows], rows


@pytest.mark.parametrize("which", ["fake", "opsdesk"])
def test_ray_matches_local(
    cluster: None,
    tmp_path: Path,
    which: str,
    monkeypatch: pytest.MonkeyPatch,
    tests_dir: str,
    executor_config: Callable[..., Any],
    make_harness: Callable[..., Path],
) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (tests_dir, os.environ.get("PYTHONPATH", "")) if p))
    if which == "opsdesk":
        (bench, template), name = _opsdesk(), "opsdesk"
    else:
        (bench, template), name = _fake(tmp_path, make_harness), "fake_benchmarks:FakeBenchmark"
    options = {"n_tasks": 4} if which == "fake" else {}
    config = executor_config(kind="ray", workers=2, timeout_s=60)
    ray_ex = RayExecutor(config)
    local_ex = LocalExecutor(executor_config(workers=2, timeout_s=60))
    remote, remote_rows = _evaluate(tmp_path / "ray", template, bench, name, options, ray_ex)
    local, _ = _evaluate(tmp_path / "local", template, bench, name, options, local_ex)
    assert remote == local
    assert len(remote) >= 4
    for row in remote_rows:  # traces written on the worker land in this run's folder (held-out splits apart)
        if row.trace_path:
            folder = "traces" if row.split == "train" else "heldout"
            assert row.trace_path.startswith(str(tmp_path / "ray" / folder)), row.trace_path
            assert Path(row.trace_path).is_file()
    assert any(r.trace_path for r in remote_rows)
    ray_ex.close()
    local_ex.close()
    assert ray.is_initialized()  # it did not own the cluster, so it left it running


def test_duplicate_keys_run_once_and_failures_are_data(
    cluster: None,
    tmp_path: Path,
    executor_config: Callable[..., Any],
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
) -> None:
    harness = make_harness(tmp_path / "h")
    ok = make_job(harness, tmp_path / "t", "ok-1", seed=4)
    jobs = [ok, ok, make_job(harness, tmp_path / "t", "crash-1"), make_job(harness, tmp_path / "t", "sleep-1")]
    got: list[tuple[str, str]] = []
    executor = RayExecutor(executor_config(kind="ray", timeout_s=1.0))
    submitted: list[str] = []
    remote = executor._remote

    class Spy:
        def remote(self, job_json: str, *args: Any) -> Any:
            submitted.append(job_json)
            return remote.remote(job_json, *args)

    executor._remote = Spy()
    executor.run(jobs, lambda job, result: got.append((job.task.id, result.disposition)))
    assert len(submitted) == 3  # the two jobs with one cache key were one task
    by_task: dict[str, list[str]] = {}
    for task_id, disposition in got:
        by_task.setdefault(task_id, []).append(disposition)
    assert by_task["crash-1"] == ["infra_error"]
    assert by_task["sleep-1"] == ["timeout"]
    assert len(by_task["ok-1"]) == 2 and by_task["ok-1"][0] == by_task["ok-1"][1]
    assert by_task["ok-1"][0] in ("success", "task_failure")


def test_snapshot_round_trip_skips_git(tmp_path: Path, make_harness: Callable[..., Path]) -> None:
    src = make_harness(tmp_path / "src", "p1")
    (src / "pkg").mkdir()
    (src / "pkg" / "tool.py").write_text("X = 1\n")
    (src / ".git").write_text("gitdir: elsewhere\n")
    dest = unpack_harness("tree1", snapshot_harness(src), tmp_path / "cache")
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == ["pkg", "pkg/tool.py", "policy.txt"]
    (dest / "policy.txt").write_text("changed")  # a second unpack of the same tree reuses the first
    assert unpack_harness("tree1", snapshot_harness(src), tmp_path / "cache") == dest
    assert (dest / "policy.txt").read_text() == "changed"
    shutil.rmtree(tmp_path / "cache")
