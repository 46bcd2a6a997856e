"""Evaluator: cached rollouts are never executed again (asserted from the store), rows land as they arrive."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from fake_benchmarks import SPEC, FakeBenchmark

from evodag.models import Node
from evodag.store import EvoDAG
from saddler.benchmark import Batch, BatchRollout, RolloutResult
from saddler.config import ExecutorConfig
from saddler.executor.base import RolloutJob
from saddler.executor.local import LocalExecutor
from saddler.harness.space import HarnessSpace
from saddler.ports import ResultCallback
from saddler.reporting.progress import NullProgress
from saddler.run.evaluate import BatchSettings, Evaluator


class World:
    """A run: real SQLite store, real git harness space, the fake benchmark, a local executor."""

    def __init__(self, root: Path, db_name: str = "evodag.db", cache: EvoDAG | None = None) -> None:
        template = root / "template"
        if not template.exists():
            template.mkdir(parents=True)
            (template / "policy.txt").write_text("baseline")
        self.root = root / db_name.replace(".db", "")
        self.store = EvoDAG(self.root / db_name)
        self.space = HarnessSpace.create(template, self.root / "harness", self.root / "worktrees")
        self.run_id = self.store.create_run({"benchmark": SPEC}, seed=0).id
        self.bench = FakeBenchmark(n_tasks=4)
        self.executor = LocalExecutor(ExecutorConfig.model_validate({"workers": 2, "timeout_s": 30}))
        self.progress = NullProgress()
        self.evaluator = Evaluator(
            self.store, self.run_id, self.space, self.bench, SPEC, {"n_tasks": 4}, self.executor,
            self.root, cache_store=cache, progress=self.progress,
        )  # fmt: skip
        self.baseline = self.store.add_node(
            self.run_id, self.space.baseline_commit(), None, 0, "baseline", "baseline", "baseline", status="baseline"
        )

    def candidate(self, policy: str) -> Node:
        wt = self.space.worktree(self.baseline.commit, f"cand-{policy}")
        (wt / "policy.txt").write_text(policy)
        sha = self.space.commit_worktree(wt, f"policy {policy}")
        assert sha is not None
        return self.store.add_node(self.run_id, sha, self.baseline.id, 1, "capability", "capability", "patch")


@pytest.fixture
def world(tmp_path: Path, fakes_importable: None) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.executor.close()
    w.store.close()


def test_evaluating_twice_executes_nothing_the_second_time(world: World) -> None:
    tasks = world.bench.tasks("train")
    first = world.evaluator.evaluate(world.baseline, tasks, "train", [11, 12])
    assert world.evaluator.executed_count == 8
    assert world.store.count_rollouts(world.run_id) == 8
    assert [(r.task_id, r.repetition, r.seed) for r in first] == [
        (t.id, rep, seed) for t in tasks for rep, seed in enumerate([11, 12])
    ]
    assert world.progress.meter.total == 8 and world.progress.meter.done == 8

    world.evaluator.executed_count = 0
    second = world.evaluator.evaluate(world.baseline, tasks, "train", [11, 12])
    assert world.evaluator.executed_count == 0
    assert world.store.count_rollouts(world.run_id) == 8
    assert [r.id for r in second] == [r.id for r in first]


def test_results_match_the_benchmark_in_process_and_traces_land_in_the_run(world: World) -> None:
    tasks = world.bench.tasks("dev")[:2]
    rows = world.evaluator.evaluate(world.baseline, tasks, "dev", [5])
    checkout = world.root / "baseline-files"
    world.space.export_tree(world.baseline.commit, checkout)
    for row, task in zip(rows, tasks, strict=True):
        (world.root / "scratch").mkdir(exist_ok=True)
        expected = world.bench.run(checkout, task, 5, world.root / "scratch")
        assert (row.score, row.passed, row.disposition) == (expected.score, expected.passed, expected.disposition)
        assert row.node_id == world.baseline.id and row.split == "dev" and row.task_group == task.group
        own = world.root / "heldout" / f"n{world.baseline.id}" / "dev" / f"{task.id}-r0-s5"
        assert row.trace_path == str(own / f"{task.id}-s5.json")
        assert Path(row.trace_path).is_file()


def test_same_tree_on_another_node_is_copied_not_executed(world: World) -> None:
    tasks = world.bench.tasks("train")
    base_rows = world.evaluator.evaluate(world.baseline, tasks, "train", [1])
    # a node whose commit has the baseline's tree (e.g. a revert back to it) shares its rollouts
    twin = world.store.add_node(world.run_id, world.baseline.commit, world.baseline.id, 2, "none", "revert", "revert")
    world.evaluator.executed_count = 0
    twin_rows = world.evaluator.evaluate(twin, tasks, "train", [1])
    assert world.evaluator.executed_count == 0
    assert [r.node_id for r in twin_rows] == [twin.id] * len(tasks)
    assert [(r.score, r.trace_path, r.cache_key) for r in twin_rows] == [
        (r.score, r.trace_path, r.cache_key) for r in base_rows
    ]
    assert all(r.cost == 0.0 for r in twin_rows)
    assert world.progress.notes == [f"n{twin.id} train: {len(tasks)} rollout(s) reused from the cache"]
    assert world.store.count_rollouts(world.run_id) == 2 * len(tasks)


def test_a_changed_harness_or_seed_executes_again(world: World) -> None:
    tasks = world.bench.tasks("train")[:2]
    world.evaluator.evaluate(world.baseline, tasks, "train", [1])
    cand = world.candidate("improved")
    world.evaluator.executed_count = 0
    cand_rows = world.evaluator.evaluate(cand, tasks, "train", [1])
    assert world.evaluator.executed_count == 2
    assert all(r.node_id == cand.id for r in cand_rows)
    world.evaluator.evaluate(world.baseline, tasks, "train", [2])
    assert world.evaluator.executed_count == 4


def test_shared_cache_is_reused_across_runs(tmp_path: Path, fakes_importable: None) -> None:
    with EvoDAG(tmp_path / "shared-cache.db") as cache:
        one = World(tmp_path, "one.db", cache=cache)
        tasks = one.bench.tasks("train")
        rows_one = one.evaluator.evaluate(one.baseline, tasks, "train", [3])
        assert one.evaluator.executed_count == len(tasks)
        two = World(tmp_path, "two.db", cache=cache)
        rows_two = two.evaluator.evaluate(two.baseline, tasks, "train", [3])
        assert two.evaluator.executed_count == 0
        assert two.store.count_rollouts(two.run_id) == len(tasks)
        assert [(r.score, r.passed, r.cache_key) for r in rows_two] == [
            (r.score, r.passed, r.cache_key) for r in rows_one
        ]
        for world in (one, two):
            world.executor.close()
            world.store.close()


def test_a_cached_rollout_whose_trace_is_gone_runs_again(tmp_path: Path, fakes_importable: None) -> None:
    """Diagnosis reads a rollout's trace: a row reused from a run whose folder was deleted since would hand the
    next run a failure without its symptoms (a different search from the same seed), so it is executed again."""
    with EvoDAG(tmp_path / "shared-cache.db") as cache:
        one = World(tmp_path, "one.db", cache=cache)
        tasks = one.bench.tasks("train")
        rows_one = one.evaluator.evaluate(one.baseline, tasks, "train", [3])
        one.executor.close()
        one.store.close()
        shutil.rmtree(one.root / "traces")
        two = World(tmp_path, "two.db", cache=cache)
        rows_two = two.evaluator.evaluate(two.baseline, tasks, "train", [3])
        assert two.evaluator.executed_count == len(tasks)
        assert all(r.trace_path and Path(r.trace_path).is_relative_to(two.root) for r in rows_two)
        assert all(Path(r.trace_path or "").is_file() for r in rows_two)
        assert [(r.score, r.passed, r.cache_key) for r in rows_two] == [
            (r.score, r.passed, r.cache_key) for r in rows_one
        ]
        three = World(tmp_path, "three.db", cache=cache)  # the cache now points at run two's traces, which exist
        three.evaluator.evaluate(three.baseline, tasks, "train", [3])
        assert three.evaluator.executed_count == 0
        for world in (two, three):
            world.executor.close()
            world.store.close()


class _Scripted:
    """An executor that returns prepared results and records which jobs it ran."""

    def __init__(self, outcome: dict[tuple[str, int], bool]) -> None:
        self.outcome = outcome
        self.ran: list[tuple[str, int]] = []

    def run(self, jobs: Sequence[RolloutJob], on_result: ResultCallback) -> None:
        for job in jobs:
            self.ran.append((job.task.id, job.repetition))
            ok = self.outcome[(job.task.id, job.repetition)]
            on_result(job, RolloutResult(job.task.id, float(ok), ok, "success" if ok else "task_failure"))
            on_result(job, RolloutResult(job.task.id, 0.5, False, "task_failure"))  # a Ray retry: ignored

    def close(self) -> None:
        return None


def test_majority_runs_a_third_repetition_only_on_disagreement(world: World) -> None:
    tasks = world.bench.tasks("train")[:3]
    a, b, c = (t.id for t in tasks)
    scripted = _Scripted({(a, 0): True, (a, 1): True, (b, 0): True, (b, 1): False, (b, 2): False,
                          (c, 0): False, (c, 1): False})  # fmt: skip
    world.evaluator.executor = scripted
    rows = world.evaluator.evaluate_majority(world.baseline, tasks, "train", [7, 8, 9])
    assert sorted(scripted.ran) == sorted([(a, 0), (a, 1), (b, 0), (b, 1), (c, 0), (c, 1), (b, 2)])
    assert [(r.task_id, r.repetition, r.seed, r.passed) for r in rows] == [
        (a, 0, 7, True), (a, 1, 8, True), (b, 0, 7, True), (b, 1, 8, False), (b, 2, 9, False),
        (c, 0, 7, False), (c, 1, 8, False),
    ]  # fmt: skip
    assert world.evaluator.executed_count == 7
    with pytest.raises(ValueError, match="needs 3 seeds"):
        world.evaluator.evaluate_majority(world.baseline, tasks, "train", [1, 2])


def test_unknown_disposition_is_stored_as_infra_error(world: World) -> None:
    task = world.bench.tasks("train")[0]

    class Odd(_Scripted):
        def run(self, jobs: Sequence[RolloutJob], on_result: ResultCallback) -> None:
            for job in jobs:
                on_result(job, RolloutResult(job.task.id, 1.7, True, "weird"))

    world.evaluator.executor = Odd({})
    [row] = world.evaluator.evaluate(world.baseline, [task], "train", [0])
    assert (row.disposition, row.passed, row.score) == ("infra_error", False, 0.0)  # its score counts nowhere
    assert "unknown disposition 'weird'" in row.error_tail


class BatchRunner(FakeBenchmark):
    """A `BatchBenchmark`: records each batch it is given; `die_after` results, then raises (a killed job)."""

    def __init__(self, die_after: int | None = None) -> None:
        super().__init__(n_tasks=4)
        self.batches: list[Batch] = []
        self.die_after = die_after

    def run_batch(self, batch: Batch, on_result: Callable[[BatchRollout, RolloutResult], None]) -> None:
        self.batches.append(batch)
        for n, rollout in enumerate(batch.rollouts):
            if self.die_after is not None and n == self.die_after:
                raise KeyboardInterrupt("the job was killed")
            assert Path(batch.harness_dir, "policy.txt").read_text() == "baseline"
            on_result(rollout, RolloutResult(rollout.task.id, 1.0, True, "success"))


def test_a_batch_benchmark_gets_every_miss_as_one_batch_and_a_killed_batch_redoes_only_the_missing(
    world: World,
) -> None:
    settings = BatchSettings(workers=3, env={"PATH": "/usr/bin"}, timeout_s=45.0)
    dying = BatchRunner(die_after=5)
    evaluator = Evaluator(world.store, world.run_id, world.space, dying, SPEC, {}, world.executor, world.root,
                          batch=settings)  # fmt: skip
    tasks = dying.tasks("train")
    with pytest.raises(KeyboardInterrupt):
        evaluator.evaluate(world.baseline, tasks, "train", [11, 12])
    [batch] = dying.batches
    assert (len(batch.rollouts), batch.workers, batch.env, batch.timeout_s) == (8, 3, {"PATH": "/usr/bin"}, 45.0)
    assert world.store.count_rollouts(world.run_id) == 5  # each result was stored as it landed
    assert {r.trace_dir.parent for r in batch.rollouts} == {world.root / "traces" / f"n{world.baseline.id}" / "train"}
    again = BatchRunner()
    resumed = Evaluator(world.store, world.run_id, world.space, again, SPEC, {}, world.executor, world.root,
                        batch=settings)  # fmt: skip
    rows = resumed.evaluate(world.baseline, tasks, "train", [11, 12])
    [rest] = again.batches
    done = {(r.task.id, r.seed) for r in batch.rollouts[:5]}
    assert {(r.task.id, r.seed) for r in rest.rollouts} == {(r.task.id, r.seed) for r in batch.rollouts} - done
    assert len(rows) == 8 and resumed.executed_count == 3


def test_a_held_out_batch_lands_in_the_held_out_folder(world: World) -> None:
    bench = BatchRunner()
    evaluator = Evaluator(world.store, world.run_id, world.space, bench, SPEC, {}, world.executor, world.root,
                          batch=BatchSettings(workers=1, env={}, timeout_s=10.0))  # fmt: skip
    evaluator.evaluate(world.baseline, bench.tasks("dev"), "dev", [5])
    [batch] = bench.batches
    held = world.root / "heldout" / f"n{world.baseline.id}" / "dev"
    assert batch.folder.parent == held and {r.trace_dir.parent for r in batch.rollouts} == {held}
    assert not (world.root / "traces").exists() or not list((world.root / "traces").rglob("dev"))
