"""Evaluate a node on tasks: reuse every rollout already known, execute only the misses, store as they land.

A rollout's identity is `rollout_cache_key(tree, task, split, seed, repetition, benchmark fp, model fp)`.
For each (task, repetition) the `Evaluator` reuses, in order: the node's own row with that key; any row in
the run's store with that key (`find_rollout`); the run's own `rollout_cache` table (`saddler fork` fills it
with its source's other rollouts); the shared cross-run cache (`cache_store.cache_get`). A reused row is copied
for this node with cost 0 (nothing was spent) and the original trace path. Misses run through the executor;
each result is inserted the moment it arrives (a crash loses nothing finished). A row of another node or run whose
trace no longer exists (its run folder was deleted) is a miss too: diagnosis reads traces, and a reused failure without
its trace would change the search the same seed makes.

Every executed rollout gets its own trace folder, `traces/n<node>/train/<task>-r<rep>-s<seed>/` for train and
`heldout/n<node>/<split>/...` for dev and test (`rollout_trace_dir`; sessions never see `heldout/`), so parallel
rollouts never share a file. A result without a `trace_path` whose folder
holds files points at that folder: diagnosis then reads the rollout's own traces, whatever they are named.
A rollout that failed because the disk is full is not stored as the candidate's failure: it raises
`DiskFullError`, so the resumed run executes it again. Called from a task of the run's scheduler, the misses go
through its pool of sandboxes (`saddler.run.streaming`); called outside it (a command evaluating nodes), at once.
"""

from __future__ import annotations

import errno
import hashlib
import shutil
import tempfile
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evodag.models import Node, RolloutRow
from evodag.store import EvoDAG
from saddler.benchmark import Batch, BatchBenchmark, BatchRollout, Benchmark, RolloutResult, Task, complete
from saddler.errors import DiskFullError, ExecutorError
from saddler.executor.base import RolloutJob, rollout_cache_key
from saddler.executor.environment import private_base, private_prefix
from saddler.harness.space import HarnessSpace
from saddler.ports import Executor, Progress
from saddler.reporting.progress import NullProgress
from saddler.run.faults import fault_point
from saddler.run.folder import RunPaths
from saddler.run.rollout_rows import DISK_FULL, rollout_trace_dir, sanitize, with_trace
from saddler.run.streaming import Planned, PoolRuns, Race, decided_prefix, in_order
from saddler.schedule.hub import Future
from saddler.schedule.pool import RolloutPool

_COPIED = (
    "score", "passed", "disposition", "llm_calls", "duration_s", "trace_path", "error_tail", "rationale",
    "failure_file",
)  # fmt: skip


@dataclass(frozen=True)
class BatchSettings:
    """What a benchmark that runs whole batches (`BatchBenchmark`) gets from `[run.executor]`: how many rollouts
    at once, the scrubbed rollout environment, the time one rollout may take."""

    workers: int
    env: dict[str, str]
    timeout_s: float


class Evaluator(PoolRuns):
    """Evaluates nodes of one run; `executed_count` counts rollouts actually executed (not reused)."""

    def __init__(
        self,
        store: EvoDAG,
        run_id: int,
        space: HarnessSpace,
        benchmark: Benchmark,
        benchmark_name: str,
        benchmark_options: dict[str, Any],
        executor: Executor,
        run_dir: Path,
        cache_store: EvoDAG | None = None,
        progress: Progress | None = None,
        batch: BatchSettings | None = None,
    ) -> None:
        self.store, self.run_id, self.space = store, run_id, space
        self.benchmark_name, self.benchmark_options = benchmark_name, dict(benchmark_options)
        self.executor, self.run_dir = executor, Path(run_dir)
        self.cache_store = cache_store
        self.progress: Progress = progress or NullProgress()
        benchmark = complete(benchmark)  # a plugin with only tasks + run gets the defaults
        self.batch_runner = benchmark if batch is not None and isinstance(benchmark, BatchBenchmark) else None
        self.batch = batch
        self.bench_fp = benchmark.fingerprint()
        self.model_fp = benchmark.model_fingerprint()
        self.executed_count = 0
        self._snapshots: Path | None = None
        self.pool: RolloutPool | None = None  # the run's pool, once its scheduler runs (`saddler.run.pipeline`)
        self._inflight: dict[str, Future[RolloutRow | None]] = {}  # rollouts submitted, not landed: their rows

    def evaluate(
        self,
        node: Node,
        tasks: list[Task],
        split: str,
        seeds: list[int],
        first_repetition: int = 0,
        race: Race | None = None,
    ) -> list[RolloutRow]:
        """Rows for every (task, repetition `first_repetition` + r with seed `seeds[r]`), ordered by (task order,
        repetition); with `race`, only those that landed before it decided (the rest were not run)."""
        plan = [
            self._plan(node, task, split, first_repetition + i, seed) for task in tasks for i, seed in enumerate(seeds)
        ]
        return self._evaluate(node, split, plan, race)

    def evaluate_majority(self, node: Node, tasks: list[Task], split: str, seeds3: list[int]) -> list[RolloutRow]:
        """Noise rule "2 runs, a third on disagreement": repetitions 0 and 1 for every task, repetition 2
        (seed `seeds3[2]`) only for tasks whose first two runs disagree on `passed`."""
        if len(seeds3) < 3:
            raise ValueError(f"evaluate_majority needs 3 seeds, got {len(seeds3)}")
        first = self.evaluate(node, tasks, split, list(seeds3[:2]))
        passed: dict[str, set[bool]] = {}
        for row in first:
            passed.setdefault(row.task_id, set()).add(row.passed)
        split_tasks = [t for t in tasks if len(passed.get(t.id, ())) > 1]
        third = self._evaluate(node, split, [self._plan(node, t, split, 2, seeds3[2]) for t in split_tasks])
        order = {t.id: i for i, t in enumerate(tasks)}
        return sorted(first + third, key=lambda r: (order[r.task_id], r.repetition))

    def _plan(self, node: Node, task: Task, split: str, rep: int, seed: int) -> Planned:
        tree = self.space.tree_of(node.commit)  # remembered by the space: node commits are full shas
        key = rollout_cache_key(tree, task.id, split, seed, rep, self.bench_fp, self.model_fp)
        return Planned(task, rep, seed, key)

    def _evaluate(self, node: Node, split: str, plan: list[Planned], race: Race | None = None) -> list[RolloutRow]:
        own = {r.cache_key: r for r in self.store.rollouts(run_id=self.run_id, node_id=node.id, split=split)}
        known = self._known([item.key for item in plan if item.key not in own])
        rows: dict[str, RolloutRow] = {}
        misses: dict[str, Planned] = {}
        for item in plan:
            if item.key in rows or item.key in misses:
                continue
            row = own.get(item.key) or self._reuse(node, split, item, known.get(item.key))
            if row is not None:
                rows[item.key] = row
            else:
                misses[item.key] = item
        reused = len(rows) - sum(1 for r in rows.values() if r.cache_key in own)
        if reused:
            self.progress.note(f"n{node.id} {split}: {reused} rollout(s) reused from the cache")
        if misses and decided_prefix(plan, rows, race) is None:
            self._execute(node, split, list(misses.values()), rows, plan, race)
        decided = decided_prefix(plan, rows, race)
        return decided if decided is not None else in_order(plan, rows)

    def _known(self, keys: list[str]) -> dict[str, RolloutRow | dict[str, Any]]:
        """What is known of each key, in the order `_evaluate` trusts it: a stored rollout (any node, any run of this
        store), else this store's cache payload (a fork's copy of its source's other rollouts), else the shared
        cross-run cache's; keys known nowhere are absent. Three queries at most, whatever the number of keys."""
        known: dict[str, RolloutRow | dict[str, Any]] = dict(self.store.find_rollouts(keys))
        for cache in (self.store, self.cache_store):
            rest = [key for key in keys if key not in known]
            if cache is not None and rest:
                known.update(cache.cache_get_many(rest))
        return known

    def _reuse(
        self, node: Node, split: str, item: Planned, found: RolloutRow | dict[str, Any] | None
    ) -> RolloutRow | None:
        """Copy `found` (what `_known` says of the item's key) as this node's rollout, or None when nothing is."""
        if found is None:
            return None
        if isinstance(found, RolloutRow):
            fields = {name: getattr(found, name) for name in _COPIED}
        else:
            fields = {name: found[name] for name in _COPIED if name in found}
            fields.setdefault("trace_path", None)
        if fields["trace_path"] and not Path(fields["trace_path"]).exists():
            return None  # the run that wrote its trace was deleted since: diagnosis would read nothing, run it again
        return self.store.add_rollout(**self._identity(node, split, item), **fields, cost=0.0)

    def _identity(self, node: Node, split: str, item: Planned) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "node_id": node.id, "task_id": item.task.id, "split": split, "seed": item.seed,
            "repetition": item.repetition, "task_group": item.task.group, "cache_key": item.key,
        }  # fmt: skip

    def _snapshot(self, commit: str) -> str:
        """A read-only snapshot of `commit`'s files for the executor, which copies it for every rollout. Kept on
        tmpfs under this process's private prefix (swept if the optimizer dies), removed when the evaluator goes."""
        if self._snapshots is None:
            self._snapshots = Path(tempfile.mkdtemp(prefix=private_prefix() + "trees-", dir=private_base()))
            weakref.finalize(self, shutil.rmtree, self._snapshots, True)
        return str(self.space.snapshot(commit, self._snapshots))

    def _job(self, node: Node, split: str, item: Planned, harness_dir: str, tree: str) -> RolloutJob:
        return RolloutJob(
            benchmark=self.benchmark_name,
            benchmark_options=self.benchmark_options,
            harness_dir=harness_dir,
            commit=node.commit,
            tree=tree,
            task=item.task,
            split=split,
            seed=item.seed,
            repetition=item.repetition,
            trace_dir=str(self._trace_dir(node, split, item)),
            cache_key=item.key,
        )

    def _execute_now(self, node: Node, split: str, misses: list[Planned], rows: dict[str, RolloutRow]) -> None:
        """Run `misses` in one executor call (or one batch), outside the run's pool: a command evaluating nodes."""
        harness_dir = self._snapshot(node.commit)
        if self.batch_runner is not None:
            self._execute_batch(node, split, misses, rows, Path(harness_dir))
            return
        tree = self.space.tree_of(node.commit)
        by_key = {item.key: item for item in misses}
        jobs = [self._job(node, split, item, harness_dir, tree) for item in misses]

        def on_result(job: RolloutJob, result: RolloutResult) -> None:
            self._store(node, split, by_key[job.cache_key], result, rows)

        self.progress.start(len(jobs), f"n{node.id} {split}")
        try:
            self.executor.run(jobs, on_result)
        except ExecutorError as exc:
            if isinstance(exc.__cause__, OSError) and exc.__cause__.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFullError("a rollout", exc.__cause__.filename or self.run_dir / "traces") from exc
            raise
        finally:
            self.progress.finish()

    def _execute_batch(
        self, node: Node, split: str, misses: list[Planned], rows: dict[str, RolloutRow], harness_dir: Path
    ) -> None:
        """The misses as one batch of a `BatchBenchmark`, each result stored the moment it is handed on."""
        assert self.batch_runner is not None and self.batch is not None
        rollouts = {BatchRollout(m.task, m.seed, m.repetition, self._trace_dir(node, split, m)): m for m in misses}
        digest = hashlib.sha256("\n".join(sorted(m.key for m in misses)).encode()).hexdigest()[:12]
        folder = (
            RunPaths(self.run_dir).trace_root(split) / f"n{node.id}" / split / f"batch-{digest}"
        )  # dev, test: held out
        folder.mkdir(parents=True, exist_ok=True)
        batch = Batch(harness_dir, tuple(rollouts), folder, self.batch.workers, dict(self.batch.env),
                      self.batch.timeout_s)  # fmt: skip

        def on_result(rollout: BatchRollout, result: RolloutResult) -> None:
            self._store(node, split, rollouts[rollout], result, rows)

        self.progress.start(len(misses), f"n{node.id} {split}")
        try:
            self.batch_runner.run_batch(batch, on_result)
        finally:
            self.progress.finish()

    def run_as_batch(self, jobs: Sequence[RolloutJob], on_result: Callable[[RolloutJob, RolloutResult], None]) -> None:
        """`jobs` (one submission: one node, one split) as one batch of the `BatchBenchmark` (the pool's batch
        runner)."""
        assert self.batch_runner is not None and self.batch is not None
        first = jobs[0]
        by_rollout = {BatchRollout(j.task, j.seed, j.repetition, Path(j.trace_dir)): j for j in jobs}
        digest = hashlib.sha256("\n".join(sorted(j.cache_key for j in jobs)).encode()).hexdigest()[:12]
        folder = Path(first.trace_dir).parent / f"batch-{digest}"
        folder.mkdir(parents=True, exist_ok=True)
        batch = Batch(Path(first.harness_dir), tuple(by_rollout), folder, self.batch.workers, dict(self.batch.env),
                      self.batch.timeout_s)  # fmt: skip
        self.batch_runner.run_batch(batch, lambda rollout, result: on_result(by_rollout[rollout], result))

    def _trace_dir(self, node: Node, split: str, item: Planned) -> Path:
        return rollout_trace_dir(self.run_dir, node.id, split, item.task.id, item.repetition, item.seed)

    def _store(self, node: Node, split: str, item: Planned, result: RolloutResult, rows: dict[str, RolloutRow]) -> None:
        """Store one executed rollout's result as this node's row (and in the shared cache)."""
        if item.key in rows:  # a retried task delivered twice: the first result stands
            return
        trace_dir = self._trace_dir(node, split, item)
        fault_point("rollout", str(trace_dir))
        if result.disposition == "infra_error" and any(m in result.error_tail for m in DISK_FULL):
            raise DiskFullError(f"rollout {item.task.id}", str(trace_dir))  # the machine's fault, not the candidate's
        result = with_trace(sanitize(result), trace_dir)
        fields = {name: getattr(result, name) for name in _COPIED}
        rows[item.key] = self.store.add_rollout(**self._identity(node, split, item), **fields, cost=result.cost)
        if self.cache_store is not None:
            self.cache_store.cache_put(item.key, {**result.to_dict(), "task_group": item.task.group})
        self.executed_count += 1
        self.progress.advance()
