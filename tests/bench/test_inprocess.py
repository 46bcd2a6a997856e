"""The strategies bench's in-process rollouts (bench/inprocess.py) give what saddler's isolated executor gives: the
same result fields and the same symptoms for the same (harness, task, seed), on both simulations, for a baseline,
a patched and a broken harness; and a harness file changed in place is loaded anew (simharness's code cache)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from repo_paths import REPO

from benchmarks.simharness import load_module
from saddler.benchmark import RolloutResult, Task, load_benchmark
from saddler.config import ExecutorConfig
from saddler.executor.base import RolloutJob
from saddler.executor.local import LocalExecutor

sys.path.insert(0, str(REPO / "bench"))
import inprocess

EVERY = 13  # every 13th task of each split: a few of every split, of several groups
PATCHED = {"opsdesk": ["loop_retry_backoff", "contacts_all_matches"], "repofix": ["view_range", "loop_submit_gate"]}


def _jobs(bench_name: str, harness: Path, traces: Path) -> list[RolloutJob]:
    bench = load_benchmark(bench_name)
    tasks: list[Task] = [t for split in ("train", "dev", "test") for t in bench.tasks(split)[::EVERY]]
    return [_job(bench_name, harness, task, seed, traces) for task in tasks for seed in (0, 1)]


def _job(bench_name: str, harness: Path, task: Task, seed: int, traces: Path) -> RolloutJob:
    key = f"{task.id}-{seed}"
    return RolloutJob(bench_name, {}, str(harness), "c0", "t0", task, task.split, seed, 0, str(traces / key), key)


def _run(executor: object, jobs: list[RolloutJob]) -> dict[str, RolloutResult]:
    out: dict[str, RolloutResult] = {}
    executor.run(jobs, lambda job, result: out.__setitem__(job.cache_key, result))  # type: ignore[attr-defined]
    executor.close()  # type: ignore[attr-defined]
    return out


def _harnesses(bench_name: str, root: Path, template_repo: Callable[[Path, Path], Path],
               apply_patches: Callable[[Path, dict[str, str], list[str]], list[str]]) -> list[Path]:  # fmt: skip
    bench = load_benchmark(bench_name)
    template = REPO / "harness_templates" / bench_name
    baseline = template_repo(template, root / "baseline")
    patched = template_repo(template, root / "patched")
    diffs = {p.id: p.diff for p in bench.patch_bank()}
    wanted = [p for p in PATCHED[bench_name] if p in diffs]
    assert wanted == PATCHED[bench_name], "the test's bank patches exist"
    assert apply_patches(patched, diffs, wanted) == []
    broken = template_repo(template, root / "broken")
    (broken / "loop.py").write_text((broken / "loop.py").read_text() + "\nraise RuntimeError('broken harness')\n")
    return [baseline, patched, broken]


@pytest.mark.parametrize("bench_name", ["opsdesk", "repofix"])
def test_in_process_rollouts_equal_isolated_ones(
    tmp_path: Path, bench_name: str, template_repo: Callable[[Path, Path], Path],
    apply_patches: Callable[[Path, dict[str, str], list[str]], list[str]],
) -> None:  # fmt: skip
    bench = load_benchmark(bench_name)
    for harness in _harnesses(bench_name, tmp_path / "h", template_repo, apply_patches):
        jobs = _jobs(bench_name, harness, tmp_path / "iso")
        isolated = _run(LocalExecutor(ExecutorConfig(workers=2)), jobs)
        here = _run(inprocess.InProcessExecutor(ExecutorConfig()), _jobs(bench_name, harness, tmp_path / "in"))
        assert sorted(isolated) == sorted(here) and len(here) == len(jobs) >= 18
        for key, a in isolated.items():
            b = here[key]
            fields = ("task_id", "score", "passed", "disposition", "cost", "llm_calls", "error_tail", "rationale",
                      "failure_file")  # fmt: skip
            assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields], (harness.name, key)
            assert bench.symptoms(a) == bench.symptoms(b), (harness.name, key)
            assert a.trace_path and b.trace_path
            assert Path(a.trace_path).relative_to(tmp_path / "iso") == Path(b.trace_path).relative_to(tmp_path / "in")
        if harness.name == "broken":
            assert all(r.disposition == "task_failure" and "broken harness" in r.error_tail for r in here.values())
        else:
            assert any(r.passed for r in here.values()) and any(not r.passed for r in here.values())


def test_in_process_refuses_a_benchmark_it_cannot_trust(tmp_path: Path) -> None:
    job = RolloutJob("command", {}, str(tmp_path), "c0", "t0", Task(id="t", group="g", split="train"), "train", 0, 0,
                     str(tmp_path / "trace"), "k")  # fmt: skip
    with pytest.raises(ValueError, match="offline simulations"):
        inprocess.InProcessExecutor(ExecutorConfig()).run([job], lambda job, result: None)


def test_a_harness_file_changed_in_place_is_loaded_anew(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    path = tmp_path / "tools" / "t.py"
    path.write_text("VALUE = 1\n")
    assert load_module(str(tmp_path), "tools/t.py", "test").VALUE == 1
    assert load_module(str(tmp_path), "tools/t.py", "test").VALUE == 1  # from the cache
    path.write_text("VALUE = 2\n")
    assert load_module(str(tmp_path), "tools/t.py", "test").VALUE == 2
    path.write_text("VALUE = (\n")
    with pytest.raises(SyntaxError) as failed:
        load_module(str(tmp_path), "tools/t.py", "test")
    assert getattr(failed.value, "__harness_file__", None) == "tools/t.py"
    assert not list(tmp_path.rglob("*.pyc"))
